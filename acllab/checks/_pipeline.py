"""The double-stream pipeline grading kit that lessons 06 and 11 share.

The stand-in model with real weights (:func:`standin_graph`), its numpy oracle, the
simulated host that prepares and post-processes batches (:class:`PipelineHost`), and the
result, device-work and hazard items both lessons grade with. Every function here is
sealed, as the lessons' own are: it refuses calls from learner code while a check runs.
"""

from __future__ import annotations

import dataclasses
import sys as _sys
import zlib
from collections import Counter
from dataclasses import dataclass, field

import numpy as np

from .. import acl, session
from ..acl.util import _host_view
from ..analysis import trace
from ..errors import Fail
from ..model.graph import Graph, Op, TensorSpec, seeded_weights
from . import PROCESS, RESULT, Item, _guard, call_learner
from ._common import (
    BytesWording,
    Provenance,
    again_outcome,
    describe_bytes,
    hazards,
    reads_uninit,
)

STANDIN_LAYERS = 24
STANDIN_WIDTH = 64
IMAGE = (32, 16, 16)        # feature maps per image
_CLASSES = 10
# sanitizer findings after which a right result may be luck of the timing: result items
_TIMING_HAZARDS = frozenset({"race", "host-read-before-sync", "host-write-while-read",
                             "use-after-free", "uninitialised-read", "stale-event-wait",
                             "event-reset-while-waited", "wait-never-recorded",
                             "model-two-streams"})
_BYTES = BytesWording(
    length="{what} has {got:,} bytes, but the scores of a batch are {want:,}",
    differs="{what} differs from the right scores from byte {at:,} on (it has {sample} ...)",
    uninit=(", the DE AD BE EF pattern acllab puts in memory that nothing has written yet: "
            "the scores had not been copied there when the host read them"))


def standin_graph(layers: int = STANDIN_LAYERS, width: int = STANDIN_WIDTH) -> Graph:
    """A classifier head with real (seeded) weights: 32 feature maps of 16x16 per image.

    Global average pooling, then ``layers`` narrow fully connected layers and a softmax over
    10 classes. Its kernels are small, so one run is mostly the AI Core's per-kernel dispatch:
    long enough (about 0.6 ms) to hide host work behind, and cheap to compute in numpy (every
    matrix product stays below the size at which BLAS starts threads), so a check can verify
    every score.
    """
    ops = [Op("GlobalAvgPool", "pool", ["features"], ["pool"], {}),
           Op("Flatten", "flat", ["pool"], ["flat"], {})]
    x = "flat"
    for n in range(layers):
        ops.append(Op("FullyConnected", f"fc{n}", [x], [f"fc{n}"], {"out_features": width}))
        ops.append(Op("Relu", f"relu{n}", [f"fc{n}"], [f"relu{n}"], {}))
        x = f"relu{n}"
    ops.append(Op("FullyConnected", "logits", [x], ["logits"], {"out_features": _CLASSES}))
    ops.append(Op("Softmax", "scores", ["logits"], ["scores"], {}))
    graph = Graph("standin", [TensorSpec("features", (1, *IMAGE), "fp32", "NCHW")],
                  [TensorSpec("scores", (), "fp32", "ND")], ops,
                  description="lesson 06's stand-in classifier head (real weights)")
    graph.weights = seeded_weights(graph, 6)
    return graph


def oracle(setup, compiled) -> tuple[tuple[bytes, ...], tuple[int, ...]]:
    """(each batch's scores from the compiled model run in numpy, each batch's input CRC-32).

    Bytes and ints: a cached oracle nobody can change in place.
    """
    scores, inputs = [], []
    for i in range(setup.batches):
        images = np.ascontiguousarray(setup.images(i), np.float32)
        inputs.append(zlib.crc32(images.view(np.uint8).ravel()))
        with np.errstate(all="ignore"):
            out = compiled.forward({"features": images})[0]
        scores.append(np.ascontiguousarray(out, np.float32).tobytes())
    return tuple(scores), tuple(inputs)


@dataclass(frozen=True)
class _Read:
    """One call of postprocess: where and when it read, and what it found."""

    ptr: int
    at_ns: int
    data: bytes


class PipelineHost:
    """prepare/postprocess for one case: charge host time, move real bytes, remember it all.

    Lesson 11 reuses it; its kit has no host buffers, so the error messages name none. What
    it remembers is checked against the runtime's own log of host work afterwards
    (:meth:`tampered`), so records written past the callbacks do not count.
    """

    in_example: str | None = "kit.host_in[0]"
    out_example: str | None = "kit.host_out[0]"

    def __init__(self, setup, kit, in_bytes: int | None = None):
        self.setup = setup
        self.kit = kit
        self.in_bytes = kit.in_size if in_bytes is None else in_bytes
        self.prepared: Counter = Counter()
        self.prepare_spans: list[tuple[int, int]] = []
        self.prepare_batches: list[int] = []
        self.postprocess_spans: list[tuple[int, int]] = []
        self.got: dict[int, list[bytes]] = {}
        self.reads: dict[int, list[_Read]] = {}
        self._frozen = (dataclasses.astuple(setup), dataclasses.astuple(kit))

    def _batch(self, what: str, i) -> int:
        n = self.setup.batches
        if isinstance(i, bool) or not isinstance(i, (int, np.integer)):
            raise TypeError(f"{what}(i, host_ptr): i is the batch number, an int from 0 to "
                            f"{n - 1}, not {type(i).__name__}")
        if not 0 <= int(i) < n:
            raise ValueError(f"{what}({i}, host_ptr): there are {n} batches, numbered 0 to "
                             f"{n - 1}")
        return int(i)

    def _view(self, what: str, i: int, host_ptr, size: int, mode: str, example: str | None):
        """The host's view of ``size`` bytes at ``host_ptr`` (the sanitizer sees the access)."""
        such_as = f" such as {example}" if example else ""
        if isinstance(host_ptr, bool) or not isinstance(host_ptr, (int, np.integer)):
            raise TypeError(f"{what}({i}, host_ptr): host_ptr is the address (an int) of a host "
                            f"buffer of {size:,} bytes{such_as}, not {type(host_ptr).__name__}")
        try:
            return _host_view(int(host_ptr), size, "host_ptr", mode)
        except Fail as exc:
            raise ValueError(f"{what}({i}, host_ptr): {exc.message}; pass a host buffer of at "
                             f"least {size:,} bytes{such_as}") from None

    def prepare(self, i, host_ptr) -> None:
        """Decode batch ``i`` into the host buffer ``host_ptr`` (kit.in_size bytes)."""
        i = self._batch("prepare", i)
        runtime = session.current_runtime()
        start = runtime.host_ns
        session.host_work(self.setup.prepare_ns, f"prepare batch {i}")
        view = self._view("prepare", i, host_ptr, self.in_bytes, "w", self.in_example)
        view[:] = self.setup.images(i).view(np.uint8).ravel()
        self.prepared[i] += 1
        self.prepare_batches.append(i)
        self.prepare_spans.append((start, runtime.host_ns))

    def postprocess(self, i, host_ptr) -> None:
        """Read batch ``i``'s scores from the host buffer ``host_ptr`` (kit.out_size bytes)."""
        i = self._batch("postprocess", i)
        runtime = session.current_runtime()
        start = runtime.host_ns
        view = self._view("postprocess", i, host_ptr, self.kit.out_size, "r", self.out_example)
        data = view.tobytes()
        self.got.setdefault(i, []).append(data)
        self.reads.setdefault(i, []).append(_Read(int(host_ptr), start, data))
        session.host_work(self.setup.postprocess_ns, f"post-process batch {i}")
        self.postprocess_spans.append((start, runtime.host_ns))

    def tampered(self, runtime, first_api: int) -> str:
        """Why the records cannot be trusted ('' if they can): they must match the runtime's
        log of host work, and the setup and kit must be as the check made them."""
        if (dataclasses.astuple(self.setup), dataclasses.astuple(self.kit)) != self._frozen:
            return "the case's settings or the kit were changed (leave the kit alone)"
        log = Counter((name, start, end) for name, start, end, *_ in runtime.api_log[first_api:]
                      if name.startswith(("host: prepare batch ", "host: post-process batch ")))
        mine = Counter()
        batches = iter(self.prepare_batches)
        for start, _end in self.prepare_spans:
            i = next(batches, None)
            mine[(f"host: prepare batch {i}", start, start + self.setup.prepare_ns)] += 1
        for i, reads in self.reads.items():
            for read in reads:
                mine[(f"host: post-process batch {i}", read.at_ns,
                      read.at_ns + self.setup.postprocess_ns)] += 1
        counts_ok = (sum(self.prepared.values()) == len(self.prepare_spans)
                     == len(self.prepare_batches)
                     and all(len(self.got.get(i, [])) == len(r) for i, r in self.reads.items())
                     and set(self.got) == set(self.reads))
        if mine - log or not counts_ok:
            return ("the records of prepare and postprocess do not match the host work the "
                    "runtime logged: only calls of prepare(i, host_ptr) and postprocess(i, "
                    "host_ptr) count")
        return ""


@dataclass
class _Run:
    """One run of the kit's model: its kernels, and which batch's input it read."""

    ops: list = field(default_factory=list)
    batch: int | None = None
    why: str = ""           # why its input was no batch's
    feeders: tuple = ()     # the tasks that last wrote its input

    @property
    def first(self):
        return self.ops[0]

    @property
    def last(self):
        return self.ops[-1]


@dataclass
class _Work:
    """The runs of the kit's model during the learner's function, and the AI Core's other
    work (a kernel, another model)."""

    runs: list[_Run]
    foreign: list
    run_of: dict[int, _Run]          # the id of a run's last kernel -> the run
    by_batch: dict[int, list[_Run]]

    @property
    def busy(self) -> list[tuple[int, int]]:
        return _merged([(t.start_ns, t.end_ns) for r in self.runs for t in r.ops
                        if t.start_ns >= 0 and t.end_ns > t.start_ns])


def _merged(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    merged: list[list[int]] = []
    for s, e in sorted(spans):
        if merged and s <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], e)
        else:
            merged.append([s, e])
    return [(s, e) for s, e in merged]


def find_work(runtime, tasks, prov: Provenance, is_ours, in_bytes: int,
               input_crcs: tuple[int, ...]) -> _Work:
    """Group the AI Core's tasks into runs of the kit's model and name each run's batch."""
    core = trace.resolve_resource(runtime, "aicore")
    runs: list[_Run] = []
    foreign = []
    run_by_op: dict[int, _Run] = {}
    for t in tasks:
        if t.resource is not core or t.cancelled or t.end_ns < 0:
            continue
        if t.kind != "model_op" or not is_ours((t.info or {}).get("model")):
            foreign.append(t)
            continue
        prev = next((d for d, label in t.deps if label == "model"), None)
        run = run_by_op.get(prev) if prev is not None else None
        if run is None:
            run = _Run()
            runs.append(run)
        run.ops.append(t)
        run_by_op[t.id] = run
    by_crc: dict[int, int] = {}
    for i, crc in enumerate(input_crcs):
        by_crc.setdefault(crc, i)
    by_batch: dict[int, list[_Run]] = {}
    for run in runs:
        reads = [m for m in (run.first.info or {}).get("mem", ()) if m[4] == "r"]
        if not reads:
            run.why = "it read no input"
            continue
        lo = reads[0][2]
        crc, run.feeders, run.why = _bytes_crc(prov, lo, in_bytes, run.first.start_ns)
        if crc is not None:
            run.batch = by_crc.get(crc)
            if run.batch is None:
                run.why = "its input held no batch's images"
        if run.batch is not None:
            by_batch.setdefault(run.batch, []).append(run)
    run_of = {run.last.id: run for run in runs}
    return _Work(runs, foreign, run_of, by_batch)


def _bytes_crc(prov: Provenance, lo: int, n: int, at_ns: int) -> tuple[int | None, tuple, str]:
    """(CRC-32 of the n bytes tasks had written from ``lo`` by ``at_ns``, the writing tasks,
    why not) from what Provenance saw."""
    pieces = prov.writers(lo, lo + n, at_ns)
    feeders = tuple(dict.fromkeys(w.task for *_ab, w in pieces if w is not None))
    if any(w is None for *_ab, w in pieces):
        return None, feeders, "no copy had filled its input when it started"
    crc = 0
    for a, b, w in pieces:
        if w.data is not None:
            crc = zlib.crc32(w.data[a - w.lo:b - w.lo], crc)
        elif len(pieces) == 1 and (a, b) == (w.lo, w.hi):
            crc = w.crc
        else:
            return None, feeders, "its input could not be read back"
    return crc, feeders, ""


def _origins(prov: Provenance, read: _Read) -> list:
    """The tasks whose writes the bytes of ``read`` trace back to (None: the host)."""
    return [p.origin.task if p.origin is not None else None
            for p in prov.trace_back(read.ptr, read.ptr + len(read.data), read.at_ns)]


def device_item(work: _Work, host: PipelineHost, prov: Provenance, n: int, model: str,
                 tampered: str) -> Item:
    """'device work': the scores the host read were computed by the model's run on that batch
    on the AI Core and copied back unchanged; the model ran each batch once."""
    if tampered:
        return Item("device work", False, tampered,
                    "call prepare and postprocess for every batch; the check grades what "
                    "they saw, nothing else", kind=RESULT)
    per_batch: list[tuple[int, str]] = []       # (batch, why its scores are not the device's)
    hint = ""
    for i in sorted(host.reads):
        read = host.reads[i][-1]
        unwritten = any(w is None for *_ab, w in prov.writers(read.ptr, read.ptr + len(read.data),
                                                              read.at_ns))
        if unwritten and reads_uninit(read.data, 0):
            per_batch.append((i, f"nothing had written batch {i}'s scores into the buffer "
                                 "postprocess read, when it read them"))
            hint = hint or ("copy each batch's scores back from the model's output buffer and "
                            "wait for that copy before postprocess")
            continue
        why = prov.computed_on(read.ptr, read.data, read.at_ns, engines=("aicore",),
                               what=f"batch {i}'s scores")
        if why:
            per_batch.append((i, why))
            hint = hint or ("run every batch through the model with acl.mdl.execute_async and "
                            "copy its scores back with a device-to-host copy; the host must "
                            "not compute, write or change the scores itself")
            continue
        for task in _origins(prov, read):
            if task is not None and task.id not in work.run_of:
                per_batch.append((i, f"batch {i}'s scores were written by task {task.id} "
                                     f"{task.name} ({task.kind}), which is not a run of "
                                     f"{model}"))
                hint = hint or (f"the scores must come from {model}, run with "
                                "acl.mdl.execute_async on the batch's input")
                break
    problems = []
    if per_batch:
        others = [i for i, _why in per_batch[1:]]
        problems.append(per_batch[0][1] + (f" (and so for batch {_list(others)})"
                                           if others else ""))
    never = [i for i in range(n) if i not in work.by_batch]
    if not work.runs:
        problems.append(f"{model} never ran on the AI Core")
    elif never:
        problems.append(f"{model} never ran on the input of batch {_list(never)}")
    if never:
        hint = hint or ("copy each batch's prepared input into a device input buffer and run "
                        "the model on it (execute_async with that buffer's dataset)")
    twice = [i for i, runs in sorted(work.by_batch.items()) if len(runs) > 1]
    if twice:
        problems.append(f"{model} ran the input of batch {_list(twice)} more than once")
        hint = hint or "run the model once per batch"
    junk = [r for r in work.runs if r.batch is None]
    if junk:
        problems.append(f"{model} ran {len(junk)} time(s) on an input that was no batch's "
                        f"({junk[0].why})")
        hint = hint or ("run the model only on a batch's input, after its copy has landed "
                        "(the model's stream waits for an event recorded after the copy)")
    if problems:
        return Item("device work", False, "; ".join(problems), hint, kind=RESULT)
    return Item("device work", True,
                f"every batch's scores were computed by {model} on the AI Core, from that "
                f"batch's input, and copied back unchanged; {len(work.runs)} runs for {n} "
                "batches", kind=RESULT)


def results_item(n: int, scores: tuple[bytes, ...], host: PipelineHost, work: _Work,
                  prov: Provenance, names: dict[int, str], slot: str) -> Item:
    """'results': every batch prepared, and post-processed exactly once with its own scores.

    A wrong batch is explained from what the device really did (Provenance), not guessed from
    whose scores it holds. ``slot`` words the hint's buffers ('kit.host_out[k]' ...).
    """
    problems, hints = [], []
    unprepared = [i for i in range(n) if not host.prepared[i]]
    if unprepared:
        problems.append(f"prepare was never called for batch {_list(unprepared)}")
        hints.append("call prepare(i, host_ptr) once for every batch i, before its copy")
    again = [i for i in range(n) if host.prepared[i] > 1]
    if again:
        problems.append(f"prepare was called more than once for batch {_list(again)}")
        hints.append("prepare each batch exactly once")
    missing = [i for i in range(n) if i not in host.got]
    if missing:
        problems.append(f"postprocess was never called for batch {_list(missing)}")
        hints.append(f"call postprocess(i, ...) for every batch, the last one ({n - 1}) too, "
                     "before your function returns")
    twice = [i for i, got in sorted(host.got.items()) if len(got) > 1]
    if twice:
        problems.append(f"postprocess was called more than once for batch {_list(twice)}")
        hints.append("post-process each batch exactly once")
    wrong = [i for i in sorted(host.got) if host.got[i][-1] != scores[i]
             and not _close(host.got[i][-1], scores[i])]
    for i in wrong[:2]:
        problem, hint = _why_wrong(i, host.reads[i][-1], scores, work, prov, names, slot)
        problems.append(problem)
        hints.append(hint)
    if len(wrong) > 2:
        problems.append(f"and {len(wrong) - 2} more batches got wrong scores")
    if problems:
        return Item("results", False, "; ".join(problems), hints[0], kind=RESULT)
    return Item("results", True, f"all {n} batches were prepared, run and post-processed with "
                                 "their own scores", kind=RESULT)


def _why_wrong(i: int, read: _Read, scores: tuple[bytes, ...], work: _Work, prov: Provenance,
               names: dict[int, str], slot: str) -> tuple[str, str]:
    """(what is wrong with batch i's scores, a hint naming the real cause)."""
    where = names.get(read.ptr, "the host buffer")
    holds = next((j for j, s in enumerate(scores) if j != i and _close(read.data, s)), None)
    what = (f"batch {i}'s scores (read from {where}) are those of batch {holds}"
            if holds is not None else
            describe_bytes(read.data, scores[i], f"batch {i}'s scores (read from {where})",
                           None, _BYTES))
    origins = _origins(prov, read)
    runs = [work.run_of.get(t.id) if t is not None else None for t in origins]
    mine = work.by_batch.get(i, [])
    if any(t is None for t in origins) or prov.changed_after(read.ptr, read.data,
                                                             read.at_ns) is not None:
        if reads_uninit(read.data, 0):
            return what, ("nothing had copied scores into that buffer when postprocess read it: "
                          "copy each batch's scores back (device to host) and wait for that "
                          "copy before you call postprocess")
        return what, ("the host wrote those bytes itself: the scores must come from the model "
                      "on the device, copied back with a device-to-host copy")
    ran = [r for r in runs if r is not None]
    if not ran:
        return what, ("those bytes were not written by a run of the model: copy back the "
                      "output buffer of the run that read this batch's input")
    run = ran[0]
    if run.batch == i:          # the right run, yet other bytes: a late copy mixed them
        return what, ("the bytes came from this batch's run but were overwritten while the host "
                      "read them: wait for the copy back, and give each batch in flight its own "
                      f"output buffers ({slot})")
    if run.batch is None:
        if "no copy" in run.why:
            return what, ("the model read its input before the copy of this batch had landed: "
                          "make the model's stream wait (stream_wait_event) for an event "
                          "recorded on the copy stream after the copy")
        return what, ("the model read an input that was no batch's whole images: a copy was "
                      "writing the input buffer while the run read it. Give each batch in "
                      "flight its own input slot and order copy and run with events")
    j = run.batch
    if mine:
        landed = [w for w in prov.writes if w.task.kind in ("memcpy", "staging")
                  and w.covers(read.ptr, read.ptr + len(read.data))
                  and w.data is not None
                  and _close(w.data[read.ptr - w.lo:read.ptr - w.lo + len(read.data)],
                             scores[i])]
        if any(w.task.end_ns > read.at_ns for w in landed) and not any(
                w.task.end_ns <= read.at_ns for w in landed):
            return what, (f"the host read {where} before batch {i}'s scores were copied into "
                          f"it (it still held batch {j}'s): wait for this batch's copy back "
                          "(synchronize_stream or synchronize_event) before postprocess")
        if landed:
            return what, (f"batch {j}'s scores were copied into {where} after batch {i}'s and "
                          f"before the host read them: two batches in flight shared one output "
                          f"buffer; give each its own ({slot})")
        return what, (f"batch {i}'s scores were never copied back into {where}, the buffer "
                      f"postprocess read: copy each batch's output to the host buffer you then "
                      "pass to postprocess (the slot numbers must match along the way)")
    return what, (f"the model never ran on batch {i}'s input: batch {j}'s copy overwrote the "
                  "input buffer before the model read it. Each batch in flight needs its own "
                  "input slot until its run has finished")


def _close(got: bytes, want: bytes) -> bool:
    if len(got) != len(want):
        return False
    a, b = np.frombuffer(got, np.float32), np.frombuffer(want, np.float32)
    with np.errstate(all="ignore"):
        return bool(np.allclose(a, b, rtol=1e-5, atol=1e-7))


def _list(batches: list[int]) -> str:
    shown = ", ".join(map(str, batches[:5]))
    return shown + (f" and {len(batches) - 5} more" if len(batches) > 5 else "")


def hazard_items(runtime, names: dict[int, str], inputs: set[int],
                  outputs: set[int]) -> list[Item]:
    """'race-free' (timing hazards: a result item) and 'sanitizer' (the other findings).

    ``names`` names buffers in messages; ``inputs`` and ``outputs`` are the model's device
    input buffers and the host buffers postprocess read, for the hints.
    """
    findings = hazards(runtime)
    timing = [f for f in findings if f.kind in _TIMING_HAZARDS]
    other = [f for f in findings if f.kind not in _TIMING_HAZARDS]
    clean = Item("race-free", True, "no hazard: no two streams raced on a buffer and the host "
                                    "read every result after synchronising", kind=RESULT)
    items = [clean if not timing else Item(
        "race-free", False,
        "the sanitizer found hazards that make the results depend on timing; right scores "
        "here would be luck:\n" + _finding_lines(runtime, timing, names),
        _fix(runtime, timing[0], inputs, outputs), kind=RESULT)]
    items.append(Item("sanitizer", True, "no other finding (no pageable async copy ...)",
                      kind=PROCESS) if not other else
                 Item("sanitizer", False, _finding_lines(runtime, other, names), other[0].fix,
                      kind=PROCESS))
    return items


def _finding_lines(runtime, findings, names: dict[int, str]) -> str:
    tasks = runtime.tasks
    lines = []
    for f in findings[:3]:
        notes = [f"the buffer is {', '.join(names[b] for b in f.buffers if b in names)}"
                 if any(b in names for b in f.buffers) else ""]
        notes += [f"task {t} {tasks[t].name} is a kernel of the model" for t in f.tasks
                  if 0 <= t < len(tasks) and tasks[t].kind == "model_op"][:1]
        notes = [n for n in notes if n]
        lines.append(f"[{f.kind}] {f.message}" + (f" ({'; '.join(notes)})" if notes else ""))
    if len(findings) > 3:
        lines.append(f"... and {len(findings) - 3} more")
    return "\n".join(lines)


def _fix(runtime, first, inputs: set[int], outputs: set[int]) -> str:
    tasks = runtime.tasks
    fix = first.fix
    kinds = [tasks[t].kind for t in first.tasks if 0 <= t < len(tasks)]
    if first.kind == "race" and any(b in inputs for b in first.buffers):
        if kinds[:1] == ["model_op"]:
            return ("this is the seed's bug: the copy of a later batch overwrites the input "
                    "that the model is still reading. Copy batch i into slot k = i % 2 "
                    "(its own input buffer and dataset), and before reusing a slot make the "
                    "copy stream wait (stream_wait_event) for an event recorded after the run "
                    "that last read it")
        return ("the model may read its input before the copy has landed: record an event on "
                "the copy stream after each copy and make the model's stream wait for it "
                "(stream_wait_event) before execute_async")
    if first.kind == "host-read-before-sync" and any(b in outputs for b in first.buffers):
        fix += ("; if you did wait for this batch's own copy, the copy back of another batch "
                "into the same host buffer is what races: give each batch in flight its own "
                "host output buffer")
    return fix


def idle(name: str, kind: str) -> Item:
    """An item that cannot pass when the model never ran: there is nothing to judge."""
    return Item(name, False, "nothing to judge: the model never ran on the AI Core",
                "run every batch through the model (acl.mdl.execute_async) first", kind=kind)


def again_batches(batches: int) -> int:
    """How many batches the second call serves: few, and of the other parity than the first
    call's (an even count then an odd one, or the reverse)."""
    return 3 + batches % 2


def again_item(fn, runtime, setup, kit, compiled, prov: Provenance, is_ours, names: dict,
               slot: str, function: str, in_bytes: int) -> Item:
    """'again': the learner's pipeline called a second time in the same runtime, on the same
    kit, with other images and another number of batches (:func:`again_batches`): every new
    batch must be post-processed with its own scores.

    A result item: a pipeline that keeps state from its first call (scores, a batch counter,
    events or streams it assumes fresh) gives wrong results the second time its caller uses it.
    """
    n = again_batches(setup.batches)
    fresh = dataclasses.replace(setup, seed=setup.seed + 1_000_003, batches=n)
    scores, crcs = oracle(fresh, compiled)
    host = PipelineHost(fresh, kit)
    call = call_learner(fn, acl, kit, n, host.prepare, host.postprocess)
    tasks = runtime.tasks[call.first_task:]
    problem = ""
    if call.error is None:
        work = find_work(runtime, tasks, prov, is_ours, in_bytes, crcs)
        results = results_item(n, scores, host, work, prov, names, slot)
        problem = "" if results.passed else results.message
    return again_outcome(function, call, problem, f"images, {n} batches of them",
                         "post-processed every new batch with its own scores",
                         f"{function} must serve every call from what it is given: keep no "
                         "batch counter, scores or half-released streams and events from an "
                         "earlier call (create what you need and release it before returning)")


_guard.seal(_sys.modules[__name__])        # the grader's own helpers refuse learner code
