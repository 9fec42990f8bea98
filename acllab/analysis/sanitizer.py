"""The sanitizer: races, use after free, event misuse, leaks and uninitialised reads.

It works on what the runtime recorded (the trace and the host's own actions) and builds the
happens-before order of host calls, streams and events with vector clocks:

* tasks on one stream are ordered; a ``stream_wait_event`` orders the waiting stream after the
  record it waited for;
* the host learns that a task is done when it synchronises (stream, event, device, a blocking
  copy) or when a query reports completion; every task it submits afterwards comes after it.

Two accesses to the same bytes, at least one a write, with no order between them, are a race,
even if the timing of this run happened to hide it. Findings are data (:class:`Finding`) and
print as short explanations with a suggested fix.

The host's writes through zero-copy views (no API call) are seen by fingerprint: the runtime
compares the host bytes each queued task reads or writes before every synchronisation and at
analysis (``Runtime.check_host_views``), and a change no task made is a host write.

Differs from real tools: history is kept for the last ``HISTORY`` accesses per buffer, so a
race with a much older access can be missed.
"""

from __future__ import annotations

from array import array
from dataclasses import dataclass, field

__all__ = ["Finding", "analyze", "report", "KINDS"]

HISTORY = 256

KINDS = {
    "host-read-before-sync": "the host read memory that a device copy had not finished writing",
    "host-write-while-read": "the host changed memory that a device copy may still read",
    "race": "two streams touch the same memory with no event between them",
    "use-after-free": "memory was freed while a queued task still used it",
    "pageable-async": "an async copy used pageable host memory and silently became synchronous",
    "stale-event-wait": "a stream waited again on an old record of an event",
    "event-reset-while-waited": "an event was reset while a wait on it was pending",
    "wait-never-recorded": "a stream waited on an event that was never recorded",
    "leak": "a resource was still alive at reset_device or finalize",
    "uninitialised-read": "device memory was read before anything wrote it",
    "model-two-streams": "one model ran asynchronously on two streams at once",
    "host-read-past-end": "a copy read past the end of a host buffer",
}


@dataclass
class Finding:
    """One problem the sanitizer found, with what it involves and how to fix it."""

    kind: str
    message: str
    fix: str
    tasks: list[int] = field(default_factory=list)
    streams: list[str] = field(default_factory=list)
    buffers: list[int] = field(default_factory=list)
    times_ns: list[int] = field(default_factory=list)

    def __str__(self) -> str:
        return f"[{self.kind}] {self.message}\n    fix: {self.fix}"


def _us(ns: int) -> str:
    return f"{ns / 1000:.1f} us"


def _sname(task) -> str:
    return task.stream.name if task.stream is not None else "the host (blocking call)"


def _tdesc(task) -> str:
    when = f"{_us(task.start_ns)}-{_us(task.end_ns)}" if task.end_ns >= 0 else "never ran"
    return f"task {task.id} {task.name} on {_sname(task)} ({when})"


class _State:
    """The analysis's state. Vector clocks are shared: ``vc[i]`` is a dict that task ``i``
    shares with the tasks before it on its stream for as long as nothing new reaches that
    stream (a wait on another stream's record, a host join), and ``key[i]``, ``cnt[i]`` are
    its own entry (its stream and its number on it), which the dict may lack. So a stream of
    tasks that learns nothing new costs no dict per task, and the analysis's memory grows by
    a few machine words a task."""

    __slots__ = ("rt", "tasks", "vc", "key", "cnt", "host", "host_version", "last_of",
                 "host_keys", "history", "init", "findings", "seen", "repeats", "by_key",
                 "regions", "accesses", "waited", "pairs", "in_cb", "cb_of")

    def __init__(self, runtime):
        self.rt = runtime
        self.tasks = runtime.engine.tasks
        self.vc: list[dict] = []            # shared: never changed once made
        self.key: list = []                 # task -> its clock key (stream handle, host)
        self.cnt = array("q")               # task -> its number on that key
        self.host: dict = {}                # copy on write: replaced, never changed
        self.host_version = 0
        # key -> (its latest task, host_version then); that task's cnt is the key's count
        self.last_of: dict = {}
        self.host_keys: dict = {}           # device -> ("host", device), one tuple each
        self.history: dict[tuple, list] = {}
        self.init: dict[tuple, list] = {}
        self.findings: list[Finding] = []
        self.seen: set = set()
        self.repeats: dict = {}
        self.by_key: dict = {}
        self.regions: dict = {}
        self.accesses: dict = {}            # (id(info), id(reads), id(writes)) -> accesses
        self.waited: dict = {}              # (stream key, event) -> the record last waited for
        self.pairs: dict = {}               # (base, gen, key, other key) -> race finding key
        self.in_cb: list[int] = []          # the blocking callbacks running (HostCallback ids)
        self.cb_of: dict[int, int] = {}     # task submitted inside one -> that HostCallback

    def add(self, key, finding: Finding) -> None:
        if key not in self.seen:
            self.seen.add(key)
            self.by_key[key] = finding
            self.findings.append(finding)

    def before(self, a: int, vc: dict) -> bool:
        """Whether task ``a`` happens before a full clock ``vc`` (the host's)."""
        return vc.get(self.key[a], 0) >= self.cnt[a]

    def before_task(self, a: int, b: int) -> bool:
        """Whether task ``a`` happens before task ``b``."""
        key = self.key[a]
        if key == self.key[b]:
            return self.cnt[a] <= self.cnt[b]
        return self.vc[b].get(key, 0) >= self.cnt[a]

    def full(self, i: int) -> dict:
        """Task ``i``'s whole vector clock (its shared dict with its own entry)."""
        vc = dict(self.vc[i])
        vc[self.key[i]] = self.cnt[i]
        return vc

    def join(self, i: int) -> None:
        """The host learnt that task ``i`` ended: it comes after everything before it."""
        host = self.host
        new = None
        cur = host
        for k, v in (*self.vc[i].items(), (self.key[i], self.cnt[i])):
            if cur.get(k, 0) < v:
                if new is None:
                    new = cur = dict(host)
                new[k] = v
        if new is not None:
            self.host = new
            self.host_version += 1


def _merge(base: dict, key, sources) -> dict:
    """``base`` raised to each (dict, own key, own count) in ``sources``, leaving ``key`` out
    of the comparison; ``base`` itself (shared, unchanged) when nothing raises it."""
    new = None
    cur = base
    for vc, okey, ocnt in sources:
        if okey != key and cur.get(okey, 0) < ocnt:
            if new is None:
                new = cur = dict(base)
            new[okey] = ocnt
        for k, v in vc.items():
            if k != key and cur.get(k, 0) < v:
                if new is None:
                    new = cur = dict(base)
                new[k] = v
    return base if new is None else new


def _accesses(task):
    info = task.info or {}
    if "mem" in info:
        return info["mem"]
    out = []
    if "src_base" in info:
        for addr, n in task.reads:
            out.append((info["src_base"], info["src_gen"], addr, addr + n, "r"))
    if "dst_base" in info:
        for addr, n in task.writes:
            out.append((info["dst_base"], info["dst_gen"], addr, addr + n, "w"))
    return out


def _visit_task(st: _State, t) -> bool | None:
    """Visit one task; True when it was a model's interior op that took the short way (see
    _visit_interior_run)."""
    # its vector clock: the host's and its dependencies', plus its own entry (see _State)
    s = t.stream
    if s is not None:
        key = s.handle
    else:
        key = st.host_keys.get(t.device)
        if key is None:
            key = st.host_keys[t.device] = ("host", t.device)
    last = st.last_of.get(key)
    vcs, keys, cnts = st.vc, st.key, st.cnt
    deps = t.deps
    vc = None
    if last is None:
        cnt = 1
    else:
        prev, version = last
        cnt = cnts[prev] + 1
        if (len(deps) == 1 and deps[0][0] == prev) or \
                (len(deps) == 2 and deps[0][0] == prev and deps[1][0] == prev):
            # the stream's previous task only (a model's op names it twice: stream, model)
            vc = vcs[prev]
            if version != st.host_version:
                vc = _merge(vc, key, ((st.host, key, 0),))
        else:
            sources = []
            for dep_id, _label in deps:
                if dep_id == prev:
                    vc = vcs[prev]       # the key's previous task: start from its clock
                else:
                    sources.append((vcs[dep_id], keys[dep_id], cnts[dep_id]))
            if vc is not None:
                if version != st.host_version:
                    sources.append((st.host, key, 0))
                if sources:
                    vc = _merge(vc, key, sources)
    if vc is None:
        vc = st.host
        if deps:
            vc = _merge(vc, key, [(vcs[d], keys[d], cnts[d]) for d, _label in deps])
    tid = t.id
    if st.in_cb:
        st.cb_of[tid] = st.in_cb[-1]
    st.last_of[key] = (tid, st.host_version)
    vcs.append(vc)
    keys.append(key)
    cnts.append(cnt)
    if t.cancelled:
        return
    info = t.info or _EMPTY
    if info.get("pageable_async"):
        st.add(("pageable", t.stream.handle if t.stream else 0), Finding(
            "pageable-async",
            f"{_tdesc(t)} is a memcpy_async with pageable host memory: the call blocked the "
            "host until the copy finished, so nothing overlapped with it.",
            "allocate the host buffer with acl.rt.malloc_host (pinned memory)",
            [t.id], [_sname(t)], [info.get("src", 0), info.get("dst", 0)], [t.submit_ns]))
    past = info.get("past_end")
    if past is not None:
        base, size, soff, n, extra, what = past
        st.add(("pastend", base, soff, n), Finding(
            "host-read-past-end",
            f"{_tdesc(t)} copied {n} B from offset {soff} of the {what}, which holds {size} B: "
            f"the last {extra} B came from past its end. The card does not check (it gets a "
            "pointer and a count) and copies whatever lies there; acllab gives the pattern "
            "DE AD BE EF.",
            f"copy only the bytes the buffer holds (count {n - extra}), or give a buffer of "
            f"{n} B (e.g. pad the data to the size the destination expects)",
            [t.id], [_sname(t)], [base], [t.start_ns if t.start_ns >= 0 else t.submit_ns]))
    if "mem" in info:
        mem = info["mem"]
        if len(mem) == 1:
            # a model's interior op: it writes the workspace, as the stream's previous op
            # did; when that write is the buffer's whole history the new one replaces it
            # (it dominates it, races with nothing and marks nothing new): what
            # _visit_accesses would do, without its loop
            base, gen, lo, hi, mode = mem[0]
            if mode == "w":
                hist = st.history.get((base, gen))
                if hist is not None and len(hist) == 1:
                    oid, omode, olo, ohi = hist[0]
                    if omode == "w" and olo == lo and ohi == hi and keys[oid] == key:
                        hist[0] = (tid, "w", lo, hi)
                        return True
        _visit_accesses(st, t, info, key, vc, mem)
    elif t.reads or t.writes:
        # identical copies share reads, writes and info (transfers.copy_tasks): their
        # accesses are worked out once (every task is alive, so ids are not reused here)
        ckey = (id(info), id(t.reads), id(t.writes))
        accesses = st.accesses.get(ckey)
        if accesses is None:
            if len(st.accesses) >= 4096:
                st.accesses.clear()
            accesses = st.accesses[ckey] = _accesses(t)
        if accesses:
            _visit_accesses(st, t, info, key, vc, accesses)
    kind = t.kind
    if kind == "event_wait":
        _check_stale_wait(st, t)
    elif kind == "event_reset" and info.get("previous_record", -1) >= 0:
        _check_reset_while_waited(st, t)


_EMPTY: dict = {}


def _visit_interior_run(st: _State, tasks, k: int, stop: int) -> int:
    """Visit, in one go, the model's interior ops that follow ``tasks[k]`` (an interior op
    _visit_task has just visited the short way) up to task id ``stop`` (the next host op);
    return how many. Each is what _visit_task would find: the same stream, the op before it
    as its only dependency (stream and model), the same single workspace write (the gear's
    shared access tuple), not cancelled, no host op in between. So each gets the previous
    op's shared clock and its own count, and the workspace's history ends as the last one's
    write, as visiting them one by one would leave them."""
    t = tasks[k]
    mem = t.info["mem"]
    stream, prev = t.stream, t.id
    n = len(tasks)
    j = k + 1
    while j < n:
        u = tasks[j]
        if u.id >= stop or u.stream is not stream or u.cancelled:
            break
        info = u.info
        if info is None or info.get("mem") is not mem:
            break
        deps = u.deps
        if len(deps) != 2 or deps[0][0] != prev or deps[1][0] != prev:
            break
        prev = u.id
        j += 1
    m = j - k - 1
    if m == 0:
        return 0
    key = st.key[t.id]
    vc = st.vc[t.id]
    cnt = st.cnt[t.id]
    st.vc.extend([vc] * m)
    st.key.extend([key] * m)
    st.cnt.extend(range(cnt + 1, cnt + 1 + m))
    st.last_of[key] = (prev, st.host_version)
    base, gen, lo, hi, _mode = mem[0]
    st.history[(base, gen)][0] = (prev, "w", lo, hi)
    return m


def _visit_accesses(st: _State, t, info, key, vc, accesses) -> None:
    """Check ``t``'s memory accesses against each buffer's history, then add them to it."""
    keys, cnts = st.key, st.cnt
    tid = t.id
    init = st.init
    for base, gen, lo, hi, mode in accesses:
        region = st.regions.get(base, False)
        if region is False:
            region = st.regions[base] = st.rt.space.find(base) or st.rt.space.find_dead(base)
        hk = (base, gen)
        # the common cases of _check_init and _mark_init inline: the range already written
        if mode == "r":
            if region is not None and region.kind == "device":
                for wlo, whi in init.get(hk, ()):
                    if wlo <= lo and hi <= whi:
                        break
                else:
                    _check_init(st, t, base, gen, lo, hi)
        elif mode == "w":
            ranges = init.get(hk)
            if ranges is None:
                init[hk] = [(lo, hi)]
            else:
                for wlo, whi in ranges:
                    if wlo <= lo and hi <= whi:
                        break
                else:
                    _mark_init(st, hk, lo, hi)
        hist = st.history.get(hk)
        if hist is None:
            hist = st.history[hk] = []
        dominated = None
        for j, (oid, omode, olo, ohi) in enumerate(hist):
            okey = keys[oid]
            if okey == key:
                # an older access of this stream inside this range is dominated by the new
                # one: any later access that races with it races with the new one too
                if lo <= olo and ohi <= hi and (mode == "w" or omode == "r"):
                    if dominated is None:
                        dominated = [j]
                    else:
                        dominated.append(j)
                continue                 # ordered: the same stream (or the same host)
            if not (olo < hi and lo < ohi) or ("w" not in mode and "w" not in omode) \
                    or vc.get(okey, 0) >= cnts[oid]:
                continue
            if st.cb_of and _callback_orders(st, tid, oid):
                continue
            _race(st, t, info, region, base, gen, lo, hi, mode, oid, omode, olo, ohi, key)
        if dominated is not None:
            for j in reversed(dominated):
                del hist[j]
        hist.append((tid, mode, lo, hi))
        if len(hist) > HISTORY:
            del hist[0]


def _callback_orders(st: _State, a: int, b: int) -> bool:
    """Whether a blocking callback orders tasks ``a`` and ``b``: one was submitted inside a
    blocking callback (ACL_CALLBACK_BLOCK) whose HostCallback task happens before the other.
    The stream waits for such a callback, so everything the callback did (its copies, its
    launches) is done before the HostCallback task ends and the stream's later tasks start,
    even those the host had submitted before the callback ran (hicann/runtime,
    src/acl/aclrt_impl/callback.cpp, aclrtLaunchCallbackImpl: ACL_CALLBACK_BLOCK becomes
    rtCallbackLaunch(..., isBlock=true), a callback task the stream does not pass until the
    report thread has run the function)."""
    for inside, other in ((a, b), (b, a)):
        c = st.cb_of.get(inside)
        if c is not None and c != other and st.before_task(c, other):
            return True
    return False


def _visit_op_callback(st: _State, kind: str, task_id: int) -> None:
    if kind == "callback_begin":
        st.in_cb.append(task_id)
    elif st.in_cb and st.in_cb[-1] == task_id:
        st.in_cb.pop()


def _race(st: _State, t, info, region, base, gen, lo, hi, mode, oid, omode, olo, ohi,
          key) -> None:
    """Report (once per pair of streams and buffer) that ``t`` and task ``oid`` race."""
    okey = st.key[oid]
    pkey = (base, gen, key, okey)
    pair = st.pairs.get(pkey)
    if pair is None:
        pair = st.pairs[pkey] = ("race", base, gen, *sorted((str(okey), str(key))))
    other = st.tasks[oid]
    if pair in st.seen:
        st.repeats[pair] = st.repeats.get(pair, 1) + 1
        return
    if region is not None and region.label.startswith("model"):
        mid = info.get("model", "?")
        st.add(pair, Finding(
            "model-two-streams",
            f"model {mid} runs on {_sname(other)} (task {oid} {other.name}) and on "
            f"{_sname(t)} (task {t.id} {t.name}) with nothing ordering the two "
            "executions: they share the model's workspace and overwrite each "
            "other's activations.",
            "run one model on one stream at a time: order the executions with an "
            "event, or load the model twice (one model id per stream)",
            [oid, t.id], [_sname(other), _sname(t)], [base],
            [other.start_ns, t.start_ns]))
        return
    vdec = other if (other.info or {}).get("engine") == "VDEC" else \
        t if (info or {}).get("engine") == "VDEC" else None
    if vdec is not None:
        user = t if vdec is other else other
        umode = mode if user is t else omode
        st.add(pair, Finding(
            "race",
            f"{_tdesc(user)} {'writes' if umode == 'w' else 'reads'} bytes "
            f"0x{max(lo, olo):x}-0x{min(hi, ohi):x} of a picture that {_tdesc(vdec)} "
            "(VDEC, decoding a frame) writes, and nothing orders them: the picture is not "
            "there before the channel's callback has it.",
            "use a decoded picture in, or after, the VDEC channel's callback for its frame "
            "(the callback runs once VDEC has written the picture); an eos frame or "
            "acl.media.vdec_destroy_channel waits for every callback",
            [oid, t.id], [_sname(other), _sname(t)], [base],
            [other.start_ns, t.start_ns]))
        return
    st.add(pair, Finding(
        "race",
        f"{_tdesc(other)} {'writes' if omode == 'w' else 'reads'} bytes "
        f"0x{max(lo, olo):x}-0x{min(hi, ohi):x} that {_tdesc(t)} "
        f"{'writes' if mode == 'w' else 'reads'}, and no event orders them.",
        (f"record an event on {_sname(other)} after task {oid} and make "
         f"{_sname(t)} wait for it (stream_wait_event) before task {t.id}, or use "
         "a separate buffer for each stream") if t.stream is not None else
        (f"synchronize {_sname(other)} (acl.rt.synchronize_stream) before the "
         f"blocking call that became task {t.id}"),
        [oid, t.id], [_sname(other), _sname(t)], [base],
        [other.start_ns, t.start_ns]))


def _mark_init(st: _State, key, lo: int, hi: int) -> None:
    """Add [lo, hi) to the buffer's written ranges, kept sorted and merged."""
    ranges = st.init.get(key)
    if ranges is None:
        st.init[key] = [(lo, hi)]
        return
    for a, b in ranges:
        if a <= lo and hi <= b:
            return                      # already written: the common case
    merged = []
    for a, b in ranges:
        if b < lo or a > hi:
            merged.append((a, b))
        else:
            lo, hi = min(a, lo), max(b, hi)
    merged.append((lo, hi))
    merged.sort()
    st.init[key] = merged


def _check_init(st: _State, t, base, gen, lo, hi) -> None:
    for wlo, whi in st.init.get((base, gen), ()):
        if wlo <= lo and hi <= whi:
            return
    region = st.regions.get(base) or st.rt.space.find(base) or st.rt.space.find_dead(base)
    where = ("acl.media.dvpp_malloc" if region is not None and region.label == "dvpp"
             else "acl.rt.malloc")
    st.add(("uninit", base, gen), Finding(
        "uninitialised-read",
        f"{_tdesc(t)} reads device memory 0x{lo:x}-0x{hi:x} that nothing wrote since "
        f"{where}: it holds whatever was there (acllab fills it with DE AD BE EF).",
        "copy data into the buffer or clear it with acl.rt.memset before reading it",
        [t.id], [_sname(t)], [base], [t.start_ns]))


def _check_stale_wait(st: _State, w) -> None:
    rec_id = w.info.get("record_task", -1)
    if rec_id < 0:
        return
    # the record this stream last waited for on this event: a wait always takes the event's
    # latest record, so waiting on a record again means waiting on the last one waited for
    marker = (st.key[w.id], w.info.get("event"))
    waited = st.waited.get(marker)
    st.waited[marker] = rec_id
    if waited != rec_id:
        return
    rec = st.tasks[rec_id]
    # the tasks the record's stream queued since the record (every task before this wait
    # has been visited, so its count on that stream says how many there are)
    newest = st.last_of.get(st.key[rec_id])
    later = (st.cnt[newest[0]] if newest is not None else 0) - st.cnt[rec_id]
    if later:
        st.add(("stale", w.id), Finding(
            "stale-event-wait",
            f"{_tdesc(w)} waits on event 0x{w.info['event']:x} whose latest record is still "
            f"task {rec_id} on {_sname(rec)}, which this stream already waited for; the "
            f"{later} tasks {_sname(rec)} queued since then are not waited for.",
            "record the event again after the producer's new work, before each wait "
            "(record inside the loop, not once before it)",
            [rec_id, w.id], [_sname(rec), _sname(w)], [], [rec.end_ns, w.submit_ns]))


def _check_reset_while_waited(st: _State, z) -> None:
    prev = z.info["previous_record"]
    pending = [w for w in st.tasks[prev + 1: z.id] if w.kind == "event_wait"
               and (w.info or {}).get("record_task") == prev and not st.before_task(w.id, z.id)]
    if pending:
        w = pending[0]
        st.add(("reset", z.id), Finding(
            "event-reset-while-waited",
            f"event 0x{z.info['event']:x} was reset (task {z.id} on {_sname(z)}, at "
            f"{_us(z.submit_ns)}) while {_tdesc(w)} still waited on its previous record.",
            "reset an event only after every wait on it has been satisfied (synchronize the "
            "waiting stream first), or record it again instead of resetting it",
            [prev, w.id, z.id], [_sname(w), _sname(z)], [], [z.submit_ns, w.start_ns]))


# host_ops kinds that release memory -> the call that did it, as findings name it
_FREE_API = {"free": "acl.rt.free", "free_host": "acl.rt.free_host",
             "dvpp_free": "acl.media.dvpp_free"}


def _visit_op(st: _State, op) -> None:
    kind, host_ns = op[0], op[1]
    if kind == "join":
        st.join(op[3])
    elif kind == "callback_begin" or kind == "callback_end":
        _visit_op_callback(st, kind, op[3])
    elif kind in _FREE_API:
        base, gen = op[3], op[4]
        for oid, _mode, _lo, _hi in st.history.get((base, gen), ()):
            if not st.before(oid, st.host):
                t = st.tasks[oid]
                fn = _FREE_API[kind]
                st.add(("uaf", base, gen), Finding(
                    "use-after-free",
                    f"{fn}(0x{base:x}) at {_us(host_ns)} released memory that {_tdesc(t)} "
                    "still uses: the host never synchronised with it.",
                    f"synchronize {_sname(t)} (or an event recorded after task {oid}) before "
                    "freeing the buffer",
                    [oid], [_sname(t)], [base], [host_ns, t.end_ns]))
                break
    elif kind == "host_access":
        base, gen, lo, n, mode = op[3], op[4], op[5], op[6], op[7]
        hi = lo + n
        for oid, tmode, tlo, thi in st.history.get((base, gen), ()):
            if not (tlo < hi and lo < thi) or st.before(oid, st.host):
                continue
            t = st.tasks[oid]
            if tmode == "w":
                st.add(("hostread", oid), Finding(
                    "host-read-before-sync",
                    f"the host read 0x{lo:x}-0x{hi:x} at {_us(host_ns)} but {_tdesc(t)} writes "
                    "it and the host never synchronised with that task: it may see old bytes.",
                    f"call acl.rt.synchronize_stream on {_sname(t)} before reading the result",
                    [oid], [_sname(t)], [base], [host_ns, t.end_ns]))
            elif "w" in mode:
                st.add(("hostwrite", oid), Finding(
                    "host-write-while-read",
                    f"the host took a writable view of 0x{lo:x}-0x{hi:x} at {_us(host_ns)} while "
                    f"{_tdesc(t)} may still read it.",
                    f"synchronize {_sname(t)} before changing the buffer, or use two buffers",
                    [oid], [_sname(t)], [base], [host_ns, t.start_ns]))
    elif kind == "host_view_write":   # host code changed a watched range through a view
        base, gen, lo, n, oid, tmode, since = op[3], op[4], op[5], op[6], op[7], op[8], op[9]
        if st.before(oid, st.host):
            return
        t = st.tasks[oid]
        region = st.regions.get(base) or st.rt.space.find(base) or st.rt.space.find_dead(base)
        what = region.describe() if region is not None else f"buffer 0x{base:x}"
        verb = "reads" if tmode == "r" else "writes"
        st.add(("hostwrite", oid), Finding(
            "host-write-while-read",
            f"the host changed 0x{lo:x}-0x{lo + n:x} of the {what} through a zero-copy view "
            f"(ptr_to_numpy, the array behind numpy_to_ptr, a bytearray behind bytes_to_ptr) "
            f"between {_us(since)} and {_us(host_ns)}, while {_tdesc(t)} {verb} it and the "
            "host never synchronised with that task: the copy may "
            + ("send the new bytes instead of the old." if tmode == "r" else
               "overwrite what the host wrote."),
            f"synchronize {_sname(t)} (or an event recorded after task {oid}) before changing "
            "the buffer, or use two buffers (double buffering: refill the one no copy uses)",
            [oid], [_sname(t)], [base], [host_ns, t.start_ns]))
    elif kind == "device_write":      # the runtime wrote device memory for the host
        base, gen, lo, n = op[3], op[4], op[5], op[6]
        _mark_init(st, (base, gen), lo, lo + n)
    elif kind == "wait_unrecorded":
        name = op[5] if len(op) > 5 else "a stream"
        st.add(("unrec", op[3], op[4]), Finding(
            "wait-never-recorded",
            f"{name} waited at {_us(host_ns)} on event 0x{op[3]:x}, which was never "
            "recorded: for old-style events the wait fails (107000), so nothing is ordered.",
            "record the event on the producer stream before the consumer waits on it",
            [], [name], [], [host_ns]))


def analyze(runtime) -> list[Finding]:
    """Every finding for what ``runtime`` has run so far, in the order they happened.

    When every task of the previous analysis had ended (nothing about them can change any
    more) and the trace has only grown since, the analysis goes on from where that one
    stopped: the same result as starting afresh, for the new tasks and host actions only.
    """
    check = getattr(runtime, "check_host_views", None)
    if check is not None:
        check()                       # host writes through views since the last sync
    tasks = runtime.engine.tasks
    ops = runtime.host_ops
    st, start, i = _resume(runtime, tasks, ops)
    if st is None:
        st, start, i = _State(runtime), 0, 0
    n_ops, n_tasks = len(ops), len(tasks)
    never = n_tasks + 1
    next_op = ops[i][2] if i < n_ops else never   # the task count the next host op came after
    done = True
    k = start
    while k < n_tasks:
        t = tasks[k]
        if t.id >= next_op:
            while i < n_ops and ops[i][2] <= t.id:
                _visit_op(st, ops[i])
                i += 1
            next_op = ops[i][2] if i < n_ops else never
        if _visit_task(st, t) is True:
            # a model's interior op: the ones after it, in one go (a model runs dozens)
            k += _visit_interior_run(st, tasks, k, next_op)
            t = tasks[k]                 # the run's last: its ops end in order
        if t.end_ns < 0:
            done = False
        k += 1
    for op in ops[i:]:
        _visit_op(st, op)
    _keep(runtime, st if done else None, tasks, ops)
    seen = {id(st.by_key[pair]): count for pair, count in st.repeats.items()}
    findings = []
    for f in st.findings:          # copies: the kept state's findings never change
        count = seen.get(id(f))
        message = f.message if count is None else f"{f.message} (Seen {count} times in all.)"
        findings.append(Finding(f.kind, message, f.fix, list(f.tasks), list(f.streams),
                                list(f.buffers), list(f.times_ns)))
    for leak in runtime.leaks:
        findings.append(Finding(
            "leak", f"leaked: {leak}",
            "release it yourself before the teardown: free device and host memory and "
            "destroy events, streams and contexts, then reset_device, then finalize"))
    return findings


def _keep(runtime, st, tasks, ops) -> None:
    """Keep ``st`` (None: nothing) for the next analysis of ``runtime``."""
    kept = None
    if st is not None:
        kept = (st, tasks, len(tasks), tasks[-1] if tasks else None, ops, len(ops),
                ops[-1] if ops else None)
    try:
        runtime._sanitizer_kept = kept
    except AttributeError:        # a runtime-like object that takes no new attribute
        pass


def _resume(runtime, tasks, ops):
    """(state, first task to visit, first host op to visit) of the kept analysis, when it
    still describes a prefix of this trace; (None, 0, 0) otherwise."""
    kept = getattr(runtime, "_sanitizer_kept", None)
    if kept is None:
        return None, 0, 0
    st, ktasks, n_tasks, last_task, kops, n_ops, last_op = kept
    if (ktasks is not tasks or kops is not ops or len(tasks) < n_tasks or len(ops) < n_ops
            or (n_tasks and tasks[n_tasks - 1] is not last_task)
            or (n_ops and ops[n_ops - 1] is not last_op)):
        return None, 0, 0
    space = runtime.space
    for base, region in st.regions.items():   # buffers found by address: still the same
        if (space.find(base) or space.find_dead(base)) is not region:
            return None, 0, 0
    return st, n_tasks, n_ops


def report(runtime) -> str:
    """The findings as text, or a line saying there are none."""
    findings = analyze(runtime)
    if not findings:
        return "acllab sanitizer: no problems found"
    lines = [f"acllab sanitizer: {len(findings)} problem{'s' if len(findings) > 1 else ''}"]
    lines += [str(f) for f in findings]
    return "\n".join(lines)
