"""acllab.checks.lesson06: the reference pipelines pass, placeholders are "not done", and each
known bug of a double-stream pipeline fails the item that should catch it.

The bugs are small stories: the seed's own serial loop (too slow), the seed's single input
buffer (a race the timing hides), a run that does not wait for its copy, post-processing before
the scores are back, a loop that forgets the last batch, leaks, pageable buffers, and for the
stretch the seed's pipeline itself (the AI Core still waits for post-processing) and one host
output buffer for two batches in flight.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from checks_support import exercise_list, failed, item, load_solutions

import acllab
from acllab import session
from acllab.checks import PROCESS, RESULT, check, exercises, lesson06
from acllab.constants import ACL_MEMCPY_DEVICE_TO_HOST as D2H
from acllab.constants import ACL_MEMCPY_HOST_TO_DEVICE as H2D

SOLUTIONS = load_solutions("06")


EXERCISES = exercise_list("06")


# -- registration and more seeds (the generic promises: test_checks_common.py) -----------------

def test_lesson06_registers_its_exercises():
    assert EXERCISES == [("06.pipeline", "pipeline"), ("06.stretch", "pipeline_ahead")]
    assert [len(ex.seeds) for ex in exercises("06")] == [3, 3]     # cases per check


@pytest.mark.parametrize("exercise_id, function", EXERCISES)
def test_reference_solution_passes_on_more_seeds(exercise_id, function):
    result = check(exercise_id, getattr(SOLUTIONS, function), seeds=range(3, 9))
    assert result.status == "passed", str(result)


def test_the_reference_pipelines_have_room_above_the_goals():
    """The goals sit well below what the references reach, so no seed passes by a hair."""
    pipe = check("06.pipeline", SOLUTIONS.pipeline, seeds=(0,))
    ratio = float(item(pipe, "throughput").message.split("x the serial")[0].split()[-1])
    assert ratio >= lesson06.SPEEDUP_GOAL + 0.1
    ahead = check("06.stretch", SOLUTIONS.pipeline_ahead, seeds=(0,))
    busy = float(item(ahead, "utilisation").message.split("busy ")[1].split("%")[0])
    assert busy >= 100 * lesson06.UTILISATION_GOAL + 5


# -- the setting-up: model, kit, cases ---------------------------------------------------------

def test_the_standin_model_keeps_every_matrix_product_small():
    """Above about 262,144 multiply-adds OpenBLAS starts threads, which thrash on busy CI
    machines (a 32x128x128 product took 6 ms instead of 3 us): every product stays below."""
    graph = lesson06.standin_graph()
    for batch in (16, 24, 32, 48):
        compiled, _ = lesson06._model(batch)
        gemms = [p.gemm for p in compiled.plan_for() if p.gemm]
        assert gemms and max(m * k * n for m, k, n in gemms) < 262_144, gemms
    assert len(graph.ops) == 2 * lesson06.STANDIN_LAYERS + 4


def test_cases_are_deterministic_and_varied():
    first = [lesson06._setup(1, seed) for seed in range(6)]
    assert first == [lesson06._setup(1, seed) for seed in range(6)]
    assert len({(s.batch, s.batches, s.prepare_ns) for s in first}) == 6
    setup = first[0]
    assert np.array_equal(setup.images(2), setup.images(2))
    assert not np.array_equal(setup.images(2), setup.images(3))


def test_the_simulated_model_and_the_oracle_agree():
    """The serial reference's scores are the numpy oracle's (its results item passes)."""
    result = check("06.pipeline", lesson06.serial_reference, seeds=(0, 1))
    assert item(result, "results").passed, str(result)
    scores = lesson06._scores(1, 0)
    assert len(scores) == lesson06._setup(1, 0).batches
    assert all(abs(float(s.sum()) - lesson06._setup(1, 0).batch) < 1e-3 for s in scores)


def test_the_kit_prints_its_slots():
    captured = {}

    def look(acl, kit, batches, prepare, postprocess):
        captured["repr"] = repr(kit)
        raise NotImplementedError

    check("06.pipeline", look, seeds=(0,))
    assert captured["repr"].startswith("<PipelineKit: model ")
    assert "2 slots" in captured["repr"] and "host_out" in captured["repr"]


# -- 06.pipeline: known-wrong answers ----------------------------------------------------------

def pipeline_single_buffer(acl, kit, batches, prepare, postprocess):
    """The seed's original double-stream code: every batch into dev_in[0]."""
    copy_s, _ = acl.rt.create_stream()
    exec_s, _ = acl.rt.create_stream()
    copied = [acl.rt.create_event()[0] for _ in range(2)]

    def load(i):
        prepare(i, kit.host_in[i % 2])
        acl.rt.memcpy_async(kit.dev_in[0], kit.in_size, kit.host_in[i % 2], kit.in_size, H2D,
                            copy_s)
        acl.rt.record_event(copied[i % 2], copy_s)

    load(0)
    for i in range(batches):
        acl.rt.stream_wait_event(exec_s, copied[i % 2])
        acl.mdl.execute_async(kit.model_id, kit.inputs[0], kit.outputs[0], exec_s)
        if i + 1 < batches:
            load(i + 1)
        acl.rt.synchronize_stream(exec_s)
        acl.rt.memcpy(kit.host_out[0], kit.out_size, kit.dev_out[0], kit.out_size, D2H)
        postprocess(i, kit.host_out[0])
    for ev in copied:
        acl.rt.destroy_event(ev)
    acl.rt.destroy_stream(copy_s)
    acl.rt.destroy_stream(exec_s)


def pipeline_no_copy_event(acl, kit, batches, prepare, postprocess):
    """Two slots, but the model's stream never waits for the copy."""
    copy_s, _ = acl.rt.create_stream()
    exec_s, _ = acl.rt.create_stream()

    def load(i):
        prepare(i, kit.host_in[i % 2])
        acl.rt.memcpy_async(kit.dev_in[i % 2], kit.in_size, kit.host_in[i % 2], kit.in_size,
                            H2D, copy_s)

    load(0)
    for i in range(batches):
        acl.mdl.execute_async(kit.model_id, kit.inputs[i % 2], kit.outputs[0], exec_s)
        if i + 1 < batches:
            load(i + 1)
        acl.rt.synchronize_stream(exec_s)
        acl.rt.memcpy(kit.host_out[0], kit.out_size, kit.dev_out[0], kit.out_size, D2H)
        postprocess(i, kit.host_out[0])
    acl.rt.synchronize_stream(copy_s)
    acl.rt.destroy_stream(copy_s)
    acl.rt.destroy_stream(exec_s)


def pipeline_reads_early(acl, kit, batches, prepare, postprocess):
    """Copies the scores back asynchronously and post-processes them before they land."""
    exec_s, _ = acl.rt.create_stream()
    for i in range(batches):
        prepare(i, kit.host_in[0])
        acl.rt.memcpy(kit.dev_in[0], kit.in_size, kit.host_in[0], kit.in_size, H2D)
        acl.mdl.execute_async(kit.model_id, kit.inputs[0], kit.outputs[0], exec_s)
        acl.rt.memcpy_async(kit.host_out[0], kit.out_size, kit.dev_out[0], kit.out_size, D2H,
                            exec_s)
        postprocess(i, kit.host_out[0])                 # the copy back has not landed
    acl.rt.synchronize_stream(exec_s)
    acl.rt.destroy_stream(exec_s)


def pipeline_forgets_the_last_batch(acl, kit, batches, prepare, postprocess):
    SOLUTIONS.pipeline(acl, kit, batches - 1, prepare, postprocess)


def pipeline_twice(acl, kit, batches, prepare, postprocess):
    SOLUTIONS.pipeline(acl, kit, batches, prepare, postprocess)
    postprocess(0, kit.host_out[0])


def pipeline_leaks(acl, kit, batches, prepare, postprocess):
    acl.rt.create_event()
    acl.rt.create_stream()
    SOLUTIONS.pipeline(acl, kit, batches, prepare, postprocess)


def pipeline_frees_the_kit(acl, kit, batches, prepare, postprocess):
    SOLUTIONS.pipeline(acl, kit, batches, prepare, postprocess)
    acl.rt.free_host(kit.host_in[1])


def pipeline_pageable(acl, kit, batches, prepare, postprocess):
    host = [bytearray(kit.in_size) for _ in range(2)]
    mine = replace(kit, host_in=tuple(acl.util.bytes_to_ptr(h) for h in host))
    SOLUTIONS.pipeline(acl, mine, batches, prepare, postprocess)


def pipeline_blocking_execute(acl, kit, batches, prepare, postprocess):
    """Two streams, but acl.mdl.execute blocks the host while the model runs."""
    copy_s, _ = acl.rt.create_stream()
    ev, _ = acl.rt.create_event()
    prepare(0, kit.host_in[0])
    for i in range(batches):
        k = i % 2
        acl.rt.memcpy_async(kit.dev_in[k], kit.in_size, kit.host_in[k], kit.in_size, H2D,
                            copy_s)
        acl.rt.record_event(ev, copy_s)
        acl.rt.synchronize_event(ev)
        acl.mdl.execute(kit.model_id, kit.inputs[k], kit.outputs[0])
        if i + 1 < batches:
            prepare(i + 1, kit.host_in[(i + 1) % 2])
        acl.rt.memcpy(kit.host_out[0], kit.out_size, kit.dev_out[0], kit.out_size, D2H)
        postprocess(i, kit.host_out[0])
    acl.rt.destroy_event(ev)
    acl.rt.destroy_stream(copy_s)


def test_the_seeds_serial_loop_is_serial_and_scores_nothing():
    result = check("06.pipeline", lesson06.serial_reference)
    assert failed(result) == {"two streams", "overlap", "throughput"}
    assert result.score == 0
    assert "1.00x the serial loop" in item(result, "throughput").message
    assert "0% of the host's prepare time" in item(result, "overlap").message
    assert "blocking acl.rt.memcpy" in item(result, "two streams").message
    assert "execute_async" in item(result, "throughput").hint


def test_the_seeds_single_input_buffer_races_even_when_timing_hides_it():
    result = check("06.pipeline", pipeline_single_buffer)
    assert failed(result) == {"race-free"}           # the scores happen to be right ...
    assert result.score == 0                         # ... but only by luck of the timing
    race = item(result, "race-free")
    assert race.kind == RESULT
    assert "[race]" in race.message and "kit.dev_in[0]" in race.message
    assert "is a kernel of the model" in race.message
    assert "the seed's bug" in race.hint and "stream_wait_event" in race.hint


def test_a_run_that_does_not_wait_for_its_copy_reads_garbage_and_races():
    result = check("06.pipeline", pipeline_no_copy_event)
    assert {"results", "device work", "race-free"} <= failed(result)
    assert result.score == 0
    assert "batch 0's scores" in item(result, "results").message
    assert "before the copy of this batch had landed" in item(result, "results").hint
    assert "before the copy has landed" in item(result, "race-free").hint


def test_post_processing_before_the_scores_are_back_fails():
    result = check("06.pipeline", pipeline_reads_early)
    assert {"results", "race-free"} <= failed(result)
    assert result.score == 0
    assert "host-read-before-sync" in item(result, "race-free").message
    results = item(result, "results")
    assert "DE AD BE EF" in results.message
    assert "wait for that copy before you call postprocess" in results.hint


def test_forgetting_the_last_batch_fails_results():
    result = check("06.pipeline", pipeline_forgets_the_last_batch)
    assert "results" in failed(result) and result.score == 0
    n = lesson06._setup(1, 0).batches
    message = item(result, "results").message
    assert f"prepare was never called for batch {n - 1}" in message
    assert f"postprocess was never called for batch {n - 1}" in message


def test_post_processing_a_batch_twice_fails_results():
    result = check("06.pipeline", pipeline_twice)
    assert "results" in failed(result) and result.score == 0
    assert "more than once for batch 0" in item(result, "results").message


def test_leaked_streams_and_events_cost_the_resources_share_only():
    result = check("06.pipeline", pipeline_leaks)
    assert failed(result) == {"resources"}
    assert 0.8 < result.score < 1
    message = item(result, "resources").message
    assert "stream" in message and "event" in message


def test_freeing_the_kit_is_reported_as_released():
    result = check("06.pipeline", pipeline_frees_the_kit)
    assert failed(result) == {"resources", "again"}     # its caller cannot run it again
    assert "kit.host_in[1]" in item(result, "resources").message


def test_pageable_host_buffers_are_a_process_finding():
    result = check("06.pipeline", pipeline_pageable)
    assert "sanitizer" in failed(result)
    assert item(result, "sanitizer").kind == PROCESS
    assert "pageable-async" in item(result, "sanitizer").message


def test_a_blocking_execute_makes_host_and_device_take_turns():
    result = check("06.pipeline", pipeline_blocking_execute)
    assert {"throughput", "overlap"} <= failed(result)
    assert "race-free" not in failed(result) and result.score == 0


def test_preparing_into_device_memory_is_reported_on_the_learners_line():
    def pipeline(acl, kit, batches, prepare, postprocess):
        prepare(0, kit.dev_in[0])

    result = check("06.pipeline", pipeline)
    assert failed(result) == {"runs"}
    runs = item(result, "runs").message
    assert "ValueError" in runs and "prepare(0, kit.dev_in[0])" in runs
    assert "kit.host_in[0]" in runs


def test_a_batch_number_out_of_range_is_explained():
    def pipeline(acl, kit, batches, prepare, postprocess):
        prepare(batches, kit.host_in[0])

    result = check("06.pipeline", pipeline)
    assert "numbered 0 to" in item(result, "runs").message


# -- 06.stretch: known-wrong answers -----------------------------------------------------------

def ahead_one_host_output(acl, kit, batches, prepare, postprocess):
    """Queues ahead, but every batch's scores come back into host_out[0]."""
    copy_s, _ = acl.rt.create_stream()
    exec_s, _ = acl.rt.create_stream()
    copied = [acl.rt.create_event()[0] for _ in range(2)]
    done = [acl.rt.create_event()[0] for _ in range(2)]

    def load(i):
        k = i % 2
        prepare(i, kit.host_in[k])
        if i >= 2:
            acl.rt.stream_wait_event(copy_s, done[k])
        acl.rt.memcpy_async(kit.dev_in[k], kit.in_size, kit.host_in[k], kit.in_size, H2D,
                            copy_s)
        acl.rt.record_event(copied[k], copy_s)

    def finish(i):
        acl.rt.synchronize_event(done[i % 2])
        postprocess(i, kit.host_out[0])

    load(0)
    for i in range(batches):
        k = i % 2
        acl.rt.stream_wait_event(exec_s, copied[k])
        acl.mdl.execute_async(kit.model_id, kit.inputs[k], kit.outputs[k], exec_s)
        acl.rt.memcpy_async(kit.host_out[0], kit.out_size, kit.dev_out[k], kit.out_size, D2H,
                            exec_s)
        acl.rt.record_event(done[k], exec_s)
        if i >= 1:
            finish(i - 1)
        if i + 1 < batches:
            load(i + 1)
    finish(batches - 1)
    for ev in copied + done:
        acl.rt.destroy_event(ev)
    acl.rt.destroy_stream(copy_s)
    acl.rt.destroy_stream(exec_s)


def test_the_seeds_pipeline_is_not_queued_ahead():
    result = check("06.stretch", SOLUTIONS.pipeline)
    assert failed(result) == {"ahead", "utilisation"}
    assert result.score == 0                   # queuing ahead is what the stretch asks for
    assert "before it queued the next batch's run" in item(result, "ahead").message
    utilisation = item(result, "utilisation")
    assert "while the host post-processed" in utilisation.message
    assert "synchronize_event" in utilisation.hint


def test_one_host_output_for_two_batches_in_flight_races():
    result = check("06.stretch", ahead_one_host_output)
    assert failed(result) == {"race-free"} and result.score == 0
    race = item(result, "race-free")
    assert "host-read-before-sync" in race.message and "kit.host_out[0]" in race.message
    assert "its own host output buffer" in race.hint


def test_the_serial_loop_fails_the_stretch():
    result = check("06.stretch", lesson06.serial_reference)
    assert {"two streams", "overlap", "ahead", "throughput", "utilisation"} == failed(result)
    assert result.score == 0


# -- answers that do no work, or not the device's: each scores 0 -----------------------------

def empty(acl, kit, batches, prepare, postprocess):
    pass


def _host_scores(kit, images: bytes) -> bytes:
    """The learner's numpy inference of one batch, with the runtime's own model object."""
    compiled = acllab.current_runtime().models[kit.model_id].compiled
    x = np.frombuffer(images, np.float32).reshape(kit.batch, 32, 16, 16)
    return np.ascontiguousarray(compiled.forward({"features": x})[0], np.float32).tobytes()


def _write_host(ptr: int, data: bytes) -> None:
    region = acllab.current_runtime().region(ptr)
    region.data[ptr - region.start:ptr - region.start + len(data)] = np.frombuffer(data, np.uint8)


def host_inference(acl, kit, batches, prepare, postprocess):
    """Everything in numpy on the host: the scores are right, the device did nothing."""
    for i in range(batches):
        prepare(i, kit.host_in[0])
        images = acl.util.ptr_to_bytes(kit.host_in[0], kit.in_size)
        _write_host(kit.host_out[0], _host_scores(kit, images))
        postprocess(i, kit.host_out[0])


def zeros_on_device_labels_on_host(acl, kit, batches, prepare, postprocess):
    """The model runs (on zeros) and is copied back; the host then writes its own scores."""
    stream, _ = acl.rt.create_stream()
    for i in range(batches):
        prepare(i, kit.host_in[0])
        acl.rt.memset(kit.dev_in[0], kit.in_size, 0, kit.in_size)
        acl.mdl.execute_async(kit.model_id, kit.inputs[0], kit.outputs[0], stream)
        acl.rt.synchronize_stream(stream)
        acl.rt.memcpy(kit.host_out[0], kit.out_size, kit.dev_out[0], kit.out_size, D2H)
        images = acl.util.ptr_to_bytes(kit.host_in[0], kit.in_size)
        _write_host(kit.host_out[0], _host_scores(kit, images))
        postprocess(i, kit.host_out[0])
    acl.rt.destroy_stream(stream)


def uploads_host_scores(acl, kit, batches, prepare, postprocess):
    """Host-computed scores copied to the card and back: the bytes crossed the bus, but no
    model computed them."""
    scratch, _ = acl.rt.malloc_host(kit.out_size)
    for i in range(batches):
        prepare(i, kit.host_in[0])
        images = acl.util.ptr_to_bytes(kit.host_in[0], kit.in_size)
        _write_host(scratch, _host_scores(kit, images))
        acl.rt.memcpy(kit.dev_out[0], kit.out_size, scratch, kit.out_size, H2D)
        acl.rt.memcpy(kit.host_out[0], kit.out_size, kit.dev_out[0], kit.out_size, D2H)
        postprocess(i, kit.host_out[0])
    acl.rt.free_host(scratch)


def asks_the_oracle(acl, kit, batches, prepare, postprocess):
    scores = lesson06._scores(1, 0)                   # the grader's helper refuses
    for i in range(batches):
        prepare(i, kit.host_in[0])
        _write_host(kit.host_out[0], scores[i].tobytes())
        postprocess(i, kit.host_out[0])


def borrows_the_serial_loop(acl, kit, batches, prepare, postprocess):
    lesson06.serial_reference(acl, kit, batches, prepare, postprocess)


def forges_the_prepare_records(acl, kit, batches, prepare, postprocess):
    """Writes the images itself (no prepare host time) and forges the prepare count."""
    host = prepare.__self__
    for i in range(batches):
        images = host.setup.images(i).tobytes()
        _write_host(kit.host_in[i % 2], images)
        host.prepared[i] += 1
    copy_s, _ = acl.rt.create_stream()
    exec_s, _ = acl.rt.create_stream()
    for i in range(batches):
        acl.rt.memcpy_async(kit.dev_in[0], kit.in_size, kit.host_in[i % 2], kit.in_size, H2D,
                            copy_s)
        acl.rt.synchronize_stream(copy_s)
        acl.mdl.execute_async(kit.model_id, kit.inputs[0], kit.outputs[0], exec_s)
        acl.rt.synchronize_stream(exec_s)
        acl.rt.memcpy(kit.host_out[0], kit.out_size, kit.dev_out[0], kit.out_size, D2H)
        postprocess(i, kit.host_out[0])
    acl.rt.destroy_stream(copy_s)
    acl.rt.destroy_stream(exec_s)


@pytest.mark.parametrize("exercise_id", ["06.pipeline", "06.stretch"])
@pytest.mark.parametrize("answer", [empty, lambda *a: None], ids=["empty", "lambda"])
def test_doing_nothing_scores_exactly_zero(exercise_id, answer):
    result = check(exercise_id, answer)
    assert result.status == "failed" and result.score == 0.0
    assert {"results", "device work", "race-free", "throughput"} <= failed(result)


@pytest.mark.parametrize("exercise_id", ["06.pipeline", "06.stretch"])
def test_scores_computed_on_the_host_score_zero(exercise_id):
    result = check(exercise_id, host_inference)
    assert item(result, "results").passed            # the bytes are right ...
    device = item(result, "device work")
    assert not device.passed and device.kind == RESULT   # ... but the device did not compute
    assert "the host put those bytes there itself" in device.message
    assert "never ran" in device.message
    assert result.score == 0


@pytest.mark.parametrize("answer", [zeros_on_device_labels_on_host, uploads_host_scores])
def test_device_work_that_did_not_compute_the_scores_scores_zero(answer):
    result = check("06.pipeline", answer)
    assert item(result, "results").passed
    assert "device work" in failed(result) and result.score == 0
    message = item(result, "device work").message
    assert "host" in message


def test_an_input_of_zeros_is_no_batch():
    result = check("06.pipeline", zeros_on_device_labels_on_host)
    assert "on an input that was no batch's" in item(result, "device work").message


@pytest.mark.parametrize("answer", [asks_the_oracle, borrows_the_serial_loop])
def test_the_graders_helpers_do_not_work_for_the_learner(answer):
    result = check("06.pipeline", answer)
    assert failed(result) == {"own work"} and result.score == 0
    assert "belongs to the grader" in item(result, "own work").message


def test_forged_callback_records_do_not_count():
    result = check("06.pipeline", forges_the_prepare_records)
    assert "device work" in failed(result) and result.score == 0
    assert "do not match the host work" in item(result, "device work").message


# -- tampering from inside the function: detected, undone, 0 -------------------------------------

def lowers_the_goal(acl, kit, batches, prepare, postprocess):
    lesson06.SPEEDUP_GOAL = 0.0
    stream, _ = acl.rt.create_stream()
    for i in range(batches):
        prepare(i, kit.host_in[0])
        acl.rt.memcpy(kit.dev_in[0], kit.in_size, kit.host_in[0], kit.in_size, H2D)
        acl.mdl.execute_async(kit.model_id, kit.inputs[0], kit.outputs[0], stream)
        acl.rt.synchronize_stream(stream)
        acl.rt.memcpy(kit.host_out[0], kit.out_size, kit.dev_out[0], kit.out_size, D2H)
        postprocess(i, kit.host_out[0])
    acl.rt.destroy_stream(stream)


def replaces_an_item(acl, kit, batches, prepare, postprocess):
    from acllab.checks import Item
    lesson06._throughput_item = lambda *a: Item("throughput", True, "fast")
    lesson06._overlap_item = lambda *a: Item("overlap", True, "overlapped")
    pipeline_single_buffer(acl, kit, batches, prepare, postprocess)


def silences_the_sanitizer(acl, kit, batches, prepare, postprocess):
    import acllab.checks._common
    acllab.checks._common.sanitizer.analyze = lambda rt: []
    pipeline_single_buffer(acl, kit, batches, prepare, postprocess)


@pytest.mark.parametrize("answer, changed", [
    (lowers_the_goal, "SPEEDUP_GOAL"),
    (replaces_an_item, "_throughput_item"),
    (silences_the_sanitizer, "analyze"),
])
def test_tampering_fails_the_case_and_is_undone(answer, changed):
    import acllab.analysis.sanitizer
    goal, item_fn, analyze = (lesson06.SPEEDUP_GOAL, lesson06._throughput_item,
                              acllab.analysis.sanitizer.analyze)
    result = check("06.pipeline", answer)
    assert failed(result) == {"acllab unchanged"} and result.score == 0
    assert changed in item(result, "acllab unchanged").message
    now = (lesson06.SPEEDUP_GOAL, lesson06._throughput_item, acllab.analysis.sanitizer.analyze)
    assert now == (goal, item_fn, analyze)
    assert check("06.pipeline", pipeline_single_buffer, seeds=(0,)).score == 0


# -- spec deviations ---------------------------------------------------------------------------

def one_stream_two_slots(acl, kit, batches, prepare, postprocess):
    """Race-free and asynchronous, but copies and runs share one stream."""
    s, _ = acl.rt.create_stream()
    done = [acl.rt.create_event()[0] for _ in range(2)]
    for i in range(batches):
        k = i % 2
        prepare(i, kit.host_in[k])
        acl.rt.memcpy_async(kit.dev_in[k], kit.in_size, kit.host_in[k], kit.in_size, H2D, s)
        acl.mdl.execute_async(kit.model_id, kit.inputs[k], kit.outputs[k], s)
        acl.rt.memcpy_async(kit.host_out[k], kit.out_size, kit.dev_out[k], kit.out_size, D2H, s)
        acl.rt.record_event(done[k], s)
        if i:
            acl.rt.synchronize_event(done[1 - k])
            postprocess(i - 1, kit.host_out[1 - k])
    acl.rt.synchronize_event(done[(batches - 1) % 2])
    postprocess(batches - 1, kit.host_out[(batches - 1) % 2])
    for ev in done:
        acl.rt.destroy_event(ev)
    acl.rt.destroy_stream(s)


@pytest.mark.parametrize("exercise_id", ["06.pipeline", "06.stretch"])
def test_a_single_stream_pipeline_is_not_the_exercise(exercise_id):
    result = check(exercise_id, one_stream_two_slots)
    assert "two streams" in failed(result) and result.score == 0
    assert "same stream that ran the previous batch's model" in item(
        result, "two streams").message


# -- hangs and exits: bounded, contained, 0 ----------------------------------------------------

def spins(acl, kit, batches, prepare, postprocess):
    while True:
        pass


def sleeps(acl, kit, batches, prepare, postprocess):
    import time
    time.sleep(100)


def exits(acl, kit, batches, prepare, postprocess):
    raise SystemExit(0)


@pytest.mark.parametrize("answer", [spins, sleeps])
def test_a_hang_is_stopped_by_the_wall_clock_limit(answer):
    import time
    start = time.monotonic()
    result = check("06.pipeline", answer, limit_s=1)
    assert time.monotonic() - start < 10
    assert failed(result) == {"runs"} and result.score == 0
    assert "wall-clock" in item(result, "runs").message


def test_system_exit_is_contained():
    result = check("06.stretch", exits)
    assert failed(result) == {"runs"} and result.score == 0
    assert "SystemExit" in item(result, "runs").message


def test_the_limit_is_generous():
    assert {ex.id: ex.limit_s for ex in exercises("06")} == {"06.pipeline": 10.0,
                                                             "06.stretch": 10.0}


# -- right answers written differently from the reference: full marks --------------------------

def stream_per_slot(acl, kit, batches, prepare, postprocess):
    """Slot k has its own stream for its copy, run and copy back; events order the slots'
    use of the AI Core's input; post-processing waits for the previous batch only."""
    streams = [acl.rt.create_stream()[0] for _ in range(2)]
    back = [acl.rt.create_event()[0] for _ in range(2)]
    ran = [acl.rt.create_event()[0] for _ in range(2)]    # one model: one run at a time
    pending = None
    for i in range(batches):
        k = i % 2
        if i >= 2:
            acl.rt.synchronize_event(back[k])     # batch i - 2 is off slot k (it was read)
        prepare(i, kit.host_in[k])
        acl.rt.memcpy_async(kit.dev_in[k], kit.in_size, kit.host_in[k], kit.in_size, H2D,
                            streams[k])
        if i >= 1:
            acl.rt.stream_wait_event(streams[k], ran[1 - k])
        acl.mdl.execute_async(kit.model_id, kit.inputs[k], kit.outputs[k], streams[k])
        acl.rt.record_event(ran[k], streams[k])
        acl.rt.memcpy_async(kit.host_out[k], kit.out_size, kit.dev_out[k], kit.out_size, D2H,
                            streams[k])
        acl.rt.record_event(back[k], streams[k])
        if pending is not None:
            j = pending
            acl.rt.synchronize_event(back[j % 2])
            postprocess(j, kit.host_out[j % 2])
        pending = i
    acl.rt.synchronize_event(back[pending % 2])
    postprocess(pending, kit.host_out[pending % 2])
    for ev in back + ran:
        acl.rt.destroy_event(ev)
    for s in streams:
        acl.rt.destroy_stream(s)


def three_streams(acl, kit, batches, prepare, postprocess):
    """Copies in, runs and copies back each on a stream of its own, a queue of events."""
    up, run, down = (acl.rt.create_stream()[0] for _ in range(3))
    landed, ran, back = ([acl.rt.create_event()[0] for _ in range(2)] for _ in range(3))
    queued = []

    def feed(i):
        k = i % 2
        prepare(i, kit.host_in[k])
        if i >= 2:
            acl.rt.stream_wait_event(up, ran[k])
        acl.rt.memcpy_async(kit.dev_in[k], kit.in_size, kit.host_in[k], kit.in_size, H2D, up)
        acl.rt.record_event(landed[k], up)
        acl.rt.stream_wait_event(run, landed[k])
        if i >= 2:
            acl.rt.stream_wait_event(run, back[k])        # dev_out[k] copied out already
        acl.mdl.execute_async(kit.model_id, kit.inputs[k], kit.outputs[k], run)
        acl.rt.record_event(ran[k], run)
        acl.rt.stream_wait_event(down, ran[k])
        acl.rt.memcpy_async(kit.host_out[k], kit.out_size, kit.dev_out[k], kit.out_size, D2H,
                            down)
        acl.rt.record_event(back[k], down)
        queued.append(i)

    feed(0)
    i = 1
    while queued:
        if i < batches:
            feed(i)
            i += 1
        j = queued.pop(0)
        acl.rt.synchronize_event(back[j % 2])
        postprocess(j, kit.host_out[j % 2])
    acl.rt.synchronize_device()
    for ev in landed + ran + back:
        acl.rt.destroy_event(ev)
    for s in (up, run, down):
        acl.rt.destroy_stream(s)


@pytest.mark.parametrize("exercise_id", ["06.pipeline", "06.stretch"])
@pytest.mark.parametrize("answer", [stream_per_slot, three_streams])
def test_other_right_pipelines_pass(exercise_id, answer):
    result = check(exercise_id, answer, seeds=(0, 1, 2, 5))
    assert result.status == "passed" and result.score == 1.0, str(result)


def test_a_plain_pipeline_written_differently_passes_the_pipeline_exercise():
    def pipeline(acl, kit, batches, prepare, postprocess):
        copier, runner = acl.rt.create_stream()[0], acl.rt.create_stream()[0]
        ready = [acl.rt.create_event()[0], acl.rt.create_event()[0]]
        free = [acl.rt.create_event()[0], acl.rt.create_event()[0]]
        prepare(0, kit.host_in[0])
        acl.rt.memcpy_async(kit.dev_in[0], kit.in_size, kit.host_in[0], kit.in_size, H2D,
                            copier)
        acl.rt.record_event(ready[0], copier)
        for i in range(batches):
            k = i % 2
            acl.rt.stream_wait_event(runner, ready[k])
            acl.mdl.execute_async(kit.model_id, kit.inputs[k], kit.outputs[k], runner)
            acl.rt.record_event(free[k], runner)
            if i + 1 < batches:
                nk = 1 - k
                prepare(i + 1, kit.host_in[nk])
                if i >= 1:
                    acl.rt.stream_wait_event(copier, free[nk])
                acl.rt.memcpy_async(kit.dev_in[nk], kit.in_size, kit.host_in[nk], kit.in_size,
                                    H2D, copier)
                acl.rt.record_event(ready[nk], copier)
            acl.rt.synchronize_event(free[k])
            acl.rt.memcpy(kit.host_out[k], kit.out_size, kit.dev_out[k], kit.out_size, D2H)
            postprocess(i, kit.host_out[k])
        for ev in ready + free:
            acl.rt.destroy_event(ev)
        acl.rt.destroy_stream(copier)
        acl.rt.destroy_stream(runner)

    result = check("06.pipeline", pipeline, seeds=(0, 1, 2, 7))
    assert result.status == "passed" and result.score == 1.0, str(result)


# -- isolation ---------------------------------------------------------------------------------

def test_settings_and_the_learners_runtime_are_restored(fresh):
    from acllab import acl

    acllab.configure(strict=True, hugepage_pool_bytes=0)
    runtime = acllab.current_runtime()
    acl.init()
    acl.rt.set_device(0)
    stream, _ = acl.rt.create_stream()
    settings = dict(session._settings)
    host_ns, tasks = runtime.host_ns, len(runtime.tasks)

    assert check("06.pipeline", SOLUTIONS.pipeline, seeds=(0,)).passed
    check("06.stretch", pipeline_single_buffer, seeds=(1,))

    assert session._settings == settings
    assert acllab.current_runtime() is runtime
    assert (runtime.host_ns, len(runtime.tasks)) == (host_ns, tasks)
    assert acl.rt.destroy_stream(stream) == 0


# -- the second call in the same runtime: other images, a count of the other parity ------------

def _replaying_pipeline():
    """A pipeline that keeps each batch's scores from its first call and replays them later."""
    kept = {}

    def pipeline(acl, kit, batches, prepare, postprocess):
        if not kept:
            def keep(i, host_ptr):
                kept[i] = acl.util.ptr_to_bytes(host_ptr, kit.out_size)
                postprocess(i, host_ptr)
            return SOLUTIONS.pipeline(acl, kit, batches, prepare, keep)
        for i in range(batches):
            prepare(i, kit.host_in[0])
            data = kept.get(i, bytes(kit.out_size))
            acl.rt.memcpy(kit.host_out[0], kit.out_size, acl.util.bytes_to_ptr(data),
                          kit.out_size, acl.ACL_MEMCPY_HOST_TO_HOST)
            postprocess(i, kit.host_out[0])
    return pipeline


def _streams_made_once():
    """A pipeline that creates its streams on its first call only, and destroys them then."""
    made = []

    def pipeline(acl, kit, batches, prepare, postprocess):
        if not made:
            made.append(1)
            return SOLUTIONS.pipeline(acl, kit, batches, prepare, postprocess)
        for i in range(batches):          # "the streams exist already": the default stream
            prepare(i, kit.host_in[0])
            acl.rt.memcpy(kit.dev_in[0], kit.in_size, kit.host_in[0], kit.in_size, H2D)
            acl.mdl.execute_async(kit.model_id, kit.inputs[0], kit.outputs[0], 1 << 20)
            postprocess(i, kit.host_out[0])
    return pipeline


def test_a_pipeline_that_replays_its_first_scores_fails_again():
    result = check("06.pipeline", _replaying_pipeline())
    assert result.score == 0 and "again" in failed(result), str(result)
    again = item(result, "again")
    assert again.kind == RESULT and "batches of them" in again.message
    assert "scores" in again.message


def test_a_pipeline_that_keeps_state_from_its_first_call_fails_again():
    result = check("06.pipeline", _streams_made_once())
    assert result.score == 0 and "again" in failed(result), str(result)


@pytest.mark.parametrize("function", ["pipeline", "pipeline_ahead"])
def test_the_reference_pipelines_pass_the_second_call(function):
    exercise = {"pipeline": "06.pipeline", "pipeline_ahead": "06.stretch"}[function]
    result = check(exercise, getattr(SOLUTIONS, function))
    again = item(result, "again")
    assert again.passed and "post-processed every new batch" in again.message, str(result)


def test_the_second_call_serves_a_count_of_the_other_parity():
    counts = []

    def pipeline(acl, kit, batches, prepare, postprocess):
        counts.append(batches)
        SOLUTIONS.pipeline(acl, kit, batches, prepare, postprocess)

    assert check("06.pipeline", pipeline, seeds=(0, 1), edges=False).passed
    assert [c % 2 for c in counts] == [0, 1, 1, 0]      # seed 0: even then odd; seed 1: odd, even


# -- when the consumed[k] wait matters (lesson 06, section 5) ----------------------------------

def _pipeline_syncing_every_other_batch(wait_consumed: bool):
    """Two slots, outputs per slot, and a host that synchronises only after every second batch:
    the copy of batch i+1 is queued before the host has waited for batch i-1, the slot's last
    reader, so only ``consumed[k]`` keeps the copy behind that run."""

    def pipeline(acl, kit, batches, prepare, postprocess):
        copy_s, _ = acl.rt.create_stream()
        exec_s, _ = acl.rt.create_stream()
        copied = [acl.rt.create_event()[0] for _ in range(2)]
        consumed = [acl.rt.create_event()[0] for _ in range(2)]

        def load(i):
            k = i % 2
            if i >= 2:
                acl.rt.synchronize_event(copied[k])      # batch i-2's copy has read host_in[k]
            prepare(i, kit.host_in[k])
            if i >= 2 and wait_consumed:
                acl.rt.stream_wait_event(copy_s, consumed[k])
            acl.rt.memcpy_async(kit.dev_in[k], kit.in_size, kit.host_in[k], kit.in_size, H2D,
                                copy_s)
            acl.rt.record_event(copied[k], copy_s)

        load(0)
        waiting = []
        for i in range(batches):
            k = i % 2
            acl.rt.stream_wait_event(exec_s, copied[k])
            acl.mdl.execute_async(kit.model_id, kit.inputs[k], kit.outputs[k], exec_s)
            acl.rt.memcpy_async(kit.host_out[k], kit.out_size, kit.dev_out[k], kit.out_size,
                                D2H, exec_s)
            acl.rt.record_event(consumed[k], exec_s)
            waiting.append(i)
            if i + 1 < batches:
                load(i + 1)
            if i % 2 == 1 or i + 1 == batches:
                acl.rt.synchronize_stream(exec_s)
                for j in waiting:
                    postprocess(j, kit.host_out[j % 2])
                waiting = []
        for ev in copied + consumed:
            acl.rt.destroy_event(ev)
        acl.rt.destroy_stream(copy_s)
        acl.rt.destroy_stream(exec_s)

    return pipeline


def pipeline_without_consumed_wait(acl, kit, batches, prepare, postprocess):
    """Section 3's loop without its ``consumed[k]`` wait."""
    copy_s, _ = acl.rt.create_stream()
    exec_s, _ = acl.rt.create_stream()
    copied = [acl.rt.create_event()[0] for _ in range(2)]

    def load(i):
        k = i % 2
        prepare(i, kit.host_in[k])
        acl.rt.memcpy_async(kit.dev_in[k], kit.in_size, kit.host_in[k], kit.in_size, H2D, copy_s)
        acl.rt.record_event(copied[k], copy_s)

    load(0)
    for i in range(batches):
        k = i % 2
        acl.rt.stream_wait_event(exec_s, copied[k])
        acl.mdl.execute_async(kit.model_id, kit.inputs[k], kit.outputs[0], exec_s)
        if i + 1 < batches:
            load(i + 1)
        acl.rt.synchronize_stream(exec_s)
        acl.rt.memcpy(kit.host_out[0], kit.out_size, kit.dev_out[0], kit.out_size, D2H)
        postprocess(i, kit.host_out[0])
    for ev in copied:
        acl.rt.destroy_event(ev)
    acl.rt.destroy_stream(copy_s)
    acl.rt.destroy_stream(exec_s)


def test_the_consumed_wait_is_redundant_in_the_lessons_loop():
    """Section 3's loop synchronises every batch, so the host already orders the copy into a
    slot after the run that last read it: without the event the pipeline is still race-free,
    as the lesson says."""
    result = check("06.pipeline", pipeline_without_consumed_wait)
    assert result.status == "passed", str(result)


def test_the_consumed_wait_matters_once_the_host_stops_waiting_for_every_batch():
    without = check("06.pipeline", _pipeline_syncing_every_other_batch(False))
    assert "race-free" in failed(without) and without.score == 0
    assert "[race]" in item(without, "race-free").message
    assert "kit.dev_in" in item(without, "race-free").message
    with_wait = check("06.pipeline", _pipeline_syncing_every_other_batch(True))
    assert "race-free" not in failed(with_wait), str(with_wait)
