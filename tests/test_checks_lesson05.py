"""Lesson 05 checks: the reference solutions pass, placeholders are "not done", known bugs fail.

Each known-wrong answer is a small story of an event bug a learner makes, and the test asserts
which items catch it (and, where it matters, what the message teaches).
"""

from __future__ import annotations

import time

import pytest
from checks_support import exercise_list, failed, item, load_solutions, reference_after

import acllab
from acllab import session
from acllab.checks import check, exercises, history, summary
from acllab.checks.lesson05 import slack_ns
from acllab.constants import ACL_EVENT_SYNC, ACL_EVENT_TIME_LINE
from acllab.hardware import PROFILES

SOLUTIONS = load_solutions("05")
EXERCISES = exercise_list("05")


# -- registration and more seeds (the generic promises: test_checks_common.py) -----------------

def test_lesson05_registers_its_exercises():
    assert EXERCISES == [("05.time_kernel", "time_kernel"), ("05.handoff", "handoff")]
    assert [len(ex.seeds) for ex in exercises("05")] == [3, 3]     # cases per check


@pytest.mark.parametrize("exercise_id, function", EXERCISES)
def test_reference_solution_passes_on_more_seeds(exercise_id, function):
    result = check(exercise_id, getattr(SOLUTIONS, function), seeds=range(3, 12))
    assert result.status == "passed", str(result)


# -- 05.time_kernel: other right answers -------------------------------------------------------

def _timed(create):
    """time_kernel with events from ``create(acl)``, otherwise the reference's shape."""
    def time_kernel(acl, kernel, block_dim, args, stream):
        start, _ = create(acl)
        end, _ = create(acl)
        acl.rt.record_event(start, stream)
        acl.rt.launch_kernel(kernel, block_dim, args, stream)
        acl.rt.record_event(end, stream)
        acl.rt.synchronize_event(end)
        ms, _ = acl.rt.event_elapsed_time(start, end)
        acl.rt.destroy_event(start)
        acl.rt.destroy_event(end)
        return ms
    return time_kernel


def test_new_style_events_with_time_line_pass():
    fn = _timed(lambda acl: acl.rt.create_event_ex_with_flag(ACL_EVENT_TIME_LINE | ACL_EVENT_SYNC))
    assert check("05.time_kernel", fn, seeds=range(6)).passed


def test_synchronizing_the_stream_first_and_creating_events_late_still_pass():
    def time_kernel(acl, kernel, block_dim, args, stream):
        acl.rt.synchronize_stream(stream)              # drain the caller's upload first
        start, _ = acl.rt.create_event()
        acl.rt.record_event(start, stream)
        end, _ = acl.rt.create_event()                 # a cheap call inside the window
        acl.rt.launch_kernel(kernel, block_dim, args, stream)
        acl.rt.record_event(end, stream)
        acl.rt.synchronize_stream(stream)
        ms, _ = acl.rt.event_elapsed_time(start, end)
        acl.rt.destroy_event(start)
        acl.rt.destroy_event(end)
        return ms

    assert check("05.time_kernel", time_kernel, seeds=range(6)).passed


def test_the_cases_cover_a_busy_an_idle_and_the_default_stream():
    def negative(acl, kernel, block_dim, args, stream):
        SOLUTIONS.time_kernel(acl, kernel, block_dim, args, stream)
        return -1.0

    cases = [check("05.time_kernel", negative, seeds=(s,)).case for s in range(3)]
    assert "still uploading" in cases[0] and "(0)" not in cases[0]
    assert "the stream idle" in cases[1]
    assert "default stream (0)" in cases[2]


def test_the_slack_is_the_records_own_cost():
    profile = PROFILES["ascend310"]
    assert slack_ns(profile) == 13_000
    assert slack_ns(profile) < profile.launch_ns + profile.sync_wakeup_ns


# -- 05.time_kernel: known-wrong answers -------------------------------------------------------

def time_kernel_host_clock(acl, kernel, block_dim, args, stream):
    runtime = acllab.current_runtime()
    start = runtime.host_ns
    acl.rt.launch_kernel(kernel, block_dim, args, stream)
    acl.rt.synchronize_stream(stream)
    return (runtime.host_ns - start) / 1e6


def time_kernel_host_clock_after_launch(acl, kernel, block_dim, args, stream):
    runtime = acllab.current_runtime()
    acl.rt.synchronize_stream(stream)
    acl.rt.launch_kernel(kernel, block_dim, args, stream)
    start = runtime.host_ns                            # the closest a host clock gets
    acl.rt.synchronize_stream(stream)
    return (runtime.host_ns - start) / 1e6


def time_kernel_wall_clock(acl, kernel, block_dim, args, stream):
    start = time.perf_counter()
    acl.rt.launch_kernel(kernel, block_dim, args, stream)
    acl.rt.synchronize_stream(stream)
    return (time.perf_counter() - start) * 1e3


def _events(acl, kernel, block_dim, args, stream, *, create=None, between=None, scale=1.0,
            sync_end=True, both_before=False, destroy=True, on=None):
    """Two events around the launch, with one thing done wrong (named by the keywords)."""
    create = create or acl.rt.create_event
    start, _ = create()
    end, _ = create()
    where = stream if on is None else on
    acl.rt.record_event(start, where)
    if both_before:
        acl.rt.record_event(end, where)
    if between is not None:
        between()
    acl.rt.launch_kernel(kernel, block_dim, args, stream)
    if not both_before:
        acl.rt.record_event(end, where)
    if sync_end:
        acl.rt.synchronize_event(end)
    ms, _ = acl.rt.event_elapsed_time(start, end)
    acl.rt.synchronize_stream(stream)
    if destroy:
        acl.rt.destroy_event(start)
        acl.rt.destroy_event(end)
    return ms * scale


def test_a_host_clock_counts_the_queue_ahead_and_fails():
    result = check("05.time_kernel", time_kernel_host_clock)
    assert failed(result) == {"events", "measurement"}
    assert "host or wall clock" in item(result, "events").message
    assert "longer than the kernel ran" in item(result, "measurement").message
    assert result.case.startswith("case 1 of 3")


def test_a_host_clock_read_after_the_launch_still_fails_the_events_item():
    # On an idle stream this host clock reads the kernel plus the host's wake-up, as close as
    # a good event measurement: only the trace (no records) tells them apart.
    result = check("05.time_kernel", time_kernel_host_clock_after_launch)
    assert failed(result) == {"events"}


def test_a_wall_clock_fails():
    result = check("05.time_kernel", time_kernel_wall_clock)
    assert result.status == "failed"
    assert "events" in failed(result)


def test_new_style_events_without_time_line_fail_with_the_flag_named():
    def time_kernel(acl, kernel, block_dim, args, stream):
        return _events(acl, kernel, block_dim, args, stream,
                       create=lambda: acl.rt.create_event_ex_with_flag(ACL_EVENT_SYNC))

    result = check("05.time_kernel", time_kernel)
    assert failed(result) == {"events", "measurement"}
    assert "107000" in item(result, "events").message
    assert "ACL_EVENT_TIME_LINE" in item(result, "events").message
    assert "returned 0 ms" in item(result, "measurement").message
    assert any("107000" in w for w in result.warnings)


def test_reading_elapsed_time_before_the_end_record_completes_fails():
    def time_kernel(acl, kernel, block_dim, args, stream):
        return _events(acl, kernel, block_dim, args, stream, sync_end=False)

    result = check("05.time_kernel", time_kernel)
    assert failed(result) == {"events", "measurement"}
    assert "107006" in item(result, "events").message


@pytest.mark.parametrize("scale, words", [(1000.0, "1000 times longer"),
                                          (1e-3, "1000 times shorter")])
def test_a_wrong_unit_fails_and_names_milliseconds(scale, words):
    def time_kernel(acl, kernel, block_dim, args, stream):
        return _events(acl, kernel, block_dim, args, stream, scale=scale)

    result = check("05.time_kernel", time_kernel)
    assert failed(result) == {"events", "measurement"}
    assert words in item(result, "measurement").message
    assert "milliseconds" in item(result, "measurement").hint


def test_both_records_before_the_launch_measure_nothing():
    def time_kernel(acl, kernel, block_dim, args, stream):
        return _events(acl, kernel, block_dim, args, stream, both_before=True)

    result = check("05.time_kernel", time_kernel)
    assert failed(result) == {"events", "measurement"}
    assert "no record on Stream 1 after the kernel" in item(result, "events").message
    assert "shorter than the kernel ran" in item(result, "measurement").message


def test_a_synchronize_inside_the_window_counts_the_host_and_fails():
    def time_kernel(acl, kernel, block_dim, args, stream):
        return _events(acl, kernel, block_dim, args, stream,
                       between=lambda: acl.rt.synchronize_stream(stream))

    result = check("05.time_kernel", time_kernel)
    assert failed(result) == {"measurement"}
    assert "sat idle" in item(result, "measurement").message
    assert "no synchronize" in item(result, "measurement").hint


def test_records_on_another_stream_time_another_queue():
    def time_kernel(acl, kernel, block_dim, args, stream):
        other, _ = acl.rt.create_stream()
        ms = _events(acl, kernel, block_dim, args, stream, on=other)
        acl.rt.destroy_stream(other)
        return ms

    result = check("05.time_kernel", time_kernel)
    assert "events" in failed(result) and "measurement" in failed(result)
    assert "they time another queue" in item(result, "events").message


def test_launching_on_another_stream_races_the_callers_upload():
    def time_kernel(acl, kernel, block_dim, args, stream):
        mine, _ = acl.rt.create_stream()
        ms = _events(acl, kernel, block_dim, args, mine)
        acl.rt.destroy_stream(mine)
        return ms

    result = check("05.time_kernel", time_kernel)
    assert {"kernel", "events", "measurement", "sanitizer"} <= failed(result)
    assert "not on Stream 1" in item(result, "kernel").message
    assert "[race]" in item(result, "sanitizer").message


def test_launching_twice_fails():
    def time_kernel(acl, kernel, block_dim, args, stream):
        acl.rt.launch_kernel(kernel, block_dim, args, stream)
        return _events(acl, kernel, block_dim, args, stream)

    result = check("05.time_kernel", time_kernel)
    assert "kernel" in failed(result)
    assert "ran 2 times" in item(result, "kernel").message


def test_returning_the_whole_tuple_fails():
    def time_kernel(acl, kernel, block_dim, args, stream):
        start, _ = acl.rt.create_event()
        end, _ = acl.rt.create_event()
        acl.rt.record_event(start, stream)
        acl.rt.launch_kernel(kernel, block_dim, args, stream)
        acl.rt.record_event(end, stream)
        acl.rt.synchronize_event(end)
        result = acl.rt.event_elapsed_time(start, end)
        acl.rt.destroy_event(start)
        acl.rt.destroy_event(end)
        return result

    result = check("05.time_kernel", time_kernel)
    assert "measurement" in failed(result)
    assert "returned a tuple" in item(result, "measurement").message


def test_leaking_the_events_fails_resources():
    def time_kernel(acl, kernel, block_dim, args, stream):
        return _events(acl, kernel, block_dim, args, stream, destroy=False)

    result = check("05.time_kernel", time_kernel)
    assert failed(result) == {"resources"}
    assert "event 0x" in item(result, "resources").message
    assert "destroy_event" in item(result, "resources").hint


def test_returning_before_the_kernel_ends_is_caught():
    def time_kernel(acl, kernel, block_dim, args, stream):
        start, _ = acl.rt.create_event()
        acl.rt.record_event(start, stream)
        acl.rt.launch_kernel(kernel, block_dim, args, stream)
        acl.rt.destroy_event(start)
        return 0.5

    result = check("05.time_kernel", time_kernel)
    assert {"kernel", "events", "sanitizer"} <= failed(result)
    assert "[returned early]" in item(result, "sanitizer").message


# -- 05.handoff: known-wrong answers -----------------------------------------------------------

def handoff_record_once(acl, producer, consumer, produce, consume, n):
    ready, _ = acl.rt.create_event()
    produce(0)
    acl.rt.record_event(ready, producer)              # the trap: one record for every round
    for i in range(n):
        if i:
            produce(i)
        acl.rt.stream_wait_event(consumer, ready)
        consume(i)
    acl.rt.synchronize_stream(consumer)
    acl.rt.destroy_event(ready)


def handoff_host_sync(acl, producer, consumer, produce, consume, n):
    for i in range(n):
        produce(i)
        acl.rt.synchronize_stream(producer)           # right data, but the host waits
        consume(i)
    acl.rt.synchronize_stream(consumer)


def handoff_event_sync(acl, producer, consumer, produce, consume, n):
    ready, _ = acl.rt.create_event()
    for i in range(n):
        produce(i)
        acl.rt.record_event(ready, producer)
        acl.rt.synchronize_event(ready)               # the host waits instead of the stream
        consume(i)
    acl.rt.synchronize_stream(consumer)
    acl.rt.destroy_event(ready)


def handoff_no_event(acl, producer, consumer, produce, consume, n):
    for i in range(n):
        produce(i)
        consume(i)
    acl.rt.synchronize_device()


def handoff_over_wait(acl, producer, consumer, produce, consume, n):
    ready, _ = acl.rt.create_event()
    for i in range(n):
        produce(i)
        acl.rt.record_event(ready, producer)
    for i in range(n):                                # every wait sees the last record
        acl.rt.stream_wait_event(consumer, ready)
        consume(i)
    acl.rt.synchronize_stream(consumer)
    acl.rt.destroy_event(ready)


def handoff_wait_before_record(acl, producer, consumer, produce, consume, n):
    ready, _ = acl.rt.create_event_ex_with_flag(ACL_EVENT_SYNC)
    for i in range(n):
        produce(i)
        acl.rt.stream_wait_event(consumer, ready)     # no-op first, then last round's record
        acl.rt.record_event(ready, producer)
        consume(i)
    acl.rt.synchronize_stream(consumer)
    acl.rt.destroy_event(ready)


def handoff_record_on_consumer(acl, producer, consumer, produce, consume, n):
    ready, _ = acl.rt.create_event()
    for i in range(n):
        produce(i)
        acl.rt.record_event(ready, consumer)          # the wrong stream
        acl.rt.stream_wait_event(consumer, ready)
        consume(i)
    acl.rt.synchronize_stream(consumer)
    acl.rt.destroy_event(ready)


def handoff_reset_on_producer(acl, producer, consumer, produce, consume, n):
    ready, _ = acl.rt.create_event()
    for i in range(n):
        produce(i)
        acl.rt.record_event(ready, producer)
        acl.rt.stream_wait_event(consumer, ready)
        consume(i)
        acl.rt.reset_event(ready, producer)           # while the consumer may still wait
    acl.rt.synchronize_stream(consumer)
    acl.rt.destroy_event(ready)


def handoff_returns_early(acl, producer, consumer, produce, consume, n):
    ready, _ = acl.rt.create_event()
    for i in range(n):
        produce(i)
        acl.rt.record_event(ready, producer)
        acl.rt.stream_wait_event(consumer, ready)
        consume(i)
    acl.rt.destroy_event(ready)                       # no synchronize before returning


def handoff_leaks(acl, producer, consumer, produce, consume, n):
    for i in range(n):
        ready, _ = acl.rt.create_event()              # one per round, never destroyed
        produce(i)
        acl.rt.record_event(ready, producer)
        acl.rt.stream_wait_event(consumer, ready)
        consume(i)
    acl.rt.synchronize_stream(consumer)


def test_recording_once_and_waiting_every_round_is_stale():
    result = check("05.handoff", handoff_record_once)
    assert failed(result) == {"results", "B waits for A", "sanitizer"}
    assert "not yet refined" in item(result, "results").message
    waits = item(result, "B waits for A").message
    assert "before consume(1)" in waits and "stale record" in waits
    assert "after produce(0)" in waits
    assert item(result, "sanitizer").message.startswith("[stale-event-wait]")
    assert "record the event again" in item(result, "sanitizer").hint


@pytest.mark.parametrize("fn, call", [(handoff_host_sync, "acl.rt.synchronize_stream"),
                                      (handoff_event_sync, "acl.rt.synchronize_event")])
def test_waiting_on_the_host_is_right_but_blocks(fn, call):
    result = check("05.handoff", fn)
    assert failed(result) == {"B waits for A", "host never blocks"}
    assert "never waited on an event" in item(result, "B waits for A").message
    blocked = item(result, "host never blocks").message
    assert call in blocked and "time(s)" in blocked


def test_no_event_at_all_races():
    result = check("05.handoff", handoff_no_event)
    assert {"results", "B waits for A", "sanitizer"} <= failed(result)
    assert "[race]" in item(result, "sanitizer").message
    assert "stream_wait_event" in item(result, "sanitizer").hint


def test_waiting_on_later_rounds_waits_longer_than_necessary():
    result = check("05.handoff", handoff_over_wait)
    assert failed(result) == {"B waits for A"}
    message = item(result, "B waits for A").message
    assert "before consume(0)" in message and "longer than necessary" in message


def test_waiting_before_recording_is_stale_or_a_no_op():
    result = check("05.handoff", handoff_wait_before_record)
    assert {"results", "B waits for A", "sanitizer"} <= failed(result)
    assert "nothing made" in item(result, "B waits for A").message


def test_recording_on_the_consumer_stream_orders_nothing():
    result = check("05.handoff", handoff_record_on_consumer)
    assert {"results", "B waits for A", "sanitizer"} <= failed(result)
    assert "not on the producer stream" in item(result, "B waits for A").message


def test_resetting_on_the_producer_while_the_consumer_waits_is_flagged():
    result = check("05.handoff", handoff_reset_on_producer)
    assert failed(result) == {"sanitizer"}
    assert item(result, "sanitizer").message.startswith("[event-reset-while-waited]")


def test_returning_before_the_consumer_finishes_fails():
    result = check("05.handoff", handoff_returns_early)
    assert {"results", "sanitizer"} <= failed(result)
    assert "[returned early]" in item(result, "sanitizer").message


def test_an_event_per_round_must_be_destroyed():
    result = check("05.handoff", handoff_leaks)
    assert failed(result) == {"resources"}
    assert "event 0x" in item(result, "resources").message


def test_an_event_per_round_recorded_first_and_waited_later_is_right():
    def handoff(acl, producer, consumer, produce, consume, n):
        events = []
        for i in range(n):
            ev, _ = acl.rt.create_event()
            produce(i)
            acl.rt.record_event(ev, producer)
            events.append(ev)
        for i, ev in enumerate(events):               # each wait has its own round's record
            acl.rt.stream_wait_event(consumer, ev)
            consume(i)
        acl.rt.synchronize_stream(consumer)
        for ev in events:
            acl.rt.destroy_event(ev)

    assert check("05.handoff", handoff, seeds=range(6)).passed


def test_consuming_before_producing_fails_the_calls():
    def handoff(acl, producer, consumer, produce, consume, n):
        for i in range(n):
            consume(i)
            produce(i)
        acl.rt.synchronize_device()

    result = check("05.handoff", handoff)
    assert {"results", "calls", "sanitizer"} <= failed(result)
    assert "consume(0) was called before produce(0)" in item(result, "calls").message
    assert "B waits for A" not in {i.name for i in result.items}
    assert item(result, "sanitizer").message.startswith("[race]")   # the cause, not DE AD


def test_skipping_a_round_fails_the_calls():
    def handoff(acl, producer, consumer, produce, consume, n):
        SOLUTIONS.handoff(acl, producer, consumer, produce, consume, n - 1)

    result = check("05.handoff", handoff)
    assert "calls" in failed(result)
    assert "was never called" in item(result, "calls").message


def test_a_round_number_out_of_range_is_reported_on_the_learners_line():
    def handoff(acl, producer, consumer, produce, consume, n):
        produce(n)

    result = check("05.handoff", handoff)
    assert failed(result) == {"runs"}
    runs = item(result, "runs").message
    assert "IndexError" in runs and "produce(n)" in runs


def test_the_consumer_is_the_default_stream_in_one_case():
    def handoff(acl, producer, consumer, produce, consume, n):
        assert consumer == 0, "an explicit consumer stream"
        SOLUTIONS.handoff(acl, producer, consumer, produce, consume, n)

    assert check("05.handoff", handoff, seeds=(2,), edges=False).passed
    assert not check("05.handoff", handoff, seeds=(0,)).passed


# -- robustness --------------------------------------------------------------------------------

def test_the_learners_runtime_and_settings_are_restored(fresh):
    from acllab import acl

    acllab.configure("ascend910b", strict=True)
    runtime = acllab.current_runtime()
    acl.init()
    acl.rt.set_device(0)
    event, _ = acl.rt.create_event()
    settings = dict(session._settings)
    host_ns, tasks = runtime.host_ns, len(runtime.tasks)

    check("05.time_kernel", time_kernel_host_clock)
    check("05.handoff", handoff_record_once)

    assert session._settings == settings
    assert acllab.current_runtime() is runtime
    assert (runtime.host_ns, len(runtime.tasks)) == (host_ns, tasks)
    assert acl.rt.destroy_event(event) == 0


def test_summary_lists_lesson05():
    history.clear()
    check("05.time_kernel", SOLUTIONS.time_kernel)
    lesson = summary("05")
    assert [row[2] for row in lesson.rows] == ["passed", "not run"]
    assert "1 of 2" in str(lesson)


# -- grades that mean something (issue 7): every class of wrong answer, and other right ones ----

import numpy as np  # noqa: E402

import acllab.checks._common  # noqa: E402
import acllab.checks.lesson05 as lesson05  # noqa: E402
from acllab.checks import Item  # noqa: E402
from acllab.constants import (  # noqa: E402
    ACL_MEMCPY_DEVICE_TO_HOST,
    ACL_MEMCPY_HOST_TO_DEVICE,
    ACL_MEMCPY_HOST_TO_HOST,
)

IDS = [eid for eid, _ in EXERCISES]


# An empty answer, a hang and SystemExit: tests/test_checks_guard.py, for every exercise.


def test_every_exercise_has_a_generous_wall_clock_limit():
    assert all(ex.limit_s >= 10 for ex in exercises("05"))


def _oracle():
    lesson05.slack_ns(PROFILES["ascend310"])


def _set_goal():
    lesson05._BLOCKING = ()


def _replace_item():
    lesson05._kernel_item = lambda *a: (Item("kernel", True), None)
    lesson05._wait_item = lambda *a: Item("B waits for A", True)


def _silence_sanitizer():
    acllab.checks._common.sanitizer.analyze = lambda rt: []


@pytest.mark.parametrize("exercise_id, function", EXERCISES)
def test_calling_the_graders_helpers_earns_nothing(exercise_id, function):
    result = check(exercise_id, reference_after(SOLUTIONS, function, _oracle))
    assert failed(result) == {"own work"} and result.score == 0
    assert "lesson05.slack_ns" in item(result, "own work").message


@pytest.mark.parametrize("exercise_id, function", EXERCISES)
@pytest.mark.parametrize("tamper", [_set_goal, _replace_item, _silence_sanitizer])
def test_tampering_with_the_grader_fails_and_is_undone(exercise_id, function, tamper):
    saved = (lesson05._BLOCKING, lesson05._kernel_item, lesson05._wait_item,
             acllab.checks._common.sanitizer.analyze)
    result = check(exercise_id, reference_after(SOLUTIONS, function, tamper), seeds=(0,))
    assert failed(result) == {"acllab unchanged"} and result.score == 0
    assert "put it back" in item(result, "acllab unchanged").message
    assert (lesson05._BLOCKING, lesson05._kernel_item, lesson05._wait_item,
            acllab.checks._common.sanitizer.analyze) == saved


# 05.time_kernel: another right answer; host-side outputs

def time_kernel_sync_stream_at_the_end(acl, kernel, block_dim, args, stream):
    events = [acl.rt.create_event()[0] for _ in range(2)]
    acl.rt.record_event(events[0], stream)
    acl.rt.launch_kernel(kernel, block_dim, args, stream)
    acl.rt.record_event(events[1], stream)
    acl.rt.synchronize_stream(stream)          # waits for the end record too
    ms = acl.rt.event_elapsed_time(*events)[0]
    for ev in reversed(events):
        acl.rt.destroy_event(ev)
    return float(ms)


def time_kernel_then_overwrite_on_the_host(acl, kernel, block_dim, args, stream):
    """Times the kernel, then replaces its output with bytes the host computed."""
    ms = SOLUTIONS.time_kernel(acl, kernel, block_dim, args, stream)
    if kernel.name in ("axpy", "vadd"):
        out, n = args[1] if kernel.name == "axpy" else args[2], args[-1]
    else:
        out, n = args[2], args[3] * args[5]
    host, _ = acl.rt.malloc_host(4 * n)
    acl.rt.memcpy(host, 4 * n, out, 4 * n, ACL_MEMCPY_DEVICE_TO_HOST)
    data = np.frombuffer(acl.util.ptr_to_bytes(host, 4 * n), np.float32).copy()
    made = data.tobytes()
    acl.rt.memcpy(host, 4 * n, acl.util.bytes_to_ptr(made), 4 * n, ACL_MEMCPY_HOST_TO_HOST)
    acl.rt.memcpy(out, 4 * n, host, 4 * n, ACL_MEMCPY_HOST_TO_DEVICE)   # same bytes, host-made
    acl.rt.free_host(host)
    return ms


def test_another_right_timing_passes():
    result = check("05.time_kernel", time_kernel_sync_stream_at_the_end, seeds=range(6))
    assert result.passed and result.score == 1, str(result)


def test_an_output_the_host_wrote_back_is_not_the_kernels():
    result = check("05.time_kernel", time_kernel_then_overwrite_on_the_host)
    assert "kernel" in failed(result) and result.score == 0 and not result.warnings
    assert "host" in item(result, "kernel").message


def test_a_host_clock_scores_zero():
    result = check("05.time_kernel", time_kernel_host_clock)
    assert result.score == 0


# 05.handoff: another right answer; host-side and blocking ones

def handoff_event_per_round(acl, producer, consumer, produce, consume, n):
    events = []
    for i in range(n):
        ev, _ = acl.rt.create_event()
        produce(i)
        acl.rt.record_event(ev, producer)
        acl.rt.stream_wait_event(consumer, ev)
        consume(i)
        events.append(ev)
    last, _ = acl.rt.create_event()
    acl.rt.record_event(last, consumer)
    acl.rt.synchronize_event(last)
    for ev in [*events, last]:
        acl.rt.destroy_event(ev)


def handoff_then_rewrites_on_the_host(acl, producer, consumer, produce, consume, n):
    SOLUTIONS.handoff(acl, producer, consumer, produce, consume, n)
    runtime = acllab.current_runtime()
    for t in list(runtime.tasks):        # every host_out, rewritten with the same bytes
        if (t.info or {}).get("direction") == "d2h":
            dst = t.info["dst"]
            data = acl.util.ptr_to_bytes(dst, t.nbytes)
            acl.rt.memcpy(dst, t.nbytes, acl.util.bytes_to_ptr(data), t.nbytes,
                          ACL_MEMCPY_HOST_TO_HOST)


def test_another_right_handoff_passes():
    result = check("05.handoff", handoff_event_per_round, seeds=range(6))
    assert result.passed and result.score == 1, str(result)


def test_results_the_host_rewrote_are_not_the_devices():
    result = check("05.handoff", handoff_then_rewrites_on_the_host)
    assert "results" in failed(result) and result.score == 0
    assert "host" in item(result, "results").message and not result.warnings


def test_waiting_on_the_host_scores_zero():
    assert check("05.handoff", handoff_host_sync).score == 0
    assert check("05.handoff", handoff_event_sync).score == 0


# -- 05.handoff: the second call in the same runtime, odd counts, sizes not in whole pages ------

def test_a_handoff_that_hands_each_round_over_once_fails_again():
    handed = set()

    def handoff(acl, producer, consumer, produce, consume, n):
        if n in handed:             # "the rounds were handed over already"
            return
        handed.add(n)
        SOLUTIONS.handoff(acl, producer, consumer, produce, consume, n)

    result = check("05.handoff", handoff)
    assert result.score == 0 and failed(result) == {"again"}, str(result)
    again = item(result, "again")
    assert again.kind == "result" and "host_out[0]" in again.message


def test_the_reference_handoff_passes_the_second_call():
    result = check("05.handoff", SOLUTIONS.handoff)
    assert item(result, "again").passed, str(result)
    assert "handed the new rounds over" in item(result, "again").message


def test_handoff_cases_have_odd_and_even_rounds_and_sizes_in_part_pages():
    seen_rounds, sizes = set(), set()

    def handoff(acl, producer, consumer, produce, consume, n):
        seen_rounds.add(n % 2)
        runtime = session.current_runtime()
        first = len(runtime.tasks)
        SOLUTIONS.handoff(acl, producer, consumer, produce, consume, n)
        copies = [t for t in runtime.tasks[first:] if t.kind == "memcpy"]
        sizes.update(t.nbytes % 4096 for t in copies)

    result = check("05.handoff", handoff, seeds=(2, 4, 6))       # even seeds; edges add 0, 1
    assert result.passed, str(result)
    assert seen_rounds == {0, 1}
    assert sizes and 0 not in sizes         # no round is a whole number of 4 KiB pages


# -- 05.time_kernel: the second call in the same runtime ----------------------------------------

def test_a_time_kernel_that_remembers_its_time_fails_again():
    times = {}

    def time_kernel(acl, kernel, block_dim, args, stream):
        if kernel.name not in times:
            times[kernel.name] = SOLUTIONS.time_kernel(acl, kernel, block_dim, args, stream)
            return times[kernel.name]
        acl.rt.launch_kernel(kernel, block_dim, args, stream)      # launched, but not timed
        acl.rt.synchronize_stream(stream)
        return times[kernel.name]

    result = check("05.time_kernel", time_kernel)
    assert result.score == 0 and failed(result) == {"again"}, str(result)
    again = item(result, "again")
    assert again.kind == "result" and "block(s)" in again.message
    assert "a time kept from an earlier call" in again.hint


def test_a_time_kernel_that_skips_the_launch_the_second_time_fails_again():
    times = {}

    def time_kernel(acl, kernel, block_dim, args, stream):
        if kernel.name not in times:
            times[kernel.name] = SOLUTIONS.time_kernel(acl, kernel, block_dim, args, stream)
        return times[kernel.name]

    result = check("05.time_kernel", time_kernel)
    assert result.score == 0 and failed(result) == {"again"}, str(result)
    assert "no launch" in item(result, "again").message


def test_the_reference_time_kernel_passes_the_second_call():
    result = check("05.time_kernel", SOLUTIONS.time_kernel)
    assert item(result, "again").passed, str(result)
