"""acllab.checks.lesson11: the reference service passes, the placeholder is "not done", and each
known-wrong service fails the item that should catch it.

The wrong services are one choice away from the reference: the seed's serial loop, lesson 06's
pipeline that waits for each batch before queuing the next, the dynamic model, pageable host
memory, one slot for everything, a slot per batch, and a model left loaded.
"""

from __future__ import annotations

import pytest
from checks_support import failed, item, load_solutions

from acllab.checks import check, exercises, lesson11
from acllab.constants import ACL_MEM_MALLOC_HUGE_FIRST, ACL_MEM_MALLOC_NORMAL_ONLY
from acllab.constants import ACL_MEMCPY_DEVICE_TO_HOST as D2H
from acllab.constants import ACL_MEMCPY_HOST_TO_DEVICE as H2D

SOLUTIONS = load_solutions("11")


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
    assert [i.name for i in result.items] == ["runs", "results", "throughput", "memory",
                                              "sanitizer", "resources"]


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


def test_the_references_are_what_the_goals_measure():
    """The serial service is slow, the best one has room above the serial goal."""
    for seed in range(3):
        serial_ns, serial_bytes = lesson11._reference(seed, "serial")
        best_ns, best_bytes = lesson11._reference(seed, "best")
        assert serial_ns / best_ns >= lesson11.SERIAL_GOAL + 0.3
        assert serial_bytes < best_bytes <= lesson11._budget(seed)


def test_the_check_never_shows_the_scores():
    result = check("11.service", make_service(slots=1), seeds=(0,))
    scores = lesson11._scores(0)
    text = str(result)
    assert f"{float(scores[0][0]):.4f}" not in text


# -- known-wrong services ----------------------------------------------------------------------

def test_the_serial_service_is_too_slow():
    result = check("11.service", lesson11.serial_service, seeds=(0,))
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
    assert "fixed model" in item(result, "throughput").hint


def test_pageable_host_memory_blocks_the_async_copies():
    result = check("11.service", make_service(pinned=False), seeds=(0,))
    assert {"throughput", "sanitizer"} <= failed(result), str(result)
    assert "pageable" in item(result, "sanitizer").message


def test_one_slot_for_every_batch_in_flight_races():
    result = check("11.service", make_service(slots=1), seeds=(0,))
    assert {"results", "sanitizer"} <= failed(result), str(result)


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
