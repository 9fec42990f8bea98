"""acllab.constants: the real names and values (ACL_REFERENCE.md section 3)."""

import numpy as np

from acllab import acl
from acllab import constants as C


def test_memcpy_kinds_and_policies():
    assert [C.ACL_MEMCPY_HOST_TO_HOST, C.ACL_MEMCPY_HOST_TO_DEVICE, C.ACL_MEMCPY_DEVICE_TO_HOST,
            C.ACL_MEMCPY_DEVICE_TO_DEVICE, C.ACL_MEMCPY_DEFAULT] == [0, 1, 2, 3, 4]
    assert [C.ACL_MEM_MALLOC_HUGE_FIRST, C.ACL_MEM_MALLOC_HUGE_ONLY,
            C.ACL_MEM_MALLOC_NORMAL_ONLY] == [0, 1, 2]


def test_the_reversed_status_enums():
    assert (C.ACL_EVENT_STATUS_COMPLETE, C.ACL_EVENT_STATUS_NOT_READY) == (0, 1)
    assert (C.ACL_EVENT_RECORDED_STATUS_NOT_READY, C.ACL_EVENT_RECORDED_STATUS_COMPLETE) == (0, 1)
    assert (C.ACL_STREAM_STATUS_COMPLETE, C.ACL_STREAM_STATUS_NOT_READY) == (0, 1)


def test_flags_types_formats():
    assert (C.ACL_EVENT_SYNC, C.ACL_EVENT_CAPTURE_STREAM_PROGRESS, C.ACL_EVENT_TIME_LINE) == \
        (1, 2, 8)
    assert (C.ACL_FLOAT, C.ACL_FLOAT16, C.ACL_INT8, C.ACL_INT64, C.ACL_BOOL) == (0, 1, 2, 9, 12)
    assert (C.ACL_FORMAT_NCHW, C.ACL_FORMAT_NHWC, C.ACL_FORMAT_ND) == (0, 1, 2)
    assert C.ACL_DYNAMIC_TENSOR_NAME == "ascend_mbatch_shape_data"
    assert C.ACL_MAX_BATCH_NUM == 128
    assert (C.ACL_DEVICE, C.ACL_HOST) == (0, 1)


def test_numpy_type_numbers_are_numpys_own():
    assert C.NPY_FLOAT32 == np.dtype(np.float32).num
    assert C.NPY_UINT8 == np.dtype(np.uint8).num


def test_constants_are_reexported_by_the_facade():
    for name in C.__all__:
        assert getattr(acl, name) == getattr(C, name), name
