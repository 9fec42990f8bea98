"""Lesson 03 checks: the reference solutions pass, placeholders are "not done", known bugs fail.

Each known-wrong answer is a small story of a host-memory bug a learner makes (a pageable
buffer, one pinned buffer for every chunk, a free before the copies end, a formula missing a
term ...), and the test asserts which items catch it and what the message teaches. The copy
times the checks measure are compared with a closed-form oracle, and never appear in a message.
"""

from __future__ import annotations

import math
import re

import pytest
from checks_support import exercise_list, failed, item, load_solutions, reference_after

import acllab
from acllab import session
from acllab.checks import check, exercises, history, summary
from acllab.checks.lesson03 import measure_copy_ns
from acllab.constants import (
    ACL_MEM_MALLOC_HUGE_FIRST,
    ACL_MEMCPY_HOST_TO_DEVICE,
    ACL_MEMCPY_HOST_TO_HOST,
)
from acllab.hardware import PROFILES, MiB

H2D, H2H, HUGE = ACL_MEMCPY_HOST_TO_DEVICE, ACL_MEMCPY_HOST_TO_HOST, ACL_MEM_MALLOC_HUGE_FIRST


SOLUTIONS = load_solutions("03")
EXERCISES = exercise_list("03")


# -- registration and more seeds (the generic promises: test_checks_common.py) -----------------

def test_lesson03_registers_its_exercises():
    assert EXERCISES == [("03.pinned_pipeline", "upload"), ("03.predict", "predict_copy_ns")]
    assert [len(ex.seeds) for ex in exercises("03")] == [3, 3]     # cases per check


@pytest.mark.parametrize("exercise_id, function", EXERCISES)
def test_reference_solution_passes_on_more_seeds(exercise_id, function):
    result = check(exercise_id, getattr(SOLUTIONS, function), seeds=range(3, 9))
    assert result.status == "passed", str(result)


# -- 03.pinned_pipeline: known-wrong answers ---------------------------------------------------

def upload_pageable(acl, chunks, stream):
    """The notebook's starting point: memcpy_async straight from the bytes objects."""
    out = []
    for chunk in chunks:
        n = len(chunk)
        dev, _ = acl.rt.malloc(n, HUGE)
        acl.rt.memcpy_async(dev, n, acl.util.bytes_to_ptr(chunk), n, H2D, stream)
        out.append(dev)
    acl.rt.synchronize_stream(stream)
    return out


def upload_one_pinned_buffer(acl, chunks, stream):
    """Refills one pinned buffer while the previous chunk's DMA may still read it."""
    out = []
    host, _ = acl.rt.malloc_host(max(map(len, chunks)))
    for chunk in chunks:
        n = len(chunk)
        dev, _ = acl.rt.malloc(n, HUGE)
        acl.rt.memcpy(host, n, acl.util.bytes_to_ptr(chunk), n, H2H)
        acl.rt.memcpy_async(dev, n, host, n, H2D, stream)
        out.append(dev)
    acl.rt.synchronize_stream(stream)
    acl.rt.free_host(host)
    return out


def _pinned_copies(acl, chunks, stream, sync_each=False):
    out, hosts = [], []
    for chunk in chunks:
        n = len(chunk)
        dev, _ = acl.rt.malloc(n, HUGE)
        host, _ = acl.rt.malloc_host(n)
        acl.rt.memcpy(host, n, acl.util.bytes_to_ptr(chunk), n, H2H)
        acl.rt.memcpy_async(dev, n, host, n, H2D, stream)
        if sync_each:
            acl.rt.synchronize_stream(stream)
        out.append(dev)
        hosts.append(host)
    return out, hosts


def upload_frees_too_early(acl, chunks, stream):
    out, hosts = _pinned_copies(acl, chunks, stream)
    for host in hosts:                           # the copies may still be reading them
        acl.rt.free_host(host)
    acl.rt.synchronize_stream(stream)
    return out


def upload_waits_in_the_loop(acl, chunks, stream):
    out, hosts = _pinned_copies(acl, chunks, stream, sync_each=True)
    for host in hosts:
        acl.rt.free_host(host)
    return out


def upload_blocking(acl, chunks, stream):
    out = []
    for chunk in chunks:
        n = len(chunk)
        dev, _ = acl.rt.malloc(n, HUGE)
        host, _ = acl.rt.malloc_host(n)
        acl.rt.memcpy(host, n, acl.util.bytes_to_ptr(chunk), n, H2H)
        acl.rt.memcpy(dev, n, host, n, H2D)     # pinned, but blocking
        acl.rt.free_host(host)
        out.append(dev)
    return out


def upload_leaks_pinned(acl, chunks, stream):
    out, _hosts = _pinned_copies(acl, chunks, stream)
    acl.rt.synchronize_stream(stream)
    return out


def upload_frees_the_results(acl, chunks, stream):
    out = SOLUTIONS.upload(acl, chunks, stream)
    for dev in out:
        acl.rt.free(dev)
    return out


def upload_half_of_each(acl, chunks, stream):
    out, hosts = [], []
    for chunk in chunks:
        n = len(chunk)
        dev, _ = acl.rt.malloc(n, HUGE)
        host, _ = acl.rt.malloc_host(n)
        acl.rt.memcpy(host, n, acl.util.bytes_to_ptr(chunk), n, H2H)
        acl.rt.memcpy_async(dev, n // 2, host, n // 2, H2D, stream)
        out.append(dev)
        hosts.append(host)
    acl.rt.synchronize_stream(stream)
    for host in hosts:
        acl.rt.free_host(host)
    return out


def upload_into_one_device_buffer(acl, chunks, stream):
    sizes = [(len(c) + 63) // 64 * 64 for c in chunks]
    dev, _ = acl.rt.malloc(sum(sizes), HUGE)
    host, _ = acl.rt.malloc_host(sum(sizes))
    out, off = [], 0
    for chunk, size in zip(chunks, sizes, strict=True):
        n = len(chunk)
        acl.rt.memcpy(host + off, n, acl.util.bytes_to_ptr(chunk), n, H2H)
        acl.rt.memcpy_async(dev + off, n, host + off, n, H2D, stream)
        out.append(dev + off)
        off += size
    acl.rt.synchronize_stream(stream)
    acl.rt.free_host(host)
    return out


def test_the_pageable_upload_is_caught_four_ways():
    result = check("03.pinned_pipeline", upload_pageable)
    assert result.status == "failed"
    assert failed(result) == {"pinned", "asynchronous", "overlap", "sanitizer"}
    assert "staging buffer" in item(result, "pinned").message
    assert "malloc_host" in item(result, "pinned").hint
    assert "silently becomes synchronous" in item(result, "asynchronous").message
    assert "pageable-async" in item(result, "sanitizer").message
    assert item(result, "results").passed       # the bytes were fine: only the path was wrong
    assert result.score == 0                    # but a pinned, asynchronous path is the point


def test_refilling_one_pinned_buffer_races_with_the_dma():
    result = check("03.pinned_pipeline", upload_one_pinned_buffer)
    assert failed(result) == {"sanitizer"}
    # a race is a wrong answer (a result item), not a matter of how well it was done
    assert result.score == 0 and item(result, "sanitizer").kind == "result"
    assert "[race]" in item(result, "sanitizer").message
    assert "its own pinned buffer" in item(result, "sanitizer").hint


def test_freeing_pinned_memory_before_the_copies_end_is_a_use_after_free():
    result = check("03.pinned_pipeline", upload_frees_too_early)
    assert failed(result) == {"sanitizer"}
    assert result.score == 0 and item(result, "sanitizer").kind == "result"
    assert "use-after-free" in item(result, "sanitizer").message
    assert "synchronize the stream" in item(result, "sanitizer").hint


def test_waiting_inside_the_loop_leaves_the_host_idle():
    result = check("03.pinned_pipeline", upload_waits_in_the_loop)
    assert failed(result) == {"overlap"}
    assert result.score == 0
    assert "acl.rt.synchronize_stream" in item(result, "overlap").message
    assert item(result, "asynchronous").passed


def test_a_blocking_copy_from_pinned_memory_is_not_asynchronous():
    result = check("03.pinned_pipeline", upload_blocking)
    assert failed(result) == {"asynchronous", "overlap", "the caller's stream"}
    assert result.score == 0
    assert "blocking acl.rt.memcpy" in item(result, "asynchronous").message
    assert item(result, "pinned").passed


def test_pinned_buffers_left_behind_fail_resources():
    result = check("03.pinned_pipeline", upload_leaks_pinned)
    assert failed(result) == {"resources"}
    assert 0 < result.score < 1
    message = item(result, "resources").message
    assert "pinned host buffer" in message and "never freed" in message
    assert "free_host" in item(result, "resources").hint


def test_freeing_the_returned_buffers_fails_results_and_resources():
    result = check("03.pinned_pipeline", upload_frees_the_results)
    assert {"results", "resources"} <= failed(result)
    assert "freed before upload returned" in item(result, "results").message
    assert "belong to its caller" in item(result, "resources").message
    assert item(result, "pinned").passed and item(result, "asynchronous").passed


def test_copying_half_of_each_chunk_shows_the_unwritten_pattern():
    result = check("03.pinned_pipeline", upload_half_of_each)
    assert failed(result) == {"results", "pinned"}
    assert result.score == 0
    assert "not written by any copy" in item(result, "pinned").message
    message = item(result, "results").message
    assert "differs from chunk 0" in message and "DE AD BE EF" in message


def test_pointers_into_one_buffer_are_not_separate_buffers():
    result = check("03.pinned_pipeline", upload_into_one_device_buffer)
    assert "results" in failed(result)
    assert re.search(r"pointer 1 points [\d,]+ bytes into a buffer", item(result,
                                                                          "results").message)


@pytest.mark.parametrize("value, text", [
    (None, "returned NoneType, not a list"),
    ([], "returned 0 pointer(s)"),
])
def test_a_result_that_is_not_a_list_of_pointers_fails(value, text):
    def upload(acl, chunks, stream):
        SOLUTIONS.upload(acl, chunks, stream)
        return value

    result = check("03.pinned_pipeline", upload)
    assert "results" in failed(result)
    assert text in item(result, "results").message


def test_the_wrong_chunk_in_a_buffer_is_named():
    def upload(acl, chunks, stream):
        longest = max(chunks, key=len)               # the wrong loop variable, in effect
        out = []
        for chunk in chunks:
            n = len(chunk)
            dev, _ = acl.rt.malloc(n, HUGE)
            host, _ = acl.rt.malloc_host(n)
            acl.rt.memcpy(host, n, acl.util.bytes_to_ptr(longest), n, H2H)
            acl.rt.memcpy_async(dev, n, host, n, H2D, stream)
            acl.rt.synchronize_stream(stream)
            acl.rt.free_host(host)
            out.append(dev)
        return out

    result = check("03.pinned_pipeline", upload, seeds=(0,))
    assert re.search(r"the buffer of chunk \d holds the bytes of chunk \d",
                     item(result, "results").message)


def test_the_default_stream_is_one_of_the_cases():
    def only_default_stream(acl, chunks, stream):
        assert stream == 0, "not the default stream"
        return SOLUTIONS.upload(acl, chunks, stream)

    assert check("03.pinned_pipeline", only_default_stream, seeds=(2,), edges=False).passed
    assert not check("03.pinned_pipeline", only_default_stream, seeds=(0,)).passed


def test_an_exception_is_reported_with_its_line():
    def upload(acl, chunks, stream):
        return [acl.rt.malloc_host(len(c))[0] / 0 for c in chunks]

    result = check("03.pinned_pipeline", upload)
    assert failed(result) == {"runs"}
    assert "ZeroDivisionError" in item(result, "runs").message
    assert "line" in item(result, "runs").message


# -- 03.predict --------------------------------------------------------------------------------

def closed_form(profile, nbytes, pinned) -> float:
    """latency + bytes / link (+ bytes / host memcpy), in ns, not rounded."""
    t = profile.copy_latency_ns + nbytes * 1e9 / profile.h2d_bandwidth_bps
    if not pinned:
        t += nbytes * 1e9 / profile.host_stage_bandwidth_bps
    return t


def oracle(profile, nbytes, pinned) -> int:
    """The closed form, rounded once."""
    return round(closed_form(profile, nbytes, pinned))


@pytest.mark.parametrize("name", sorted(PROFILES))
def test_the_measured_copies_follow_the_formula(name):
    profile = PROFILES[name]
    sizes = [1, 4096, 100_000, profile.staging_chunk_bytes, 5 * MiB + 3]
    for m in measure_copy_ns(profile, sizes):
        chunks = -(-m.nbytes // profile.staging_chunk_bytes)
        assert m.tasks == (1 if m.pinned else 2 * chunks)
        assert m.ns == SOLUTIONS.predict_copy_ns(profile, m.nbytes, m.pinned)
        assert abs(m.ns - oracle(profile, m.nbytes, m.pinned)) <= m.tasks
    big = measure_copy_ns(profile, [64 * MiB])
    ratio = big[0].ns / big[1].ns
    assert ratio == pytest.approx(profile.pageable_bandwidth_bps / profile.h2d_bandwidth_bps,
                                  abs=0.005)


def test_the_closed_form_rounded_once_passes_within_a_nanosecond_per_task():
    assert check("03.predict", oracle, seeds=range(10)).passed

    for rounding in (math.floor, math.ceil):
        def rounded(profile, nbytes, pinned, rounding=rounding):
            return rounding(closed_form(profile, nbytes, pinned))

        assert check("03.predict", rounded, seeds=range(4)).passed


def test_the_check_runs_a_made_up_card():
    def hard_coded(profile, nbytes, pinned):      # the ascend310's figures, whatever the card
        return SOLUTIONS.predict_copy_ns(PROFILES["ascend310"], nbytes, pinned)

    wrong = check("03.predict", hard_coded)
    assert "a modified" in wrong.case
    assert {"pinned copies", "pageable copies"} <= failed(wrong)
    assert "on ascend910b" in item(wrong, "pinned copies").message


def _mistake(fn):
    result = check("03.predict", fn)
    assert result.status == "failed"
    return result


def test_leaving_out_the_latency_is_diagnosed():
    result = _mistake(lambda p, n, pinned: oracle(p, n, pinned) - p.copy_latency_ns)
    assert failed(result) == {"pinned copies", "pageable copies"}
    assert "too short" in item(result, "pinned copies").message
    assert "latency" in item(result, "pinned copies").hint


def test_the_pinned_formula_for_pageable_copies_is_diagnosed():
    result = _mistake(lambda p, n, pinned: oracle(p, n, True))
    assert failed(result) == {"pageable copies"}
    assert "staging buffer" in item(result, "pageable copies").hint


def test_the_pageable_formula_for_pinned_copies_is_diagnosed():
    result = _mistake(lambda p, n, pinned: oracle(p, n, False))
    assert failed(result) == {"pinned copies"}
    assert "too long" in item(result, "pinned copies").message
    assert "needs no staging" in item(result, "pinned copies").hint


def test_latency_per_staging_chunk_is_diagnosed():
    def per_chunk(p, n, pinned):
        if pinned:
            return oracle(p, n, True)
        chunks = max(1, -(-n // p.staging_chunk_bytes))
        return oracle(p, n, False) + (chunks - 1) * p.copy_latency_ns

    result = _mistake(per_chunk)
    assert failed(result) == {"pageable copies"}
    assert "once per copy, not once per staging chunk" in item(result, "pageable copies").hint
    assert "right at the others" in item(result, "pageable copies").message   # small ones


def test_overlapping_stages_are_diagnosed():
    def pipelined(p, n, pinned):
        link = n * 1e9 / p.h2d_bandwidth_bps
        stage = 0 if pinned else n * 1e9 / p.host_stage_bandwidth_bps
        return round(p.copy_latency_ns + max(link, stage))

    result = _mistake(pipelined)
    assert failed(result) == {"pageable copies"}
    assert "take turns" in item(result, "pageable copies").hint


@pytest.mark.parametrize("scale", [1000, 1_000_000_000])
def test_other_units_are_diagnosed(scale):
    result = _mistake(lambda p, n, pinned: -(-oracle(p, n, pinned) // scale))
    assert "return nanoseconds" in item(result, "pinned copies").hint


def test_a_float_is_not_an_int_of_nanoseconds():
    result = _mistake(lambda p, n, pinned: float(oracle(p, n, pinned)))
    assert failed(result) == {"an int"}
    assert "returned a float" in item(result, "an int").message
    assert "rounds up" in item(result, "an int").hint


def test_an_exception_names_the_copy_that_raised_it():
    def predict(profile, nbytes, pinned):
        if nbytes < 4096:
            raise ValueError("too small")
        return oracle(profile, nbytes, pinned)

    result = _mistake(predict)
    assert failed(result) == {"runs"}
    message = item(result, "runs").message
    assert "ValueError: too small" in message and "line" in message
    assert re.search(r"predict_copy_ns\(profile, \d+, pinned=(True|False)\)", message)


def _times_shown(text: str) -> set[int]:
    return {int(x.replace(",", "")) for x in re.findall(r"\d[\d,]*", text)}


def test_messages_never_show_the_measured_times():
    wrong = [lambda p, n, pinned: oracle(p, n, pinned) - p.copy_latency_ns,
             lambda p, n, pinned: oracle(p, n, True), lambda p, n, pinned: 0,
             lambda p, n, pinned: oracle(p, n, pinned) + 1000]
    for seed in range(3):
        secret = {m.ns for m in _measured_for_seed(seed)}
        for fn in wrong:
            result = check("03.predict", fn, seeds=(seed,))
            assert not result.passed
            shown = _times_shown(str(result) + result._repr_html_())
            assert not shown & secret, shown & secret


def _measured_for_seed(seed: int):
    import numpy as np

    from acllab.checks import lesson03

    rng = np.random.default_rng([3, 2, seed])
    profiles = [PROFILES["ascend310"], PROFILES["ascend910b"], lesson03._modified_profile(rng)]
    return [m for p in profiles
            for m in measure_copy_ns(p, lesson03._sizes(rng, p.staging_chunk_bytes))]


# -- both checks leave the learner's world alone -----------------------------------------------

def test_settings_and_the_learners_runtime_are_restored(fresh):
    from acllab import acl

    acllab.configure("ascend910b", strict=True, hugepage_pool_bytes=0, device_count=1)
    runtime = acllab.current_runtime()
    acl.init()
    acl.rt.set_device(0)
    stream, _ = acl.rt.create_stream()
    settings = dict(session._settings)
    host_ns, tasks = runtime.host_ns, len(runtime.tasks)

    assert check("03.pinned_pipeline", SOLUTIONS.upload).passed
    assert check("03.predict", SOLUTIONS.predict_copy_ns).passed
    check("03.pinned_pipeline", upload_pageable)

    assert session._settings == settings
    assert acllab.current_runtime() is runtime
    assert (runtime.host_ns, len(runtime.tasks)) == (host_ns, tasks)
    assert acl.rt.destroy_stream(stream) == 0


def test_summary_lists_both_exercises():
    history.pop("03.pinned_pipeline", None)
    history.pop("03.predict", None)
    check("03.predict", SOLUTIONS.predict_copy_ns)
    lesson = summary("03")
    assert [row[0] for row in lesson.rows] == ["03.pinned_pipeline", "03.predict"]
    assert [row[2] for row in lesson.rows] == ["not run", "passed"]
    assert "1 of 2" in str(lesson)


# -- grades that mean something (issue 7): every class of wrong answer, and other right ones ----


import acllab.checks._common  # noqa: E402
import acllab.checks.lesson03 as lesson03  # noqa: E402
from acllab.checks import Item  # noqa: E402

IDS = [eid for eid, _ in EXERCISES]


# An empty answer, a hang and SystemExit: tests/test_checks_guard.py, for every exercise.


def test_every_exercise_has_a_generous_wall_clock_limit():
    assert all(ex.limit_s >= 10 for ex in exercises("03"))


def _oracle(*args):
    lesson03._copy_tasks([], 0, 0)


def _set_goal(*args):
    lesson03._PREPARE = ()


def _replace_item(*args):
    lesson03._prediction_item = lambda *a: Item("pinned copies", True)
    lesson03._overlap_item = lambda *a: Item("overlap", True)


def _silence_sanitizer(*args):
    acllab.checks._common.sanitizer.analyze = lambda rt: []


@pytest.mark.parametrize("exercise_id, function", EXERCISES)
def test_calling_the_graders_helpers_earns_nothing(exercise_id, function):
    result = check(exercise_id, reference_after(SOLUTIONS, function, _oracle))
    assert failed(result) == {"own work"} and result.score == 0
    assert "lesson03._copy_tasks" in item(result, "own work").message


def test_asking_the_grader_to_measure_earns_nothing():
    def predict(profile, nbytes, pinned):
        return next(m.ns for m in lesson03.measure_copy_ns(profile, [nbytes])
                    if m.pinned == pinned)

    result = check("03.predict", predict)
    assert failed(result) == {"own work"} and result.score == 0
    assert "measure_copy_ns" in item(result, "own work").message


@pytest.mark.parametrize("exercise_id, function", EXERCISES)
@pytest.mark.parametrize("tamper", [_set_goal, _replace_item, _silence_sanitizer])
def test_tampering_with_the_grader_fails_and_is_undone(exercise_id, function, tamper):
    saved = (lesson03._PREPARE, lesson03._prediction_item, lesson03._overlap_item,
             acllab.checks._common.sanitizer.analyze)
    result = check(exercise_id, reference_after(SOLUTIONS, function, tamper), seeds=(0,))
    assert failed(result) == {"acllab unchanged"} and result.score == 0
    assert "put it back" in item(result, "acllab unchanged").message
    assert (lesson03._PREPARE, lesson03._prediction_item, lesson03._overlap_item,
            acllab.checks._common.sanitizer.analyze) == saved


# 03.pinned_pipeline: other right answers, host-side and off-spec ones

def upload_pins_everything_first(acl, chunks, stream):
    pinned = []
    for chunk in chunks:
        host, _ = acl.rt.malloc_host(len(chunk))
        acl.rt.memcpy(host, len(chunk), acl.util.bytes_to_ptr(chunk), len(chunk), H2H)
        pinned.append(host)
    out = [acl.rt.malloc(len(c), HUGE)[0] for c in chunks]
    for dev, host, chunk in zip(out, pinned, chunks, strict=True):
        acl.rt.memcpy_async(dev, len(chunk), host, len(chunk), H2D, stream)
    acl.rt.synchronize_stream(stream)
    for host in reversed(pinned):
        acl.rt.free_host(host)
    return out


def upload_with_an_event(acl, chunks, stream):
    done, _ = acl.rt.create_event()
    out, pinned = [], []
    for chunk in chunks:
        n = len(chunk)
        dev, _ = acl.rt.malloc(n, HUGE)
        host, _ = acl.rt.malloc_host(n)
        acl.rt.memcpy(host, n, acl.util.bytes_to_ptr(chunk), n, H2H)
        acl.rt.memcpy_async(dev, n, host, n, H2D, stream)
        out.append(dev)
        pinned.append(host)
    acl.rt.record_event(done, stream)
    acl.rt.synchronize_event(done)
    while pinned:
        acl.rt.free_host(pinned.pop())
    acl.rt.destroy_event(done)
    return tuple(out)


def upload_writes_device_memory_on_the_host(acl, chunks, stream):
    import numpy as np
    out = []
    for chunk in chunks:
        dev, _ = acl.rt.malloc(len(chunk), HUGE)
        region = acllab.current_runtime().space.find(dev)
        region.data[:len(chunk)] = np.frombuffer(chunk, np.uint8)
        out.append(dev)
    return out


def upload_on_its_own_stream(acl, chunks, stream):
    mine, _ = acl.rt.create_stream()
    out = SOLUTIONS.upload(acl, chunks, mine)
    acl.rt.destroy_stream(mine)
    return out


def upload_waits_with_a_cheap_call_in_between(acl, chunks, stream):
    out = []
    for chunk in chunks:
        n = len(chunk)
        dev, _ = acl.rt.malloc(n, HUGE)
        host, _ = acl.rt.malloc_host(n)
        acl.rt.memcpy(host, n, acl.util.bytes_to_ptr(chunk), n, H2H)
        acl.rt.memcpy_async(dev, n, host, n, H2D, stream)
        acl.rt.get_run_mode()                      # "work" while the copy runs ...
        acl.rt.synchronize_stream(stream)          # ... then a wait inside the loop
        acl.rt.free_host(host)
        out.append(dev)
    return out


@pytest.mark.parametrize("fn", [upload_pins_everything_first, upload_with_an_event])
def test_other_right_uploads_pass(fn):
    result = check("03.pinned_pipeline", fn, seeds=range(6))
    assert result.passed and result.score == 1, str(result)


def test_device_memory_written_by_the_host_is_not_an_upload():
    result = check("03.pinned_pipeline", upload_writes_device_memory_on_the_host)
    assert item(result, "results").passed and "pinned" in failed(result)
    assert result.score == 0


def test_ignoring_the_callers_stream_scores_zero():
    result = check("03.pinned_pipeline", upload_on_its_own_stream)
    assert failed(result) == {"the caller's stream"} and result.score == 0
    assert "not on the stream upload was given" in item(result, "the caller's stream").message


def test_a_cheap_call_during_the_copy_is_not_overlap():
    result = check("03.pinned_pipeline", upload_waits_with_a_cheap_call_in_between)
    assert failed(result) == {"overlap"} and result.score == 0
    assert "waited inside the loop" in item(result, "overlap").message


# 03.predict: another right formula, and measuring instead of predicting

def predict_by_whole_chunks(profile, nbytes, pinned):
    def ns(n, bandwidth):
        return -(-n * 10**9 // bandwidth)

    total = profile.copy_latency_ns
    if pinned:
        return total + ns(nbytes, profile.h2d_bandwidth_bps)
    whole, rest = divmod(nbytes, profile.staging_chunk_bytes)
    sizes = [profile.staging_chunk_bytes] * whole + ([rest] if rest or not whole else [])
    return total + sum(ns(m, profile.host_stage_bandwidth_bps) + ns(m, profile.h2d_bandwidth_bps)
                       for m in sizes)


def predict_by_measuring(profile, nbytes, pinned):
    from acllab import acl

    with session.override(profile=profile) as runtime:
        acl.init()
        acl.rt.set_device(0)
        dev, _ = acl.rt.malloc(max(nbytes, 1), ACL_MEM_MALLOC_HUGE_FIRST)
        keep = bytearray(max(nbytes, 1))
        src = acl.rt.malloc_host(nbytes)[0] if pinned else acl.util.bytes_to_ptr(keep)
        first = len(runtime.tasks)
        acl.rt.memcpy(dev, nbytes, src, nbytes, H2D)
        tasks = runtime.tasks[first:]
        return tasks[-1].end_ns - tasks[0].start_ns


def test_another_right_formula_passes():
    result = check("03.predict", predict_by_whole_chunks, seeds=range(5))
    assert result.passed and result.score == 1, str(result)


def predict_by_measuring_here(profile, nbytes, pinned):
    from acllab import acl

    runtime = acllab.current_runtime()
    acl.init()
    acl.rt.set_device(0)
    dev, _ = acl.rt.malloc(max(nbytes, 1), ACL_MEM_MALLOC_HUGE_FIRST)
    keep = bytearray(max(nbytes, 1))
    src = acl.rt.malloc_host(nbytes)[0] if pinned else acl.util.bytes_to_ptr(keep)
    first = len(runtime.tasks)
    acl.rt.memcpy(dev, nbytes, src, nbytes, H2D)
    tasks = runtime.tasks[first:]
    return tasks[-1].end_ns - tasks[0].start_ns


def test_measuring_the_copy_is_not_a_prediction():
    # in a runtime of its own: the learner's own session.override ends the case
    result = check("03.predict", predict_by_measuring, seeds=(0,))
    assert result.score == 0 and failed(result) == {"runs"}
    assert "session.override" in item(result, "runs").message
    # in the runtime the check gave it: the copies it ran are no formula
    result = check("03.predict", predict_by_measuring_here, seeds=(0,))
    assert "from the formula" in failed(result) and result.score == 0
    assert "device task" in item(result, "from the formula").message


# -- 03.pinned_pipeline: the second call in the same runtime ------------------------------------

def _remembering_upload():
    """An upload that keeps its device buffers by chunk sizes and hands them out again."""
    kept = {}

    def upload(acl, chunks, stream):
        key = tuple(len(c) for c in chunks)
        if key not in kept:
            kept[key] = SOLUTIONS.upload(acl, chunks, stream)
        return kept[key]
    return upload


def _refilling_upload():
    """An upload that keeps one set of device buffers and copies every new batch into them."""
    kept = {}

    def upload(acl, chunks, stream):
        key = tuple(len(c) for c in chunks)
        if key not in kept:
            kept[key] = SOLUTIONS.upload(acl, chunks, stream)
            return kept[key]
        for dev, chunk in zip(kept[key], chunks, strict=True):
            acl.rt.memcpy(dev, len(chunk), acl.util.bytes_to_ptr(chunk), len(chunk),
                          ACL_MEMCPY_HOST_TO_DEVICE)
        return kept[key]
    return upload


def _stale_bytes_upload():
    """An upload that remembers the first bytes it saw per size and uploads those ever after."""
    seen = {}

    def upload(acl, chunks, stream):
        return SOLUTIONS.upload(acl, [seen.setdefault(len(c), c) for c in chunks], stream)
    return upload


def test_an_upload_that_hands_out_its_first_buffers_again_fails_again():
    result = check("03.pinned_pipeline", _remembering_upload())
    assert result.score == 0 and failed(result) == {"again"}, str(result)
    again = item(result, "again")
    assert again.kind == "result"
    assert "chunk 0's buffer from the first call" in again.message


def test_an_upload_that_refills_the_callers_buffers_fails_again():
    result = check("03.pinned_pipeline", _refilling_upload())
    assert result.score == 0 and "again" in failed(result), str(result)
    assert "first upload was overwritten" in item(result, "again").message


def test_an_upload_that_sends_the_first_bytes_again_fails_again():
    result = check("03.pinned_pipeline", _stale_bytes_upload())
    assert result.score == 0 and failed(result) == {"again"}, str(result)
    assert "differs from chunk 0 from byte 0 on" in item(result, "again").message


def test_the_reference_upload_passes_the_second_call():
    result = check("03.pinned_pipeline", SOLUTIONS.upload)
    again = item(result, "again")
    assert again.passed and "new device buffers" in again.message, str(result)
