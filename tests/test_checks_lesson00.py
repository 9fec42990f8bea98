"""Lesson 00 (Where Runtime sits): the tour check, and the notebook's slider, headless.

The tour exercise is optional for learners, but its check is a real one: the reference
solution passes, the placeholder is "not done", and each known-wrong answer below is a small
story of a mistake, with the items that must catch it.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from checks_support import failed, item, load_solutions

from acllab.checks import check, exercises
from acllab.constants import (
    ACL_MEM_MALLOC_HUGE_FIRST,
    ACL_MEM_MALLOC_NORMAL_ONLY,
    ACL_MEMCPY_DEVICE_TO_DEVICE,
    ACL_MEMCPY_DEVICE_TO_HOST,
    ACL_MEMCPY_HOST_TO_DEVICE,
    ACL_MEMCPY_HOST_TO_HOST,
)

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOK = ROOT / "lessons" / "00-where-runtime-sits.ipynb"
H2D, D2H, HUGE = ACL_MEMCPY_HOST_TO_DEVICE, ACL_MEMCPY_DEVICE_TO_HOST, ACL_MEM_MALLOC_HUGE_FIRST


SOLUTIONS = load_solutions("00")


# -- registration and more seeds (the generic promises: test_checks_common.py) -----------------

def test_lesson00_registers_its_tour_exercise():
    assert [(ex.id, ex.function) for ex in exercises("00")] == [("00.tour", "first_copy")]
    assert [len(ex.seeds) for ex in exercises("00")] == [3]       # cases per check


def test_reference_solution_reports_its_items():
    result = check("00.tour", SOLUTIONS.first_copy)
    assert result.status == "passed", str(result)
    assert [i.name for i in result.items] == ["runs", "result", "round trip", "again",
                                              "sanitizer", "resources"]


def test_reference_solution_passes_on_more_seeds():
    result = check("00.tour", SOLUTIONS.first_copy, seeds=range(3, 12))
    assert result.status == "passed", str(result)


# -- known-wrong answers -----------------------------------------------------------------------

def first_copy_leaks(acl, data):
    n = len(data)
    dev, _ = acl.rt.malloc(n, HUGE)
    acl.rt.memcpy(dev, n, acl.util.bytes_to_ptr(data), n, H2D)
    back = bytearray(n)
    acl.rt.memcpy(acl.util.bytes_to_ptr(back), n, dev, n, D2H)
    return bytes(back)                                  # dev never freed


def first_copy_echo(acl, data):
    return data                                         # never goes near the device


def first_copy_never_copies_back(acl, data):
    n = len(data)
    dev, _ = acl.rt.malloc(n, HUGE)
    acl.rt.memcpy(dev, n, acl.util.bytes_to_ptr(data), n, H2D)
    back = bytearray(n)                                 # still zeros
    acl.rt.free(dev)
    return bytes(back)


def first_copy_reads_fresh_memory(acl, data):
    n = len(data)
    dev, _ = acl.rt.malloc(n, HUGE)
    back = bytearray(n)
    acl.rt.memcpy(acl.util.bytes_to_ptr(back), n, dev, n, D2H)   # forgot the way in
    acl.rt.free(dev)
    return bytes(back)


def first_copy_reads_before_sync(acl, data):
    n = len(data)
    dev, _ = acl.rt.malloc(n, HUGE)
    host, _ = acl.rt.malloc_host(n)
    acl.rt.memcpy(dev, n, acl.util.bytes_to_ptr(data), n, H2D)
    acl.rt.memcpy_async(host, n, dev, n, D2H, 0)
    out = acl.util.ptr_to_bytes(host, n)                # before the copy has landed
    acl.rt.synchronize_stream(0)
    acl.rt.free(dev)
    acl.rt.free_host(host)
    return out


def first_copy_finalizes(acl, data):
    out = SOLUTIONS.first_copy(acl, data)
    device, _ = acl.rt.get_device()
    acl.rt.reset_device(device)
    acl.finalize()
    return out


def test_a_leaked_device_buffer_fails_resources_only():
    result = check("00.tour", first_copy_leaks)
    assert failed(result) == {"resources"}
    assert result.score == 0                # the exercise is first_copy_buggy without its leak
    message = item(result, "resources").message
    assert "never freed" in message and "device" in message
    assert "acl.rt.free" in item(result, "resources").hint


def test_returning_the_input_fails_the_round_trip():
    result = check("00.tour", first_copy_echo)
    assert failed(result) == {"round trip"} and result.score == 0
    assert "never came back from the device" in item(result, "round trip").message
    assert "very bytes object" in item(check("00.tour", first_copy_returns_its_input),
                                       "round trip").message


def test_a_copy_only_one_way_fails_result_and_round_trip():
    result = check("00.tour", first_copy_never_copies_back)
    assert failed(result) == {"result", "round trip"}
    assert "zeros" in item(result, "result").message
    assert "no device-to-host copy" in item(result, "round trip").message


def test_reading_memory_nothing_wrote_shows_the_pattern_and_the_sanitizer_finding():
    result = check("00.tour", first_copy_reads_fresh_memory)
    assert failed(result) == {"result", "round trip", "sanitizer"}
    assert "DE AD BE EF" in item(result, "result").message
    assert "uninitialised-read" in item(result, "sanitizer").message


def test_reading_before_synchronising_is_caught():
    result = check("00.tour", first_copy_reads_before_sync)
    assert {"result", "sanitizer"} <= failed(result)
    assert "host-read-before-sync" in item(result, "sanitizer").message


def test_releasing_the_callers_device_fails_resources():
    result = check("00.tour", first_copy_finalizes)
    # a second call by the same caller fails too: its device is gone
    assert failed(result) == {"resources", "again"}
    assert "reset the device or finalised" in item(result, "resources").message


def test_wrong_types_and_lengths_fail_the_result():
    as_list = check("00.tour", lambda acl, data: list(SOLUTIONS.first_copy(acl, data)))
    assert failed(as_list) == {"result", "round trip"} and as_list.score == 0
    short = check("00.tour", lambda acl, data: SOLUTIONS.first_copy(acl, data)[:-1],
                  seeds=(1, 2))
    assert failed(short) == {"result"} and short.score == 0     # the bytes did come back
    assert "bytes, but data holds" in item(short, "result").message


def test_the_message_never_shows_the_expected_bytes():
    def off_by_one(acl, data):
        return bytes((b + 1) % 256 for b in SOLUTIONS.first_copy(acl, data))

    result = check("00.tour", off_by_one, seeds=(1,))
    message = item(result, "result").message
    assert "differ from data from byte 0" in message
    rng = np.random.default_rng([0, 1, 1])              # the check's draw for seed 1
    nbytes = int(rng.integers(64, 4 * 1024))
    rng.integers(0, 4)
    data = rng.bytes(nbytes)
    shown = " ".join(f"{(b + 1) % 256:02X}" for b in data[:8])
    assert shown in message                             # what the function returned ...
    assert " ".join(f"{b:02X}" for b in data[:8]) not in message   # ... never the answer


# -- the notebook's widget, headless -----------------------------------------------------------

def notebook_namespace() -> dict:
    """Run the notebook's code cells in this process (untouched: placeholders stay)."""
    nb = json.loads(NOTEBOOK.read_text(encoding="utf-8"))
    namespace: dict = {"__name__": "lesson00"}
    for cell in nb["cells"]:
        if cell["cell_type"] == "code":
            exec(compile("".join(cell["source"]), "<lesson 00>", "exec"), namespace)
    return namespace


def test_the_notebook_program_classifies_and_the_slider_redraws_the_timeline(fresh, capsys):
    pytest.importorskip("ipywidgets")
    ns = notebook_namespace()
    assert ns["predicted"] == [int(t) for t in ns["truth"]]

    slider, tour = ns["images_slider"], ns["tour"]
    fig = tour.widget()

    def kernels() -> int:
        return len(next(t for t in fig.data if t.type == "bar" and t.name == "AI Core").x)

    before = kernels()
    assert before > 0 and before % slider.value == 0
    per_image = before // slider.value
    slider.value = 5                            # what dragging the handle does, on release
    assert kernels() == 5 * per_image
    slider.value = slider.min
    assert kernels() == per_image
    assert not slider.continuous_update         # redraws on release, not while dragging


def test_a_detour_through_a_second_device_buffer_still_counts_as_a_round_trip():
    def first_copy(acl, data):
        n = len(data)
        a, _ = acl.rt.malloc(n, HUGE)
        b, _ = acl.rt.malloc(n, HUGE)
        acl.rt.memcpy(a, n, acl.util.bytes_to_ptr(data), n, H2D)
        acl.rt.memcpy(b, n, a, n, ACL_MEMCPY_DEVICE_TO_DEVICE)
        back = bytearray(n)
        acl.rt.memcpy(acl.util.bytes_to_ptr(back), n, b, n, D2H)
        acl.rt.free(a)
        acl.rt.free(b)
        return bytes(back)

    assert check("00.tour", first_copy).passed


# -- grades that mean something (issue 7): the score of every class of wrong answer -------------

def test_an_empty_function_scores_zero():
    for fn in (lambda *a: None, lambda *a: 0, lambda acl, data: b""):
        result = check("00.tour", fn)
        assert result.status == "failed" and result.score == 0, str(result)
        assert "score 0" in str(result)


def first_copy_host_copy(acl, data):
    return bytes(bytearray(data))                       # a copy the host made


def first_copy_half_way_back(acl, data):
    """Takes data to the device, brings only half of it back, returns a host copy."""
    n = len(data)
    dev, _ = acl.rt.malloc(n, HUGE)
    acl.rt.memcpy(dev, n, acl.util.bytes_to_ptr(data), n, H2D)
    back = bytearray(n)
    acl.rt.memcpy(acl.util.bytes_to_ptr(back), n, dev, max(1, n // 2), D2H)
    acl.rt.free(dev)
    return bytes(bytearray(data))


def first_copy_round_trip_of_zeros(acl, data):
    """A real round trip, of other bytes; the answer is patched in on the host."""
    n = len(data)
    dev, _ = acl.rt.malloc(n, HUGE)
    zeros = bytearray(n)
    acl.rt.memcpy(dev, n, acl.util.bytes_to_ptr(zeros), n, H2D)
    back = bytearray(n)
    acl.rt.memcpy(acl.util.bytes_to_ptr(back), n, dev, n, D2H)
    acl.rt.free(dev)
    back[:] = data                                      # host-side "result"
    return bytes(back)


def first_copy_memset_then_patch(acl, data):
    """Device memory filled by a memset, brought back, then overwritten on the host."""
    n = len(data)
    dev, _ = acl.rt.malloc(n, HUGE)
    acl.rt.memset(dev, n, 7, n)
    host, _ = acl.rt.malloc_host(n)
    acl.rt.memcpy(host, n, dev, n, D2H)
    acl.util.bytes_to_ptr  # noqa: B018 - the learner looks around
    out = bytes(data)
    acl.rt.free(dev)
    acl.rt.free_host(host)
    return out


def first_copy_host_to_host(acl, data):
    """Copies with pyACL, but host to host: the device never holds the bytes."""
    n = len(data)
    back = bytearray(n)
    acl.rt.memcpy(acl.util.bytes_to_ptr(back), n, acl.util.bytes_to_ptr(data), n,
                  ACL_MEMCPY_HOST_TO_HOST)
    return bytes(back)


def first_copy_returns_its_input(acl, data):
    SOLUTIONS.first_copy(acl, data)                     # does the work, returns the input
    return data


@pytest.mark.parametrize("fn, why", [
    (first_copy_host_copy, "never came back from the device"),
    (first_copy_half_way_back, "not the bytes that the device-to-host copies wrote"),
    (first_copy_round_trip_of_zeros, "not the bytes that the device-to-host copies wrote"),
    (first_copy_memset_then_patch, "not the bytes that the device-to-host copies wrote"),
    (first_copy_host_to_host, "never came back from the device"),
    (first_copy_returns_its_input, "very bytes object"),
], ids=lambda v: getattr(v, "__name__", "")[11:] or None)
def test_host_side_answers_score_zero_though_the_bytes_are_right(fn, why):
    result = check("00.tour", fn)
    assert item(result, "result").passed                # right bytes ...
    assert "round trip" in failed(result)               # ... that the device did not deliver
    assert why in item(result, "round trip").message
    assert result.score == 0


def test_device_memory_nothing_filled_is_traced_to_no_host_copy():
    result = check("00.tour", first_copy_reads_fresh_memory, seeds=(2,))
    assert "no host-to-device copy of the function had filled" in item(
        result, "round trip").message
    assert result.score == 0


def test_calling_the_graders_helpers_fails_own_work():
    import acllab.checks.lesson00 as grader

    def first_copy(acl, data):
        out = SOLUTIONS.first_copy(acl, data)
        grader.trace_round_trip(None, out, 0, 0)
        return out

    def first_copy_quietly(acl, data):
        try:
            grader.grade_first_copy(first_copy, 0)
        except Exception:               # noqa: BLE001 - hides the refusal: still caught
            pass
        return SOLUTIONS.first_copy(acl, data)

    for fn in (first_copy, first_copy_quietly):
        result = check("00.tour", fn)
        assert failed(result) == {"own work"} and result.score == 0
        assert "belongs to the grader" in item(result, "own work").message


def test_tampering_with_the_check_fails_and_is_undone():
    import acllab.checks._common as common
    import acllab.checks.lesson00 as grader
    from acllab.analysis import sanitizer
    from acllab.checks import Item

    analyze, sizes, result_item = sanitizer.analyze, grader._SIZES, grader._result_item

    def silence_the_sanitizer(acl, data):
        common.sanitizer.analyze = lambda rt: []
        return first_copy_reads_before_sync(acl, data)

    def smaller_cases(acl, data):
        grader._SIZES = ((1, 2),) * 3
        return first_copy_echo(acl, data)

    def pass_the_result(acl, data):
        grader._result_item = lambda got, data: Item("result", True, "fine")
        grader._round_trip_item = lambda *a: Item("round trip", True, "fine")
        return b""

    def erase_the_trace(acl, data):
        import acllab

        out = SOLUTIONS.first_copy(acl, data)
        acllab.current_runtime().engine.tasks.clear()
        return out

    for fn in (silence_the_sanitizer, smaller_cases, pass_the_result, erase_the_trace):
        result = check("00.tour", fn)
        assert failed(result) == {"acllab unchanged"} and result.score == 0, fn.__name__
        message = item(result, "acllab unchanged").message
        assert "put it back" in message or "the trace) was edited" in message
    assert (sanitizer.analyze, grader._SIZES, grader._result_item) == (analyze, sizes,
                                                                         result_item)
    assert check("00.tour", SOLUTIONS.first_copy).passed      # the check still works
    assert check("00.tour", first_copy_reads_before_sync).score == 0


def test_hangs_and_exits_end_the_case_with_score_zero():
    import time

    def spins(acl, data):
        while True:
            pass

    def sleeps(acl, data):
        time.sleep(100)

    def exits(acl, data):
        raise SystemExit(0)

    for fn in (spins, sleeps):
        started = time.monotonic()
        result = check("00.tour", fn, limit_s=1)
        assert time.monotonic() - started < 10
        assert failed(result) == {"runs"} and result.score == 0
        assert "stopped after 1 s" in item(result, "runs").message
    result = check("00.tour", exits)
    assert failed(result) == {"runs"} and result.score == 0
    assert "SystemExit" in item(result, "runs").message


def test_a_hazard_alone_costs_only_the_sanitizer_share():
    def first_copy(acl, data):
        """Right bytes, really round-tripped, but an async copy from pageable memory."""
        n = len(data)
        dev, _ = acl.rt.malloc(n, HUGE)
        acl.rt.memcpy_async(dev, n, acl.util.bytes_to_ptr(data), n, H2D, 0)
        acl.rt.synchronize_stream(0)
        back = bytearray(n)
        acl.rt.memcpy(acl.util.bytes_to_ptr(back), n, dev, n, D2H)
        acl.rt.free(dev)
        return bytes(back)

    result = check("00.tour", first_copy)
    assert failed(result) == {"sanitizer"}
    assert 0 < result.score < 1 and "every result is right" in str(result)
    assert item(result, "sanitizer").kind == "process"
    assert {i.name for i in result.items if i.kind == "result"} == {
        "runs", "result", "round trip", "again", "resources"}


def test_correct_variants_unlike_the_reference_pass():
    def pinned_and_async(acl, data):
        n = len(data)
        stream, _ = acl.rt.create_stream()
        src, _ = acl.rt.malloc_host(n)
        dst, _ = acl.rt.malloc_host(n)
        acl.rt.memcpy(src, n, acl.util.bytes_to_ptr(data), n, ACL_MEMCPY_HOST_TO_HOST)
        dev, _ = acl.rt.malloc(n, ACL_MEM_MALLOC_NORMAL_ONLY)
        acl.rt.memcpy_async(dev, n, src, n, H2D, stream)
        acl.rt.memcpy_async(dst, n, dev, n, D2H, stream)
        acl.rt.synchronize_stream(stream)
        out = acl.util.ptr_to_bytes(dst, n)
        for ptr in (src, dst):
            acl.rt.free_host(ptr)
        acl.rt.free(dev)
        acl.rt.destroy_stream(stream)
        return out

    def in_pieces_through_numpy(acl, data):
        n = len(data)
        back = np.zeros(n, dtype=np.uint8)
        dev, ret = acl.rt.malloc_align32(n, ACL_MEM_MALLOC_NORMAL_ONLY)
        assert ret == 0
        step = max(1, n // 3)
        for lo in range(0, n, step):
            m = min(step, n - lo)
            acl.rt.memcpy(dev + lo, n - lo, acl.util.bytes_to_ptr(data) + lo, m, H2D)
        for lo in reversed(range(0, n, step)):
            m = min(step, n - lo)
            acl.rt.memcpy(acl.util.numpy_to_ptr(back) + lo, n - lo, dev + lo, m, D2H)
        acl.rt.free(dev)
        return back.tobytes()

    for fn in (pinned_and_async, in_pieces_through_numpy):
        result = check("00.tour", fn, seeds=range(6))
        assert result.passed and result.score == 1, str(result)


def test_bytes_moved_on_the_host_after_coming_back_still_count():
    def via_pinned_then_host_copy(acl, data):
        n = len(data)
        dev, _ = acl.rt.malloc(n, HUGE)
        acl.rt.memcpy(dev, n, acl.util.bytes_to_ptr(data), n, H2D)
        pinned, _ = acl.rt.malloc_host(n)
        acl.rt.memcpy(pinned, n, dev, n, D2H)
        back = bytearray(n)
        acl.rt.memcpy(acl.util.bytes_to_ptr(back), n, pinned, n, ACL_MEMCPY_HOST_TO_HOST)
        acl.rt.free_host(pinned)
        acl.rt.free(dev)
        return bytes(back)

    def host_copy_beside_a_round_trip_of_zeros(acl, data):
        n = len(data)
        dev, _ = acl.rt.malloc(n, HUGE)
        zeros = bytearray(n)
        acl.rt.memcpy(dev, n, acl.util.bytes_to_ptr(zeros), n, H2D)
        acl.rt.memcpy(acl.util.bytes_to_ptr(zeros), n, dev, n, D2H)
        back = bytearray(n)
        acl.rt.memcpy(acl.util.bytes_to_ptr(back), n, acl.util.bytes_to_ptr(data), n,
                      ACL_MEMCPY_HOST_TO_HOST)
        acl.rt.free(dev)
        return bytes(back)

    assert check("00.tour", via_pinned_then_host_copy, seeds=range(6)).passed
    result = check("00.tour", host_copy_beside_a_round_trip_of_zeros)
    assert failed(result) == {"round trip"} and result.score == 0
    assert "not the bytes that the device-to-host copies wrote" in item(
        result, "round trip").message


# -- a second call in the same runtime, with new data of the same size ------------------------

def test_a_first_copy_that_remembers_its_answer_by_size_fails_again():
    cache = {}

    def first_copy(acl, data):
        if len(data) not in cache:
            cache[len(data)] = SOLUTIONS.first_copy(acl, data)
        return cache[len(data)]

    result = check("00.tour", first_copy)
    assert result.score == 0 and failed(result) == {"again"}, str(result)
    assert "returned other bytes" in item(result, "again").message
    assert item(result, "again").kind == "result"
    assert check("00.tour", SOLUTIONS.first_copy).passed            # the right one still does


# -- the real mistake named in the failing item -------------------------------------------------

def test_freeing_before_the_copy_back_names_the_failed_copy_in_the_result():
    def first_copy(acl, data):
        n = len(data)
        dev, _ = acl.rt.malloc(n, 0)
        host, _ = acl.rt.malloc_host(n)
        acl.rt.memcpy(dev, n, acl.util.bytes_to_ptr(data), n, 1)
        acl.rt.free(dev)                                # too early: the copy back fails
        acl.rt.memcpy(host, n, dev, n, 2)
        out = acl.util.ptr_to_bytes(host, n)
        acl.rt.free_host(host)
        return out

    result = check("00.tour", first_copy)
    message = item(result, "result").message
    assert "A pyACL call had failed before this: acl.rt.memcpy" in message, message
    assert "returned 107000" in message and "was freed by acl.rt.free" in message
    assert "fix the first pyACL call that failed" in item(result, "result").hint


def test_a_wrong_answer_with_no_failed_call_keeps_its_own_hint():
    def first_copy(acl, data):
        return bytes(len(data))

    result = check("00.tour", first_copy)
    assert "pyACL call had failed" not in item(result, "result").message
    assert "fix the first pyACL call" not in item(result, "result").hint
