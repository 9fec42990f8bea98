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
    assert 0 < result.score < 1 and item(result, "sanitizer").kind == "process"
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
