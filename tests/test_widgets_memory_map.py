"""widgets.memory_map: the layout function, the figure and the widget, headless.

The layout is checked against the heap it comes from (blocks packed per page kind, states,
the free rest); the figure through its trace data in MiB; the widget by setting its controls'
values and reading the FigureWidget's data after refresh.
"""

from __future__ import annotations

import itertools

import plotly.graph_objects as go
import pytest

import acllab
from acllab import acl
from acllab.constants import (
    ACL_DDR_MEM,
    ACL_MEM_MALLOC_HUGE_FIRST,
    ACL_MEM_MALLOC_HUGE_ONLY,
    ACL_MEM_MALLOC_NORMAL_ONLY,
)
from acllab.hardware import HUGE_PAGE, MiB
from widgets.memory_map import (
    COLOURS,
    LEGEND,
    ROWS,
    MemoryMap,
    _mib,
    memory_layout,
    page_map,
)

POOL = 16 * HUGE_PAGE


@pytest.fixture
def card(fresh):
    """A fresh card with a 16-page huge-page pool, device 0 set."""
    runtime = acllab.configure(hugepage_pool_bytes=POOL)
    acl.init()
    acl.rt.set_device(0)
    return runtime


def some_blocks() -> dict[str, int]:
    """A huge block (3 MiB, 2 pages), a tiny HUGE_ONLY one, a normal one and a small one."""
    ptrs = {
        "huge": acl.rt.malloc(3 * MiB, ACL_MEM_MALLOC_HUGE_FIRST)[0],
        "tiny_huge": acl.rt.malloc(1000, ACL_MEM_MALLOC_HUGE_ONLY)[0],
        "normal": acl.rt.malloc(5 * MiB, ACL_MEM_MALLOC_NORMAL_ONLY)[0],
        "small": acl.rt.malloc(100, ACL_MEM_MALLOC_HUGE_FIRST)[0],
    }
    assert all(ptrs.values())
    return ptrs


def trace(fig, key: str, panel: int):
    """The bar trace of one legend entry in panel 1 (huge) or 2 (normal)."""
    found = [t for t in fig.data if t.name == LEGEND[key]]
    assert len(found) == 2, [t.name for t in fig.data]
    return found[panel - 1]


# -- the layout ---------------------------------------------------------------------------------

def test_layout_packs_each_page_kinds_blocks_in_address_order(card):
    ptrs = some_blocks()
    heap = card.devices[0].heap
    lay = memory_layout(heap)
    huge, normal = lay.area("huge"), lay.area("normal")
    assert [b.address for b in huge[:-1]] == [ptrs["huge"], ptrs["tiny_huge"]]
    assert [b.address for b in normal[:-1]] == [ptrs["normal"], ptrs["small"]]
    for area in (huge, normal):
        assert area[0].offset == 0
        assert all(a.end == b.offset for a, b in itertools.pairwise(area))
        assert area[-1].state == "free"
    assert huge[-1].end == POOL and normal[-1].end == heap.normal_total
    assert [b.reserved for b in huge[:-1]] == [2 * HUGE_PAGE, HUGE_PAGE]
    tiny = huge[1]
    assert (tiny.requested, tiny.usable, tiny.policy) == (1000, 1056, ACL_MEM_MALLOC_HUGE_ONLY)
    assert lay.held_bytes("huge") == heap.huge_held == 3 * HUGE_PAGE
    assert lay.held_bytes("normal") == heap.normal_held
    assert (lay.runtime_used_bytes, lay.cached_bytes, lay.driver_held_bytes) == (
        heap.runtime_used_bytes, heap.cached_bytes, heap.driver_held_bytes)


def test_a_freed_block_is_pooled_for_the_runtime_and_still_held_for_the_driver(card):
    ptrs = some_blocks()
    held = card.devices[0].heap.driver_held_bytes
    acl.rt.free(ptrs["huge"])
    lay = memory_layout(card.devices[0].heap)
    first = lay.area("huge")[0]
    assert (first.address, first.state, first.held) == (ptrs["huge"], "pooled", True)
    assert lay.driver_held_bytes == held
    assert lay.count("pooled") == 1 and lay.count("allocated") == 3
    assert "cached block" in first.describe()


def test_model_memory_and_an_empty_heap(card):
    heap = card.devices[0].heap
    lay = memory_layout(heap)
    assert [b.state for b in lay.blocks] == ["free", "free"]
    heap.reserved_bytes = 3 * MiB                  # as a loaded model would hold it
    lay = memory_layout(heap)
    models = [b for b in lay.blocks if b.state == "models"]
    assert len(models) == 1 and models[0].page == "normal" and models[0].reserved == 3 * MiB
    heap.reserved_bytes = 0


def test_page_map_draws_one_character_per_huge_page(card):
    ptrs = some_blocks()
    acl.rt.free(ptrs["tiny_huge"])
    assert page_map(memory_layout(card.devices[0].heap)) == "##+" + "." * 13
    assert page_map(memory_layout(card.devices[0].heap), width=8) == "##+....... (16 pages)"


# -- the figure ---------------------------------------------------------------------------------

def test_figure_has_two_panels_and_bars_in_mib(card):
    ptrs = some_blocks()
    acl.rt.free(ptrs["small"])
    fig = MemoryMap(card).to_figure()
    assert isinstance(fig, go.Figure)
    assert len(fig.data) == 2 * len(COLOURS)
    lay = memory_layout(card.devices[0].heap)

    requested = trace(fig, "requested", 1)      # huge panel, runtime row
    assert list(requested.base) == [0, 4]
    assert list(requested.x) == [3, 1000 / MiB]
    assert set(requested.y) == {ROWS[1]}
    slack = trace(fig, "slack", 1)
    assert list(slack.base) == [3, 4 + 1000 / MiB]
    held = trace(fig, "held", 1)                 # the driver row: whole blocks
    assert list(held.x) == [4, 2] and set(held.y) == {ROWS[0]}

    pooled = trace(fig, "pooled", 2)             # the freed small block, normal panel
    small = next(b for b in lay.area("normal") if b.address == ptrs["small"])
    assert list(pooled.base) == [small.offset / MiB] and set(pooled.y) == {ROWS[1]}
    assert len(trace(fig, "held", 2).x) == 2     # the driver still counts it
    assert "cached block" in pooled.hovertext[0]
    assert "cached 4 KiB" in fig.layout.title.text
    assert "npu-smi: 12 MB" in fig.layout.title.text
    assert "3 of 16 pages" in fig.layout.annotations[0].text


def test_a_small_pool_shows_every_page_with_a_line_between_pages(card):
    some_blocks()
    fig = MemoryMap(card).to_figure()
    assert tuple(fig.layout.xaxis.range) == (0, 32)
    assert len(fig.layout.shapes) == 15
    assert fig.layout.xaxis.title.text == "MiB"
    assert "the first" in fig.layout.xaxis2.title.text   # gigabytes of normal pages: clipped
    assert fig.layout.xaxis2.range[1] < 16


def test_a_large_pool_is_clipped_to_the_part_in_use(fresh):
    acl.init()
    acl.rt.set_device(0)
    acl.rt.malloc(3 * MiB, ACL_MEM_MALLOC_HUGE_FIRST)
    fig = MemoryMap().to_figure()                # the default 4 GiB pool
    assert fig.layout.xaxis.range[1] == 16
    assert "of 4,096 MiB" in fig.layout.xaxis.title.text


# -- the widget ---------------------------------------------------------------------------------

def test_widget_redraws_in_place_after_refresh(card):
    mm = MemoryMap(card)
    fw = mm.widget()
    assert isinstance(fw, go.FigureWidget)
    assert len(trace(fw, "requested", 1).x) == 0
    ptrs = some_blocks()
    assert len(trace(fw, "requested", 1).x) == 0     # nothing changes until refresh()
    mm.refresh()
    assert mm.widget() is fw
    assert len(trace(fw, "requested", 1).x) == 2
    acl.rt.free(ptrs["huge"])
    mm.refresh()
    assert len(trace(fw, "pooled", 1).x) == 1


def test_view_device_picker_button_and_smi(card):
    some_blocks()
    mm = MemoryMap(card)
    view = mm.view()
    assert "device 0" in mm.widget().layout.title.text
    assert "Hugepages-Usage" in mm._smi.value and "3    / 16" in mm._smi.value
    mm._picker.value = 1                         # the dropdown drives the device shown
    assert mm.device == 1
    assert "device 1" in mm.widget().layout.title.text
    assert len(trace(mm.widget(), "requested", 1).x) == 0
    mm._picker.value = 0
    acl.rt.malloc(3 * MiB, ACL_MEM_MALLOC_HUGE_ONLY)
    mm._button.click()                           # the refresh button
    assert len(trace(mm.widget(), "requested", 1).x) == 3
    assert "5    / 16" in mm._smi.value
    assert view.children[-1].children[0] is mm.widget()


def test_follows_the_live_runtime_when_none_is_given(card):
    mm = MemoryMap()
    some_blocks()
    assert len(trace(mm.to_figure(), "requested", 1).x) == 2
    acllab.reset()
    assert len(trace(mm.to_figure(), "requested", 1).x) == 0


def test_snapshot_keeps_the_picture(card):
    ptrs = some_blocks()
    still = MemoryMap(card).snapshot()
    for ptr in ptrs.values():
        acl.rt.free(ptr)
    acl.rt.reset_device(0)
    assert len(trace(still.to_figure(), "requested", 1).x) == 2
    assert "3    / 16" in still.smi()
    assert len(still.view().children) == 1       # no device picker on a still picture
    with pytest.raises(ValueError, match="snapshot"):
        still.show_device(1)


def test_a_device_that_does_not_exist_is_an_error(card):
    with pytest.raises(ValueError, match="device 9 does not exist"):
        MemoryMap(card, device=9).to_figure()


def test_static_fallbacks(card, monkeypatch):
    some_blocks()
    mm = MemoryMap(card)
    text = mm.to_text()
    assert "huge pages [###" in text and "driver-held" in text
    page = mm.to_html()
    assert page.count("<svg") == 1 and "<pre" in page and "npu-smi" in page
    assert page.count("<rect") > 6
    bundle = mm._repr_mimebundle_()
    assert "application/vnd.jupyter.widget-view+json" in bundle
    assert bundle["text/html"] == page and bundle["text/plain"] == text
    assert "image/svg+xml" not in bundle     # notebooks count static SVGs for timelines only

    def broken():
        raise ImportError("no widget front end (anywidget)")

    plain = MemoryMap(card)
    monkeypatch.setattr(plain, "view", broken)
    assert set(plain._repr_mimebundle_()) == {"text/html", "text/plain"}


def test_shown_again_it_shows_the_heap_as_it_is_now(card):
    mm = MemoryMap(card)
    mm._repr_mimebundle_()
    some_blocks()
    mm._repr_mimebundle_()
    assert len(trace(mm.widget(), "requested", 1).x) == 2


def test_live_without_a_kernel_does_nothing(card):
    mm = MemoryMap(card, live=True)
    assert mm._hook is None
    mm.stop()


def test_status_matches_get_mem_info_after_each_change_and_refresh_says_so(card):
    mm = MemoryMap(card)
    mm.view()
    labels = [label for label, _ in mm._picker.options]
    assert labels[0] == "device 0" and mm._picker.style.description_width == "40px"

    def mem_info_text() -> str:
        free, total = acl.rt.get_mem_info(ACL_DDR_MEM)[:2]
        return f"{_mib(free)} free of {_mib(total)}"

    assert mem_info_text() in mm._status.value
    some_blocks()
    mm._button.click()
    assert "refreshed" in mm._status.value and mem_info_text() in mm._status.value
    assert "3 MiB" in mm.widget().layout.title.text or "MiB" in mm.widget().layout.title.text
    mm._picker.value = 1
    assert "device 1" in mm._status.value and "not open now" in mm._status.value
    assert "device 1" in mm.widget().layout.title.text
    mm._picker.value = 0
    assert mem_info_text() in mm._status.value and "device 0" in mm._status.value


def keyed(fig) -> dict[str, int]:
    """Per colour drawn, how many legend entries it has."""
    drawn = {}
    for t in fig.data:
        if len(t.x):
            drawn.setdefault(t.marker.color, 0)
    for t in fig.data:
        if t.showlegend is not False and len(t.x):
            drawn[t.marker.color] = drawn.get(t.marker.color, 0) + 1
    return drawn


@pytest.mark.parametrize("policy", [ACL_MEM_MALLOC_NORMAL_ONLY, ACL_MEM_MALLOC_HUGE_ONLY])
def test_every_colour_drawn_has_one_key_entry_whichever_panel_draws_it(card, policy):
    """A block in normal pages only (nothing in huge pages) is drawn in the lower panel; its
    colours had no key entry when the key came from the upper panel's traces alone."""
    mm = MemoryMap(card)
    fw = mm.widget()
    ptr, _ = acl.rt.malloc(5 * MiB + 100, policy)
    for fig in (mm.to_figure(), fw):
        if fig is fw:
            mm.refresh()
        entries = keyed(fig)
        assert COLOURS["requested"] in entries and COLOURS["slack"] in entries
        assert set(entries.values()) == {1}, entries          # one entry each, no more
    acl.rt.free(ptr)                                          # now a cached block
    mm.refresh()
    entries = keyed(fw)
    assert COLOURS["pooled"] in entries and COLOURS["requested"] not in entries
    assert set(entries.values()) == {1}, entries
