"""What-if runs of the seed's serial and double-stream loops (the pure half of PipelineExplorer).

:func:`run_pipeline` is a pure function of its settings: it compiles ResNet-50 at the chosen
batch size (once per size), runs :func:`acllab.scenarios.serial_loop` and
:func:`acllab.scenarios.double_stream_loop` in throwaway runtimes on a card changed as the
settings say (``acllab.session.override``), and returns what they measured, with both
runtimes for their timelines. The caller's own runtime is untouched.

Settings: ``batch`` (images per batch; host work scales with it), ``link_gbps`` (PCIe
bandwidth each way, pinned), ``compute_scale`` (multiplies the AI Core's compute and memory
time; per-kernel dispatch stays), ``buffers`` (1 is the seed's original single input buffer,
which races; 2 is the fix), ``huge_pages`` (False: every buffer in 4 KB pages).
"""

from __future__ import annotations

import html
import tempfile
import warnings
from dataclasses import dataclass, field, replace
from statistics import mean

from .. import session
from ..hardware import PROFILES
from ..memory import reserved_bytes
from ..model import compile_model, execute_ns, load, save
from . import scenarios

__all__ = ["PipelineSettings", "PipelineRun", "Comparison", "run_pipeline", "BATCH_SIZES"]

BATCH_SIZES = (1, 2, 4, 8, 16, 32, 64)


@dataclass(frozen=True)
class PipelineSettings:
    """What the sliders choose (the defaults are the seed's card and scenario)."""

    batch: int = 32
    link_gbps: float = PROFILES["ascend310"].h2d_bandwidth_bps / 1e9
    compute_scale: float = 1.0
    buffers: int = 2
    huge_pages: bool = True
    batches: int = 12

    def __post_init__(self):
        if self.batch not in BATCH_SIZES:
            raise ValueError(f"batch must be one of {BATCH_SIZES}, not {self.batch}")
        if not 0.5 <= self.link_gbps <= 64:
            raise ValueError(f"link_gbps must be between 0.5 and 64, not {self.link_gbps}")
        if not 0.1 <= self.compute_scale <= 10:
            raise ValueError(f"compute_scale must be between 0.1 and 10, not "
                             f"{self.compute_scale}")
        if self.buffers not in (1, 2):
            raise ValueError(f"buffers must be 1 (the seed's code) or 2, not {self.buffers}")
        if not 2 <= self.batches <= 200:
            raise ValueError(f"batches must be between 2 and 200, not {self.batches}")

    @property
    def is_seed(self) -> bool:
        """True when card and scenario are the seed's (the S5, S6 and S8 bands apply)."""
        default = PipelineSettings(batches=self.batches)
        return self == default

    def profile(self):
        """The device profile these settings describe."""
        base = PROFILES["ascend310"]
        s = self.compute_scale
        link = int(self.link_gbps * 1e9)
        return base.replace(h2d_bandwidth_bps=link, d2h_bandwidth_bps=link,
                            peak_int8_ops=base.peak_int8_ops / s,
                            peak_fp16_flops=base.peak_fp16_flops / s,
                            memory_bandwidth_bps=base.memory_bandwidth_bps / s)

    def seed(self) -> scenarios.SeedConstants:
        """The scenario at this batch size: host work per image as in the seed."""
        b, base = self.batch, scenarios.SEED
        return replace(base, batch=b, prepare_ns=base.prepare_ns * b // base.batch,
                       postprocess_ns=base.postprocess_ns * b // base.batch)


@dataclass
class Comparison:
    """The serial and the double-stream loop side by side: the seed's S5, S6 and S8."""

    serial: scenarios.LoopResult
    double: scenarios.LoopResult
    input_bytes: int
    seed_bands: bool = True          # False when the card or the scenario is not the seed's
    huge_pages: bool = True          # False when the huge-page pool is empty

    @property
    def speedup(self) -> float:
        return self.double.images_per_s / self.serial.images_per_s

    @property
    def one_buffer_bytes(self) -> int:
        """One input buffer as malloc rounds it: whole 2 MB huge pages (HUGE_FIRST, above
        1 MiB, when the pool has them), else whole 4 KB pages."""
        return reserved_bytes(self.input_bytes, huge_pages=self.huge_pages)

    def rows(self) -> list[dict]:
        """One dict per figure: id, figure, serial, double, change, seed band, ok."""
        s, d = self.serial, self.double
        lo5, hi5 = scenarios.BANDS["S5"]
        s6 = scenarios.BANDS["S6s"]
        d6 = scenarios.BANDS["S6d"]
        extra = d.device_bytes_used - s.device_bytes_used
        rows = [
            {"id": "S5", "figure": "throughput", "serial": f"{s.images_per_s:,.0f} img/s",
             "double": f"{d.images_per_s:,.0f} img/s", "change": f"{self.speedup - 1:+.1%}",
             "band": f"+{lo5:.0%} to +{hi5:.0%}", "ok": lo5 <= self.speedup - 1 <= hi5},
            {"id": "S6", "figure": "AI Core busy", "serial": f"{s.aicore_utilisation:.1%}",
             "double": f"{d.aicore_utilisation:.1%}",
             "change": f"{(d.aicore_utilisation - s.aicore_utilisation) * 100:+.1f} points",
             "band": f"{s6[0]:.0%}-{s6[1]:.0%} -> {d6[0]:.0%}-{d6[1]:.0%}",
             "ok": s6[0] <= s.aicore_utilisation <= s6[1]
             and d6[0] <= d.aicore_utilisation <= d6[1]},
            {"id": "S8", "figure": "device memory",
             "serial": f"{s.device_bytes_used / 2**20:,.1f} MiB",
             "double": f"{d.device_bytes_used / 2**20:,.1f} MiB", "change": f"{extra:+,} B",
             "band": f"one more input buffer ({self.one_buffer_bytes:,} B)",
             "ok": extra == self.one_buffer_bytes},
        ]
        if not self.seed_bands:
            for row in rows:
                row["ok"] = None
        return rows

    def __repr__(self) -> str:
        return (f"<Comparison: serial {self.serial.images_per_s:,.0f} img/s -> double-stream "
                f"{self.double.images_per_s:,.0f} img/s ({self.speedup - 1:+.1%})>")

    def __str__(self) -> str:
        lines = [f"{'':4}{'':15}{'serial':>18}{'double-stream':>18}{'change':>20}   seed"]
        for r in self.rows():
            mark = {True: "ok", False: "OUTSIDE", None: "(not the seed's settings)"}[r["ok"]]
            lines.append(f"{r['id']:4}{r['figure']:15}{r['serial']:>18}{r['double']:>18}"
                         f"{r['change']:>20}   {r['band']} {mark}")
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        esc = html.escape
        mark = {True: "&#10004;", False: "&#10008; outside", None: ""}
        body = "".join(
            f"<tr><td>{r['id']}</td><td>{esc(r['figure'])}</td><td>{esc(r['serial'])}</td>"
            f"<td>{esc(r['double'])}</td><td>{esc(r['change'])}</td>"
            f"<td>{esc(r['band']) if r['ok'] is not None else ''} {mark[r['ok']]}</td></tr>"
            for r in self.rows())
        head = ("<tr><th></th><th></th><th>serial loop</th><th>double-stream</th><th>change</th>"
                f"<th>{'seed (band)' if self.seed_bands else ''}</th></tr>")
        return f'<table class="acllab-comparison">{head}{body}</table>'


@dataclass
class PipelineRun:
    """What :func:`run_pipeline` measured for one set of settings."""

    settings: PipelineSettings
    comparison: Comparison
    serial_runtime: object = field(repr=False)
    double_runtime: object = field(repr=False)
    execute_ns: int = 0             # K: one model run at these settings
    prepare_ns: int = 0             # P: host time to prepare one batch
    postprocess_ns: int = 0         # Q: host time to post-process one batch
    pageable_copy_ns: int = 0       # the serial loop's blocking copy of one input
    pinned_copy_ns: int = 0         # the double-stream loop's async copy of one input

    @property
    def serial(self) -> scenarios.LoopResult:
        return self.comparison.serial

    @property
    def double(self) -> scenarios.LoopResult:
        return self.comparison.double

    @property
    def speedup(self) -> float:
        """Double-stream throughput / serial throughput."""
        return self.comparison.speedup

    @property
    def findings(self) -> list:
        """What the sanitizer found in the double-stream run (leaks aside)."""
        return [f for f in self.double.findings if f.kind != "leak"]

    def describe(self) -> str:
        """One paragraph: the per-batch times and what the sanitizer says."""
        s = self.settings
        pages = "2 MB huge pages" if s.huge_pages else "4 KB pages"
        text = (f"batch {s.batch}, link {s.link_gbps:g} GB/s, AI Core time x{s.compute_scale:g}, "
                f"{s.buffers} input buffer{'s' if s.buffers > 1 else ''}, {pages}; "
                f"{s.batches} batches. Per batch: prepare {self.prepare_ns / 1e6:.2f} ms, copy "
                f"{self.pageable_copy_ns / 1e6:.2f} ms pageable (serial) or "
                f"{self.pinned_copy_ns / 1e6:.2f} ms pinned (double-stream), model "
                f"{self.execute_ns / 1e6:.2f} ms, post-process {self.postprocess_ns / 1e6:.2f} ms. "
                f"Double-stream vs serial: {self.speedup - 1:+.1%}.")
        found = self.findings
        if found:
            kinds = ", ".join(sorted({f.kind for f in found}))
            text += f" Sanitizer: {len(found)} problem(s) in the double-stream run ({kinds})."
        else:
            text += " Sanitizer: no problems in the double-stream run."
        return text


_MODELS: dict[int, str] = {}
_MODEL_DIR: tempfile.TemporaryDirectory | None = None


def _model_path(batch: int) -> str:
    """ResNet-50 compiled at a fixed batch size (once per size, in a temporary folder)."""
    global _MODEL_DIR
    if batch not in _MODELS:
        if _MODEL_DIR is None:
            _MODEL_DIR = tempfile.TemporaryDirectory(prefix="acllab-explorer-")
        compiled = compile_model("zoo:resnet50", input_shape=f"data:{batch},3,224,224",
                                 soc_version="Ascend310")
        path = f"{_MODEL_DIR.name}/resnet50_fixed{batch}.om"
        save(compiled, path)
        _MODELS[batch] = path
    return _MODELS[batch]


def run_pipeline(settings: PipelineSettings | None = None, **changes) -> PipelineRun:
    """Run the seed's serial and double-stream loops with ``settings``; return the results.

    Each loop runs in a fresh runtime on the card the settings describe; the runtime that was
    live before (the learner's) is put back afterwards. Deterministic: the same settings give
    the same numbers.
    """
    settings = replace(settings or PipelineSettings(), **changes)
    seed = settings.seed()
    path = _model_path(settings.batch)
    profile = settings.profile()
    overrides = {      # every setting spelled out: nothing the learner configured leaks in
        "profile": profile, "device_count": profile.device_count,
        "hugepage_pool_bytes": profile.hugepage_pool_bytes if settings.huge_pages else 0,
        "strict": False, "record": True, "sanitize": False, "task_budget": 5_000_000,
        "call_budget": 20_000_000, "time_budget_ns": 24 * 3600 * 1_000_000_000}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with session.override(**overrides):
            serial = scenarios.serial_loop(path, settings.batches, seed)
            serial_rt = session.current_runtime()
            double = scenarios.double_stream_loop(path, settings.batches, seed,
                                                  single_buffer=settings.buffers == 1)
            double_rt = session.current_runtime()
    k_ns = execute_ns(load(path), profile=profile, huge_pages=settings.huge_pages)
    comparison = Comparison(serial, double, seed.input_bytes, settings.is_seed,
                            settings.huge_pages)
    return PipelineRun(settings, comparison,
                       serial_rt, double_rt, k_ns, seed.prepare_ns, seed.postprocess_ns,
                       _blocking_copy_ns(serial_rt, settings.batches),
                       _async_copy_ns(double_rt, seed.input_bytes))


def _blocking_copy_ns(runtime, batches: int) -> int:
    """The mean of the longest ``batches`` blocking memcpy calls (the inputs' copies)."""
    spans = sorted((end - start for name, start, end, _ in runtime.api_log if name == "memcpy"),
                   reverse=True)[:batches]
    return int(mean(spans)) if spans else 0


def _async_copy_ns(runtime, nbytes: int) -> int:
    """The mean duration of the host-to-device copies of one whole input."""
    spans = [t.end_ns - t.start_ns for t in runtime.tasks if t.kind == "memcpy"
             and (t.info or {}).get("direction") == "h2d" and t.nbytes == nbytes
             and t.end_ns >= 0]
    return int(mean(spans)) if spans else 0
