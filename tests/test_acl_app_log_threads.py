"""acl.app_log, acl.util.start_thread / stop_thread, quiet probes, and teardown at exit.

pyACL API reference pages: "acl.app_log", "acl.util.start_thread", "acl.util.stop_thread",
"acl.rt.subscribe_report", "acl.rt.process_report".
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading

import pytest
from conftest import expect_code, no_acl_warnings

import acllab
from acllab import acl
from acllab.cli import main

pytestmark = pytest.mark.usefixtures("fresh")


def _log():
    return acl.util.runtime_log(acllab.current_runtime())


def test_app_log_keeps_every_level_and_prints_only_warnings_and_errors(capsys):
    acl.init()
    with no_acl_warnings():
        assert acl.app_log(acl.ACL_DEBUG, "debug line") is None
        assert acl.app_log(acl.ACL_INFO, "info line") is None
        assert acl.app_log(acl.ACL_WARNING, "warning line") is None
        assert acl.app_log(acl.ACL_ERROR, "error line") is None
    assert [(lvl, mod, msg) for _t, lvl, mod, msg in _log()] == [
        ("DEBUG", "APP", "debug line"), ("INFO", "APP", "info line"),
        ("WARNING", "APP", "warning line"), ("ERROR", "APP", "error line")]
    err = capsys.readouterr().err
    assert "debug line" not in err and "info line" not in err
    assert "[WARNING] APP(" in err and "[ERROR] APP(" in err and "error line" in err
    assert (acl.ACL_DEBUG, acl.ACL_INFO, acl.ACL_WARNING, acl.ACL_ERROR) == (0, 1, 2, 3)


def test_app_log_is_deterministic_in_virtual_time(capsys):
    runs = []
    for _ in range(2):
        acllab.session.restore_defaults()
        acl.init()
        acl.rt.set_device(0)
        acl.app_log(acl.ACL_ERROR, "x")
        runs.append((list(_log()), capsys.readouterr().err))
    assert runs[0] == runs[1]
    assert runs[0][0][0][0] > 0          # stamped with the host's virtual time


def test_app_log_argument_errors_are_python_errors():
    acl.init()
    with pytest.raises(TypeError):
        acl.app_log("info", "x")
    with pytest.raises(TypeError):
        acl.app_log(1, 42)
    with pytest.warns(acllab.AclWarning, match="not logged"):    # void in C: never raises
        assert acl.app_log(7, "x") is None


def test_start_thread_runs_a_report_thread_the_samples_way():
    acl.init()
    acl.rt.set_device(0)
    ctx, _ = acl.rt.get_context()
    stream, _ = acl.rt.create_stream()
    state = {"exit": False, "polls": 0, "ctx_ret": None, "ident": None}
    seen = []

    def loop(args_list):
        context, timeout_ms = args_list
        state["ident"] = threading.get_ident()
        state["ctx_ret"] = acl.rt.set_context(context)
        while not state["exit"]:
            acl.rt.process_report(timeout_ms)
            state["polls"] += 1

    tid, ret = acl.util.start_thread(loop, [ctx, 100])
    assert ret == 0 and tid == state["ident"] and state["ctx_ret"] == 0
    assert acl.rt.subscribe_report(tid, stream) == 0
    for i in range(3):
        assert acl.rt.launch_callback(seen.append, i, 0, stream) == 0
    assert acl.rt.synchronize_stream(stream) == 0
    assert seen == [0, 1, 2]
    assert acl.rt.unsubscribe_report(tid, stream) == 0
    state["exit"] = True
    assert acl.util.stop_thread(tid) == 0
    with expect_code(100000):
        assert acl.util.stop_thread(tid) == 100000      # already stopped
    assert acl.rt.destroy_stream(stream) == 0


def test_a_program_with_a_report_thread_logs_the_same_on_every_run():
    def program():
        acllab.session.restore_defaults()
        acl.init()
        acl.rt.set_device(0)
        ctx, _ = acl.rt.get_context()
        stream, _ = acl.rt.create_stream()
        flag = []

        def loop(args):
            acl.rt.set_context(args[0])
            while not flag:
                acl.rt.process_report(5)

        tid, _ = acl.util.start_thread(loop, [ctx])
        acl.rt.subscribe_report(tid, stream)
        for i in range(4):
            acl.rt.launch_callback(lambda _d: None, i, 0, stream)
        acl.rt.synchronize_stream(stream)
        acl.rt.unsubscribe_report(tid, stream)
        flag.append(1)
        acl.util.stop_thread(tid)
        r = acllab.current_runtime()
        return [(n, s, e, c) for n, s, e, c in r.api_log], r.host_ns

    assert program() == program()


def test_start_thread_bad_arguments():
    acl.init()
    with pytest.raises(TypeError):
        acl.util.start_thread(42, [])
    with pytest.raises(TypeError):
        acl.util.start_thread(print, 5)
    with expect_code(100000):
        assert acl.util.stop_thread(12345) == 100000


def test_a_thread_that_raises_warns_and_ends():
    acl.init()

    def bad(args):
        raise RuntimeError("boom")

    with pytest.warns(acllab.AclWarning, match="boom"):
        tid, ret = acl.util.start_thread(bad, [])
    assert ret == 0
    assert acl.util.stop_thread(tid) == 0


def test_finalize_from_del_at_interpreter_exit(tmp_path):
    script = tmp_path / "net.py"
    script.write_text(textwrap.dedent("""
        from acllab import acl

        class Net:
            def __init__(self):
                acl.init()
                acl.rt.set_device(0)
                self.ctx, _ = acl.rt.create_context(0)
                self.dev, _ = acl.rt.malloc(1024, 0)
                self.desc = acl.mdl.create_desc()

            def __del__(self):
                acl.rt.free(self.dev)
                acl.mdl.destroy_desc(self.desc)
                acl.rt.destroy_context(self.ctx)
                acl.rt.reset_device(0)
                print("finalize", acl.finalize())

        net = Net()
        print("main done")
    """))
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["main", "done", "finalize", "0"]
    assert "ImportError" not in proc.stderr and "meta_path" not in proc.stderr


def test_profile_runs_del_teardown_and_counts_probes_apart(tmp_path, capsys):
    from acllab.model import compile_model, save

    om = tmp_path / "tiny.om"
    save(compile_model("zoo:tiny"), str(om))
    script = tmp_path / "app.py"
    script.write_text(textwrap.dedent(f"""
        import acl

        class Net:
            def __init__(self):
                acl.init()
                acl.rt.set_device(0)
                self.model_id, _ = acl.mdl.load_from_file({str(om)!r})
                self.desc = acl.mdl.create_desc()
                acl.mdl.get_desc(self.desc, self.model_id)
                for _ in range(3):
                    idx, ret = acl.mdl.get_input_index_by_name(
                        self.desc, "ascend_mbatch_shape_data")
                acl.rt.malloc(0, 0)                 # one real error

            def __del__(self):
                acl.mdl.destroy_desc(self.desc)
                acl.mdl.unload(self.model_id)
                acl.rt.reset_device(0)
                acl.finalize()
                print("teardown ran")

        net = Net()
    """))
    with pytest.warns(acllab.AclWarning, match="100000"):
        assert main(["profile", "--out", str(tmp_path / "t.json"), str(script)]) == 0
    out = capsys.readouterr().out
    assert out.index("teardown ran") < out.index("== acllab profile")
    line = next(ln for ln in out.splitlines() if ln.startswith("API calls:"))
    assert "errors: 1 (malloc -> 100000 x1)" in line
    assert "probes: 3" in line
    names = [e[0] for e in acllab.current_runtime().api_log]
    assert names[-2:] == ["reset_device", "finalize"]
