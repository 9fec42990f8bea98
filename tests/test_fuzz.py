"""Fuzzing the pyACL facade (issue 4): random programs of good and bad calls, then invariants.

A short run of :mod:`fuzz_program` for the suite; ``benchmarks/fuzz_long.py`` runs 10,000
programs or more. Each program mixes valid and invalid handles, freed and dangling pointers,
wrong kinds, sizes and contexts, callbacks and kernels that fail, over the whole public API.
No call may raise anything but a return code (AclError in strict mode, TypeError/ValueError
for a malformed Python value passed on purpose). Afterwards the device heaps balance, the trace
is consistent, the exports and the sanitizer run, ``acl.finalize()`` releases every byte, and
after ``acllab.reset()`` a known-good program works. A failure prints the program (replay it
with ``fuzz_program.run_program``) and the concrete calls it made.

``REGRESSIONS`` are the shortest programs the long run found for each failure, kept here so
that each one stays fixed (they replay exactly; the random run may or may not meet them).
"""

from __future__ import annotations

import random
import subprocess
import sys
import textwrap

import fuzz_program as fp
import pytest
from fuzz_program import Program
from hypothesis import HealthCheck, given, settings

import acllab
from acllab import acl

pytestmark = pytest.mark.usefixtures("fresh")

SHORT = settings(max_examples=150, deadline=None, derandomize=True, database=None,
                 suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                        HealthCheck.filter_too_much])


@SHORT
@given(fp.programs())
def test_random_programs_keep_the_invariants(program):
    fp.run_program(program, hang_seconds=10)


# the prelude (Program.prelude == 0) leaves: device 0 set, its default context current, one
# explicit stream, 4096 B of device memory, 4096 B pinned, a 4096 B bytearray (bytes_to_ptr)
DEV = ("p", "pool", "dev", 0, "0")
PINNED = ("p", "pool", "pinned", 0, "0")
PAGE = ("p", "pool", "page", 0, "0")
STREAM = ("h", "stream", "live", 0, None)       # the explicit stream
DEFAULT = ("h", "stream", "zero", 0, None)      # stream 0: the default stream

REGRESSIONS = {
    # util.ptr_to_numpy: the byte count is computed in int64 and wraps (2**33 * 2**33 -> 0),
    # then np.zeros(shape) raises ValueError
    "ptr_to_numpy_shape_overflow": Program(ops=(
        ("util.ptr_to_numpy", ("view", PINNED, "overflow", ("i", 11))),
    )),
    # a kernel whose declared cost is negative gets a negative duration: it ends before it
    # starts (end_ns < 0, so it never counts as done) and the AI Core's books go wrong
    "kernel_negative_cost": Program(ops=(
        ("rt.launch_kernel", ("kernel", 0, ("i", 1), DEV, DEV, ("i", -10**12)), DEFAULT),
    )),
    # memory of a device that only an explicit context opened survives destroy_context and
    # acl.finalize() (finalize releases only devices that are still open)
    "finalize_skips_device_without_context": Program(ops=(
        ("rt.create_context", ("i", 1)),
        ("rt.malloc", ("i", 4096), ("i", 0)),
        ("rt.destroy_context", ("h", "context", "live", 1, None)),
    )),
    # the default stream's own handle (0x50000001040 here) passes destroy_stream, which then
    # destroys the default stream of a live context
    "destroy_default_stream_by_handle": Program(ops=(
        ("rt.destroy_stream", ("h", "stream", "random", 0, (0x0500_0000_1000, ("near", 1)))),
    )),
    # process_report(-1) runs the device to the end of its work but leaves the host clock
    # behind: the next submission lands in the device's past
    "process_report_forever_leaves_device_ahead": Program(ops=(
        ("rt.subscribe_report", ("tid", "main"), DEFAULT),
        ("rt.record_event", ("h", "event", "live", 0, None), STREAM),
        ("rt.process_report", ("i", -1)),
    )),
    # the same after a wait that can never end (507046): Runtime.wait_for raises Deadlock
    # after running everything else, without moving the host clock
    "deadlocked_sync_leaves_device_ahead": Program(ops=(
        ("rt.launch_callback", ("fn", 0, True), ("i", 0), ("i", 1), DEFAULT),
        ("rt.memset_async", ("memset", DEV, "count", ("i", 0), ("fit",)), STREAM),
        ("rt.synchronize_stream", DEFAULT),
    )),
    # memcpy_async with pageable memory on a blocked stream returns 507046, yet its copy stays
    # queued and runs later (a failed call that changed the runtime)
    "pageable_memcpy_async_fails_but_stays_queued": Program(ops=(
        ("rt.launch_callback", ("fn", 0, True), ("i", 0), ("i", 1), STREAM),
        ("rt.memcpy_async", ("copy", PAGE, "count", DEV, ("fit",), ("auto",)), STREAM),
    )),
}


@pytest.mark.parametrize("name", sorted(REGRESSIONS))
def test_regression_program(name):
    fp.run_program(REGRESSIONS[name], hang_seconds=10)


def test_resized_bytearray_is_not_followed():
    """A bytearray behind a bytes_to_ptr address that is resized (here: cleared) no longer
    owns that memory: reading it must be an error code, not a read of freed memory. Runs in a
    subprocess, because today it is a segmentation fault."""
    code = textwrap.dedent("""
        import warnings
        from acllab import acl
        warnings.simplefilter("ignore")
        acl.init()
        data = bytearray(16 << 20)
        ptr = acl.util.bytes_to_ptr(data)
        data.clear()                       # the object lives on; its 16 MiB buffer is freed
        got = acl.util.ptr_to_bytes(ptr, 16 << 20)
        print("returned", len(got), "bytes")
        assert got == b"", "read memory the bytearray no longer owns"
    """)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, (f"exit code {proc.returncode}\n{proc.stdout}\n"
                                  f"{proc.stderr[-2000:]}")


def _outcome(program) -> str:
    try:
        return fp.run_program(program).last_digest
    except fp.FuzzFailure as exc:     # a failure must replay identically too
        return str(exc)


def test_same_program_same_run():
    """Determinism: a program replays call for call and task for task."""
    for seed in range(8):
        program = fp.random_program(random.Random(seed))
        assert _outcome(program) == _outcome(program), fp.format_program(program)


def test_known_good_program_after_reset():
    fp.check_reset_and_reuse()


def test_the_checks_are_not_vacuous():
    """Each checker notices a runtime that was broken on purpose."""
    r = acllab.reset()
    assert acl.init() == 0
    assert acl.rt.set_device(0) == 0
    ptr, ret = acl.rt.malloc(1024, 0)
    assert ret == 0
    stream, ret = acl.rt.create_stream()
    assert ret == 0
    assert acl.rt.memset_async(ptr, 1024, 0, 1024, stream) == 0
    assert acl.rt.memset_async(ptr, 1024, 1, 1024, stream) == 0
    assert acl.rt.synchronize_stream(stream) == 0
    fp.check_invariants(r)

    heap = r.devices[0].heap
    heap.normal_held += 4096
    with pytest.raises(AssertionError, match="normal_held"):
        fp.check_heaps(r)
    heap.normal_held -= 4096

    first, second = [t for t in r.engine.tasks if t.stream is not None][-2:]
    saved = second.start_ns
    second.start_ns = first.start_ns       # overlaps its predecessor on the same stream
    with pytest.raises(AssertionError):
        fp.check_trace(r)
    second.start_ns = saved
    fp.check_trace(r)

    assert acl.rt.free(ptr) == 0
    assert acl.rt.destroy_stream(stream) == 0
    assert acl.rt.reset_device(0) == 0
    assert acl.finalize() == 0
    fp.check_released(r)


def test_a_failure_prints_the_program(monkeypatch):
    """A broken promise comes back as FuzzFailure with the program and its calls (here the
    bug that let destroy_stream destroy a default stream is put back on purpose)."""
    from acllab.acl.rt import stream as stream_module

    monkeypatch.setattr(stream_module, "_explicit_stream",
                        lambda r, handle: r.stream_for(stream_module.as_int(handle, "stream")))
    with pytest.raises(fp.FuzzFailure) as info:
        fp.run_program(REGRESSIONS["destroy_default_stream_by_handle"])
    text = str(info.value)
    assert "Program(profile='ascend310'" in text
    assert "acl.rt.destroy_stream(0x50000001040)" in text
