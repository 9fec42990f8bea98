"""acl.rt.set_stream_failure_mode and acl.rt.set_op_wait_timeout.

hicann/runtime: src/acl/aclrt_impl/stream.cpp, aclrtSetStreamFailureModeImpl;
src/runtime/api/api_c_stream.cc, rtStreamSetMode (207000 on a chip without the feature:
config/mini, the Ascend 310); src/runtime/api/impl/api_impl.cc, ApiImpl::StreamSetMode
(bit 0 counts; STOP back to CONTINUE: 207000). src/acl/aclrt_impl/event.cpp,
aclrtSetOpWaitTimeoutImpl; ApiImpl::SetOpWaitTimeOut.
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import expect_code

import acllab
from acllab import acl, kernel

pytestmark = pytest.mark.usefixtures("fresh")
H2D, D2H = 1, 2


@kernel(flops=lambda x, n: n, bytes=lambda x, n: 4 * n)
def bump(ctx, x, n):
    lo, hi = ctx.tile(n)
    ctx.store(x + 4 * lo, ctx.load(x + 4 * lo, np.float32, hi - lo) + 1)


def _setup(profile: str):
    acllab.configure(profile=profile)
    acl.init()
    acl.rt.set_device(0)


def _run(mode: int | None) -> tuple[int, bytes]:
    """A faulting kernel, then a memset of the buffer on the same stream."""
    n = 64
    x, _ = acl.rt.malloc(4 * n, 0)
    acl.rt.memset(x, 4 * n, 0, 4 * n)
    s, _ = acl.rt.create_stream()
    if mode is not None:
        assert acl.rt.set_stream_failure_mode(s, mode) == 0
    assert acl.rt.launch_kernel(bump, 1, (x, n + 64), s) == 0     # runs past its buffer
    assert acl.rt.memset_async(x, 4 * n, 0x7F, 4 * n, s) == 0
    with pytest.warns(acllab.AclWarning, match="507015"):
        code = acl.rt.synchronize_stream(s)
    out = bytearray(16)
    acl.rt.memcpy(acl.util.bytes_to_ptr(out), 16, x, 16, D2H)
    acl.rt.destroy_stream(s)
    return code, bytes(out)


def test_continue_runs_the_later_tasks_and_stop_skips_them():
    _setup("ascend910b")
    assert _run(None) == (507015, b"\x7f" * 16)                       # the default
    assert _run(acl.ACL_CONTINUE_ON_FAILURE) == (507015, b"\x7f" * 16)
    code, out = _run(acl.ACL_STOP_ON_FAILURE)
    assert code == 507015 and out != b"\x7f" * 16                     # the memset never ran


def test_mode_rules():
    _setup("ascend910b")
    s, _ = acl.rt.create_stream()
    assert acl.rt.set_stream_failure_mode(s, 0) == 0                  # the same: fine
    assert acl.rt.set_stream_failure_mode(s, 3) == 0                  # bit 0: STOP
    assert acl.rt.set_stream_failure_mode(s, 1) == 0
    with expect_code(207000):
        assert acl.rt.set_stream_failure_mode(s, 0) == 207000         # no way back
    assert acl.rt.set_stream_failure_mode(0, 1) == 0                  # the default stream
    with expect_code(107017):
        assert acl.rt.set_stream_failure_mode(0xBAD, 1) == 107017
    with pytest.raises(TypeError):
        acl.rt.set_stream_failure_mode(s, "1")
    acl.rt.destroy_stream(s)


def test_the_310_has_no_failure_modes():
    _setup("ascend310")
    with expect_code(207000):
        assert acl.rt.set_stream_failure_mode(0, 1) == 207000


@pytest.mark.parametrize("profile", ["ascend310", "ascend910b"])
def test_op_wait_timeout_is_kept(profile):
    _setup(profile)
    assert acl.rt.set_op_wait_timeout(30) == 0
    assert acllab.current_runtime().op_wait_timeout_s == 30
    assert acl.rt.set_op_wait_timeout(0) == 0
    with expect_code(100000):
        assert acl.rt.set_op_wait_timeout(-1) == 100000
    with expect_code(100000):
        assert acl.rt.set_op_wait_timeout(1 << 32) == 100000
