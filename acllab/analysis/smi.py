"""An ``npu-smi info``-like view of the simulated devices, plus acllab's two memory views.

The table follows npu-smi's layout: a header box, then per NPU a row with Name, Health,
Power(W), Temp(C) and Hugepages-Usage(page), and a row with Chip, Bus-Id, AICore(%) and
Memory-Usage(MB) (on HBM cards such as the 910B, Memory-Usage(MB) shows the card's small
control-CPU memory as 0 / 0 and HBM-Usage(MB) holds the device memory), then the process table.

Memory is the driver's view (``heap.driver_held_bytes``): pages the driver has handed out,
whether the program still uses them or the runtime keeps them in its caching pool after
``acl.rt.free``. That is why npu-smi does not drop after free; the acllab section below the
table shows the runtime's view beside it.

Differs from hardware: power and temperature are simulated from AI Core occupancy ``u`` over
the last millisecond of virtual time (or the whole run if shorter):
``power = idle_w + u * (max_w - idle_w)`` and ``temp = idle_c + u * (max_c - idle_c)``,
with per-profile constants in :data:`THERMALS`. Real npu-smi also counts memory the firmware
and driver hold from boot; here an idle device shows 0 MB. The process id is a fixed fake.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._version import __version__
from ..hardware import HUGE_PAGE, MiB, ceil_div
from .trace import core_utilisation

if TYPE_CHECKING:  # type hints only
    from ..runtime import Device, Runtime

__all__ = ["smi_text", "device_stats", "THERMALS", "SIM_PID", "WINDOW_NS"]

# profile name -> (idle W, max W, idle C, max C); simulated, for teaching only
THERMALS: dict[str, tuple[float, float, int, int]] = {
    "ascend310": (12.8, 16.5, 45, 68),
    "ascend910b": (72.0, 310.0, 36, 62),
}
_FALLBACK = (15.0, 60.0, 40, 65)
SIM_PID = 24601            # the simulated process id shown in the process table
WINDOW_NS = 1_000_000      # AICore(%) looks at the last millisecond of virtual time

_W1, _W2, _W3 = 27, 15, 52
_RULE = f"+{'-' * _W1}+{'-' * _W2}+{'-' * _W3}+"
_DOUBLE = f"+{'=' * _W1}+{'=' * _W2}+{'=' * _W3}+"
_WIDE = f"+{'-' * (_W1 + _W2 + _W3 + 2)}+"


def _row(a: str, b: str, c: str) -> str:
    return f"|{a:<{_W1}}|{b:<{_W2}}|{c:<{_W3}}|"


def _wide(text: str) -> str:
    return f"| {text:<{_W1 + _W2 + _W3 + 1}}|"


def _pair(used: int, total: int, width: int) -> str:
    """npu-smi's 'used / total' cell: used padded to 5, then '/ total'."""
    return f"{used:<5}/ {total:<{width - 7}}"


def device_stats(runtime: Runtime, dev: Device) -> dict:
    """The numbers behind one device's rows (all derived deterministically from the runtime)."""
    now = max(runtime.host_ns, runtime.engine.now_ns)
    t0 = max(0, now - WINDOW_NS)
    u = core_utilisation(runtime, dev.aicore, t0, now) if now > t0 else 0.0
    idle_w, max_w, idle_c, max_c = THERMALS.get(runtime.profile.name, _FALLBACK)
    heap = dev.heap
    return {
        "aicore_util": u,
        "aicore_percent": round(100 * u),
        "power_w": round(idle_w + u * (max_w - idle_w), 1),
        "temp_c": round(idle_c + u * (max_c - idle_c)),
        "huge_pages_used": heap.huge_held // HUGE_PAGE,
        "huge_pages_total": heap.huge_total // HUGE_PAGE,
        "memory_used_mb": ceil_div(heap.driver_held_bytes, MiB),
        "memory_total_mb": heap.total_bytes // MiB,
        "window_ns": (t0, now),
    }


def _device_rows(runtime: Runtime, dev: Device, hbm: bool) -> list[str]:
    st = device_stats(runtime, dev)
    name = dev.profile.soc_name.removeprefix("Ascend")
    huge = _pair(st["huge_pages_used"], st["huge_pages_total"], 21)
    used, total = st["memory_used_mb"], st["memory_total_mb"]
    mem = _pair(0, 0, 18) + _pair(used, total, 21) if hbm else _pair(used, total, 39)
    return [
        _row(f" {dev.id:<6}{name}", " OK", f" {st['power_w']:<12}{st['temp_c']:<18}{huge}"),
        _row(" 0", f" 0000:{dev.id + 1:02X}:00.0", f" {st['aicore_percent']:<12}{mem}"),
    ]


def _memory_section(devs: list) -> list[str]:
    lines = ["acllab: two views of device memory (npu-smi above shows the driver's view)"]
    for dev in devs:
        heap = dev.heap
        live = list(heap.live.values())
        if not live and not heap.driver_held_bytes:
            lines.append(f"  NPU {dev.id}: no device memory allocated, cached or held")
            continue
        pages = sum(r.reserved for r in live)
        cached = sum(len(blocks) for blocks in heap.pool.values())
        lines += [
            f"  NPU {dev.id}: runtime-allocated {heap.runtime_used_bytes:>15,} B in "
            f"{len(live)} live block(s) ({pages:,} B of pages)",
            f"         cached in the pool {heap.cached_bytes:>14,} B in {cached} freed "
            "block(s) the runtime keeps for reuse",
            f"         driver-held        {heap.driver_held_bytes:>14,} B "
            f"= {ceil_div(heap.driver_held_bytes, MiB)} MB (live pages + cached"
            f" + {heap.reserved_bytes:,} B reserved by models)",
        ]
    lines += [
        "  acl.rt.free puts a block back into the runtime's caching pool, not into the driver,",
        "  so Memory-Usage above does not drop after free; a new malloc of the same size reuses",
        "  the block. The pool goes back to the driver at reset_device, or when an allocation",
        "  would otherwise fail.",
        "  Power and temperature are simulated: idle + u x (max - idle), u = AI Core occupancy",
        "  over the last 1 ms of virtual time.",
    ]
    return lines


def smi_text(runtime: Runtime, all_devices: bool = False) -> str:
    """An ``npu-smi info``-like table of the open devices (all of them with ``all_devices``)."""
    devs = [d for d in runtime.devices if all_devices or d.open]
    hbm = runtime.profile.memory_kind == "HBM"
    head = "npu-smi " + __version__
    lines = [_WIDE, f"| {head:<33}{'Version: ' + __version__ + ' (acllab, simulated)':<62}|",
             _RULE,
             _row(" NPU   Name", " Health", " Power(W)    Temp(C)           Hugepages-Usage(page)"),
             _row(" Chip", " Bus-Id", " AICore(%)   Memory-Usage(MB)"
                  + ("  HBM-Usage(MB)" if hbm else "")),
             _DOUBLE]
    for dev in devs:
        lines += _device_rows(runtime, dev, hbm)
        lines.append(_DOUBLE)
    if not devs:
        lines += [_wide("No NPU is open: call acl.rt.set_device(id) (or use all_devices=True)"),
                  _DOUBLE]
    procs = f" {'Process name':<25}| Process memory(MB)"
    lines += [_RULE, _row(" NPU     Chip", " Process id", procs), _DOUBLE]
    for dev in devs:
        if dev.open:
            mb = ceil_div(dev.heap.driver_held_bytes, MiB)
            lines.append(_row(f" {dev.id:<8}0", f" {SIM_PID}", f" {'python':<25}| {mb}"))
        else:
            lines.append(_wide(f"No running processes found in NPU {dev.id}"))
        lines.append(_DOUBLE)
    if not devs:
        lines += [_wide("No running processes found"), _DOUBLE]
    lines.append("")
    lines += _memory_section(devs)
    return "\n".join(lines)
