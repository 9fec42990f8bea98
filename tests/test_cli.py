"""The acllab command: profile, smi, devices."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

import acllab
from acllab import cli

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "double_buffer.py"


def test_profile_runs_an_unmodified_pyacl_script(tmp_path, capsys):
    out = tmp_path / "t.json"
    code = cli.main(["profile", "--out", str(out), str(EXAMPLE), "4", "1048576"])
    text = capsys.readouterr().out
    assert code == 0
    assert "4 batches of 1048576 bytes done; first bytes back: [0 1 2 3]" in text
    assert "acllab profile" in text and "trace written to" in text
    trace = json.loads(out.read_text())
    names = {e["args"]["name"] for e in trace["traceEvents"] if e.get("ph") == "M"
             and e["name"] == "process_name"}
    assert "CANN" in names and "Ascend Hardware (device 0)" in names
    copies = [e for e in trace["traceEvents"] if e.get("ph") == "X"
              and e["name"].startswith("MemcpyHostToDevice")]
    assert len(copies) >= 4
    assert "acl" not in sys.modules or sys.modules["acl"] is not acllab.acl


def test_profile_traces_are_byte_identical(tmp_path):
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    assert cli.main(["profile", "--out", str(a), str(EXAMPLE), "3", "65536"]) == 0
    assert cli.main(["profile", "--out", str(b), str(EXAMPLE), "3", "65536"]) == 0
    assert a.read_bytes() == b.read_bytes()


def test_profile_reports_a_failing_script(tmp_path, capsys):
    script = tmp_path / "bad.py"
    script.write_text("import acl\nacl.init()\nraise SystemExit(3)\n")
    assert cli.main(["profile", "--out", str(tmp_path / "x.json"), str(script)]) == 3
    script.write_text("import acl\nacl.init()\n1 / 0\n")
    assert cli.main(["profile", "--out", str(tmp_path / "y.json"), str(script)]) == 1
    assert "ZeroDivisionError" in capsys.readouterr().err


def test_profile_with_another_device_profile(tmp_path, capsys):
    script = tmp_path / "soc.py"
    script.write_text("import acl\nprint('soc', acl.get_soc_name())\n")
    assert cli.main(["profile", "--device", "ascend910b", "--out",
                     str(tmp_path / "z.json"), str(script)]) == 0
    assert "soc Ascend910B2" in capsys.readouterr().out
    acllab.session.restore_defaults()


def test_profile_missing_script(capsys):
    assert cli.main(["profile", "no/such/script.py"]) == 2
    assert "no such script" in capsys.readouterr().err


def test_smi_and_devices(capsys):
    assert cli.main(["smi"]) == 0
    text = capsys.readouterr().out
    assert "npu-smi" in text and "Hugepages-Usage(page)" in text
    assert cli.main(["devices"]) == 0
    text = capsys.readouterr().out
    assert "ascend310" in text and "ascend910b" in text and "source:" in text
    acllab.session.restore_defaults()


def test_console_entry_point_runs(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "acllab", "devices"], capture_output=True,
                          text=True, cwd=tmp_path, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "Ascend310" in proc.stdout


@pytest.mark.parametrize("argv", [[], ["nonsense"]])
def test_bad_usage_exits_with_2(argv):
    with pytest.raises(SystemExit) as info:
        cli.main(argv)
    assert info.value.code == 2
