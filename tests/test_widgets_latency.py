"""What a widget's redraw sends: only the values that changed, in one update message.

Structure only (no timings: tests/test_browser_lessons.py checks the drawing, and
benchmarks/bench_browser.py measures the latency).
"""

import plotly.graph_objects as go
import pytest

pytest.importorskip("anywidget")

from widgets._display import figure_widget  # noqa: E402
from widgets._update import update_in_place  # noqa: E402


def _recorded(fig):
    sent = []
    fig._send_update_msg = lambda restyle_data, relayout_data, trace_indexes=None, **_: \
        sent.append((restyle_data, relayout_data, trace_indexes))
    return sent


def _traces(fig) -> list[dict]:
    return [{k: v for k, v in t.to_plotly_json().items() if k != "uid"} for t in fig.data]


def _figure():
    return figure_widget(go.Figure(
        [go.Bar(y=[1, 2], name="a"), go.Bar(y=[3, 4], name="b")],
        layout={"title": {"text": "t"}, "xaxis": {"range": [0, 1]},
                "shapes": [{"type": "line", "x0": 1, "x1": 1, "line": {"color": "red"}}]}))


def test_only_the_changed_values_go_in_one_message():
    fig = _figure()
    sent = _recorded(fig)
    update_in_place(fig, [{"y": [1, 2]}, {"y": [5, 6]}],
                    {"title.text": "t", "xaxis.range": [0, 3],
                     "shapes": [{"type": "line", "x0": 2, "x1": 2, "line": {"color": "red"}}]})
    assert len(sent) == 1
    restyle, relayout, traces = sent[0]
    assert traces == [1] and restyle == {"y": [[5, 6]]}
    assert relayout == {"xaxis.range": [0, 3], "shapes[0].x0": 2, "shapes[0].x1": 2}
    assert fig.data[1].y == (5, 6) and fig.layout.shapes[0].x0 == 2
    update_in_place(fig, [{"y": [1, 2]}, {"y": [5, 6]}], {"xaxis.range": [0, 3]})
    assert len(sent) == 1                      # nothing changed: nothing sent


def test_a_list_of_shapes_of_a_new_length_is_assigned():
    fig = _figure()
    update_in_place(fig, None, {"shapes": [{"type": "line", "x0": 2}, {"type": "line", "x0": 3}],
                                "title.text": None})
    assert [s.x0 for s in fig.layout.shapes] == [2, 3] and fig.layout.title.text is None


def test_stream_stepper_moves_its_cursor_in_one_small_message(fresh):
    from acllab import acl
    from acllab.constants import ACL_MEM_MALLOC_HUGE_FIRST, ACL_MEMCPY_HOST_TO_DEVICE
    from widgets.stream_stepper import StreamStepper

    acl.init()
    acl.rt.set_device(0)
    stream, _ = acl.rt.create_stream()
    dev, _ = acl.rt.malloc(1 << 20, ACL_MEM_MALLOC_HUGE_FIRST)
    src, _ = acl.rt.malloc_host(1 << 20)
    for _ in range(2):
        acl.rt.memcpy_async(dev, 1 << 20, src, 1 << 20, ACL_MEMCPY_HOST_TO_DEVICE, stream)
    st = StreamStepper()
    st.widget()
    sent = _recorded(st._fig)
    st.step(1)
    assert len(sent) == 1
    restyle, relayout, _ = sent[0]
    assert not restyle and set(relayout) <= {"shapes[0].x0", "shapes[0].x1"}
    acl.rt.memcpy_async(dev, 1 << 20, src, 1 << 20, ACL_MEMCPY_HOST_TO_DEVICE, stream)
    st.refresh()                              # the trace grew: new points, in one message too
    assert len(sent) == 2 and sent[1][0]
    assert _traces(st._fig) == _traces(st.to_figure())


def test_memory_map_switching_device_sends_one_message_matching_a_fresh_figure(fresh):
    import acllab
    from acllab import acl
    from acllab.constants import ACL_MEM_MALLOC_HUGE_FIRST
    from widgets.memory_map import MemoryMap

    card = acllab.configure(hugepage_pool_bytes=32 << 20)
    acl.init()
    acl.rt.set_device(0)
    acl.rt.malloc(3 << 20, ACL_MEM_MALLOC_HUGE_FIRST)
    assert len(card.devices) > 1
    mm = MemoryMap(card)
    mm.view()
    fig = mm.widget()
    sent = _recorded(fig)
    mm.show_device(1)
    assert len(sent) == 1
    fresh = MemoryMap(card, device=1).to_figure()
    assert _traces(fig) == _traces(fresh)
    assert fig.layout.to_plotly_json() == fresh.layout.to_plotly_json()


def test_a_course_figure_reprs_in_one_line_and_prints_whole():
    # ipywidgets puts repr(widget) in every display's text/plain (for each box holding the
    # figure too): plotly's repr pretty-prints every trace first
    from widgets._figure import CourseFigure

    fig = CourseFigure({"data": [{"type": "bar", "x": list(range(500)), "y": [0] * 500}],
                        "layout": {"title": {"text": "copies"}}})
    assert repr(fig) == "<CourseFigure: 1 trace(s), 'copies'>"
    assert str(fig).startswith("CourseFigure({") and "'title': {'text': 'copies'}" in str(fig)
