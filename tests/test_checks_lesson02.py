"""Lesson 02 checks: the reference solutions pass, placeholders are "not done", known bugs fail.

Each known-wrong answer is a small story of a mistake a learner makes with device memory, and
the test asserts which items catch it and that the message teaches without giving the answer.
"""

from __future__ import annotations

import pytest
from checks_support import exercise_list, failed, item, load_solutions

import acllab
from acllab import session
from acllab.checks import check, exercises
from acllab.checks.lesson02 import CALLS, fit_budget_case, huge_pages_needed
from acllab.constants import (
    ACL_MEM_MALLOC_HUGE_FIRST,
    ACL_MEM_MALLOC_HUGE_ONLY,
    ACL_MEM_MALLOC_NORMAL_ONLY,
    ACL_MEMCPY_DEVICE_TO_HOST,
    ACL_MEMCPY_HOST_TO_DEVICE,
    ACL_MEMCPY_HOST_TO_HOST,
)
from acllab.hardware import HUGE_PAGE, MiB

H2D, D2H, H2H = ACL_MEMCPY_HOST_TO_DEVICE, ACL_MEMCPY_DEVICE_TO_HOST, ACL_MEMCPY_HOST_TO_HOST
FIRST, ONLY, NORMAL = ACL_MEM_MALLOC_HUGE_FIRST, ACL_MEM_MALLOC_HUGE_ONLY, \
    ACL_MEM_MALLOC_NORMAL_ONLY


SOLUTIONS = load_solutions("02")


# -- registration and more seeds (the generic promises: test_checks_common.py) -----------------

EXERCISES = exercise_list("02")


def test_lesson02_registers_its_exercises():
    assert EXERCISES == [("02.fit_budget", "allocate"), ("02.fix_leak", "roundtrip")]
    assert [len(ex.seeds) for ex in exercises("02")] == [3, 3]     # cases per check


@pytest.mark.parametrize("exercise_id, function", EXERCISES)
def test_reference_solution_passes_on_more_seeds(exercise_id, function):
    result = check(exercise_id, getattr(SOLUTIONS, function), seeds=range(3, 12))
    assert result.status == "passed", str(result)


# -- 02.fit_budget: the cases ------------------------------------------------------------------

@pytest.mark.parametrize("seed", range(40))
def test_every_case_is_a_tight_budget_that_first_come_first_served_cannot_meet(seed):
    sizes, pool = fit_budget_case(seed)
    assert sizes == fit_budget_case(seed)[0]                  # deterministic per seed
    big = [s for s in sizes if s >= HUGE_PAGE]
    medium = [i for i, s in enumerate(sizes) if MiB < s < HUGE_PAGE]
    small = [s for s in sizes if s <= MiB]
    assert len(big) >= 2 and medium and len(small) >= 2
    assert pool == sum(huge_pages_needed(s) for s in big) * HUGE_PAGE
    assert any(s % HUGE_PAGE == 0 for s in big)       # malloc's extra 32 B costs a page
    last_big = max(i for i, s in enumerate(sizes) if s >= HUGE_PAGE)
    assert medium[0] < last_big                       # HUGE_FIRST in order never fits


def test_huge_pages_needed_follows_malloc_align32():
    assert huge_pages_needed(1) == 1
    assert huge_pages_needed(2 * MiB) == 1
    assert huge_pages_needed(2 * MiB + 1) == 2
    assert huge_pages_needed(4 * MiB - 31) == 2


# -- 02.fit_budget: known-wrong answers --------------------------------------------------------

def allocate_huge_first(acl, sizes):
    return [acl.rt.malloc(s, FIRST)[0] for s in sizes]


def allocate_huge_only(acl, sizes):
    return [acl.rt.malloc_align32(s, ONLY)[0] for s in sizes]


def allocate_normal_only(acl, sizes):
    return [acl.rt.malloc(s, NORMAL)[0] for s in sizes]


def allocate_right_policies_plain_malloc(acl, sizes):
    return [acl.rt.malloc(s, ONLY if s >= HUGE_PAGE else NORMAL)[0] for s in sizes]


def allocate_huge_first_align32(acl, sizes):
    return [acl.rt.malloc_align32(s, FIRST)[0] for s in sizes]


def test_huge_first_for_everything_gives_pages_away_and_fails_placement():
    result = check("02.fit_budget", allocate_huge_first)
    assert failed(result) == {"huge pages"}
    message = item(result, "huge pages").message
    assert "sits in normal pages" in message
    assert "though it is under 2 MiB" in message          # a medium buffer took a page
    assert "32 B more than asked" in message               # malloc's extra 32 bytes
    assert "malloc_align32" not in message + item(result, "huge pages").hint   # no answer


def test_huge_only_for_everything_runs_out_of_huge_pages():
    result = check("02.fit_budget", allocate_huge_only)
    assert {"buffers", "huge pages"} <= failed(result)
    assert "its malloc failed" in item(result, "buffers").message
    assert "207001" in item(result, "buffers").message
    assert any("207001" in w for w in result.warnings)


def test_normal_pages_for_everything_leaves_the_pool_unused():
    result = check("02.fit_budget", allocate_normal_only)
    assert failed(result) == {"huge pages"}
    assert "stayed free" in item(result, "huge pages").message


def test_right_policies_with_plain_malloc_run_short_by_the_extra_32_bytes():
    result = check("02.fit_budget", allocate_right_policies_plain_malloc)
    assert {"buffers", "huge pages"} <= failed(result)
    assert "32 B more than asked" in item(result, "huge pages").message


def test_huge_first_with_align32_still_gives_pages_to_medium_buffers():
    result = check("02.fit_budget", allocate_huge_first_align32)
    assert failed(result) == {"huge pages"}
    assert "though it is under 2 MiB" in item(result, "huge pages").message


def test_huge_first_fails_on_every_seed():
    for seed in range(20):
        assert not check("02.fit_budget", allocate_huge_first, seeds=(seed,)).passed, seed
        assert not check("02.fit_budget", allocate_huge_first_align32, seeds=(seed,)).passed


def test_big_buffers_first_is_another_right_answer():
    def allocate(acl, sizes):
        ptrs = {}
        for i in sorted(range(len(sizes)), key=lambda i: -sizes[i]):
            ptrs[i] = acl.rt.malloc_align32(sizes[i], FIRST)[0]
        return [ptrs[i] for i in range(len(sizes))]

    assert check("02.fit_budget", allocate, seeds=range(6)).passed


def test_a_wrong_number_of_addresses_fails_buffers():
    def allocate(acl, sizes):
        return SOLUTIONS.allocate(acl, sizes)[:-1]

    result = check("02.fit_budget", allocate)
    assert "buffers" in failed(result)
    assert "addresses for" in item(result, "buffers").message
    assert "resources" in failed(result)                   # the last block was never freed


def test_freeing_a_buffer_before_returning_it_fails_buffers():
    def allocate(acl, sizes):
        ptrs = SOLUTIONS.allocate(acl, sizes)
        acl.rt.free(ptrs[0])
        return ptrs

    result = check("02.fit_budget", allocate)
    assert "buffers" in failed(result)
    assert "not the start of a live device block" in item(result, "buffers").message


def test_an_address_inside_a_block_fails_buffers():
    def allocate(acl, sizes):
        ptrs = SOLUTIONS.allocate(acl, sizes)
        return [ptrs[0] + 64, *ptrs[1:]]

    result = check("02.fit_budget", allocate)
    assert "buffers" in failed(result)


def test_an_extra_block_left_behind_fails_resources():
    def allocate(acl, sizes):
        acl.rt.malloc(1000, NORMAL)                        # a scratch block, never freed
        return SOLUTIONS.allocate(acl, sizes)

    result = check("02.fit_budget", allocate)
    assert failed(result) == {"resources"}
    assert "never freed" in item(result, "resources").message
    assert 0 < result.score < 1 and item(result, "resources").kind == "process"


def test_a_result_that_is_not_a_list_fails():
    result = check("02.fit_budget", lambda acl, sizes: None)
    assert failed(result) == {"buffers"}
    assert "returned NoneType" in item(result, "buffers").message


# -- 02.fix_leak: known-wrong answers ----------------------------------------------------------

def roundtrip_leaky(acl, payload, chunk, stream):
    """The notebook's leaky version: a block per chunk, only the last one freed."""
    n = len(payload)
    host_in, _ = acl.rt.malloc_host(n)
    host_out, _ = acl.rt.malloc_host(n)
    acl.rt.memcpy(host_in, n, acl.util.bytes_to_ptr(payload), n, H2H)
    for lo in range(0, n, chunk):
        m = min(chunk, n - lo)
        dev, _ = acl.rt.malloc(chunk, NORMAL)
        acl.rt.memcpy_async(dev, chunk, host_in + lo, m, H2D, stream)
        acl.rt.memcpy_async(host_out + lo, n - lo, dev, m, D2H, stream)
    acl.rt.synchronize_stream(stream)
    data = acl.util.ptr_to_bytes(host_out, n)
    acl.rt.free(dev)
    acl.rt.free_host(host_in)
    acl.rt.free_host(host_out)
    return data


def roundtrip_frees_in_the_loop(acl, payload, chunk, stream):
    """Fixes the leak by freeing each block right after queueing its copies."""
    n = len(payload)
    host_in, _ = acl.rt.malloc_host(n)
    host_out, _ = acl.rt.malloc_host(n)
    acl.rt.memcpy(host_in, n, acl.util.bytes_to_ptr(payload), n, H2H)
    for lo in range(0, n, chunk):
        m = min(chunk, n - lo)
        dev, _ = acl.rt.malloc(chunk, NORMAL)
        acl.rt.memcpy_async(dev, chunk, host_in + lo, m, H2D, stream)
        acl.rt.memcpy_async(host_out + lo, n - lo, dev, m, D2H, stream)
        acl.rt.free(dev)                                   # the copies are still queued
    acl.rt.synchronize_stream(stream)
    data = acl.util.ptr_to_bytes(host_out, n)
    acl.rt.free_host(host_in)
    acl.rt.free_host(host_out)
    return data


def roundtrip_keeps_pinned(acl, payload, chunk, stream):
    """Frees the device block but never the pinned host buffers."""
    n = len(payload)
    host_in, _ = acl.rt.malloc_host(n)
    host_out, _ = acl.rt.malloc_host(n)
    acl.rt.memcpy(host_in, n, acl.util.bytes_to_ptr(payload), n, H2H)
    dev, _ = acl.rt.malloc(chunk, FIRST)
    for lo in range(0, n, chunk):
        m = min(chunk, n - lo)
        acl.rt.memcpy_async(dev, chunk, host_in + lo, m, H2D, stream)
        acl.rt.memcpy_async(host_out + lo, m, dev, m, D2H, stream)
    acl.rt.synchronize_stream(stream)
    acl.rt.free(dev)
    return acl.util.ptr_to_bytes(host_out, n)


def test_the_leaky_version_fails_freed_flat_and_resources():
    result = check("02.fix_leak", roundtrip_leaky)
    assert failed(result) == {"freed", "flat", "resources"}
    assert result.score == 0                        # the leak is what the exercise is about
    freed = item(result, "freed").message
    assert "after call 1 of" in freed and "device block(s)" in freed
    flat = item(result, "flat").message
    assert "grew from" in flat and "per call" in flat and "npu-smi" in flat
    assert "never freed" in item(result, "resources").message


def test_freeing_before_synchronising_is_a_use_after_free():
    result = check("02.fix_leak", roundtrip_frees_in_the_loop)
    assert failed(result) == {"sanitizer"}
    # a use after free is a wrong answer (a result item), as the lesson teaches
    assert result.score == 0 and item(result, "sanitizer").kind == "result"
    sanitizer = item(result, "sanitizer")
    assert "[use-after-free]" in sanitizer.message
    assert "does not wait for the stream" in sanitizer.hint


def test_forgetting_pinned_memory_fails_freed_but_not_flat():
    result = check("02.fix_leak", roundtrip_keeps_pinned)
    assert failed(result) == {"freed", "resources"} and result.score == 0
    assert "pinned host buffer(s)" in item(result, "freed").message
    assert item(result, "flat").passed                    # device memory did not grow


def test_reading_before_synchronising_fails_results():
    def roundtrip(acl, payload, chunk, stream):
        n = len(payload)
        host_in, _ = acl.rt.malloc_host(n)
        host_out, _ = acl.rt.malloc_host(n)
        acl.rt.memcpy(host_in, n, acl.util.bytes_to_ptr(payload), n, H2H)
        dev, _ = acl.rt.malloc(n, FIRST)
        acl.rt.memcpy_async(dev, n, host_in, n, H2D, stream)
        acl.rt.memcpy_async(host_out, n, dev, n, D2H, stream)
        data = acl.util.ptr_to_bytes(host_out, n)          # too early
        acl.rt.synchronize_stream(stream)
        acl.rt.free(dev)
        acl.rt.free_host(host_in)
        acl.rt.free_host(host_out)
        return data

    result = check("02.fix_leak", roundtrip)
    assert {"results", "sanitizer"} <= failed(result)
    assert "DE AD BE EF" in item(result, "results").message


def test_destroying_the_callers_stream_fails_resources():
    def roundtrip(acl, payload, chunk, stream):
        data = SOLUTIONS.roundtrip(acl, payload, chunk, stream)
        acl.rt.destroy_stream(stream)
        return data

    result = check("02.fix_leak", roundtrip)
    assert "resources" in failed(result)


def test_an_exception_on_a_later_call_names_the_call():
    calls = []

    def roundtrip(acl, payload, chunk, stream):
        calls.append(1)
        if len(calls) == 3:
            raise RuntimeError("third time unlucky")
        return SOLUTIONS.roundtrip(acl, payload, chunk, stream)

    result = check("02.fix_leak", roundtrip, seeds=(0,))
    assert failed(result) == {"runs"}
    assert item(result, "runs").message.startswith(f"call 3 of {CALLS}: ")
    assert "third time unlucky" in item(result, "runs").message


def test_a_result_that_is_not_bytes_fails_results():
    def roundtrip(acl, payload, chunk, stream):
        return list(SOLUTIONS.roundtrip(acl, payload, chunk, stream))

    result = check("02.fix_leak", roundtrip)
    assert {"results", "round trip"} <= failed(result) and result.score == 0
    assert "a list, not bytes" in item(result, "results").message


# -- robustness --------------------------------------------------------------------------------

def test_settings_and_the_learners_runtime_are_restored(fresh):
    from acllab import acl

    acllab.configure(hugepage_pool_bytes=0, strict=True)
    runtime = acllab.current_runtime()
    acl.init()
    acl.rt.set_device(0)
    ptr, _ = acl.rt.malloc(1000, NORMAL)
    settings = dict(session._settings)

    assert check("02.fit_budget", SOLUTIONS.allocate).passed
    assert check("02.fix_leak", SOLUTIONS.roundtrip).passed
    check("02.fix_leak", roundtrip_leaky)

    assert session._settings == settings
    assert acllab.current_runtime() is runtime
    assert runtime.devices[0].heap.huge_total == 0
    assert acl.rt.free(ptr) == 0                       # the learner's block is still there


# -- grades that mean something (issue 7): the score of every class of wrong answer -------------

@pytest.mark.parametrize("exercise_id, function", EXERCISES)
def test_an_empty_function_scores_zero(exercise_id, function):
    for fn in (lambda *a: None, lambda *a: 0, lambda *a: []):
        result = check(exercise_id, fn)
        assert result.status == "failed" and result.score == 0, str(result)


def test_which_items_are_results_and_which_are_process():
    kinds = {ex: {i.name: i.kind for i in check(ex, getattr(SOLUTIONS, fn)).items}
             for ex, fn in EXERCISES}
    assert kinds["02.fit_budget"] == {"runs": "result", "buffers": "result",
                                      "huge pages": "result", "again": "result",
                                      "resources": "process"}
    assert kinds["02.fix_leak"] == {"runs": "result", "results": "result",
                                    "round trip": "result", "chunks": "result",
                                    "freed": "result", "flat": "result",
                                    "sanitizer": "process", "resources": "result"}


def allocate_made_up_addresses(acl, sizes):
    return [0x12C0_0000_0000 + i * 8 * MiB for i in range(len(sizes))]


def allocate_relabels_the_pages(acl, sizes):
    """Normal pages for everything, then the blocks are marked 'huge' by hand."""
    ptrs = [acl.rt.malloc(s, NORMAL)[0] for s in sizes]
    heap = acllab.current_runtime().devices[0].heap
    for ptr, size in zip(ptrs, sizes, strict=True):
        if size >= HUGE_PAGE:
            heap.live[ptr].page = "huge"
    return ptrs


def allocate_relabels_and_books_the_pages(acl, sizes):
    """As above, and the pool's count of pages handed out is booked to match."""
    ptrs = allocate_relabels_the_pages(acl, sizes)
    heap = acllab.current_runtime().devices[0].heap
    heap.huge_held = sum(b.reserved for b in heap.live.values() if b.page == "huge")
    return ptrs


def allocate_on_another_device(acl, sizes):
    acl.rt.set_device(1)
    ptrs = SOLUTIONS.allocate(acl, sizes)
    acl.rt.set_device(0)
    return ptrs


def allocate_pinned_host_memory(acl, sizes):
    return [acl.rt.malloc_host(s)[0] for s in sizes]


def allocate_one_block_for_all(acl, sizes):
    total = sum(-(-s // 64) * 64 for s in sizes)
    base, _ = acl.rt.malloc(total, ONLY)
    out, at = [], base
    for s in sizes:
        out.append(at)
        at += -(-s // 64) * 64
    return out


@pytest.mark.parametrize("fn, name", [
    (allocate_made_up_addresses, "buffers"),
    (allocate_relabels_the_pages, "huge pages"),
    (allocate_relabels_and_books_the_pages, "huge pages"),
    (allocate_on_another_device, "buffers"),
    (allocate_pinned_host_memory, "buffers"),
    (allocate_one_block_for_all, "buffers"),
], ids=lambda v: getattr(v, "__name__", "")[9:] or None)
def test_allocations_the_device_did_not_make_score_zero(fn, name):
    result = check("02.fit_budget", fn)
    assert name in failed(result) and result.score == 0, str(result)


def test_relabelled_pages_are_called_what_they_are():
    message = item(check("02.fit_budget", allocate_relabels_the_pages), "huge pages").message
    assert "do not add up" in message


def roundtrip_host_copy(acl, payload, chunk, stream):
    return bytes(bytearray(payload))


def roundtrip_one_chunk_then_host_copy(acl, payload, chunk, stream):
    """Sends one chunk there and back, and returns a host copy of the payload."""
    m = min(chunk, len(payload))
    host, _ = acl.rt.malloc_host(m)
    dev, _ = acl.rt.malloc(chunk, NORMAL)
    acl.rt.memcpy(host, m, acl.util.bytes_to_ptr(payload), m, H2H)
    acl.rt.memcpy_async(dev, chunk, host, m, H2D, stream)
    acl.rt.memcpy_async(host, m, dev, m, D2H, stream)
    acl.rt.synchronize_stream(stream)
    acl.rt.free(dev)
    acl.rt.free_host(host)
    return bytes(bytearray(payload))


def roundtrip_patches_on_the_host(acl, payload, chunk, stream):
    """Round-trips the bytes, then writes the payload into the host buffer by hand."""
    n = len(payload)
    data = SOLUTIONS.roundtrip(acl, bytes(n), chunk, stream)        # zeros through the device
    out = bytearray(data)
    out[:] = payload
    return bytes(out)


def roundtrip_returns_before_the_copies_end(acl, payload, chunk, stream):
    """Queues everything and returns a host copy, never waiting for the copies."""
    n = len(payload)
    host_in, _ = acl.rt.malloc_host(n)
    host_out, _ = acl.rt.malloc_host(n)
    acl.rt.memcpy(host_in, n, acl.util.bytes_to_ptr(payload), n, H2H)
    dev, _ = acl.rt.malloc(chunk, NORMAL)
    for lo in range(0, n, chunk):
        m = min(chunk, n - lo)
        acl.rt.memcpy_async(dev, chunk, host_in + lo, m, H2D, stream)
        acl.rt.memcpy_async(host_out + lo, m, dev, m, D2H, stream)
    return bytes(bytearray(payload))


def test_a_copy_taken_once_the_round_trip_is_over_counts_as_its_bytes():
    """The same bytes, taken from the payload after the device delivered them: the device did
    the work, and bytes are bytes."""
    def roundtrip(acl, payload, chunk, stream):
        SOLUTIONS.roundtrip(acl, payload, chunk, stream)
        return bytes(bytearray(payload))

    assert check("02.fix_leak", roundtrip).passed


def roundtrip_returns_the_payload(acl, payload, chunk, stream):
    SOLUTIONS.roundtrip(acl, payload, chunk, stream)
    return payload


@pytest.mark.parametrize("fn, why", [
    (roundtrip_host_copy, "never came back from the device"),
    (roundtrip_one_chunk_then_host_copy, "not the bytes that the device-to-host copies wrote"),
    (roundtrip_patches_on_the_host, "not the bytes that the device-to-host copies wrote"),
    (roundtrip_returns_before_the_copies_end, "not the bytes that the device-to-host copies"),
    (roundtrip_returns_the_payload, "very payload object"),
], ids=lambda v: getattr(v, "__name__", "")[10:] or None)
def test_host_side_roundtrips_score_zero_though_the_bytes_are_right(fn, why):
    result = check("02.fix_leak", fn)
    assert item(result, "results").passed
    assert "round trip" in failed(result) and result.score == 0
    assert why in item(result, "round trip").message


def roundtrip_in_one_piece(acl, payload, chunk, stream):
    return SOLUTIONS.roundtrip(acl, payload, len(payload), stream)      # chunk ignored


def roundtrip_blocking_copies(acl, payload, chunk, stream):
    n = len(payload)
    out = bytearray(n)
    dev, _ = acl.rt.malloc(chunk, NORMAL)
    for lo in range(0, n, chunk):
        m = min(chunk, n - lo)
        acl.rt.memcpy(dev, chunk, acl.util.bytes_to_ptr(payload) + lo, m, H2D)
        acl.rt.memcpy(acl.util.bytes_to_ptr(out) + lo, n - lo, dev, m, D2H)
    acl.rt.free(dev)
    return bytes(out)


def roundtrip_on_its_own_stream(acl, payload, chunk, stream):
    mine, _ = acl.rt.create_stream()
    data = SOLUTIONS.roundtrip(acl, payload, chunk, mine)
    acl.rt.destroy_stream(mine)
    return data


def roundtrip_on_the_default_stream(acl, payload, chunk, stream):
    return SOLUTIONS.roundtrip(acl, payload, chunk, 0)


def roundtrip_way_back_on_another_stream(acl, payload, chunk, stream):
    """A racy variant: the D2H copies on a second stream, with no event to order them."""
    n = len(payload)
    other, _ = acl.rt.create_stream()
    host_in, _ = acl.rt.malloc_host(n)
    host_out, _ = acl.rt.malloc_host(n)
    acl.rt.memcpy(host_in, n, acl.util.bytes_to_ptr(payload), n, H2H)
    dev, _ = acl.rt.malloc(n, NORMAL)
    for lo in range(0, n, chunk):
        m = min(chunk, n - lo)
        acl.rt.memcpy_async(dev + lo, n - lo, host_in + lo, m, H2D, stream)
        acl.rt.memcpy_async(host_out + lo, n - lo, dev + lo, m, D2H, other)
    acl.rt.synchronize_stream(stream)
    acl.rt.synchronize_stream(other)
    data = acl.util.ptr_to_bytes(host_out, n)
    acl.rt.free(dev)
    acl.rt.free_host(host_in)
    acl.rt.free_host(host_out)
    acl.rt.destroy_stream(other)
    return data


@pytest.mark.parametrize("fn, why", [
    (roundtrip_in_one_piece, "more than chunk"),
    (roundtrip_blocking_copies, "not from acl.rt.memcpy_async"),
    (roundtrip_on_its_own_stream, "not on the caller's stream"),
    (roundtrip_on_the_default_stream, "not on the caller's stream"),
    (roundtrip_way_back_on_another_stream, ""),
], ids=lambda v: getattr(v, "__name__", "")[10:] or None)
def test_roundtrips_that_deviate_from_the_statement_score_zero(fn, why):
    result = check("02.fix_leak", fn)
    assert result.score == 0, str(result)
    if why:
        assert failed(result) == {"chunks"} or "chunks" in failed(result)
        assert why in item(result, "chunks").message


def test_calling_the_graders_helpers_fails_own_work():
    import acllab.checks.lesson00 as tour
    import acllab.checks.lesson02 as grader

    def allocate(acl, sizes):
        ptrs = []
        for s in sizes:
            fits = grader.huge_pages_needed(s) * HUGE_PAGE
            ptrs.append(acl.rt.malloc_align32(s, ONLY if s >= HUGE_PAGE and fits else NORMAL)[0])
        return ptrs

    def allocate_asks_for_the_case(acl, sizes):
        try:
            grader.fit_budget_case(0)
        except Exception:               # noqa: BLE001 - hides the refusal: still caught
            pass
        return SOLUTIONS.allocate(acl, sizes)

    def roundtrip(acl, payload, chunk, stream):
        data = SOLUTIONS.roundtrip(acl, payload, chunk, stream)
        tour.trace_round_trip(None, data, 0, 0)
        return data

    for exercise_id, fn in (("02.fit_budget", allocate),
                            ("02.fit_budget", allocate_asks_for_the_case),
                            ("02.fix_leak", roundtrip)):
        result = check(exercise_id, fn)
        assert failed(result) == {"own work"} and result.score == 0
        assert "belongs to the grader" in item(result, "own work").message


def test_tampering_with_the_check_fails_and_is_undone():
    import acllab.checks._common as common
    import acllab.checks.lesson02 as grader
    from acllab.analysis import sanitizer
    from acllab.checks import Item

    saved = (sanitizer.analyze, grader.CALLS, grader._freed_item, grader._placement_item)

    def one_call_only(acl, payload, chunk, stream):
        grader.CALLS = 1
        return roundtrip_leaky(acl, payload, chunk, stream)

    def silences_the_sanitizer(acl, payload, chunk, stream):
        common.sanitizer.analyze = lambda rt: []
        return roundtrip_frees_in_the_loop(acl, payload, chunk, stream)

    def passes_freed(acl, payload, chunk, stream):
        grader._freed_item = lambda views, calls: Item("freed", True, "fine")
        return roundtrip_leaky(acl, payload, chunk, stream)

    def erases_its_copies(acl, payload, chunk, stream):
        data = SOLUTIONS.roundtrip(acl, payload, chunk, stream)
        del acllab.current_runtime().engine.tasks[-2:]
        return data

    def passes_placement(acl, sizes):
        grader._placement_item = lambda *a: Item("huge pages", True, "fine")
        return allocate_huge_first(acl, sizes)

    for exercise_id, fn in (("02.fix_leak", one_call_only),
                            ("02.fix_leak", silences_the_sanitizer),
                            ("02.fix_leak", passes_freed),
                            ("02.fix_leak", erases_its_copies),
                            ("02.fit_budget", passes_placement)):
        result = check(exercise_id, fn)
        assert failed(result) == {"acllab unchanged"} and result.score == 0, fn.__name__
    assert (sanitizer.analyze, grader.CALLS, grader._freed_item,
            grader._placement_item) == saved
    assert failed(check("02.fix_leak", roundtrip_frees_in_the_loop)) == {"sanitizer"}
    assert check("02.fit_budget", allocate_huge_first).score == 0


# Hangs and SystemExit end the case with score 0: tests/test_checks_guard.py, for every
# exercise.


def test_a_hang_on_a_later_call_still_ends_the_case():
    import time

    calls = []

    def roundtrip(acl, payload, chunk, stream):
        calls.append(1)
        if len(calls) == 5:
            time.sleep(100)
        return SOLUTIONS.roundtrip(acl, payload, chunk, stream)

    result = check("02.fix_leak", roundtrip, seeds=(0,), limit_s=1)
    assert failed(result) == {"runs"} and result.score == 0


def allocate_by_page_kind(acl, sizes):
    """Big ones first with HUGE_ONLY and exact rounding; the rest never ask for huge pages."""
    order = sorted(range(len(sizes)), key=lambda i: sizes[i] < HUGE_PAGE)
    out = [0] * len(sizes)
    for i in order:
        size = sizes[i]
        if size >= HUGE_PAGE:
            ptr, ret = acl.rt.malloc_align32(size, ONLY)
        elif size > MiB:
            ptr, ret = acl.rt.malloc(size, NORMAL)
        else:
            ptr, ret = acl.rt.malloc(size, FIRST)        # 1 MiB or less: normal pages anyway
        if ret:
            raise MemoryError(ret)
        out[i] = ptr
    return out


def allocate_rounding_by_hand(acl, sizes):
    """Plain malloc for big buffers whose extra 32 bytes still fit their last page."""
    ptrs = []
    for size in sizes:
        if size >= HUGE_PAGE:
            spare = -size % HUGE_PAGE
            call = acl.rt.malloc if spare >= 64 else acl.rt.malloc_align32
            ptr, _ = call(size, ONLY)
        else:
            ptr, _ = acl.rt.malloc_align32(size, NORMAL)
        ptrs.append(ptr)
    return ptrs


def roundtrip_double_buffered(acl, payload, chunk, stream):
    """Two device buffers in turn, one pinned buffer for both ways."""
    n = len(payload)
    host, _ = acl.rt.malloc_host(n)
    acl.rt.memcpy(host, n, acl.util.bytes_to_ptr(payload), n, H2H)
    bufs = [acl.rt.malloc(chunk, FIRST)[0] for _ in range(2)]
    for k, lo in enumerate(range(0, n, chunk)):
        m = min(chunk, n - lo)
        dev = bufs[k % 2]
        acl.rt.memcpy_async(dev, chunk, host + lo, m, H2D, stream)
        acl.rt.memcpy_async(host + lo, m, dev, m, D2H, stream)
    acl.rt.synchronize_stream(stream)
    out = acl.util.ptr_to_bytes(host, n)
    for dev in bufs:
        acl.rt.free(dev)
    acl.rt.free_host(host)
    return out


def roundtrip_whole_device_buffer(acl, payload, chunk, stream):
    """One device buffer for the whole payload, filled and drained chunk by chunk, last first."""
    n = len(payload)
    src, _ = acl.rt.malloc_host(n)
    dst, _ = acl.rt.malloc_host(n)
    acl.util.ptr_to_numpy  # noqa: B018 - the learner looks around
    acl.rt.memcpy(src, n, acl.util.bytes_to_ptr(payload), n, H2H)
    dev, _ = acl.rt.malloc_align32(n, NORMAL)
    starts = list(range(0, n, chunk))[::-1]
    for lo in starts:
        acl.rt.memcpy_async(dev + lo, n - lo, src + lo, min(chunk, n - lo), H2D, stream)
    for lo in starts:
        acl.rt.memcpy_async(dst + lo, n - lo, dev + lo, min(chunk, n - lo), D2H, stream)
    acl.rt.synchronize_stream(stream)
    result = acl.util.ptr_to_bytes(dst, n)
    acl.rt.free(dev)
    acl.rt.free_host(src)
    acl.rt.free_host(dst)
    return result


@pytest.mark.parametrize("exercise_id, fn", [
    ("02.fit_budget", allocate_by_page_kind), ("02.fit_budget", allocate_rounding_by_hand),
    ("02.fix_leak", roundtrip_double_buffered), ("02.fix_leak", roundtrip_whole_device_buffer),
], ids=lambda v: getattr(v, "__name__", v))
def test_correct_variants_unlike_the_reference_pass(exercise_id, fn):
    result = check(exercise_id, fn, seeds=range(6))
    assert result.passed and result.score == 1, str(result)


def test_hiding_leaked_blocks_from_the_heap_is_caught():
    def roundtrip(acl, payload, chunk, stream):
        data = roundtrip_leaky(acl, payload, chunk, stream)
        heap = acllab.current_runtime().devices[0].heap
        heap.live.clear()                               # out of sight, still held
        return data

    result = check("02.fix_leak", roundtrip)
    assert failed(result) == {"acllab unchanged"} and result.score == 0
    assert "do not add up" in item(result, "acllab unchanged").message


# -- 02.fit_budget: the second call in the same runtime -----------------------------------------

def test_an_allocate_that_hands_out_its_first_buffers_again_fails_again():
    kept = {}

    def allocate(acl, sizes):
        key = tuple(sorted(sizes))
        if key not in kept:
            kept[key] = dict(zip(sizes, SOLUTIONS.allocate(acl, sizes), strict=False))
        return [kept[key][s] for s in sizes]            # the first call's (freed) buffers

    result = check("02.fit_budget", allocate)
    assert result.score == 0 and failed(result) == {"again"}, str(result)
    assert item(result, "again").kind == "result"


def test_an_allocate_that_answers_in_the_first_calls_order_fails_again():
    first = {}

    def allocate(acl, sizes):
        order = first.setdefault(len(sizes), list(sizes))       # the order it saw first
        return SOLUTIONS.allocate(acl, order)

    result = check("02.fit_budget", allocate)
    assert result.score == 0 and failed(result) == {"again"}, str(result)
    assert "in another order" in item(result, "again").message


def test_the_reference_allocate_passes_the_second_call():
    result = check("02.fit_budget", SOLUTIONS.allocate)
    assert item(result, "again").passed and "fitted them again" in item(result, "again").message
