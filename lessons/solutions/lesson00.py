"""Reference solution for lesson 00 (Where Runtime sits): the optional tour exercise.

tests/test_checks_lesson00.py grades it with acllab.checks, and tests/test_lessons.py injects
it into the notebook after the exercise cell. Learners: try the exercise first.
"""

from __future__ import annotations

from acllab.constants import (
    ACL_MEM_MALLOC_HUGE_FIRST,
    ACL_MEMCPY_DEVICE_TO_HOST,
    ACL_MEMCPY_HOST_TO_DEVICE,
)

__all__ = ["first_copy"]


def first_copy(acl, data):
    """Send ``data`` to device memory and back; return the bytes that came back."""
    n = len(data)
    dev_ptr, ret = acl.rt.malloc(n, ACL_MEM_MALLOC_HUGE_FIRST)
    assert ret == 0, acl.get_recent_err_msg()
    acl.rt.memcpy(dev_ptr, n, acl.util.bytes_to_ptr(data), n, ACL_MEMCPY_HOST_TO_DEVICE)
    back = bytearray(n)                                   # a host buffer for the way back
    acl.rt.memcpy(acl.util.bytes_to_ptr(back), n, dev_ptr, n, ACL_MEMCPY_DEVICE_TO_HOST)
    acl.rt.free(dev_ptr)
    return bytes(back)
