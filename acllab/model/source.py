"""Where a graph comes from: a :class:`~acllab.model.graph.Graph`, a JSON dict or file in
the graph schema (:mod:`acllab.model.graph`), or a built-in model of the zoo ('zoo:NAME').

It sits above both :mod:`~acllab.model.graph` and :mod:`~acllab.model.zoo` (the zoo builds
its models as graphs), so neither imports the other's way round.
"""

from __future__ import annotations

import json
from pathlib import Path

from . import zoo
from .graph import Graph, GraphError

__all__ = ["load_graph"]


def load_graph(source: str | Path | dict | Graph) -> Graph:
    """A graph from a Graph, a JSON dict, a JSON file path, or a built-in 'zoo:NAME'."""
    if isinstance(source, Graph):
        return source
    if isinstance(source, dict):
        return Graph.from_dict(source)
    text = str(source)
    if text.startswith("zoo:"):
        return zoo.build(text[4:])
    path = Path(text)
    try:
        raw = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise GraphError(f"cannot read graph file {text!r}: {exc.strerror or exc}") from None
    try:
        data = json.loads(raw)
    except ValueError as exc:
        raise GraphError(f"graph file {text!r} is not valid JSON: {exc}") from None
    if not isinstance(data, dict):
        raise GraphError(f"graph file {text!r} must hold a JSON object")
    return Graph.from_dict(data)
