"""Checks for lesson 06, the double-stream pipeline: race-free overlap that beats the serial loop.

Both exercises take the same arguments: ``fn(acl, kit, batches, prepare, postprocess) -> None``.

* ``kit`` (:class:`PipelineKit`) is what the check sets up before calling: a loaded model and two
  *slots* of buffers, each slot an input dataset over its own device input buffer, an output
  dataset over its own device output buffer, a pinned host input buffer and a pinned host
  output buffer. The function may use one slot or both; it creates its own streams and events
  and releases them before returning, and leaves the kit alone.
* ``prepare(i, host_ptr)`` decodes batch ``i`` into the host buffer ``host_ptr`` (it costs host
  time and writes the batch's real bytes); ``postprocess(i, host_ptr)`` reads batch ``i``'s
  scores from ``host_ptr`` (real bytes) and costs host time too. Every batch must be prepared,
  run through the model and post-processed exactly once, in any order that is correct.

``06.pipeline``: ``pipeline(acl, kit, batches, prepare, postprocess)``
    The seed's double-stream loop: prepare and copy batch i+1 on a second stream while the
    model runs batch i.

``06.stretch``: ``pipeline_ahead(acl, kit, batches, prepare, postprocess)``
    Hide the post-processing too: queue batch i+1 before waiting for batch i, so the AI Core
    never waits for the host.

Items. *Result* items (the work asked for; any failure scores the exercise 0):

* **runs**: the function returned;
* **results**: every batch prepared once and post-processed once with its own scores;
* **device work**: every post-processed batch's scores were computed by the kit's model on the
  AI Core, from that batch's input, and carried to the host by a device-to-host copy, unchanged;
  the model ran once per batch (:class:`acllab.checks._common.Provenance`);
* **two streams**: each batch after the first was copied to the card (``memcpy_async``) on a
  stream other than the one running the previous batch's model;
* **overlap**: the host prepared, and the copy engine copied, later batches while the AI Core
  ran earlier ones (at least :data:`OVERLAP_GOAL` of that time);
* **race-free**: the sanitizer finds no hazard that makes results depend on timing (races,
  reads before sync, use after free ...). A pipeline whose scores are right only because the
  simulated timing happened to be kind is not a right answer: it earns nothing;
* 06.stretch only, **ahead**: batch i+1's run was queued before batch i was post-processed.

*Process* items (how well; they count only once every result is right): **throughput** (at
least :data:`SPEEDUP_GOAL` times the check's own serial loop, run on the same kit), 06.stretch's
**utilisation** (the AI Core busy more than :data:`UTILISATION_GOAL` from the first model run
to the last), **sanitizer** (no other finding, e.g. an async copy of pageable memory) and
**resources** (nothing leaked, the kit intact).

The model is a stand-in for ResNet-50 with real weights (:func:`standin_graph`), so that every
batch's scores can be verified: a deep, narrow classifier head over 32 feature maps of 16x16
per image, whose run is about 0.6 ms of AI Core time per batch. Each case draws the batch
size, the number of batches, the host times (prepare about half of a model run,
post-processing about a sixth) and the data from its seed. The serial reference
(:func:`serial_reference`) runs on the same kit in a fresh runtime; the oracle for the scores
is the compiled model run in numpy. Both are computed before the learner's function runs.
"""

from __future__ import annotations

import sys as _sys
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from .. import acl
from ..constants import (
    ACL_MEM_MALLOC_HUGE_FIRST,
    ACL_MEMCPY_DEVICE_TO_HOST,
    ACL_MEMCPY_HOST_TO_DEVICE,
)
from ..model import compile_model, dumps, execute_ns
from . import PROCESS, RESULT, Call, Case, Item, _guard, call_learner, exercise, isolated, ran_item
from ._common import (
    Provenance,
    count_for,
    new_case,
    resources_item,
    teardown,
)
from ._pipeline import (
    IMAGE,
    STANDIN_LAYERS,
    STANDIN_WIDTH,
    PipelineHost,
    _list,
    _Run,
    _Work,
    again_item,
    device_item,
    find_work,
    hazard_items,
    idle,
    oracle,
    results_item,
    standin_graph,
)

__all__ = ["PipelineKit", "standin_graph", "serial_reference", "grade_pipeline", "grade_stretch",
           "SPEEDUP_GOAL", "UTILISATION_GOAL", "OVERLAP_GOAL", "LIMIT_S", "STANDIN_LAYERS",
           "STANDIN_WIDTH"]

SPEEDUP_GOAL = 1.25          # 06.pipeline: the serial loop's time / the pipeline's time
UTILISATION_GOAL = 0.90      # 06.stretch: AI Core busy time over the span of the model runs
OVERLAP_GOAL = 0.5           # share of later batches' prepare and copy time under the AI Core
LIMIT_S = 10.0               # wall-clock seconds per case (the reference takes about 0.05 s)


def _us(ns: float) -> str:
    return f"{ns / 1000:,.0f} us"


def _ms(ns: float) -> str:
    return f"{ns / 1e6:,.2f} ms"


# -- the stand-in model --------------------------------------------------------------------------


@lru_cache(maxsize=8)
def _model(batch: int):
    """(compiled model, its .om bytes) at a fixed batch size."""
    c, h, w = IMAGE
    compiled = compile_model(standin_graph(), input_shape=f"features:{batch},{c},{h},{w}",
                             soc_version="Ascend310")
    return compiled, dumps(compiled)


# -- one case: what the check draws from a seed -------------------------------------------------

@dataclass(frozen=True)
class _Setup:
    label: str
    exercise_no: int
    seed: int
    batch: int
    batches: int
    prepare_ns: int
    postprocess_ns: int

    def images(self, i: int) -> np.ndarray:
        """Batch ``i``'s input: a texture plus a level per image and map, drawn from the seed.

        Made on demand (a batch is a few MB; the check does not keep them).
        """
        rng = np.random.default_rng([6, self.exercise_no, self.seed, 100 + i])
        levels = rng.random((self.batch, IMAGE[0], 1, 1), dtype=np.float32) * 4 - 2
        return _texture(self.batch) + levels


@lru_cache(maxsize=4)
def _texture(batch: int) -> np.ndarray:
    texture = np.random.default_rng(606).random((batch, *IMAGE), dtype=np.float32) - 0.5
    texture.setflags(write=False)           # cached: nobody may change it in place
    return texture


@lru_cache(maxsize=16)
def _setup(exercise_no: int, seed: int) -> _Setup:
    rng = np.random.default_rng([6, exercise_no, seed])
    batch = int(rng.choice([16, 24, 32, 48]))     # <= 64 rows: BLAS stays single-threaded
    batches = count_for(rng, seed, 8, 13)      # odd seeds, odd counts (edges: 1)
    compiled, _ = _model(batch)
    k_ns = execute_ns(compiled)
    prepare_ns = int(k_ns * rng.uniform(0.45, 0.6)) // 1000 * 1000
    postprocess_ns = int(k_ns * rng.uniform(0.12, 0.2)) // 1000 * 1000
    label = (f"{batches} batches of {batch} images; prepare {_us(prepare_ns)} and "
             f"post-process {_us(postprocess_ns)} of host time per batch")
    return _Setup(label, exercise_no, seed, batch, batches, prepare_ns, postprocess_ns)


@lru_cache(maxsize=16)
def _truth(exercise_no: int, seed: int) -> tuple[tuple[bytes, ...], tuple[int, ...]]:
    setup = _setup(exercise_no, seed)
    return oracle(setup, _model(setup.batch)[0])


def _scores(exercise_no: int, seed: int) -> tuple[np.ndarray, ...]:
    """The oracle: each batch's scores (read-only arrays)."""
    return tuple(np.frombuffer(s, np.float32) for s in _truth(exercise_no, seed)[0])


# -- the kit: a loaded model and two slots of buffers -------------------------------------------

@dataclass(frozen=True)
class PipelineKit:
    """What the check sets up for your pipeline: a loaded model and two slots of buffers.

    Slot ``k`` (0 or 1) has an input dataset ``inputs[k]`` over the device buffer ``dev_in[k]``,
    an output dataset ``outputs[k]`` over ``dev_out[k]``, and pinned host buffers ``host_in[k]``
    (``in_size`` bytes, where ``prepare`` writes a batch) and ``host_out[k]`` (``out_size``
    bytes, where ``postprocess`` reads its scores). The check releases all of it afterwards.
    """

    model_id: int
    inputs: tuple[int, int]
    outputs: tuple[int, int]
    dev_in: tuple[int, int]
    dev_out: tuple[int, int]
    host_in: tuple[int, int]
    host_out: tuple[int, int]
    in_size: int
    out_size: int
    batch: int

    def __repr__(self) -> str:
        return (f"<PipelineKit: model {self.model_id} ({self.batch} images per batch), 2 slots: "
                f"inputs {list(self.inputs)}, outputs {list(self.outputs)}, "
                f"dev_in {[hex(p) for p in self.dev_in]}, dev_out "
                f"{[hex(p) for p in self.dev_out]}, host_in {[hex(p) for p in self.host_in]}, "
                f"host_out {[hex(p) for p in self.host_out]}, in_size {self.in_size:,} B, "
                f"out_size {self.out_size:,} B>")

    def names(self) -> dict[int, str]:
        """Address -> 'kit.dev_in[0]' ..., for messages."""
        return {p: f"kit.{name}[{k}]" for name in ("dev_in", "dev_out", "host_in", "host_out")
                for k, p in enumerate(getattr(self, name))}


def _make_kit(setup: _Setup) -> tuple[PipelineKit, list]:
    """Load the model and make both slots in the current runtime; also the release list."""
    _, om = _model(setup.batch)
    model_id, _ = acl.mdl.load_from_mem(acl.util.bytes_to_ptr(om), len(om))
    desc = acl.mdl.create_desc()
    acl.mdl.get_desc(desc, model_id)
    in_size = acl.mdl.get_input_size_by_index(desc, 0)
    out_size = acl.mdl.get_output_size_by_index(desc, 0)
    acl.mdl.destroy_desc(desc)
    parts: dict[str, list] = {k: [] for k in ("inputs", "outputs", "dev_in", "dev_out",
                                              "host_in", "host_out")}
    release: list = []
    for k in range(2):
        for name, size, ds_name in (("dev_in", in_size, "inputs"),
                                    ("dev_out", out_size, "outputs")):
            ptr, _ = acl.rt.malloc(size, ACL_MEM_MALLOC_HUGE_FIRST)
            buf = acl.create_data_buffer(ptr, size)
            ds = acl.mdl.create_dataset()
            acl.mdl.add_dataset_buffer(ds, buf)
            parts[name].append(ptr)
            parts[ds_name].append(ds)
            release += [(f"the dataset kit.{ds_name}[{k}] (destroy_dataset failed)",
                         (acl.mdl.destroy_dataset, ds)),
                        (f"a data buffer of kit.{ds_name}[{k}] (destroy_data_buffer failed)",
                         (acl.destroy_data_buffer, buf)),
                        (f"kit.{name}[{k}] (acl.rt.free failed)", (acl.rt.free, ptr))]
        for name, size in (("host_in", in_size), ("host_out", out_size)):
            ptr, _ = acl.rt.malloc_host(size)
            parts[name].append(ptr)
            release.append((f"kit.{name}[{k}] (acl.rt.free_host failed)",
                            (acl.rt.free_host, ptr)))
    release.append(("the model kit.model_id (acl.mdl.unload failed)", (acl.mdl.unload, model_id)))
    kit = PipelineKit(model_id, *(tuple(parts[k]) for k in ("inputs", "outputs", "dev_in",
                                                             "dev_out", "host_in", "host_out")),
                      in_size, out_size, setup.batch)
    return kit, release


# -- the host callbacks -------------------------------------------------------------------------


# -- the serial reference -----------------------------------------------------------------------

def serial_reference(acl, kit, batches, prepare, postprocess) -> None:
    """The seed's serial loop on the kit: prepare, copy, execute, copy back, post-process."""
    stream, _ = acl.rt.create_stream()
    for i in range(batches):
        prepare(i, kit.host_in[0])
        acl.rt.memcpy(kit.dev_in[0], kit.in_size, kit.host_in[0], kit.in_size,
                      ACL_MEMCPY_HOST_TO_DEVICE)
        acl.mdl.execute_async(kit.model_id, kit.inputs[0], kit.outputs[0], stream)
        acl.rt.synchronize_stream(stream)
        acl.rt.memcpy(kit.host_out[0], kit.out_size, kit.dev_out[0], kit.out_size,
                      ACL_MEMCPY_DEVICE_TO_HOST)
        postprocess(i, kit.host_out[0])
    acl.rt.destroy_stream(stream)


@lru_cache(maxsize=16)
def _serial_ns(exercise_no: int, seed: int) -> int:
    """Host time of the serial reference on this case's kit, in a fresh runtime."""
    setup = _setup(exercise_no, seed)
    with isolated():
        acl.init()
        acl.rt.set_device(0)
        kit, release = _make_kit(setup)
        host = PipelineHost(setup, kit)
        call = call_learner(serial_reference, acl, kit, setup.batches, host.prepare,
                            host.postprocess)
        if call.error is not None:
            raise RuntimeError(f"the serial reference failed: {call.error_text}")
        teardown(release)
    return call.end_ns - call.start_ns


# -- what the device did: the model's runs, traced with Provenance ------------------------------


# -- results ------------------------------------------------------------------------------------


# -- the structure the exercise asks for ----------------------------------------------------------

def _copies(run: _Run) -> list:
    """The DMA copies that last wrote a run's input."""
    return [t for t in run.feeders if t.kind == "memcpy"]


def _streams_item(work: _Work, n: int) -> Item:
    """'two streams': batch i + 1 copied on a stream other than the one running batch i."""
    if not work.runs:
        return Item("two streams", False, "the model never ran, so no stream carried its work",
                    "create two streams: one for the copies, one for the model's runs",
                    kind=RESULT)
    blocking, same = [], []
    used = set()
    for i in range(n):
        runs = work.by_batch.get(i)
        if not runs:
            continue
        used.add(runs[0].first.stream)
        copies = _copies(runs[0])
        used.update(c.stream for c in copies)
        prev = work.by_batch.get(i - 1) if i else None
        if not prev or not copies:
            continue
        stream = copies[-1].stream
        if stream is None:
            blocking.append(i)
        elif stream is prev[0].first.stream:
            same.append(i)
    used.discard(None)
    if blocking:
        return Item("two streams", False,
                    f"batch {_list(blocking)} reached the card with a blocking acl.rt.memcpy, "
                    "on no stream: the host waited for each copy",
                    "copy each batch with acl.rt.memcpy_async on a copy stream of its own, "
                    "and make the model's stream wait for it with an event", kind=RESULT)
    if same:
        return Item("two streams", False,
                    f"batch {_list(same)} was copied on the same stream that ran the previous "
                    "batch's model, so each copy waited for that run to finish",
                    "queue the copies on a second stream (memcpy_async), ordered against the "
                    "model's stream with events (record_event, stream_wait_event)", kind=RESULT)
    if len(used) < 2:
        return Item("two streams", False, "all the work ran on one stream",
                    "queue the copies on a second stream (memcpy_async), ordered against the "
                    "model's stream with events", kind=RESULT)
    return Item("two streams", True,
                f"each batch after the first was copied on a stream other than the one running "
                f"the previous batch's model ({len(used)} streams carried the work)", kind=RESULT)


def _covered(spans: list[tuple[int, int]], busy: list[tuple[int, int]]) -> tuple[int, int]:
    """(ns of ``spans`` during which ``busy`` is busy, total ns of ``spans``)."""
    inside = total = 0
    for s, e in spans:
        total += e - s
        inside += sum(max(0, min(e, b) - max(s, a)) for a, b in busy)
    return inside, total


def _overlap_item(host: PipelineHost, work: _Work, n: int) -> Item:
    """'overlap': the host prepared, and the DMA engine copied, later batches while the AI
    Core ran earlier ones."""
    busy = work.busy
    inside, total = _covered(host.prepare_spans[1:], busy)
    copies = [(c.start_ns, c.end_ns) for i in range(1, n) for r in work.by_batch.get(i, [])[:1]
              for c in _copies(r)]
    c_in, c_total = _covered(copies, busy)
    share = inside / total if total else 0.0
    c_share = c_in / c_total if c_total else 0.0
    text = (f"{share:.0%} of the host's prepare time and {c_share:.0%} of the input copies' "
            f"time (after the first batch) ran while the AI Core worked; the goal is "
            f"{OVERLAP_GOAL:.0%} of each")
    if total and c_total and share >= OVERLAP_GOAL and c_share >= OVERLAP_GOAL:
        return Item("overlap", True, text, kind=RESULT)
    return Item("overlap", False, text + ": the host, the copies and the AI Core took turns",
                "the point of the pipeline: right after queuing batch i (execute_async), "
                "prepare batch i + 1 and queue its copy on the other stream; wait for batch i "
                "only after that", kind=RESULT)


def _ahead_item(host: PipelineHost, work: _Work, n: int) -> Item:
    """'ahead' (06.stretch): batch i + 1's run was queued before batch i was post-processed."""
    late = []
    for i in range(n - 1):
        nxt, reads = work.by_batch.get(i + 1), host.reads.get(i)
        if nxt and reads and nxt[0].first.submit_ns > reads[-1].at_ns:
            late.append(i)
    if late or not work.runs:
        return Item("ahead", False,
                    f"the host post-processed batch {_list(late)} before it queued the next "
                    "batch's run, so the AI Core waited for the host"
                    if late else "the model never ran",
                    "queue batch i + 1's run (execute_async) before you wait for and "
                    "post-process batch i", kind=RESULT)
    return Item("ahead", True, "every batch's run was queued before the host post-processed "
                               "the batch before it", kind=RESULT)


# -- how well: throughput, utilisation -----------------------------------------------------------

def _throughput_item(setup: _Setup, call: Call, serial_ns: int,
                     busy: list[tuple[int, int]]) -> Item:
    took = max(1, call.end_ns - call.start_ns)
    ratio = serial_ns / took
    core = sum(e - s for s, e in busy) / took
    text = (f"{setup.batches} batches took {_ms(took)}: {ratio:.2f}x the serial loop's "
            f"{_ms(serial_ns)} on the same kit (the goal is {SPEEDUP_GOAL:.2f}x); the AI Core "
            f"was busy {core:.0%} of that time")
    if ratio >= SPEEDUP_GOAL:
        return Item("throughput", True, text, kind=PROCESS)
    return Item("throughput", False, text,
                "queue batch i on the model's stream with execute_async, and prepare and copy "
                "batch i + 1 (into the other slot, on a second stream) before you wait for "
                "batch i: a blocking call in between (execute, memcpy, synchronize) makes the "
                "host and the AI Core take turns", kind=PROCESS)


def _utilisation_item(host: PipelineHost, busy: list[tuple[int, int]]) -> Item:
    """'utilisation': the AI Core busy > 90% from the first model run to the last."""
    if not busy:
        return Item("utilisation", False, "the model never ran on the AI Core",
                    "run each batch with acl.mdl.execute_async", kind=PROCESS)
    lo, hi = busy[0][0], busy[-1][1]
    util = sum(e - s for s, e in busy) / max(1, hi - lo)
    gaps = [(busy[k][1], busy[k + 1][0]) for k in range(len(busy) - 1)]
    widest = max(gaps, key=lambda g: g[1] - g[0], default=None)
    text = (f"the AI Core was busy {util:.1%} of the time from the first model run "
            f"({_us(lo)}) to the end of the last ({_us(hi)}); the goal is more than "
            f"{UTILISATION_GOAL:.0%}")
    if util > UTILISATION_GOAL:
        return Item("utilisation", True, text, kind=PROCESS)
    if widest is not None:
        doing = [what for what, spans in (("post-processed", host.postprocess_spans),
                                          ("prepared", host.prepare_spans))
                 if any(s < widest[1] and widest[0] < e for s, e in spans)]
        text += (f"; its longest idle gap was {_us(widest[1] - widest[0])} at "
                 f"{_us(widest[0])}" + (f", while the host {' and '.join(doing)}"
                                        if doing else ""))
    return Item("utilisation", False, text,
                "queue batch i + 1's run before you wait for batch i: copy each batch's scores "
                "back on the model's stream into its own host_out slot, record an event after "
                "that copy, and post-process batch i (after acl.rt.synchronize_event on its "
                "event) while the AI Core runs batch i + 1", kind=PROCESS)


# -- the sanitizer: hazards that make results luck (result), the rest (process) ----------------


def _resources_item(runtime, failed: list[str], function: str) -> Item:
    """'resources': nothing leaked at the caller's teardown; the kit intact."""
    return resources_item(
        runtime, failed, function,
        released_hint="release only what your function created; the check releases the kit "
                      "(and never call reset_device or finalize in your function)",
        shown=5, source=" (found at {source})",
        leaked_hint="release what you create before returning, after synchronising: "
                    "destroy_event, then destroy_stream",
        clean="nothing leaked, and the kit was left for the check to release", kind=PROCESS)


# -- grading ------------------------------------------------------------------------------------

def _grade(fn, seed: int, exercise_no: int, function: str) -> Case:
    setup = _setup(exercise_no, seed)
    scores, input_crcs = _truth(exercise_no, seed)     # the oracle and the serial loop's
    serial_ns = _serial_ns(exercise_no, seed)          # time, before the function runs
    with isolated() as runtime:
        prov = Provenance(runtime)
        acl.init()
        acl.rt.set_device(0)
        kit, release = _make_kit(setup)
        model_id, names, n = kit.model_id, kit.names(), setup.batches
        host = PipelineHost(setup, kit)
        first_api = len(runtime.api_log)
        call = call_learner(fn, acl, kit, n, host.prepare, host.postprocess)
        case = new_case(setup.label, call, runtime)
        if case.not_done:
            return case
        tasks = runtime.tasks[call.first_task:]
        in_bytes = setup.batch * int(np.prod(IMAGE)) * 4
        slot = "kit.dev_out[k] and kit.host_out[k]"
        graded, again = [], None
        if call.error is None:
            work = find_work(runtime, tasks, prov, lambda mid: mid == model_id, in_bytes,
                             input_crcs)
            tampered = host.tampered(runtime, first_api)
            graded = [results_item(n, scores, host, work, prov, names, slot),
                      device_item(work, host, prov, n, "the kit's model", tampered)]
            if all(i.passed for i in graded):
                again = again_item(fn, runtime, setup, kit, _model(setup.batch)[0], prov,
                                   lambda mid: mid == model_id, names, slot, function,
                                   in_bytes)
        failed = teardown(release)

        case.items.append(ran_item(call, function))
        if call.error is not None:
            return case
        case.items += graded
        case.items.append(_streams_item(work, n))
        case.items.append(_overlap_item(host, work, n))
        if exercise_no == 2:
            case.items.append(_ahead_item(host, work, n))
        if again is not None:
            case.items.append(again)
        inputs = {m[0] for r in work.runs for m in (r.first.info or {}).get("mem", ())
                  if m[4] == "r"} | set(kit.dev_in)
        outputs = {r.ptr for reads in host.reads.values() for r in reads} | set(kit.host_out)
        if not work.runs:           # nothing to judge how well it was done
            case.items += [idle("race-free", RESULT), idle("throughput", PROCESS)]
            return case
        found = hazard_items(runtime, names, inputs, outputs)
        case.items.append(found[0])
        case.items.append(_throughput_item(setup, call, serial_ns, work.busy))
        if exercise_no == 2:
            case.items.append(_utilisation_item(host, work.busy))
        case.items.append(found[1])
        case.items.append(_resources_item(runtime, failed, function))
        return case


@exercise("06.pipeline", "pipeline: a race-free double-stream pipeline", "pipeline",
          limit_s=LIMIT_S, edges=(0, 1))
def grade_pipeline(fn, seed: int) -> Case:
    """One case of 06.pipeline: two streams, real overlap, race-free, 1.25x the serial loop."""
    return _grade(fn, seed, 1, "pipeline")


@exercise("06.stretch", "pipeline_ahead: hide the post-processing too", "pipeline_ahead",
          limit_s=LIMIT_S, edges=(0, 1))
def grade_stretch(fn, seed: int) -> Case:
    """One case of 06.stretch: queued ahead, and the AI Core busy more than 90% of the time."""
    return _grade(fn, seed, 2, "pipeline_ahead")


_guard.seal(_sys.modules[__name__])        # the grader's own helpers refuse learner code
