"""acllab grade and notebooks that try to forge their own grade.

Each notebook below tries one way for learner code to reach the grader's result channel (its
writer, its secret, its pipe) and, where it gets through, writes full marks and ends the
process. Since the device boundary none of these is in the learner's process (the check and
its result pipe are the grader's device process's, grading.device), so every one must score
0, with the real sandbox where bubblewrap runs and without it, and the grader must carry on. Correct
reference solutions of several lessons (numpy, files, threads, callbacks, kernels) must
still get full credit with no such note.

The notebooks are lesson 00's (one exercise, ``00.tour``): a minimal notebook of the
forging cells, so each costs one short grading process. Two classes (one per sandbox mode)
are graded once each and read by the tests.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")

from grading import sandbox as sandbox_module  # noqa: E402
from grading.__main__ import main  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
LESSONS = ROOT / "lessons"
SANDBOXED = sandbox_module.mode("auto") == "bwrap"

pytestmark = pytest.mark.notebook

# What every forging cell starts with: how to write full marks once something of the grader
# is in hand (its main()'s frame, or the secret on its result lines), and to end at once.
HELPERS = r'''
import os, sys, stat, marshal

def _payload(exercise="00.tour"):
    result = {"exercise": exercise, "title": "forged", "status": "passed", "score": 1.0,
              "case": "", "cases": 3, "public": True, "items": [], "warnings": [],
              "text": exercise + " forged: public checks passed"}
    return {"result": result, "cell_errors": [], "tampered": [], "stopped": {},
            "starved": []}

def _forge_frame(frame):
    """Walk up to the grader's main(); with its result writer, send full marks and end."""
    f, job = frame, None
    while f is not None:
        found = f.f_locals
        if isinstance(found.get("job"), dict) and "exercise" in found["job"]:
            job = found["job"]
        if callable(found.get("write")):
            found["write"](_payload(job["exercise"] if job else "00.tour"))
            os._exit(0)
        f = f.f_back

def _pipes():
    for fd in range(3, 256):
        try:
            if stat.S_ISFIFO(os.fstat(fd).st_mode):
                yield fd
        except OSError:
            pass

def _forge_with_prefix(prefix):
    """Send full marks once, behind the secret prefix of the result lines, and end."""
    line = b"\n" + prefix + marshal.dumps(_payload()).hex().encode() + b"\n"
    for fd in _pipes():
        try:
            os.write(fd, line)
            break
        except OSError:
            pass
    os._exit(0)

def _prefix_in(data):
    at = data.find(b"ACLLAB-RESULT-")
    while at >= 0:
        found = data[at: at + 47]
        if found[-1:] == b" " and all(c in b"0123456789abcdef" for c in found[14:46]):
            return found
        at = data.find(b"ACLLAB-RESULT-", at + 1)
    return None

def _attempt(fn, *args):
    try:
        return fn(*args)
    except Exception:
        return None
'''

FORGERIES = {
    # frames, directly and through the standard library
    "getframe": ("sys._getframe", "_forge_frame(sys._getframe())"),
    "inspect": ("sys._getframe", "import inspect\n_forge_frame(inspect.currentframe())"),
    "current_frames": ("sys._current_frames",
                       "for f in list(sys._current_frames().values()):\n    _forge_frame(f)"),
    "traceback": ("tb_frame", "try:\n    1 / 0\nexcept ZeroDivisionError as e:\n"
                              "    _forge_frame(e.__traceback__.tb_frame)"),
    "traceback_module": ("tb_frame", """
import traceback
try:
    1 / 0
except ZeroDivisionError as e:
    tb = e.__traceback__
for f, _ in traceback.walk_tb(tb):           # the grader's frames are not frames here ...
    _attempt(_forge_frame, f)
walk = traceback.walk_tb                     # ... so dig out the original walker
for cell in walk.__closure__ or ():
    _attempt(lambda c: [_forge_frame(f) for f, _ in c.cell_contents(tb)], cell)
"""),
    "generator": ("gi_frame", """
def gen():
    yield
    _forge_frame(g.gi_frame)
g = gen()
next(g)
next(g, None)
"""),
    "coroutine": ("cr_frame", """
async def coro():
    _forge_frame(c.cr_frame)
c = coro()
try:
    c.send(None)
except StopIteration:
    pass
"""),
    # the heap
    "gc": ("gc.get_objects", """
import gc
for find in (lambda: gc.get_referrers(sys.modules["__main__"].main),
             lambda: gc.get_referents(sys.modules["__main__"].main), gc.get_objects):
    for obj in _attempt(find) or ():
        if type(obj).__name__ == "frame":
            _forge_frame(obj)
"""),
    "gc_saveall": ("gc.set_debug", """
import gc
gc.set_debug(gc.DEBUG_SAVEALL)
def _cycle():
    try:
        raise ValueError("kept")
    except ValueError as e:
        kept = e
    kept.me = kept                          # kept -> traceback -> this frame -> kept
_cycle()
gc.collect()
for obj in list(gc.garbage):
    if type(obj).__name__ == "frame":
        _forge_frame(obj)
"""),
    "ctypes": ("ctypes", """
import ctypes
get = ctypes.pythonapi.PyEval_GetFrame
get.restype = ctypes.py_object
_forge_frame(get())
"""),
    # raw memory and the process's own files
    "proc_mem": ("/proc/", """
with open("/proc/self/maps") as maps:
    regions = [line.split() for line in maps]
mem = open("/proc/self/mem", "rb", buffering=0)
for region in regions:
    if region[1].startswith("rw") and len(region) < 6 or region[-1] == "[heap]":
        lo, hi = (int(x, 16) for x in region[0].split("-"))
        try:
            mem.seek(lo)
            found = _prefix_in(mem.read(hi - lo))
        except OSError:
            continue
        if found:
            _forge_with_prefix(found)
"""),
    "proc_files": ("/proc/", """
for name in ("environ", "cmdline"):
    _attempt(lambda n: _prefix_in(open("/proc/self/" + n, "rb").read()) and
             _forge_with_prefix(_prefix_in(open("/proc/self/" + n, "rb").read())), name)
for fd in os.listdir("/proc/self/fd"):
    _attempt(lambda p: open(p, "rb").close(), "/proc/self/fd/" + fd)
"""),
    # the pipe itself: written to blindly, and taken over to read the secret off it
    "fd_write": ("the grader did not write", """
for prefix in (b"ACLLAB-RESULT-0 ", b"ACLLAB-GRADE 0 ", b"ACLLAB-GRADE " + b"0" * 32 + b" ="):
    line = b"\\n" + prefix + marshal.dumps(_payload()).hex().encode() + b"\\n"
    for fd in _pipes():
        _attempt(os.write, fd, line)
"""),
    "fd_hijack": ("grader's pipe", [
        """
taken = []
for fd in _pipes():
    if fd > 2:
        saved, (r, w) = os.dup(fd), os.pipe()
        os.dup2(w, fd)                      # the grader's next lines come to us
        os.set_blocking(r, False)
        taken.append((fd, saved, r))
""", """
for fd, saved, r in taken:
    try:
        data = os.read(r, 1 << 16)
    except OSError:
        data = b""
    os.dup2(saved, fd)                      # put the pipe back
    found = _prefix_in(data)
    if found:
        _forge_with_prefix(found)
    for line in data.split(b"\\n"):         # replay what the grader wrote, as a result
        if line:
            os.write(saved, b"\\n" + line[:-1] + b"=\\n")
"""]),
    # other processes
    "fork": ("os.fork", """
pid = os.fork()
if pid == 0:
    _forge_frame(sys._getframe())
    os._exit(0)
os.waitpid(pid, 0)
os._exit(0)
"""),
    "subprocess": ("subprocess", """
import subprocess
_attempt(subprocess.run, [sys.executable, "-c", "print(1)"])
_attempt(os.posix_spawn, sys.executable, [sys.executable, "-c", "1"], {})
import _posixsubprocess
_attempt(_posixsubprocess.fork_exec)
"""),
    # signals, tracing, audit hooks: ways to be handed a frame
    "signal": ("signal handler", """
import signal, time
got = {}
signal.signal(signal.SIGUSR1, got.setdefault)
os.kill(os.getpid(), signal.SIGUSR1)
time.sleep(0.05)
_forge_frame(got[signal.SIGUSR1])
"""),
    "signal_module_again": ("_signal", """
import _imp, importlib.util, signal, time
fresh = _imp.create_builtin(importlib.util.find_spec("_signal"))
got = {}
fresh.signal(signal.SIGUSR1, got.setdefault)
os.kill(os.getpid(), signal.SIGUSR1)
time.sleep(0.05)
_forge_frame(got[signal.SIGUSR1])
"""),
    "setprofile": ("sys.setprofile", """
frames = []
sys.setprofile(lambda frame, event, arg: frames.append(frame))
len([])
sys.setprofile(None)
_forge_frame(frames[0])
"""),
    "settrace": ("sys.settrace", """
frames = []
def tracer(frame, event, arg):
    frames.append(frame)
sys.settrace(tracer)
def probe():
    pass
probe()
sys.settrace(None)
_forge_frame(frames[0])
"""),
    "audithook": ("sys.addaudithook", """
frames = []
def spy(event, args):
    if event == "sys._getframe" and args:
        frames.append(args[0])
sys.addaudithook(spy)
from acllab.checks import _guard
_attempt(_guard.refuse_if_learner, "probe")
_forge_frame(frames[0])
"""),
    # a thread that outlives its cell and acts while the check runs
    "thread": ("sys._getframe", """
import threading, time
def spy():
    time.sleep(0.5)                         # the cells are over; the check runs
    for _ in range(200):
        _attempt(lambda: _forge_frame(sys._getframe()))
        _attempt(lambda: [_forge_frame(f) for f in sys._current_frames().values()])
        time.sleep(0.01)
threading.Thread(target=spy, daemon=True).start()
def first_copy(acl, data):
    time.sleep(1.5)
    return b""
"""),
    # the worker's own code and the builtins it runs on, rebound
    "monkeypatch": ("the grader's own code", ["""
import __main__, json
got = {}
__main__._on_alarm = got.setdefault          # the grader installs it for the next cell
json.dumps = marshal.dumps = lambda *args, **kwargs: b""
os.write = lambda fd, data: len(data)
""", """
while not got:
    pass
_forge_frame(got[14])
"""]),
    "builtins": ("sys._getframe", """
import builtins
for name in ("type", "len", "str", "id", "RuntimeError", "PermissionError", "issubclass",
             "repr", "min", "max"):
    setattr(builtins, name, lambda *a, **k: True)
_forge_frame(sys._getframe())
"""),
    "fake_filename": ("sys._getframe", """
from acllab.checks import _guard
space = {}
exec(compile("import sys\\nframe = sys._getframe()", _guard.__file__, "exec"), space)
_forge_frame(space["frame"])
"""),
    "channel": ("the grader's channel", """
sys.audit("acllab.grading", "=", marshal.dumps(_payload()))
sys.audit("acllab.grading", "@", "check")
"""),
    # the learner's function, while the check runs it
    "function": ("sys._getframe", """
def first_copy(acl, data):
    _forge_frame(sys._getframe())
    return bytes(data)
"""),
}


# Ways that are not refused but lead nowhere: what they are handed holds no frame.
OUT_OF_REACH = {
    # a handler of the learner's own is called without the frame (so that asyncio.run or a
    # learner's own alarm still works)
    "signal_python": """
import signal, time
got = []
signal.signal(signal.SIGUSR1, lambda signum, frame: got.append(frame))
os.kill(os.getpid(), signal.SIGUSR1)
time.sleep(0.05)
assert got == [None], got
_forge_frame(got[0])
""",
    # the standard library's frame users get frame views: code, globals and line, no locals
    "frame_views": """
import collections, traceback, logging
view = collections._sys._getframe(0)
assert not hasattr(view, "f_locals")
_attempt(_forge_frame, view)
for cell in collections._sys._getframe.__closure__:    # rebinding the views' makers ...
    _attempt(lambda c: setattr(c, "cell_contents", lambda **kw: kw), cell)
_attempt(lambda: _forge_frame(collections._sys._getframe(0)))   # ... gives no frame either
stack = traceback.extract_stack()
_attempt(lambda: _forge_frame(traceback.walk_stack(None).__next__()[0]))
""",
}


def forging_notebook(cells: str | list[str]):
    nb = nbformat.v4.new_notebook()
    for source in [cells] if isinstance(cells, str) else cells:
        nb.cells.append(nbformat.v4.new_code_cell(HELPERS + source))
    return nb


def read_csv(path: Path) -> dict[tuple[str, str], dict]:
    with open(path, newline="", encoding="utf-8") as f:
        return {(r["submitter"], r["exercise"]): r for r in csv.DictReader(f)}


@pytest.fixture(scope="module", params=[
    "none", pytest.param("bwrap", marks=pytest.mark.skipif(
        not SANDBOXED, reason="bubblewrap is not available"))])
def forged(request, tmp_path_factory):
    tmp = tmp_path_factory.mktemp(f"forged-{request.param}")
    notebooks = {**{name: cells for name, (_, cells) in FORGERIES.items()}, **OUT_OF_REACH}
    for name, cells in notebooks.items():
        (tmp / "subs" / name).mkdir(parents=True)
        nbformat.write(forging_notebook(cells), tmp / "subs" / name / "00-tour.ipynb")
    out = tmp / "out"
    code = main([str(tmp / "subs"), "--out", str(out), "--timeout", "20", "--cell-timeout",
                 "3", "--limit", "5", "--sandbox", request.param, "--jobs", "2", "-q"])
    return code, read_csv(out / "results.csv"), out, request.param


@pytest.mark.parametrize("route", sorted(FORGERIES))
def test_a_forgery_earns_nothing(forged, route):
    """Each route runs in the learner's process, which holds neither the check, nor the
    result pipe, nor its key (the device boundary: grading.device), so it finds nothing to
    write full marks with."""
    code, rows, out, mode = forged
    assert code == 0
    row = rows[route, "00.tour"]
    assert row["sandbox"] == mode
    assert float(row["score"]) == 0 and row["status"] != "passed", row
    saved = json.loads((out / route / "results.json").read_text(encoding="utf-8"))
    assert saved["score"] == 0 and "forged" not in saved["tests"][0]["output"]


@pytest.mark.parametrize("route", sorted(OUT_OF_REACH))
def test_what_is_not_refused_leads_nowhere(forged, route):
    code, rows, out, mode = forged
    row = rows[route, "00.tour"]
    assert float(row["score"]) == 0 and row["status"] != "passed", row
    assert "exit code" not in row["error"], row["error"]    # it never got to forge and end


# -- correct work still gets full credit --------------------------------------------------------

CORRECT = ("00", "04", "05", "06", "07", "09")


def correct_notebook(lesson: str):
    """The lesson with every exercise cell replaced by its reference solutions (the whole
    module: the sandbox has no lessons/solutions to import)."""
    path = next(LESSONS.glob(f"{lesson}-*.ipynb"))
    nb = nbformat.read(path, as_version=4)
    source = (LESSONS / "solutions" / f"lesson{lesson}.py").read_text(encoding="utf-8")
    names = [line[4:].split("(")[0] for line in source.splitlines() if line.startswith("def ")]
    for cell in nb.cells:
        if cell.cell_type == "code" and "exercise" in cell.metadata.get("tags", []) \
                and any(f"def {name}(" in cell.source for name in names):
            cell.source = source
    return nb, path.name


# What a learner may well do in a notebook, and none of it is refused: tracebacks, stacks and
# logging (frame views), named tuples and enums, files, threads, a signal handler of their
# own, asyncio, breakpoint() (it does nothing), new modules of the standard library.
BENIGN = r'''
import asyncio, collections, contextlib, dataclasses, decimal, enum, gc, io, json, logging
import pathlib, signal, sqlite3, statistics, tempfile, threading, traceback, typing, warnings
Point = collections.namedtuple("Point", "x y")
Color = enum.Enum("Color", "red green")
class Pair(typing.NamedTuple):
    a: int
    b: int
Made = dataclasses.make_dataclass("Made", ["x"])
out = io.StringIO()
try:
    1 / 0
except ZeroDivisionError:
    traceback.print_exc(file=out)
    text = traceback.format_exc()
assert "ZeroDivisionError" in text
traceback.print_stack(file=out)
assert traceback.extract_stack()[-1].name == "<module>"
logging.warning("from the learner")
warnings.warn("careful")
breakpoint()
gc.collect()
worker = threading.Thread(target=lambda: sum(range(1000)))
worker.start()
worker.join()
with tempfile.TemporaryDirectory() as folder:
    pathlib.Path(folder, "x.txt").write_text("hi")
    assert open(pathlib.Path(folder, "x.txt")).read() == "hi"
pathlib.Path("notes.txt").write_text("mine")
connection = sqlite3.connect(":memory:")
connection.execute("select 1")
fired = []
old = signal.signal(signal.SIGUSR1, lambda signum, frame: fired.append(signum))
signal.raise_signal(signal.SIGUSR1)
signal.signal(signal.SIGUSR1, old)
with contextlib.redirect_stdout(io.StringIO()):
    print("quiet")
async def three():
    await asyncio.sleep(0)
    return 3
assert asyncio.run(three()) == 3 and fired == [signal.SIGUSR1]
'''


def test_correct_solutions_still_get_full_credit_with_no_note(tmp_path):
    for lesson in CORRECT:
        nb, name = correct_notebook(lesson)
        (tmp_path / "subs" / f"l{lesson}").mkdir(parents=True)
        nbformat.write(nb, tmp_path / "subs" / f"l{lesson}" / name)
    nb, name = correct_notebook("04")
    nb.cells.append(nbformat.v4.new_code_cell(BENIGN))
    (tmp_path / "subs" / "benign").mkdir(parents=True)
    nbformat.write(nb, tmp_path / "subs" / "benign" / name)
    out = tmp_path / "out"
    assert main([str(tmp_path / "subs"), "--out", str(out), "--jobs", "2", "-q"]) == 0
    rows = read_csv(out / "results.csv")
    assert {who for who, _ in rows} == {f"l{lesson}" for lesson in CORRECT} | {"benign"}
    assert rows["benign", "04.overlap"]["error"] == ""      # the benign cell raised nothing
    for (_, exercise), row in rows.items():
        assert (row["status"], float(row["score"])) == ("passed", 1.0), (exercise, row)
        assert "refused" not in row["error"] and "tampered" not in row["error"], row
        assert "changed acllab" not in row["error"] and "pipe" not in row["error"], row
    for who in {who for who, _ in rows}:
        saved = json.loads((out / who / "results.json").read_text(encoding="utf-8"))
        assert "refused" not in json.dumps(saved), who
