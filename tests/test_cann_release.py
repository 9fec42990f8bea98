"""Each profile follows a named CANN release: get_version, get_device_capability, acllab devices.

Facts and their sources (docs/CANN_RELEASES.md has the whole table):

* aclrtGetVersion returns the ACL_MAJOR/MINOR/PATCH_VERSION macros, with no init check
  (hicann/runtime src/acl/aclrt_impl/acl.cpp, aclrtGetVersionImpl). CANN 8.0.0: 1.12.0
  (uncertain: the 8.0.0 API reference lists interface versions up to "V1.12.0 and later", and an
  acl.h of that generation says "Current version is 1.12.0"). CANN 8.5.0: 1.15.0 (uncertain: the
  first stored versions of hicann/runtime include/external/acl/acl_rt.h).
* pyACL: ``value, ret = acl.get_device_capability(device_id, device_info)`` (CANN 8.0.0 pyACL
  reference, aclpythondevg_01_0954); aclDeviceInfo: ACL_DEVICE_INFO_UNDEFINED -1,
  AI_CORE_NUM 0, VECTOR_CORE_NUM 1, L2_SIZE 2 (acl_base.h).
* aclGetDeviceCapabilityImpl: a device id past the last device returns ACL_ERROR_INVALID_PARAM
  100000, so does a type outside the three (its unit test
  aclGetDeviceCapability_Fail_InvalidDeviceIdOrInfoType passes ACL_DEVICE_INFO_UNDEFINED); it
  reads the chip's platform file after aclInit.
* Ascend910B2.ini, SoCInfo: ai_core_cnt=24, vector_core_cnt=48, l2_size=201326592.
"""

from __future__ import annotations

import pytest
from conftest import expect_code

import acllab
from acllab import acl, cli
from acllab import constants as C
from acllab.hardware import PROFILES


@pytest.fixture(autouse=True)
def _defaults(fresh):
    yield


def test_each_profile_names_its_release_and_ascendcl_version():
    assert PROFILES["ascend310"].cann_release == "8.0.0"
    assert PROFILES["ascend310"].acl_version == (1, 12, 0)
    assert PROFILES["ascend910b"].cann_release == "8.5.0"
    assert PROFILES["ascend910b"].acl_version == (1, 15, 0)
    for p in PROFILES.values():            # the release is named among the sources too
        assert any(f"CANN {p.cann_release}" in s for s in p.sources)


@pytest.mark.parametrize("name", sorted(PROFILES))
def test_get_version_reports_the_profiles_release_before_and_after_init(name):
    acllab.configure(name)
    expected = (*PROFILES[name].acl_version, 0)
    assert acl.get_version() == expected            # no init check, as aclrtGetVersionImpl
    acl.init()
    assert acl.get_version() == expected
    acl.finalize()


def test_get_version_is_not_acllabs_own_version():
    own = tuple(int(x) for x in acllab.__version__.split(".")[:3])
    major, minor, patch, ret = acl.get_version()
    assert ret == 0 and (major, minor, patch) != own
    assert acllab.__version__                       # acllab's own version is still there


def test_get_version_follows_a_replaced_profile():
    acllab.configure(PROFILES["ascend310"].replace(cann_release="x", acl_version=(1, 99, 3)))
    assert acl.get_version() == (1, 99, 3, 0)


def test_device_info_constants_have_the_header_values():
    assert (C.ACL_DEVICE_INFO_UNDEFINED, C.ACL_DEVICE_INFO_AI_CORE_NUM,
            C.ACL_DEVICE_INFO_VECTOR_CORE_NUM, C.ACL_DEVICE_INFO_L2_SIZE) == (-1, 0, 1, 2)
    assert acl.ACL_DEVICE_INFO_AI_CORE_NUM == 0 and acl.constants.ACL_DEVICE_INFO_L2_SIZE == 2


@pytest.mark.parametrize("name, ai, vector, l2", [
    ("ascend310", 2, 0, 8 * 2**20),
    ("ascend910b", 24, 48, 201_326_592),
])
def test_get_device_capability_per_profile(name, ai, vector, l2):
    acllab.configure(name, device_count=PROFILES[name].device_count)
    acl.init()
    last = PROFILES[name].device_count - 1
    for dev in (0, last):                           # no set_device needed
        assert acl.get_device_capability(dev, C.ACL_DEVICE_INFO_AI_CORE_NUM) == (ai, 0)
        assert acl.get_device_capability(dev, C.ACL_DEVICE_INFO_VECTOR_CORE_NUM) == (vector, 0)
        assert acl.get_device_capability(dev, C.ACL_DEVICE_INFO_L2_SIZE) == (l2, 0)
    acl.finalize()


def test_get_device_capability_follows_a_replaced_profile():
    acllab.configure(PROFILES["ascend310"].replace(ai_cores=7))
    acl.init()
    assert acl.get_device_capability(0, 0) == (7, 0)
    acl.finalize()


@pytest.mark.parametrize("device_id, device_info", [
    (4, C.ACL_DEVICE_INFO_AI_CORE_NUM),       # ascend310 has devices 0 to 3
    (-1, C.ACL_DEVICE_INFO_AI_CORE_NUM),
    (0, C.ACL_DEVICE_INFO_UNDEFINED),
    (0, 3),
])
def test_get_device_capability_bad_input_returns_100000(device_id, device_info):
    acl.init()
    with expect_code(100000):
        assert acl.get_device_capability(device_id, device_info) == (0, 100000)
    assert "device" in acl.get_recent_err_msg()
    acl.finalize()


def test_get_device_capability_needs_init():
    assert acl.get_device_capability(0, 0) == (0, 100001)


def test_get_device_capability_rejects_a_str_like_the_binding():
    acl.init()
    with pytest.raises(TypeError):
        acl.get_device_capability("0", 0)
    with pytest.raises(TypeError):
        acl.get_device_capability(0, "0")
    acl.finalize()


def test_acllab_devices_names_each_release(capsys):
    assert cli.main(["devices"]) == 0
    text = capsys.readouterr().out
    assert "follows CANN 8.0.0 (AscendCL 1.12.0)" in text
    assert "follows CANN 8.5.0 (AscendCL 1.15.0)" in text
    for block in text.strip().split("\n\n"):     # each profile's own release, in its block
        p = PROFILES[block.split(":", 1)[0]]
        assert f"follows CANN {p.cann_release} (AscendCL" in block
    assert "48 vector cores, 192 MiB L2" in text
