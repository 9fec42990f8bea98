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
data). *Result* items (any failure scores 0):

* **runs**: the function returned;
* **results**: every batch prepared once and post-processed once with its own scores (the
  stand-in model of lesson 06 with real weights; the oracle is the compiled model in numpy);
* **device work**: those scores were computed on the AI Core by one of the kit's two models,
  from that batch's input, and carried to the host by a device-to-host copy, unchanged; the
  model ran once per batch (:class:`acllab.checks._common.Provenance`);
* **race-free**: no hazard that makes the results depend on timing (races, reads before sync,
  use after free ...): right scores that are luck of the timing are not right.

*Process* items (they count once every result is right):

* **throughput**: at least :data:`SERIAL_GOAL` times the check's own serial service
  (:func:`serial_service`, the seed's loop) and at least :data:`BOUND_SHARE` of the cost
  model's bound (:func:`bound_ns`: the host's prepare and post-processing, or the AI Core's
  runs of the fixed model with the first copy in and the last copy out, whichever is longer);
* **memory**: the device memory the service took from the driver (``get_mem_info``'s drop in
  free memory, which the caching pool keeps until reset: its high-water mark) within
  ``kit.memory_budget_bytes`` (what the fixed model and two slots of buffers take, plus
  :data:`BUDGET_SLACK_BYTES`);
* **sanitizer** (no other finding, e.g. an async copy of pageable memory) and **resources**
  (nothing left behind at the caller's teardown: model, buffers, datasets, streams, events).
"""

from __future__ import annotations

import os
import sys as _sys
import tempfile
import zlib
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from .. import acl, session
from ..constants import (
    ACL_DDR_MEM,
    ACL_MEM_MALLOC_HUGE_FIRST,
    ACL_MEMCPY_DEVICE_TO_HOST,
    ACL_MEMCPY_HOST_TO_DEVICE,
)
from ..hardware import PROFILES
from ..model import compile_model, dumps, execute_ns, save
from . import PROCESS, RESULT, Call, Case, Item, _guard, call_learner, exercise, isolated, ran_item
from ._common import Provenance, count_for, new_case, resources_item, teardown
from ._pipeline import (
    IMAGE,
    PipelineHost,
    again_item,
    device_item,
    find_work,
    hazard_items,
    idle,
    oracle,
    results_item,
    standin_graph,
)

__all__ = ["ServiceKit", "serial_service", "bound_ns", "grade_service", "SERIAL_GOAL",
           "BOUND_SHARE", "BUDGET_SLACK_BYTES", "GEARS", "LIMIT_S"]

SERIAL_GOAL = 1.3            # the service's throughput over the check's serial service
BOUND_SHARE = 0.94           # ... and at least 94% of the cost model's bound: the dynamic
                             # model (about 92%) or a pipeline that waits for each batch
                             # before queuing the next (about 82%) fall short
GEARS = (1, 8, 16, 32, 48)   # the dynamic model's batch gears
BUDGET_SLACK_BYTES = 3 << 20  # the memory budget: the fixed model and two slots, plus 3 MiB
LIMIT_S = 10.0               # wall-clock seconds per case (the reference takes about 0.1 s)


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
def _models(batch: int) -> tuple[object, str, str, tuple[int, int]]:
    """(the fixed model compiled, its .om path, the dynamic model's .om path, the CRC-32 of
    both .om files: what a loaded model must be to count as the kit's)."""
    c, h, w = IMAGE
    fixed = compile_model(standin_graph(), input_shape=f"features:{batch},{c},{h},{w}",
                          soc_version="Ascend310")
    dynamic = compile_model(standin_graph(), input_shape=f"features:-1,{c},{h},{w}",
                            dynamic_batch_size=",".join(map(str, GEARS)),
                            soc_version="Ascend310")
    paths, crcs = [], []
    for name, compiled in (("fixed", fixed), ("dynamic", dynamic)):
        path = os.path.join(_folder(), f"standin_{name}_b{batch}.om")
        if not os.path.exists(path):
            save(compiled, path)
        paths.append(path)
        crcs.append(zlib.crc32(dumps(compiled)))
    return fixed, paths[0], paths[1], tuple(crcs)


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
        return rng.random((self.batch, *IMAGE), dtype=np.float32) * 2 - 1


@lru_cache(maxsize=16)
def _setup(seed: int) -> _Setup:
    rng = np.random.default_rng([11, seed])
    batch = int(rng.choice([32, 48]))    # gears of the dynamic model; over 1 MiB: huge pages
    batches = count_for(rng, seed, 10, 15)     # odd seeds, odd counts (edges: 1)
    k_ns = execute_ns(_models(batch)[0])
    prepare_ns = int(k_ns * rng.uniform(0.45, 0.6)) // 1000 * 1000
    postprocess_ns = int(k_ns * rng.uniform(0.12, 0.2)) // 1000 * 1000
    label = (f"{batches} batches of {batch} images; prepare {prepare_ns / 1000:,.0f} us and "
             f"post-process {postprocess_ns / 1000:,.0f} us of host time per batch")
    return _Setup(label, seed, batch, batches, prepare_ns, postprocess_ns)


@lru_cache(maxsize=16)
def _truth(seed: int) -> tuple[tuple[bytes, ...], tuple[int, ...]]:
    """The oracle (each batch's scores, from the fixed model in numpy) and each batch's input
    CRC-32: bytes and ints, which nobody can change in place."""
    setup = _setup(seed)
    return oracle(setup, _models(setup.batch)[0])


def _scores(seed: int) -> tuple[np.ndarray, ...]:
    """The oracle: each batch's scores (read-only arrays)."""
    return tuple(np.frombuffer(s, np.float32) for s in _truth(seed)[0])


def _kit(setup: _Setup, budget: int) -> ServiceKit:
    _fixed, fixed_path, dynamic_path, _crcs = _models(setup.batch)
    in_size = setup.batch * int(np.prod(IMAGE)) * 4
    out_size = len(_truth(setup.seed)[0][0])
    return ServiceKit(fixed_path, dynamic_path, setup.batch, in_size, out_size, budget)


def bound_ns(setup) -> int:
    """The cost model's bound on serving ``setup``'s batches (first prepare to last
    post-process): the host must prepare and post-process every batch, and the AI Core must
    run the fixed model on every batch after the first batch is prepared and copied in and
    before the last one is copied out and post-processed. No service is faster."""
    profile = PROFILES["ascend310"]
    k_ns = execute_ns(_models(setup.batch)[0], setup.batch, profile)
    in_bytes = setup.batch * int(np.prod(IMAGE)) * 4
    out_bytes = len(_truth(setup.seed)[0][0])
    copy_in = profile.copy_latency_ns + in_bytes * 1_000_000_000 // profile.h2d_bandwidth_bps
    copy_out = profile.copy_latency_ns + out_bytes * 1_000_000_000 // profile.d2h_bandwidth_bps
    n, p, q = setup.batches, setup.prepare_ns, setup.postprocess_ns
    return max(n * (p + q), p + copy_in + n * k_ns + copy_out + q)


# -- the host callbacks -------------------------------------------------------------------------

class PipelineHost(PipelineHost):
    """Lesson 06's prepare/postprocess, plus when the service's first prepare started and its
    last post-process ended (the span the throughput is measured over)."""

    in_example = out_example = None

    @property
    def first_ns(self) -> int | None:
        return min((s for s, _e in self.prepare_spans), default=None)

    @property
    def last_ns(self) -> int:
        return max((e for _s, e in self.postprocess_spans), default=0)


# -- the check's own serial service and its memory measure --------------------------------------

def serial_service(acl, kit, batches, prepare, postprocess) -> None:
    """The seed's serial service: pageable host input, one stream, one thing at a time."""
    model_id, _ = acl.mdl.load_from_file(kit.fixed_model)
    bufs = []
    for size in (kit.in_size, kit.out_size):
        ptr, _ = acl.rt.malloc(size, ACL_MEM_MALLOC_HUGE_FIRST)
        buf = acl.create_data_buffer(ptr, size)
        ds = acl.mdl.create_dataset()
        acl.mdl.add_dataset_buffer(ds, buf)
        bufs.append((ptr, buf, ds))
    (dev_in, _, inputs), (dev_out, _, outputs) = bufs
    host_in = bytearray(kit.in_size)                   # plain (pageable) Python memory
    host_in_ptr = acl.util.bytes_to_ptr(host_in)
    host_out, _ = acl.rt.malloc_host(kit.out_size)
    stream, _ = acl.rt.create_stream()
    for i in range(batches):
        prepare(i, host_in_ptr)
        acl.rt.memcpy(dev_in, kit.in_size, host_in_ptr, kit.in_size, ACL_MEMCPY_HOST_TO_DEVICE)
        acl.mdl.execute_async(model_id, inputs, outputs, stream)
        acl.rt.synchronize_stream(stream)
        acl.rt.memcpy(host_out, kit.out_size, dev_out, kit.out_size, ACL_MEMCPY_DEVICE_TO_HOST)
        postprocess(i, host_out)
    acl.rt.destroy_stream(stream)
    acl.rt.free_host(host_out)
    for ptr, buf, ds in bufs:
        acl.mdl.destroy_dataset(ds)
        acl.destroy_data_buffer(buf)
        acl.rt.free(ptr)
    acl.mdl.unload(model_id)


@lru_cache(maxsize=8)
def _two_slots_bytes(batch: int) -> int:
    """Device memory the fixed model and two slots of input and output buffers take from the
    driver (huge pages first), measured with get_mem_info in a fresh runtime."""
    setup = next(_setup(s) for s in range(64) if _setup(s).batch == batch)
    kit = _kit(setup, 0)
    with isolated():
        acl.init()
        acl.rt.set_device(0)
        free_before = acl.rt.get_mem_info(ACL_DDR_MEM)[0]
        model_id, _ = acl.mdl.load_from_file(kit.fixed_model)
        ptrs = [acl.rt.malloc(size, ACL_MEM_MALLOC_HUGE_FIRST)[0]
                for size in (kit.in_size, kit.out_size) * 2]
        used = free_before - acl.rt.get_mem_info(ACL_DDR_MEM)[0]
        for ptr in ptrs:
            acl.rt.free(ptr)
        acl.mdl.unload(model_id)
        teardown(synchronize=False)
    return used


def _budget(seed: int) -> int:
    return _two_slots_bytes(_setup(seed).batch) + BUDGET_SLACK_BYTES


@dataclass(frozen=True)
class _Run:
    call: Call
    host: PipelineHost
    used_bytes: int          # device memory taken from the driver while the service ran
    failed: tuple[str, ...]  # what the caller's teardown could not release
    first_api: int

    @property
    def span_ns(self) -> int:
        """Serving time: from the first prepare's start to the last post-process's end."""
        first = self.host.first_ns if self.host.first_ns is not None else self.call.start_ns
        return max(1, (self.host.last_ns or self.call.end_ns) - first)


def _run(fn, setup: _Setup, kit: ServiceKit, then=None) -> tuple[_Run, object]:
    """Call ``fn`` on a kit in the current (fresh) runtime, then tear down; ``then(call, host,
    first_api)``, if given, runs between the call and the teardown, and what it returns is
    returned too."""
    acl.init()
    acl.rt.set_device(0)
    free_before = acl.rt.get_mem_info(ACL_DDR_MEM)[0]
    host = PipelineHost(setup, kit)
    first_api = len(session.current_runtime().api_log)
    call = call_learner(fn, acl, kit, setup.batches, host.prepare, host.postprocess)
    free_after = acl.rt.get_mem_info(ACL_DDR_MEM)[0]
    after = then(call, host, first_api) if then is not None else None
    failed = tuple(teardown())
    return _Run(call, host, max(0, free_before - free_after), failed, first_api), after


@lru_cache(maxsize=16)
def _serial_ns(seed: int) -> int:
    """Serving time of the check's serial service on this case, in a fresh runtime."""
    setup = _setup(seed)
    with isolated():
        run, _ = _run(serial_service, setup, _kit(setup, 1 << 40))
    if run.call.error is not None:
        raise RuntimeError(f"the check's serial service failed: {run.call.error_text}")
    return run.span_ns


# -- grading ------------------------------------------------------------------------------------

@exercise("11.service", "service: the fastest correct inference service", "service",
          limit_s=LIMIT_S, edges=(0, 1))
def grade_service(fn, seed: int) -> Case:
    """One case of 11.service: results and device work, then throughput, memory, hygiene."""
    setup = _setup(seed)
    scores, input_crcs = _truth(seed)           # the oracle, the goals and the budget: all
    serial_ns, bound = _serial_ns(seed), bound_ns(setup)     # before the function runs
    kit = _kit(setup, _budget(seed))
    crcs = _models(setup.batch)[3]
    n = setup.batches
    slot = "device and host output buffers per slot"
    with isolated() as runtime:
        prov = Provenance(runtime)
        fingerprints: dict[int, bool] = {}

        def is_kit_model(model_id) -> bool:
            if model_id not in fingerprints:
                m = runtime.models.get(model_id)
                fingerprints[model_id] = (m is not None
                                          and zlib.crc32(dumps(m.compiled)) in crcs)
            return fingerprints[model_id]

        def grade_then_again(call: Call, host: PipelineHost, first_api: int):
            """The first call's work and results; then, if they were right, the second call."""
            if call.error is not None:
                return None
            tasks = runtime.tasks[call.first_task:]
            work = find_work(runtime, tasks, prov, is_kit_model, kit.in_size, input_crcs)
            tampered = host.tampered(runtime, first_api)
            graded = [results_item(n, scores, host, work, prov, {}, slot),
                      device_item(work, host, prov, n, "the kit's model", tampered)]
            again = None
            if all(i.passed for i in graded):
                again = again_item(fn, runtime, setup, kit, _models(setup.batch)[0], prov,
                                   is_kit_model, {}, slot, "service", kit.in_size)
            return work, graded, again

        run, graded_run = _run(fn, setup, kit, grade_then_again)
        case = new_case(setup.label, run.call, runtime)
        if case.not_done:
            return case
        case.items.append(ran_item(run.call, "service"))
        if run.call.error is not None:
            return case
        work, graded, again = graded_run
        case.items += graded
        if not work.runs:
            case.items += [idle("race-free", RESULT), idle("throughput", PROCESS)]
            return case
        inputs = {m[0] for r in work.runs for m in (r.first.info or {}).get("mem", ())
                  if m[4] == "r"}
        outputs = {r.ptr for reads in run.host.reads.values() for r in reads}
        race_free, sanitizer = hazard_items(runtime, {}, inputs, outputs)
        if again is not None:
            case.items.append(again)
        case.items.append(race_free)
        case.items.append(_throughput_item(setup, run, serial_ns, bound, work.busy))
        case.items.append(_memory_item(kit, run.used_bytes))
        case.items.append(sanitizer)
        case.items.append(_resources_item(runtime, run.failed))
        return case


def _throughput_item(setup: _Setup, run: _Run, serial_ns: int, bound: int,
                     busy: list[tuple[int, int]]) -> Item:
    took = run.span_ns
    vs_serial = serial_ns / took
    vs_bound = bound / took
    core = sum(e - s for s, e in busy) / took    # setup and release run no model
    rate = setup.batches * setup.batch / (took / 1e9)
    text = (f"serving {setup.batches} batches (first prepare to last post-process) took "
            f"{_ms(took)}, {rate:,.0f} images/s: {vs_serial:.2f}x the check's serial service "
            f"(the goal is {SERIAL_GOAL:.2f}x) and {vs_bound:.0%} of the throughput the cost "
            f"model allows (the goal is {BOUND_SHARE:.0%}); the AI Core was busy {core:.0%} "
            "of your time")
    if vs_serial >= SERIAL_GOAL and vs_bound >= BOUND_SHARE:
        return Item("throughput", True, text, kind=PROCESS)
    if vs_serial < SERIAL_GOAL:
        hint = ("overlap the host and the AI Core: pinned host buffers, two slots, a copy "
                "stream and an execute stream ordered by events, and batch i + 1 prepared "
                "while batch i runs (lesson 06)")
    else:
        hint = ("the rest is in the choices: the fixed model runs faster than the dynamic "
                "one at its own batch size (lesson 08), and queuing batch i + 1 before "
                "waiting for batch i hides the post-processing (lesson 06's stretch)")
    return Item("throughput", False, text, hint, kind=PROCESS)


def _memory_item(kit: ServiceKit, used: int) -> Item:
    budget = kit.memory_budget_bytes
    text = (f"your service took {_mib(used)} of device memory from the driver "
            f"(get_mem_info's free memory before and after it); the budget is {_mib(budget)}")
    if used <= budget:
        return Item("memory", True, text, kind=PROCESS)
    return Item("memory", False, text,
                "load one model, not both, and give each batch in flight one slot: two "
                "slots of input and output buffers are enough to keep the AI Core busy; "
                "freed memory stays in the runtime's cache, so allocate once, before the "
                "loop, and reuse", kind=PROCESS)


def _resources_item(runtime, failed) -> Item:
    return resources_item(
        runtime, list(failed), "service",
        clean="nothing leaked: the model, buffers, datasets, streams and events were all "
              "released",
        leaked_hint="release everything your service made before it returns: destroy "
                    "events and streams, destroy datasets and data buffers, free device and "
                    "pinned host memory, and unload the model", kind=PROCESS)


_guard.seal(_sys.modules[__name__])        # the grader's own helpers refuse learner code
