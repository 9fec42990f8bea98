"""The compile report: what atc decided, as plain text (``CompiledModel.report()``)."""

from __future__ import annotations

from collections import Counter

from .cost import GENERIC_TILING_FACTOR, breakdown

__all__ = ["render", "fmt_bytes"]


def fmt_bytes(n: int) -> str:
    """1536 -> '1.5 KiB'; sizes in binary units as smi and malloc report them."""
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} B"


def _tensor_line(i: int, t, hidden: bool) -> str:
    note = "  (hidden: set_dynamic_* fills it)" if hidden else ""
    return (f"  {i} {t.name:<26} dims {list(t.dims)!s:<20} {t.dtype:<5} {t.format:<5} "
            f"{t.size:>12,} B{note}")


def render(model, verbose: bool = False) -> str:
    """The report of a :class:`~acllab.model.compiled.CompiledModel` as text."""
    g = model.graph
    lines = [f"atc: {model.name} -> {model.soc_version} (profile {model.profile_name}), "
             f"{g.dtype} cube, activations {g.act_dtype}, weights {g.weight_dtype}"
             + ("" if model.has_weights else " (cost only: not materialised)")]
    lines.append("inputs:")
    for i, t in enumerate(model.inputs):
        lines.append(_tensor_line(i, t, t.name == "ascend_mbatch_shape_data"))
    lines.append("outputs:")
    lines += [_tensor_line(i, t, False) for i, t in enumerate(model.outputs)]
    if model.dynamic == "static":
        lines.append("shape: static (shape-specific tiling for every op)")
    else:
        what = {"batch": "batch sizes", "hw": "image sizes (h, w)"}.get(
            model.dynamic, "the -1 dims of --input_shape")
        sized = "each tensor's biggest gear" if model.dynamic == "dims" else \
            model.largest_gear
        lines.append(f"gears ({what}): {model.gears}; generic tiling; memory sized for "
                     f"{sized}")
    kernels = sum(1 for op in g.ops if op.type != "Flatten")
    lines.append(f"fusion: {model.source_ops} ops -> {len(g.ops)} ops ({kernels} kernels)"
                 + ("" if model.options.get("fusion", True) else " [fusion switched off]"))
    patterns = Counter(r.pattern for r in model.fusions)
    for pattern, n in patterns.items():
        recs = [r for r in model.fusions if r.pattern == pattern]
        saved = sum(r.saved_bytes for r in recs)
        first = recs[0]
        lines.append(f"  {n} x {pattern}: e.g. {' + '.join(first.ops)} -> {first.into}"
                     + (f"; saves {fmt_bytes(saved)} of traffic per run" if saved else ""))
        lines.append(f"      why: {first.reason}")
        if verbose:
            lines += [f"      {' + '.join(r.ops)} -> {r.into}" for r in recs[1:]]
    if not model.fusions:
        lines.append("  nothing fused: every BatchNorm and Relu runs as its own kernel")
    m = model.memory
    lines.append(f"memory plan (largest gear): workspace {fmt_bytes(m.workspace_bytes)} "
                 f"(peak live {fmt_bytes(m.peak_live_bytes)}; without reuse "
                 f"{fmt_bytes(m.no_reuse_bytes)}), weights {fmt_bytes(m.weight_bytes)}, "
                 f"inputs {fmt_bytes(m.input_bytes)}, outputs {fmt_bytes(m.output_bytes)}")
    times = breakdown(model)
    plans = model.plan_for()
    gear = model.largest_gear
    lines.append(f"tiling and roofline on {model.profile_name} at "
                 f"{'the static shape' if gear is None else f'gear {gear}'} (huge pages):")
    lines.append(f"  {'op':<18} {'unit':<6} {'GEMM MxKxN':<20} {'tile':<14} {'eff':>5} "
                 f"{'bound':<7} {'time':>9}")
    rows = list(zip(plans, times, strict=True))
    shown = rows if verbose else sorted(rows, key=lambda r: -r[1].total_ns)[:8]
    for p, t in shown:
        gemm = "x".join(map(str, p.gemm)) if p.gemm else "-"
        tile = "x".join(map(str, p.tile)) if p.tile else "-"
        factor = GENERIC_TILING_FACTOR if p.generic else 1.0
        eff = f"{p.eff * factor:.2f}" if p.unit == "cube" else "-"
        lines.append(f"  {p.name:<18} {p.unit:<6} {gemm:<20} {tile:<14} {eff:>5} "
                     f"{t.bound:<7} {t.total_ns / 1000:>7.1f} us")
    if not verbose and len(rows) > len(shown):
        lines.append(f"  ... {len(rows) - len(shown)} more (report(verbose=True) lists all)")
    total = sum(t.total_ns for t in times)
    per = [f"{gear_label(model, g)}: {model_time(model, g) / 1e6:.2f} ms"
           for g in (model.gears or [None])]
    lines.append(f"estimated execute: {total / 1e6:.2f} ms at the largest gear; " + ", ".join(per))
    return "\n".join(lines)


def gear_label(model, gear) -> str:
    """'batch 8', 'hw 224x224', 'dims 1,16,16' or 'static'."""
    if gear is None:
        return "static"
    if model.dynamic == "dims":
        return "dims " + ",".join(map(str, gear))
    return f"hw {gear[0]}x{gear[1]}" if isinstance(gear, tuple) else f"batch {gear}"


def model_time(model, gear) -> int:
    """Execute time of one gear in ns (huge pages, compile profile)."""
    return model.execute_ns(**model.gear_kwargs(gear))
