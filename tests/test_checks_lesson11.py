"""acllab.checks.lesson11: the reference service passes, the placeholder is "not done", and each
known-wrong service fails the item that should catch it.

The wrong services are one choice away from the reference: the seed's serial loop, lesson 06's
pipeline that waits for each batch before queuing the next, the dynamic model, pageable host
memory, one slot for everything, a slot per batch, and a model left loaded.
"""

from __future__ import annotations

import numpy as np
import pytest
from checks_support import failed, item, load_solutions

import acllab
from acllab.checks import PROCESS, RESULT, check, exercises, lesson11
from acllab.constants import ACL_MEM_MALLOC_HUGE_FIRST, ACL_MEM_MALLOC_NORMAL_ONLY
from acllab.constants import ACL_MEMCPY_DEVICE_TO_HOST as D2H
from acllab.constants import ACL_MEMCPY_HOST_TO_DEVICE as H2D

SOLUTIONS = load_solutions("11")


def serial_by_hand(acl, kit, batches, prepare, postprocess):
    """The seed's serial service, as a learner would write it."""
    model_id, _ = acl.mdl.load_from_file(kit.fixed_model)
    dev_in, _ = acl.rt.malloc(kit.in_size, ACL_MEM_MALLOC_HUGE_FIRST)
    dev_out, _ = acl.rt.malloc(kit.out_size, ACL_MEM_MALLOC_HUGE_FIRST)
    handles = []
    for ptr, size in ((dev_in, kit.in_size), (dev_out, kit.out_size)):
        buf = acl.create_data_buffer(ptr, size)
        ds = acl.mdl.create_dataset()
        acl.mdl.add_dataset_buffer(ds, buf)
        handles.append((ds, buf))
    host_in, _ = acl.rt.malloc_host(kit.in_size)
    host_out, _ = acl.rt.malloc_host(kit.out_size)
    stream, _ = acl.rt.create_stream()
    for i in range(batches):
        prepare(i, host_in)
        acl.rt.memcpy(dev_in, kit.in_size, host_in, kit.in_size, H2D)
        acl.mdl.execute_async(model_id, handles[0][0], handles[1][0], stream)
        acl.rt.synchronize_stream(stream)
        acl.rt.memcpy(host_out, kit.out_size, dev_out, kit.out_size, D2H)
        postprocess(i, host_out)
    acl.rt.destroy_stream(stream)
    for ds, buf in handles:
        acl.mdl.destroy_dataset(ds)
        acl.destroy_data_buffer(buf)
    for ptr in (dev_in, dev_out):
        acl.rt.free(ptr)
    for ptr in (host_in, host_out):
        acl.rt.free_host(ptr)
    acl.mdl.unload(model_id)


# -- a configurable service: every known-wrong answer is one choice away from the reference -----

def make_service(*, model="fixed", policy=ACL_MEM_MALLOC_HUGE_FIRST, pinned=True, slots=2,
                 ahead=True, unload=True, destroy_streams=True):
    """A service with the given choices; ``slots=None`` gives every batch its own slot."""

    def service(acl, kit, batches, prepare, postprocess):
        n = batches if slots is None else slots
        dynamic = model == "dynamic"
        model_id, _ = acl.mdl.load_from_file(kit.dynamic_model if dynamic else kit.fixed_model)
        desc = acl.mdl.create_desc()
        acl.mdl.get_desc(desc, model_id)
        in_size = acl.mdl.get_input_size_by_index(desc, 0)     # the largest gear if dynamic
        if dynamic:
            idx, _ = acl.mdl.get_input_index_by_name(desc, "ascend_mbatch_shape_data")
            hidden_size = acl.mdl.get_input_size_by_index(desc, idx)
        release, dev_in, dev_out, inputs, outputs = [], [], [], [], []
        for _ in range(n):
            for size, ptrs, sets, is_input in ((in_size, dev_in, inputs, True),
                                               (kit.out_size, dev_out, outputs, False)):
                parts = [(acl.rt.malloc(size, policy)[0], size)]
                if dynamic and is_input:         # the hidden batch input (lesson 08)
                    parts.append((acl.rt.malloc(hidden_size, policy)[0], hidden_size))
                ds = acl.mdl.create_dataset()
                for ptr, sz in parts:
                    buf = acl.create_data_buffer(ptr, sz)
                    acl.mdl.add_dataset_buffer(ds, buf)
                    release += [(acl.destroy_data_buffer, buf), (acl.rt.free, ptr)]
                if dynamic and is_input:
                    acl.mdl.set_dynamic_batch_size(model_id, ds, idx, kit.batch)
                release.insert(0, (acl.mdl.destroy_dataset, ds))
                ptrs.append(parts[0][0])
                sets.append(ds)
        keep = []
        if pinned:
            host_in = [acl.rt.malloc_host(kit.in_size)[0] for _ in range(n)]
            host_out = [acl.rt.malloc_host(kit.out_size)[0] for _ in range(n)]
            release += [(acl.rt.free_host, p) for p in host_in + host_out]
        else:
            keep = [bytearray(kit.in_size) for _ in range(n)]
            keep += [bytearray(kit.out_size) for _ in range(n)]
            ptrs = [acl.util.bytes_to_ptr(b) for b in keep]
            host_in, host_out = ptrs[:n], ptrs[n:]
        copy_s, _ = acl.rt.create_stream()
        exec_s, _ = acl.rt.create_stream()
        copied = [acl.rt.create_event()[0] for _ in range(n)]
        done = [acl.rt.create_event()[0] for _ in range(n)]

        def load(i):
            k = i % n
            prepare(i, host_in[k])
            if i >= n:
                acl.rt.stream_wait_event(copy_s, done[k])
            acl.rt.memcpy_async(dev_in[k], kit.in_size, host_in[k], kit.in_size, H2D, copy_s)
            acl.rt.record_event(copied[k], copy_s)

        def finish(i):
            acl.rt.synchronize_event(done[i % n])
            postprocess(i, host_out[i % n])

        load(0)
        for i in range(batches):
            k = i % n
            acl.rt.stream_wait_event(exec_s, copied[k])
            acl.mdl.execute_async(model_id, inputs[k], outputs[k], exec_s)
            acl.rt.memcpy_async(host_out[k], kit.out_size, dev_out[k], kit.out_size, D2H,
                                exec_s)
            acl.rt.record_event(done[k], exec_s)
            if ahead and i >= 1:
                finish(i - 1)
            if i + 1 < batches:
                load(i + 1)
            if not ahead:
                finish(i)
        if ahead:
            finish(batches - 1)
        for ev in copied + done:
            acl.rt.destroy_event(ev)
        if destroy_streams:
            acl.rt.destroy_stream(copy_s)
            acl.rt.destroy_stream(exec_s)
        for fn, handle in release:
            fn(handle)
        acl.mdl.destroy_desc(desc)
        if unload:
            acl.mdl.unload(model_id)

    return service


# -- registration and more seeds (the generic promises: test_checks_common.py) -----------------

def test_lesson11_registers_its_exercise():
    assert [(ex.id, ex.function) for ex in exercises("11")] == [("11.service", "service")]
    assert [len(ex.seeds) for ex in exercises("11")] == [3]       # cases per check


def test_reference_solution_reports_its_items():
    result = check("11.service", SOLUTIONS.service)
    assert result.status == "passed", str(result)
    assert [(i.name, i.kind) for i in result.items] == [
        ("runs", RESULT), ("results", RESULT), ("device work", RESULT), ("again", RESULT),
        ("race-free", RESULT), ("throughput", PROCESS), ("memory", PROCESS), ("sanitizer", PROCESS),
        ("resources", PROCESS)]


def test_reference_solution_passes_on_more_seeds():
    result = check("11.service", SOLUTIONS.service, seeds=range(3, 9))
    assert result.status == "passed", str(result)


def test_other_good_choices_pass_too():
    """Four-kilobyte pages or a third slot cost nothing here: the grade is not one recipe."""
    for service in (make_service(policy=ACL_MEM_MALLOC_NORMAL_ONLY), make_service(slots=3)):
        result = check("11.service", service, seeds=(0, 1))
        assert result.status == "passed", str(result)


# -- the setting-up: cases, kit, references -----------------------------------------------------

def test_cases_are_deterministic_and_varied():
    first = [lesson11._setup(seed) for seed in range(8)]
    assert first == [lesson11._setup(seed) for seed in range(8)]
    assert {s.batch for s in first} == {32, 48}
    assert len({(s.batch, s.batches, s.prepare_ns) for s in first}) == 8
    assert all(s.batch in lesson11.GEARS for s in first)


def test_the_kit_prints_its_models_and_budget():
    captured = {}

    def look(acl, kit, batches, prepare, postprocess):
        captured["repr"] = repr(kit)
        raise NotImplementedError

    check("11.service", look, seeds=(0,))
    text = captured["repr"]
    assert text.startswith("<ServiceKit: ") and "memory_budget_bytes" in text
    assert "fixed_model" in text and "dynamic_model" in text and "/" not in text


def test_the_goals_come_from_the_serial_loop_and_the_cost_model():
    """The serial service is slow; the cost model's bound is below every service's time, and
    the reference solution reaches the bound's goal with room; no reference service lives in
    the package."""
    assert not hasattr(lesson11, "best_service")
    for seed in range(3):
        setup = lesson11._setup(seed)
        serial_ns, bound = lesson11._serial_ns(seed), lesson11.bound_ns(setup)
        assert serial_ns / bound >= 1.9
        result = check("11.service", SOLUTIONS.service, seeds=(seed,))
        share = float(item(result, "throughput").message.split("% of the throughput")[0]
                      .split()[-1])
        assert 100 >= share >= 100 * lesson11.BOUND_SHARE + 1.5
    assert lesson11._budget(0) > 2 * (lesson11._kit(lesson11._setup(0), 0).in_size)


def test_the_check_never_shows_the_scores():
    result = check("11.service", make_service(slots=1), seeds=(0,))
    scores = lesson11._scores(0)
    text = str(result)
    assert f"{float(scores[0][0]):.4f}" not in text


# -- known-wrong services ----------------------------------------------------------------------

def test_the_serial_service_is_too_slow():
    result = check("11.service", serial_by_hand, seeds=(0,))
    assert failed(result) == {"throughput"}, str(result)
    assert "serial" in item(result, "throughput").hint or "overlap" in item(
        result, "throughput").hint


def test_waiting_for_each_batch_before_queuing_the_next_is_not_the_best():
    result = check("11.service", make_service(ahead=False), seeds=(0,))
    assert failed(result) == {"throughput"}, str(result)
    assert "x the check's serial" in item(result, "throughput").message


def test_the_dynamic_model_is_slower_than_the_fixed_one():
    result = check("11.service", make_service(model="dynamic"), seeds=(0,))
    assert failed(result) == {"throughput"}, str(result)
    assert item(result, "device work").passed          # the dynamic model is the kit's too
    assert "fixed model" in item(result, "throughput").hint


def test_pageable_host_memory_blocks_the_async_copies():
    result = check("11.service", make_service(pinned=False), seeds=(0,))
    assert {"throughput", "sanitizer"} == failed(result), str(result)
    assert "pageable" in item(result, "sanitizer").message
    assert 0 < result.score < 1         # a legitimate choice, only slower


def test_one_slot_for_every_batch_in_flight_races():
    result = check("11.service", make_service(slots=1), seeds=(0,))
    assert {"results", "race-free"} <= failed(result), str(result)
    assert result.score == 0


def test_a_slot_per_batch_busts_the_memory_budget():
    result = check("11.service", make_service(slots=None), seeds=(0,))
    assert "memory" in failed(result), str(result)
    assert "budget" in item(result, "memory").message


def test_leaving_the_model_loaded_or_streams_alive_is_a_leak():
    for service in (make_service(unload=False), make_service(destroy_streams=False)):
        result = check("11.service", service, seeds=(0,))
        assert failed(result) == {"resources"}, str(result)


def test_an_exception_is_reported_with_its_line():
    def broken(acl, kit, batches, prepare, postprocess):
        prepare(0, 12345)

    result = check("11.service", broken, seeds=(0,))
    assert "runs" in failed(result)
    assert "prepare(0, host_ptr)" in item(result, "runs").message


@pytest.mark.parametrize("seed", [0, 1])
def test_a_check_leaves_the_learners_runtime_alone(seed):
    import acllab
    runtime = acllab.reset()
    check("11.service", SOLUTIONS.service, seeds=(seed,))
    assert acllab.current_runtime() is runtime


# -- answers that do no work, or not the device's: each scores 0 -----------------------------

def empty(acl, kit, batches, prepare, postprocess):
    pass


def _host_scores(model_id, batch, images: bytes) -> bytes:
    compiled = acllab.current_runtime().models[model_id].compiled
    x = np.frombuffer(images, np.float32).reshape(batch, 32, 16, 16)
    return np.ascontiguousarray(compiled.forward({"features": x})[0], np.float32).tobytes()


def _write_host(ptr: int, data: bytes) -> None:
    region = acllab.current_runtime().region(ptr)
    region.data[ptr - region.start:ptr - region.start + len(data)] = np.frombuffer(data, np.uint8)


def host_inference(acl, kit, batches, prepare, postprocess):
    """The model is loaded (for its weights) but every score is computed in numpy."""
    model_id, _ = acl.mdl.load_from_file(kit.fixed_model)
    host_in, _ = acl.rt.malloc_host(kit.in_size)
    host_out, _ = acl.rt.malloc_host(kit.out_size)
    for i in range(batches):
        prepare(i, host_in)
        _write_host(host_out, _host_scores(model_id, kit.batch,
                                           acl.util.ptr_to_bytes(host_in, kit.in_size)))
        postprocess(i, host_out)
    acl.rt.free_host(host_in)
    acl.rt.free_host(host_out)
    acl.mdl.unload(model_id)


def zeros_on_device(acl, kit, batches, prepare, postprocess):
    """The model runs every batch on zeros; the host writes its own scores afterwards."""
    model_id, _ = acl.mdl.load_from_file(kit.fixed_model)
    ptrs = [acl.rt.malloc(size, ACL_MEM_MALLOC_HUGE_FIRST)[0]
            for size in (kit.in_size, kit.out_size)]
    sets = []
    for ptr, size in zip(ptrs, (kit.in_size, kit.out_size), strict=True):
        ds = acl.mdl.create_dataset()
        buf = acl.create_data_buffer(ptr, size)
        acl.mdl.add_dataset_buffer(ds, buf)
        sets.append((ds, buf))
    host_in, _ = acl.rt.malloc_host(kit.in_size)
    host_out, _ = acl.rt.malloc_host(kit.out_size)
    for i in range(batches):
        prepare(i, host_in)
        acl.rt.memset(ptrs[0], kit.in_size, 0, kit.in_size)
        acl.mdl.execute(model_id, sets[0][0], sets[1][0])
        acl.rt.memcpy(host_out, kit.out_size, ptrs[1], kit.out_size, D2H)
        _write_host(host_out, _host_scores(model_id, kit.batch,
                                           acl.util.ptr_to_bytes(host_in, kit.in_size)))
        postprocess(i, host_out)
    for ds, buf in sets:
        acl.mdl.destroy_dataset(ds)
        acl.destroy_data_buffer(buf)
    for ptr in ptrs:
        acl.rt.free(ptr)
    acl.rt.free_host(host_in)
    acl.rt.free_host(host_out)
    acl.mdl.unload(model_id)


def asks_the_oracle(acl, kit, batches, prepare, postprocess):
    lesson11._scores(0)


def borrows_the_serial_service(acl, kit, batches, prepare, postprocess):
    lesson11.serial_service(acl, kit, batches, prepare, postprocess)


@pytest.mark.parametrize("answer", [empty, lambda *a: None], ids=["empty", "lambda"])
def test_doing_nothing_scores_exactly_zero(answer):
    result = check("11.service", answer)
    assert result.status == "failed" and result.score == 0.0
    assert {"results", "device work", "race-free", "throughput"} <= failed(result)


@pytest.mark.parametrize("answer", [host_inference, zeros_on_device])
def test_scores_the_device_did_not_compute_score_zero(answer):
    result = check("11.service", answer, seeds=(0,))
    assert item(result, "results").passed                 # the bytes are right ...
    device = item(result, "device work")                  # ... but not the device's
    assert not device.passed and "host" in device.message
    assert result.score == 0


@pytest.mark.parametrize("answer", [asks_the_oracle, borrows_the_serial_service])
def test_the_graders_helpers_do_not_work_for_the_learner(answer):
    result = check("11.service", answer, seeds=(0,))
    assert failed(result) == {"own work"} and result.score == 0


def _tampers(what):
    racy = make_service(slots=1)

    def service(acl, kit, batches, prepare, postprocess):
        if what == "goal":
            lesson11.SERIAL_GOAL = 0.0
            lesson11.BOUND_SHARE = 0.0
        elif what == "item":
            from acllab.checks import _pipeline
            _pipeline.results_item = lambda *a: None
        else:
            import acllab.checks._common
            acllab.checks._common.sanitizer.analyze = lambda rt: []
        (serial_by_hand if what == "goal" else racy)(acl, kit, batches, prepare, postprocess)

    return service


@pytest.mark.parametrize("what, changed", [("goal", "SERIAL_GOAL"), ("item", "results_item"),
                                           ("sanitizer", "analyze")])
def test_tampering_fails_the_case_and_is_undone(what, changed):
    import acllab.analysis.sanitizer
    before = (lesson11.SERIAL_GOAL, lesson11.BOUND_SHARE, acllab.analysis.sanitizer.analyze)
    result = check("11.service", _tampers(what), seeds=(0,))
    assert failed(result) == {"acllab unchanged"} and result.score == 0
    assert changed in item(result, "acllab unchanged").message
    assert (lesson11.SERIAL_GOAL, lesson11.BOUND_SHARE, acllab.analysis.sanitizer.analyze) == before
    assert check("11.service", make_service(slots=1), seeds=(0,)).score == 0


def spins(acl, kit, batches, prepare, postprocess):
    while True:
        pass


def sleeps(acl, kit, batches, prepare, postprocess):
    import time
    time.sleep(100)


@pytest.mark.parametrize("answer", [spins, sleeps])
def test_a_hang_is_stopped_by_the_wall_clock_limit(answer):
    import time
    start = time.monotonic()
    result = check("11.service", answer, seeds=(0,), limit_s=1)
    assert time.monotonic() - start < 10
    assert failed(result) == {"runs"} and result.score == 0
    assert "wall-clock" in item(result, "runs").message


def test_system_exit_is_contained():
    def service(acl, kit, batches, prepare, postprocess):
        import sys
        sys.exit(3)

    result = check("11.service", service, seeds=(0,))
    assert failed(result) == {"runs"} and result.score == 0
    assert "SystemExit" in item(result, "runs").message
    assert exercises("11")[0].limit_s == 10.0


# -- right services written differently from the reference: full marks ------------------------

def on_lesson06_pipeline(pipeline):
    """A service that builds lesson 06's kit itself, then runs a pipeline of lesson 06 on it."""
    from acllab.checks.lesson06 import PipelineKit

    def service(acl, kit, batches, prepare, postprocess):
        with open(kit.fixed_model, "rb") as f:           # from memory this time
            om = f.read()
        model_id, _ = acl.mdl.load_from_mem(acl.util.bytes_to_ptr(om), len(om))
        made, datasets = {}, []
        for name, size in (("dev_in", kit.in_size), ("dev_out", kit.out_size)):
            made[name] = tuple(acl.rt.malloc(size, ACL_MEM_MALLOC_HUGE_FIRST)[0]
                               for _ in range(2))
            sets = []
            for ptr in made[name]:
                ds, buf = acl.mdl.create_dataset(), acl.create_data_buffer(ptr, size)
                acl.mdl.add_dataset_buffer(ds, buf)
                sets.append(ds)
                datasets.append((ds, buf))
            made["inputs" if name == "dev_in" else "outputs"] = tuple(sets)
        for name, size in (("host_in", kit.in_size), ("host_out", kit.out_size)):
            made[name] = tuple(acl.rt.malloc_host(size)[0] for _ in range(2))
        mine = PipelineKit(model_id, made["inputs"], made["outputs"], made["dev_in"],
                           made["dev_out"], made["host_in"], made["host_out"], kit.in_size,
                           kit.out_size, kit.batch)
        pipeline(acl, mine, batches, prepare, postprocess)
        for ds, buf in datasets:
            acl.mdl.destroy_dataset(ds)
            acl.destroy_data_buffer(buf)
        for ptr in made["dev_in"] + made["dev_out"]:
            acl.rt.free(ptr)
        for ptr in made["host_in"] + made["host_out"]:
            acl.rt.free_host(ptr)
        acl.mdl.unload(model_id)

    return service


@pytest.mark.parametrize("pipeline", ["stream_per_slot", "three_streams"])
def test_other_right_services_pass(pipeline):
    import test_checks_lesson06
    service = on_lesson06_pipeline(getattr(test_checks_lesson06, pipeline))
    result = check("11.service", service, seeds=(0, 1, 2, 4))
    assert result.status == "passed" and result.score == 1.0, str(result)


# -- the second call in the same runtime: other images, a count of the other parity ------------

def test_a_service_that_serves_only_its_first_call_fails_again():
    served = []

    def service(acl, kit, batches, prepare, postprocess):
        if served:                 # "already warmed up": post-processes stale output
            for i in range(batches):
                postprocess(i, served[0])
            return
        host_out, _ = acl.rt.malloc_host(kit.out_size)     # kept for "later" (a leak)
        served.append(host_out)
        SOLUTIONS.service(acl, kit, batches, prepare, postprocess)

    result = check("11.service", service)
    assert result.score == 0 and "again" in failed(result), str(result)
    assert item(result, "again").kind == RESULT


def test_the_reference_service_passes_the_second_call():
    result = check("11.service", SOLUTIONS.service)
    again = item(result, "again")
    assert again.passed and "batches of them" in again.message, str(result)


def test_service_cases_have_odd_and_even_batch_counts():
    counts = []

    def service(acl, kit, batches, prepare, postprocess):
        counts.append(batches)
        SOLUTIONS.service(acl, kit, batches, prepare, postprocess)

    assert check("11.service", service, seeds=(0, 1), edges=False).passed
    assert [c % 2 for c in counts] == [0, 1, 1, 0]
