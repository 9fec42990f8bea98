"""Check for lesson 11, the capstone: an inference service the learner builds from scratch.

``11.service``: ``service(acl, kit, batches, prepare, postprocess) -> None``

Unlike lesson 06's PipelineKit, the :class:`ServiceKit` holds no buffers: only two compiled
models on disk and the sizes. The function makes every choice itself and owns everything it
makes:

* which model to load (``kit.fixed_model``, compiled for ``kit.batch`` images, or
  ``kit.dynamic_model``, compiled with batch gears; both give the same scores);
* where the host buffers live (pinned ``acl.rt.malloc_host``, or pageable Python memory);
* the device memory policy of its buffers (``ACL_MEM_MALLOC_HUGE_FIRST``, ``..._NORMAL_ONLY``);
* how many slots of buffers, streams and events it uses.

It loads the model, allocates, runs every batch through ``prepare`` -> model ->
``postprocess`` (the callbacks of lesson 06: real bytes, host time), and releases it all,
model included, before returning.

Graded in a fresh runtime on randomised cases (batch size, number of batches, host times,
data), the four points the lesson plan names, plus "runs":

* **results**: every batch prepared once and post-processed once with its own scores (the
  stand-in model of lesson 06 with real weights; the oracle is the compiled model in numpy);
* **throughput**: at least :data:`SERIAL_GOAL` times the check's own serial service
  (:func:`serial_service`) and within :data:`BEST_TOLERANCE` of the check's own best
  (:func:`best_service`), both run on the same kit in runtimes of their own;
* **memory**: the device memory the service took from the driver (``get_mem_info``'s drop in
  free memory, which the caching pool keeps until reset: its high-water mark) within
  ``kit.memory_budget_bytes``;
* **sanitizer** and **resources**: no hazard, and nothing left behind at the caller's
  teardown (model, buffers, datasets, streams, events).
"""

from __future__ import annotations

import os
import sys as _sys
import tempfile
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from .. import acl
from ..constants import (
    ACL_DDR_MEM,
    ACL_MEM_MALLOC_HUGE_FIRST,
    ACL_MEMCPY_DEVICE_TO_HOST,
    ACL_MEMCPY_HOST_TO_DEVICE,
)
from ..model import compile_model, execute_ns, save
from . import Call, Case, Item, _guard, call_learner, exercise, isolated, ran_item
from ._common import hazards, new_case, resources_item, sanitizer_item, teardown
from .lesson06 import _IMAGE, _close, _list, _model_spans, standin_graph
from .lesson06 import _Host as _PipelineHost

__all__ = ["ServiceKit", "serial_service", "best_service", "grade_service", "SERIAL_GOAL",
           "BEST_TOLERANCE", "GEARS"]

SERIAL_GOAL = 1.3            # the service's throughput over the check's serial service
BEST_TOLERANCE = 0.04        # ... and at most 4% below the check's best service: the
                             # dynamic model (about 5% slower) or a pipeline that waits for
                             # each batch before queuing the next (about 15%) fall short
GEARS = (1, 8, 16, 32, 48)   # the dynamic model's batch gears
_BUDGET_SLACK = 3 << 20      # the memory budget: the best service's memory plus 3 MiB


def _ms(ns: float) -> str:
    return f"{ns / 1e6:,.2f} ms"


def _mib(n: int) -> str:
    return f"{n / 2**20:,.1f} MiB"


# -- the models, compiled once per batch size into a folder of this process ------------------

_FOLDER: list[tempfile.TemporaryDirectory] = []


def _folder() -> str:
    if not _FOLDER:
        _FOLDER.append(tempfile.TemporaryDirectory(prefix="acllab-lesson11-"))
    return _FOLDER[0].name


@lru_cache(maxsize=8)
def _models(batch: int) -> tuple[object, str, str]:
    """(the fixed model compiled, its .om path, the dynamic model's .om path)."""
    c, h, w = _IMAGE
    fixed = compile_model(standin_graph(), input_shape=f"features:{batch},{c},{h},{w}",
                          soc_version="Ascend310")
    dynamic = compile_model(standin_graph(), input_shape=f"features:-1,{c},{h},{w}",
                            dynamic_batch_size=",".join(map(str, GEARS)),
                            soc_version="Ascend310")
    paths = []
    for name, compiled in (("fixed", fixed), ("dynamic", dynamic)):
        path = os.path.join(_folder(), f"standin_{name}_b{batch}.om")
        if not os.path.exists(path):
            save(compiled, path)
        paths.append(path)
    return fixed, paths[0], paths[1]


# -- one case -----------------------------------------------------------------------------------

@dataclass(frozen=True)
class ServiceKit:
    """What the check hands your service: two compiled models, the sizes and a memory budget.

    ``fixed_model`` is an .om file compiled for exactly ``batch`` images per run;
    ``dynamic_model`` one compiled with batch gears :data:`GEARS` (lesson 08: a hidden batch
    input and ``set_dynamic_batch_size``). Both compute the same scores. ``in_size`` bytes
    of input (what ``prepare`` writes) and ``out_size`` bytes of scores (what ``postprocess``
    reads) per batch. ``memory_budget_bytes``: the device memory your service may take from
    the driver, models and buffers together. Nothing here is allocated: that is your job.
    """

    fixed_model: str
    dynamic_model: str
    batch: int
    in_size: int
    out_size: int
    memory_budget_bytes: int

    def __repr__(self) -> str:
        return (f"<ServiceKit: {self.batch} images per batch; fixed_model "
                f"{os.path.basename(self.fixed_model)!r}, dynamic_model "
                f"{os.path.basename(self.dynamic_model)!r} (gears {','.join(map(str, GEARS))}); "
                f"in_size {self.in_size:,} B, out_size {self.out_size:,} B; "
                f"memory_budget_bytes {self.memory_budget_bytes:,}>")


@dataclass(frozen=True)
class _Setup:
    label: str
    seed: int
    batch: int
    batches: int
    prepare_ns: int
    postprocess_ns: int

    def images(self, i: int) -> np.ndarray:
        """Batch ``i``'s input, drawn from the seed (made on demand, never kept)."""
        rng = np.random.default_rng([11, self.seed, 100 + i])
        return rng.random((self.batch, *_IMAGE), dtype=np.float32) * 2 - 1


@lru_cache(maxsize=16)
def _setup(seed: int) -> _Setup:
    rng = np.random.default_rng([11, seed])
    batch = int(rng.choice([32, 48]))    # gears of the dynamic model; over 1 MiB: huge pages
    batches = int(rng.integers(10, 15))
    k_ns = execute_ns(_models(batch)[0])
    prepare_ns = int(k_ns * rng.uniform(0.45, 0.6)) // 1000 * 1000
    postprocess_ns = int(k_ns * rng.uniform(0.12, 0.2)) // 1000 * 1000
    label = (f"{batches} batches of {batch} images; prepare {prepare_ns / 1000:,.0f} us and "
             f"post-process {postprocess_ns / 1000:,.0f} us of host time per batch")
    return _Setup(label, seed, batch, batches, prepare_ns, postprocess_ns)


@lru_cache(maxsize=16)
def _scores(seed: int) -> tuple[np.ndarray, ...]:
    """The oracle: each batch's scores, from the compiled fixed model run in numpy."""
    setup = _setup(seed)
    compiled = _models(setup.batch)[0]
    out = []
    for i in range(setup.batches):
        with np.errstate(all="ignore"):
            scores = compiled.forward({"features": setup.images(i)})[0]
        out.append(np.asarray(scores, np.float32).ravel())
    return tuple(out)


def _kit(setup: _Setup, budget: int) -> ServiceKit:
    fixed, fixed_path, dynamic_path = _models(setup.batch)
    in_size = setup.batch * int(np.prod(_IMAGE)) * 4
    out_size = int(np.asarray(fixed.forward({"features": setup.images(0)})[0]).nbytes)
    return ServiceKit(fixed_path, dynamic_path, setup.batch, in_size, out_size, budget)


# -- the host callbacks -------------------------------------------------------------------------

class _Host(_PipelineHost):
    """Lesson 06's prepare/postprocess, plus when the service's first prepare started and its
    last post-process ended (the span the throughput is measured over)."""

    in_example = out_example = None

    @property
    def first_ns(self) -> int | None:
        return self.prepare_spans[0][0] if self.prepare_spans else None

    @property
    def last_ns(self) -> int:
        return self.postprocess_spans[-1][1] if self.postprocess_spans else 0


# -- the check's own services -------------------------------------------------------------------

class _Loaded:
    """The fixed model loaded, with ``slots`` input and output buffers and their datasets."""

    def __init__(self, acl, kit, slots: int):
        self.acl = acl
        self.model_id, _ = acl.mdl.load_from_file(kit.fixed_model)
        self.dev_in, self.dev_out, self.inputs, self.outputs, self._bufs = [], [], [], [], []
        for _ in range(slots):
            for size, ptrs, sets in ((kit.in_size, self.dev_in, self.inputs),
                                     (kit.out_size, self.dev_out, self.outputs)):
                ptr, _ = acl.rt.malloc(size, ACL_MEM_MALLOC_HUGE_FIRST)
                buf = acl.create_data_buffer(ptr, size)
                ds = acl.mdl.create_dataset()
                acl.mdl.add_dataset_buffer(ds, buf)
                ptrs.append(ptr)
                sets.append(ds)
                self._bufs.append((ds, buf, ptr))

    def release(self) -> None:
        for ds, buf, ptr in self._bufs:
            self.acl.mdl.destroy_dataset(ds)
            self.acl.destroy_data_buffer(buf)
            self.acl.rt.free(ptr)
        self.acl.mdl.unload(self.model_id)


def serial_service(acl, kit, batches, prepare, postprocess) -> None:
    """The seed's serial service: pageable host input, one stream, one thing at a time."""
    m = _Loaded(acl, kit, 1)
    host_in = bytearray(kit.in_size)                   # plain (pageable) Python memory
    host_in_ptr = acl.util.bytes_to_ptr(host_in)
    host_out, _ = acl.rt.malloc_host(kit.out_size)
    stream, _ = acl.rt.create_stream()
    for i in range(batches):
        prepare(i, host_in_ptr)
        acl.rt.memcpy(m.dev_in[0], kit.in_size, host_in_ptr, kit.in_size,
                      ACL_MEMCPY_HOST_TO_DEVICE)
        acl.mdl.execute_async(m.model_id, m.inputs[0], m.outputs[0], stream)
        acl.rt.synchronize_stream(stream)
        acl.rt.memcpy(host_out, kit.out_size, m.dev_out[0], kit.out_size,
                      ACL_MEMCPY_DEVICE_TO_HOST)
        postprocess(i, host_out)
    acl.rt.destroy_stream(stream)
    acl.rt.free_host(host_out)
    m.release()


def best_service(acl, kit, batches, prepare, postprocess) -> None:
    """The check's best service: fixed model, huge pages, pinned memory, one batch ahead."""
    m = _Loaded(acl, kit, 2)
    host_in = [acl.rt.malloc_host(kit.in_size)[0] for _ in range(2)]
    host_out = [acl.rt.malloc_host(kit.out_size)[0] for _ in range(2)]
    copy_s, _ = acl.rt.create_stream()
    exec_s, _ = acl.rt.create_stream()
    copied = [acl.rt.create_event()[0] for _ in range(2)]
    done = [acl.rt.create_event()[0] for _ in range(2)]

    def load(i):
        k = i % 2
        prepare(i, host_in[k])
        if i >= 2:
            acl.rt.stream_wait_event(copy_s, done[k])
        acl.rt.memcpy_async(m.dev_in[k], kit.in_size, host_in[k], kit.in_size,
                            ACL_MEMCPY_HOST_TO_DEVICE, copy_s)
        acl.rt.record_event(copied[k], copy_s)

    def finish(i):
        acl.rt.synchronize_event(done[i % 2])
        postprocess(i, host_out[i % 2])

    load(0)
    for i in range(batches):
        k = i % 2
        acl.rt.stream_wait_event(exec_s, copied[k])
        acl.mdl.execute_async(m.model_id, m.inputs[k], m.outputs[k], exec_s)
        acl.rt.memcpy_async(host_out[k], kit.out_size, m.dev_out[k], kit.out_size,
                            ACL_MEMCPY_DEVICE_TO_HOST, exec_s)
        acl.rt.record_event(done[k], exec_s)
        if i >= 1:
            finish(i - 1)
        if i + 1 < batches:
            load(i + 1)
    finish(batches - 1)
    for ev in copied + done:
        acl.rt.destroy_event(ev)
    for s in (copy_s, exec_s):
        acl.rt.destroy_stream(s)
    for p in host_in + host_out:
        acl.rt.free_host(p)
    m.release()


@dataclass(frozen=True)
class _Run:
    call: Call
    host: _Host
    used_bytes: int          # device memory taken from the driver while the service ran
    failed: tuple[str, ...]  # what the caller's teardown could not release

    @property
    def span_ns(self) -> int:
        """Serving time: from the first prepare's start to the last post-process's end."""
        first = self.host.first_ns if self.host.first_ns is not None else self.call.start_ns
        return max(1, (self.host.last_ns or self.call.end_ns) - first)


def _run(fn, setup: _Setup, kit: ServiceKit) -> _Run:
    """Call ``fn`` on a kit in the current (fresh) runtime, then tear down."""
    acl.init()
    acl.rt.set_device(0)
    free_before = acl.rt.get_mem_info(ACL_DDR_MEM)[0]
    host = _Host(setup, kit)
    call = call_learner(fn, acl, kit, setup.batches, host.prepare, host.postprocess)
    free_after = acl.rt.get_mem_info(ACL_DDR_MEM)[0]
    failed = tuple(teardown())
    return _Run(call, host, max(0, free_before - free_after), failed)


@lru_cache(maxsize=16)
def _reference(seed: int, which: str) -> tuple[int, int]:
    """(host ns, device bytes) of the check's serial or best service, in a fresh runtime."""
    setup = _setup(seed)
    fn = serial_service if which == "serial" else best_service
    with isolated():
        run = _run(fn, setup, _kit(setup, 1 << 40))
    if run.call.error is not None:
        raise RuntimeError(f"the check's {which} service failed: {run.call.error_text}")
    return run.span_ns, run.used_bytes


def _budget(seed: int) -> int:
    return _reference(seed, "best")[1] + _BUDGET_SLACK


# -- grading ------------------------------------------------------------------------------------

@exercise("11.service", "service: the fastest correct inference service", "service")
def grade_service(fn, seed: int) -> Case:
    """One case of 11.service: results, throughput, memory, sanitizer and resources."""
    setup = _setup(seed)
    kit = _kit(setup, _budget(seed))
    with isolated() as runtime:
        run = _run(fn, setup, kit)
        case = new_case(setup.label, run.call, runtime)
        if case.not_done:
            return case
        case.items.append(ran_item(run.call, "service"))
        if run.call.error is not None:
            case.items.append(_resources_item(runtime, run.failed))
            return case
        tasks = runtime.tasks[run.call.first_task:]
        case.items.append(_results_item(setup, _scores(seed), run.host))
        case.items.append(_throughput_item(setup, run, seed,
                                           _model_spans(runtime, tasks)))
        case.items.append(_memory_item(kit, run.used_bytes))
        case.items.append(sanitizer_item(
            hazards(runtime), "no hazards: no two streams raced on a buffer and the host read "
                              "every result after synchronising"))
        case.items.append(_resources_item(runtime, run.failed))
        return case


def _results_item(setup: _Setup, scores: tuple[np.ndarray, ...], host: _Host) -> Item:
    """'results': every batch prepared, and post-processed exactly once with its own scores."""
    n = setup.batches
    problems, hints = [], []
    unprepared = [i for i in range(n) if not host.prepared[i]]
    if unprepared:
        problems.append(f"prepare was never called for batch {_list(unprepared)}")
        hints.append("call prepare(i, host_ptr) once for every batch i, before its copy")
    missing = [i for i in range(n) if i not in host.got]
    if missing:
        problems.append(f"postprocess was never called for batch {_list(missing)}")
        hints.append("post-process every batch, the last one too, before your function "
                     "returns")
    twice = [i for i, got in sorted(host.got.items()) if len(got) > 1]
    if twice:
        problems.append(f"postprocess was called more than once for batch {_list(twice)}")
        hints.append("post-process each batch exactly once")
    wrong = [i for i in sorted(host.got)
             if not _close(np.frombuffer(host.got[i][-1], np.float32), scores[i])]
    if wrong:
        i = wrong[0]
        got = np.frombuffer(host.got[i][-1], np.float32)
        other = next((j for j in range(n) if j != i and _close(got, scores[j])), None)
        problems.append(f"{len(wrong)} of {n} batches got wrong scores, the first batch {i}"
                        + (f" (it holds batch {other}'s)" if other is not None else ""))
        hints.append("each batch in flight needs its own input and output buffers (device "
                     "and host), and the host may read a batch's scores only after waiting "
                     "for their copy back; with the dynamic model, set the batch size "
                     "(set_dynamic_batch_size) on the dataset you run")
    if problems:
        return Item("results", False, "; ".join(problems), hints[0])
    return Item("results", True, f"all {n} batches were prepared, run and post-processed with "
                                 "their own scores")


def _throughput_item(setup: _Setup, run: _Run, seed: int,
                     busy: list[tuple[int, int]]) -> Item:
    took = run.span_ns
    serial_ns, _ = _reference(seed, "serial")
    best_ns, _ = _reference(seed, "best")
    vs_serial = serial_ns / took
    vs_best = best_ns / took
    core = sum(e - s for s, e in busy) / took    # setup and release run no model
    rate = setup.batches * setup.batch / (took / 1e9)
    text = (f"serving {setup.batches} batches (first prepare to last post-process) took "
            f"{_ms(took)}, "
            f"{rate:,.0f} images/s: {vs_serial:.2f}x the check's serial service (the goal is "
            f"{SERIAL_GOAL:.2f}x) and {vs_best:.0%} of the check's best service's throughput "
            f"(the goal is {1 - BEST_TOLERANCE:.0%}); the AI Core was busy {core:.0%} of "
            "your time")
    if vs_serial >= SERIAL_GOAL and vs_best >= 1 - BEST_TOLERANCE:
        return Item("throughput", True, text)
    if vs_serial < SERIAL_GOAL:
        hint = ("overlap the host and the AI Core: pinned host buffers, two slots, a copy "
                "stream and an execute stream ordered by events, and batch i + 1 prepared "
                "while batch i runs (lesson 06)")
    else:
        hint = ("the rest is in the choices: the fixed model runs faster than the dynamic "
                "one at its own batch size (lesson 08), huge pages speed up copies and "
                "kernels (HUGE_FIRST), and queuing batch i + 1 before waiting for batch i "
                "hides the post-processing (lesson 06's stretch)")
    return Item("throughput", False, text, hint)


def _memory_item(kit: ServiceKit, used: int) -> Item:
    budget = kit.memory_budget_bytes
    text = (f"your service took {_mib(used)} of device memory from the driver "
            f"(get_mem_info's free memory before and after it); the budget is {_mib(budget)}")
    if used <= budget:
        return Item("memory", True, text)
    return Item("memory", False, text,
                "load one model, not both, and give each batch in flight one slot: two "
                "slots of input and output buffers are enough to keep the AI Core busy; "
                "freed memory stays in the runtime's cache, so allocate once, before the "
                "loop, and reuse")


def _resources_item(runtime, failed) -> Item:
    return resources_item(
        runtime, list(failed), "service",
        clean="nothing leaked: the model, buffers, datasets, streams and events were all "
              "released",
        leaked_hint="release everything your service made before it returns: destroy "
                    "events and streams, destroy datasets and data buffers, free device and "
                    "pinned host memory, and unload the model")


_guard.seal(_sys.modules[__name__])        # the grader's own helpers refuse learner code
