"""How long a compiled model's execute takes on a device profile: a per-op roofline.

For every op the compiler planned (see :class:`OpPlan`)::

    t = dispatch_gap + max(flops / (peak * eff), bytes / memory_bandwidth)

* ``peak`` is ``profile.peak_int8_ops`` for an int8 model, ``profile.peak_fp16_flops``
  otherwise (atc's default precision mode runs fp32 graphs in fp16); element-wise ops run on the
  vector unit at :data:`VECTOR_PEAK_FRACTION` of the fp16 peak.
* ``eff`` is the tiling efficiency the compiler chose (:func:`tiling_efficiency`): from about
  0.3 for a tiny GEMM to 0.9 for a large aligned one, times the alignment waste of the cube's
  fractal tiles.
* A gear (dynamic batch / image size) model uses generic tiling: every kernel reaches only
  :data:`GENERIC_TILING_FACTOR` of the efficiency a shape-specific tiling reaches, on the cube
  and on the activation traffic alike (weights were laid out at compile time and stream as
  before), and each op pays :data:`SHAPE_DISPATCH_NS` to read the gear's shape. Batch 1 is
  dominated by dispatch gaps and by streaming the weights, so its relative penalty is smaller
  than at batch 32: that falls out of the formula, nothing is special-cased.
* Buffers in normal (4 KB) pages: the memory term grows by
  ``KERNEL_PAGE_PENALTY_SCALE * profile.normal_page_penalty_permille``.

Calibration (default profile ``ascend310``, zoo ResNet-50 int8, huge pages; see
``tests/test_model_cost.py``, which recomputes every figure): fixed batch 32 takes about
26.7 ms per batch (S1: about 1197 img/s), the dynamic-batch model (gears 1..32) at batch 32
about 939 img/s (S2), dynamic vs fixed at batch 1 about 14% slower (S3), and normal pages
make K about 10% longer than huge pages. Fixed batch 1 takes about 1.8 ms.

Differs from hardware: one number per op; no caches, no overlap between consecutive ops, no
contention with other streams (the runtime's AI Core resource handles that).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from ..hardware import DeviceProfile, ceil_div, get_profile

__all__ = [
    "EFF_MIN", "EFF_MAX", "ROWS_HALF", "GENERIC_TILING_FACTOR", "DISPATCH_GAP_NS",
    "SHAPE_DISPATCH_NS", "VECTOR_PEAK_FRACTION", "KERNEL_PAGE_PENALTY_SCALE", "FRACTAL",
    "OpPlan", "OpTime", "tiling_efficiency", "plan_tile", "op_time", "execute_ns", "breakdown",
    "op_times",
]

# ---- every calibrated constant, with its reasoning --------------------------------------
#: Cube efficiency of a tiny GEMM (a few fractal tiles; set-up and pipeline fill dominate).
EFF_MIN = 0.30
#: Cube efficiency of a large, aligned GEMM (the brief's "about 0.9").
EFF_MAX = 0.90
#: GEMM rows per AI Core at which efficiency is halfway between EFF_MIN and EFF_MAX. With 48,
#: ResNet-50's last stage at batch 1 (49 rows over 2 cores, padded to 64) runs at about 0.4,
#: its fully connected layer (1 row) at 0.02, its early stages at batch 32 (50,000 rows per
#: core) at 0.9.
ROWS_HALF = 48
#: Generic tiling (gear models): fraction of the shape-specific efficiency reached, on the cube
#: and on activation traffic. 0.78 gives about -22% throughput at batch 32 (S2; and S4, two
#: fixed models vs one dynamic, about 1.28x) and about +14% time at batch 1 (S3), where
#: dispatch gaps and weight streaming, which generic tiling does not slow, weigh more.
GENERIC_TILING_FACTOR = 0.78
#: Device-side gap between two ops of a model (task dispatch, argument fetch, sync). 11 us over
#: ResNet-50's 57 kernels is about 0.63 ms: 2.3% of a batch-32 run, a third of a batch-1 run.
DISPATCH_GAP_NS = 11_000
#: Extra per-op cost in a gear model: the kernel reads the current gear's shape and selects
#: its tiling at run time.
SHAPE_DISPATCH_NS = 500
#: Vector-unit throughput as a fraction of the cube's fp16 peak (element-wise ops, pools,
#: softmax). These ops are memory-bound in practice, so the figure matters little.
VECTOR_PEAK_FRACTION = 1 / 32
#: Kernel memory phases in normal pages pay this multiple of the profile's DMA page penalty:
#: a DMA streams each 4 KB page once, while a kernel's tile loads (im2col windows, strided
#: 5-D tiles) touch many pages per tile and miss the TLB more often. The misses are address
#: translations on the NPU side (the device's SMMU/TLB walking 4 KB page tables), which huge
#: pages avoid; COST_MODEL.md cites up to 20% lost to them (it calls them IOTLB misses).
#: 2 x 10% = 20% on memory-bound phases moves ResNet-50's K by about 10% (half its time is
#: memory-bound at batch 32).
KERNEL_PAGE_PENALTY_SCALE = 2
#: Cube fractal (M, K, N) per precision: matrices are padded to multiples of these.
FRACTAL = {"int8": (16, 32, 16), "fp16": (16, 16, 16), "fp32": (16, 16, 16)}


@dataclass(frozen=True)
class OpPlan:
    """What the compiler decided for one op at one shape: its work, tile and efficiency."""

    name: str
    type: str
    unit: str                      # "cube", "vector" or "none"
    precision: str                 # cube precision: int8 | fp16 | fp32
    flops: int
    act_bytes: int                 # activations read and written
    weight_bytes: int
    gemm: tuple[int, int, int] | None
    tile: tuple[int, int, int] | None
    eff: float                     # tiling efficiency of the cube (1.0 for other units)
    generic: bool                  # generic (gear) tiling

    def to_dict(self) -> dict:
        """A JSON-ready description."""
        d = asdict(self)
        d["gemm"] = list(self.gemm) if self.gemm else None
        d["tile"] = list(self.tile) if self.tile else None
        return d

    @classmethod
    def from_dict(cls, d: dict) -> OpPlan:
        """The inverse of :meth:`to_dict`."""
        return cls(str(d["name"]), str(d["type"]), str(d["unit"]), str(d["precision"]),
                   int(d["flops"]), int(d["act_bytes"]), int(d["weight_bytes"]),
                   tuple(int(x) for x in d["gemm"]) if d["gemm"] else None,
                   tuple(int(x) for x in d["tile"]) if d["tile"] else None,
                   float(d["eff"]), bool(d["generic"]))


@dataclass(frozen=True)
class OpTime:
    """One op's time on a profile, split into its parts (ns)."""

    name: str
    type: str
    dispatch_ns: int
    compute_ns: int
    memory_ns: int
    total_ns: int

    @property
    def bound(self) -> str:
        """'compute' or 'memory': which roofline term set the time."""
        return "compute" if self.compute_ns >= self.memory_ns else "memory"


def tiling_efficiency(gemm: tuple[int, int, int], precision: str, cores: int) -> float:
    """Shape-specific cube efficiency of an (M, K, N) GEMM split over ``cores`` AI Cores."""
    m, k, n = gemm
    fm, fk, fn = FRACTAL.get(precision, FRACTAL["fp16"])
    align = (m * k * n) / (ceil_div(m, fm) * fm * ceil_div(k, fk) * fk * ceil_div(n, fn) * fn)
    rows = m / max(1, cores)
    return align * (EFF_MIN + (EFF_MAX - EFF_MIN) * rows / (rows + ROWS_HALF))


def plan_tile(gemm: tuple[int, int, int], precision: str, cores: int) -> tuple[int, int, int]:
    """The (M, K, N) tile one AI Core works on at a time (shown by the compile report)."""
    m, k, n = gemm
    fm, fk, fn = FRACTAL.get(precision, FRACTAL["fp16"])
    rows = ceil_div(m, max(1, cores))
    return (min(ceil_div(rows, fm) * fm, 256), min(ceil_div(k, fk) * fk, 512),
            min(ceil_div(n, fn) * fn, 256))


def op_time(plan: OpPlan, profile: DeviceProfile, huge_pages: bool = True) -> OpTime:
    """The roofline time of one planned op on ``profile``."""
    if plan.unit == "none":
        return OpTime(plan.name, plan.type, 0, 0, 0, 0)
    generic = GENERIC_TILING_FACTOR if plan.generic else 1.0
    if plan.unit == "cube":
        peak = profile.peak_int8_ops if plan.precision == "int8" else profile.peak_fp16_flops
        rate = peak * plan.eff * generic
    else:
        rate = profile.peak_fp16_flops * VECTOR_PEAK_FRACTION * generic
    compute = ceil_div(plan.flops * 1_000_000_000, max(1, int(rate)))
    penalty = 0 if huge_pages else KERNEL_PAGE_PENALTY_SCALE * profile.normal_page_penalty_permille
    moved = plan.act_bytes / generic + plan.weight_bytes
    memory = ceil_div(int(moved * 1_000_000_000) * (1000 + penalty),
                      profile.memory_bandwidth_bps * 1000)
    dispatch = DISPATCH_GAP_NS + (SHAPE_DISPATCH_NS if plan.generic else 0)
    return OpTime(plan.name, plan.type, dispatch, compute, memory,
                  dispatch + max(compute, memory))


def breakdown(compiled, batch: int | None = None, profile: DeviceProfile | str | None = None,
              *, hw: tuple[int, int] | None = None, dims: tuple[int, ...] | None = None,
              huge_pages: bool = True) -> list[OpTime]:
    """Per-op times of one execute of ``compiled`` at a gear (batch, or (h, w))."""
    return list(op_times(compiled, batch, profile, hw=hw, dims=dims, huge_pages=huge_pages))


def _timing_key(prof: DeviceProfile) -> tuple:
    """Every figure :func:`op_time` reads besides the plan: the profile's and this module's
    constants (read now, so a changed constant is a new key)."""
    return (prof.peak_int8_ops, prof.peak_fp16_flops, prof.memory_bandwidth_bps,
            prof.normal_page_penalty_permille, GENERIC_TILING_FACTOR, VECTOR_PEAK_FRACTION,
            KERNEL_PAGE_PENALTY_SCALE, DISPATCH_GAP_NS, SHAPE_DISPATCH_NS)


def op_times(compiled, batch: int | None = None, profile: DeviceProfile | str | None = None,
             *, hw: tuple[int, int] | None = None, dims: tuple[int, ...] | None = None,
              huge_pages: bool = True
             ) -> tuple[OpTime, ...]:
    """:func:`breakdown` as a tuple, computed once per gear, timing figures and page size
    (kept by the compiled model, see ``CompiledModel.memo``; a replaced plan is noticed)."""
    plans = compiled.plan_for(batch=batch, hw=hw, dims=dims)
    prof = get_profile(profile if profile is not None else compiled.profile_name)
    def make() -> tuple[OpTime, ...]:
        return tuple(op_time(p, prof, huge_pages) for p in plans)

    memo = getattr(compiled, "memo", None)
    if memo is None:                      # not a CompiledModel: nowhere to keep it
        return make()
    return memo(("op_times", id(plans), _timing_key(prof), bool(huge_pages)), make,
                plans, *plans)


def execute_ns(compiled, batch: int | None = None, profile: DeviceProfile | str | None = None,
               *, hw: tuple[int, int] | None = None, dims: tuple[int, ...] | None = None,
              huge_pages: bool = True) -> int:
    """Nanoseconds one execute of ``compiled`` takes at a gear (default: the largest)."""
    return sum(t.total_ns for t in op_times(compiled, batch, profile, hw=hw, dims=dims,
                                            huge_pages=huge_pages))
