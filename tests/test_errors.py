"""acllab.errors: the code table, names, explanations, and how failures surface."""

import warnings

import pytest

import acllab
from acllab import acl
from acllab.errors import CODES, NAMES, AclError, AclWarning, code_name, describe


def test_codes_have_their_real_values():
    assert CODES["ACL_SUCCESS"] == 0
    assert CODES["ACL_ERROR_INVALID_PARAM"] == 100000
    assert CODES["ACL_ERROR_RT_PARAM_INVALID"] == 107000
    assert CODES["ACL_ERROR_RT_MEMORY_ALLOCATION"] == 207001
    assert CODES["ACL_ERROR_RT_STREAM_SYNC_TIMEOUT"] == 507046
    assert CODES["ACL_ERROR_GE_DYNAMIC_BATCH_SIZE_INVALID"] == 145013
    assert len(set(CODES.values())) == len(CODES), "two names share a code"


def test_invented_names_do_not_exist():
    assert "ACL_ERROR_RT_MALLOC_FAILED" not in CODES


def test_every_code_has_a_name_and_a_meaning():
    for code in CODES.values():
        assert NAMES[code].startswith("ACL_")
        if code:
            assert "unknown error" not in describe(code), code


def test_unknown_code_is_named_as_unknown():
    assert code_name(123) == "UNKNOWN_123"


def test_failure_warns_and_remembers_the_explanation():
    acllab.reset()
    with pytest.warns(AclWarning, match=r"100001 ACL_ERROR_UNINITIALIZE"):
        ret = acl.rt.set_device(0)
    assert ret == 100001
    msg = acl.get_recent_err_msg()
    assert "acl.init()" in msg and "acl.rt.set_device" in msg
    assert acl.get_recent_err_msg() == ""   # read once, then cleared


def test_success_is_silent():
    acllab.reset()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert acl.init() == 0
        assert acl.rt.set_device(0) == 0


def test_strict_mode_raises_with_the_code():
    acllab.configure(strict=True)
    try:
        acl.init()
        acl.rt.set_device(0)
        with pytest.raises(AclError) as info:
            acl.rt.malloc(0, 0)
        assert info.value.code == 100000
        assert info.value.api == "acl.rt.malloc"
        assert "size must be positive" in str(info.value)
    finally:
        acllab.configure(strict=False)
