"""The sanitizer against a planted-bug corpus, and its outputs (Finding, report, the CLI).

Every case of ``tests/sanitizer_corpus`` is a bugged pyACL program and its fixed twin: the
sanitizer must report the planted bug (a finding of the expected kind, naming the streams and
buffers involved, and no unrelated kinds), and nothing at all for the fixed program.
"""

from __future__ import annotations

from collections import Counter

import pytest
from conftest import no_acl_warnings
from sanitizer_corpus import CASES, HOST

import acllab
from acllab import acl, cli
from acllab.analysis import sanitizer
from acllab.analysis.sanitizer import KINDS, Finding

pytestmark = pytest.mark.filterwarnings(
    "ignore:acl.util.ptr_to_numpy is deprecated:DeprecationWarning")

IDS = [c.name for c in CASES]

# the issue's classes (a)-(g), by finding kind
CLASSES = {
    "a": {"host-read-before-sync", "host-write-while-read"},
    "b": {"race"},
    "c": {"use-after-free"},
    "d": {"pageable-async"},
    "e": {"stale-event-wait", "event-reset-while-waited", "wait-never-recorded"},
    "f": {"leak"},
    "g": {"uninitialised-read"},
}


@pytest.fixture(autouse=True)
def _fresh(fresh):
    """A fresh default runtime for every test (defaults restored afterwards)."""
    yield fresh


def run(program):
    """Run one corpus program in a fresh runtime: (runtime, its return value, findings)."""
    runtime = acllab.reset()
    result = program(acl)
    return runtime, result, sanitizer.analyze(runtime)


def _why(findings) -> str:
    return "\n".join(str(f) for f in findings) or "(no findings)"


# ---------------------------------------------------------------------------------------
# the corpus itself
# ---------------------------------------------------------------------------------------

def test_corpus_is_large_and_covers_every_class():
    assert len(CASES) >= 25
    assert len(set(IDS)) == len(IDS), "case names must be unique"
    kinds = Counter(c.kind for c in CASES)
    assert set(kinds) <= set(KINDS)
    for cls, members in CLASSES.items():
        assert sum(kinds[k] for k in members) >= 2, f"class ({cls}) needs at least 2 cases"
    assert kinds["host-read-before-sync"] >= 1 and kinds["host-write-while-read"] >= 1
    assert kinds["race"] >= 4
    assert all(kinds[k] >= 1 for k in CLASSES["e"]) and sum(kinds[k] for k in CLASSES["e"]) >= 4
    assert "seed_double_stream" in IDS


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_case_is_well_formed(case):
    assert case.bug.__name__ == f"bug_{case.name}"
    assert case.fixed.__name__ == f"fixed_{case.name}"
    assert case.description and "\n" not in case.description
    assert case.kind in KINDS


# ---------------------------------------------------------------------------------------
# bugged programs are caught, fixed ones are clean
# ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_bug_is_caught(case):
    runtime, _expected, findings = run(case.bug)
    assert any(f.kind == case.kind for f in findings), (
        f"{case.name} ({case.description}): no {case.kind!r} finding; the sanitizer said:\n"
        f"{_why(findings)}")
    for f in findings:
        assert f.kind in KINDS
        assert f.message and f.fix
        assert all(0 <= t < len(runtime.tasks) for t in f.tasks)
        assert all(isinstance(ns, int) for ns in f.times_ns)


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_fixed_is_clean(case):
    runtime = acllab.reset()
    with no_acl_warnings():
        case.fixed(acl)
    findings = sanitizer.analyze(runtime)
    assert findings == [], (
        f"fixed_{case.name} is correct, but the sanitizer reported:\n{_why(findings)}")


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_bug_has_no_unrelated_findings(case):
    _runtime, expected, findings = run(case.bug)
    allowed = {case.kind} | expected["also"]
    unrelated = [f for f in findings if f.kind not in allowed]
    assert not unrelated, (
        f"bug_{case.name} has one planted bug ({case.kind}), but the sanitizer also "
        f"reported:\n{_why(unrelated)}")


def _stream_of(runtime, handle):
    """The Stream object (or None for HOST) that a program's stream argument meant."""
    if handle == HOST:
        return None
    for t in runtime.tasks:
        s = t.stream
        if s is not None and (s.handle == handle or (handle == 0 and s.is_default)):
            return s
    raise AssertionError(f"no task ran on stream 0x{handle:x}")


def _names_culprits(runtime, finding, expected) -> list[str]:
    """What ``finding`` fails to name of ``expected`` (empty when it names everything)."""
    missing = []
    task_streams = [runtime.tasks[t].stream for t in finding.tasks]
    for handle in expected["streams"]:
        s = _stream_of(runtime, handle)
        if s is None:
            named = any(ts is None for ts in task_streams) or \
                any("host" in name for name in finding.streams)
            what = "the host's blocking call"
        else:
            named = any(ts is s for ts in task_streams) or s.name in finding.streams
            what = s.name
        if not named:
            missing.append(what)
    for addr in expected["buffers"]:
        if addr not in finding.buffers:
            missing.append(f"buffer 0x{addr:x}")
    for text in expected["text"]:
        if text not in finding.message:
            missing.append(f"{text!r} in the message")
    # every stream the finding lists is the stream of one of its tasks (when it names tasks)
    names = {ts.name if ts is not None else "host" for ts in task_streams}
    for listed in finding.streams if finding.tasks else ():
        if not any(name in listed for name in names):
            missing.append(f"a task on {listed!r} (Finding.streams lists it)")
    return missing


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_finding_names_the_culprits(case):
    runtime, expected, findings = run(case.bug)
    ours = [f for f in findings if f.kind == case.kind]
    if not ours:
        pytest.fail(f"no {case.kind!r} finding at all (see test_bug_is_caught)")
    gaps = [_names_culprits(runtime, f, expected) for f in ours]
    assert any(not g for g in gaps), (
        f"bug_{case.name}: no {case.kind!r} finding names everything involved; the closest "
        f"misses {min(gaps, key=len)}:\n{_why(ours)}\n"
        f"(tasks {[f.tasks for f in ours]}, streams {[f.streams for f in ours]}, "
        f"buffers {[[hex(b) for b in f.buffers] for f in ours]})")


def test_seed_double_stream_names_the_copy_and_the_execution():
    case = next(c for c in CASES if c.name == "seed_double_stream")
    runtime, expected, findings = run(case.bug)
    races = [f for f in findings if f.kind == "race"]
    assert races, _why(findings)
    dev_in = expected["buffers"][0]
    f = next(f for f in races if dev_in in f.buffers)
    directions = {runtime.tasks[t].info.get("direction") for t in f.tasks}
    assert directions == {"h2d", "d2d"}, directions   # the next batch's copy vs the execution
    assert len({runtime.tasks[t].stream.handle for t in f.tasks}) == 2
    assert "fix:" in str(f) and "event" in f.fix


# ---------------------------------------------------------------------------------------
# determinism
# ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_findings_are_deterministic(case):
    runtime_a, _, first = run(case.bug)
    report_a = sanitizer.report(runtime_a)
    runtime_b, _, second = run(case.bug)
    assert first == second
    assert report_a == sanitizer.report(runtime_b)


def test_analyze_twice_gives_the_same_findings():
    case = next(c for c in CASES if c.name == "stale_record_in_loop")
    runtime, _, first = run(case.bug)
    assert sanitizer.analyze(runtime) == first
    assert sanitizer.analyze(runtime) == first


# ---------------------------------------------------------------------------------------
# Finding and report()
# ---------------------------------------------------------------------------------------

def test_finding_str_has_kind_message_and_fix():
    f = Finding("race", "two streams touch the same bytes", "record an event",
                tasks=[1, 2], streams=["Stream 1", "Stream 2"], buffers=[0x40], times_ns=[5, 6])
    text = str(f)
    assert "[race]" in text and "two streams touch the same bytes" in text
    assert "fix: record an event" in text
    assert text.index("[race]") < text.index("fix:")


@pytest.mark.parametrize("case", CASES[:3] + [c for c in CASES if c.kind == "leak"][:1],
                         ids=lambda c: c.name)
def test_real_findings_print_kind_message_and_fix(case):
    _runtime, _, findings = run(case.bug)
    assert findings
    for f in findings:
        text = str(f)
        assert f"[{f.kind}]" in text and f.message in text
        assert "fix:" in text and f.fix in text


def test_report_without_findings():
    case = CASES[0]
    runtime, _, _ = run(case.fixed)
    assert sanitizer.report(runtime) == "acllab sanitizer: no problems found"


def test_report_with_one_finding():
    case = next(c for c in CASES if c.name == "read_before_sync")
    runtime, _, findings = run(case.bug)
    assert len(findings) == 1
    text = sanitizer.report(runtime)
    lines = text.splitlines()
    assert lines[0] == "acllab sanitizer: 1 problem"
    assert str(findings[0]) in text


def test_report_with_several_findings():
    case = next(c for c in CASES if c.name == "stale_record_in_loop")
    runtime, _, findings = run(case.bug)
    assert len(findings) > 1
    text = sanitizer.report(runtime)
    assert text.splitlines()[0] == f"acllab sanitizer: {len(findings)} problems"
    positions = [text.index(str(f)) for f in findings]
    assert positions == sorted(positions)
    assert text.count("fix:") == len(findings)


def test_report_of_a_fresh_runtime():
    assert sanitizer.report(acllab.reset()) == "acllab sanitizer: no problems found"


# ---------------------------------------------------------------------------------------
# acllab profile --sanitize
# ---------------------------------------------------------------------------------------

_PAGEABLE_SCRIPT = """\
import acl

acl.init()
acl.rt.set_device(0)
stream, _ = acl.rt.create_stream()
dev, _ = acl.rt.malloc(4096, 0)
data = bytes(4096)
{copy}
acl.rt.synchronize_stream(stream)
acl.rt.free(dev)
{free_host}
acl.rt.destroy_stream(stream)
acl.rt.reset_device(0)
acl.finalize()
{exit}
"""

_BUGGY = dict(copy="acl.rt.memcpy_async(dev, 4096, acl.util.bytes_to_ptr(data), 4096, 1, "
                   "stream)", free_host="", exit="")
_CLEAN = dict(copy="host, _ = acl.rt.malloc_host(4096)\n"
                   "acl.rt.memcpy(host, 4096, acl.util.bytes_to_ptr(data), 4096, 0)\n"
                   "acl.rt.memcpy_async(dev, 4096, host, 4096, 1, stream)",
              free_host="acl.rt.free_host(host)", exit="")


def _profile(tmp_path, name, source, sanitize=True):
    script = tmp_path / name
    script.write_text(source)
    args = ["profile", *(["--sanitize"] if sanitize else []),
            "--out", str(tmp_path / f"{name}.json"), str(script)]
    return cli.main(args)


def test_profile_sanitize_fails_a_buggy_script(tmp_path, capsys):
    assert _profile(tmp_path, "buggy.py", _PAGEABLE_SCRIPT.format(**_BUGGY)) == 1
    out = capsys.readouterr().out
    assert "acllab sanitizer: 1 problem" in out
    assert "[pageable-async]" in out and "fix:" in out and "malloc_host" in out


def test_profile_sanitize_passes_a_clean_script(tmp_path, capsys):
    assert _profile(tmp_path, "clean.py", _PAGEABLE_SCRIPT.format(**_CLEAN)) == 0
    assert "acllab sanitizer: no problems found" in capsys.readouterr().out


def test_profile_without_sanitize_ignores_findings(tmp_path, capsys):
    assert _profile(tmp_path, "buggy.py", _PAGEABLE_SCRIPT.format(**_BUGGY),
                    sanitize=False) == 0
    assert "acllab sanitizer" not in capsys.readouterr().out


def test_profile_sanitize_keeps_the_scripts_own_exit_code(tmp_path):
    source = _PAGEABLE_SCRIPT.format(**(_BUGGY | {"exit": "raise SystemExit(3)"}))
    assert _profile(tmp_path, "exit3.py", source) == 3


def test_profile_sanitize_reports_a_leak(tmp_path, capsys):
    source = "import acl\nacl.init()\nacl.rt.set_device(0)\ns, _ = acl.rt.create_stream()\n" \
             "acl.rt.reset_device(0)\nacl.finalize()\n"
    assert _profile(tmp_path, "leaky.py", source) == 1
    assert "[leak]" in capsys.readouterr().out


# ---------------------------------------------------------------------------------------
# its cost per task is bounded (counted, never timed)
# ---------------------------------------------------------------------------------------

def _pipeline(iterations: int, two_way: bool):
    """The minimal two-stream pipeline (H2D + record on A, wait + D2H on B); ``two_way``
    also makes A wait for B's copy before reusing the device buffer (race free)."""
    runtime = acllab.reset()
    acl.init()
    acl.rt.set_device(0)
    a, _ = acl.rt.create_stream()
    b, _ = acl.rt.create_stream()
    host_in, _ = acl.rt.malloc_host(4096)
    host_out, _ = acl.rt.malloc_host(4096)
    dev, _ = acl.rt.malloc(4096, 0)
    up, _ = acl.rt.create_event()
    down, _ = acl.rt.create_event()
    for i in range(iterations):
        if two_way and i:
            acl.rt.stream_wait_event(a, down)
        acl.rt.memcpy_async(dev, 4096, host_in, 4096, 1, a)
        acl.rt.record_event(up, a)
        acl.rt.stream_wait_event(b, up)
        acl.rt.memcpy_async(host_out, 4096, dev, 4096, 2, b)
        if two_way:
            acl.rt.record_event(down, b)
    acl.rt.synchronize_stream(a)
    acl.rt.synchronize_stream(b)
    return runtime


@pytest.mark.parametrize("two_way", [False, True])
def test_vector_clocks_are_shared_along_a_stream(two_way):
    """A task shares its stream predecessor's clock until something new reaches the stream:
    clocks are made only where a wait brings news (about one per wait), not one per task."""
    runtime = _pipeline(200, two_way)
    st = sanitizer._State(runtime)
    for t in st.tasks:
        sanitizer._visit_task(st, t)
    waits = sum(1 for t in st.tasks if t.kind == "event_wait")
    distinct = len({id(vc) for vc in st.vc})
    assert len(st.vc) == len(st.tasks) >= 800
    assert distinct <= waits + 4, (distinct, waits)
    findings = sanitizer.analyze(runtime)
    assert [f.kind for f in findings] == ([] if two_way else ["race"])


def test_history_per_buffer_stays_short_in_a_loop():
    """Accesses of a stream that a newer one covers are forgotten, so a loop over the same
    buffers keeps a few entries per buffer however long it runs."""
    runtime = _pipeline(300, True)
    st = sanitizer._State(runtime)
    for t in st.tasks:
        sanitizer._visit_task(st, t)
    assert max(len(h) for h in st.history.values()) <= 4
    assert all(len(r) == 1 for r in st.init.values())


def test_copies_in_a_loop_fingerprint_nothing_and_share_their_records(monkeypatch):
    """Pinned buffers of which the host holds no view are never fingerprinted (host-view
    watching costs no CRC), and identical copies share their reads, writes and info."""
    import acllab.runtime as runtime_module

    calls = []
    real = runtime_module.zlib.crc32
    monkeypatch.setattr(runtime_module.zlib, "crc32", lambda *a: calls.append(1) or real(*a))
    runtime = _pipeline(100, True)
    assert calls == []
    copies = [t for t in runtime.tasks if t.kind == "memcpy" and t.name.endswith("ToDevice")]
    assert len(copies) == 100
    assert len({id(t.info) for t in copies}) == 1
    assert len({id(t.reads) for t in copies}) == len({id(t.writes) for t in copies}) == 1


def _fresh_findings(runtime) -> list:
    runtime._sanitizer_kept = None          # forget the kept analysis: start from task 0
    return sanitizer.analyze(runtime)


def test_an_analysis_goes_on_from_the_last_one_with_the_same_findings(monkeypatch):
    runtime = _pipeline(30, False)           # one race, seen 29 times
    first = sanitizer.analyze(runtime)
    assert [f.kind for f in first] == ["race"] and "(Seen 29 times" in first[0].message
    # more work after the analysis: new streams racing on new buffers
    a, _ = acl.rt.create_stream()
    b, _ = acl.rt.create_stream()
    dev, _ = acl.rt.malloc(4096, 0)
    host, _ = acl.rt.malloc_host(4096)
    for _ in range(3):
        acl.rt.memcpy_async(dev, 4096, host, 4096, 1, a)
        acl.rt.memcpy_async(host, 4096, dev, 4096, 2, b)
    acl.rt.synchronize_stream(a)
    acl.rt.synchronize_stream(b)
    visited = []
    real = sanitizer._visit_task
    monkeypatch.setattr(sanitizer, "_visit_task", lambda st, t: (visited.append(t.id),
                                                                 real(st, t)))
    second = sanitizer.analyze(runtime)
    assert visited == list(range(4 * 30, 4 * 30 + 6))   # only the new tasks were visited
    assert second == _fresh_findings(runtime)
    assert [f.kind for f in second] == ["race"] * 3   # the old one, two new buffers
    assert "(Seen 29 times" in second[0].message    # the kept finding was not changed
    second[0].message = "changed by the caller"
    assert sanitizer.analyze(runtime) == _fresh_findings(runtime)


def test_an_analysis_with_tasks_still_queued_is_not_kept():
    runtime = acllab.reset()
    acl.init()
    acl.rt.set_device(0)
    s, _ = acl.rt.create_stream()
    dev, _ = acl.rt.malloc(4096, 0)
    host, _ = acl.rt.malloc_host(4096)
    acl.rt.memcpy_async(dev, 4096, host, 4096, 1, s)
    assert sanitizer.analyze(runtime) == _fresh_findings(runtime)
    assert runtime._sanitizer_kept is None          # the copy has not ended yet
    acl.rt.synchronize_stream(s)
    sanitizer.analyze(runtime)
    assert runtime._sanitizer_kept is not None


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_every_corpus_program_gives_the_fresh_findings_when_analysed_again(case):
    """Programs that analyse (acl.finalize does) and then analyse again: the analysis that
    goes on from a kept one finds what one started afresh finds."""
    for program in (case.bug, case.fixed):
        runtime, _, first = run(program)
        assert first == _fresh_findings(runtime)
        assert sanitizer.analyze(runtime) == first


def test_findings_name_the_allocation_call_and_a_teardown_order_that_works():
    """An unwritten DVPP buffer is named as dvpp_malloc's (not acl.rt.malloc's); the leak fix
    frees and destroys before reset_device, never memory after the contexts."""
    acllab.reset()
    acl.init()
    acl.rt.set_device(0)
    dvpp, _ = acl.media.dvpp_malloc(4096)
    dev, _ = acl.rt.malloc(4096, 0)
    host, _ = acl.rt.malloc_host(4096)
    assert acl.rt.memcpy(host, 4096, dvpp, 4096, 2) == 0
    assert acl.rt.memcpy(host, 4096, dev, 4096, 2) == 0
    runtime = acllab.current_runtime()
    uninit = [f.message for f in sanitizer.analyze(runtime) if f.kind == "uninitialised-read"]
    assert len(uninit) == 2
    assert "since acl.media.dvpp_malloc" in uninit[0] and "since acl.rt.malloc:" in uninit[1]
    acl.rt.free(dev)
    acl.rt.free_host(host)
    with pytest.warns(acllab.AclWarning):
        acl.rt.reset_device(0)                 # the DVPP buffer leaks
    leaks = [f for f in sanitizer.analyze(runtime) if f.kind == "leak"]
    assert leaks and "DVPP buffer" in leaks[0].message
    fix = leaks[0].fix
    assert fix.index("free") < fix.index("reset_device") < fix.index("finalize")
    assert "contexts, free" not in fix
    acl.finalize()
