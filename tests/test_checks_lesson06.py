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
from acllab.checks import check, exercises, lesson06
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


def test_the_seeds_serial_loop_is_too_slow():
    result = check("06.pipeline", lesson06.serial_reference)
    assert failed(result) == {"throughput", "overlap"}
    assert "1.00x the serial loop" in item(result, "throughput").message
    assert "only 0%" in item(result, "overlap").message
    assert "execute_async" in item(result, "throughput").hint


def test_the_seeds_single_input_buffer_races_even_when_timing_hides_it():
    result = check("06.pipeline", pipeline_single_buffer)
    assert failed(result) == {"sanitizer"}           # the scores happen to be right
    sanitizer = item(result, "sanitizer")
    assert "[race]" in sanitizer.message and "kit.dev_in[0]" in sanitizer.message
    assert "is a kernel of the model" in sanitizer.message
    assert "the seed's bug" in sanitizer.hint and "stream_wait_event" in sanitizer.hint


def test_a_run_that_does_not_wait_for_its_copy_reads_garbage_and_races():
    result = check("06.pipeline", pipeline_no_copy_event)
    assert {"results", "sanitizer"} <= failed(result)
    assert "batch 0's output" in item(result, "results").message
    assert "before the copy has landed" in item(result, "sanitizer").hint


def test_post_processing_before_the_scores_are_back_fails():
    result = check("06.pipeline", pipeline_reads_early)
    assert {"results", "sanitizer"} <= failed(result)
    assert "host-read-before-sync" in item(result, "sanitizer").message
    results = item(result, "results")
    assert "DE AD BE EF" in results.message or "scores are those of batch" in results.message


def test_forgetting_the_last_batch_fails_results():
    result = check("06.pipeline", pipeline_forgets_the_last_batch)
    assert "results" in failed(result)
    n = lesson06._setup(1, 0).batches
    message = item(result, "results").message
    assert f"prepare was never called for batch {n - 1}" in message
    assert f"postprocess was never called for batch {n - 1}" in message


def test_post_processing_a_batch_twice_fails_results():
    result = check("06.pipeline", pipeline_twice)
    assert "results" in failed(result)
    assert "more than once for batch 0" in item(result, "results").message


def test_leaked_streams_and_events_fail_resources():
    result = check("06.pipeline", pipeline_leaks)
    assert failed(result) == {"resources"}
    message = item(result, "resources").message
    assert "stream" in message and "event" in message


def test_releasing_the_kit_fails_resources():
    result = check("06.pipeline", pipeline_frees_the_kit)
    assert failed(result) == {"resources"}
    assert "kit.host_in[1]" in item(result, "resources").message


def test_pageable_host_buffers_are_reported():
    result = check("06.pipeline", pipeline_pageable)
    assert "sanitizer" in failed(result)
    assert "pageable-async" in item(result, "sanitizer").message


def test_a_blocking_execute_makes_host_and_device_take_turns():
    result = check("06.pipeline", pipeline_blocking_execute)
    assert {"throughput", "overlap"} <= failed(result)
    assert "sanitizer" not in failed(result)


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


def test_the_seeds_pipeline_leaves_the_ai_core_waiting_for_post_processing():
    result = check("06.stretch", SOLUTIONS.pipeline)
    assert failed(result) == {"utilisation"}
    utilisation = item(result, "utilisation")
    assert "while the host post-processed" in utilisation.message
    assert "synchronize_event" in utilisation.hint


def test_one_host_output_for_two_batches_in_flight_races():
    result = check("06.stretch", ahead_one_host_output)
    assert failed(result) == {"sanitizer"}
    sanitizer = item(result, "sanitizer")
    assert "host-read-before-sync" in sanitizer.message and "kit.host_out[0]" in sanitizer.message
    assert "its own kit.host_out[k]" in sanitizer.hint


def test_the_serial_loop_fails_the_stretch_on_speed_and_utilisation():
    result = check("06.stretch", lesson06.serial_reference)
    assert failed(result) == {"throughput", "utilisation"}


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
