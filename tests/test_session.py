"""acllab.session: the live runtime, configure() and reset()."""

import acllab
from acllab import acl
from acllab.hardware import PROFILES


def teardown_module():
    acllab.configure("ascend310", device_count=PROFILES["ascend310"].device_count)


def test_reset_gives_a_fresh_runtime():
    first = acllab.reset()
    acl.init()
    assert first.initialized
    second = acllab.reset()
    assert second is not first and not second.initialized
    assert acllab.current_runtime() is second


def test_configure_selects_a_profile_and_persists_across_reset():
    rt = acllab.configure("ascend910b")
    assert rt.profile.name == "ascend910b"
    assert acllab.reset().profile.name == "ascend910b"
    assert acl.get_soc_name() == "Ascend910B2"
    acllab.configure("ascend310")
    assert acl.get_soc_name() == "Ascend310"


def test_configure_device_count():
    acllab.configure(device_count=2)
    acl.init()
    assert acl.rt.get_device_count() == (2, 0)
    acllab.configure(device_count=4)


def test_a_custom_profile():
    slow = PROFILES["ascend310"].replace(h2d_bandwidth_bps=6e9)
    rt = acllab.configure(slow)
    assert rt.profile.h2d_bandwidth_bps == 6_000_000_000
    acllab.configure("ascend310")


def test_override_runs_a_block_in_a_fresh_runtime_and_puts_everything_back():
    acllab.session.restore_defaults()
    outer = acllab.current_runtime()
    acl.init()
    with acllab.session.override(hugepage_pool_bytes=0) as inner:
        assert inner is not outer and not inner.initialized
        assert inner.devices[0].heap.huge_total == 0
    assert acllab.current_runtime() is outer and outer.initialized
    assert acllab.reset().devices[0].heap.huge_total > 0
