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
    ACL_MEMCPY_DEVICE_TO_DEVICE,
    ACL_MEMCPY_DEVICE_TO_HOST,
    ACL_MEMCPY_HOST_TO_DEVICE,
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
    assert [i.name for i in result.items] == ["runs", "result", "round trip", "sanitizer",
                                              "resources"]


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
    message = item(result, "resources").message
    assert "never freed" in message and "device" in message
    assert "acl.rt.free" in item(result, "resources").hint


def test_returning_the_input_fails_the_round_trip():
    result = check("00.tour", first_copy_echo)
    assert failed(result) == {"round trip"}
    assert "very bytes object" in item(result, "round trip").message


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
    assert failed(result) == {"resources"}
    assert "reset the device or finalised" in item(result, "resources").message


def test_wrong_types_and_lengths_fail_the_result():
    assert failed(check("00.tour", lambda acl, data: list(SOLUTIONS.first_copy(acl, data)))) \
        == {"result"}
    short = check("00.tour", lambda acl, data: SOLUTIONS.first_copy(acl, data)[:-1])
    assert failed(short) == {"result"}
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
