"""What-if runs of the seed's serial and double-stream loops (the pure half of PipelineExplorer).

:func:`run_pipeline` is a pure function of its settings: it compiles ResNet-50 at the chosen
batch size (once per size), runs :func:`acllab.scenarios.serial_loop` and
:func:`acllab.scenarios.double_stream_loop` in throwaway runtimes on a card changed as the
settings say (``acllab.session.override``), and returns what they measured, with both
runtimes for their timelines. The caller's own runtime is untouched.

The seed's 1,000 batches, in the time of a few. Both loops are periodic: after a short
warm-up (one batch for the serial loop, two for the double-stream loop), every batch is the
one before it shifted by a fixed period, to the nanosecond: the same host calls at the same
offsets, the same tasks on the same engines at the same offsets, the same durations. So for
more than :data:`WINDOW` batches, each loop runs :data:`WINDOW` batches, the trace is checked
for that period (the last three batches before the loop's final one must be identical, task
for task, else the window doubles, up to the whole run), and every figure is extended by the
missing periods exactly: the elapsed time by the period, the AI Core's busy time by its busy
time in one period, the copy times by the copies of one period. The figures are those of a
full simulation (tests/test_pipeline_scale.py compares them with the scenario's own loops at
1,000 batches); the runtimes, the timelines and the sanitizer's findings are those of the
simulated batches (:attr:`PipelineRun.simulated_batches`), and say so.

Results are memoised per settings (the last :data:`CACHE_SIZE`), and shared: a second call
with the same settings returns the same :class:`PipelineRun`, whose figures cannot be changed
(frozen dataclasses; findings are handed out as copies). The two runtimes are shared too:
read them, do not drive them.

Settings: ``batch`` (images per batch; host work scales with it), ``link_gbps`` (PCIe
bandwidth each way, pinned), ``compute_scale`` (multiplies the AI Core's compute and memory
time; per-kernel dispatch stays), ``buffers`` (1 is the seed's original single input buffer,
which races; 2 is the fix), ``huge_pages`` (False: every buffer in 4 KB pages).
"""

from __future__ import annotations

import copy
import html
import tempfile
import warnings
from dataclasses import FrozenInstanceError, dataclass, field, fields, replace
from functools import lru_cache
from statistics import mean

from .. import session
from ..analysis import trace
from ..hardware import PROFILES
from ..memory import reserved_bytes
from ..model import compile_model, execute_ns, load, save
from ..runtime import DEFAULT_BUDGETS
from . import scenarios

__all__ = ["PipelineSettings", "PipelineRun", "Comparison", "run_pipeline", "BATCH_SIZES",
           "MAX_BATCHES", "WINDOW", "CACHE_SIZE"]

BATCH_SIZES = (1, 2, 4, 8, 16, 32, 64)
MAX_BATCHES = scenarios.SEED.batches     # the seed's 1,000
WINDOW = 8          # batches each loop simulates when it runs more (then its period extends it)
CACHE_SIZE = 4      # memoised results (each holds its two runtimes, their host buffers too)


@dataclass(frozen=True)
class PipelineSettings:
    """What the sliders choose (the defaults are the seed's card and scenario)."""

    batch: int = 32
    link_gbps: float = PROFILES["ascend310"].h2d_bandwidth_bps / 1e9
    compute_scale: float = 1.0
    buffers: int = 2
    huge_pages: bool = True
    batches: int = MAX_BATCHES

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
        if not 2 <= self.batches <= MAX_BATCHES:
            raise ValueError(f"batches must be between 2 and {MAX_BATCHES}, not "
                             f"{self.batches}")

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


@dataclass(frozen=True)
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


@dataclass(frozen=True)
class PipelineRun:
    """What :func:`run_pipeline` measured for one set of settings (frozen: results are shared).

    The figures are those of ``settings.batches`` batches. The runtimes hold the
    ``simulated_batches`` each loop really ran (all of them, or :data:`WINDOW` when the
    period extends them); ``period_ns`` is then each loop's period (serial, double-stream).
    """

    settings: PipelineSettings
    comparison: Comparison
    serial_runtime: object = field(repr=False)
    double_runtime: object = field(repr=False)
    execute_ns: int = 0             # K: one model run at these settings
    prepare_ns: int = 0             # P: host time to prepare one batch
    postprocess_ns: int = 0         # Q: host time to post-process one batch
    pageable_copy_ns: int = 0       # the serial loop's blocking copy of one input
    pinned_copy_ns: int = 0         # the double-stream loop's async copy of one input
    simulated_batches: int = 0      # batches each loop ran (0: all of settings.batches)
    period_ns: tuple[int, int] | None = None    # (serial, double-stream) when extended

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
        """What the sanitizer found in the double-stream run (leaks aside), as copies."""
        return [f for f in self.double.findings if f.kind != "leak"]

    @property
    def simulated(self) -> int:
        """Batches each loop really ran (its runtime's trace holds them)."""
        return self.simulated_batches or self.settings.batches

    @property
    def extended(self) -> bool:
        """True when the figures extend a shorter simulation by its period."""
        return self.simulated < self.settings.batches

    def describe(self) -> str:
        """One paragraph: the per-batch times and what the sanitizer says."""
        s = self.settings
        pages = "2 MB huge pages" if s.huge_pages else "4 KB pages"
        ran = ""
        if self.extended:
            serial, double = (p / 1e6 for p in self.period_ns)
            ran = (f" ({self.simulated} simulated, then each loop's period: serial "
                   f"{serial:.2f} ms, double-stream {double:.2f} ms a batch)")
        text = (f"batch {s.batch}, link {s.link_gbps:g} GB/s, AI Core time x{s.compute_scale:g}, "
                f"{s.buffers} input buffer{'s' if s.buffers > 1 else ''}, {pages}; "
                f"{s.batches:,} batches{ran}. Per batch: prepare {self.prepare_ns / 1e6:.2f} ms, "
                "copy "
                f"{self.pageable_copy_ns / 1e6:.2f} ms pageable (serial) or "
                f"{self.pinned_copy_ns / 1e6:.2f} ms pinned (double-stream), model "
                f"{self.execute_ns / 1e6:.2f} ms, post-process {self.postprocess_ns / 1e6:.2f} ms. "
                f"Double-stream vs serial: {self.speedup - 1:+.1%}.")
        found = self.findings
        where = f" (its {self.simulated} simulated batches)" if self.extended else ""
        if found:
            kinds = ", ".join(sorted({f.kind for f in found}))
            text += (f" Sanitizer: {len(found)} problem(s) in the double-stream run{where} "
                     f"({kinds}).")
        else:
            text += f" Sanitizer: no problems in the double-stream run{where}."
        return text


class FrozenLoop(scenarios.LoopResult):
    """A :class:`acllab.teaching.scenarios.LoopResult` that cannot be changed.

    Memoised runs are shared between callers, so their loop results are read-only: assigning
    a field raises ``FrozenInstanceError``, and ``findings`` hands out copies.
    """

    def __init__(self, images_per_s: float, aicore_utilisation: float, device_bytes_used: int,
                 findings=()):
        for name, value in (("images_per_s", images_per_s),
                            ("aicore_utilisation", aicore_utilisation),
                            ("device_bytes_used", device_bytes_used),
                            ("_findings", tuple(copy.deepcopy(list(findings))))):
            object.__setattr__(self, name, value)

    @property
    def findings(self) -> list:
        return copy.deepcopy(list(self._findings))

    def __setattr__(self, name, value):
        raise FrozenInstanceError(f"cannot assign to field {name!r} of a shared LoopResult")

    def __delattr__(self, name):
        raise FrozenInstanceError(f"cannot delete field {name!r} of a shared LoopResult")

    def __eq__(self, other):
        if not isinstance(other, scenarios.LoopResult):
            return NotImplemented
        return all(getattr(self, f.name) == getattr(other, f.name)
                   for f in fields(scenarios.LoopResult))

    __hash__ = None


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
    the same numbers, and (memoised) the same :class:`PipelineRun` object. Past
    :data:`WINDOW` batches the loops run :data:`WINDOW` batches and their periods give the
    rest (see the module's docstring): the figures are a full simulation's, the runtimes
    hold the simulated batches.
    """
    return _memoised(replace(settings or PipelineSettings(), **changes))


@lru_cache(maxsize=CACHE_SIZE)
def _memoised(settings: PipelineSettings) -> PipelineRun:
    n = settings.batches
    window = min(n, WINDOW)
    while True:
        loops = _simulate(settings, window)
        if window == n:
            return _result(settings, loops, n, None)
        steady = [_Steady.of(runtime, result, window, settings.seed())
                  for result, runtime in loops]
        if all(steady):
            return _result(settings, loops, n, steady)
        window = min(n, 2 * window)     # no period found yet: simulate more


def _simulate(settings: PipelineSettings, batches: int) -> list[tuple]:
    """[(serial result, its runtime), (double-stream result, its runtime)] for ``batches``."""
    seed = settings.seed()
    path = _model_path(settings.batch)
    profile = settings.profile()
    overrides = {      # every setting spelled out: nothing the learner configured leaks in
        "profile": profile, "device_count": profile.device_count,
        "hugepage_pool_bytes": profile.hugepage_pool_bytes if settings.huge_pages else 0,
        "strict": False, "record": True, "sanitize": False, **DEFAULT_BUDGETS,
        "stop_after_finalize": False}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with session.override(**overrides):
            serial = scenarios.serial_loop(path, batches, seed)
            serial_rt = session.current_runtime()
            double = scenarios.double_stream_loop(path, batches, seed,
                                                  single_buffer=settings.buffers == 1)
            double_rt = session.current_runtime()
    return [(serial, serial_rt), (double, double_rt)]


def _result(settings: PipelineSettings, loops, n: int, steady) -> PipelineRun:
    seed = settings.seed()
    (serial, serial_rt), (double, double_rt) = loops
    if steady is None:
        serial_loop, double_loop = FrozenLoop(**_fields(serial)), FrozenLoop(**_fields(double))
        copies = _blocking_spans(serial_rt), _async_spans(double_rt, seed.input_bytes)
        simulated, periods = 0, None
    else:
        serial_loop, double_loop = (s.extend(n, r.device_bytes_used, r.findings)
                                    for s, (r, _) in zip(steady, loops, strict=True))
        copies = (steady[0].extend_spans(_blocking_spans(serial_rt), n,
                                         _blocking_spans(serial_rt, steady[0].period)),
                  steady[1].extend_spans(_async_spans(double_rt, seed.input_bytes), n,
                                         _async_spans(double_rt, seed.input_bytes,
                                                      steady[1].period)))
        simulated, periods = steady[0].batches, (steady[0].period_ns, steady[1].period_ns)
    path = _model_path(settings.batch)
    k_ns = execute_ns(load(path), profile=settings.profile(), huge_pages=settings.huge_pages)
    comparison = Comparison(serial_loop, double_loop, seed.input_bytes, settings.is_seed,
                            settings.huge_pages)
    pageable, pinned = copies
    return PipelineRun(settings, comparison, serial_rt, double_rt, k_ns, seed.prepare_ns,
                       seed.postprocess_ns, _mean(sorted(pageable, reverse=True)[:n]),
                       _mean(pinned), simulated, periods)


def _fields(result: scenarios.LoopResult) -> dict:
    return {f.name: getattr(result, f.name) for f in fields(scenarios.LoopResult)}


def _mean(spans: list[int]) -> int:
    return int(mean(spans)) if spans else 0


def _blocking_spans(runtime, window: tuple[int, int] | None = None) -> list[int]:
    """The host's blocking memcpy calls (in ``window`` of host time, if given), as spans.

    The serial loop makes two a batch: the input's (the longest) and the scores'; the mean
    of the longest ``batches`` is the pageable copy of one input."""
    lo, hi = window or (-1, 1 << 62)
    return [end - start for name, start, end, _ in runtime.api_log
            if name == "memcpy" and lo <= start < hi]


def _async_spans(runtime, nbytes: int, window: tuple[int, int] | None = None) -> list[int]:
    """Durations of the host-to-device copies of one whole input (submitted in ``window``)."""
    lo, hi = window or (-1, 1 << 62)
    return [t.end_ns - t.start_ns for t in runtime.tasks if t.kind == "memcpy"
            and (t.info or {}).get("direction") == "h2d" and t.nbytes == nbytes
            and t.end_ns >= 0 and lo <= t.submit_ns < hi]


_PREPARE = "host: prepare batch"     # the label both loops give each batch's host work
_STEADY = 3                          # identical batches in a row that make a period


@dataclass(frozen=True)
class _Steady:
    """One loop's steady state, read off its trace: what every further batch adds.

    The trace is cut into batches at the host's ``prepare batch`` work (one a batch, in both
    loops). A batch's signature is its host calls and the tasks submitted during it, every
    time relative to its start. If the last :data:`_STEADY` batches before the final one
    have the same signature (and the AI Core the same busy time in each), the loop has
    reached its period: a batch more adds ``period_ns`` to the elapsed time, ``busy_ns`` to
    the AI Core's, and the copies of one batch.
    """

    batches: int                  # batches simulated
    images_per_batch: int
    elapsed_ns: int               # from the loop's start event to its end event
    busy_ns: int                  # the AI Core's, in that span
    period_ns: int
    period_busy_ns: int
    period: tuple[int, int]       # one steady batch, in host time [start, end)

    @classmethod
    def of(cls, runtime, result, batches: int, seed) -> _Steady | None:
        """The steady state of ``runtime``'s loop, or None when the trace shows no period
        (or when re-reading the trace does not give ``result``'s figures exactly)."""
        starts = [s for name, s, _, _ in runtime.api_log if name == _PREPARE]
        records = [t for t in runtime.tasks if t.kind == "event_record" and
                   t.api == "record_event"]
        if len(starts) != batches or batches < _STEADY + 1 or len(records) < 2:
            return None
        t0, t1 = records[0].end_ns, records[-1].end_ns   # _measure's start and end events
        elapsed, busy = t1 - t0, trace.busy_ns(runtime, "aicore", t0, t1)
        if elapsed <= 0 or _figures(batches * seed.batch, elapsed, busy) != (
                result.images_per_s, result.aicore_utilisation):
            return None                 # the scenario measures otherwise: do not extend it
        bounds = [*starts, 1 << 62]
        steady = range(batches - 1 - _STEADY, batches - 1)      # the last before the final
        sigs = [_signature(runtime, bounds[i], bounds[i + 1]) for i in steady]
        periods = {bounds[i + 1] - bounds[i] for i in steady}
        busy_each = {trace.busy_ns(runtime, "aicore", bounds[i], bounds[i + 1])
                     for i in steady}
        if any(sig != sigs[0] for sig in sigs) or len(periods) != 1 or len(busy_each) != 1:
            return None
        last = steady[-1]
        return cls(batches, seed.batch, elapsed, busy, periods.pop(), busy_each.pop(),
                   (bounds[last], bounds[last + 1]))

    def extend(self, n: int, device_bytes_used: int, findings) -> FrozenLoop:
        """The loop's figures for ``n`` batches: ``n - batches`` more periods."""
        more = n - self.batches
        images_per_s, util = _figures(n * self.images_per_batch,
                                      self.elapsed_ns + more * self.period_ns,
                                      self.busy_ns + more * self.period_busy_ns)
        return FrozenLoop(images_per_s, util, device_bytes_used, findings)

    def extend_spans(self, spans: list[int], n: int, per_batch: list[int]) -> list[int]:
        """``spans`` of the simulated batches plus those of ``n - batches`` steady ones."""
        return spans + per_batch * (n - self.batches)


def _figures(images: int, elapsed_ns: int, busy_ns: int) -> tuple[float, float]:
    """Images per second and AI Core utilisation, computed as the scenario's ``_measure``
    does (event_elapsed_time's milliseconds, trace.utilisation's busy / window)."""
    ms = elapsed_ns / 1e6
    return images / (ms / 1000), busy_ns / elapsed_ns


def _signature(runtime, lo: int, hi: int) -> tuple:
    """The host calls and submitted tasks of [lo, hi) of host time, relative to ``lo``."""
    calls = tuple((name, s - lo, e - lo, ret) for name, s, e, ret in runtime.api_log
                  if lo <= s < hi)
    tasks = tuple((t.name, t.kind, t.api, t.stream.name if t.stream is not None else None,
                   t.resource.name if t.resource is not None else None, t.nbytes, t.flops,
                   t.submit_ns - lo, t.ready_ns - lo, t.start_ns - lo, t.end_ns - lo,
                   t.cancelled)
                  for t in runtime.tasks if lo <= t.submit_ns < hi)
    return calls, tasks
