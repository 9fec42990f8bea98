"""acllab.kernels and acl.rt.launch_kernel: Python kernels on the simulated AI cores."""

import numpy as np
import pytest

import acllab
import acllab.analysis.sanitizer
from acllab import acl, kernel
from acllab.analysis import trace
from acllab.kernels import KERNEL_LAUNCH_GAP_NS, kernel_ns


@kernel(flops=lambda x, y, z, n: n, bytes=lambda x, y, z, n: 12 * n)
def vadd(ctx, x, y, z, n):
    lo, hi = ctx.tile(n)
    a = ctx.load(x + 4 * lo, np.float32, hi - lo)
    b = ctx.load(y + 4 * lo, np.float32, hi - lo)
    ctx.store(z + 4 * lo, a + b)


@kernel(flops=lambda p, n: 10**9, bytes=0)
def busy(ctx, p, n):
    """Pure compute: 1 GFLOP whatever the size."""


@pytest.fixture
def dev():
    acllab.reset()
    acl.init()
    acl.rt.set_device(0)
    n = 1 << 16
    ptrs = [acl.rt.malloc(4 * n, 0)[0] for _ in range(3)]
    a = np.arange(n, dtype=np.float32)
    b = np.full(n, 2.0, dtype=np.float32)
    keep = [a.tobytes(), b.tobytes()]
    for ptr, data in zip(ptrs, keep, strict=False):
        assert acl.rt.memcpy(ptr, 4 * n, acl.util.bytes_to_ptr(data), 4 * n, 1) == 0
    yield ptrs, n, a, b
    acllab.reset()


def _read(ptr, n):
    out = bytearray(4 * n)
    assert acl.rt.memcpy(acl.util.bytes_to_ptr(out), 4 * n, ptr, 4 * n, 2) == 0
    return np.frombuffer(bytes(out), np.float32)


@pytest.mark.parametrize("blocks", [1, 2, 7, 32])
def test_every_block_does_its_share(dev, blocks):
    (x, y, z), n, a, b = dev
    s, _ = acl.rt.create_stream()
    assert acl.rt.launch_kernel(vadd, blocks, (x, y, z, n), s) == 0
    assert acl.rt.synchronize_stream(s) == 0
    assert np.array_equal(_read(z, n), a + b)


def test_stores_land_when_the_kernel_ends(dev):
    (x, y, z), n, a, b = dev
    acl.rt.memset(z, 4 * n, 0, 4 * n)
    s, _ = acl.rt.create_stream()
    acl.rt.launch_kernel(vadd, 2, (x, y, z, n), s)
    before = _read(z, n)                   # a synchronous copy does not wait for streams
    acl.rt.synchronize_stream(s)
    assert not before.any() and np.array_equal(_read(z, n), a + b)


def test_time_follows_the_roofline(dev):
    (x, y, z), n, _, _ = dev
    s, _ = acl.rt.create_stream()
    acl.rt.launch_kernel(vadd, 2, (x, y, z, n), s)
    acl.rt.synchronize_stream(s)
    t = next(t for t in acllab.current_runtime().tasks if t.kind == "kernel")
    prof = acllab.current_runtime().profile
    # memory-bound: 12 n bytes at 51.2 GB/s, two blocks on two cores (one wave)
    expected = KERNEL_LAUNCH_GAP_NS + -(-12 * n // 2 * 1_000_000_000
                                        // (prof.memory_bandwidth_bps // 2))
    assert abs(t.duration_ns - expected) <= 1
    assert t.units == 2 and t.flops == n and t.nbytes == 12 * n


def test_blocks_run_in_waves():
    prof = acllab.hardware.PROFILES["ascend310"]
    one, _ = kernel_ns(busy, 2, 10**9, 0, prof)
    two, _ = kernel_ns(busy, 4, 10**9, 0, prof)      # 4 blocks on 2 cores: two waves
    assert two - KERNEL_LAUNCH_GAP_NS == pytest.approx((one - KERNEL_LAUNCH_GAP_NS), abs=2)
    single, used = kernel_ns(busy, 1, 10**9, 0, prof)  # one block: one core does it all
    assert used == 1
    assert single - KERNEL_LAUNCH_GAP_NS == pytest.approx(2 * (one - KERNEL_LAUNCH_GAP_NS), abs=2)


def test_a_small_kernel_runs_beside_another_streams_kernel(dev):
    (x, _, _), n, _, _ = dev
    s1, _ = acl.rt.create_stream()
    s2, _ = acl.rt.create_stream()
    acl.rt.launch_kernel(busy, 1, (x, n), s1)
    acl.rt.launch_kernel(busy, 1, (x, n), s2)
    acl.rt.synchronize_device()
    k = [t for t in acllab.current_runtime().tasks if t.kind == "kernel"]
    assert k[1].start_ns < k[0].end_ns           # one core each: they overlap
    r = acllab.current_runtime()
    assert trace.overlap_ns(r, "aicore", "aicore") > 0
    acl.rt.launch_kernel(busy, 2, (x, n), s1)
    acl.rt.launch_kernel(busy, 2, (x, n), s2)
    acl.rt.synchronize_device()
    k = [t for t in r.tasks if t.kind == "kernel"][2:]
    assert k[1].start_ns >= k[0].end_ns          # two cores each: the second waits


def test_a_faulting_kernel_is_an_aicore_exception(dev):
    (x, y, z), n, _, _ = dev
    s, _ = acl.rt.create_stream()
    assert acl.rt.launch_kernel(vadd, 4, (x, y, z, n + 64), s) == 0
    with pytest.warns(acllab.AclWarning, match="507015"):
        assert acl.rt.synchronize_stream(s) == 507015
    assert "past the end" in acl.get_recent_err_msg()
    assert acl.rt.synchronize_stream(s) == 0     # reported once
    assert acl.rt.launch_kernel(vadd, 4, (x, y, z, n), s) == 0
    assert acl.rt.synchronize_stream(s) == 0


def test_bad_launches(dev):
    (x, y, z), n, _, _ = dev
    s, _ = acl.rt.create_stream()
    with pytest.raises(TypeError):
        acl.rt.launch_kernel(lambda ctx: None, 1, (), s)
    with pytest.raises(TypeError):
        acl.rt.launch_kernel(vadd, 1, "args", s)
    with pytest.warns(acllab.AclWarning):
        assert acl.rt.launch_kernel(vadd, 0, (x, y, z, n), s) == 100000
    with pytest.warns(acllab.AclWarning):
        assert acl.rt.launch_kernel(vadd, 1, (x, y, z, n), 12345) == 107017
    assert len([t for t in acllab.current_runtime().tasks if t.kind == "kernel"]) == 0


def test_kernel_races_are_seen_by_the_sanitizer(dev):
    (x, y, z), n, _, _ = dev
    s1, _ = acl.rt.create_stream()
    s2, _ = acl.rt.create_stream()
    acl.rt.launch_kernel(vadd, 2, (x, y, z, n), s1)
    acl.rt.memcpy_async(z, 4 * n, x, 4 * n, 3, s2)   # writes z while the kernel writes it
    acl.rt.synchronize_device()
    kinds = [f.kind for f in acllab.analysis.sanitizer.analyze(acllab.current_runtime())]
    assert kinds == ["race"]
