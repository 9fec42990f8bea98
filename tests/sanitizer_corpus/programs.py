"""Planted bugs: small pyACL programs with one known bug each, and their fixed twins.

Each case is a pair of functions ``bug_<name>(acl)`` and ``fixed_<name>(acl)``. They take the
pyACL module (``acllab.acl`` in the tests; they only use pyACL's own API, so the real ``acl``
would do as well), open the device themselves and tear everything down in the documented
order (events, streams, memory, reset_device, finalize), unless the planted bug is a leak.

A bug function returns :func:`expect`: what a finding of the expected kind must name (streams,
buffers, text in the message) and which other kinds the bug legitimately causes as well (a
stale event wait, for instance, also lets two streams race). A fixed function returns None and
checks the data it computed, so a "fixed" program is known to do its job.

There is no model execution yet: a DEVICE_TO_DEVICE ``memcpy_async`` stands in for "the
execution reads the input buffer and writes an output".

:data:`CASES` lists every pair as ``(name, expected_kind, bug_fn, fixed_fn, description)``.
"""

from __future__ import annotations

import threading
from typing import NamedTuple

import numpy as np

__all__ = ["CASES", "Case", "HOST", "expect"]

KB = 1024
N = 64 * KB          # a typical buffer: 64 KB
BIG = 1024 * KB      # a copy long enough (about 0.1 ms) to be still running a few calls later
BATCHES = 4          # batches of the double-stream pipeline

# pyACL's enum values, spelled out as pyACL samples do
ACL_MEM_MALLOC_HUGE_FIRST = 0
H2H, H2D, D2H, D2D = 0, 1, 2, 3      # ACL_MEMCPY_HOST_TO_HOST ... DEVICE_TO_DEVICE
ACL_EVENT_SYNC = 0x1
ACL_STREAM_STATUS_COMPLETE = 0
NPY_UINT8 = 2                        # numpy's type number for uint8 (ptr_to_numpy)
ERR_INVALID = 107000                 # ACL_ERROR_RT_PARAM_INVALID

HOST = "host"   # in expect(streams=...): a blocking call (a task that runs on no stream)


class Case(NamedTuple):
    name: str
    kind: str
    bug: object
    fixed: object
    description: str


def expect(*, streams=(), buffers=(), text=(), also=()) -> dict:
    """What the expected finding must name: stream handles as passed to pyACL (0 is the
    default stream, HOST a blocking call), buffer addresses, substrings of the message; and
    ``also``, the other finding kinds this bug legitimately causes."""
    return {"streams": list(streams), "buffers": list(buffers), "text": list(text),
            "also": set(also)}


# ---------------------------------------------------------------------------------------
# helpers (plain pyACL)
# ---------------------------------------------------------------------------------------

def ok(acl, result):
    """The out-value(s) of a call that must succeed; AssertionError with ACL's reason if not."""
    ret = result[-1] if isinstance(result, tuple) else result
    if ret != 0:
        raise AssertionError(f"a pyACL call returned {ret}: {acl.get_recent_err_msg()}")
    if isinstance(result, tuple):
        return result[0] if len(result) == 2 else result[:-1]
    return None


def pattern(n: int, seed: int) -> bytes:
    """n recognisable bytes."""
    return ((np.arange(n, dtype=np.int64) * 7 + seed) % 251).astype(np.uint8).tobytes()


def start(acl, streams: int = 1) -> list[int]:
    """init, set_device(0) and ``streams`` new streams."""
    ok(acl, acl.init())
    ok(acl, acl.rt.set_device(0))
    return [ok(acl, acl.rt.create_stream()) for _ in range(streams)]


def stop(acl, streams=(), events=(), dev=(), host=(), reset=True) -> None:
    """Wait for the device, release everything in the documented order, finalise."""
    ok(acl, acl.rt.synchronize_device())
    for ev in events:
        ok(acl, acl.rt.destroy_event(ev))
    for s in streams:
        ok(acl, acl.rt.destroy_stream(s))
    for p in dev:
        ok(acl, acl.rt.free(p))
    for p in host:
        ok(acl, acl.rt.free_host(p))
    if reset:
        ok(acl, acl.rt.reset_device(0))
    ok(acl, acl.finalize())


def dmalloc(acl, n: int = N) -> int:
    return ok(acl, acl.rt.malloc(n, ACL_MEM_MALLOC_HUGE_FIRST))


def hmalloc(acl, n: int = N, seed: int | None = None) -> int:
    """Pinned host memory, filled with pattern(n, seed) by a blocking copy if seed is given."""
    ptr = ok(acl, acl.rt.malloc_host(n))
    if seed is not None:
        data = pattern(n, seed)
        ok(acl, acl.rt.memcpy(ptr, n, acl.util.bytes_to_ptr(data), n, H2H))
    return ptr


def upload(acl, dev: int, host: int, n: int = N) -> None:
    """A blocking host-to-device copy: the buffer holds data before any stream starts."""
    ok(acl, acl.rt.memcpy(dev, n, host, n, H2D))


def read(acl, host: int, n: int = N) -> bytes:
    return acl.util.ptr_to_bytes(host, n)


# ---------------------------------------------------------------------------------------
# (a) the host touches memory that a pending copy still writes or reads
# ---------------------------------------------------------------------------------------

def bug_read_before_sync(acl):
    (s,) = start(acl)
    host_in, out = hmalloc(acl, seed=1), hmalloc(acl)
    dev = dmalloc(acl)
    upload(acl, dev, host_in)
    ok(acl, acl.rt.memcpy_async(out, N, dev, N, D2H, s))
    read(acl, out)                     # BUG: the copy may not have written it yet
    stop(acl, [s], dev=[dev], host=[host_in, out])
    return expect(streams=[s], buffers=[out])


def fixed_read_before_sync(acl):
    (s,) = start(acl)
    host_in, out = hmalloc(acl, seed=1), hmalloc(acl)
    dev = dmalloc(acl)
    upload(acl, dev, host_in)
    ok(acl, acl.rt.memcpy_async(out, N, dev, N, D2H, s))
    ok(acl, acl.rt.synchronize_stream(s))
    assert read(acl, out) == pattern(N, 1)
    stop(acl, [s], dev=[dev], host=[host_in, out])


def bug_read_after_syncing_other_stream(acl):
    s1, s2 = start(acl, 2)
    host_in, out = hmalloc(acl, seed=2), hmalloc(acl)
    dev, scratch = dmalloc(acl), dmalloc(acl)
    upload(acl, dev, host_in)
    ok(acl, acl.rt.memcpy_async(out, N, dev, N, D2H, s1))
    ok(acl, acl.rt.memset_async(scratch, N, 0, N, s2))
    ok(acl, acl.rt.synchronize_stream(s2))   # BUG: the copy runs on s1
    read(acl, out)
    stop(acl, [s1, s2], dev=[dev, scratch], host=[host_in, out])
    return expect(streams=[s1], buffers=[out])


def fixed_read_after_syncing_other_stream(acl):
    s1, s2 = start(acl, 2)
    host_in, out = hmalloc(acl, seed=2), hmalloc(acl)
    dev, scratch = dmalloc(acl), dmalloc(acl)
    upload(acl, dev, host_in)
    ok(acl, acl.rt.memcpy_async(out, N, dev, N, D2H, s1))
    ok(acl, acl.rt.memset_async(scratch, N, 0, N, s2))
    ok(acl, acl.rt.synchronize_stream(s1))
    assert read(acl, out) == pattern(N, 2)
    stop(acl, [s1, s2], dev=[dev, scratch], host=[host_in, out])


def bug_event_recorded_before_copy(acl):
    (s,) = start(acl)
    done = ok(acl, acl.rt.create_event())
    host_in, out = hmalloc(acl, seed=3), hmalloc(acl)
    dev = dmalloc(acl)
    upload(acl, dev, host_in)
    ok(acl, acl.rt.record_event(done, s))    # BUG: recorded before the copy it should cover
    ok(acl, acl.rt.memcpy_async(out, N, dev, N, D2H, s))
    ok(acl, acl.rt.synchronize_event(done))
    read(acl, out)
    stop(acl, [s], [done], dev=[dev], host=[host_in, out])
    return expect(streams=[s], buffers=[out])


def fixed_event_recorded_before_copy(acl):
    (s,) = start(acl)
    done = ok(acl, acl.rt.create_event())
    host_in, out = hmalloc(acl, seed=3), hmalloc(acl)
    dev = dmalloc(acl)
    upload(acl, dev, host_in)
    ok(acl, acl.rt.memcpy_async(out, N, dev, N, D2H, s))
    ok(acl, acl.rt.record_event(done, s))
    ok(acl, acl.rt.synchronize_event(done))
    assert read(acl, out) == pattern(N, 3)
    stop(acl, [s], [done], dev=[dev], host=[host_in, out])


def bug_result_view_before_sync(acl):
    (s,) = start(acl)
    host_in, out = hmalloc(acl, seed=4), hmalloc(acl)
    dev = dmalloc(acl)
    upload(acl, dev, host_in)
    ok(acl, acl.rt.memcpy_async(out, N, dev, N, D2H, s))
    view = acl.util.ptr_to_numpy(out, (N,), NPY_UINT8)   # BUG: a view before the copy is done
    ok(acl, acl.rt.synchronize_stream(s))
    int(view[0])
    stop(acl, [s], dev=[dev], host=[host_in, out])
    return expect(streams=[s], buffers=[out])


def fixed_result_view_before_sync(acl):
    (s,) = start(acl)
    host_in, out = hmalloc(acl, seed=4), hmalloc(acl)
    dev = dmalloc(acl)
    upload(acl, dev, host_in)
    ok(acl, acl.rt.memcpy_async(out, N, dev, N, D2H, s))
    ok(acl, acl.rt.synchronize_stream(s))
    view = acl.util.ptr_to_numpy(out, (N,), NPY_UINT8)
    assert view.tobytes() == pattern(N, 4)
    stop(acl, [s], dev=[dev], host=[host_in, out])


def bug_refill_input_while_copying(acl):
    (s,) = start(acl)
    host_in = hmalloc(acl, seed=5)
    dev = dmalloc(acl)
    ok(acl, acl.rt.memcpy_async(dev, N, host_in, N, H2D, s))
    acl.util.ptr_to_numpy(host_in, (N,), NPY_UINT8)[:] = 7   # BUG: the copy may still read it
    ok(acl, acl.rt.synchronize_stream(s))
    stop(acl, [s], dev=[dev], host=[host_in])
    return expect(streams=[s], buffers=[host_in])


def fixed_refill_input_while_copying(acl):
    (s,) = start(acl)
    host_in, out = hmalloc(acl, seed=5), hmalloc(acl)
    dev = dmalloc(acl)
    ok(acl, acl.rt.memcpy_async(dev, N, host_in, N, H2D, s))
    assert read(acl, host_in, 64) == pattern(64, 5)   # reading while the copy reads is fine
    ok(acl, acl.rt.synchronize_stream(s))
    acl.util.ptr_to_numpy(host_in, (N,), NPY_UINT8)[:] = 7
    ok(acl, acl.rt.memcpy_async(out, N, dev, N, D2H, s))
    ok(acl, acl.rt.synchronize_stream(s))
    assert read(acl, out) == pattern(N, 5)
    stop(acl, [s], dev=[dev], host=[host_in, out])


def bug_refill_after_syncing_other_stream(acl):
    (s1,) = start(acl)
    host_in = hmalloc(acl, seed=6)
    dev, scratch = dmalloc(acl), dmalloc(acl)
    ok(acl, acl.rt.memcpy_async(dev, N, host_in, N, H2D, 0))     # on the default stream
    ok(acl, acl.rt.memset_async(scratch, N, 0, N, s1))
    ok(acl, acl.rt.synchronize_stream(s1))    # BUG: the copy runs on the default stream
    acl.util.ptr_to_numpy(host_in, (N,), NPY_UINT8)[:] = 9
    stop(acl, [s1], dev=[dev, scratch], host=[host_in])
    return expect(streams=[0], buffers=[host_in])


def fixed_refill_after_syncing_other_stream(acl):
    (s1,) = start(acl)
    host_in = hmalloc(acl, seed=6)
    dev, scratch = dmalloc(acl), dmalloc(acl)
    ok(acl, acl.rt.memcpy_async(dev, N, host_in, N, H2D, 0))
    ok(acl, acl.rt.memset_async(scratch, N, 0, N, s1))
    ok(acl, acl.rt.synchronize_stream(0))
    acl.util.ptr_to_numpy(host_in, (N,), NPY_UINT8)[:] = 9
    stop(acl, [s1], dev=[dev, scratch], host=[host_in])


def bug_read_before_synchronize_device(acl):
    (s,) = start(acl)
    host_in, out, big_host = hmalloc(acl, seed=7), hmalloc(acl), hmalloc(acl, BIG, seed=8)
    dev, big = dmalloc(acl), dmalloc(acl, BIG)
    upload(acl, dev, host_in)
    ok(acl, acl.rt.memcpy_async(out, N, dev, N, D2H, s))
    upload(acl, big, big_host, BIG)           # the host is busy for a while
    read(acl, out)                            # BUG: before synchronize_device
    ok(acl, acl.rt.synchronize_device())
    stop(acl, [s], dev=[dev, big], host=[host_in, out, big_host])
    return expect(streams=[s], buffers=[out])


def fixed_read_before_synchronize_device(acl):
    (s,) = start(acl)
    host_in, out, big_host = hmalloc(acl, seed=7), hmalloc(acl), hmalloc(acl, BIG, seed=8)
    dev, big = dmalloc(acl), dmalloc(acl, BIG)
    upload(acl, dev, host_in)
    ok(acl, acl.rt.memcpy_async(out, N, dev, N, D2H, s))
    upload(acl, big, big_host, BIG)           # the copy on s finishes meanwhile
    ok(acl, acl.rt.synchronize_device())
    assert read(acl, out) == pattern(N, 7)
    stop(acl, [s], dev=[dev, big], host=[host_in, out, big_host])


def _callback_program(acl, callback_first: bool):
    """Post-processing in a host callback (launch_callback), reported to this thread."""
    (s,) = start(acl)
    host_in, out = hmalloc(acl, seed=8), hmalloc(acl)
    dev = dmalloc(acl)
    upload(acl, dev, host_in)
    seen = []
    me = threading.get_ident()
    ok(acl, acl.rt.subscribe_report(me, s))
    if callback_first:   # the bug: the callback is queued before the copy it reads
        ok(acl, acl.rt.launch_callback(lambda _: seen.append(read(acl, out)), None, 0, s))
    ok(acl, acl.rt.memcpy_async(out, N, dev, N, D2H, s))
    if not callback_first:
        ok(acl, acl.rt.launch_callback(lambda _: seen.append(read(acl, out)), None, 0, s))
    ok(acl, acl.rt.process_report(1000))
    ok(acl, acl.rt.synchronize_stream(s))
    ok(acl, acl.rt.unsubscribe_report(me, s))
    stop(acl, [s], dev=[dev], host=[host_in, out])
    return seen, s, out


def bug_callback_reads_before_copy(acl):
    # BUG: the callback runs when the stream reaches it, before the copy behind it
    _seen, s, out = _callback_program(acl, callback_first=True)
    return expect(streams=[s], buffers=[out])


def fixed_callback_reads_before_copy(acl):
    seen, _s, _out = _callback_program(acl, callback_first=False)
    assert seen == [pattern(N, 8)]


# ---------------------------------------------------------------------------------------
# (b) two streams touch overlapping device memory with no event between them
# ---------------------------------------------------------------------------------------

def bug_race_copy_then_execute(acl):
    s_copy, s_exec = start(acl, 2)
    host_in, out = hmalloc(acl, seed=10), hmalloc(acl)
    dev_in, dev_out = dmalloc(acl), dmalloc(acl)
    ok(acl, acl.rt.memcpy_async(dev_in, N, host_in, N, H2D, s_copy))
    ok(acl, acl.rt.memcpy_async(dev_out, N, dev_in, N, D2D, s_exec))   # BUG: no event
    ok(acl, acl.rt.memcpy_async(out, N, dev_out, N, D2H, s_exec))
    ok(acl, acl.rt.synchronize_stream(s_exec))
    stop(acl, [s_copy, s_exec], dev=[dev_in, dev_out], host=[host_in, out])
    return expect(streams=[s_copy, s_exec], buffers=[dev_in])


def fixed_race_copy_then_execute(acl):
    s_copy, s_exec = start(acl, 2)
    copied = ok(acl, acl.rt.create_event())
    host_in, out = hmalloc(acl, seed=10), hmalloc(acl)
    dev_in, dev_out = dmalloc(acl), dmalloc(acl)
    ok(acl, acl.rt.memcpy_async(dev_in, N, host_in, N, H2D, s_copy))
    ok(acl, acl.rt.record_event(copied, s_copy))
    ok(acl, acl.rt.stream_wait_event(s_exec, copied))
    ok(acl, acl.rt.memcpy_async(dev_out, N, dev_in, N, D2D, s_exec))
    ok(acl, acl.rt.memcpy_async(out, N, dev_out, N, D2H, s_exec))
    ok(acl, acl.rt.synchronize_stream(s_exec))
    assert read(acl, out) == pattern(N, 10)
    stop(acl, [s_copy, s_exec], [copied], dev=[dev_in, dev_out], host=[host_in, out])


def bug_race_write_write(acl):
    s1, s2 = start(acl, 2)
    host_in = hmalloc(acl, seed=11)
    buf = dmalloc(acl, 2 * N)
    ok(acl, acl.rt.memset_async(buf, 2 * N, 0, N, s1))                    # writes [0, N)
    ok(acl, acl.rt.memcpy_async(buf + N // 2, N, host_in, N, H2D, s2))    # BUG: [N/2, 3N/2)
    stop(acl, [s1, s2], dev=[buf], host=[host_in])
    return expect(streams=[s1, s2], buffers=[buf])


def fixed_race_write_write(acl):
    s1, s2 = start(acl, 2)
    cleared = ok(acl, acl.rt.create_event())
    host_in, out = hmalloc(acl, seed=11), hmalloc(acl, 2 * N)
    buf = dmalloc(acl, 2 * N)
    ok(acl, acl.rt.memset_async(buf, 2 * N, 0, 2 * N, s1))
    ok(acl, acl.rt.record_event(cleared, s1))
    ok(acl, acl.rt.stream_wait_event(s2, cleared))
    ok(acl, acl.rt.memcpy_async(buf + N // 2, N, host_in, N, H2D, s2))
    ok(acl, acl.rt.memcpy_async(out, 2 * N, buf, 2 * N, D2H, s2))
    ok(acl, acl.rt.synchronize_stream(s2))
    half = bytes(N // 2)
    assert read(acl, out, 2 * N) == half + pattern(N, 11) + half
    stop(acl, [s1, s2], [cleared], dev=[buf], host=[host_in, out])


def bug_race_default_stream(acl):
    (s1,) = start(acl)
    host_in = hmalloc(acl, seed=12)
    dev, dev_out = dmalloc(acl), dmalloc(acl)
    ok(acl, acl.rt.memcpy_async(dev, N, host_in, N, H2D, 0))
    ok(acl, acl.rt.memcpy_async(dev_out, N, dev, N, D2D, s1))   # BUG: no implicit sync with 0
    stop(acl, [s1], dev=[dev, dev_out], host=[host_in])
    return expect(streams=[0, s1], buffers=[dev])


def fixed_race_default_stream(acl):
    (s1,) = start(acl)
    copied = ok(acl, acl.rt.create_event())
    host_in, out = hmalloc(acl, seed=12), hmalloc(acl)
    dev, dev_out = dmalloc(acl), dmalloc(acl)
    ok(acl, acl.rt.memcpy_async(dev, N, host_in, N, H2D, 0))
    ok(acl, acl.rt.record_event(copied, 0))
    ok(acl, acl.rt.stream_wait_event(s1, copied))
    ok(acl, acl.rt.memcpy_async(dev_out, N, dev, N, D2D, s1))
    ok(acl, acl.rt.memcpy_async(out, N, dev_out, N, D2H, s1))
    ok(acl, acl.rt.synchronize_stream(s1))
    assert read(acl, out) == pattern(N, 12)
    stop(acl, [s1], [copied], dev=[dev, dev_out], host=[host_in, out])


def bug_race_write_after_read(acl):
    s1, s2 = start(acl, 2)
    host_in = hmalloc(acl, seed=13)
    a, b = dmalloc(acl), dmalloc(acl)
    upload(acl, a, host_in)
    ok(acl, acl.rt.memcpy_async(b, N, a, N, D2D, s1))        # s1 reads a
    ok(acl, acl.rt.memset_async(a, N, 0, N, s2))              # BUG: s2 overwrites a meanwhile
    stop(acl, [s1, s2], dev=[a, b], host=[host_in])
    return expect(streams=[s1, s2], buffers=[a])


def fixed_race_write_after_read(acl):
    s1, s2 = start(acl, 2)
    read_done = ok(acl, acl.rt.create_event())
    host_in, out = hmalloc(acl, seed=13), hmalloc(acl)
    a, b = dmalloc(acl), dmalloc(acl)
    upload(acl, a, host_in)
    ok(acl, acl.rt.memcpy_async(b, N, a, N, D2D, s1))
    ok(acl, acl.rt.record_event(read_done, s1))
    ok(acl, acl.rt.stream_wait_event(s2, read_done))
    ok(acl, acl.rt.memset_async(a, N, 0, N, s2))
    ok(acl, acl.rt.memcpy_async(out, N, b, N, D2H, s1))
    ok(acl, acl.rt.synchronize_stream(s1))
    assert read(acl, out) == pattern(N, 13)
    stop(acl, [s1, s2], [read_done], dev=[a, b], host=[host_in, out])


def bug_race_partial_overlap(acl):
    s1, s2 = start(acl, 2)
    buf, dev_out = dmalloc(acl, 2 * N), dmalloc(acl)
    ok(acl, acl.rt.memset(buf, 2 * N, 1, 2 * N))                      # blocking: all of it
    ok(acl, acl.rt.memset_async(buf, 2 * N, 0, N, s1))                 # s1 writes [0, N)
    ok(acl, acl.rt.memcpy_async(dev_out, N, buf + N // 2, N, D2D, s2))  # BUG: reads [N/2, 3N/2)
    stop(acl, [s1, s2], dev=[buf, dev_out])
    return expect(streams=[s1, s2], buffers=[buf])


def fixed_race_partial_overlap(acl):
    s1, s2 = start(acl, 2)
    out = hmalloc(acl)
    buf, dev_out = dmalloc(acl, 2 * N), dmalloc(acl)
    ok(acl, acl.rt.memset(buf, 2 * N, 1, 2 * N))
    ok(acl, acl.rt.memset_async(buf, 2 * N, 0, N, s1))                 # writes [0, N)
    ok(acl, acl.rt.memcpy_async(dev_out, N, buf + N, N, D2D, s2))      # reads [N, 2N): disjoint
    ok(acl, acl.rt.memcpy_async(out, N, dev_out, N, D2H, s2))
    ok(acl, acl.rt.synchronize_stream(s2))
    assert read(acl, out) == bytes([1]) * N
    stop(acl, [s1, s2], dev=[buf, dev_out], host=[out])


def bug_race_event_recorded_too_early(acl):
    s_copy, s_exec = start(acl, 2)
    copied = ok(acl, acl.rt.create_event())
    host_in = hmalloc(acl, seed=14)
    dev_in, dev_out = dmalloc(acl), dmalloc(acl)
    ok(acl, acl.rt.record_event(copied, s_copy))       # BUG: before the copy, not after it
    ok(acl, acl.rt.memcpy_async(dev_in, N, host_in, N, H2D, s_copy))
    ok(acl, acl.rt.stream_wait_event(s_exec, copied))
    ok(acl, acl.rt.memcpy_async(dev_out, N, dev_in, N, D2D, s_exec))
    stop(acl, [s_copy, s_exec], [copied], dev=[dev_in, dev_out], host=[host_in])
    return expect(streams=[s_copy, s_exec], buffers=[dev_in])


def fixed_race_event_recorded_too_early(acl):
    s_copy, s_exec = start(acl, 2)
    copied = ok(acl, acl.rt.create_event())
    host_in, out = hmalloc(acl, seed=14), hmalloc(acl)
    dev_in, dev_out = dmalloc(acl), dmalloc(acl)
    ok(acl, acl.rt.memcpy_async(dev_in, N, host_in, N, H2D, s_copy))
    ok(acl, acl.rt.record_event(copied, s_copy))
    ok(acl, acl.rt.stream_wait_event(s_exec, copied))
    ok(acl, acl.rt.memcpy_async(dev_out, N, dev_in, N, D2D, s_exec))
    ok(acl, acl.rt.memcpy_async(out, N, dev_out, N, D2H, s_exec))
    ok(acl, acl.rt.synchronize_stream(s_exec))
    assert read(acl, out) == pattern(N, 14)
    stop(acl, [s_copy, s_exec], [copied], dev=[dev_in, dev_out], host=[host_in, out])


def bug_race_wait_on_wrong_stream(acl):
    s1, s2, s3 = start(acl, 3)
    ready = ok(acl, acl.rt.create_event())
    host_in = hmalloc(acl, seed=15)
    dev, dev_out = dmalloc(acl), dmalloc(acl)
    ok(acl, acl.rt.memcpy_async(dev, N, host_in, N, H2D, s1))
    ok(acl, acl.rt.record_event(ready, s1))
    ok(acl, acl.rt.stream_wait_event(s3, ready))     # BUG: the consumer is s2, not s3
    ok(acl, acl.rt.memcpy_async(dev_out, N, dev, N, D2D, s2))
    stop(acl, [s1, s2, s3], [ready], dev=[dev, dev_out], host=[host_in])
    return expect(streams=[s1, s2], buffers=[dev])


def fixed_race_wait_on_wrong_stream(acl):
    s1, s2, s3 = start(acl, 3)
    ready = ok(acl, acl.rt.create_event())
    host_in, out = hmalloc(acl, seed=15), hmalloc(acl)
    dev, dev_out = dmalloc(acl), dmalloc(acl)
    ok(acl, acl.rt.memcpy_async(dev, N, host_in, N, H2D, s1))
    ok(acl, acl.rt.record_event(ready, s1))
    ok(acl, acl.rt.stream_wait_event(s2, ready))
    ok(acl, acl.rt.memcpy_async(dev_out, N, dev, N, D2D, s2))
    ok(acl, acl.rt.memcpy_async(out, N, dev_out, N, D2H, s2))
    ok(acl, acl.rt.synchronize_stream(s2))
    assert read(acl, out) == pattern(N, 15)
    stop(acl, [s1, s2, s3], [ready], dev=[dev, dev_out], host=[host_in, out])


def bug_race_ex_event_waited_before_record(acl):
    s1, s2 = start(acl, 2)
    ready = ok(acl, acl.rt.create_event_ex_with_flag(ACL_EVENT_SYNC))
    host_in = hmalloc(acl, seed=16)
    dev, dev_out = dmalloc(acl), dmalloc(acl)
    ok(acl, acl.rt.stream_wait_event(s2, ready))     # BUG: not recorded yet: a silent no-op
    ok(acl, acl.rt.memcpy_async(dev, N, host_in, N, H2D, s1))
    ok(acl, acl.rt.record_event(ready, s1))
    ok(acl, acl.rt.memcpy_async(dev_out, N, dev, N, D2D, s2))
    stop(acl, [s1, s2], [ready], dev=[dev, dev_out], host=[host_in])
    return expect(streams=[s1, s2], buffers=[dev])


def fixed_race_ex_event_waited_before_record(acl):
    s1, s2 = start(acl, 2)
    ready = ok(acl, acl.rt.create_event_ex_with_flag(ACL_EVENT_SYNC))
    host_in, out = hmalloc(acl, seed=16), hmalloc(acl)
    dev, dev_out = dmalloc(acl), dmalloc(acl)
    ok(acl, acl.rt.memcpy_async(dev, N, host_in, N, H2D, s1))
    ok(acl, acl.rt.record_event(ready, s1))
    ok(acl, acl.rt.stream_wait_event(s2, ready))
    ok(acl, acl.rt.memcpy_async(dev_out, N, dev, N, D2D, s2))
    ok(acl, acl.rt.memcpy_async(out, N, dev_out, N, D2H, s2))
    ok(acl, acl.rt.synchronize_stream(s2))
    assert read(acl, out) == pattern(N, 16)
    stop(acl, [s1, s2], [ready], dev=[dev, dev_out], host=[host_in, out])


def bug_race_blocking_copy_vs_stream(acl):
    (s1,) = start(acl)
    host_a, host_b = hmalloc(acl, seed=17), hmalloc(acl, seed=18)
    a, b = dmalloc(acl), dmalloc(acl)
    upload(acl, a, host_a)
    ok(acl, acl.rt.memcpy_async(b, N, a, N, D2D, s1))          # s1 reads a
    upload(acl, a, host_b)        # BUG: a blocking memcpy does not wait for any stream
    stop(acl, [s1], dev=[a, b], host=[host_a, host_b])
    return expect(streams=[s1, HOST], buffers=[a])


def fixed_race_blocking_copy_vs_stream(acl):
    (s1,) = start(acl)
    host_a, host_b, out = hmalloc(acl, seed=17), hmalloc(acl, seed=18), hmalloc(acl)
    a, b = dmalloc(acl), dmalloc(acl)
    upload(acl, a, host_a)
    ok(acl, acl.rt.memcpy_async(b, N, a, N, D2D, s1))
    ok(acl, acl.rt.synchronize_stream(s1))
    upload(acl, a, host_b)
    ok(acl, acl.rt.memcpy(out, N, b, N, D2H))
    assert read(acl, out) == pattern(N, 17)
    stop(acl, [s1], dev=[a, b], host=[host_a, host_b, out])


def bug_race_chain_recorded_before_wait(acl):
    s1, s2, s3 = start(acl, 3)
    e1, e2 = ok(acl, acl.rt.create_event()), ok(acl, acl.rt.create_event())
    host_in = hmalloc(acl, seed=19)
    a, c = dmalloc(acl), dmalloc(acl)
    ok(acl, acl.rt.memcpy_async(a, N, host_in, N, H2D, s1))
    ok(acl, acl.rt.record_event(e1, s1))
    ok(acl, acl.rt.record_event(e2, s2))     # BUG: s2 passes e2 on before it waited for e1
    ok(acl, acl.rt.stream_wait_event(s2, e1))
    ok(acl, acl.rt.stream_wait_event(s3, e2))
    ok(acl, acl.rt.memcpy_async(c, N, a, N, D2D, s3))
    stop(acl, [s1, s2, s3], [e1, e2], dev=[a, c], host=[host_in])
    return expect(streams=[s1, s3], buffers=[a])


def fixed_race_chain_recorded_before_wait(acl):
    s1, s2, s3 = start(acl, 3)
    e1, e2 = ok(acl, acl.rt.create_event()), ok(acl, acl.rt.create_event())
    host_in, out = hmalloc(acl, seed=19), hmalloc(acl)
    a, c = dmalloc(acl), dmalloc(acl)
    ok(acl, acl.rt.memcpy_async(a, N, host_in, N, H2D, s1))
    ok(acl, acl.rt.record_event(e1, s1))
    ok(acl, acl.rt.stream_wait_event(s2, e1))
    ok(acl, acl.rt.record_event(e2, s2))     # s3 is ordered after s1 through s2
    ok(acl, acl.rt.stream_wait_event(s3, e2))
    ok(acl, acl.rt.memcpy_async(c, N, a, N, D2D, s3))
    ok(acl, acl.rt.memcpy_async(out, N, c, N, D2H, s3))
    ok(acl, acl.rt.synchronize_stream(s3))
    assert read(acl, out) == pattern(N, 19)
    stop(acl, [s1, s2, s3], [e1, e2], dev=[a, c], host=[host_in, out])


def bug_seed_double_stream(acl):
    """The seed's double-stream loop: ONE input buffer for both streams."""
    s_copy, s_exec = start(acl, 2)
    copied = ok(acl, acl.rt.create_event())
    batches, result = hmalloc(acl, BATCHES * N, seed=20), hmalloc(acl)
    dev_in, dev_out = dmalloc(acl), dmalloc(acl)
    ok(acl, acl.rt.memcpy_async(dev_in, N, batches, N, H2D, s_copy))
    ok(acl, acl.rt.record_event(copied, s_copy))
    for i in range(BATCHES):
        ok(acl, acl.rt.stream_wait_event(s_exec, copied))
        ok(acl, acl.rt.memcpy_async(dev_out, N, dev_in, N, D2D, s_exec))   # "execute" batch i
        ok(acl, acl.rt.memcpy_async(result, N, dev_out, N, D2H, s_exec))
        if i + 1 < BATCHES:
            # BUG: batch i+1 lands in the buffer that the execution of batch i still reads
            ok(acl, acl.rt.memcpy_async(dev_in, N, batches + (i + 1) * N, N, H2D, s_copy))
            ok(acl, acl.rt.record_event(copied, s_copy))
        ok(acl, acl.rt.synchronize_stream(s_exec))
        read(acl, result, 16)                                            # post-process batch i
    stop(acl, [s_copy, s_exec], [copied], dev=[dev_in, dev_out], host=[batches, result])
    return expect(streams=[s_copy, s_exec], buffers=[dev_in])


def fixed_seed_double_stream(acl):
    """Two input buffers; the copy into a buffer waits until the execution that read it is done."""
    s_copy, s_exec = start(acl, 2)
    copied = [ok(acl, acl.rt.create_event()) for _ in range(2)]
    consumed = [ok(acl, acl.rt.create_event()) for _ in range(2)]
    batches, result = hmalloc(acl, BATCHES * N, seed=20), hmalloc(acl)
    dev_in, dev_out = [dmalloc(acl), dmalloc(acl)], dmalloc(acl)
    expected = pattern(BATCHES * N, 20)
    ok(acl, acl.rt.memcpy_async(dev_in[0], N, batches, N, H2D, s_copy))
    ok(acl, acl.rt.record_event(copied[0], s_copy))
    for i in range(BATCHES):
        slot, nxt = i % 2, (i + 1) % 2
        ok(acl, acl.rt.stream_wait_event(s_exec, copied[slot]))
        ok(acl, acl.rt.memcpy_async(dev_out, N, dev_in[slot], N, D2D, s_exec))
        ok(acl, acl.rt.record_event(consumed[slot], s_exec))    # dev_in[slot] is free again
        ok(acl, acl.rt.memcpy_async(result, N, dev_out, N, D2H, s_exec))
        if i + 1 < BATCHES:
            if i >= 1:    # dev_in[nxt] was read by the execution of batch i-1
                ok(acl, acl.rt.stream_wait_event(s_copy, consumed[nxt]))
            ok(acl, acl.rt.memcpy_async(dev_in[nxt], N, batches + (i + 1) * N, N, H2D, s_copy))
            ok(acl, acl.rt.record_event(copied[nxt], s_copy))
        ok(acl, acl.rt.synchronize_stream(s_exec))
        assert read(acl, result) == expected[i * N:(i + 1) * N]
    stop(acl, [s_copy, s_exec], copied + consumed, dev=[*dev_in, dev_out],
         host=[batches, result])


def bug_race_host_synced_other_stream(acl):
    s1, s2 = start(acl, 2)
    host_in = hmalloc(acl, seed=21)
    a, b, scratch = dmalloc(acl), dmalloc(acl), dmalloc(acl)
    ok(acl, acl.rt.memcpy_async(a, N, host_in, N, H2D, s1))
    ok(acl, acl.rt.memset_async(scratch, N, 0, N, s2))
    ok(acl, acl.rt.synchronize_stream(s2))      # BUG: the producer of a is s1
    ok(acl, acl.rt.memcpy_async(b, N, a, N, D2D, s2))
    stop(acl, [s1, s2], dev=[a, b, scratch], host=[host_in])
    return expect(streams=[s1, s2], buffers=[a])


def fixed_race_host_synced_other_stream(acl):
    s1, s2 = start(acl, 2)
    host_in, out = hmalloc(acl, seed=21), hmalloc(acl)
    a, b, scratch = dmalloc(acl), dmalloc(acl), dmalloc(acl)
    ok(acl, acl.rt.memcpy_async(a, N, host_in, N, H2D, s1))
    ok(acl, acl.rt.memset_async(scratch, N, 0, N, s2))
    ok(acl, acl.rt.synchronize_stream(s1))      # the host orders s2's later work after s1
    ok(acl, acl.rt.memcpy_async(b, N, a, N, D2D, s2))
    ok(acl, acl.rt.memcpy_async(out, N, b, N, D2H, s2))
    ok(acl, acl.rt.synchronize_stream(s2))
    assert read(acl, out) == pattern(N, 21)
    stop(acl, [s1, s2], dev=[a, b, scratch], host=[host_in, out])


def _pipeline(acl, wait_for_consumer: bool):
    """Two input and two output buffers, ordered by events only (no host sync in the loop)."""
    s_copy, s_exec = start(acl, 2)
    copied = [ok(acl, acl.rt.create_event()) for _ in range(2)]
    consumed = [ok(acl, acl.rt.create_event()) for _ in range(2)]
    batches, results = hmalloc(acl, BATCHES * N, seed=22), hmalloc(acl, BATCHES * N)
    dev_in, dev_out = [dmalloc(acl), dmalloc(acl)], [dmalloc(acl), dmalloc(acl)]
    for i in range(BATCHES):
        slot = i % 2
        if i >= 2 and wait_for_consumer:   # the bug leaves this wait out
            ok(acl, acl.rt.stream_wait_event(s_copy, consumed[slot]))
        ok(acl, acl.rt.memcpy_async(dev_in[slot], N, batches + i * N, N, H2D, s_copy))
        ok(acl, acl.rt.record_event(copied[slot], s_copy))
        ok(acl, acl.rt.stream_wait_event(s_exec, copied[slot]))
        ok(acl, acl.rt.memcpy_async(dev_out[slot], N, dev_in[slot], N, D2D, s_exec))
        ok(acl, acl.rt.record_event(consumed[slot], s_exec))
        ok(acl, acl.rt.memcpy_async(results + i * N, N, dev_out[slot], N, D2H, s_exec))
    ok(acl, acl.rt.synchronize_stream(s_exec))
    got = read(acl, results, BATCHES * N)
    stop(acl, [s_copy, s_exec], copied + consumed, dev=[*dev_in, *dev_out],
         host=[batches, results])
    return got, s_copy, s_exec, dev_in


def bug_pipeline_reuses_input_too_soon(acl):
    # BUG: batch i+2's copy into dev_in[slot] does not wait for the execution of batch i
    _got, s_copy, s_exec, dev_in = _pipeline(acl, wait_for_consumer=False)
    return expect(streams=[s_copy, s_exec], buffers=[dev_in[0]])


def fixed_pipeline_reuses_input_too_soon(acl):
    got, *_ = _pipeline(acl, wait_for_consumer=True)
    assert got == pattern(BATCHES * N, 22)


# ---------------------------------------------------------------------------------------
# (c) use after free
# ---------------------------------------------------------------------------------------

def bug_free_while_copying_out(acl):
    (s,) = start(acl)
    host_in, out = hmalloc(acl, seed=30), hmalloc(acl)
    dev = dmalloc(acl)
    upload(acl, dev, host_in)
    ok(acl, acl.rt.memcpy_async(out, N, dev, N, D2H, s))
    ok(acl, acl.rt.free(dev))             # BUG: the copy on s may still read it
    stop(acl, [s], host=[host_in, out])
    return expect(streams=[s], buffers=[dev])


def fixed_free_while_copying_out(acl):
    (s,) = start(acl)
    host_in, out = hmalloc(acl, seed=30), hmalloc(acl)
    dev = dmalloc(acl)
    upload(acl, dev, host_in)
    ok(acl, acl.rt.memcpy_async(out, N, dev, N, D2H, s))
    ok(acl, acl.rt.synchronize_stream(s))
    ok(acl, acl.rt.free(dev))
    assert read(acl, out) == pattern(N, 30)
    stop(acl, [s], host=[host_in, out])


def bug_free_host_while_uploading(acl):
    (s,) = start(acl)
    host_in = hmalloc(acl, seed=31)
    dev = dmalloc(acl)
    ok(acl, acl.rt.memcpy_async(dev, N, host_in, N, H2D, s))
    ok(acl, acl.rt.free_host(host_in))    # BUG: the copy on s may still read it
    stop(acl, [s], dev=[dev])
    return expect(streams=[s], buffers=[host_in])


def fixed_free_host_while_uploading(acl):
    (s,) = start(acl)
    host_in = hmalloc(acl, seed=31)
    dev = dmalloc(acl)
    ok(acl, acl.rt.memcpy_async(dev, N, host_in, N, H2D, s))
    ok(acl, acl.rt.synchronize_stream(s))
    ok(acl, acl.rt.free_host(host_in))
    stop(acl, [s], dev=[dev])


def bug_free_after_syncing_other_stream(acl):
    s1, s2 = start(acl, 2)
    host_in = hmalloc(acl, seed=32)
    a, b, scratch = dmalloc(acl), dmalloc(acl), dmalloc(acl)
    upload(acl, a, host_in)
    ok(acl, acl.rt.memcpy_async(b, N, a, N, D2D, s1))
    ok(acl, acl.rt.memset_async(scratch, N, 0, N, s2))
    ok(acl, acl.rt.synchronize_stream(s2))     # BUG: a is read on s1
    ok(acl, acl.rt.free(a))
    stop(acl, [s1, s2], dev=[b, scratch], host=[host_in])
    return expect(streams=[s1], buffers=[a])


def fixed_free_after_syncing_other_stream(acl):
    s1, s2 = start(acl, 2)
    read_done = ok(acl, acl.rt.create_event())
    host_in = hmalloc(acl, seed=32)
    a, b, scratch = dmalloc(acl), dmalloc(acl), dmalloc(acl)
    upload(acl, a, host_in)
    ok(acl, acl.rt.memcpy_async(b, N, a, N, D2D, s1))
    ok(acl, acl.rt.record_event(read_done, s1))
    ok(acl, acl.rt.memset_async(scratch, N, 0, N, s2))
    ok(acl, acl.rt.synchronize_event(read_done))
    ok(acl, acl.rt.free(a))
    stop(acl, [s1, s2], [read_done], dev=[b, scratch], host=[host_in])


def bug_free_then_reuse_while_pending(acl):
    (s,) = start(acl)
    a = dmalloc(acl)
    ok(acl, acl.rt.memset_async(a, N, 0, N, s))
    ok(acl, acl.rt.free(a))               # BUG: the memset is still queued
    b = dmalloc(acl)                      # the caching pool hands the same block back
    ok(acl, acl.rt.memset_async(b, N, 1, N, s))
    stop(acl, [s], dev=[b])
    return expect(streams=[s], buffers=[a])


def fixed_free_then_reuse_while_pending(acl):
    (s,) = start(acl)
    a = dmalloc(acl)
    ok(acl, acl.rt.memset_async(a, N, 0, N, s))
    for _ in range(100_000):              # poll instead of blocking
        if ok(acl, acl.rt.stream_query(s)) == ACL_STREAM_STATUS_COMPLETE:
            break
    else:
        raise AssertionError("the stream never completed")
    ok(acl, acl.rt.free(a))
    b = dmalloc(acl)
    ok(acl, acl.rt.memset_async(b, N, 1, N, s))
    stop(acl, [s], dev=[b])


def bug_free_before_synchronize_device(acl):
    (s,) = start(acl)
    big_host = hmalloc(acl, BIG, seed=33)
    a, big = dmalloc(acl), dmalloc(acl, BIG)
    ok(acl, acl.rt.memset_async(a, N, 0, N, s))
    upload(acl, big, big_host, BIG)           # the host is busy for a while
    ok(acl, acl.rt.free(a))                   # BUG: before synchronize_device
    ok(acl, acl.rt.synchronize_device())
    stop(acl, [s], dev=[big], host=[big_host])
    return expect(streams=[s], buffers=[a])


def fixed_free_before_synchronize_device(acl):
    (s,) = start(acl)
    big_host = hmalloc(acl, BIG, seed=33)
    a, big = dmalloc(acl), dmalloc(acl, BIG)
    ok(acl, acl.rt.memset_async(a, N, 0, N, s))
    upload(acl, big, big_host, BIG)           # the memset on s finishes meanwhile
    ok(acl, acl.rt.synchronize_device())
    ok(acl, acl.rt.free(a))
    stop(acl, [s], dev=[big], host=[big_host])


# ---------------------------------------------------------------------------------------
# (d) async copies with pageable host memory
# ---------------------------------------------------------------------------------------

def bug_pageable_upload(acl):
    (s,) = start(acl)
    dev = dmalloc(acl)
    data = pattern(N, 40)
    src = acl.util.bytes_to_ptr(data)
    ok(acl, acl.rt.memcpy_async(dev, N, src, N, H2D, s))    # BUG: pageable source: it blocks
    ok(acl, acl.rt.synchronize_stream(s))
    stop(acl, [s], dev=[dev])
    return expect(streams=[s], buffers=[src])


def fixed_pageable_upload(acl):
    (s,) = start(acl)
    dev = dmalloc(acl)
    host_in = hmalloc(acl, seed=40)
    ok(acl, acl.rt.memcpy_async(dev, N, host_in, N, H2D, s))
    ok(acl, acl.rt.synchronize_stream(s))
    stop(acl, [s], dev=[dev], host=[host_in])


def bug_pageable_download(acl):
    (s,) = start(acl)
    host_in = hmalloc(acl, seed=41)
    dev = dmalloc(acl)
    upload(acl, dev, host_in)
    out = bytearray(N)
    dst = acl.util.bytes_to_ptr(out)
    ok(acl, acl.rt.memcpy_async(dst, N, dev, N, D2H, s))    # BUG: pageable destination
    assert bytes(out) == pattern(N, 41)
    stop(acl, [s], dev=[dev], host=[host_in])
    return expect(streams=[s], buffers=[dst])


def fixed_pageable_download(acl):
    (s,) = start(acl)
    host_in, out = hmalloc(acl, seed=41), hmalloc(acl)
    dev = dmalloc(acl)
    upload(acl, dev, host_in)
    ok(acl, acl.rt.memcpy_async(out, N, dev, N, D2H, s))
    ok(acl, acl.rt.synchronize_stream(s))
    assert read(acl, out) == pattern(N, 41)
    stop(acl, [s], dev=[dev], host=[host_in, out])


def bug_pageable_batches_default_stream(acl):
    start(acl, 0)
    dev, dev_out = dmalloc(acl), dmalloc(acl)
    first = None
    for i in range(3):
        batch = pattern(N, 42 + i)
        src = acl.util.bytes_to_ptr(batch)
        first = first or src
        ok(acl, acl.rt.memcpy_async(dev, N, src, N, H2D, 0))   # BUG: pageable, every batch
        ok(acl, acl.rt.memcpy_async(dev_out, N, dev, N, D2D, 0))
        ok(acl, acl.rt.synchronize_stream(0))
    stop(acl, dev=[dev, dev_out])
    return expect(streams=[0], buffers=[first])


def fixed_pageable_batches_default_stream(acl):
    start(acl, 0)
    dev, dev_out = dmalloc(acl), dmalloc(acl)
    stage = hmalloc(acl)
    for i in range(3):
        batch = pattern(N, 42 + i)
        ok(acl, acl.rt.memcpy(stage, N, acl.util.bytes_to_ptr(batch), N, H2H))
        ok(acl, acl.rt.memcpy_async(dev, N, stage, N, H2D, 0))
        ok(acl, acl.rt.memcpy_async(dev_out, N, dev, N, D2D, 0))
        ok(acl, acl.rt.synchronize_stream(0))    # before the next batch refills the stage
    stop(acl, dev=[dev, dev_out], host=[stage])


# ---------------------------------------------------------------------------------------
# (e) events: stale records, resets under pending waits, waits on never-recorded events
# ---------------------------------------------------------------------------------------

def bug_stale_record_in_loop(acl):
    s_prod, s_cons = start(acl, 2)
    ready = ok(acl, acl.rt.create_event())
    host_in = hmalloc(acl, seed=50)
    bufs, dev_out = [dmalloc(acl) for _ in range(3)], dmalloc(acl)
    ok(acl, acl.rt.record_event(ready, s_prod))          # BUG: recorded once, before the loop
    for buf in bufs:
        ok(acl, acl.rt.memcpy_async(buf, N, host_in, N, H2D, s_prod))
        ok(acl, acl.rt.stream_wait_event(s_cons, ready))
        ok(acl, acl.rt.memcpy_async(dev_out, N, buf, N, D2D, s_cons))
    stop(acl, [s_prod, s_cons], [ready], dev=[*bufs, dev_out], host=[host_in])
    return expect(streams=[s_prod, s_cons], also=("race",))


def fixed_stale_record_in_loop(acl):
    s_prod, s_cons = start(acl, 2)
    ready = ok(acl, acl.rt.create_event())
    host_in, out = hmalloc(acl, seed=50), hmalloc(acl)
    bufs, dev_out = [dmalloc(acl) for _ in range(3)], dmalloc(acl)
    for buf in bufs:
        ok(acl, acl.rt.memcpy_async(buf, N, host_in, N, H2D, s_prod))
        ok(acl, acl.rt.record_event(ready, s_prod))      # a fresh record for every round
        ok(acl, acl.rt.stream_wait_event(s_cons, ready))
        ok(acl, acl.rt.memcpy_async(dev_out, N, buf, N, D2D, s_cons))
    ok(acl, acl.rt.memcpy_async(out, N, dev_out, N, D2H, s_cons))
    ok(acl, acl.rt.synchronize_stream(s_cons))
    assert read(acl, out) == pattern(N, 50)
    stop(acl, [s_prod, s_cons], [ready], dev=[*bufs, dev_out], host=[host_in, out])


def bug_stale_buffer_free_event(acl):
    s_copy, s_exec = start(acl, 2)
    copied, consumed = ok(acl, acl.rt.create_event()), ok(acl, acl.rt.create_event())
    batches = hmalloc(acl, 3 * N, seed=51)
    dev_in, dev_out = dmalloc(acl), dmalloc(acl)
    ok(acl, acl.rt.memcpy_async(dev_in, N, batches, N, H2D, s_copy))
    ok(acl, acl.rt.record_event(copied, s_copy))
    ok(acl, acl.rt.record_event(consumed, s_exec))     # BUG: once, before the loop
    for i in range(3):
        ok(acl, acl.rt.stream_wait_event(s_exec, copied))
        ok(acl, acl.rt.memcpy_async(dev_out, N, dev_in, N, D2D, s_exec))
        if i < 2:
            ok(acl, acl.rt.stream_wait_event(s_copy, consumed))
            ok(acl, acl.rt.memcpy_async(dev_in, N, batches + (i + 1) * N, N, H2D, s_copy))
            ok(acl, acl.rt.record_event(copied, s_copy))
    stop(acl, [s_copy, s_exec], [copied, consumed], dev=[dev_in, dev_out], host=[batches])
    return expect(streams=[s_exec, s_copy], also=("race",))


def fixed_stale_buffer_free_event(acl):
    s_copy, s_exec = start(acl, 2)
    copied, consumed = ok(acl, acl.rt.create_event()), ok(acl, acl.rt.create_event())
    batches, out = hmalloc(acl, 3 * N, seed=51), hmalloc(acl)
    dev_in, dev_out = dmalloc(acl), dmalloc(acl)
    ok(acl, acl.rt.memcpy_async(dev_in, N, batches, N, H2D, s_copy))
    ok(acl, acl.rt.record_event(copied, s_copy))
    for i in range(3):
        ok(acl, acl.rt.stream_wait_event(s_exec, copied))
        ok(acl, acl.rt.memcpy_async(dev_out, N, dev_in, N, D2D, s_exec))
        ok(acl, acl.rt.record_event(consumed, s_exec))   # after each read of dev_in
        if i < 2:
            ok(acl, acl.rt.stream_wait_event(s_copy, consumed))
            ok(acl, acl.rt.memcpy_async(dev_in, N, batches + (i + 1) * N, N, H2D, s_copy))
            ok(acl, acl.rt.record_event(copied, s_copy))
    ok(acl, acl.rt.memcpy_async(out, N, dev_out, N, D2H, s_exec))
    ok(acl, acl.rt.synchronize_stream(s_exec))
    assert read(acl, out) == pattern(3 * N, 51)[2 * N:]
    stop(acl, [s_copy, s_exec], [copied, consumed], dev=[dev_in, dev_out], host=[batches, out])


def bug_reset_on_producer_stream(acl):
    s1, s2 = start(acl, 2)
    ready = ok(acl, acl.rt.create_event_with_flag(ACL_EVENT_SYNC))
    host_in = hmalloc(acl, BIG, seed=52)
    a, b = dmalloc(acl, BIG), dmalloc(acl, BIG)
    ok(acl, acl.rt.memcpy_async(a, BIG, host_in, BIG, H2D, s1))
    ok(acl, acl.rt.record_event(ready, s1))
    ok(acl, acl.rt.stream_wait_event(s2, ready))
    ok(acl, acl.rt.memcpy_async(b, BIG, a, BIG, D2D, s2))
    ok(acl, acl.rt.reset_event(ready, s1))     # BUG: s2's wait has not been satisfied yet
    stop(acl, [s1, s2], [ready], dev=[a, b], host=[host_in])
    return expect(streams=[s2, s1])


def fixed_reset_on_producer_stream(acl):
    """The documented pattern: reset on the waiting stream, queued after its wait."""
    s1, s2 = start(acl, 2)
    ready = ok(acl, acl.rt.create_event_with_flag(ACL_EVENT_SYNC))
    host_in, out = hmalloc(acl, BIG, seed=52), hmalloc(acl, BIG)
    a, b = dmalloc(acl, BIG), dmalloc(acl, BIG)
    ok(acl, acl.rt.memcpy_async(a, BIG, host_in, BIG, H2D, s1))
    ok(acl, acl.rt.record_event(ready, s1))
    ok(acl, acl.rt.stream_wait_event(s2, ready))
    ok(acl, acl.rt.reset_event(ready, s2))     # runs on s2 after s2's wait is satisfied
    ok(acl, acl.rt.memcpy_async(b, BIG, a, BIG, D2D, s2))
    ok(acl, acl.rt.memcpy_async(out, BIG, b, BIG, D2H, s2))
    ok(acl, acl.rt.synchronize_stream(s2))
    assert read(acl, out, BIG) == pattern(BIG, 52)
    stop(acl, [s1, s2], [ready], dev=[a, b], host=[host_in, out])


def bug_reset_with_two_waiters(acl):
    s1, s2, s3 = start(acl, 3)
    ready = ok(acl, acl.rt.create_event_with_flag(ACL_EVENT_SYNC))
    host_in = hmalloc(acl, BIG, seed=53)
    a, b, c = dmalloc(acl, BIG), dmalloc(acl, BIG), dmalloc(acl, BIG)
    ok(acl, acl.rt.memcpy_async(a, BIG, host_in, BIG, H2D, s1))
    ok(acl, acl.rt.record_event(ready, s1))
    ok(acl, acl.rt.stream_wait_event(s2, ready))
    ok(acl, acl.rt.memcpy_async(b, BIG, a, BIG, D2D, s2))
    ok(acl, acl.rt.stream_wait_event(s3, ready))
    ok(acl, acl.rt.memcpy_async(c, BIG, a, BIG, D2D, s3))
    ok(acl, acl.rt.reset_event(ready, s2))     # BUG: fine for s2, but s3 still waits on it
    stop(acl, [s1, s2, s3], [ready], dev=[a, b, c], host=[host_in])
    return expect(streams=[s3, s2])


def fixed_reset_with_two_waiters(acl):
    s1, s2, s3 = start(acl, 3)
    ready = ok(acl, acl.rt.create_event_with_flag(ACL_EVENT_SYNC))
    host_in = hmalloc(acl, BIG, seed=53)
    a, b, c = dmalloc(acl, BIG), dmalloc(acl, BIG), dmalloc(acl, BIG)
    ok(acl, acl.rt.memcpy_async(a, BIG, host_in, BIG, H2D, s1))
    ok(acl, acl.rt.record_event(ready, s1))
    ok(acl, acl.rt.stream_wait_event(s2, ready))
    ok(acl, acl.rt.memcpy_async(b, BIG, a, BIG, D2D, s2))
    ok(acl, acl.rt.stream_wait_event(s3, ready))
    ok(acl, acl.rt.memcpy_async(c, BIG, a, BIG, D2D, s3))
    ok(acl, acl.rt.synchronize_stream(s2))     # every wait is satisfied before the reset
    ok(acl, acl.rt.synchronize_stream(s3))
    ok(acl, acl.rt.reset_event(ready, s1))
    stop(acl, [s1, s2, s3], [ready], dev=[a, b, c], host=[host_in])


def bug_wait_before_record(acl):
    s1, s2 = start(acl, 2)
    ready = ok(acl, acl.rt.create_event())
    host_in = hmalloc(acl, seed=54)
    a, b = dmalloc(acl), dmalloc(acl)
    ret = acl.rt.stream_wait_event(s2, ready)       # BUG: the producer records it only later
    assert ret == ERR_INVALID, ret
    ok(acl, acl.rt.memcpy_async(a, N, host_in, N, H2D, s1))
    ok(acl, acl.rt.record_event(ready, s1))
    ok(acl, acl.rt.memcpy_async(b, N, a, N, D2D, s2))
    stop(acl, [s1, s2], [ready], dev=[a, b], host=[host_in])
    return expect(streams=[s2], text=[f"0x{ready:x}"], also=("race",))


def fixed_wait_before_record(acl):
    s1, s2 = start(acl, 2)
    ready = ok(acl, acl.rt.create_event())
    host_in, out = hmalloc(acl, seed=54), hmalloc(acl)
    a, b = dmalloc(acl), dmalloc(acl)
    ok(acl, acl.rt.memcpy_async(a, N, host_in, N, H2D, s1))
    ok(acl, acl.rt.record_event(ready, s1))
    ok(acl, acl.rt.stream_wait_event(s2, ready))
    ok(acl, acl.rt.memcpy_async(b, N, a, N, D2D, s2))
    ok(acl, acl.rt.memcpy_async(out, N, b, N, D2H, s2))
    ok(acl, acl.rt.synchronize_stream(s2))
    assert read(acl, out) == pattern(N, 54)
    stop(acl, [s1, s2], [ready], dev=[a, b], host=[host_in, out])


def _reset_round(acl, s1, s2, ready, a, b, host_in):
    """One correct round: produce, record, wait, consume, synchronise, reset."""
    ok(acl, acl.rt.memcpy_async(a, N, host_in, N, H2D, s1))
    ok(acl, acl.rt.record_event(ready, s1))
    ok(acl, acl.rt.stream_wait_event(s2, ready))
    ok(acl, acl.rt.memcpy_async(b, N, a, N, D2D, s2))
    ok(acl, acl.rt.synchronize_stream(s2))
    ok(acl, acl.rt.reset_event(ready, s2))


def bug_wait_after_reset(acl):
    s1, s2 = start(acl, 2)
    ready = ok(acl, acl.rt.create_event_with_flag(ACL_EVENT_SYNC))
    host_in = hmalloc(acl, seed=55)
    a, b = dmalloc(acl), dmalloc(acl)
    _reset_round(acl, s1, s2, ready, a, b, host_in)
    ret = acl.rt.stream_wait_event(s2, ready)    # BUG: reset, and not recorded again yet
    assert ret == ERR_INVALID, ret
    ok(acl, acl.rt.memcpy_async(a, N, host_in, N, H2D, s1))
    ok(acl, acl.rt.record_event(ready, s1))
    ok(acl, acl.rt.memcpy_async(b, N, a, N, D2D, s2))
    stop(acl, [s1, s2], [ready], dev=[a, b], host=[host_in])
    return expect(streams=[s2], text=[f"0x{ready:x}"], also=("race",))


def fixed_wait_after_reset(acl):
    s1, s2 = start(acl, 2)
    ready = ok(acl, acl.rt.create_event_with_flag(ACL_EVENT_SYNC))
    host_in = hmalloc(acl, seed=55)
    a, b = dmalloc(acl), dmalloc(acl)
    _reset_round(acl, s1, s2, ready, a, b, host_in)
    _reset_round(acl, s1, s2, ready, a, b, host_in)
    stop(acl, [s1, s2], [ready], dev=[a, b], host=[host_in])


def bug_wait_on_wrong_event(acl):
    s1, s2 = start(acl, 2)
    ready, done = ok(acl, acl.rt.create_event()), ok(acl, acl.rt.create_event())
    host_in, out = hmalloc(acl, seed=56), hmalloc(acl)
    a, b = dmalloc(acl), dmalloc(acl)
    ok(acl, acl.rt.memcpy_async(a, N, host_in, N, H2D, s1))
    ok(acl, acl.rt.record_event(ready, s1))
    ret = acl.rt.stream_wait_event(s2, done)     # BUG: meant `ready`; `done` is not recorded
    assert ret == ERR_INVALID, ret
    ok(acl, acl.rt.memcpy_async(b, N, a, N, D2D, s2))
    ok(acl, acl.rt.memcpy_async(out, N, b, N, D2H, s2))
    ok(acl, acl.rt.record_event(done, s2))
    ok(acl, acl.rt.synchronize_event(done))
    read(acl, out)
    stop(acl, [s1, s2], [ready, done], dev=[a, b], host=[host_in, out])
    return expect(streams=[s2], text=[f"0x{done:x}"], also=("race",))


def fixed_wait_on_wrong_event(acl):
    s1, s2 = start(acl, 2)
    ready, done = ok(acl, acl.rt.create_event()), ok(acl, acl.rt.create_event())
    host_in, out = hmalloc(acl, seed=56), hmalloc(acl)
    a, b = dmalloc(acl), dmalloc(acl)
    ok(acl, acl.rt.memcpy_async(a, N, host_in, N, H2D, s1))
    ok(acl, acl.rt.record_event(ready, s1))
    ok(acl, acl.rt.stream_wait_event(s2, ready))
    ok(acl, acl.rt.memcpy_async(b, N, a, N, D2D, s2))
    ok(acl, acl.rt.memcpy_async(out, N, b, N, D2H, s2))
    ok(acl, acl.rt.record_event(done, s2))
    ok(acl, acl.rt.synchronize_event(done))
    assert read(acl, out) == pattern(N, 56)
    stop(acl, [s1, s2], [ready, done], dev=[a, b], host=[host_in, out])


# ---------------------------------------------------------------------------------------
# (f) leaks at reset_device and finalize
# ---------------------------------------------------------------------------------------

def _use(acl, s, dev, host_in):
    ok(acl, acl.rt.memcpy_async(dev, N, host_in, N, H2D, s))
    ok(acl, acl.rt.synchronize_stream(s))


def bug_leak_device_memory(acl):
    (s,) = start(acl)
    host_in, dev = hmalloc(acl, seed=60), dmalloc(acl)
    _use(acl, s, dev, host_in)
    stop(acl, [s], host=[host_in])               # BUG: dev is never freed
    return expect(text=[f"0x{dev:x}", "never freed"])


def fixed_leak_device_memory(acl):
    (s,) = start(acl)
    host_in, dev = hmalloc(acl, seed=60), dmalloc(acl)
    _use(acl, s, dev, host_in)
    stop(acl, [s], dev=[dev], host=[host_in])


def bug_leak_stream(acl):
    s, s_extra = start(acl, 2)
    host_in, dev = hmalloc(acl, seed=61), dmalloc(acl)
    _use(acl, s_extra, dev, host_in)
    stop(acl, [s], dev=[dev], host=[host_in])    # BUG: s_extra is never destroyed
    return expect(text=[f"stream 0x{s_extra:x}"])


def fixed_leak_stream(acl):
    s, s_extra = start(acl, 2)
    host_in, dev = hmalloc(acl, seed=61), dmalloc(acl)
    _use(acl, s_extra, dev, host_in)
    stop(acl, [s, s_extra], dev=[dev], host=[host_in])


def bug_leak_event(acl):
    (s,) = start(acl)
    done = ok(acl, acl.rt.create_event())
    host_in, dev = hmalloc(acl, seed=62), dmalloc(acl)
    ok(acl, acl.rt.memcpy_async(dev, N, host_in, N, H2D, s))
    ok(acl, acl.rt.record_event(done, s))
    ok(acl, acl.rt.synchronize_event(done))
    stop(acl, [s], dev=[dev], host=[host_in])    # BUG: done is never destroyed
    return expect(text=[f"event 0x{done:x}"])


def fixed_leak_event(acl):
    (s,) = start(acl)
    done = ok(acl, acl.rt.create_event())
    host_in, dev = hmalloc(acl, seed=62), dmalloc(acl)
    ok(acl, acl.rt.memcpy_async(dev, N, host_in, N, H2D, s))
    ok(acl, acl.rt.record_event(done, s))
    ok(acl, acl.rt.synchronize_event(done))
    stop(acl, [s], [done], dev=[dev], host=[host_in])


def bug_leak_context(acl):
    ok(acl, acl.init())
    ok(acl, acl.rt.set_device(0))
    ctx = ok(acl, acl.rt.create_context(0))      # now the current context
    dev = dmalloc(acl)
    ok(acl, acl.rt.memset_async(dev, N, 0, N, 0))
    ok(acl, acl.rt.synchronize_stream(0))
    ok(acl, acl.rt.free(dev))
    ok(acl, acl.rt.reset_device(0))               # BUG: ctx is never destroyed
    ok(acl, acl.finalize())
    return expect(text=[f"context 0x{ctx:x}"])


def fixed_leak_context(acl):
    ok(acl, acl.init())
    ok(acl, acl.rt.set_device(0))
    ctx = ok(acl, acl.rt.create_context(0))
    dev = dmalloc(acl)
    ok(acl, acl.rt.memset_async(dev, N, 0, N, 0))
    ok(acl, acl.rt.synchronize_stream(0))
    ok(acl, acl.rt.free(dev))
    ok(acl, acl.rt.destroy_context(ctx))
    ok(acl, acl.rt.reset_device(0))
    ok(acl, acl.finalize())


def bug_leak_pinned_host(acl):
    (s,) = start(acl)
    host_in, dev = hmalloc(acl, seed=63), dmalloc(acl)
    _use(acl, s, dev, host_in)
    stop(acl, [s], dev=[dev])                     # BUG: host_in is never freed
    return expect(text=[f"0x{host_in:x}", "never freed"])


def fixed_leak_pinned_host(acl):
    (s,) = start(acl)
    host_in, dev = hmalloc(acl, seed=63), dmalloc(acl)
    _use(acl, s, dev, host_in)
    stop(acl, [s], dev=[dev], host=[host_in])


def bug_leak_device_never_reset(acl):
    (s,) = start(acl)
    host_in, dev = hmalloc(acl, seed=64), dmalloc(acl)
    _use(acl, s, dev, host_in)
    stop(acl, [s], dev=[dev], host=[host_in], reset=False)   # BUG: no reset_device
    return expect(text=["device 0 still set"])


def fixed_leak_device_never_reset(acl):
    (s,) = start(acl)
    host_in, dev = hmalloc(acl, seed=64), dmalloc(acl)
    _use(acl, s, dev, host_in)
    stop(acl, [s], dev=[dev], host=[host_in])


# ---------------------------------------------------------------------------------------
# (g) reads of uninitialised device memory
# ---------------------------------------------------------------------------------------

def bug_uninit_accumulator(acl):
    (s,) = start(acl)
    out = hmalloc(acl)
    acc = dmalloc(acl)
    ok(acl, acl.rt.memcpy_async(out, N, acc, N, D2H, s))    # BUG: nothing cleared acc
    ok(acl, acl.rt.synchronize_stream(s))
    read(acl, out)
    stop(acl, [s], dev=[acc], host=[out])
    return expect(streams=[s], buffers=[acc])


def fixed_uninit_accumulator(acl):
    (s,) = start(acl)
    out = hmalloc(acl)
    acc = dmalloc(acl)
    ok(acl, acl.rt.memset_async(acc, N, 0, N, s))
    ok(acl, acl.rt.memcpy_async(out, N, acc, N, D2H, s))
    ok(acl, acl.rt.synchronize_stream(s))
    assert read(acl, out) == bytes(N)
    stop(acl, [s], dev=[acc], host=[out])


def bug_uninit_partial_upload(acl):
    (s,) = start(acl)
    host_in = hmalloc(acl, seed=70)
    dev_in, dev_out = dmalloc(acl), dmalloc(acl)
    ok(acl, acl.rt.memcpy_async(dev_in, N, host_in, N // 2, H2D, s))   # BUG: only half of it
    ok(acl, acl.rt.memcpy_async(dev_out, N, dev_in, N, D2D, s))        # reads all of it
    stop(acl, [s], dev=[dev_in, dev_out], host=[host_in])
    return expect(streams=[s], buffers=[dev_in])


def fixed_uninit_partial_upload(acl):
    (s,) = start(acl)
    host_in, out = hmalloc(acl, seed=70), hmalloc(acl)
    dev_in, dev_out = dmalloc(acl), dmalloc(acl)
    half = N // 2                                 # two uploads, one for each half
    ok(acl, acl.rt.memcpy_async(dev_in + half, half, host_in + half, half, H2D, s))
    ok(acl, acl.rt.memcpy_async(dev_in, half, host_in, half, H2D, s))
    ok(acl, acl.rt.memcpy_async(dev_out, N, dev_in, N, D2D, s))
    ok(acl, acl.rt.memcpy_async(out, N, dev_out, N, D2H, s))
    ok(acl, acl.rt.synchronize_stream(s))
    assert read(acl, out) == pattern(N, 70)
    stop(acl, [s], dev=[dev_in, dev_out], host=[host_in, out])


def bug_uninit_after_realloc(acl):
    (s,) = start(acl)
    out = hmalloc(acl)
    a = dmalloc(acl)
    ok(acl, acl.rt.memset(a, N, 0, N))
    ok(acl, acl.rt.free(a))
    b = dmalloc(acl)          # the same block again, from the caching pool: a new allocation
    ok(acl, acl.rt.memcpy_async(out, N, b, N, D2H, s))   # BUG: nothing wrote b
    ok(acl, acl.rt.synchronize_stream(s))
    read(acl, out)
    stop(acl, [s], dev=[b], host=[out])
    return expect(streams=[s], buffers=[b])


def fixed_uninit_after_realloc(acl):
    (s,) = start(acl)
    out = hmalloc(acl)
    a = dmalloc(acl)
    ok(acl, acl.rt.memset(a, N, 0, N))
    ok(acl, acl.rt.free(a))
    b = dmalloc(acl)
    ok(acl, acl.rt.memset_async(b, N, 3, N, s))
    ok(acl, acl.rt.memcpy_async(out, N, b, N, D2H, s))
    ok(acl, acl.rt.synchronize_stream(s))
    assert read(acl, out) == bytes([3]) * N
    stop(acl, [s], dev=[b], host=[out])


# ---------------------------------------------------------------------------------------
# the registry
# ---------------------------------------------------------------------------------------

_TABLE = [
    # (a) host accesses
    ("read_before_sync", "host-read-before-sync",
     "reads a device-to-host result with ptr_to_bytes before synchronize_stream"),
    ("read_after_syncing_other_stream", "host-read-before-sync",
     "synchronises another stream, then reads the result of a copy on the first"),
    ("event_recorded_before_copy", "host-read-before-sync",
     "synchronize_event on an event recorded before the copy it should cover"),
    ("result_view_before_sync", "host-read-before-sync",
     "takes a ptr_to_numpy view of the result before the copy finished"),
    ("read_before_synchronize_device", "host-read-before-sync",
     "reads a copy's result before synchronize_device (the fix calls it first)"),
    ("callback_reads_before_copy", "host-read-before-sync",
     "a host callback that reads the result is queued before the copy (the fix: after it)"),
    ("refill_input_while_copying", "host-write-while-read",
     "refills a pinned input through ptr_to_numpy while the upload still reads it"),
    ("refill_after_syncing_other_stream", "host-write-while-read",
     "refills an input read by the default stream after synchronising another stream"),
    # (b) races
    ("race_copy_then_execute", "race",
     "the execution stream reads an input that the copy stream writes, with no event"),
    ("race_write_write", "race",
     "a memset and a copy on two streams write overlapping halves of one buffer"),
    ("race_default_stream", "race",
     "assumes the default stream synchronises with an explicit stream (it does not)"),
    ("race_write_after_read", "race",
     "one stream overwrites a buffer that another stream is still reading"),
    ("race_partial_overlap", "race",
     "two streams touch partially overlapping ranges (the fix uses disjoint halves)"),
    ("race_event_recorded_too_early", "race",
     "the producer records its event before the copy instead of after it"),
    ("race_wait_on_wrong_stream", "race",
     "the event wait is issued on a bystander stream instead of the consumer"),
    ("race_ex_event_waited_before_record", "race",
     "waits on an ex-style event before it is recorded: a silent no-op"),
    ("race_blocking_copy_vs_stream", "race",
     "a blocking memcpy overwrites a buffer that a queued stream task reads"),
    ("race_chain_recorded_before_wait", "race",
     "a middle stream records its event before waiting, breaking a three-stream chain"),
    ("seed_double_stream", "race",
     "the seed's double-stream loop: the copy of batch i+1 overwrites the input of batch i"),
    ("race_host_synced_other_stream", "race",
     "the host synchronises the wrong stream before launching the consumer"),
    ("pipeline_reuses_input_too_soon", "race",
     "an events-only two-buffer pipeline whose copy stream never waits for the consumer"),
    # (c) use after free
    ("free_while_copying_out", "use-after-free",
     "frees a device buffer that a queued device-to-host copy reads"),
    ("free_host_while_uploading", "use-after-free",
     "free_host of a pinned buffer that a queued upload reads"),
    ("free_after_syncing_other_stream", "use-after-free",
     "synchronises the wrong stream, then frees a buffer still read on the other"),
    ("free_then_reuse_while_pending", "use-after-free",
     "frees a buffer under a queued memset and mallocs the same block again"),
    ("free_before_synchronize_device", "use-after-free",
     "frees a buffer under a queued memset before synchronize_device (the fix calls it first)"),
    # (d) pageable async copies
    ("pageable_upload", "pageable-async",
     "memcpy_async from a bytes_to_ptr buffer: silently synchronous"),
    ("pageable_download", "pageable-async",
     "memcpy_async into a bytearray through bytes_to_ptr"),
    ("pageable_batches_default_stream", "pageable-async",
     "every batch is uploaded asynchronously from pageable memory on the default stream"),
    # (e) events
    ("stale_record_in_loop", "stale-event-wait",
     "records the producer's event once and waits on it in every round"),
    ("stale_buffer_free_event", "stale-event-wait",
     "the 'input buffer is free' event is recorded once, before the loop"),
    ("reset_on_producer_stream", "event-reset-while-waited",
     "resets an event on the producer stream while the consumer's wait is pending"),
    ("reset_with_two_waiters", "event-reset-while-waited",
     "resets on one waiting stream while a second stream still waits on the record"),
    ("wait_before_record", "wait-never-recorded",
     "the consumer waits before the producer records (old-style event: 107000)"),
    ("wait_after_reset", "wait-never-recorded",
     "in the second round the consumer waits on a reset event before it is re-recorded"),
    ("wait_on_wrong_event", "wait-never-recorded",
     "waits on the 'done' event instead of 'ready'; 'done' is not recorded yet"),
    # (f) leaks
    ("leak_device_memory", "leak", "reset_device with a device buffer never freed"),
    ("leak_stream", "leak", "reset_device with an explicit stream never destroyed"),
    ("leak_event", "leak", "reset_device with an event never destroyed"),
    ("leak_context", "leak", "reset_device with an explicit context never destroyed"),
    ("leak_pinned_host", "leak", "finalize with a malloc_host buffer never freed"),
    ("leak_device_never_reset", "leak", "finalize without reset_device"),
    # (g) uninitialised reads
    ("uninit_accumulator", "uninitialised-read",
     "reads back an accumulator that was never cleared with memset"),
    ("uninit_partial_upload", "uninitialised-read",
     "uploads half of an input, then the execution reads all of it (the fix: both halves)"),
    ("uninit_after_realloc", "uninitialised-read",
     "reads a block that malloc handed back from the pool before writing it"),
]

CASES: list[Case] = [
    Case(name, kind, globals()[f"bug_{name}"], globals()[f"fixed_{name}"], description)
    for name, kind, description in _TABLE
]
