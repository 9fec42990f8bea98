"""Every lesson survives re-runs: any cell re-run after the lesson's clean-up, and a second Run All.

A learner who has run a lesson to the end (its clean-up cell called ``acl.finalize()``) goes
back, edits a cell and runs it again, or runs the whole notebook a second time. Each cell must
then either work or stop with acllab's own one-line message (``RerunNeeded: ...`` saying what
to re-run, or ``BudgetExceeded: ...``), never with a traceback from the lesson's or acllab's
code (a KeyError on a null handle, an AttributeError on a missing block ...).

One kernel per lesson, three passes:

1. Run All, as a learner first does (no cell may fail);
2. every code cell again, alone, from the last to the first: each cell sees the state the
   lesson's clean-up left, not one the cells above it have just set up again (in top-to-bottom
   order the setup cell would start the lesson afresh before the cells that need it);
3. a second Run All, from the top: every cell works again, and the checks say "not done".

The widgets run as they do in a lesson; the lessons' own test (tests/test_lessons.py) covers
the static rendering and the reference solutions.
"""

from __future__ import annotations

import json
import re

import pytest
from test_lessons import NOTEBOOKS, RESULT, jupyter_env, tagged  # noqa: F401 (a fixture)

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")

pytestmark = [pytest.mark.notebook, pytest.mark.slow]

#: acllab's own stops: what a cell may show instead of working, as one line, no traceback.
ACLLAB_STOPS = ("RerunNeeded", "BudgetExceeded")


def client_for(nb):
    return nbclient.NotebookClient(nb, timeout=60, kernel_name="python3", allow_errors=True,
                                   resources={"metadata": {"path": str(NOTEBOOKS[0].parent)}})


def shown_errors(cell) -> list[str]:
    """What the cell showed that is a Python error, and not acllab's own one-line stop."""
    found = []
    for out in cell.outputs:
        if out.output_type == "error":
            if out.ename in ACLLAB_STOPS and len(out.traceback) == 1:
                continue
            found.append(f"{out.ename}: {out.evalue}"[:300])
        elif out.output_type == "stream" and "Traceback (most recent call last)" in out.text:
            found.append(out.text[-300:])
    return found


def stops(cell) -> list[str]:
    return [out.ename for out in cell.outputs if out.output_type == "error"]


def run(client, nb, indexes) -> dict[int, list]:
    """Execute the cells at ``indexes`` one by one; {index: outputs}."""
    shown = {}
    for index in indexes:
        client.execute_cell(nb.cells[index], index)
        shown[index] = list(nb.cells[index].outputs)
    return shown


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_every_cell_survives_a_rerun_after_the_teardown(path, jupyter_env):  # noqa: F811
    nb = nbformat.read(path, as_version=4)
    code = [i for i, cell in enumerate(nb.cells) if cell.cell_type == "code"]
    client = client_for(nb)
    with client.setup_kernel():
        run(client, nb, code)
        first = {i: shown_errors(nb.cells[i]) + stops(nb.cells[i]) for i in code}
        assert not any(first.values()), {i: e for i, e in first.items() if e}

        bad = {}
        for index in reversed(code):
            run(client, nb, [index])
            if errors := shown_errors(nb.cells[index]):
                bad[index] = errors
        assert not bad, (f"{path.name}: cells re-run after the clean-up show Python errors, not "
                         f"acllab's one-line stop: {bad}")

        run(client, nb, code)
        again = {i: shown_errors(nb.cells[i]) + stops(nb.cells[i]) for i in code}
        assert not any(again.values()), (f"{path.name}: a second Run All fails: "
                                         f"{ {i: e for i, e in again.items() if e} }")
        statuses = set()
        for i in code:
            if tagged(nb.cells[i], "check"):
                texts = [o["data"].get("text/plain", "") for o in nb.cells[i].outputs
                         if "data" in o]
                statuses |= {m.group(2) for t in texts if (m := RESULT.search(t))}
        assert statuses == {"not done"}, statuses


def test_lesson00_cells_read_the_run_the_learner_just_made(jupyter_env):  # noqa: F811
    """The issue's case: after the whole lesson (the slider's cell replaced the live runtime),
    a learner edits the program's cell to 8 images and re-runs it and the cells that read its
    trace: they show the 8-image run, not the first 4-image one."""
    path = next(p for p in NOTEBOOKS if p.name.startswith("00-"))
    nb = nbformat.read(path, as_version=4)
    code = [i for i, cell in enumerate(nb.cells) if cell.cell_type == "code"]
    program = next(i for i in code if "classify(om_path, images)" in nb.cells[i].source)
    duties = next(i for i in code if "duties = dict.fromkeys" in nb.cells[i].source)
    timeline = next(i for i in code if i > program and nb.cells[i].source.startswith("Timeline("))

    def executions(shown) -> int:
        text = "".join(o.get("text", "") for o in shown)
        return int(re.search(r"4 model and kernel execution\s+(\d+) calls", text).group(1))

    client = client_for(nb)
    with client.setup_kernel():
        first = run(client, nb, code)
        assert not any(shown_errors(nb.cells[i]) for i in code)
        source = nb.cells[program].source
        assert "tiny_dataset(4, seed=0)" in source
        nb.cells[program].source = source.replace("tiny_dataset(4, seed=0)",
                                                  "tiny_dataset(8, seed=0)")
        again = run(client, nb, [program, duties, timeline])
    assert not any(shown_errors(nb.cells[i]) for i in (program, duties, timeline))
    # one acl.mdl.execute per image: four more than the first run counted
    assert executions(again[duties]) == executions(first[duties]) + 4
    shown = json.dumps([o.get("data", {}) for o in again[timeline]])
    assert "8 images" in shown and "4 images" not in shown


def test_a_runaway_loop_and_a_late_call_stop_with_one_line_in_a_kernel(jupyter_env):  # noqa: F811
    """What a learner sees in Jupyter: acllab's stops as one line each, no traceback."""
    setup = ("import threading\n"
             "import acllab\nfrom acllab import acl\nfrom acllab.constants import *\n"
             "from widgets import notebook_mode\nnotebook_mode()\n"
             "runtime = acllab.reset()\nacl.init()\nacl.rt.set_device(0)\n"
             "stream, ret = acl.rt.create_stream()\n"
             "dev, ret = acl.rt.malloc(1024, ACL_MEM_MALLOC_HUGE_FIRST)\n"
             "host, ret = acl.rt.malloc_host(1024)")
    runaway = ("while True:\n"
               "    acl.rt.memcpy_async(dev, 1024, host, 1024, ACL_MEMCPY_HOST_TO_DEVICE, stream)")
    teardown = "acllab.reset()\nacl.init()\nret = acl.finalize()"
    late = "ptr, ret = acl.rt.malloc(64, ACL_MEM_MALLOC_HUGE_FIRST)\nprint('not reached')"
    in_thread = ("t = threading.Thread(target=acl.rt.create_stream, name='worker')\n"
                 "t.start()\nt.join()\nprint('the cell goes on')")
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(source) for source in
                                         (setup, runaway, teardown, late, in_thread)])
    client = client_for(nb)
    with client.setup_kernel():
        shown = run(client, nb, range(len(nb.cells)))
    assert not shown[0] and not shown[2]
    for index, name, words in ((1, "BudgetExceeded", "acllab.configure(task_budget=...)"),
                               (3, "RerunNeeded", "Run All Above Selected Cell")):
        (error,) = shown[index]
        assert error.output_type == "error" and error.ename == name
        assert len(error.traceback) == 1 and error.traceback[0].startswith(f"{name}: ")
        assert words in error.traceback[0]
    text = "".join(o.get("text", "") for o in shown[4])
    assert "In worker: RerunNeeded: " in text and "Traceback" not in text
    assert "the cell goes on" in text
