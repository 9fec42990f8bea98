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

import dataclasses
import sys as _sys
import zlib
from collections import Counter
from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np

from .. import acl, session
from ..acl.util import _host_view
from ..analysis import trace
from ..constants import (
    ACL_MEM_MALLOC_HUGE_FIRST,
    ACL_MEMCPY_DEVICE_TO_HOST,
    ACL_MEMCPY_HOST_TO_DEVICE,
)
from ..errors import Fail
from ..model import compile_model, dumps, execute_ns
from ..model.graph import Graph, Op, TensorSpec, seeded_weights
from . import PROCESS, RESULT, Call, Case, Item, _guard, call_learner, exercise, isolated, ran_item
from ._common import (
    BytesWording,
    Provenance,
    describe_bytes,
    hazards,
    new_case,
    reads_uninit,
    resources_item,
    teardown,
)

__all__ = ["PipelineKit", "standin_graph", "serial_reference", "grade_pipeline", "grade_stretch",
           "SPEEDUP_GOAL", "UTILISATION_GOAL", "OVERLAP_GOAL", "LIMIT_S", "STANDIN_LAYERS",
           "STANDIN_WIDTH"]

SPEEDUP_GOAL = 1.25          # 06.pipeline: the serial loop's time / the pipeline's time
UTILISATION_GOAL = 0.90      # 06.stretch: AI Core busy time over the span of the model runs
OVERLAP_GOAL = 0.5           # share of later batches' prepare and copy time under the AI Core
LIMIT_S = 10.0               # wall-clock seconds per case (the reference takes about 0.05 s)
STANDIN_LAYERS = 24
STANDIN_WIDTH = 64
_IMAGE = (32, 16, 16)        # feature maps per image
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
    texture = np.random.default_rng(606).random((batch, *_IMAGE), dtype=np.float32) - 0.5
    texture.setflags(write=False)           # cached: nobody may change it in place
    return texture


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


def _oracle(setup, compiled) -> tuple[tuple[bytes, ...], tuple[int, ...]]:
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


@lru_cache(maxsize=16)
def _truth(exercise_no: int, seed: int) -> tuple[tuple[bytes, ...], tuple[int, ...]]:
    setup = _setup(exercise_no, seed)
    return _oracle(setup, _model(setup.batch)[0])


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

@dataclass(frozen=True)
class _Read:
    """One call of postprocess: where and when it read, and what it found."""

    ptr: int
    at_ns: int
    data: bytes


class _Host:
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
        teardown(release)
    return call.end_ns - call.start_ns


# -- what the device did: the model's runs, traced with Provenance ------------------------------

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


def _find_work(runtime, tasks, prov: Provenance, is_ours, in_bytes: int,
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


def _device_item(work: _Work, host: _Host, prov: Provenance, n: int, model: str,
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


# -- results ------------------------------------------------------------------------------------

def _results_item(n: int, scores: tuple[bytes, ...], host: _Host, work: _Work,
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


def _overlap_item(host: _Host, work: _Work, n: int) -> Item:
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


def _ahead_item(host: _Host, work: _Work, n: int) -> Item:
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


def _utilisation_item(host: _Host, busy: list[tuple[int, int]]) -> Item:
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

def _hazard_items(runtime, names: dict[int, str], inputs: set[int],
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
        host = _Host(setup, kit)
        first_api = len(runtime.api_log)
        call = call_learner(fn, acl, kit, n, host.prepare, host.postprocess)
        case = new_case(setup.label, call, runtime)
        if case.not_done:
            return case
        tasks = runtime.tasks[call.first_task:]
        failed = teardown(release)

        case.items.append(ran_item(call, function))
        if call.error is not None:
            return case
        work = _find_work(runtime, tasks, prov, lambda mid: mid == model_id,
                          setup.batch * int(np.prod(_IMAGE)) * 4, input_crcs)
        tampered = host.tampered(runtime, first_api)
        case.items.append(_results_item(n, scores, host, work, prov, names,
                                        "kit.dev_out[k] and kit.host_out[k]"))
        case.items.append(_device_item(work, host, prov, n, "the kit's model", tampered))
        case.items.append(_streams_item(work, n))
        case.items.append(_overlap_item(host, work, n))
        if exercise_no == 2:
            case.items.append(_ahead_item(host, work, n))
        inputs = {m[0] for r in work.runs for m in (r.first.info or {}).get("mem", ())
                  if m[4] == "r"} | set(kit.dev_in)
        outputs = {r.ptr for reads in host.reads.values() for r in reads} | set(kit.host_out)
        if not work.runs:           # nothing to judge how well it was done
            case.items += [_idle("race-free", RESULT), _idle("throughput", PROCESS)]
            return case
        hazard_items = _hazard_items(runtime, names, inputs, outputs)
        case.items.append(hazard_items[0])
        case.items.append(_throughput_item(setup, call, serial_ns, work.busy))
        if exercise_no == 2:
            case.items.append(_utilisation_item(host, work.busy))
        case.items.append(hazard_items[1])
        case.items.append(_resources_item(runtime, failed, function))
        return case


def _idle(name: str, kind: str) -> Item:
    """An item that cannot pass when the model never ran: there is nothing to judge."""
    return Item(name, False, "nothing to judge: the model never ran on the AI Core",
                "run every batch through the model (acl.mdl.execute_async) first", kind=kind)


@exercise("06.pipeline", "pipeline: a race-free double-stream pipeline", "pipeline",
          limit_s=LIMIT_S)
def grade_pipeline(fn, seed: int) -> Case:
    """One case of 06.pipeline: two streams, real overlap, race-free, 1.25x the serial loop."""
    return _grade(fn, seed, 1, "pipeline")


@exercise("06.stretch", "pipeline_ahead: hide the post-processing too", "pipeline_ahead",
          limit_s=LIMIT_S)
def grade_stretch(fn, seed: int) -> Case:
    """One case of 06.stretch: queued ahead, and the AI Core busy more than 90% of the time."""
    return _grade(fn, seed, 2, "pipeline_ahead")


_guard.seal(_sys.modules[__name__])        # the grader's own helpers refuse learner code
