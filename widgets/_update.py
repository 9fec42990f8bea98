"""Redraw a figure by sending only what changed: :func:`update_in_place`.

The widgets keep one FigureWidget each and redraw it with new values. Assigning them through
plotly's property classes (``fig.data[0].x = ...``, ``fig.update(..., overwrite=True)``)
re-validates every value (each colour of a colour array, the whole template) and, with
``overwrite``, resends every trace: for a figure of a few hundred bars that costs tens of
milliseconds in Python and a message of hundreds of kilobytes, each time. This module compares
the new values with those the figure holds and sends the differences in one ``plotly_update``
message (one ``Plotly.react`` in the browser), as plotly.js's ``Plotly.update`` does, without
re-validation. It needs plotly only (no ipywidgets, no anywidget), like the figures' static side.
"""

from __future__ import annotations

from plotly.basedatatypes import Undefined

__all__ = ["update_in_place"]

# layout properties that are lists of objects: plotly's Python side caches one object per item,
# so a list that changes length is assigned (validated); items of a list of the same length are
# edited in place, property by property ("shapes[2].x0")
_LAYOUT_ARRAYS = frozenset({"annotations", "shapes", "images", "sliders", "updatemenus",
                            "selections"})
_MISSING = object()


def _same(a, b) -> bool:
    if a is b:
        return True
    try:
        same = a == b
    except Exception:          # noqa: BLE001 - values that do not compare are different
        return False
    return same if isinstance(same, bool) else False


def _lookup(node, path: tuple):
    for key in path:
        try:
            node = node[key]
        except (KeyError, IndexError, TypeError):
            return _MISSING
    return node


def _flatten(prefix: str, value, out: dict) -> None:
    """``value`` (a dict) as dotted paths below ``prefix``: {"line": {"width": 1}} -> line.width."""
    for key, v in value.items():
        path = f"{prefix}.{key}"
        if isinstance(v, dict) and v:
            _flatten(path, v, out)
        else:
            out[path] = v


def _layout_changes(fig, layout: dict) -> tuple[dict, dict]:
    """(edits plotly_update can make, whole lists of objects to assign) that differ."""
    current = fig._layout
    edits, assign = {}, {}
    for path, value in layout.items():
        keys = fig._str_to_dict_path(path)
        old = _lookup(current, keys)
        if _same(old, value if value is not None else _MISSING):
            continue
        if old is _MISSING and value is None:
            continue
        if len(keys) == 1 and keys[0] in _LAYOUT_ARRAYS:
            new = list(value or ())
            old = list(old) if isinstance(old, (list, tuple)) else []
            if len(new) != len(old) or not all(isinstance(x, dict) for x in new):
                assign[path] = new
                continue
            for i, (was, item) in enumerate(zip(old, new, strict=True)):
                flat_new, flat_old = {}, {}
                _flatten(f"{path}[{i}]", item, flat_new)
                _flatten(f"{path}[{i}]", was if isinstance(was, dict) else {}, flat_old)
                for p, v in flat_new.items():
                    if not _same(flat_old.get(p, _MISSING), v):
                        edits[p] = v
                edits.update({p: None for p in flat_old if p not in flat_new})
            continue
        edits[path] = value
    return edits, assign


def update_in_place(fig, data: list[dict] | None = None, layout: dict | None = None) -> None:
    """Show new values in ``fig``, sending only the ones that changed, in one update message.

    ``data`` gives, per trace (``fig.data``'s order; ``None`` leaves a trace alone), property
    paths ("x", "marker.color") to their new values; ``layout`` gives layout paths
    ("xaxis.range", "title.text", "shapes") to theirs; ``None`` removes a property. Values equal
    to what the figure holds are not sent. Values are plain JSON as a figure's
    ``to_plotly_json()`` holds them (lists, numbers, strings, dicts): like plotly.js's
    ``Plotly.update`` (and ``plotly_update``), they are not re-validated. A list of layout
    objects (shapes, annotations) of a new length is assigned (validated) in a second message.
    """
    changes = []
    for index, props in enumerate(data or ()):
        current = fig._data[index]
        changed = {p: v for p, v in (props or {}).items()
                   if not _same(_lookup(current, fig._str_to_dict_path(p)), v)}
        if changed:
            changes.append((index, changed))
    traces = [index for index, _ in changes]
    restyle = {p: [changed.get(p, Undefined) for _, changed in changes]
               for p in dict.fromkeys(p for _, changed in changes for p in changed)}
    edits, assign = _layout_changes(fig, layout or {})
    if restyle or edits:
        fig.plotly_update(restyle_data=restyle, relayout_data=edits, trace_indexes=traces)
    if assign:
        with fig.batch_update():
            for path, value in assign.items():
                fig.layout[path] = value

