"""What happened: trace records, queries over them, and a Chrome Trace Event export.

Every task the engine ran is one record (stream, engine, submit/ready/start/end, bytes, flops,
reads, writes, dependencies). The queries work on integer nanoseconds over a half-open window
``[t0, t1)`` that defaults to [first task start, last task end]; cancelled tasks count for
nothing, and a task still running counts up to the engine's current time.

The export follows msprof's timeline: a process "CANN" with the host's API calls
(thread "AscendCL"), per device a process "Ascend Hardware (device N)" with one thread per
stream plus "Sync copies" for stream-less tasks, and a process "Engines (device N)" that repeats
the tasks by hardware engine. Arrows (flow events) join an event record to each task that waited
on it, and an API call to the first task it submitted. Time is in microseconds, as in msprof.

Differs from hardware: msprof names API rows by their C names (aclrtMemcpyAsync); this export
uses the pyACL names (memcpy_async), as the learner wrote them.
"""

from __future__ import annotations

import bisect
import json
from collections import Counter
from itertools import accumulate
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .._version import __version__
from ..engine import Resource, Task

if TYPE_CHECKING:  # type hints only: trace sits below the runtime and never imports it
    from ..runtime import Runtime

__all__ = [
    "records", "resolve_resource", "busy_ns", "utilisation", "core_utilisation", "overlap_ns",
    "throughput", "tasks_per_second", "to_chrome_trace", "write_chrome_trace", "summary",
    "RESOURCE_NAMES",
]

# short name -> Device attribute, in the order msprof-like rows are drawn
RESOURCE_NAMES = {"aicore": "aicore", "h2d": "h2d", "d2h": "d2h", "d2d": "d2d",
                  "host": "host_lane", "callbacks": "callback_lane",
                  "jpegd": "jpegd", "vpc": "vpc", "jpege": "jpege", "pngd": "pngd",
                  "vdec": "vdec", "venc": "venc"}
_ROW_LABEL = {"aicore": "AI Core", "h2d": "H2D DMA", "d2h": "D2H DMA", "d2d": "D2D DMA",
              "host": "Host staging", "callbacks": "Host callbacks",
              "jpegd": "JPEGD", "vpc": "VPC", "jpege": "JPEGE", "pngd": "PNGD",
              "vdec": "VDEC", "venc": "VENC"}
# the DVPP media engines: a device has them once acl.media used it (Device.dvpp), and the
# export and the summary show them only for a device that ran a DVPP task
_DVPP_NAMES = ("jpegd", "vpc", "jpege", "pngd", "vdec", "venc")
# the engines made on first use: PNGD once a PNG was decoded, the video engines once a video
# channel created them (DvppDevice.has_engine)
_VIDEO_NAMES = ("pngd", "vdec", "venc")
_SCALARS = (int, float, str, bool)


# -- records -----------------------------------------------------------------------------------

def records(runtime: Runtime) -> list[dict]:
    """One plain, JSON-serialisable dict per recorded task, in submission order."""
    out = []
    for t in runtime.engine.tasks:
        s = t.stream
        info = {k: v for k, v in sorted((t.info or {}).items()) if isinstance(v, _SCALARS)}
        out.append({
            "id": t.id, "name": t.name, "kind": t.kind, "device": t.device,
            "stream": s.index if s is not None else None,
            "stream_name": s.name if s is not None else None,
            "engine": t.engine_name, "units": t.units,
            "submit_ns": t.submit_ns, "ready_ns": t.ready_ns, "start_ns": t.start_ns,
            "end_ns": t.end_ns, "nbytes": t.nbytes, "flops": t.flops,
            "reads": [[int(a), int(n)] for a, n in t.reads],
            "writes": [[int(a), int(n)] for a, n in t.writes],
            "deps": [[d, label] for d, label in t.deps], "api": t.api,
            "cancelled": t.cancelled, "info": info,
        })
    return out


# -- queries -----------------------------------------------------------------------------------

def resolve_resource(runtime: Runtime, resource: Resource | str, device: int = 0) -> Resource:
    """The Resource object for a Resource, a short name ('aicore', 'h2d', ...) or a full name."""
    if isinstance(resource, Resource):
        return resource
    dev = runtime.devices[device]
    attr = RESOURCE_NAMES.get(str(resource).lower())
    if attr is not None:
        return getattr(dev, attr)
    for d in runtime.devices:
        for res in d.resources:
            if res.name == resource:
                return res
    raise ValueError(f"unknown resource {resource!r}: use a Resource or one of "
                     f"{sorted(RESOURCE_NAMES)} (with device=N)")


def _engines(dev, used_dvpp: bool) -> dict[str, Resource]:
    """Short name -> Resource of ``dev``'s engines; the DVPP ones only when ``used_dvpp``."""
    return {short: getattr(dev, attr) for short, attr in RESOURCE_NAMES.items()
            if short not in _DVPP_NAMES or (used_dvpp and dev.has_dvpp and (
                short not in _VIDEO_NAMES or dev.dvpp.has_engine(short)))}


def _dvpp_devices(tasks) -> set[int]:
    """The devices on which a DVPP task ran (or runs)."""
    return {t.device for t in tasks if t.kind == "dvpp" and t.start_ns >= 0}


def _spans(runtime: Runtime) -> list[tuple[Task, int, int]]:
    """(task, start, end) of every task that has started and was not cancelled."""
    now = runtime.engine.now_ns
    return [(t, t.start_ns, t.end_ns if t.end_ns >= 0 else max(now, t.start_ns))
            for t in runtime.engine.tasks if t.start_ns >= 0 and not t.cancelled]


def _window(runtime: Runtime, t0: int | None, t1: int | None) -> tuple[int, int]:
    if t0 is None or t1 is None:
        # min and max over _spans, without building it
        now = runtime.engine.now_ns
        lo = hi = None
        for t in runtime.engine.tasks:
            s = t.start_ns
            if s < 0 or t.cancelled:
                continue
            e = t.end_ns
            if e < 0:
                e = now if now > s else s
            if lo is None or s < lo:
                lo = s
            if hi is None or e > hi:
                hi = e
        if lo is None:
            lo = 0
        if hi is None:
            hi = lo
        t0 = lo if t0 is None else t0
        t1 = hi if t1 is None else t1
    return int(t0), int(t1)


def _union(intervals, t0: int, t1: int) -> list[tuple[int, int]]:
    """Merged intervals, clipped to [t0, t1)."""
    # sorted, then clipped: clipping keeps the starts in order, and the union is the same
    merged: list[list[int]] = []
    for a, b in sorted(intervals):
        if a < t0:
            a = t0
        if b > t1:
            b = t1
        if b <= a:
            continue
        if merged and a <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], b)
        else:
            merged.append([a, b])
    return [(a, b) for a, b in merged]


def _on(runtime: Runtime, res: Resource) -> list[tuple[Task, int, int]]:
    """_spans of the tasks on ``res`` (filtered first)."""
    now = runtime.engine.now_ns
    return [(t, t.start_ns, t.end_ns if t.end_ns >= 0 else max(now, t.start_ns))
            for t in runtime.engine.tasks
            if t.resource is res and t.start_ns >= 0 and not t.cancelled]


def _busy(runtime: Runtime, resource, device: int, lo: int, hi: int) -> list[tuple[int, int]]:
    res = resolve_resource(runtime, resource, device)
    now = runtime.engine.now_ns
    return _union([(t.start_ns, t.end_ns if t.end_ns >= 0 else max(now, t.start_ns))
                   for t in runtime.engine.tasks
                   if t.resource is res and t.start_ns >= 0 and not t.cancelled], lo, hi)


def busy_ns(runtime: Runtime, resource: Resource | str, t0: int | None = None,
            t1: int | None = None, *, device: int = 0) -> int:
    """Nanoseconds of [t0, t1) in which at least one unit of ``resource`` is in use."""
    lo, hi = _window(runtime, t0, t1)
    return sum(b - a for a, b in _busy(runtime, resource, device, lo, hi))


def utilisation(runtime: Runtime, resource: Resource | str, t0: int | None = None,
                t1: int | None = None, *, device: int = 0) -> float:
    """Busy time of ``resource`` divided by the window (0.0 for an empty window)."""
    lo, hi = _window(runtime, t0, t1)
    if hi <= lo:
        return 0.0
    return busy_ns(runtime, resource, lo, hi, device=device) / (hi - lo)


def core_utilisation(runtime: Runtime, resource: Resource | str = "aicore",
                     t0: int | None = None, t1: int | None = None, *, device: int = 0) -> float:
    """Unit-weighted occupancy: sum(units x time) / (capacity x window), e.g. of the AI Cores."""
    res = resolve_resource(runtime, resource, device)
    lo, hi = _window(runtime, t0, t1)
    if hi <= lo or res.capacity <= 0:
        return 0.0
    used = sum(t.units * max(0, min(e, hi) - max(s, lo)) for t, s, e in _on(runtime, res))
    return used / (res.capacity * (hi - lo))


def overlap_ns(runtime: Runtime, resource_a: Resource | str, resource_b: Resource | str,
               t0: int | None = None, t1: int | None = None, *, device: int = 0) -> int:
    """Nanoseconds of [t0, t1) in which both resources are busy at once."""
    lo, hi = _window(runtime, t0, t1)
    a = _busy(runtime, resource_a, device, lo, hi)
    b = _busy(runtime, resource_b, device, lo, hi)
    total, i, j = 0, 0, 0
    while i < len(a) and j < len(b):
        total += max(0, min(a[i][1], b[j][1]) - max(a[i][0], b[j][0]))
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return total


def _select(runtime: Runtime, kind: str | None, device: int | None, direction: str | None):
    return [(t, s, e) for t, s, e in _spans(runtime)
            if (kind is None or t.kind == kind) and (device is None or t.device == device)
            and (direction is None or (t.info or {}).get("direction") == direction)]


def throughput(runtime: Runtime, kind: str = "memcpy", t0: int | None = None,
               t1: int | None = None, *, device: int | None = None,
               direction: str | None = None) -> float:
    """Bytes per second that tasks of ``kind`` moved over the window.

    A task that straddles the window edge counts in proportion to the part inside it. For
    pageable copies only the DMA part has kind "memcpy" (the staging part is "staging"), so
    bytes are not counted twice. ``direction`` ('h2d', 'd2h', 'd2d', 'h2h') filters copies.
    """
    lo, hi = _window(runtime, t0, t1)
    if hi <= lo:
        return 0.0
    moved = 0.0
    for t, s, e in _select(runtime, kind, device, direction):
        if e > s:
            moved += t.nbytes * max(0, min(e, hi) - max(s, lo)) / (e - s)
        elif lo <= s < hi:
            moved += t.nbytes
    return moved * 1e9 / (hi - lo)


def tasks_per_second(runtime: Runtime, kind: str | None = None, t0: int | None = None,
                     t1: int | None = None, *, device: int | None = None) -> float:
    """Tasks (of ``kind``, or all) that start in the window, per second of the window.

    With the default window, a task that starts exactly at its end counts too.
    """
    closed = t1 is None
    lo, hi = _window(runtime, t0, t1)
    if hi <= lo:
        return 0.0
    n = sum(1 for _, s, _ in _select(runtime, kind, device, None)
            if lo <= s < hi or (closed and s == hi))
    return n * 1e9 / (hi - lo)


# -- Chrome Trace Event export -----------------------------------------------------------------

def _lanes(items: list[tuple[int, int, int]]) -> dict[int, int]:
    """Greedy lanes so that slices in one lane never overlap: {key: lane} for (start, end, key)."""
    ends: list[int] = []
    lane_of = {}
    for s, e, key in sorted(items):
        for i, last in enumerate(ends):
            if last <= s:
                ends[i] = e
                lane_of[key] = i
                break
        else:
            lane_of[key] = len(ends)
            ends.append(e)
    return lane_of


class _Builder:
    """Collects rows (threads) and slices, then numbers pids/tids deterministically."""

    def __init__(self):
        self.procs: dict[int, str] = {}      # pid -> name; the pid is also the sort index
        self.rows: dict[tuple[int, tuple], tuple[str, int, list]] = {}

    def row(self, pid: int, key: tuple, name: str, sort: int) -> list:
        return self.rows.setdefault((pid, key), (name, sort, []))[2]

    def emit(self) -> tuple[list[dict], dict]:
        """Metadata + X events, and where each item went: {(pid, item_key): (pid, tid)}."""
        def meta(kind: str, pid: int, tid: int, args: dict) -> dict:
            return {"ph": "M", "name": kind, "pid": pid, "tid": tid, "args": args}

        head = [m for pid, name in sorted(self.procs.items())
                for m in (meta("process_name", pid, 0, {"name": name}),
                          meta("process_sort_index", pid, 0, {"sort_index": pid}))]
        slices: list[dict] = []
        where: dict = {}
        tids: dict[int, int] = {}
        for (pid, _key), (name, _sort, items) in sorted(self.rows.items(),
                                                        key=lambda kv: (kv[0][0], kv[1][1])):
            lane_of = _lanes([(s, e, i) for i, (s, e, _k, _ev) in enumerate(items)])
            base = tids.get(pid, 0)
            tids[pid] = base + max(lane_of.values(), default=0) + 1
            for tid in range(base + 1, tids[pid] + 1):
                label = name if tid == base + 1 else f"{name} [{tid - base}]"
                head += [meta("thread_name", pid, tid, {"name": label}),
                         meta("thread_sort_index", pid, tid, {"sort_index": tid})]
            for i, (s, e, item_key, ev) in enumerate(items):
                tid = base + 1 + lane_of[i]
                slices.append(ev | {"pid": pid, "tid": tid, "ts": s / 1000, "dur": (e - s) / 1000})
                where[(pid, item_key)] = (pid, tid)
        return head + slices, where


def _api_matcher(api_log):
    """A function task -> index of the one API call that submitted it, or None.

    A call matches when it has the task's ``api`` name and ``start <= submit_ns <= end``. Back to
    back calls share an instant, so among several matches only those that started before the
    submission count; if that does not leave exactly one, the task gets no arrow (never a guess).
    """
    groups: dict[str, list[int]] = {}
    for idx, call in enumerate(api_log):
        groups.setdefault(call[0], []).append(idx)
    by_name = {}
    for name, order in groups.items():
        order.sort(key=lambda i: (api_log[i][1], i))
        by_name[name] = (order, [api_log[i][1] for i in order],
                         list(accumulate((api_log[i][2] for i in order), max)))

    def match(task: Task) -> int | None:
        entry = by_name.get(task.api)
        if entry is None:
            return None
        order, starts, max_end = entry
        at = task.submit_ns
        k = bisect.bisect_right(starts, at) - 1
        found = []
        while k >= 0 and max_end[k] >= at:
            if api_log[order[k]][2] >= at:
                found.append(order[k])
            k -= 1
        if len(found) > 1:   # every call spends host time before it submits: not one starting now
            found = [i for i in found if api_log[i][1] < at]
        return found[0] if len(found) == 1 else None

    return match


def to_chrome_trace(runtime: Runtime) -> dict:
    """The trace as a Chrome Trace Event dict (loads in Perfetto and chrome://tracing)."""
    b = _Builder()
    b.procs[0] = "CANN"
    calls = b.row(0, ("api",), "AscendCL", 0)
    for idx, (name, start, end, ret) in enumerate(runtime.api_log):
        calls.append((start, end, ("api", idx),
                      {"ph": "X", "name": name, "cat": "AscendCL", "args": {"ret": ret}}))
    finished = [t for t in runtime.engine.tasks if t.start_ns >= 0 and t.end_ns >= 0]
    lanes = {d.id: d.callback_lane for d in runtime.devices}
    devices = sorted({t.device for t in finished})
    media = _dvpp_devices(finished)
    engines = {dev.id: _engines(dev, dev.id in media) for dev in runtime.devices}
    for d in devices:
        b.procs[1 + 2 * d] = f"Ascend Hardware (device {d})"
        b.procs[2 + 2 * d] = f"Engines (device {d})"
        for pos, short in enumerate(engines[d]):
            b.row(2 + 2 * d, ("engine", short), _ROW_LABEL[short], pos)
    engine_key = {id(res): (d, short)
                  for d, named in engines.items() for short, res in named.items()}
    hw_task: dict[int, Task] = {}
    for t in finished:
        args: dict[str, Any] = {k: v for k, v in (t.info or {}).items() if isinstance(v, _SCALARS)}
        args |= {"task_id": t.id, "kind": t.kind, "engine": t.engine_name, "api": t.api,
                 "submit_ns": t.submit_ns, "ready_ns": t.ready_ns, "bytes": t.nbytes,
                 "flops": t.flops, "cancelled": t.cancelled}
        item = (t.start_ns, t.end_ns, ("task", t.id),
                {"ph": "X", "name": t.name, "cat": t.kind, "args": args})
        if t.stream is None:
            b.row(1 + 2 * t.device, ("sync",), "Sync copies", 1 << 20).append(item)
            hw_task[t.id] = t
        elif t.resource is not lanes.get(t.device):   # a report runs beside its stream
            s = t.stream
            b.row(1 + 2 * t.device, ("stream", s.index), s.name, s.index).append(item)
            hw_task[t.id] = t
        key = engine_key.get(id(t.resource))
        if key is not None:
            b.row(2 + 2 * key[0], ("engine", key[1]), "", 0).append(
                (t.start_ns, t.end_ns, ("engine_task", t.id),
                 {"ph": "X", "name": t.name, "cat": t.kind,
                  "args": {"task_id": t.id, "stream": t.stream.name if t.stream else None}}))
    events, where = b.emit()
    flows: list[dict] = []

    def arrow(cat: str, src: tuple, src_ts: int, dst: tuple, dst_ts: int) -> None:
        fid = len(flows) // 2 + 1
        flows.append({"ph": "s", "name": cat, "cat": cat, "id": fid, "pid": src[0],
                      "tid": src[1], "ts": src_ts / 1000})
        flows.append({"ph": "f", "bp": "e", "name": cat, "cat": cat, "id": fid,
                      "pid": dst[0], "tid": dst[1], "ts": dst_ts / 1000})

    match = _api_matcher(runtime.api_log)
    first_task: dict[int, Task] = {}      # api call index -> the first task it submitted
    for _id, t in sorted(hw_task.items()):
        for dep_id, label in t.deps:
            dep = hw_task.get(dep_id)
            if label == "event" and dep is not None:
                arrow("event", where[(1 + 2 * dep.device, ("task", dep.id))], dep.start_ns,
                      where[(1 + 2 * t.device, ("task", t.id))], t.start_ns)
        idx = match(t) if t.api else None
        if idx is not None:
            first_task.setdefault(idx, t)
    for idx, t in sorted(first_task.items()):
        _name, start, end, _ret = runtime.api_log[idx]
        arrow("HostToDevice", where[(0, ("api", idx))], (start + end) // 2,
              where[(1 + 2 * t.device, ("task", t.id))], t.start_ns)
    unfinished = sum(1 for t in runtime.engine.tasks if t.end_ns < 0)
    return {
        "traceEvents": events + flows,
        "displayTimeUnit": "ns",
        "otherData": {"generator": f"acllab {__version__}", "acllab_version": __version__,
                      "profile": runtime.profile.name, "soc": runtime.profile.soc_name,
                      "tasks": len(runtime.engine.tasks), "unfinished_tasks": unfinished,
                      "api_calls": len(runtime.api_log), "host_ns": runtime.host_ns},
    }


def write_chrome_trace(runtime: Runtime, path: str | Path) -> Path:
    """Write :func:`to_chrome_trace` as compact JSON with sorted keys (byte-identical reruns)."""
    path = Path(path)
    with path.open("w", encoding="utf-8") as fh:
        json.dump(to_chrome_trace(runtime), fh, sort_keys=True, separators=(",", ":"))
    return path


# -- summary -----------------------------------------------------------------------------------

def _fmt_us(ns: int) -> str:
    return f"{ns / 1000:,.3f} us"


def summary(runtime: Runtime) -> str:
    """A short human-readable report: span, tasks, engines, bytes moved, overlap, API calls."""
    spans = _spans(runtime)
    lo, hi = _window(runtime, None, None)
    tasks = runtime.engine.tasks
    lines = [f"acllab trace summary ({runtime.profile.name}, {runtime.profile.soc_name})",
             f"virtual time: tasks from {_fmt_us(lo)} to {_fmt_us(hi)} (span {_fmt_us(hi - lo)});"
             f" host clock at {_fmt_us(runtime.host_ns)}"]
    kinds = Counter(t.kind for t in tasks)
    counted = ", ".join(f"{k} {n}" for k, n in sorted(kinds.items())) or "none"
    n_off, n_open = sum(t.cancelled for t in tasks), sum(t.end_ns < 0 for t in tasks)
    lines.append(f"tasks: {len(tasks)} ({counted})" + (f"; {n_off} cancelled" if n_off else "")
                 + (f"; {n_open} unfinished" if n_open else ""))
    media = _dvpp_devices(t for t, _, _ in spans)
    for d in sorted({t.device for t, _, _ in spans}):
        dev = runtime.devices[d]
        lines.append(f"device {d}:")
        for short in _engines(dev, d in media):
            busy = busy_ns(runtime, short, lo, hi, device=d)
            util = utilisation(runtime, short, lo, hi, device=d)
            row = f"  {_ROW_LABEL[short]:<15} busy {_fmt_us(busy):>16}  utilisation {util:6.1%}"
            if short == "aicore":
                core = core_utilisation(runtime, short, lo, hi, device=d)
                row += f"  (cores {core:.1%} of {dev.aicore.capacity})"
            lines.append(row)
        for direction in ("h2d", "d2h", "d2d", "h2h"):
            copies = list(_select(runtime, "memcpy", d, direction))
            if not copies:
                continue
            moved = sum(t.nbytes for t, _, _ in copies)
            active = sum(b - a for a, b in _union([(s, e) for _, s, e in copies], lo, hi))
            rate = f"{moved / active:.2f} GB/s achieved" if active else "no time"
            lines.append(f"  {direction.upper()} copies: {len(copies)}, {moved:,} B "
                         f"in {_fmt_us(active)} of transfer time: {rate}")
        laps = [f"{_ROW_LABEL[s]} {_fmt_us(overlap_ns(runtime, s, 'aicore', lo, hi, device=d))}"
                for s in ("h2d", "d2h", "d2d")]
        lines.append("  overlap with AI Core: " + ", ".join(laps))
        both = overlap_ns(runtime, "h2d", "d2h", lo, hi, device=d)
        lines.append(f"  overlap of H2D DMA with D2H DMA: {_fmt_us(both)}")
    lines.append(_api_calls_line(runtime))
    return "\n".join(lines)


def _api_calls_line(runtime: Runtime) -> str:
    """'API calls: N, errors: M (...)', with probes (quiet, expected failures such as
    AclLite's get_input_index_by_name 'ascend_mbatch_shape_data' on a static model) counted
    apart as ', probes: K (...)'."""
    probes = runtime.probe_calls
    failed: list[tuple[str, int]] = []
    probed: list[tuple[str, int]] = []
    for i, (name, _s, _e, ret) in enumerate(runtime.api_log):
        if ret != 0:
            (probed if i in probes else failed).append((name, ret))

    def common(calls: list[tuple[str, int]]) -> str:
        top = Counter(calls).most_common(5)
        return " (" + ", ".join(f"{name} -> {ret} x{n}" for (name, ret), n in top) + ")"

    line = f"API calls: {len(runtime.api_log)}, errors: {len(failed)}"
    if failed:
        line += common(failed)
    if probed:
        line += f", probes: {len(probed)}" + common(probed)
    return line
