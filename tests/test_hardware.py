"""Device profiles carry the figures COST_MODEL.md documents; the cost formulas round up."""

from __future__ import annotations

import dataclasses

import pytest

from acllab.hardware import (
    HUGE_PAGE,
    NORMAL_PAGE,
    PROFILES,
    DeviceProfile,
    GiB,
    KiB,
    MiB,
    ceil_div,
    get_profile,
    transfer_ns,
)


def test_units():
    assert (KiB, MiB, GiB) == (1024, 1024**2, 1024**3)
    assert HUGE_PAGE == 2 * MiB and NORMAL_PAGE == 4 * KiB


def test_both_profiles_exist():
    assert set(PROFILES) == {"ascend310", "ascend910b"}
    for name, prof in PROFILES.items():
        assert prof.name == name
        assert prof.sources, f"{name} cites no sources"
        assert prof.description and prof.soc_name


def test_ascend310_figures():
    p = PROFILES["ascend310"]
    assert p.ai_cores == 2
    assert p.peak_fp16_flops == 8 * 10**12
    assert p.peak_int8_ops == 16 * 10**12
    assert p.memory_bytes == 8 * GiB
    assert p.memory_kind == "DDR"
    assert p.memory_bandwidth_bps > 0
    assert 11 * 10**9 <= p.h2d_bandwidth_bps <= 13 * 10**9   # PCIe 3.0 x16 pinned, ~12 GB/s
    assert 11 * 10**9 <= p.d2h_bandwidth_bps <= 13 * 10**9
    assert 10_000 <= p.copy_latency_ns <= 15_000
    assert (p.max_streams, p.max_events) == (1024, 1023)


def test_ascend910b_figures():
    p = PROFILES["ascend910b"]
    assert p.ai_cores == 24
    assert 340 * 10**12 <= p.peak_fp16_flops <= 370 * 10**12
    assert p.memory_bytes == 64 * GiB
    assert p.memory_kind == "HBM"
    assert 1.1e12 <= p.memory_bandwidth_bps <= 1.2e12
    assert 23 * 10**9 <= p.h2d_bandwidth_bps <= 24 * 10**9      # PCIe 4.0 x16, ~23.5 GB/s
    assert 9_000 <= p.copy_latency_ns <= 11_000
    assert (p.max_streams, p.max_events) == (1984, 65536)    # current Atlas A2 limits


@pytest.mark.parametrize("name", sorted(PROFILES))
def test_api_costs_match_the_cost_model(name):
    p = PROFILES[name]
    assert 8_600 <= p.launch_ns <= 12_100
    assert (p.record_host_ns, p.record_device_ns) == (2_000, 1_000)
    assert p.wait_wakeup_ns == 3_000
    assert p.sync_wakeup_ns == 10_000
    assert p.callback_ns == 100_000
    assert p.malloc_pool_ns < p.malloc_driver_ns       # a pool hit is much cheaper
    assert 0 < p.hugepage_pool_bytes <= p.memory_bytes
    assert p.normal_page_penalty_permille > 0


def test_pageable_ratio_on_ascend310_is_about_045():
    p = PROFILES["ascend310"]
    ratio = p.pageable_bandwidth_bps / p.h2d_bandwidth_bps
    assert 0.40 <= ratio <= 0.50
    assert ratio == pytest.approx(0.45, abs=0.02)


def test_pageable_bandwidth_on_ascend910b_is_10_to_12_gbps():
    p = PROFILES["ascend910b"]
    assert 10e9 <= p.pageable_bandwidth_bps <= 12e9


def test_pageable_bandwidth_formula():
    p = PROFILES["ascend310"]
    expect = 1 / (1 / p.host_stage_bandwidth_bps + 1 / p.h2d_bandwidth_bps)
    assert p.pageable_bandwidth_bps == pytest.approx(expect)


def test_link_bandwidth_by_direction():
    p = PROFILES["ascend310"].replace(h2d_bandwidth_bps=7e9, d2h_bandwidth_bps=5e9)
    assert p.link_bandwidth_bps("h2d") == 7 * 10**9
    assert p.link_bandwidth_bps("d2h") == 5 * 10**9


# -- rounding ---------------------------------------------------------------------------

def test_ceil_div():
    assert [ceil_div(a, 4) for a in (0, 1, 3, 4, 5, 8)] == [0, 1, 1, 1, 2, 2]


def test_transfer_ns_exact_when_it_divides():
    assert transfer_ns(12_000_000, 12_000_000_000) == 1_000_000
    assert transfer_ns(0, 12_000_000_000) == 0
    assert transfer_ns(1, 1_000_000_000) == 1


def test_transfer_ns_rounds_up():
    assert transfer_ns(1, 3) == 333_333_334                  # 333,333,333.3 ns
    assert transfer_ns(1, 12_000_000_000) == 1                # 0.083 ns -> 1
    assert transfer_ns(13, 12_000_000_000) == 2               # 1.083 ns -> 2
    assert transfer_ns(12_000_001, 12_000_000_000) == 1_000_001


def test_transfer_ns_penalty_per_mille():
    assert transfer_ns(1000, 1_000_000_000, 100) == 1100        # +10 %
    assert transfer_ns(12_000_000, 12_000_000_000, 100) == 1_100_000
    assert transfer_ns(1, 1_000_000_000, 1) == 2                # 1.001 ns rounds up to 2


@pytest.mark.parametrize("nbytes", [1, 7, 4095, 4096, 2 * MiB + 3, 19_267_584])
@pytest.mark.parametrize("bw", [12_000_000_000, 9_800_000_000, 23_500_000_000])
def test_transfer_ns_is_the_smallest_integer_not_below_the_exact_time(nbytes, bw):
    t = transfer_ns(nbytes, bw)
    assert t * bw >= nbytes * 10**9 > (t - 1) * bw


# -- replace and lookup ------------------------------------------------------------------

def test_replace_makes_a_changed_copy_with_ints():
    base = PROFILES["ascend310"]
    slow = base.replace(h2d_bandwidth_bps=6e9, copy_latency_ns=20_000)
    assert slow.h2d_bandwidth_bps == 6_000_000_000
    assert isinstance(slow.h2d_bandwidth_bps, int)
    assert slow.copy_latency_ns == 20_000
    assert slow.d2h_bandwidth_bps == base.d2h_bandwidth_bps
    assert base.h2d_bandwidth_bps == 12_000_000_000            # the original is untouched
    assert slow.name == base.name


def test_profiles_are_frozen():
    with pytest.raises(dataclasses.FrozenInstanceError):
        PROFILES["ascend310"].ai_cores = 4


def test_replace_rejects_unknown_fields():
    with pytest.raises(TypeError):
        PROFILES["ascend310"].replace(warp_size=32)


def test_get_profile_by_name_case_insensitive_and_passthrough():
    assert get_profile("ascend310") is PROFILES["ascend310"]
    assert get_profile("Ascend910B") is PROFILES["ascend910b"]
    custom = PROFILES["ascend310"].replace(ai_cores=4)
    assert get_profile(custom) is custom
    assert isinstance(custom, DeviceProfile)


@pytest.mark.parametrize("bad", ["ascend", "ascend910", "", "gpu"])
def test_get_profile_unknown_name(bad):
    with pytest.raises(ValueError) as info:
        get_profile(bad)
    assert "ascend310" in str(info.value) and "ascend910b" in str(info.value)
