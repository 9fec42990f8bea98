"""Checks for lesson 05, Events: time a kernel with two events; hand work from stream A to B.

``05.time_kernel``: ``time_kernel(acl, kernel, block_dim, args, stream) -> float``
    Launch ``kernel`` once on ``stream`` (``acl.rt.launch_kernel(kernel, block_dim, args,
    stream)``) and return how long it ran, in milliseconds, measured with two events recorded
    on that stream around the launch (``acl.rt.event_elapsed_time``). The stream may still hold
    the caller's work (the upload of the kernel's input). When the function returns, the
    kernel's output is in device memory, and the events it created are destroyed.

``05.handoff``: ``handoff(acl, producer_stream, consumer_stream, produce, consume, n) -> None``
    ``produce(i)`` queues round i's work on the producer stream (it fills a device buffer);
    ``consume(i)`` queues work on the consumer stream that reads that buffer into
    ``host_out[i]``. Call both for every round i = 0 .. n-1 and make the consumer stream wait,
    each round, for that round's production only: a fresh record after each ``produce(i)``,
    ``stream_wait_event`` before ``consume(i)``, and no host synchronisation inside the loop.
    When the function returns, every round's result is in host memory and every event it
    created is destroyed.

The grades come from the real bytes, the trace (which task waited for which record, how long
the kernel ran), the host's API calls, the sanitizer's findings and what is left at the
caller's teardown. Numbers the learner returns are compared with the trace, never trusted.
"""

from __future__ import annotations

import math
import numbers
import sys as _sys

import numpy as np

from .. import acl
from ..constants import (
    ACL_MEM_MALLOC_HUGE_FIRST,
    ACL_MEMCPY_DEVICE_TO_HOST,
    ACL_MEMCPY_HOST_TO_DEVICE,
    ACL_MEMCPY_HOST_TO_HOST,
)
from ..hardware import KiB
from ..kernels import kernel
from . import Call, Case, Item, _guard, call_learner, exercise, isolated, ran_item
from ._common import (
    BytesWording,
    Order,
    Provenance,
    again_outcome,
    count_for,
    describe_bytes,
    finding_line,
    format_us,
    hazards,
    join_first,
    new_case,
    qualified,
    release_each,
    resources_item,
    sanitizer_item,
    teardown,
)

__all__ = ["grade_time_kernel", "grade_handoff", "axpy", "vadd", "matmul", "refine",
           "slack_ns"]

# the host calls that make the host wait for the device (or poll it)
_BLOCKING = ("synchronize_stream", "synchronize_stream_with_timeout", "synchronize_event",
             "synchronize_event_with_timeout", "synchronize_device")
_POLLING = ("stream_query", "query_event", "query_event_status")
_ELAPSED_CODES = {
    107000: "an event was created without ACL_EVENT_TIME_LINE, so its records carry no "
            "timestamp: create_event_ex_with_flag needs that flag, create_event() always has it",
    507000: "an event had never been recorded when you asked",
    107006: "the end event had not completed yet: synchronize it (synchronize_event) first",
    107017: "a handle was not a live event: destroyed already?",
    100000: "a handle was null (0)",
}
# the finding whose fix is shown first: the cause before its symptoms (an uninitialised read
# is usually a race's symptom here)
_PRIORITY = ("stale-event-wait", "event-reset-while-waited", "wait-never-recorded", "race",
             "host-read-before-sync", "use-after-free", "host-write-while-read",
             "pageable-async", "uninitialised-read")
# lesson05's wording of wrong bytes: read before the work that fills them had run
_BYTES = BytesWording(
    length="{what} has {got:,} bytes, but should have {want:,}",
    differs="{what} is wrong from byte {at:,} on",
    uninit=(" (it holds DE AD BE EF, the pattern of memory nothing has written yet: it was "
            "read before the work that fills it had run)"),
    uninit_span=16)


# -- the kernels the timing cases launch -------------------------------------------------------

@kernel(flops=lambda x, y, n: 2 * n, bytes=lambda x, y, n: 12 * n)
def axpy(ctx, x, y, n):
    """y = 2 x + y (float32, in place): memory-bound."""
    lo, hi = ctx.tile(n)
    a = ctx.load(x + 4 * lo, np.float32, hi - lo)
    b = ctx.load(y + 4 * lo, np.float32, hi - lo)
    ctx.store(y + 4 * lo, np.float32(2) * a + b)


@kernel(flops=lambda x, y, z, n: n, bytes=lambda x, y, z, n: 12 * n)
def vadd(ctx, x, y, z, n):
    """z = x + y (float32): memory-bound."""
    lo, hi = ctx.tile(n)
    a = ctx.load(x + 4 * lo, np.float32, hi - lo)
    b = ctx.load(y + 4 * lo, np.float32, hi - lo)
    ctx.store(z + 4 * lo, a + b)


@kernel(flops=lambda a, b, c, m, k, n: 2 * m * k * n,
        bytes=lambda a, b, c, m, k, n: 4 * (m * k + k * n + m * n), efficiency=0.7)
def matmul(ctx, a, b, c, m, k, n):
    """c = a @ b (float32, row-major), rows split over the blocks: compute-bound."""
    lo, hi = ctx.tile(m)
    if hi <= lo:
        return
    left = ctx.load(a + 4 * k * lo, np.float32, (hi - lo) * k).reshape(hi - lo, k)
    right = ctx.load(b, np.float32, k * n).reshape(k, n)
    ctx.store(c + 4 * n * lo, left @ right)


@kernel(flops=lambda buf, n, work: work * n, bytes=lambda buf, n, work: 8 * n)
def refine(ctx, buf, n, work):
    """buf = 0.5 buf + 1 (float32, in place), declared as ``work`` flops per element: slow."""
    lo, hi = ctx.tile(n)
    x = ctx.load(buf + 4 * lo, np.float32, hi - lo)
    ctx.store(buf + 4 * lo, np.float32(0.5) * x + np.float32(1))


def slack_ns(profile) -> int:
    """How much longer than the kernel a good two-event measurement may read.

    The end record runs after the kernel (its device time), and on an idle stream the start
    record completes before the kernel is even launched (the launch's host time). A cheap call
    or two in between (creating the end event) fits in the record's host time.
    """
    return profile.launch_ns + profile.record_host_ns + profile.record_device_ns


# -- helpers of both exercises (the shared items, in this lesson's words) ----------------------

def _call(runtime, fn, *args) -> tuple[Call, list, int, list]:
    """Call the learner's ``fn(*args)``: (the call, its pyACL calls, the id of the first task
    after it, its tasks)."""
    api_from = len(runtime.api_log)
    call = call_learner(fn, *args)
    after_id = len(runtime.tasks)
    return call, runtime.api_log[api_from:], after_id, runtime.tasks[call.first_task:after_id]


def _describe(got, want: bytes, what: str, others: dict[str, bytes] | None = None) -> str:
    """Why ``got`` is not ``want``, without showing ``want``; '' when they are equal."""
    return describe_bytes(got, want, what, others, _BYTES)


def _resources_item(runtime, failed: list[str], function: str) -> Item:
    """'resources': nothing leaked at the caller's teardown; the caller's own things intact."""
    return resources_item(
        runtime, failed, function,
        released_hint="release only what your function created; the caller destroys its own "
                      "streams and frees its own buffers",
        leaked_hint="destroy every event you create (acl.rt.destroy_event) once the work that "
                    "uses it is done, before returning",
        clean="nothing leaked: the caller's teardown found no leftovers")


def _sanitizer_item(runtime, call: Call, after_id: int, function: str) -> Item:
    """'sanitizer': no race, stale wait, reset while waited, read before sync ..."""
    rank = {kind: k for k, kind in enumerate(_PRIORITY)}
    findings = sorted(hazards(runtime), key=lambda f: rank.get(f.kind, len(rank)))  # stable

    def late(f) -> bool:    # the caller's own access after the function returned
        if f.kind == "host-read-before-sync":
            return bool(f.times_ns) and f.times_ns[0] >= call.end_ns
        return any(t >= after_id for t in f.tasks)

    def line(f) -> str:
        if late(f):
            return (f"[returned early] {function} returned at {format_us(call.end_ns)} and then "
                    f"its caller used the results: {f.message}")
        return finding_line(f)

    def fix(first) -> str:
        if late(first):
            return (f"{function} must wait for its work before it returns "
                    "(synchronize_event or synchronize_stream at the end)")
        return first.fix

    return sanitizer_item(findings, "no hazards: every cross-stream access was ordered by an "
                                    "event and every read came after a synchronisation",
                          line=line, fix=fix)


# -- 05.time_kernel ----------------------------------------------------------------------------

def _timing_case(rng, which: int):
    """(kernel, label, inputs {name: array}, out name, expected bytes, arg builder)."""
    if which == 0:
        n = int(rng.integers(64, 257)) * 4 * KiB
        inputs = _timing_inputs(rng, which, {"x": (n,), "y": (n,)})
        return (axpy, f"axpy on {n:,} floats", inputs, "y", _timing_want(which, inputs),
                lambda p: (p["x"], p["y"], n))
    if which == 1:
        n = int(rng.integers(64, 257)) * 4 * KiB
        inputs = _timing_inputs(rng, which, {"x": (n,), "y": (n,), "z": (n,)})
        return (vadd, f"vadd on {n:,} floats", inputs, "z", _timing_want(which, inputs),
                lambda p: (p["x"], p["y"], p["z"], n))
    m, k, n = (int(v) * 128 for v in rng.integers(3, 9, 3))
    inputs = _timing_inputs(rng, which, {"a": (m, k), "b": (k, n), "c": (m, n)})
    return (matmul, f"matmul {m}x{k} @ {k}x{n}", inputs, "c", _timing_want(which, inputs),
            lambda p: (p["a"], p["b"], p["c"], m, k, n))


def _timing_inputs(rng, which: int, shapes: dict[str, tuple]) -> dict[str, np.ndarray]:
    """Random float32 arrays of these shapes; the output of vadd (z) and matmul (c) zeros."""
    out = {1: "z", 2: "c"}.get(which)
    return {name: np.zeros(shape, np.float32) if name == out
            else rng.standard_normal(shape).astype(np.float32) for name, shape in shapes.items()}


def _timing_want(which: int, p: dict[str, np.ndarray]) -> bytes:
    """The bytes the kernel's output must hold afterwards."""
    if which == 0:
        return (np.float32(2) * p["x"] + p["y"]).tobytes()
    if which == 1:
        return (p["x"] + p["y"]).tobytes()
    return (p["a"] @ p["b"]).tobytes()


def _time_again(runtime, fn, rng, which: int, kern, block_dim: int, inputs, out_name: str,
                build, ptrs, staged, readback: int, stream, stream_obj) -> Item:
    """'again': the caller fills the buffers with new data of the same size and times the
    kernel again with another block count; the output and the time must be the new run's."""
    fresh = _timing_inputs(rng, which, {name: a.shape for name, a in inputs.items()})
    raw = {name: a.tobytes() for name, a in fresh.items()}
    for name, data in raw.items():
        acl.rt.memcpy(staged[name], len(data), acl.util.bytes_to_ptr(data), len(data),
                      ACL_MEMCPY_HOST_TO_HOST)
        acl.rt.memcpy(ptrs[name], len(data), staged[name], len(data), ACL_MEMCPY_HOST_TO_DEVICE)
    blocks = block_dim % 8 + 1
    call, api, _after, tasks = _call(runtime, fn, acl, kern, blocks, build(ptrs), stream)
    size = len(raw[out_name])
    acl.rt.memcpy(readback, size, ptrs[out_name], size, ACL_MEMCPY_DEVICE_TO_HOST)
    got = acl.util.ptr_to_bytes(readback, size)
    problem = ""
    if call.error is None:
        kernel_item, kt = _kernel_item(tasks, kern, blocks, stream_obj, got,
                                       _timing_want(which, fresh), out_name)
        problem = "" if kernel_item.passed else kernel_item.message
        if not problem:
            events_item, pair = _events_item(tasks, api, kt, call.value)
            measured = _measurement_item(call.value, kt, pair, tasks, runtime)
            problem = next((i.message for i in (events_item, measured) if not i.passed), "")
    return again_outcome("time_kernel", call, problem,
                         f"inputs of the same size and {blocks} block(s)",
                         "timed the new launch",
                         "time the launch you are given on each call, with events recorded "
                         "around it: a time kept from an earlier call is wrong once the block "
                         "count or the data change")


@exercise("05.time_kernel", "time_kernel: time a kernel with two events", "time_kernel",
          limit_s=10)
def grade_time_kernel(fn, seed: int) -> Case:
    """One case: a random kernel and block count; the stream busy, idle or the default one."""
    rng = np.random.default_rng([5, 1, seed])
    which = int(rng.integers(0, 3))
    block_dim = int(rng.integers(1, 9))
    stream_state = ("busy", "idle", "default")[seed % 3]
    kern, label, inputs, out_name, want, build = _timing_case(rng, which)
    label += f", {block_dim} block(s), " + {
        "busy": "the stream still uploading the input",
        "idle": "the stream idle",
        "default": "on the default stream (0), still uploading the input"}[stream_state]
    with isolated() as runtime:
        prov = Provenance(runtime)
        acl.init()
        acl.rt.set_device(0)
        stream = 0 if stream_state == "default" else acl.rt.create_stream()[0]
        stream_obj = runtime.stream_for(stream)
        ptrs, staged, release = {}, {}, []
        raw = {name: arr.tobytes() for name, arr in inputs.items()}
        out_size = len(raw[out_name])
        readback, _ = acl.rt.malloc_host(out_size)
        release.append(("", (acl.rt.free_host, readback)))
        for name, data in raw.items():
            size = len(data)
            ptrs[name], _ = acl.rt.malloc(size, ACL_MEM_MALLOC_HUGE_FIRST)
            staged[name], _ = acl.rt.malloc_host(size)
            acl.rt.memcpy(staged[name], size, acl.util.bytes_to_ptr(data), size,
                          ACL_MEMCPY_HOST_TO_HOST)
            release += [(f"the device buffer {name} (acl.rt.free failed)",
                         (acl.rt.free, ptrs[name])), ("", (acl.rt.free_host, staged[name]))]
        for name, data in raw.items():     # the upload is still in flight when fn is called
            acl.rt.memcpy_async(ptrs[name], len(data), staged[name], len(data),
                                ACL_MEMCPY_HOST_TO_DEVICE, stream)
        if stream_state == "idle":
            acl.rt.synchronize_stream(stream)
        if stream_state != "default":
            release.append(("the stream (acl.rt.destroy_stream failed)",
                            (acl.rt.destroy_stream, stream)))

        call, api, after_id, tasks = _call(runtime, fn, acl, kern, block_dim, build(ptrs), stream)
        ops_ret = len(runtime.host_ops)
        case = new_case(label, call, runtime)
        if case.not_done:
            return case
        # the caller reads the output at once, with a blocking copy (it waits for no stream)
        acl.rt.memcpy(readback, out_size, ptrs[out_name], out_size, ACL_MEMCPY_DEVICE_TO_HOST)
        got = acl.util.ptr_to_bytes(readback, out_size)
        at_ns = runtime.host_ns
        graded, again = [], None
        if call.error is None:
            kernel_item, kt = _kernel_item(tasks, kern, block_dim, stream_obj, got, want,
                                           out_name)
            if kernel_item.passed:
                kernel_item = _computed_item(kernel_item, prov,
                                             Order(runtime, marks=(ops_ret,)), kt, readback,
                                             got, at_ns, ops_ret, out_name)
            events_item, pair = _events_item(tasks, api, kt, call.value)
            graded = [kernel_item, events_item,
                      _measurement_item(call.value, kt, pair, tasks, runtime)]
            if all(i.passed for i in graded):
                again = _time_again(runtime, fn, rng, which, kern, block_dim, inputs, out_name,
                                    build, ptrs, staged, readback, stream, stream_obj)
        failed = teardown(release)

        case.items.append(ran_item(call, "time_kernel"))
        if call.error is not None:
            return case
        case.items += graded
        if again is not None:
            case.items.append(again)
        case.items.append(_sanitizer_item(runtime, call, after_id, "time_kernel"))
        case.items.append(_resources_item(runtime, failed, "time_kernel"))
        return case


def _kernel_item(tasks, kern, block_dim, stream_obj, got: bytes, want: bytes, out_name: str):
    """'kernel': launched once, on the caller's stream, with block_dim blocks; output right."""
    hint = ("launch it once, on the stream you were given: acl.rt.launch_kernel(kernel, "
            "block_dim, args, stream)")
    mine = [t for t in tasks if t.kind == "kernel" and t.name == kern.name]
    if not mine:
        return Item("kernel", False, f"the trace has no launch of {kern.name}", hint), None
    if len(mine) > 1:
        ids = ", ".join(str(t.id) for t in mine)
        return Item("kernel", False, f"{kern.name} ran {len(mine)} times (tasks {ids}): time "
                                     "one launch", hint), None
    kt = mine[0]
    if kt.stream is not stream_obj:
        return Item("kernel", False, f"task {kt.id} {kt.name} ran on {kt.stream.name}, not on "
                                     f"{stream_obj.name}: nothing orders it after the upload "
                                     "of its input queued there", hint), None
    if kt.info.get("block_dim") != block_dim:
        return Item("kernel", False, f"task {kt.id} {kt.name} ran on {kt.info.get('block_dim')}"
                                     " blocks, not on the block_dim you were given", hint), None
    close = len(got) == len(want) and np.allclose(       # matmul: summation order may differ
        np.frombuffer(got, np.float32), np.frombuffer(want, np.float32), rtol=1e-4, atol=1e-3)
    problem = "" if close else _describe(got, want, f"the output {out_name}")
    if problem:
        return Item("kernel", False, f"{problem} when time_kernel returned",
                    "pass args unchanged, and wait for the end event before returning"), kt
    return Item("kernel", True, f"task {kt.id} {kt.name} ran once on {stream_obj.name} with "
                                f"{block_dim} block(s), and its output was right"), kt


def _events_item(tasks, api, kt, value):
    """'events': timed records before and after the kernel on its stream, and elapsed_time."""
    hint = ("create two events, record one on the stream just before launch_kernel and one "
            "just after, synchronize the second, then acl.rt.event_elapsed_time(start, end)")
    elapsed = [c for c in api if c[0] == "event_elapsed_time"]
    records = [t for t in tasks if t.kind == "event_record"]
    if not records and not elapsed:
        return Item("events", False, "no record_event and no event_elapsed_time: a host or "
                                     "wall clock times the host (the launch, the queue ahead "
                                     "of the kernel, the wake-up), not the kernel", hint), None
    if kt is None:
        return Item("events", False, "with no single launch of the kernel on your stream there "
                                     "is nothing for the events to bracket", hint), None
    if not any(c[3] == 0 for c in elapsed):
        if not elapsed:
            return Item("events", False, "you recorded events but never called "
                                         "acl.rt.event_elapsed_time", hint), None
        codes = sorted({c[3] for c in elapsed})
        why = "; ".join(f"{code}, {_ELAPSED_CODES.get(code, 'see the warnings below')}"
                        for code in codes)
        return Item("events", False, f"acl.rt.event_elapsed_time returned {why}", hint), None
    same = [t for t in records if t.stream is kt.stream]
    before = [t for t in same if t.id < kt.id]
    after = [t for t in same if t.id > kt.id]
    where = kt.stream.name
    if not same:
        on = ", ".join(sorted({t.stream.name for t in records}))
        return Item("events", False, f"your records ran on {on}, but the kernel on {where}: "
                                     "they time another queue", hint), None
    if not before or not after:
        side = "before" if not before else "after"
        return Item("events", False, f"no record on {where} {side} the kernel (task {kt.id}): "
                                     "two records must bracket the launch", hint), None
    if isinstance(value, numbers.Real) and not isinstance(value, bool):
        for b in reversed(before):
            for a in after:
                if abs((a.end_ns - b.end_ns) / 1e6 - float(value)) < 1e-9:
                    return Item("events", True,
                                f"{where} recorded task {b.id} before the kernel and task "
                                f"{a.id} after it, and you returned the time between "
                                "them"), (b, a)
    return Item("events", False, "the value you returned is not the time between a record "
                                 f"before and a record after the kernel on {where}: return "
                                 "what event_elapsed_time gives (its first value)", hint), None


def _measurement_item(value, kt, pair, tasks, runtime) -> Item:
    """'measurement': the value (ms) is the kernel's duration in the trace, up to the slack."""
    name = "measurement"
    if not isinstance(value, numbers.Real) or isinstance(value, bool):
        return Item(name, False, f"time_kernel returned a {type(value).__name__}, not a number "
                                 "of milliseconds",
                    "return the float that event_elapsed_time gives (ms, not (ms, ret))")
    if not math.isfinite(value):
        return Item(name, False, f"time_kernel returned {value}, not a finite number of "
                                 "milliseconds", "return the float that event_elapsed_time gives")
    if kt is None:
        return Item(name, False, "there is no single kernel launch to compare with",
                    "launch the kernel once on the stream you were given")
    k_ns = kt.end_ns - kt.start_ns
    got_ns = float(value) * 1e6
    slack = slack_ns(runtime.profile)
    if k_ns <= got_ns <= k_ns + slack:
        return Item(name, True, f"you measured {float(value):.4f} ms; the kernel ran "
                                f"{format_us(k_ns)} in the trace; the rest is the end record's own "
                                "time (and the launch, when the stream was idle)")
    if got_ns == 0:
        return Item(name, False, "time_kernel returned 0 ms, what a failed "
                                 "event_elapsed_time returns as its first value",
                    "look at the ret code event_elapsed_time returns (last in its tuple) and "
                    "at the warnings below")
    ratio = got_ns / k_ns if k_ns else float("inf")
    unit = ("event_elapsed_time already returns milliseconds: return its value as it is")
    if got_ns < k_ns:
        if 300 <= 1 / max(ratio, 1e-30) <= 3000:
            return Item(name, False, f"{float(value):.6g} ms is about 1000 times shorter than "
                                     "the kernel ran in the trace", unit)
        return Item(name, False, f"{float(value):.6g} ms is shorter than the kernel ran in the "
                                 "trace: the window did not hold the whole kernel",
                    "record the start event before launch_kernel and the end event after it, "
                    "on the same stream (0.0 is what a failed event_elapsed_time returns)")
    if 300 <= ratio <= 3000:
        return Item(name, False, f"{float(value):.6g} ms is about 1000 times longer than the "
                                 "kernel ran in the trace", unit)
    if pair is None:
        return Item(name, False, f"{float(value):.6g} ms is longer than the kernel ran in the "
                                 "trace: a host clock also counts the launch, the work queued "
                                 "ahead of the kernel and the host's wake-up (and a wall "
                                 "clock counts Python, not the device)",
                    "measure with events recorded on the stream: the device stamps them when "
                    "it reaches them")
    start, _end = pair
    between = [t for t in tasks if t.stream is kt.stream and start.id < t.id < kt.id
               and t.kind not in ("event_record", "event_wait")]
    if between:
        names = ", ".join(f"task {t.id} {t.name}" for t in between[:3])
        return Item(name, False, f"{float(value):.6g} ms is longer than the kernel ran: your "
                                 f"window also holds {names}",
                    "record the start event right before launch_kernel, with nothing queued "
                    "in between")
    gap = kt.start_ns - start.end_ns
    return Item(name, False, f"{float(value):.6g} ms is longer than the kernel ran: "
                             f"{kt.stream.name} sat idle for {format_us(gap)} between your start "
                             "record and the kernel, while the host was busy elsewhere",
                "launch the kernel right after recording the start event: no synchronize or "
                "other work on the host in between")


def _computed_item(passed: Item, prov: Provenance, order: Order, kt, readback: int, got: bytes,
                   at_ns: int, ops_ret: int, out_name: str) -> Item:
    """'kernel', further: the output the caller read was written by that launch on the AI Core
    (and carried by the caller's copy), and the host had waited for it before returning."""
    hint = ("launch the kernel once on the stream you were given and leave its output alone; "
            "wait for the end record before returning")
    why = prov.computed_on(readback, got, at_ns, engines=("aicore",),
                           what=f"the output {out_name}")
    if not why:
        other = [p.origin.task for p in prov.trace_back(readback, readback + len(got), at_ns)
                 if p.origin is not None and p.origin.task is not kt]
        if other:
            t = other[0]
            why = (f"the output {out_name} came from task {t.id} {t.name}, not from the launch "
                   f"the events timed (task {kt.id})")
    if why:
        return Item("kernel", False, why, hint)
    if not order.host_knows(kt, ops_ret):
        return Item("kernel", False, f"time_kernel returned before it had waited for task "
                                     f"{kt.id} {kt.name}: its output was not ready for the "
                                     "caller", hint)
    return passed


def _handed_item(passed: Item, prov: Provenance, order: Order, host_out, got, at_ns: int,
                 ops_ret: int) -> Item:
    """'results', further: every round's bytes were computed on the AI Core and carried by the
    consumer's copy, and the host had waited for those copies before handoff returned."""
    hint = ("call produce(i) and consume(i) for every round and leave their buffers alone; "
            "synchronize the consumer stream once, after the last consume")
    for i, (ptr, data) in enumerate(zip(host_out, got, strict=True)):
        why = prov.computed_on(ptr, data, at_ns, engines=("aicore",),
                               what=f"host_out[{i}]")
        if why:
            return Item("results", False, why, hint)
        for p in prov.trace_back(ptr, ptr + len(data), at_ns):
            for t in p.carried_by[:1]:
                if not order.host_knows(t, ops_ret):
                    return Item("results", False,
                                f"handoff returned before it had waited for task {t.id} "
                                f"{t.name}, the copy that fills host_out[{i}]", hint)
    return passed


# -- 05.handoff --------------------------------------------------------------------------------

@exercise("05.handoff", "handoff: stream B consumes stream A's output every round", "handoff",
          limit_s=10, edges=(0, 1))
def grade_handoff(fn, seed: int) -> Case:
    """One case: 3 to 6 rounds of 64 to 256 KiB, a slow producer; B maybe the default stream.

    Odd seeds have an odd number of rounds; no round's size is a multiple of a 4 KiB page.
    """
    rng = np.random.default_rng([5, 2, seed])
    n = count_for(rng, seed, 3, 7)          # odd seeds, odd counts (edges: 1)
    elems = int(rng.integers(16 * KiB, 64 * KiB)) | 1        # 4 * odd: never whole pages
    nbytes = 4 * elems
    work = int(rng.integers(6, 16)) * 1_000
    blocks = int(rng.integers(1, 5))
    consumer_default = seed % 3 == 2
    inputs = [rng.standard_normal(elems).astype(np.float32) for _ in range(n)]
    raw_in = [x.tobytes() for x in inputs]
    want = [(np.float32(0.5) * x + np.float32(1)).tobytes() for x in inputs]
    label = (f"{n} rounds of {nbytes:,} bytes, consumer on "
             + ("the default stream (0)" if consumer_default else "an explicit stream"))
    with isolated() as runtime:
        prov = Provenance(runtime)
        acl.init()
        acl.rt.set_device(0)
        producer, _ = acl.rt.create_stream()
        consumer = 0 if consumer_default else acl.rt.create_stream()[0]
        a_obj, b_obj = runtime.stream_for(producer), runtime.stream_for(consumer)
        host_in = [acl.rt.malloc_host(nbytes)[0] for _ in range(n)]
        host_out = [acl.rt.malloc_host(nbytes)[0] for _ in range(n)]
        dev = [acl.rt.malloc(nbytes, ACL_MEM_MALLOC_HUGE_FIRST)[0] for _ in range(n)]
        for ptr, data in zip(host_in, raw_in, strict=True):
            acl.rt.memcpy(ptr, nbytes, acl.util.bytes_to_ptr(data), nbytes,
                          ACL_MEMCPY_HOST_TO_HOST)
        calls: list[tuple] = []       # (what, i, first task id, end task id, host start, end)

        def step(what: str, i, body) -> None:
            if isinstance(i, bool) or not isinstance(i, numbers.Integral) or not 0 <= i < n:
                raise IndexError(f"{what}(i) needs a round number 0 <= i < {n} (got {i!r})")
            i = int(i)
            first, start = len(runtime.tasks), runtime.host_ns
            body(i)
            calls.append((what, i, first, len(runtime.tasks), start, runtime.host_ns))

        def produce(i) -> None:
            """Queue round i's work on the producer stream: upload, then a slow kernel."""
            def body(i):
                acl.rt.memcpy_async(dev[i], nbytes, host_in[i], nbytes,
                                    ACL_MEMCPY_HOST_TO_DEVICE, producer)
                acl.rt.launch_kernel(refine, blocks, (dev[i], elems, work), producer)
            step("produce", i, body)

        def consume(i) -> None:
            """Queue round i's download on the consumer stream: it reads what produce(i) made."""
            def body(i):
                acl.rt.memcpy_async(host_out[i], nbytes, dev[i], nbytes,
                                    ACL_MEMCPY_DEVICE_TO_HOST, consumer)
            step("consume", i, body)

        call, api, after_id, tasks = _call(runtime, fn, acl, producer, consumer, produce,
                                           consume, n)
        ops_ret = len(runtime.host_ops)
        case = new_case(label, call, runtime)
        if case.not_done:
            return case
        got = [acl.util.ptr_to_bytes(ptr, nbytes) for ptr in host_out]   # the caller reads
        at_ns = runtime.host_ns
        results = _results_item(got, want, raw_in) if call.error is None else None
        first_calls, again = list(calls), None
        if results is not None and results.passed:
            # the caller hands off new inputs of the same size, in the same runtime
            fresh = [rng.standard_normal(elems).astype(np.float32) for _ in range(n)]
            fresh_in = [x.tobytes() for x in fresh]
            for ptr, data in zip(host_in, fresh_in, strict=True):
                acl.rt.memcpy(ptr, nbytes, acl.util.bytes_to_ptr(data), nbytes,
                              ACL_MEMCPY_HOST_TO_HOST)
            calls.clear()
            again_call = call_learner(fn, acl, producer, consumer, produce, consume, n)
            fresh_want = [(np.float32(0.5) * x + np.float32(1)).tobytes() for x in fresh]
            second = _results_item([acl.util.ptr_to_bytes(p, nbytes) for p in host_out],
                                   fresh_want, fresh_in)
            again = again_outcome("handoff", again_call,
                                  "" if second.passed else second.message,
                                  "inputs of the same size", "handed the new rounds over")
        release = release_each("host_in[{i}] (acl.rt.free_host failed)", acl.rt.free_host,
                               host_in)
        release += release_each("host_out[{i}] (acl.rt.free_host failed)", acl.rt.free_host,
                                host_out)
        release += release_each("round {i}'s device buffer (acl.rt.free failed)", acl.rt.free,
                                dev)
        release.append(("the producer stream (acl.rt.destroy_stream failed)",
                        (acl.rt.destroy_stream, producer)))
        if not consumer_default:
            release.append(("the consumer stream (acl.rt.destroy_stream failed)",
                            (acl.rt.destroy_stream, consumer)))
        failed = teardown(release)

        case.items.append(ran_item(call, "handoff"))
        if call.error is not None:
            return case
        if results.passed:
            results = _handed_item(results, prov, Order(runtime, marks=(ops_ret,)), host_out,
                                   got, at_ns, ops_ret)
        case.items.append(results)
        calls_item, rounds = _calls_item(first_calls, n)
        case.items.append(calls_item)
        if rounds is not None:
            case.items.append(_wait_item(tasks, rounds, a_obj, b_obj, api))
            case.items.append(_host_item(api, rounds))
        if again is not None:
            case.items.append(again)
        case.items.append(_sanitizer_item(runtime, call, after_id, "handoff"))
        case.items.append(_resources_item(runtime, failed, "handoff"))
        return case


def _results_item(got, want, raw_in) -> Item:
    problems = [_describe(g, w, f"host_out[{i}]",
                          {f"round {i}'s input, not yet refined by the producer's kernel":
                           raw_in[i]})
                for i, (g, w) in enumerate(zip(got, want, strict=True))]
    bad = [p for p in problems if p]
    if not bad:
        return Item("results", True, f"every host_out[i] held round i's result when handoff "
                                     f"returned ({len(got)} rounds)")
    return Item("results", False,
                join_first(bad, 2),
                "each consume(i) must wait until the producer stream has finished produce(i)'s "
                "work, and handoff must wait for the consumer stream before returning")


def _calls_item(calls, n: int):
    """'calls': produce(i) then consume(i), once each, for every round."""
    produced = [c[1] for c in calls if c[0] == "produce"]
    consumed = [c[1] for c in calls if c[0] == "consume"]
    problems = []
    for what, seen in (("produce", produced), ("consume", consumed)):
        for i in range(n):
            count = seen.count(i)
            if count == 0:
                problems.append(f"{what}({i}) was never called")
            elif count > 1:
                problems.append(f"{what}({i}) was called {count} times")
    if not problems:
        order = [(c[0], c[1]) for c in calls]
        for i in range(n):
            if order.index(("consume", i)) < order.index(("produce", i)):
                problems.append(f"consume({i}) was called before produce({i}): a record "
                                "captures only work already queued, so nothing could order "
                                "them")
                break
    if problems:
        return Item("calls", False, "; ".join(problems[:3]),
                    "for i in range(n): produce(i), then (with an event in between) "
                    "consume(i)"), None
    rounds = {(c[0], c[1]): c for c in calls}
    return Item("calls", True, f"produce(i) then consume(i), once each, for all {n} rounds"), \
        rounds


def _round_of(rounds, record_id: int, n: int) -> int:
    """The last round whose production a record made at ``record_id`` captures (-1: none)."""
    done = [i for i in range(n) if rounds[("produce", i)][3] <= record_id]
    return max(done) if done else -1


def _wait_item(tasks, rounds, a_obj, b_obj, api) -> Item:
    """'B waits for A': before each consume(i), B waited on a record made right after produce(i)."""
    n = len(rounds) // 2
    by_id = {t.id: t for t in tasks}
    waits = [t for t in tasks if t.kind == "event_wait" and t.stream is b_obj]
    hint = ("every round: record_event(ev, producer_stream) right after produce(i), then "
            "stream_wait_event(consumer_stream, ev) right before consume(i)")
    if not waits:
        blocked = any(c[0] in _BLOCKING for c in api)
        text = f"{b_obj.name} never waited on an event (stream_wait_event)"
        if blocked:
            text += ": only the host's synchronisation kept the rounds in order"
        return Item("B waits for A", False, text, hint)
    for i in range(n):
        p_end = rounds[("produce", i)][3]
        c_first = rounds[("consume", i)][2]
        prior = [w for w in waits if w.id < c_first]
        recs = [(w, by_id.get(w.info.get("record_task", -1))) for w in prior]
        good = [(w, r) for w, r in recs if r is not None and r.stream is a_obj
                and r.id >= p_end]
        if not good:
            since = rounds[("consume", i - 1)][3] if i else -1
            recent = [(w, r) for w, r in recs if w.id > since and r is not None]
            if recent:
                w, r = recent[-1]
                if r.stream is not a_obj:
                    text = (f"before consume({i}), {b_obj.name} waited (task {w.id}) on record "
                            f"task {r.id}, made on {r.stream.name}, not on the producer "
                            f"stream {a_obj.name}")
                else:
                    made = _round_of(rounds, r.id, n)
                    when = (f"after produce({made})" if made >= 0
                            else "before any produce")
                    text = (f"before consume({i}), {b_obj.name} waited (task {w.id}) on record "
                            f"task {r.id}, made {when}: a stale record, so round {i}'s own "
                            "work was not waited for")
            else:
                text = (f"nothing made {b_obj.name} wait for produce({i})'s work before "
                        f"consume({i})")
            return Item("B waits for A", False, text, hint)
        if i + 1 < n:
            nxt = rounds[("produce", i + 1)][2]
            late = [(w, r) for w, r in recs if r is not None and r.stream is a_obj
                    and r.id > nxt]
            if late:
                w, r = late[0]
                return Item("B waits for A", False,
                            f"before consume({i}), {b_obj.name} waited (task {w.id}) on record "
                            f"task {r.id}, made after produce({_round_of(rounds, r.id, n)}): "
                            f"round {i} waited for later rounds' work too, longer than "
                            "necessary", hint)
    return Item("B waits for A", True, f"before each consume(i), {b_obj.name} waited on a "
                                       f"record made right after produce(i) ({n} fresh "
                                       "records)")


def _host_item(api, rounds) -> Item:
    """'host never blocks': no synchronize or polling while the rounds are being queued."""
    lo = min(c[4] for c in rounds.values())
    hi = max(c[5] for c in rounds.values())
    found = [c for c in api if lo <= c[1] < hi and c[0] in _BLOCKING + _POLLING]
    if not found:
        return Item("host never blocks", True, "the host queued all rounds without waiting: "
                                               "the consumer stream did the waiting")
    names = ", ".join(qualified(x) for x in sorted({c[0] for c in found}))
    spent = sum(c[2] - c[1] for c in found)
    return Item("host never blocks", False,
                f"while queueing the rounds the host called {names} {len(found)} time(s) and "
                f"spent {format_us(spent)} waiting: the consumer could have "
                "waited on its own, and the host could have queued the next rounds meanwhile",
                "let the consumer stream wait (stream_wait_event); synchronize only once, "
                "after the last consume")


_guard.seal(_sys.modules[__name__])        # the grader's own helpers refuse learner code
