"""Helpers the lesson checks share: formatting, naming pyACL calls, bytes, teardown and items.

Each lesson module grades its own exercises; what they all do the same way lives here, once:

* formatting: :func:`format_us`, :func:`format_hex`, :func:`join_first`, :func:`short_repr`;
* names and values: :func:`qualified` ('malloc' -> 'acl.rt.malloc'), :func:`is_int`;
* bytes: :func:`first_difference`, :func:`uninit_pattern`, :func:`reads_uninit` and
  :func:`describe_bytes`, which explain why bytes are wrong without showing the right ones;
* the caller's side of a case: :func:`new_case` after the learner's call, :func:`teardown`
  (with :func:`release_each`) at its end;
* the items most checks grade: :func:`sanitizer_item` (over :func:`hazards`) and
  :func:`resources_item` (with :func:`released_item` and :func:`leak_texts`);
* provenance: :class:`Provenance` records what every task wrote, so a check can verify that
  the bytes it grades were computed on the device (and carried by copies), not on the host.

Where lessons word a message differently, the wording is a parameter: every lesson keeps its
own text. Pure Python: numpy and the acllab core, no Jupyter or plotting module.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .. import acl
from ..analysis import sanitizer
from ..memory import UNINIT_PATTERN
from ..sanitizer import Finding
from . import PROCESS, RESULT, Call, Case, Item

__all__ = ["format_us", "format_hex", "join_first", "short_repr", "qualified", "is_int",
           "first_difference", "uninit_pattern", "device_bytes", "reads_uninit", "BytesWording",
           "describe_bytes", "new_case", "Release", "release_each", "teardown", "hazards",
           "finding_line", "sanitizer_item", "leak_texts", "released_item", "resources_item",
           "Write", "Piece", "Provenance", "last_writes", "again_item", "again_outcome",
           "HAZARDS", "count_for"]


# -- formatting --------------------------------------------------------------------------------

def format_us(ns: float) -> str:
    """Nanoseconds as microseconds with one decimal: 12_345 -> '12.3 us'."""
    return f"{ns / 1000:,.1f} us"


def format_hex(data: bytes) -> str:
    """Bytes as spaced upper-case hex pairs: b'\\xde\\xad' -> 'DE AD'."""
    return " ".join(f"{b:02X}" for b in data)


def join_first(texts: Sequence[str], limit: int, *, sep: str = "; ",
               more: str = "; and {n} more") -> str:
    """The first ``limit`` of ``texts`` joined by ``sep``; then ``more`` (its ``{n}``: how many
    were left out) if any were. ``more=""`` leaves the rest out silently."""
    text = sep.join(texts[:limit])
    if len(texts) > limit:
        text += more.format(n=len(texts) - limit)
    return text


def short_repr(value: Any, width: int = 70, ellipsis: str = "...") -> str:
    """``repr(value)``, cut to ``width`` characters (ending in ``ellipsis``) if it is longer."""
    text = repr(value)
    return text if len(text) <= width else text[:width - len(ellipsis)] + ellipsis


# -- names and values --------------------------------------------------------------------------

def qualified(name: str) -> str:
    """A pyACL call as the learner writes it: 'create_context' -> 'acl.rt.create_context'.

    The api log keeps bare names; host actions logged as 'host:...' are returned unchanged.
    """
    if name.startswith("host:"):
        return name
    for module in ("rt", "mdl", "util"):
        if name in getattr(getattr(acl, module), "__all__", ()):
            return f"acl.{module}.{name}"
    return f"acl.{name}"


def is_int(value: Any) -> bool:
    """Whether ``value`` is an integer (Python or numpy), bools excluded."""
    return isinstance(value, (int, np.integer)) and not isinstance(value, bool)


# -- bytes -------------------------------------------------------------------------------------

def first_difference(got: bytes, want: bytes) -> int:
    """The index of the first byte where ``got`` and ``want`` (equally long, not equal) differ."""
    if len(got) != len(want):
        raise ValueError(f"cannot compare {len(got)} bytes with {len(want)} byte by byte")
    return int(np.flatnonzero(np.frombuffer(got, np.uint8) != np.frombuffer(want, np.uint8))[0])


def uninit_pattern(offset: int, n: int) -> bytes:
    """The ``n`` bytes that memory nothing has written holds from byte ``offset`` of a buffer
    on: DE AD BE EF repeated, aligned to the buffer's start."""
    return (UNINIT_PATTERN * (n // 4 + 2))[offset % 4:offset % 4 + n]


def device_bytes(runtime, ptr: int, n: int) -> bytes:
    """The ``n`` bytes at device address ``ptr`` now, read directly (no task, no host access
    logged): what a check reads of a learner's output buffers; unwritten bytes (and a buffer
    that is gone) read as the uninitialised pattern."""
    region = runtime.region(ptr)
    if region is None:
        return uninit_pattern(0, n)
    return region.read_bytes(ptr - region.start, n)


def reads_uninit(got: bytes, at: int, span: int | None = None) -> bool:
    """Whether ``got`` holds the uninitialised pattern from byte ``at`` on: up to its end, or
    for ``span`` bytes (fewer where ``got`` ends sooner)."""
    n = len(got) - at if span is None else min(span, len(got) - at)
    return got[at:at + n] == uninit_pattern(at, n)


@dataclass(frozen=True)
class BytesWording:
    """How a lesson words :func:`describe_bytes`'s findings (``str.format`` templates).

    The fields a template may use: ``what`` (the bytes described), ``got`` and ``want`` (the
    lengths), ``name`` (the other buffer matched), ``at`` (the first wrong byte) and ``sample``
    (up to 8 bytes from there, in hex). ``empty`` is None where empty bytes are simply too few;
    ``uninit`` is added when the wrong bytes are memory nothing has written, checked over
    ``uninit_span`` bytes (None: up to the end).
    """

    length: str
    differs: str
    uninit: str
    uninit_span: int | None = None
    empty: str | None = None
    other: str = "{what} holds {name}"


def describe_bytes(got: Any, want: bytes, what: str, others: dict[str, bytes] | None,
                   wording: BytesWording) -> str:
    """Why ``got`` is not ``want``, without showing ``want``; '' when they are equal.

    ``others`` names other buffers (name -> bytes) that ``got`` might hold instead.
    """
    if not isinstance(got, (bytes, bytearray)):
        return f"{what} is a {type(got).__name__}, not bytes"
    got = bytes(got)
    if got == want:
        return ""
    if not got and wording.empty is not None:
        return wording.empty.format(what=what)
    if len(got) != len(want):
        return wording.length.format(what=what, got=len(got), want=len(want))
    for name, other in (others or {}).items():
        if got == other:
            return wording.other.format(what=what, name=name)
    at = first_difference(got, want)
    text = wording.differs.format(what=what, at=at, sample=format_hex(got[at:at + 8]))
    if reads_uninit(got, at, wording.uninit_span):
        text += wording.uninit
    return text


# -- the caller's side of a case ---------------------------------------------------------------

def new_case(label: str, call: Call, runtime: Any = None) -> Case:
    """The case of one call of the learner's function: its warnings, and whether it was done."""
    return Case(label, warnings=call.warnings, runtime=runtime, not_done=call.not_done)


# (what to report if the release fails, '' for nothing; (the release function, its argument))
Release = tuple[str, tuple[Callable[[Any], int], Any]]


def release_each(what: str, release: Callable[[Any], int], handles: Iterable[Any]) -> list[Release]:
    """One :data:`Release` per handle; ``what`` may name the handle's index as ``{i}``."""
    return [(what.format(i=i), (release, h)) for i, h in enumerate(handles)]


def teardown(release: Iterable[Release] = (), *, device: int = 0, synchronize: bool = True,
             reset_failed: str = "", finalize_failed: str = "") -> list[str]:
    """The caller's teardown: synchronise the device, release what the caller owns, reset
    ``device`` and finalise pyACL.

    Returns what failed, i.e. what the learner released instead: the ``what`` of each release
    that did not return 0, then ``reset_failed`` and ``finalize_failed`` if those calls failed.
    Empty texts are not reported. ``synchronize=False`` when the caller has already waited (or
    never queued any work).
    """
    if synchronize:
        acl.rt.synchronize_device()
    failed = [what for what, (fn, arg) in release if fn(arg) != 0]
    if acl.rt.reset_device(device) != 0:
        failed.append(reset_failed)
    if acl.finalize() != 0:
        failed.append(finalize_failed)
    return [what for what in failed if what]


# -- the sanitizer item ------------------------------------------------------------------------

def hazards(runtime: Any) -> list[Finding]:
    """The sanitizer's findings on ``runtime``, leaks left out (the resources item has them)."""
    return [f for f in sanitizer.analyze(runtime) if f.kind != "leak"]


def finding_line(finding: Finding) -> str:
    """'[race] ...': one finding as a line of a sanitizer item."""
    return f"[{finding.kind}] {finding.message}"


#: The sanitizer's findings that make an answer wrong (a result item, :data:`RESULT`): the
#: program's outcome depends on timing (a race, a read before the copy finished, a write
#: while a copy reads, memory freed under a queued task, a read of never-written memory, a
#: wait that cannot be satisfied or waits on a stale record). Only ``pageable-async`` (a copy
#: that silently became synchronous: slow, not wrong), ``host-read-past-end`` (a copy that read
#: on past a host buffer: the result items show whether those bytes mattered) and leaks (the
#: resources item) are about how well it was done. Lessons 04 and 06 teach exactly this: the
#: race *is* the bug.
HAZARDS = frozenset({"host-read-before-sync", "host-write-while-read", "race",
                     "use-after-free", "uninitialised-read", "stale-event-wait",
                     "event-reset-while-waited", "wait-never-recorded", "model-two-streams"})


def sanitizer_item(findings: Sequence[Finding], clean: str, *, shown: int = 3,
                   line: Callable[[Finding], str] = finding_line,
                   more: str = "\n... and {n} more",
                   fix: Callable[[Finding], str] | None = None, kind: str = PROCESS) -> Item:
    """'sanitizer': passes with ``clean`` when there are no ``findings``.

    Otherwise it lists the first ``shown`` findings (hazards first), one ``line`` each, then
    ``more`` (see :func:`join_first`), with a hint for the first one: ``fix(first)``, or its
    own fix. A hazard among them (:data:`HAZARDS`) makes it a result item, whatever ``kind``
    says: a race is a wrong answer.
    """
    if not findings:
        return Item("sanitizer", True, clean, kind=kind)
    findings = sorted(findings, key=lambda f: f.kind not in HAZARDS)     # stable: hazards first
    first = findings[0]
    text = join_first([line(f) for f in findings], shown, sep="\n", more=more)
    return Item("sanitizer", False, text, fix(first) if fix is not None else first.fix,
                kind=RESULT if first.kind in HAZARDS else kind)


# -- case shapes ------------------------------------------------------------------------------

def count_for(rng, seed: int, lo: int, hi: int) -> int:
    """A count in ``[lo, hi)`` whose parity is the seed's (an odd seed, an odd count), so a
    set of cases holds both odd and even counts (see Exercise.edges)."""
    choices = [n for n in range(lo, hi) if n % 2 == seed % 2] or list(range(lo, hi))
    return int(rng.choice(choices))


# -- the second call ----------------------------------------------------------------------------

def again_outcome(function: str, call: Call, problem: str, what: str,
                  done: str = "returned the new results", hint: str = "") -> Item:
    """'again': called a second time in the same runtime with new ``what`` ('data', 'images'),
    ``function`` gave the right answer for them: ``problem`` is what was wrong ('' if nothing).

    A result item: an answer kept from an earlier call (a cache keyed by size, say) is a wrong
    answer, however right the first call was.
    """
    hint = hint or (f"compute the answer from what {function} is given on each call: a result "
                    "kept from an earlier call (a cache keyed by size, say) is wrong once the "
                    "data changes")
    said = f"called again in the same runtime with new {what}"
    if call.error is not None:
        return Item("again", False, f"{said}, {function} raised {call.error_text}", hint)
    if problem:
        return Item("again", False, f"{said}: {problem}", hint)
    return Item("again", True, f"{said}, {function} {done}")


def again_item(function: str, call: Call, want: bytes, what: str) -> Item:
    """'again': called a second time in the same runtime, with new data of the same size,
    ``function`` returned the new bytes ``want`` (so it computes, not remembers, its answer).
    ``what`` says what changed ('data', 'the bytes in dev_ptr')."""
    got = call.value
    if call.error is not None or (isinstance(got, (bytes, bytearray)) and bytes(got) == want):
        problem = ""
    elif isinstance(got, (bytes, bytearray)) and len(got) == len(want):
        at = next(i for i, (a, b) in enumerate(zip(got, want, strict=True)) if a != b)
        problem = f"{function} returned other bytes (from byte {at:,} on)"
    else:
        problem = f"{function} returned {short_repr(got)}"
    return again_outcome(function, call, problem, f"{what} of the same size",
                         "returned the new bytes")


# -- the resources item ------------------------------------------------------------------------

def leak_texts(leaks: Iterable[str], source: str = "") -> list[str]:
    """What each leak of ``runtime.leaks`` ('finalize: 1 stream ...') left behind.

    ``source`` is added to each, its ``{source}`` naming what found the leak, as in
    ``" (found at {source})"``.
    """
    out = []
    for leak in leaks:
        parts = leak.split(": ", 1)        # (what found it, what was left) or (what was left)
        out.append(parts[-1] + source.format(source=parts[0]))
    return out


def released_item(function: str, failed: Sequence[str], hint: str, kind: str = PROCESS) -> Item:
    """'resources' failed: ``function`` released ``failed``, things its caller owns."""
    return Item("resources", False,
                f"{function} released things that belong to its caller: " + "; ".join(failed),
                hint, kind=kind)


def resources_item(runtime: Any, failed: Sequence[str], function: str, *, clean: str,
                   leaked_hint: str, released_hint: str = "",
                   leaked: str = "{function} left {n} thing(s) behind: ", shown: int = 4,
                   more: str = "; and {n} more", source: str = "",
                   kind: str = PROCESS) -> Item:
    """'resources': nothing leaked at the caller's teardown, and the caller's things intact.

    ``failed`` is what the caller could not release (see :func:`teardown`): it fails the item
    with ``released_hint``. Leaks are listed after ``leaked`` (with ``{function}`` and ``{n}``,
    the number of leaks), the first ``shown`` of them, then ``more`` (see :func:`join_first`);
    ``source`` is passed to :func:`leak_texts`. ``clean`` is the message when all is well.
    """
    if failed:
        return released_item(function, failed, released_hint, kind)
    leaks = runtime.leaks
    if leaks:
        return Item("resources", False,
                    leaked.format(function=function, n=len(leaks))
                    + join_first(leak_texts(leaks, source), shown, more=more), leaked_hint,
                    kind=kind)
    return Item("resources", True, clean, kind=kind)


# -- provenance: did the device do the work? ---------------------------------------------------

@dataclass(frozen=True)
class Write:
    """What one task wrote into one range when it ended: the bytes (or their CRC-32 only, past
    :class:`Provenance`'s byte budget)."""

    task: Any
    lo: int
    hi: int
    data: bytes | None
    crc: int

    def covers(self, lo: int, hi: int) -> bool:
        return self.lo <= lo and hi <= self.hi

    def matches(self, lo: int, got: bytes) -> bool | None:
        """Whether ``got`` (the bytes found from ``lo`` on) is what this write put there; None
        when only a CRC was kept and ``got`` is not the whole write."""
        if self.data is not None:
            off = lo - self.lo
            return self.data[off:off + len(got)] == got
        if lo == self.lo and len(got) == self.hi - self.lo:
            return zlib.crc32(got) == self.crc
        return None


@dataclass(frozen=True)
class Piece:
    """A range of bytes, the copies that carried it (last first) and the write it came from
    (None: no task wrote it while the check watched, i.e. the host did)."""

    lo: int
    hi: int
    carried_by: tuple
    origin: Write | None


_COPY_KINDS = ("memcpy", "staging")


def last_writes(writes: Iterable[Write], lo: int, hi: int) -> list[tuple[int, int, Any]]:
    """[lo, hi) cut into pieces, each with the last of ``writes`` (in the order given) over
    it, or None where none of them wrote."""
    pieces: list[tuple[int, int, Any]] = [(lo, hi, None)]
    for w in writes:
        if w.hi <= lo or hi <= w.lo:
            continue
        out = []
        for a, b, who in pieces:
            if b <= w.lo or w.hi <= a:
                out.append((a, b, who))
                continue
            if a < w.lo:
                out.append((a, w.lo, who))
            out.append((max(a, w.lo), min(b, w.hi), w))
            if w.hi < b:
                out.append((w.hi, b, who))
        pieces = out
    return pieces


class Provenance:
    """What every task wrote, seen as it ended: how a check verifies that the device did the
    work it grades, rather than the host.

    Install it before the check sets up its case and calls the learner's function::

        prov = Provenance(runtime)
        ...
        why = prov.computed_on(host_ptr, got, at_ns, engines=("aicore",), what="batch 3's scores")

    Device memory can only change through tasks (copies, memsets, model runs, kernels), so
    following the copies back from a buffer names the task that computed its bytes. Host
    memory also changes through plain Python writes (a numpy view, ``bytes_to_ptr``); those
    show as bytes that differ from what the last task wrote there.
    """

    PIECE = 16 << 20        # a write larger than the budget is fingerprinted this much at a time

    def __init__(self, runtime: Any, byte_budget: int = 256 << 20):
        self.runtime = runtime
        self.writes: list[Write] = []
        self.budget = byte_budget
        runtime.engine.observer = self._seen

    def _seen(self, task: Any) -> None:
        for _base, _gen, lo, hi, mode in sanitizer._accesses(task):
            if "w" not in mode or hi <= lo:
                continue
            region = self.runtime.region(lo)
            data: bytes | None = None
            crc = 0
            if region is not None and region.materialised and not region.dangling:
                off, n = lo - region.start, hi - lo
                try:
                    if n <= self.budget:
                        data = region.read_bytes(off, n)
                        self.budget -= n
                        crc = zlib.crc32(data)
                    else:                   # too large to keep: fingerprinted in pieces
                        for at in range(0, n, self.PIECE):
                            crc = zlib.crc32(region.read_bytes(off + at,
                                                               min(self.PIECE, n - at)), crc)
                except Exception:           # noqa: BLE001 - a vanished pageable object
                    data, crc = None, 0
            elif region is not None:
                crc = zlib.crc32(uninit_pattern(lo - region.start, hi - lo))
            self.writes.append(Write(task, lo, hi, data, crc))

    # -- queries --------------------------------------------------------------------------------
    def writers(self, lo: int, hi: int, at_ns: int | None = None) -> list[tuple[int, int, Any]]:
        """[lo, hi) cut into pieces, each with the last :class:`Write` over it that ended by
        ``at_ns`` (None: every write so far), or None where no task wrote."""
        return last_writes([w for w in self.writes if at_ns is None or w.task.end_ns <= at_ns],
                           lo, hi)

    def _source(self, task: Any) -> tuple[int, int] | None:
        """(read address, time it was read) of a copy task: a staged copy read in its pair."""
        if task.reads:
            return task.reads[0][0], task.start_ns
        for dep_id, label in task.deps:
            if label == "staging":
                first = self.runtime.engine.tasks[dep_id]
                if first.reads:
                    return first.reads[0][0], first.start_ns
        return None

    def trace_back(self, lo: int, hi: int, at_ns: int | None = None,
                   depth: int = 8) -> list[Piece]:
        """Where the bytes in [lo, hi) at ``at_ns`` came from: follow the copies back to the
        task that first wrote them (a model run, a kernel, a memset), or to the host."""
        out = []
        for a, b, w in self.writers(lo, hi, at_ns):
            if w is None or w.task.kind not in _COPY_KINDS or depth == 0:
                out.append(Piece(a, b, (), w))
                continue
            src = self._source(w.task)
            if src is None:
                out.append(Piece(a, b, (w.task,), None))
                continue
            base, read_ns = src
            shift = base - w.lo
            for p in self.trace_back(a + shift, b + shift, read_ns, depth - 1):
                out.append(Piece(p.lo - shift, p.hi - shift, (w.task, *p.carried_by),
                                 p.origin))
        return out

    def changed_after(self, lo: int, got: bytes, at_ns: int | None = None) -> int | None:
        """The first offset in ``got`` (the bytes found at ``lo`` at ``at_ns``) that differs
        from what the last task wrote there, or that no task wrote; None if all match."""
        for a, b, w in self.writers(lo, lo + len(got), at_ns):
            chunk = got[a - lo:b - lo]
            if w is None or w.matches(a, chunk) is False:
                return a - lo
        return None

    def computed_on(self, lo: int, got: bytes, at_ns: int | None = None, *,
                    engines: Sequence[str] = ("aicore",), what: str = "the result") -> str:
        """'' when ``got`` (the bytes found at ``lo`` at ``at_ns``) was computed by tasks on
        ``engines`` and carried there by copies, unchanged; else why not, in plain words."""
        from ..analysis import trace

        off = self.changed_after(lo, got, at_ns)
        if off is not None:
            if not any(w for *_ab, w in self.writers(lo + off, lo + off + 1, at_ns)):
                region = self.runtime.region(lo)
                start = region.start if region is not None else lo
                if reads_uninit(bytes(got), off) or got[off:off + 4] == uninit_pattern(
                        lo + off - start, min(4, len(got) - off)):
                    return (f"nothing had written {what} yet (from byte {off:,} on, it holds "
                            "DE AD BE EF, the pattern of memory nothing has written)")
                return (f"no device task wrote {what} (from byte {off:,} on): the host put "
                        "those bytes there itself")
            return (f"{what} was changed by the host after the device wrote it (from byte "
                    f"{off:,} on)")
        wanted = {trace.resolve_resource(self.runtime, e) for e in engines}
        for p in self.trace_back(lo, lo + len(got), at_ns):
            if p.origin is not None and p.origin.task.resource in wanted:
                continue
            names = " and ".join(trace.resolve_resource(self.runtime, e).name
                                 for e in engines)
            if p.origin is None:
                came = ("from host memory the host filled itself"
                        + (f" (copied by task {p.carried_by[-1].id} "
                           f"{p.carried_by[-1].name})" if p.carried_by else ""))
            else:
                t = p.origin.task
                came = f"from task {t.id} {t.name} on {t.engine_name}"
            return (f"{what} (bytes {p.lo - lo:,} to {p.hi - lo:,}) came {came}, not from "
                    f"work on {names}")
        return ""

    def copies_of(self, data: bytes, direction: str = "d2h") -> list[Write]:
        """The copy writes (``direction``: 'd2h', 'h2d', 'd2d' or 'h2h') that wrote exactly
        ``data``, oldest first."""
        crc = zlib.crc32(data)
        return [w for w in self.writes
                if w.task.kind in _COPY_KINDS and (w.task.info or {}).get("direction")
                == direction and w.hi - w.lo == len(data) and w.crc == crc
                and (w.data is None or w.data == data)]


# -- the order of events: what the host and the streams knew, when ----------------------------

class Order:
    """The happens-before order of a runtime's tasks and host actions, as the sanitizer sees it.

    Tasks on one stream are ordered, ``stream_wait_event`` orders a stream after a record, and
    the host learns that a task is done when it synchronises (or a blocking call returns);
    whatever it submits afterwards comes after that task. ``marks`` are indices into
    ``runtime.host_ops``: :meth:`host_knows` answers what the host knew just before that op
    (``len(runtime.host_ops)`` taken right after a call: what it knew when the call returned).
    """

    def __init__(self, runtime, marks=()):
        st = sanitizer._State(runtime)
        ops = runtime.host_ops
        marks = set(marks)
        self._host_at: dict[int, dict] = {}

        def snap(j: int) -> None:
            if j in marks:
                self._host_at[j] = dict(st.host)

        j = 0
        snap(0)
        for t in st.tasks:
            while j < len(ops) and ops[j][2] <= t.id:
                sanitizer._visit_op(st, ops[j])
                j += 1
                snap(j)
            sanitizer._visit_task(st, t)
        while j < len(ops):
            sanitizer._visit_op(st, ops[j])
            j += 1
            snap(j)
        self._st = st

    def before(self, a, b) -> bool:
        """Whether task ``a`` is ordered before task ``b`` (tasks or ids)."""
        a, b = getattr(a, "id", a), getattr(b, "id", b)
        return a != b and self._st.before_task(a, b)

    def host_knows(self, task, mark: int) -> bool:
        """Whether the host had synchronised with ``task`` just before host op ``mark``."""
        vc = self._host_at.get(mark)
        return vc is not None and self._st.before(getattr(task, "id", task), vc)
