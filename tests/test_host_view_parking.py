"""Watched ranges of quiet pinned memory that a join of another stream passes over are kept
for their own stream (Runtime._parked): a view the host takes later still sees them, and a
join of their stream releases them, so no join scans them again."""

from __future__ import annotations

import pytest

import acllab
from acllab import acl
from acllab.analysis import sanitizer

H2D, D2D = acl.ACL_MEMCPY_HOST_TO_DEVICE, acl.ACL_MEMCPY_DEVICE_TO_DEVICE
N = 1 << 20
pytestmark = pytest.mark.filterwarnings("ignore:acl.util.ptr_to_numpy is deprecated")
BIG = 64 << 20


@pytest.fixture
def setup():
    runtime = acllab.reset()
    acl.init()
    acl.rt.set_device(0)
    sa, _ = acl.rt.create_stream()
    sb, _ = acl.rt.create_stream()
    pinned, _ = acl.rt.malloc_host(N)
    dev, _ = acl.rt.malloc(N, acl.ACL_MEM_MALLOC_HUGE_FIRST)
    big = [acl.rt.malloc(BIG, acl.ACL_MEM_MALLOC_HUGE_FIRST)[0] for _ in range(2)]
    small = acl.rt.malloc(4096, acl.ACL_MEM_MALLOC_HUGE_FIRST)[0]
    yield runtime, sa, sb, pinned, dev, big, small
    acllab.session.restore_defaults()


def _queue_read_behind_a_long_copy(sa, sb, pinned, dev, big, small):
    assert acl.rt.memcpy_async(big[1], BIG, big[0], BIG, D2D, sa) == 0   # keeps sa busy
    assert acl.rt.memcpy_async(dev, N, pinned, N, H2D, sa) == 0          # reads pinned later
    assert acl.rt.memset_async(small, 4096, 1, 4096, sb) == 0
    assert acl.rt.synchronize_stream(sb) == 0          # a join of sb passes over sa's read


def test_a_view_taken_after_another_streams_join_still_sees_the_queued_read(setup):
    runtime, sa, sb, pinned, dev, big, small = setup
    _queue_read_behind_a_long_copy(sa, sb, pinned, dev, big, small)
    assert runtime.handles[sa] in runtime._parked                       # sa's read waits under sa
    view = acl.util.ptr_to_numpy(pinned, (N,), acl.NPY_UINT8)   # a zero-copy view
    view[0] = 7                                        # while sa's copy may still read it
    assert acl.rt.synchronize_stream(sa) == 0
    # the write through the view was seen by fingerprint (the range was watched)
    assert [op for op in runtime.host_ops if op[0] == "host_view_write"]
    kinds = [f.kind for f in sanitizer.analyze(runtime)]
    assert "host-write-while-read" in kinds


def test_a_join_of_the_stream_releases_its_parked_ranges(setup):
    runtime, sa, sb, pinned, dev, big, small = setup
    _queue_read_behind_a_long_copy(sa, sb, pinned, dev, big, small)
    assert acl.rt.synchronize_stream(sa) == 0
    assert runtime.handles[sa] not in runtime._parked
    view = acl.util.ptr_to_numpy(pinned, (N,), acl.NPY_UINT8)   # a zero-copy view
    view[0] = 7                                        # after the copy: no problem
    kinds = [f.kind for f in sanitizer.analyze(runtime)]
    assert "host-write-while-read" not in kinds


def test_many_joins_of_one_stream_leave_the_other_streams_ranges_parked_once(setup):
    runtime, sa, sb, pinned, dev, big, small = setup
    for _ in range(50):
        assert acl.rt.memcpy_async(dev, N, pinned, N, H2D, sa) == 0
        assert acl.rt.memset_async(small, 4096, 1, 4096, sb) == 0
        assert acl.rt.synchronize_stream(sb) == 0
    # every read of sa went to sa's parked deque once, none is left in the shared one
    assert len(runtime._quiet_views) == 0
    assert len(runtime._parked.get(runtime.handles[sa], ())) == 50
    assert acl.rt.synchronize_stream(sa) == 0
    assert runtime.handles[sa] not in runtime._parked
