"""acllab.analysis.smi: the npu-smi info table, filled from the runtime (ascend310 unless noted).

ascend310: 8 GiB per device (8192 MB), 4 GiB of it as 2 MB huge pages (2048 pages), 2 AI Cores.
A 12,000,000 B malloc with HUGE_FIRST rounds to 12,000,032 B and holds 6 huge pages (12 MB).
"""

from __future__ import annotations

import re

import pytest

import acllab
from acllab import acl
from acllab.analysis import smi
from acllab.engine import Task
from acllab.runtime import Runtime

N = 12_000_000
HUGE = acl.ACL_MEM_MALLOC_HUGE_FIRST


@pytest.fixture
def rt():
    runtime = acllab.reset()
    assert runtime.profile.name == "ascend310", "these tests assume the default profile"
    yield runtime
    acllab.reset()


def rows(text: str, npu: int) -> tuple[str, str]:
    """The two table rows of one NPU."""
    lines = text.splitlines()
    i = next(i for i, line in enumerate(lines) if re.match(rf"\| {npu}\s+\S+\s+\| OK", line))
    return lines[i], lines[i + 1]


def cells(row: str) -> list[str]:
    return row.strip("|").split("|")


def view(text: str, what: str) -> int:
    """A byte count from the acllab section, e.g. view(text, 'driver-held')."""
    return int(re.search(rf"{what}\s+([\d,]+) B", text).group(1).replace(",", ""))


def test_layout_follows_npu_smi(rt):
    assert acl.init() == 0 and acl.rt.set_device(0) == 0
    text = smi.smi_text(rt)
    table = text.split("\n\n")[0].splitlines()
    assert all(len(line) == 98 for line in table)
    assert table[1].startswith(f"| npu-smi {acllab.__version__} ")
    assert f"Version: {acllab.__version__}" in table[1]
    assert table[3] == ("| NPU   Name                | Health        | Power(W)    Temp(C)"
                        "           Hugepages-Usage(page)|")
    assert table[4].split("|")[3].split() == ["AICore(%)", "Memory-Usage(MB)"]
    first, second = rows(text, 0)
    assert first == ("| 0     310                 | OK            | 12.8        45"
                     "                0    / 2048          |")
    assert second == ("| 0                         | 0000:01:00.0  | 0           0    / 8192"
                      "                            |")
    assert "| NPU     Chip              | Process id    | Process name             | " \
           "Process memory(MB)      |" in table
    assert f"| 0       0                 | {smi.SIM_PID:<14}| python" in text


def test_only_open_devices_unless_all_devices(rt):
    assert "No NPU is open" in smi.smi_text(rt)
    assert acl.init() == 0 and acl.rt.set_device(2) == 0
    text = smi.smi_text(rt)
    assert rows(text, 2) and not re.search(r"\| [013]\s+310", text)
    everything = smi.smi_text(rt, all_devices=True)
    assert [rows(everything, i)[0].split()[2] for i in range(4)] == ["310"] * 4
    assert "No running processes found in NPU 0" in everything
    assert "No running processes found in NPU 2" not in everything


def test_memory_rises_after_malloc_and_does_not_drop_after_free(rt):
    assert acl.init() == 0 and acl.rt.set_device(0) == 0
    ptr, ret = acl.rt.malloc(N, HUGE)
    assert ret == 0
    text = smi.smi_text(rt)
    first, second = rows(text, 0)
    assert cells(first)[2].split()[2:] == ["6", "/", "2048"]       # huge pages
    assert cells(second)[2].split()[1:] == ["12", "/", "8192"]     # MB, driver's view
    assert re.search(r"\| 0       0 .*\| python\s+\| 12\s+\|", text)
    assert view(text, "runtime-allocated") == 12_000_032
    assert view(text, "cached in the pool") == 0
    assert view(text, "driver-held") == 12 * 1024 * 1024

    assert acl.rt.free(ptr) == 0
    text = smi.smi_text(rt)
    first, second = rows(text, 0)
    assert cells(first)[2].split()[2:] == ["6", "/", "2048"]       # still held
    assert cells(second)[2].split()[1:] == ["12", "/", "8192"]     # npu-smi does not drop
    assert view(text, "runtime-allocated") == 0
    assert view(text, "cached in the pool") == 12 * 1024 * 1024
    assert view(text, "driver-held") == 12 * 1024 * 1024
    assert "does not drop after free" in text

    # a small normal-page block shows as a whole MB in the driver's view
    small, ret = acl.rt.malloc(100, HUGE)
    assert ret == 0
    assert cells(rows(smi.smi_text(rt), 0)[1])[2].split()[1] == "13"
    assert acl.rt.free(small) == 0
    assert acl.rt.reset_device(0) == 0
    assert "No NPU is open" in smi.smi_text(rt)
    assert cells(rows(smi.smi_text(rt, all_devices=True), 0)[1])[2].split()[1] == "0"


def test_aicore_power_and_temperature_follow_the_last_millisecond(rt):
    assert acl.init() == 0 and acl.rt.set_device(0) == 0
    dev = rt.devices[0]
    rt.submit(Task("Kernel", "kernel", resource=dev.aicore, units=2, duration_ns=500_000),
              rt.current_context().default_stream)
    assert acl.rt.synchronize_stream(0) == 0          # host wakes 10 us after the kernel
    stats = smi.device_stats(rt, dev)
    assert stats["aicore_util"] == 0.5                 # 500 us on both cores in the last 1 ms
    assert (stats["aicore_percent"], stats["power_w"], stats["temp_c"]) == (50, 14.7, 56)
    first, second = rows(smi.smi_text(rt), 0)
    assert cells(first)[2].split()[:2] == ["14.7", "56"]
    assert cells(second)[2].split()[0] == "50"
    acl.rt.malloc_host(N)                              # pinning 12 MB costs about 1.5 ms
    stats = smi.device_stats(rt, dev)
    assert (stats["aicore_percent"], stats["power_w"], stats["temp_c"]) == (0, 12.8, 45)


def test_hbm_profile_shows_hbm_usage():
    runtime = Runtime("ascend910b")
    text = smi.smi_text(runtime, all_devices=True)
    assert text.splitlines()[4].split("|")[3].split() == ["AICore(%)", "Memory-Usage(MB)",
                                                          "HBM-Usage(MB)"]
    first, second = rows(text, 7)
    assert cells(first)[0].split() == ["7", "910B2"]
    assert cells(second)[2].split() == ["0", "0", "/", "0", "0", "/", "65536"]
    assert cells(first)[2].split()[2:] == ["0", "/", "16384"]
    assert "No running processes found in NPU 7" in text
