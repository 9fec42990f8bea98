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
    model runs batch i. Graded: every batch's scores, time against the check's own serial loop
    (at least 1.25x faster), prepare work hidden behind the AI Core, no hazard for the
    sanitizer (the seed's single-input-buffer race fails here), nothing leaked.

``06.stretch``: ``pipeline_ahead(acl, kit, batches, prepare, postprocess)``
    Hide the post-processing too: queue batch i+1 before waiting for batch i, so the AI Core
    never waits for the host. Graded as above, plus the AI Core busy more than 90% of the time
    from the first batch's model run to the last one's.

The model is a stand-in for ResNet-50 with real weights (:func:`standin_graph`), so that every
batch's scores can be verified: a deep, narrow classifier head over 32 feature maps of 16x16
per image, whose run is about 0.6 ms of AI Core time per batch. Each case draws the batch
size, the number of batches, the host times (prepare about half of a model run,
post-processing about a sixth) and the data from its seed. The serial reference
(:func:`serial_reference`) runs on the same kit in a fresh runtime; the oracle for the scores
is the compiled model run in numpy.
"""

from __future__ import annotations

import sys as _sys
from collections import Counter
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from .. import acl, sanitizer, session, trace
from ..acl.util import _host_view
from ..constants import (
    ACL_MEM_MALLOC_HUGE_FIRST,
    ACL_MEMCPY_DEVICE_TO_HOST,
    ACL_MEMCPY_HOST_TO_DEVICE,
)
from ..errors import Fail
from ..model import compile_model, dumps, execute_ns
from ..model.graph import Graph, Op, TensorSpec, seeded_weights
from . import Call, Case, Item, _guard, call_learner, exercise, isolated, ran_item
from .lesson04 import _describe_bytes, _resources_item, _teardown

__all__ = ["PipelineKit", "standin_graph", "serial_reference", "grade_pipeline", "grade_stretch",
           "SPEEDUP_GOAL", "UTILISATION_GOAL", "STANDIN_LAYERS", "STANDIN_WIDTH"]

SPEEDUP_GOAL = 1.25          # 06.pipeline: the serial loop's time / the pipeline's time
UTILISATION_GOAL = 0.90      # 06.stretch: AI Core busy time over the span of the model runs
STANDIN_LAYERS = 24
STANDIN_WIDTH = 64
_IMAGE = (32, 16, 16)        # feature maps per image
_CLASSES = 10


def _us(ns: float) -> str:
    return f"{ns / 1000:,.0f} us"


def _ms(ns: float) -> str:
    return f"{ns / 1e6:,.2f} ms"


# -- the stand-in model --------------------------------------------------------------------------

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
    graph = Graph("standin", [TensorSpec("features", (1, *_IMAGE), "fp32", "NCHW")],
                  [TensorSpec("scores", (), "fp32", "ND")], ops,
                  description="lesson 06's stand-in classifier head (real weights)")
    graph.weights = seeded_weights(graph, 6)
    return graph


@lru_cache(maxsize=8)
def _model(batch: int):
    """(compiled model, its .om bytes) at a fixed batch size."""
    c, h, w = _IMAGE
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
        levels = rng.random((self.batch, _IMAGE[0], 1, 1), dtype=np.float32) * 4 - 2
        return _texture(self.batch) + levels


@lru_cache(maxsize=4)
def _texture(batch: int) -> np.ndarray:
    return np.random.default_rng(606).random((batch, *_IMAGE), dtype=np.float32) - 0.5


@lru_cache(maxsize=16)
def _setup(exercise_no: int, seed: int) -> _Setup:
    rng = np.random.default_rng([6, exercise_no, seed])
    batch = int(rng.choice([16, 24, 32, 48]))     # <= 64 rows: BLAS stays single-threaded
    batches = int(rng.integers(8, 13))
    compiled, _ = _model(batch)
    k_ns = execute_ns(compiled)
    prepare_ns = int(k_ns * rng.uniform(0.45, 0.6)) // 1000 * 1000
    postprocess_ns = int(k_ns * rng.uniform(0.12, 0.2)) // 1000 * 1000
    label = (f"{batches} batches of {batch} images; prepare {_us(prepare_ns)} and "
             f"post-process {_us(postprocess_ns)} of host time per batch")
    return _Setup(label, exercise_no, seed, batch, batches, prepare_ns, postprocess_ns)


@lru_cache(maxsize=16)
def _scores(exercise_no: int, seed: int) -> tuple[np.ndarray, ...]:
    """The oracle: each batch's scores, from the compiled model run in numpy."""
    setup = _setup(exercise_no, seed)
    compiled, _ = _model(setup.batch)
    out = []
    for i in range(setup.batches):
        with np.errstate(all="ignore"):
            scores = compiled.forward({"features": setup.images(i)})[0]
        out.append(np.asarray(scores, np.float32).ravel())
    return tuple(out)


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

class _Host:
    """prepare/postprocess for one case: charge host time, move real bytes, remember it all.

    Lesson 11 reuses it; its kit has no host buffers, so the error messages name none.
    """

    in_example: str | None = "kit.host_in[0]"
    out_example: str | None = "kit.host_out[0]"

    def __init__(self, setup, kit):
        self.setup = setup
        self.kit = kit
        self.prepared: Counter = Counter()
        self.prepare_spans: list[tuple[int, int]] = []
        self.postprocess_spans: list[tuple[int, int]] = []
        self.got: dict[int, list[bytes]] = {}

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
        view = self._view("prepare", i, host_ptr, self.kit.in_size, "w", self.in_example)
        view[:] = self.setup.images(i).view(np.uint8).ravel()
        self.prepared[i] += 1
        self.prepare_spans.append((start, runtime.host_ns))

    def postprocess(self, i, host_ptr) -> None:
        """Read batch ``i``'s scores from the host buffer ``host_ptr`` (kit.out_size bytes)."""
        i = self._batch("postprocess", i)
        runtime = session.current_runtime()
        start = runtime.host_ns
        view = self._view("postprocess", i, host_ptr, self.kit.out_size, "r", self.out_example)
        self.got.setdefault(i, []).append(view.tobytes())
        session.host_work(self.setup.postprocess_ns, f"post-process batch {i}")
        self.postprocess_spans.append((start, runtime.host_ns))


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
        host = _Host(setup, kit)
        call = call_learner(serial_reference, acl, kit, setup.batches, host.prepare,
                            host.postprocess)
        if call.error is not None:
            raise RuntimeError(f"the serial reference failed: {call.error_text}")
        _teardown(release)
    return call.end_ns - call.start_ns


# -- grading ------------------------------------------------------------------------------------

def _grade(fn, seed: int, exercise_no: int, function: str) -> Case:
    setup = _setup(exercise_no, seed)
    with isolated() as runtime:
        acl.init()
        acl.rt.set_device(0)
        kit, release = _make_kit(setup)
        host = _Host(setup, kit)
        call = call_learner(fn, acl, kit, setup.batches, host.prepare, host.postprocess)
        case = Case(setup.label, warnings=call.warnings, runtime=runtime)
        if call.not_done:
            case.not_done = True
            return case
        tasks = runtime.tasks[call.first_task:]
        failed = _teardown(release)

        case.items.append(ran_item(call, function))
        if call.error is not None:
            return case
        case.items.append(_results_item(setup, _scores(exercise_no, seed), host))
        model_runs = _model_spans(runtime, tasks)
        serial_ns = _serial_ns(exercise_no, seed)       # in a runtime of its own
        case.items.append(_throughput_item(setup, call, serial_ns, model_runs))
        if exercise_no == 1:
            case.items.append(_overlap_item(host, model_runs))
        else:
            case.items.append(_utilisation_item(host, model_runs))
        case.items.append(_sanitizer_item(runtime, kit))
        case.items.append(_resources_item(runtime, failed, function))
        return case


@exercise("06.pipeline", "pipeline: a race-free double-stream pipeline", "pipeline")
def grade_pipeline(fn, seed: int) -> Case:
    """One case of 06.pipeline: beat the serial loop by 1.25x, race-free."""
    return _grade(fn, seed, 1, "pipeline")


@exercise("06.stretch", "pipeline_ahead: hide the post-processing too", "pipeline_ahead")
def grade_stretch(fn, seed: int) -> Case:
    """One case of 06.stretch: keep the AI Core busy more than 90% of the time."""
    return _grade(fn, seed, 2, "pipeline_ahead")


def _results_item(setup: _Setup, scores: tuple[np.ndarray, ...], host: _Host) -> Item:
    """'results': every batch prepared, and post-processed exactly once with its own scores."""
    n = setup.batches
    expected = [s.tobytes() for s in scores]
    problems, hints = [], []
    unprepared = [i for i in range(n) if not host.prepared[i]]
    if unprepared:
        problems.append(f"prepare was never called for batch {_list(unprepared)}")
        hints.append("call prepare(i, kit.host_in[k]) once for every batch i, before its copy")
    missing = [i for i in range(n) if i not in host.got]
    if missing:
        problems.append(f"postprocess was never called for batch {_list(missing)}")
        hints.append(f"call postprocess(i, ...) for every batch, the last one ({n - 1}) too, "
                     "before your function returns")
    twice = [i for i, got in sorted(host.got.items()) if len(got) > 1]
    if twice:
        problems.append(f"postprocess was called more than once for batch {_list(twice)}")
        hints.append("post-process each batch exactly once")
    wrong = [i for i in sorted(host.got)
             if not _close(np.frombuffer(host.got[i][-1], np.float32), scores[i])]
    for i in wrong[:2]:
        got = np.frombuffer(host.got[i][-1], np.float32)
        other = next((j for j in range(n) if j != i and _close(got, scores[j])), None)
        if other is not None and other > i:
            problems.append(f"batch {i}'s scores are those of batch {other}")
            hints.append(f"batch {i}'s input was overwritten by batch {other} before the model "
                         "read it: each batch needs its own input slot until its run has "
                         "finished")
        elif other is not None:
            problems.append(f"batch {i}'s scores are those of batch {other}")
            hints.append(f"the host read the output buffer before batch {i}'s scores were "
                         "copied into it: wait for the copy back before postprocess")
        else:
            text = _describe_bytes(host.got[i][-1], expected[i], f"batch {i}'s output")
            problems.append(text)
            hints.append("wait for the copy back of the scores before you call postprocess"
                         if "DE AD BE EF" in text else
                         "each batch goes host_in[k] -> dev_in[k] (inputs[k]) -> model -> "
                         "dev_out[k] (outputs[k]) -> host_out[k] -> postprocess: check that "
                         "the slot numbers match along the way")
    if len(wrong) > 2:
        problems.append(f"and {len(wrong) - 2} more batches got wrong scores")
    if problems:
        return Item("results", False, "; ".join(problems), hints[0])
    return Item("results", True, f"all {n} batches were prepared, run and post-processed with "
                                 "their own scores")


def _close(got: np.ndarray, want: np.ndarray) -> bool:
    if got.shape != want.shape:
        return False
    with np.errstate(all="ignore"):
        return bool(np.allclose(got, want, rtol=1e-5, atol=1e-7))


def _list(batches: list[int]) -> str:
    shown = ", ".join(map(str, batches[:5]))
    return shown + (f" and {len(batches) - 5} more" if len(batches) > 5 else "")


def _model_spans(runtime, tasks) -> list[tuple[int, int]]:
    """The busy spans of the AI Core during the learner's function (merged, in order)."""
    core = trace.resolve_resource(runtime, "aicore")
    spans = sorted((t.start_ns, t.end_ns) for t in tasks
                   if t.resource is core and t.start_ns >= 0 and t.end_ns > t.start_ns)
    merged: list[list[int]] = []
    for s, e in spans:
        if merged and s <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], e)
        else:
            merged.append([s, e])
    return [(s, e) for s, e in merged]


def _covered(spans: list[tuple[int, int]], busy: list[tuple[int, int]]) -> tuple[int, int]:
    """(ns of ``spans`` during which ``busy`` is busy, total ns of ``spans``)."""
    inside = total = 0
    for s, e in spans:
        total += e - s
        inside += sum(max(0, min(e, b) - max(s, a)) for a, b in busy)
    return inside, total


def _throughput_item(setup: _Setup, call: Call, serial_ns: int,
                     busy: list[tuple[int, int]]) -> Item:
    took = max(1, call.end_ns - call.start_ns)
    ratio = serial_ns / took
    core = sum(e - s for s, e in busy) / took
    text = (f"{setup.batches} batches took {_ms(took)}: {ratio:.2f}x the serial loop's "
            f"{_ms(serial_ns)} on the same kit (the goal is {SPEEDUP_GOAL:.2f}x); the AI Core "
            f"was busy {core:.0%} of that time")
    if ratio >= SPEEDUP_GOAL:
        return Item("throughput", True, text)
    return Item("throughput", False, text,
                "queue batch i on the model's stream with execute_async, and prepare and copy "
                "batch i + 1 (into the other slot, on a second stream) before you wait for "
                "batch i: a blocking call in between (execute, memcpy, synchronize) makes the "
                "host and the AI Core take turns")


def _overlap_item(host: _Host, busy: list[tuple[int, int]]) -> Item:
    """'overlap': the host prepared later batches while the AI Core ran earlier ones."""
    later = host.prepare_spans[1:]
    inside, total = _covered(later, busy)
    if total and inside >= total / 2:
        return Item("overlap", True, f"{inside / total:.0%} of the host's prepare time (after "
                                     "the first batch) ran while the AI Core worked")
    share = f"{inside / total:.0%}" if total else "none"
    return Item("overlap", False,
                f"only {share} of the host's prepare time (after the first batch) ran while "
                "the AI Core worked: the host and the device took turns",
                "the point of the pipeline: right after queuing batch i (execute_async), "
                "prepare batch i + 1 and queue its copy on the other stream; wait for batch i "
                "only after that")


def _utilisation_item(host: _Host, busy: list[tuple[int, int]]) -> Item:
    """'utilisation': the AI Core busy > 90% from the first model run to the last."""
    if not busy:
        return Item("utilisation", False, "the model never ran on the AI Core",
                    "run each batch with acl.mdl.execute_async")
    lo, hi = busy[0][0], busy[-1][1]
    util = sum(e - s for s, e in busy) / max(1, hi - lo)
    gaps = [(busy[k][1], busy[k + 1][0]) for k in range(len(busy) - 1)]
    widest = max(gaps, key=lambda g: g[1] - g[0], default=None)
    text = (f"the AI Core was busy {util:.1%} of the time from the first model run "
            f"({_us(lo)}) to the end of the last ({_us(hi)}); the goal is more than "
            f"{UTILISATION_GOAL:.0%}")
    if util > UTILISATION_GOAL:
        return Item("utilisation", True, text)
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
                "event) while the AI Core runs batch i + 1")


def _sanitizer_item(runtime, kit: PipelineKit) -> Item:
    """'sanitizer': no race, read before sync, use after free, pageable copy ..."""
    findings = [f for f in sanitizer.analyze(runtime) if f.kind != "leak"]
    if not findings:
        return Item("sanitizer", True, "no hazards: no two streams raced on a buffer and the "
                                       "host read every result after synchronising")
    names = {p: f"kit.{name}[{k}]" for name in ("dev_in", "dev_out", "host_in", "host_out")
             for k, p in enumerate(getattr(kit, name))}
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
    first = findings[0]
    fix = first.fix
    kinds = [tasks[t].kind for t in first.tasks if 0 <= t < len(tasks)]
    if first.kind == "race" and any(b in kit.dev_in for b in first.buffers):
        if kinds[:1] == ["model_op"]:
            fix = ("this is the seed's bug: the copy of a later batch overwrites the input that "
                   "the model is still reading. Copy batch i into slot k = i % 2 (kit.dev_in[k], "
                   "run with kit.inputs[k]), and before reusing a slot make the copy stream wait "
                   "(stream_wait_event) for an event recorded after the run that last read it")
        else:
            fix = ("the model may read its input before the copy has landed: record an event on "
                   "the copy stream after each copy and make the model's stream wait for it "
                   "(stream_wait_event) before execute_async")
    elif first.kind == "host-read-before-sync" and any(b in kit.host_out for b in first.buffers):
        fix += ("; if you did wait for this batch's own copy, the copy back of another batch "
                "into the same host buffer is what races: give each batch in flight its own "
                "kit.host_out[k]")
    return Item("sanitizer", False, "\n".join(lines), fix)


_guard.seal(_sys.modules[__name__])        # the grader's own helpers refuse learner code
