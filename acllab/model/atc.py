"""An atc-like offline compiler: graph + flags -> :class:`CompiledModel` (and an .om file).

Python form::

    compile_model("zoo:resnet50", input_shape="data:-1,3,224,224",
                  dynamic_batch_size="1,2,4,8,16,32", soc_version="Ascend310")

Command-line form (``acllab atc``), with the real tool's flag names::

    atc --model=zoo:resnet50 --framework=5 --output=resnet50_b32 \\
        --input_shape="data:32,3,224,224" --soc_version=Ascend310 --log=info

Flag rules, as atc enforces them: ``--dynamic_batch_size``, ``--dynamic_image_size`` and
``--dynamic_dims`` are mutually exclusive and need ``--input_shape``; each takes 2 to 100
gears; the dynamic dims must be -1 in ``--input_shape`` (N for batch, H and W for image size,
any dims for ``--dynamic_dims``) and no other dim may be -1. ``--dynamic_dims`` (ND gears)
needs ``--input_format ND`` and does not combine with ``--insert_op_conf``; each of its gears
gives one value per -1 of ``--input_shape``, input after input in that flag's order (CANN
documentation, "ATC parameters: --dynamic_dims", in hicann/ge
docs/zh/user_guides/atc_tools/CLI_options/--dynamic_dims.md). ``--framework=3``
(TensorFlow) makes NHWC the default ``--input_format``. Static AIPP
(``--insert_op_conf``) combines with ``--dynamic_image_size`` when its source size is 0 and
crop is off (the source is then each gear's image). Errors are :class:`AtcError` whose text
follows atc's layout (``E10001: Value [...] for parameter [--...] is invalid. Reason: ...``).
"""

from __future__ import annotations

import argparse
import json
import sys
from math import prod
from pathlib import Path

from ..hardware import PROFILES, DeviceProfile, get_profile
from .aipp import (
    DYNAMIC_AIPP_NAME,
    AippError,
    DynamicAipp,
    aipp_flops,
    build_config,
    build_dynamic,
    dynamic_data_size,
    parse_aipp,
    source_bytes,
)
from .compiled import DYNAMIC_INPUT_NAME, CompiledModel, MemoryPlan, TensorDesc, gear_key
from .cost import OpPlan, plan_tile, tiling_efficiency
from .graph import DTYPES, Graph, GraphError, TensorSpec
from .passes import fuse, plan_memory
from .source import load_graph

__all__ = ["AtcError", "compile_model", "compile_singleop", "atc_main", "parse_input_shape",
           "parse_gears", "soc_to_profile", "MIN_GEARS", "MAX_GEARS"]

MIN_GEARS, MAX_GEARS = 2, 100


class AtcError(ValueError):
    """atc refused the model or its flags; ``code`` is atc's message id (e.g. 'E10001')."""

    def __init__(self, message: str, code: str = "E10001"):
        self.code = code
        self.message = message
        super().__init__(f"{code}: {message}")


def _bad(param: str, value, reason: str) -> AtcError:
    return AtcError(f"Value [{value}] for parameter [{param}] is invalid. Reason: {reason}")


def soc_to_profile(soc_version: str | None, profile: DeviceProfile | str | None
                   ) -> tuple[str, DeviceProfile]:
    """(soc_version, profile) from either flag: 'Ascend310' <-> the 'ascend310' profile."""
    if profile is not None:
        try:
            prof = get_profile(profile)
        except ValueError as exc:
            raise _bad("--profile", profile, str(exc)) from None
        if soc_version is not None and soc_version.lower() != prof.soc_name.lower():
            raise _bad("--soc_version", soc_version, f"profile {prof.name} is "
                       f"{prof.soc_name}")
        return prof.soc_name, prof
    soc = soc_version or "Ascend310"
    for prof in PROFILES.values():
        if soc.lower() in (prof.soc_name.lower(), prof.name.lower()):
            return prof.soc_name, prof
    known = ", ".join(p.soc_name for p in PROFILES.values())
    raise _bad("--soc_version", soc, f"unsupported SoC; supported: {known}")


def _name_zoo_input(graph: Graph, input_shape, input_fp16_nodes) -> None:
    """A zoo model stands in for a model file exported by some framework, and exporters name
    the input differently (Caffe's ResNet-50 'data', a TensorFlow export 'Placeholder', ONNX
    ones 'input' or 'actual_input_1'): so a one-input zoo model takes the one name that
    --input_shape (or else --input_fp16_nodes) gives it, and a sample's own atc command works
    with only --model changed. Other names, and graphs from files, are checked as atc does.
    Differs from hardware: a real model file has one fixed input name."""
    if len(graph.inputs) != 1:
        return
    names: list[str] = []
    if isinstance(input_shape, str):
        names = [part.strip().rpartition(":")[0]
                 for part in input_shape.strip().strip('"').split(";") if part.strip()]
    elif isinstance(input_fp16_nodes, str):
        names = [n.strip() for n in input_fp16_nodes.split(";") if n.strip()]
    old = graph.inputs[0].name
    if len(names) != 1 or not names[0] or names[0] == old:
        return
    new = names[0]
    if any(new in op.outputs or new == op.name for op in graph.ops) or \
            any(new == t.name for t in graph.outputs):
        return
    graph.inputs = [TensorSpec(new, t.shape, t.dtype, t.format) for t in graph.inputs]
    for op in graph.ops:
        op.inputs = [new if x == old else x for x in op.inputs]
    graph.validate()


def parse_input_shape(text: str | dict, graph: Graph) -> dict[str, tuple[int, ...]]:
    """'data:32,3,224,224;other:1,4' -> {'data': (32, 3, 224, 224), ...}, checked."""
    if isinstance(text, dict):
        items = [(str(k), list(v)) for k, v in text.items()]
    else:
        items = []
        for part in str(text).strip().strip('"').split(";"):
            name, sep, dims = part.strip().rpartition(":")
            if not sep or not name:
                raise _bad("--input_shape", text, 'use "name:n,c,h,w" (several joined by ;)')
            try:
                items.append((name, [int(d) for d in dims.split(",")]))
            except ValueError:
                raise _bad("--input_shape", text, f"dims of {name!r} must be integers") from None
    specs = {t.name: t for t in graph.inputs}
    shapes = {}
    for name, dims in items:
        if name not in specs:
            raise _bad("--input_shape", text, f"the model has no input {name!r}; its inputs "
                       f"are {sorted(specs)}")
        if len(dims) != len(specs[name].shape):
            raise _bad("--input_shape", text, f"{name!r} has {len(specs[name].shape)} dims, "
                       f"got {len(dims)}")
        if any(not isinstance(d, int) or (d < 1 and d != -1) for d in dims):
            raise _bad("--input_shape", text, "every dim must be a positive integer or -1")
        if name in shapes:
            raise _bad("--input_shape", text, f"{name!r} is given twice")
        shapes[name] = tuple(dims)
    return shapes


def parse_gears(text: str | list, kind: str) -> list:
    """'1,2,4,8' -> [1, 2, 4, 8] (kind 'batch'), '224,224;448,448' -> [(224, 224), ...]
    (kind 'hw') or, kind 'dims', '1,16;4,32' -> [(1, 16), (4, 32)]."""
    flag = _FLAGS[kind]
    try:
        if isinstance(text, (list, tuple)):
            raw = [tuple(int(x) for x in g) if kind != "batch" else int(g) for g in text]
        elif kind == "batch":
            raw = [int(x) for x in str(text).strip().strip('"').split(",") if x.strip()]
        else:
            raw = []
            for part in str(text).strip().strip('"').split(";"):
                if part.strip():
                    values = tuple(int(x) for x in part.split(","))
                    if kind == "hw" and len(values) != 2:
                        raise ValueError(part)
                    raw.append(values)
    except (ValueError, TypeError):
        shape = {"batch": "b1,b2,...", "hw": "h1,w1;h2,w2;...",
                 "dims": "d1,d2,...;d1,d2,...;..."}[kind]
        raise _bad(flag, text, f'use "{shape}" with positive integers') from None
    if not MIN_GEARS <= len(raw) <= MAX_GEARS:
        raise _bad(flag, text, f"the number of profiles must be in [{MIN_GEARS}, {MAX_GEARS}], "
                   f"got {len(raw)}")
    for g in raw:
        if (min(g) if isinstance(g, tuple) else g) < 1:
            raise _bad(flag, text, f"profile {g} must be positive (-1 belongs in --input_shape)")
    if len(set(raw)) != len(raw):
        raise _bad(flag, text, "profiles must not repeat")
    return raw


_FLAGS = {"batch": "--dynamic_batch_size", "hw": "--dynamic_image_size",
          "dims": "--dynamic_dims", "static": "--input_shape"}


def _dynamic_dims(spec: TensorSpec, kind: str) -> tuple[int, ...]:
    if kind == "batch":
        return (0,)
    return (1, 2) if spec.format == "NHWC" else (2, 3)


def _check_dynamic(shapes: dict, graph: Graph, kind: str, text) -> None:
    """-1 must sit exactly in the dims the dynamic flag varies, in at least one input."""
    flag = _FLAGS[kind]
    dynamic_inputs = 0
    for spec in graph.inputs:
        dims = shapes[spec.name]
        marked = tuple(i for i, d in enumerate(dims) if d == -1)
        if not marked:
            continue
        if kind == "static":
            raise _bad("--input_shape", text, "-1 needs --dynamic_batch_size, "
                       "--dynamic_image_size or --dynamic_dims (acllab does not build "
                       "unknown-shape models)")
        if kind == "dims":                  # any dim may vary
            dynamic_inputs += 1
            continue
        if kind == "hw" and len(dims) != 4:
            raise _bad(flag, text, f"input {spec.name!r} is not 4-D")
        if marked != _dynamic_dims(spec, kind):
            where = "the first (N) dim" if kind == "batch" else "the H and W dims"
            raise _bad("--input_shape", text, f"with {flag}, only {where} may be -1; "
                       f"{spec.name!r} is {list(dims)}")
        dynamic_inputs += 1
    if kind != "static" and not dynamic_inputs:
        where = {"batch": "N", "hw": "H and W", "dims": "at least one dim"}[kind]
        raise _bad("--input_shape", text, f"{flag} needs -1 in {where} of --input_shape")


def _at(shapes: dict, graph: Graph, kind: str, gear) -> dict[str, tuple[int, ...]]:
    if kind == "dims":                      # the gear's values fill the -1s in flag order
        values = iter(gear)
        return {name: tuple(next(values) if d == -1 else d for d in dims)
                for name, dims in shapes.items()}
    out = {}
    for spec in graph.inputs:
        dims = list(shapes[spec.name])
        for i, value in zip(_dynamic_dims(spec, kind) if -1 in dims else (),
                            (gear,) if kind == "batch" else gear, strict=False):
            dims[i] = value
        out[spec.name] = tuple(dims)
    return out


def compile_model(model: str | Graph | dict, *, input_shape: str | dict | None = None,
                  dynamic_batch_size: str | list | None = None,
                  dynamic_image_size: str | list | None = None,
                  dynamic_dims: str | list | None = None, fusion: bool = True,
                  soc_version: str | None = None, profile: DeviceProfile | str | None = None,
                  input_format: str | None = None, input_fp16_nodes: str | None = None,
                  output_type: str | None = None, out_nodes: str | None = None,
                  insert_op_conf: str | None = None, framework: int | None = None
                  ) -> CompiledModel:
    """Compile a graph ('zoo:NAME', a JSON path or dict, a Graph) as atc would.

    ``input_format="NHWC"``: the model takes NHWC data (and ``input_shape`` is written in
    NHWC order); the compiled model transposes it to the graph's NCHW (a TransData op).
    Without ``input_format``, a TensorFlow model (``framework=3``) takes NHWC, as atc's
    default for TensorFlow is NHWC (CANN documentation, "ATC parameters: --input_format":
    NCHW by default for Caffe, MindSpore and ONNX, NHWC for TensorFlow); other frameworks
    take the graph's own layout.
    ``input_fp16_nodes``, ``output_type``, ``out_nodes`` and ``insert_op_conf`` (a path to a
    static AIPP config, see :mod:`acllab.model.aipp`) are atc's flags of those names.
    """
    soc, prof = soc_to_profile(soc_version, profile)
    try:
        graph = load_graph(model)
    except GraphError as exc:
        raise _bad("--model", model if isinstance(model, str) else "<graph>", str(exc)) from None
    if isinstance(model, str) and model.startswith("zoo:"):
        _name_zoo_input(graph, input_shape, input_fp16_nodes)
    if input_format is None and framework == 3:
        input_format = "NHWC"
    nhwc = False
    if input_format is not None:
        if input_format not in ("NCHW", "NHWC", "ND"):
            raise _bad("--input_format", input_format, "choose NCHW, NHWC or ND")
        nhwc = input_format == "NHWC"
        if nhwc and input_shape is not None:
            input_shape = _nhwc_to_nchw(input_shape)
        if input_format == "ND":
            graph.inputs = [TensorSpec(t.name, t.shape, t.dtype, "ND") for t in graph.inputs]
    if input_fp16_nodes:
        _fp16_inputs(graph, input_fp16_nodes)
    if out_nodes:
        graph = _select_outputs(graph, out_nodes)
    if output_type:
        _output_types(graph, output_type)
    if dynamic_batch_size is not None and dynamic_image_size is not None:
        raise _bad("--dynamic_batch_size", dynamic_batch_size, "--dynamic_batch_size and "
                   "--dynamic_image_size are mutually exclusive")
    if dynamic_dims is not None and (dynamic_batch_size is not None
                                     or dynamic_image_size is not None):
        raise _bad("--dynamic_dims", dynamic_dims, "--dynamic_dims, --dynamic_batch_size and "
                   "--dynamic_image_size are mutually exclusive")
    given = {"batch": dynamic_batch_size, "hw": dynamic_image_size, "dims": dynamic_dims}
    kind = next((k for k, v in given.items() if v is not None), "static")
    if kind != "static" and input_shape is None:
        raise _bad(_FLAGS[kind], given[kind], "it must be used together with --input_shape")
    if kind == "dims" and input_format != "ND":
        raise _bad("--dynamic_dims", dynamic_dims, "it must be used together with "
                   "--input_format ND")
    if kind == "dims" and insert_op_conf is not None:
        raise _bad("--dynamic_dims", dynamic_dims, "it cannot be used together with "
                   "--insert_op_conf")
    shapes = {t.name: t.shape for t in graph.inputs}
    order: list[str] = []
    if input_shape is not None:
        given_shapes = parse_input_shape(input_shape, graph)
        order = list(given_shapes)
        shapes.update(given_shapes)
    elif any(-1 in s for s in shapes.values()):
        name = next(n for n, s in shapes.items() if -1 in s)
        raise _bad(name, -1, "maybe you should set input_shape to specify its shape")
    _check_dynamic(shapes, graph, kind, input_shape)
    gears = parse_gears(given[kind], kind) if kind != "static" else []
    if kind == "dims":
        # every gear gives one value per -1, in --input_shape's order
        shapes = {name: shapes[name] for name in order} | \
            {n: s for n, s in shapes.items() if n not in order}
        wanted = sum(d == -1 for s in shapes.values() for d in s)
        for g in gears:
            if len(g) != wanted:
                raise _bad("--dynamic_dims", dynamic_dims, f"profile {list(g)} has {len(g)} "
                           f"dims; --input_shape has {wanted} -1 dims")
    graph.inputs = [TensorSpec(t.name, tuple(shapes[t.name]), t.dtype, t.format)
                    for t in graph.inputs]
    points = [(gear_key(**{"batch": {"batch": g}, "hw": {"hw": g}, "dims": {"dims": g}}[kind]),
               _at(shapes, graph, kind, g)) for g in gears] or [("static", dict(shapes))]
    largest = max(points, key=lambda p: sum(prod(s) for s in p[1].values()))
    try:
        ann = graph.annotate(largest[1])
        source_ops = len(graph.ops)
        compiled_graph, records = fuse(graph, ann) if fusion else (graph, [])
        anns = {key: compiled_graph.annotate(s) for key, s in points}
    except GraphError as exc:
        raise _bad("--input_shape", input_shape, str(exc)) from None
    plans = {key: _plan(a, compiled_graph, prof, kind != "static") for key, a in anns.items()}
    big = anns[largest[0]]
    workspace, peak, blocks = plan_memory(compiled_graph, big)
    if kind == "dims":          # another gear may need more: a bigger batch, smaller images
        workspace, peak, blocks = max((plan_memory(compiled_graph, a) for a in anns.values()),
                                      key=lambda p: p[0])
    each = kind == "dims"
    inputs = _descs(compiled_graph.inputs, anns, big, "input", each)
    if kind == "dims":                      # -1 where --input_shape has it, as GE reports
        inputs = [TensorDesc(t.name, tuple(shapes[t.name]), t.max_dims, t.dtype, t.format,
                             t.size) for t in inputs]
    preprocess: dict[str, dict] = {}
    if insert_op_conf is not None:
        if input_format == "ND":
            raise _bad("--input_format", input_format, "with --insert_op_conf it must be "
                       "NCHW or NHWC")
        follow = {n for n, s in shapes.items() if -1 in s} if kind == "hw" else set()
        aipps = _read_aipp(insert_op_conf, compiled_graph, big, follow,
                           gears if kind == "hw" else [])
        dynamic = {n: c for n, c in aipps.items() if isinstance(c, DynamicAipp)}
        if dynamic and kind != "static":
            raise _bad("--insert_op_conf", insert_op_conf, "acllab builds dynamic AIPP for "
                       f"static shapes only, not with {_FLAGS[kind]}")
        for name, cfg in aipps.items():
            preprocess[name] = ({"dynamic_aipp": cfg.to_dict()} if name in dynamic
                                else {"aipp": cfg.to_dict()})
        inputs = [_aipp_desc(t, aipps[t.name]) if t.name in aipps else t for t in inputs]
        # one parameter input per dynamic AIPP, after the model's own (GE adds an AippData
        # node, named ascend_dynamic_aipp_data, then ascend_dynamic_aipp_data_<aipp node>)
        for k, (name, cfg) in enumerate(dynamic.items()):
            size = dynamic_data_size(cfg.batch)
            pname = DYNAMIC_AIPP_NAME if k == 0 else f"{DYNAMIC_AIPP_NAME}_aipp_{name}"
            preprocess[name]["dynamic_aipp"]["data_input"] = pname
            inputs.append(TensorDesc(pname, (size,), (size,), "uint8", "ND", size))
    if nhwc:
        for i, t in enumerate(inputs):
            if len(t.dims) == 4 and t.name not in preprocess:
                preprocess[t.name] = {"layout": "NHWC"}
                inputs[i] = TensorDesc(t.name, _to_nhwc(t.dims), _to_nhwc(t.max_dims),
                                       t.dtype, "NHWC", t.size)
    for key, a in anns.items():
        plans[key] = _pre_plans(preprocess, a, compiled_graph, kind != "static") + plans[key]
    outputs = _descs(compiled_graph.outputs, anns, big, "output", each)
    if kind != "static":
        n = {"batch": 1, "hw": 2}.get(kind) or sum(d == -1 for s in shapes.values()
                                                   for d in s)
        inputs.append(TensorDesc(DYNAMIC_INPUT_NAME, (n,), (n,), "int64", "ND", 8 * n))
    weight_bytes = sum(_align(prod(s) * DTYPES[d].itemsize) for s, d in big.params.values())
    memory = MemoryPlan(workspace, weight_bytes, peak, sum(b.size for b in blocks),
                        sum(t.size for t in inputs), sum(t.size for t in outputs),
                        tuple(blocks))
    options = {"input_shape": input_shape if not isinstance(input_shape, dict) else
               ";".join(f"{k}:{','.join(map(str, v))}" for k, v in input_shape.items()),
               "dynamic_batch_size": dynamic_batch_size, "dynamic_image_size":
               dynamic_image_size, "dynamic_dims": dynamic_dims, "fusion": bool(fusion),
               "soc_version": soc,
               "input_format": input_format, "input_fp16_nodes": input_fp16_nodes,
               "output_type": output_type, "out_nodes": out_nodes,
               "insert_op_conf": insert_op_conf, "framework": framework}
    if isinstance(dynamic_batch_size, (list, tuple)):
        options["dynamic_batch_size"] = ",".join(map(str, gears))
    if isinstance(dynamic_image_size, (list, tuple)):
        options["dynamic_image_size"] = ";".join(f"{h},{w}" for h, w in gears)
    if isinstance(dynamic_dims, (list, tuple)):
        options["dynamic_dims"] = ";".join(",".join(map(str, g)) for g in gears)
    return CompiledModel(graph.name, compiled_graph, soc, prof.name, kind, gears, inputs,
                         outputs, memory, plans, records, options, source_ops, preprocess,
                         order)


# ---- input layout, input and output types, output selection, AIPP -------------------------
_OUTPUT_TYPES = {"FP32": "fp32", "FP16": "fp16", "UINT8": "uint8"}


def _nhwc_to_nchw(text):
    """--input_shape in NHWC order (with --input_format NHWC) -> the graph's NCHW order."""
    if isinstance(text, dict):
        return {k: (tuple(v[i] for i in (0, 3, 1, 2)) if len(v) == 4 else tuple(v))
                for k, v in text.items()}
    parts = []
    for part in str(text).strip().strip('"').split(";"):
        name, sep, dims = part.strip().rpartition(":")
        d = dims.split(",")
        parts.append(f"{name}{sep}{','.join(d[i] for i in (0, 3, 1, 2))}" if len(d) == 4
                     else part)
    return ";".join(parts)


def _to_nhwc(dims: tuple[int, ...]) -> tuple[int, ...]:
    return (dims[0], dims[2], dims[3], dims[1])


def _fp16_inputs(graph: Graph, text: str) -> None:
    """--input_fp16_nodes "data;other": those inputs take fp16 data."""
    names = [n.strip() for n in str(text).split(";") if n.strip()]
    known = {t.name for t in graph.inputs}
    for n in names:
        if n not in known:
            raise _bad("--input_fp16_nodes", text, f"the model has no input {n!r}; its "
                       f"inputs are {sorted(known)}")
    graph.inputs = [TensorSpec(t.name, t.shape, "fp16" if t.name in names else t.dtype,
                               t.format) for t in graph.inputs]


def _node_output(graph: Graph, flag: str, text: str, node: str, index: str) -> str:
    """The tensor that output ``index`` of op ``node`` makes (atc's "node:index")."""
    op = next((o for o in graph.ops if o.name == node), None)
    if op is None:
        raise _bad(flag, text, f"the model has no node {node!r}")
    try:
        i = int(index)
    except ValueError:
        raise _bad(flag, text, f"output index {index!r} of {node!r} must be an integer") \
            from None
    if not 0 <= i < len(op.outputs):
        raise _bad(flag, text, f"node {node!r} has {len(op.outputs)} output(s); index {i} "
                   "is out of range")
    return op.outputs[i]


def _select_outputs(graph: Graph, text: str) -> Graph:
    """--out_nodes "node:0;node2:0": these become the outputs; unused ops are dropped."""
    tensors = []
    for part in str(text).strip().strip('"').split(";"):
        if not part.strip():
            continue
        node, sep, index = part.strip().rpartition(":")
        if not sep or not node:
            raise _bad("--out_nodes", text, 'use "node_name:output_index" (several joined '
                       'by ;)')
        t = _node_output(graph, "--out_nodes", text, node, index)
        if t in tensors:
            raise _bad("--out_nodes", text, f"{part.strip()!r} is given twice")
        tensors.append(t)
    if not tensors:
        raise _bad("--out_nodes", text, "no output given")
    old = {t.name: t for t in graph.outputs}
    outputs = [old.get(t, TensorSpec(t, (), "fp32", "ND")) for t in tensors]
    need, keep = set(tensors), []
    for op in reversed(graph.ops):
        if need & set(op.outputs):
            keep.append(op)
            need.update(op.inputs)
    names = {o.name for o in keep}
    weights = {k: v for k, v in graph.weights.items() if k.rpartition(".")[0] in names}
    try:
        return Graph(graph.name, list(graph.inputs), outputs, keep[::-1], graph.dtype,
                     graph.act_dtype, graph.weight_dtype, weights, graph.description)
    except GraphError as exc:
        raise _bad("--out_nodes", text, str(exc)) from None


def _output_types(graph: Graph, text: str) -> None:
    """--output_type FP16 (every output) or "node:0:FP16;node2:0:UINT8" (per output)."""
    value = str(text).strip().strip('"')
    choices = ", ".join(_OUTPUT_TYPES)
    if ":" not in value:
        if value not in _OUTPUT_TYPES:
            raise _bad("--output_type", text, f"choose {choices}")
        graph.outputs = [TensorSpec(t.name, t.shape, _OUTPUT_TYPES[value], t.format)
                         for t in graph.outputs]
        return
    chosen: dict[str, str] = {}
    for part in value.split(";"):
        if not part.strip():
            continue
        bits = part.strip().split(":")
        if len(bits) != 3:
            raise _bad("--output_type", text, 'use "TYPE" or "node:index:TYPE" (several '
                       'joined by ;)')
        node, index, typ = bits
        if typ not in _OUTPUT_TYPES:
            raise _bad("--output_type", text, f"{typ!r}: choose {choices}")
        t = _node_output(graph, "--output_type", text, node, index)
        if t not in {o.name for o in graph.outputs}:
            raise _bad("--output_type", text, f"{node}:{index} is not an output of the model "
                       "(see --out_nodes)")
        chosen[t] = _OUTPUT_TYPES[typ]
    graph.outputs = [TensorSpec(t.name, t.shape, chosen.get(t.name, t.dtype), t.format)
                     for t in graph.outputs]


def _read_aipp(path: str, graph: Graph, big, follow: set = frozenset(), gears=()) -> dict:
    """--insert_op_conf: the static AIPP configs, by the name of the input each feeds.

    ``follow`` names the inputs whose H and W --dynamic_image_size varies: their AIPP source
    is each gear's size (``gears``), see :func:`acllab.model.aipp.build_config`."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise _bad("--insert_op_conf", path, f"cannot read it: "
                   f"{getattr(exc, 'strerror', None) or exc}") from None
    try:
        blocks = parse_aipp(text)
        out = {}
        for b in blocks:
            rank = b.get("related_input_rank", 0)
            if not 0 <= rank < len(graph.inputs):
                raise AippError(f"related_input_rank {rank} is out of range: the model has "
                                f"{len(graph.inputs)} input(s)")
            spec = graph.inputs[rank]
            if spec.name in out:
                raise AippError(f"two aipp_op blocks for input {rank} ({spec.name!r})")
            if spec.dtype != "fp32":
                raise AippError(f"input {spec.name!r} is {spec.dtype}: AIPP feeds a float "
                                "input (do not list it in --input_fp16_nodes)")
            if b.get("aipp_mode") == "dynamic":
                try:
                    out[spec.name] = build_dynamic(b, big.shapes[spec.name])
                except AippError as exc:
                    raise AippError(f"aipp_op for input {rank} ({spec.name!r}): {exc}") \
                        from None
                continue
            try:
                cfg = build_config(b, big.shapes[spec.name], spec.name in follow)
                if cfg.follows_gear and cfg.input_format == "YUV420SP_U8":
                    odd = [list(g) for g in gears if g[0] % 2 or g[1] % 2]
                    if odd:
                        raise AippError(f"YUV420SP_U8 needs even image sizes; the gears "
                                        f"{odd} are odd")
                out[spec.name] = cfg
            except AippError as exc:
                raise AippError(f"aipp_op for input {rank} ({spec.name!r}): {exc}") from None
        return out
    except AippError as exc:
        raise _bad("--insert_op_conf", path, str(exc)) from None


def _aipp_desc(t: TensorDesc, cfg) -> TensorDesc:
    """An AIPP input: uint8 NHWC images of the source size (-1 in H and W when the source
    follows --dynamic_image_size's gears; the size is the largest gear's). A dynamic AIPP's
    input is max_src_image_size bytes with dims [N, -1, -1, -1] (hicann/ge, aipp_op.cc,
    CreateAippData: "dynamic aipp shape HWC is not fixed, need to be set -1")."""
    if isinstance(cfg, DynamicAipp):
        return TensorDesc(t.name, (t.dims[0], -1, -1, -1),
                          (t.max_dims[0], t.max_dims[2], t.max_dims[3], cfg.channels),
                          "uint8", "NHWC", cfg.max_src_image_size)
    hw = (-1, -1) if cfg.follows_gear else (cfg.src_h, cfg.src_w)
    dims = (t.dims[0], *hw, cfg.channels)
    max_dims = (t.max_dims[0], cfg.src_h, cfg.src_w, cfg.channels)
    return TensorDesc(t.name, dims, max_dims, "uint8", "NHWC",
                      t.max_dims[0] * source_bytes(cfg))


def _pre_plans(preprocess: dict, ann, graph: Graph, generic: bool) -> list[OpPlan]:
    """The vector ops that run before the first layer: AIPP, or TransData for NHWC."""
    plans = []
    for spec in graph.inputs:
        pre = preprocess.get(spec.name)
        if pre is None:
            continue
        shape = ann.shapes[spec.name]
        if "dynamic_aipp" in pre:       # the largest source the parameters may name
            d = DynamicAipp.from_dict(pre["dynamic_aipp"])
            per = 3 + 18 + 2                  # as a static AIPP with CSC, plus padding
            moved = d.max_src_image_size + prod(shape) * 2 + dynamic_data_size(d.batch)
            plans.append(OpPlan(f"aipp_{spec.name}", "Aipp", "vector", graph.dtype,
                                prod(shape) * per, moved, 0, None, None, 1.0, generic))
        elif "aipp" in pre:
            from .aipp import AippConfig

            cfg = AippConfig.from_dict(pre["aipp"]).at(shape[2], shape[3])
            moved = shape[0] * (source_bytes(cfg) + prod(shape[1:]) * 2)
            plans.append(OpPlan(f"aipp_{spec.name}", "Aipp", "vector", graph.dtype,
                                shape[0] * aipp_flops(cfg), moved, 0, None, None, 1.0,
                                generic))
        else:
            size = ann.tensor_bytes(spec.name)
            plans.append(OpPlan(f"transdata_{spec.name}", "TransData", "vector", graph.dtype,
                                prod(shape), 2 * size, 0, None, None, 1.0, generic))
    return plans


def _align(n: int, to: int = 512) -> int:
    return -(-n // to) * to


def _plan(ann, graph: Graph, prof: DeviceProfile, generic: bool) -> list[OpPlan]:
    plans = []
    for c in ann.costs:
        cube = c.unit == "cube" and c.gemm is not None
        plans.append(OpPlan(
            c.name, c.type, c.unit, graph.dtype, c.flops, c.read_bytes + c.write_bytes,
            c.weight_bytes, c.gemm, plan_tile(c.gemm, graph.dtype, prof.ai_cores) if cube
            else None, round(tiling_efficiency(c.gemm, graph.dtype, prof.ai_cores), 6)
            if cube else 1.0, generic))
    return plans


def _descs(specs: list[TensorSpec], anns: dict, big, kind: str, each: bool = False
           ) -> list[TensorDesc]:
    """Descriptions sized at the largest gear (``big``), or, ``each`` (--dynamic_dims, where
    the gears need not grow together), each tensor at the gear where it is biggest."""
    out = []
    for spec in specs:
        seen = [a.shapes[spec.name] for a in anns.values()]
        at = max(anns.values(), key=lambda a: a.tensor_bytes(spec.name)) if each else big
        dims = tuple(d if all(s[i] == d for s in seen) else -1
                     for i, d in enumerate(at.shapes[spec.name]))
        fmt = spec.format if kind == "input" else "ND"
        out.append(TensorDesc(spec.name, dims, at.shapes[spec.name], at.dtypes[spec.name],
                              fmt, at.tensor_bytes(spec.name)))
    return out


# ---- the command-line form ----------------------------------------------------------------
_SUCCESS = "ATC run success, welcome to the next use."
_FAILED = "ATC run failed, Please check the detail log, Try 'atc --help' for more information"


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):            # argparse would exit; atc reports instead
        head, _, rest = message.partition(": ")
        if head == "the following arguments are required":
            raise _bad(rest, "", "the parameter is required")
        if head == "unrecognized arguments":
            raise _bad("command line", rest, "unknown parameter (see atc --help)")
        if head.startswith("argument "):
            param = head[len("argument "):].split("/")[0]
            value = rest.split("invalid choice: ", 1)[-1].split(" (", 1)[0].strip("'")
            raise _bad(param, value, rest)
        raise _bad("command line", "", message)


def _parser() -> argparse.ArgumentParser:
    p = _Parser(prog="atc", description="acllab's atc: compile a graph into an offline "
                "model (.om). Flags mirror CANN's atc.")
    p.add_argument("--model", help="zoo:NAME or a graph JSON file")
    p.add_argument("--singleop", help="a single-op config (JSON list of ops): writes one "
                   "op-model file per op into the --output directory")
    p.add_argument("--framework", type=int, choices=(0, 1, 3, 5),
                   help="source framework (0 Caffe, 1 MindSpore, 3 TensorFlow, 5 ONNX); "
                   "acllab graphs are framework-neutral, but 3 makes NHWC the default "
                   "--input_format, as for a TensorFlow model")
    p.add_argument("--output", required=True, help="output path; .om is appended (with "
                   "--singleop: the directory for the op models)")
    p.add_argument("--soc_version", required=True, help="target SoC, e.g. Ascend310")
    p.add_argument("--input_shape", help='e.g. "data:32,3,224,224" or "data:-1,3,224,224"')
    p.add_argument("--input_format", choices=("NCHW", "NHWC", "ND"))
    p.add_argument("--dynamic_batch_size", help='batch gears, e.g. "1,2,4,8"')
    p.add_argument("--dynamic_image_size", help='image-size gears, e.g. "224,224;448,448"')
    p.add_argument("--dynamic_dims", help='ND gears, one value per -1 of --input_shape, e.g. '
                   '"1,16,16;4,32,24" (needs --input_format ND)')
    p.add_argument("--input_fp16_nodes", help='inputs that take fp16 data, e.g. "data"')
    p.add_argument("--output_type", help='FP32, FP16 or UINT8 for every output, or per output '
                   '"node:0:FP16;node2:0:UINT8"')
    p.add_argument("--out_nodes", help='the outputs, e.g. "fc:0;prob:0" (node:output index)')
    p.add_argument("--insert_op_conf", help="a static AIPP config file (aipp_op { ... })")
    p.add_argument("--fusion_switch_file", help='JSON; {"Switch": {"GraphFusion": {"ALL": '
                   '"off"}, "UBFusion": {"ALL": "off"}}} turns fusion off')
    p.add_argument("--log", default="null", choices=("debug", "info", "warning", "error",
                                                     "null"), help="info prints the report")
    p.add_argument("--report", action="store_true", help="print the compile report (acllab)")
    return p


def _long_flags(parser: argparse.ArgumentParser, argv: list[str]) -> list[str]:
    """``-flag[=value]`` as ``--flag[=value]`` for each of atc's long flags: CANN's atc reads
    its command line with gflags (GE, offline/main.cc), which takes one dash or two before a
    flag, and Ascend's READMEs use both (resnet50_async_imagenet_classification's atc command
    has ``-output_type=FP32``)."""
    longs = {o[2:] for a in parser._actions for o in a.option_strings if o.startswith("--")}
    out = []
    for arg in argv:
        if arg.startswith("-") and not arg.startswith("--") and \
                arg[1:].split("=", 1)[0] in longs:
            arg = "-" + arg
        out.append(arg)
    return out


def _fusion_switch(path: str) -> bool:
    """False if the switch file turns every graph or UB fusion pass off."""
    try:
        cfg = json.loads(Path(path).read_text(encoding="utf-8"))
        switch = cfg["Switch"]
        off = [str(switch.get(k, {}).get("ALL", "on")).lower() == "off"
               for k in ("GraphFusion", "UBFusion")]
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise _bad("--fusion_switch_file", path, f"cannot use it: {exc}") from None
    return not any(off)


def compile_singleop(config: str, output: str, soc_version: str | None = None) -> list[str]:
    """``atc --singleop=CONFIG --output=DIR``: check every entry of a single-op config and
    write one op-model file per entry into DIR (created if missing); return their paths.

    The config is the JSON list CANN's atc takes (see :mod:`acllab.model.singleop`); an entry
    that does not fit its op (inputs, attributes, output shapes) fails the whole run, naming
    the entry. Files are written only once every entry passed, so a failed run leaves
    nothing half-written.
    """
    from . import opkernels, singleop

    soc_to_profile(soc_version, None)
    try:
        text = Path(config).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise _bad("--singleop", config, f"cannot read it: {exc}") from None
    try:
        specs = singleop.parse_config(text)
        for i, spec in enumerate(specs):
            try:
                opkernels.check(spec)
            except singleop.OpModelError as exc:
                raise singleop.OpModelError(f"entry {i}: {exc}") from None
    except singleop.OpModelError as exc:
        raise _bad("--singleop", config, str(exc)) from None
    folder = Path(output)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        paths = []
        for i, spec in enumerate(specs):
            path = folder / singleop.file_name(i, spec)
            path.write_bytes(singleop.dumps(spec))
            paths.append(str(path))
    except OSError as exc:
        raise _bad("--output", output, f"cannot write the op models: "
                   f"{exc.strerror or exc}") from None
    return paths


def atc_main(argv: list[str] | None = None, out=None, err=None) -> int:
    """``atc`` on the command line: compile, write OUTPUT.om, print the verdict (0 = success)."""
    from . import omfile

    out, err = out or sys.stdout, err or sys.stderr
    try:
        try:
            parser = _parser()
            args = parser.parse_args(_long_flags(parser, sys.argv[1:] if argv is None
                                                 else argv))
        except SystemExit as exc:               # --help
            return exc.code if isinstance(exc.code, int) else 0
        if args.singleop is not None:
            if args.model is not None:
                raise _bad("--singleop", args.singleop, "--model and --singleop exclude "
                           "each other")
            paths = compile_singleop(args.singleop, args.output, args.soc_version)
            print(f"{_SUCCESS} ({len(paths)} op models in {args.output})", file=out)
            return 0
        if args.model is None:
            raise _bad("--model", "", "the parameter is required (or --singleop)")
        fusion = _fusion_switch(args.fusion_switch_file) if args.fusion_switch_file else True
        model = compile_model(args.model, input_shape=args.input_shape,
                              dynamic_batch_size=args.dynamic_batch_size,
                              dynamic_image_size=args.dynamic_image_size,
                              dynamic_dims=args.dynamic_dims, fusion=fusion,
                              soc_version=args.soc_version, input_format=args.input_format,
                              input_fp16_nodes=args.input_fp16_nodes,
                              output_type=args.output_type, out_nodes=args.out_nodes,
                              insert_op_conf=args.insert_op_conf,
                              framework=args.framework)
        path = args.output if args.output.endswith(".om") else args.output + ".om"
        try:
            # GE's CheckOutputPathValid (ge common/util.cc) creates the folders of an
            # --output that does not exist yet (CreateDirectory on the part before the last
            # '/'): the samples' READMEs run `atc ... --output=model/NAME` with no model/.
            Path(path).parent.mkdir(parents=True, exist_ok=True)
            omfile.save(model, path)
        except OSError as exc:
            raise _bad("--output", args.output, f"cannot write {path}: "
                       f"{exc.strerror or exc}") from None
    except AtcError as exc:
        print(_FAILED, file=err)
        print(str(exc), file=err)
        return 1
    if args.report or args.log in ("info", "debug"):
        model.report(verbose=args.log == "debug", file=out)
    print(f"{_SUCCESS} ({path})", file=out)
    return 0
