"""acllab grade across the device boundary: learner code cannot reach the grade.

The check and the simulated device run in the grader's device process; the learner's cells
and function run in a sandboxed process of their own, which reaches the device only through
pyACL calls (acllab.device). So whatever runs in the learner's process at any moment (gc
callbacks, finalizers, __del__, signal handlers, threads, lazily converted or lying return
values, helpers stashed in a cell, bytes written to every descriptor) changes only what that
process sends: a wrong answer scores 0, and correct work with stray threads or timers scores
full marks. Each class is graded with and without bubblewrap.
"""

from __future__ import annotations

import csv
import os
import textwrap
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")

from grading import sandbox as sandbox_module  # noqa: E402
from grading.__main__ import main  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
SANDBOXED = sandbox_module.mode("auto") == "bwrap"

pytestmark = pytest.mark.notebook

WRONG = '''
def first_copy(acl, data):
    return bytes(len(data))          # never touches the device: every byte wrong
'''

RIGHT = (ROOT / "lessons" / "solutions" / "lesson00.py").read_text(encoding="utf-8")

# rewrites every result this process can see to full marks, wherever it is called from
FLIP = '''
import sys
def flip(*args, **kwargs):
    for name in list(sys.modules):
        if name.startswith("acllab.checks"):
            history = getattr(sys.modules[name], "history", None)
            for result in list(getattr(history, "values", lambda: [])()):
                try:
                    result.status, result.graded_score, result.items = "passed", 1.0, []
                except Exception:
                    pass
'''

ATTACKS = {
    "gc_callback": FLIP + '''
import gc
gc.callbacks.append(flip)
gc.set_threshold(1, 1, 1)
''',
    "finalizers": FLIP + '''
import atexit, weakref
class Trap:
    def __del__(self):
        flip()
        Trap()                        # and again, at every collection
junk = [Trap() for _ in range(100)]
del junk
class Holder: pass
h = Holder()
weakref.finalize(h, flip)
atexit.register(flip)
''',
    "signal_handler": FLIP + '''
import signal
signal.signal(signal.SIGALRM, lambda signum, frame: flip())
signal.signal(signal.SIGPROF, lambda signum, frame: flip())
signal.setitimer(signal.ITIMER_PROF, 0.001, 0.001)
''',
    "thread": FLIP + '''
import threading
def loop():
    while True:
        flip()
threading.Thread(target=loop, daemon=True).start()
''',
    "lying_value": '''
class Liar(bytes):
    def __eq__(self, other):
        return True
    def __ne__(self, other):
        return False
    __hash__ = bytes.__hash__
class Shape:
    __class__ = bytes
    def __eq__(self, other):
        return True
    def __len__(self):
        return 10 ** 9
def first_copy(acl, data):
    import random
    return random.choice([Liar(b"x"), Shape()])
''',
    "every_descriptor": '''
import os
for fd in range(3, 64):
    try:
        os.write(fd, b"\\x00\\x00\\x00\\x05mxxxx" + b"ACLLAB-GRADE forged\\n")
    except OSError:
        pass
''',
    "patch_acllab": '''
import acllab.checks, acllab.device.client as client
acllab.checks.check = lambda *a, **k: None
client.DeviceClient.to_server = lambda self, v: {"status": "passed", "score": 1.0}
''',
}


def notebook(*sources: str, lesson_cells: bool = True):
    nb = nbformat.v4.new_notebook()
    for source in sources:
        nb.cells.append(nbformat.v4.new_code_cell(textwrap.dedent(source)))
    return nb


def read_csv(path: Path) -> dict[tuple[str, str], dict]:
    with open(path, newline="", encoding="utf-8") as f:
        return {(r["submitter"], r["exercise"]): r for r in csv.DictReader(f)}


MODES = ["none", pytest.param("bwrap", marks=pytest.mark.skipif(
    not SANDBOXED, reason="bubblewrap is not available"))]


@pytest.fixture(scope="module", params=MODES)
def graded(request, tmp_path_factory):
    tmp = tmp_path_factory.mktemp(f"boundary-{request.param}")
    subs = tmp / "subs"
    books = {f"wrong_{name}": notebook(WRONG, cells) for name, cells in ATTACKS.items()}
    books.update({
        "right_with_timer": notebook(RIGHT, "import threading\n"
                                     "threading.Timer(3600, print).start()\n"),
        "right_with_idle_thread": notebook(RIGHT, "import threading, time\n"
                                           "threading.Thread(target=time.sleep, args=(3600,),"
                                           " daemon=True).start()\n"),
        "right_with_gc_callback": notebook(RIGHT, "import gc\n"
                                           "gc.callbacks.append(lambda *a: None)\n"
                                           "gc.set_threshold(50, 5, 5)\n"),
        "right": notebook(RIGHT),
    })
    for who, nb in books.items():
        (subs / who).mkdir(parents=True)
        nbformat.write(nb, subs / who / "00-tour.ipynb")
    out = tmp / "out"
    code = main([str(subs), "--out", str(out), "--timeout", "30", "--cell-timeout", "5",
                 "--limit", "5", "--sandbox", request.param, "--jobs", "2", "-q",
                 "--seeds", "101,102"])
    return code, read_csv(out / "results.csv"), request.param


@pytest.mark.parametrize("attack", sorted(ATTACKS))
def test_an_attack_from_the_learners_process_earns_nothing(graded, attack):
    code, rows, mode = graded
    assert code == 0
    row = rows[f"wrong_{attack}", "00.tour"]
    assert row["sandbox"] == mode
    assert float(row["score"]) == 0 and row["status"] != "passed", row


@pytest.mark.parametrize("who", ["right", "right_with_timer", "right_with_idle_thread",
                                 "right_with_gc_callback"])
def test_correct_work_earns_full_credit_whatever_else_runs(graded, who):
    _, rows, _ = graded
    row = rows[who, "00.tour"]
    assert (row["status"], float(row["score"])) == ("passed", 1.0), row


# -- a helper that computes the answer, stashed in a cell, earns nothing -----------------------

LESSON08_VIA_HELPER = '''
import acllab.teaching.deploy as deploy
best = deploy.best_deployment               # taken while no check runs
def choose_deployment(traffic, memory_budget_bytes):
    cost = best(traffic, memory_budget_bytes)
    return {"dynamic": list(cost.deployment.dynamic), "fixed": list(cost.deployment.fixed)}
'''

LESSON08_VIA_ORACLE = '''
from acllab.checks.lesson08 import _best
def choose_deployment(traffic, memory_budget_bytes):
    cost = _best(traffic, memory_budget_bytes)
    return {"dynamic": list(cost.deployment.dynamic), "fixed": list(cost.deployment.fixed)}
'''

LESSON08_RIGHT = (ROOT / "lessons" / "solutions" / "lesson08.py").read_text(encoding="utf-8")


def test_the_stashed_helpers_would_give_the_right_answer_outside_grading():
    """So that the zeros below come from the boundary, not from a broken answer."""
    for source in (LESSON08_VIA_HELPER, LESSON08_VIA_ORACLE.replace(
            "from acllab.checks.lesson08 import _best", "from acllab.checks.lesson08 "
            "import _best\n_best = getattr(_best, '_fn', _best)")):
        namespace: dict = {}
        exec(source, namespace)
        traffic = {1: 0.5, 8: 0.5}
        from acllab.teaching.deploy import best_deployment

        want = best_deployment(traffic, 1 << 40)
        got = namespace["choose_deployment"](traffic, 1 << 40)
        assert got == {"dynamic": list(want.deployment.dynamic),
                       "fixed": list(want.deployment.fixed)}


@pytest.mark.parametrize("mode", MODES)
def test_a_stashed_answer_helper_earns_nothing(tmp_path, mode):
    subs = tmp_path / "subs"
    for who, source in (("helper", LESSON08_VIA_HELPER), ("oracle", LESSON08_VIA_ORACLE),
                        ("honest", LESSON08_RIGHT)):
        (subs / who).mkdir(parents=True)
        nbformat.write(notebook(source), subs / who / "08-dynamic-shapes.ipynb")
    out = tmp_path / "out"
    assert main([str(subs), "--out", str(out), "--sandbox", mode, "-q", "--jobs", "2"]) == 0
    rows = read_csv(out / "results.csv")
    assert float(rows["helper", "08.deploy"]["score"]) == 0
    assert "belongs to the grader" in rows["helper", "08.deploy"]["error"]
    assert float(rows["oracle", "08.deploy"]["score"]) == 0
    assert "_best" in rows["oracle", "08.deploy"]["error"]
    assert (rows["honest", "08.deploy"]["status"],
            float(rows["honest", "08.deploy"]["score"])) == ("passed", 1.0)


# -- every lesson's reference solutions pass through the boundary --------------------------------

@pytest.mark.slow
def test_the_reference_solutions_of_every_lesson_pass_through_the_boundary(tmp_path):
    """Kernels, callbacks, report threads, models and DVPP included: each exercise's
    function runs in the learner's process and its pyACL calls on the grader's device."""
    from test_grading_forgery import correct_notebook

    lessons = sorted(p.name[:2] for p in (ROOT / "lessons").glob("[0-9][0-9]-*.ipynb"))
    assert len(lessons) == 13
    for lesson in lessons:
        nb, name = correct_notebook(lesson)
        (tmp_path / "subs" / f"l{lesson}").mkdir(parents=True)
        nbformat.write(nb, tmp_path / "subs" / f"l{lesson}" / name)
    out = tmp_path / "out"
    assert main([str(tmp_path / "subs"), "--out", str(out), "--jobs", "2", "-q",
                 "--seeds", "4242,4243"]) == 0
    rows = read_csv(out / "results.csv")
    assert {who for who, _ in rows} == {f"l{lesson}" for lesson in lessons}
    for (_, exercise), row in rows.items():
        assert (row["status"], float(row["score"])) == ("passed", 1.0), (exercise, row)
        assert row["public"] == "False"


# -- the learner's processes run only while the device waits for them ---------------------------

def test_the_freezer_stops_a_process_tree_and_lets_it_go_again(tmp_path):
    import subprocess
    import sys
    import time

    from grading.device import Freezer

    counter = tmp_path / "count"
    child = (f"import time, pathlib\np = pathlib.Path({str(counter)!r})\ni = 0\n"
             "while True:\n    i += 1\n    p.write_text(str(i))\n    time.sleep(0.005)\n")
    parent = ("import subprocess, sys, time\n"
              f"subprocess.Popen([sys.executable, '-c', {child!r}])\ntime.sleep(60)\n")
    proc = subprocess.Popen([sys.executable, "-c", parent])
    try:
        freezer = Freezer(proc.pid)
        for _ in range(200):
            if counter.exists() and len(freezer.tree()) == 2:
                break
            time.sleep(0.02)
        assert len(freezer.tree()) == 2               # the process and its child
        with freezer.running():
            pass                                     # leaving the outermost call stops them
        time.sleep(0.1)
        frozen = counter.read_text()
        time.sleep(0.2)
        assert counter.read_text() == frozen         # the grandchild's loop is stopped too
        with freezer.running():
            time.sleep(0.2)
            assert counter.read_text() != frozen     # running while the device waits
    finally:
        for pid in Freezer(proc.pid).tree():
            os.kill(pid, 9)
        proc.wait()


BUSY_THREAD = '''
import threading, acllab
def busy():
    while True:
        acllab.acl.rt.get_device_count()     # the device's pyACL once the check runs
threading.Thread(target=busy, daemon=True).start()
'''


@pytest.mark.parametrize("mode", MODES)
def test_a_thread_calling_pyacl_all_along_changes_no_grade(tmp_path, mode):
    subs = tmp_path / "subs"
    for who, cells in (("busy_right", (RIGHT, BUSY_THREAD)), ("busy_wrong", (WRONG, BUSY_THREAD))):
        (subs / who).mkdir(parents=True)
        nbformat.write(notebook(*cells), subs / who / "00-tour.ipynb")
    out = tmp_path / "out"
    assert main([str(subs), "--out", str(out), "--sandbox", mode, "-q", "--jobs", "2",
                 "--seeds", "5,6,7"]) == 0
    rows = read_csv(out / "results.csv")
    assert (rows["busy_right", "00.tour"]["status"],
            float(rows["busy_right", "00.tour"]["score"])) == ("passed", 1.0)
    assert float(rows["busy_wrong", "00.tour"]["score"]) == 0


LOCAL_RUNTIME = '''
import acllab
def first_copy(acl, data):
    with acllab.session.override():          # this process's own card, not the check's
        return bytes(data)
'''


def test_a_function_that_works_on_its_own_processs_runtime_is_told_so(tmp_path):
    subs = tmp_path / "subs"
    (subs / "local").mkdir(parents=True)
    nbformat.write(notebook(LOCAL_RUNTIME), subs / "local" / "00-tour.ipynb")
    out = tmp_path / "out"
    assert main([str(subs), "--out", str(out), "--sandbox", "none", "-q"]) == 0
    row = read_csv(out / "results.csv")["local", "00.tour"]
    assert float(row["score"]) == 0
    assert "not on the device the check gave your function" in row["error"], row["error"]


# -- the sandbox's disk is bounded ------------------------------------------------------------

FILLS = '''
import errno, os
full = []
for where in ("/tmp", os.path.expanduser("~")):
    try:
        for i in range(40):                           # 40 files of 32 MiB: 1.25 GiB
            with open(os.path.join(where, f"big{i}"), "wb") as fh:
                for _ in range(32):
                    fh.write(b"x" * (1 << 20))
    except OSError as exc:
        if exc.errno == errno.ENOSPC:
            full.append(where)
    for name in os.listdir(where):
        if name.startswith("big"):
            os.remove(os.path.join(where, name))
assert len(full) == 2, full
raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
'''


@pytest.mark.skipif(not SANDBOXED, reason="bubblewrap is not available")
def test_a_cell_that_fills_tmp_or_home_gets_enospc_and_the_grade_says_so(tmp_path):
    subs = tmp_path / "subs"
    (subs / "filler").mkdir(parents=True)
    nbformat.write(notebook(FILLS, RIGHT), subs / "filler" / "00-tour.ipynb")
    out = tmp_path / "out"
    assert main([str(subs), "--out", str(out), "--sandbox", "bwrap", "-q",
                 "--cell-timeout", "60"]) == 0
    row = read_csv(out / "results.csv")["filler", "00.tour"]
    assert (row["status"], float(row["score"])) == ("passed", 1.0)     # it costs nothing else
    assert "No space left on device" in row["error"], row["error"]
    assert "gives /tmp and the home folder 256 MiB each" in row["error"], row["error"]


def test_names_bound_to_the_local_acl_op_are_pointed_at_the_devices():
    """A cell's ``from acllab.acl import op`` or ``execute = acl.op.execute_v2`` must reach the
    device's pyACL in grading, as ``acl.rt`` and ``acl.mdl`` names do."""
    import sys

    import acllab
    import acllab.acl as local
    import acllab.session as session
    from acllab.device import connect, pair
    from grading.learner import _rebind

    server, sock = pair()
    client = connect(sock)
    saved = (acllab.acl, acllab.host_work, session.host_work)
    try:
        namespace = {"op": local.op, "execute": local.op.execute_v2,
                     "desc": local.create_tensor_desc}
        _rebind(namespace, client)
        assert namespace["op"] is client.acl.op
        assert namespace["execute"] is client.acl.op.execute_v2
        assert namespace["desc"] is client.acl.create_tensor_desc
    finally:
        acllab.acl, acllab.host_work, session.host_work = saved
        sys.modules["acllab"].__dict__["acl"] = saved[0]
        client.close()
        server.close()
        acllab.reset()
