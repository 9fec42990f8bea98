"""Tensor descriptions and data_type_size, written as Ascend's single-op samples use them.

Facts from hicann/ge, api/acl/acl_model/types/tensor_desc_internal_om2.cpp (the *ImplOm2
functions behind aclCreateTensorDesc ...) and hicann/runtime,
src/acl/aclrt_impl/data_buffer.cpp (aclDataTypeSizeImpl).
"""

import warnings

import numpy as np
import pytest

import acllab
from acllab import acl
from acllab.acl.constants import (
    ACL_BF16,
    ACL_BOOL,
    ACL_DT_UNDEFINED,
    ACL_FLOAT,
    ACL_FLOAT16,
    ACL_FORMAT_NCHW,
    ACL_FORMAT_ND,
    ACL_FORMAT_UNDEFINED,
    ACL_INT8,
    ACL_INT32,
    ACL_INT64,
    ACL_STRING,
)


@pytest.fixture(autouse=True)
def fresh():
    acllab.reset()
    yield
    acllab.reset()


def quiet(fn, *args):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fn(*args)


def test_a_description_reports_what_it_was_created_with_and_its_size():
    # no acl.init needed: the C functions check nothing of the kind
    desc = acl.create_tensor_desc(ACL_FLOAT16, [8, 16], ACL_FORMAT_ND)
    assert desc != 0
    assert acl.get_tensor_desc_type(desc) == ACL_FLOAT16
    assert acl.get_tensor_desc_format(desc) == ACL_FORMAT_ND
    assert acl.get_tensor_desc_num_dims(desc) == 2
    assert acl.get_tensor_desc_element_count(desc) == 128
    assert acl.get_tensor_desc_size(desc) == 256
    assert acl.get_tensor_desc_dim_v2(desc, 1) == (16, 0)
    assert acl.get_tensor_desc_dim(desc, 0) == 8
    acl.set_tensor_desc_name(desc, "x1")
    assert acl.get_tensor_desc_name(desc) == "x1"
    assert acl.destroy_tensor_desc(desc) is None


def test_data_type_size_follows_acl_data_type_size_impl():
    sizes = {ACL_FLOAT: 4, ACL_FLOAT16: 2, ACL_INT8: 1, ACL_INT32: 4, ACL_INT64: 8,
             ACL_BOOL: 1, ACL_BF16: 2, ACL_STRING: 0, ACL_DT_UNDEFINED: 0, 17: 16, 999: 8}
    assert {t: acl.data_type_size(t) for t in sizes} == sizes


def test_scalars_and_unused_optional_inputs():
    # CANN's docs: an unused optional input is aclCreateTensorDesc(ACL_DT_UNDEFINED, 0,
    # nullptr, ACL_FORMAT_UNDEFINED); no dims means one element
    desc = acl.create_tensor_desc(ACL_DT_UNDEFINED, None, ACL_FORMAT_UNDEFINED)
    assert acl.get_tensor_desc_num_dims(desc) == 0
    assert acl.get_tensor_desc_element_count(desc) == 1
    assert acl.get_tensor_desc_size(desc) == 0
    scalar = acl.create_tensor_desc(ACL_FLOAT, [], ACL_FORMAT_ND)
    assert acl.get_tensor_desc_size(scalar) == 4


def test_bad_indexes_handles_and_dims_return_codes_with_reasons():
    desc = acl.create_tensor_desc(ACL_FLOAT, [2, 3], ACL_FORMAT_NCHW)
    with pytest.warns(acllab.AclWarning, match="index 2 is out of range"):
        assert acl.get_tensor_desc_dim_v2(desc, 2) == (0, 100000)
    with pytest.warns(acllab.AclWarning):
        assert acl.get_tensor_desc_dim(desc, 5) == -1
    acl.destroy_tensor_desc(desc)
    with pytest.warns(acllab.AclWarning, match="already destroyed"):
        assert acl.get_tensor_desc_type(desc) == ACL_DT_UNDEFINED
    with pytest.warns(acllab.AclWarning, match="null"):
        assert acl.get_tensor_desc_format(0) == ACL_FORMAT_UNDEFINED
    dynamic = acl.create_tensor_desc(ACL_FLOAT, [-1, 3], ACL_FORMAT_ND)
    with pytest.warns(acllab.AclWarning, match="dynamic"):
        assert acl.get_tensor_desc_size(dynamic) == 0
    assert acl.get_tensor_desc_element_count(dynamic) == 0
    with pytest.raises(TypeError):
        acl.create_tensor_desc(ACL_FLOAT, "2,3", ACL_FORMAT_ND)


def test_set_tensor_shape_and_format_change_the_storage_side_only():
    """aclSetTensorShapeImplOm2 / aclSetTensorFormatImplOm2 fill storageDims and
    storageFormat; the dims and format themselves change through the origin setters."""
    desc = acl.create_tensor_desc(ACL_FLOAT, [2, 3], ACL_FORMAT_ND)
    assert acl.set_tensor_shape(desc, [6]) == 0
    assert acl.set_tensor_format(desc, ACL_FORMAT_NCHW) == 0
    assert acl.get_tensor_desc_num_dims(desc) == 2
    assert acl.get_tensor_desc_format(desc) == ACL_FORMAT_ND
    assert acl.set_tensor_origin_shape(desc, [6]) == 0
    assert acl.set_tensor_origin_format(desc, ACL_FORMAT_NCHW) == 0
    assert acl.get_tensor_desc_dim_v2(desc, 0) == (6, 0)
    assert acl.get_tensor_desc_format(desc) == ACL_FORMAT_NCHW


def test_set_tensor_const_copies_host_bytes_at_once():
    # the ArgMaxV2 dimension of Ascend's vpc_resnet50 sample: one int32 constant
    acl.init()
    desc = acl.create_tensor_desc(ACL_INT32, [1], ACL_FORMAT_ND)
    value = bytearray(np.int32([0]).tobytes())
    ptr = acl.util.bytes_to_ptr(value)
    assert acl.set_tensor_const(desc, ptr, acl.data_type_size(ACL_INT32)) == 0
    value[:] = np.int32([7]).tobytes()              # later changes do not matter
    d = acllab.current_runtime().handles[desc]
    assert d.const == np.int32([0]).tobytes()
    with pytest.warns(acllab.AclWarning, match="null"):
        assert acl.set_tensor_const(desc, 0, 4) == 100000
    with pytest.warns(acllab.AclWarning, match="positive"):
        assert acl.set_tensor_const(desc, ptr, 0) == 100000
    acl.rt.set_device(0)
    dev, _ = acl.rt.malloc(64, 0)
    with pytest.warns(acllab.AclWarning, match="device memory"):
        assert acl.set_tensor_const(desc, dev, 4) == 100000
    quiet(acl.rt.free, dev)
    acl.destroy_tensor_desc(desc)
    acl.rt.reset_device(0)
    acl.finalize()


def test_host_objects_left_at_finalize_are_leaks_that_can_still_be_destroyed():
    """CANN's finalize leaves host-side objects alone and their destroy calls only delete
    them (hicann/ge, api/acl/acl_model/model/model_om2.cpp: aclmdlDestroyDesc and
    aclmdlDestroyDataset): a program whose destructors run after aclFinalize (as some of
    Ascend's samples do) destroys them with code 0. acllab still reports them at finalize,
    and a second destroy is refused as for any destroyed object."""
    acl.init()
    objects = [(acl.mdl.destroy_desc, acl.mdl.create_desc()),
               (acl.mdl.destroy_dataset, acl.mdl.create_dataset()),
               (acl.destroy_data_buffer, acl.create_data_buffer(0, 0)),
               (acl.destroy_tensor_desc, acl.create_tensor_desc(ACL_FLOAT, [4], ACL_FORMAT_ND)),
               (acl.op.destroy_attr, acl.op.create_attr())]
    with pytest.warns(acllab.AclWarning, match="model description 0x[0-9a-f]+ never destroyed"):
        acl.finalize()
    assert [destroy(h) for destroy, h in objects] == [0, 0, 0, None, None]
    assert [(e[0], e[3]) for e in acllab.current_runtime().api_log[-5:]] == [
        ("destroy_desc", 0), ("destroy_dataset", 0), ("destroy_data_buffer", 0),
        ("destroy_tensor_desc", 0), ("destroy_attr", 0)]
    with pytest.warns(acllab.AclWarning, match="107017"):
        assert acl.mdl.destroy_desc(objects[0][1]) == 107017


def test_a_description_left_at_finalize_is_a_leak():
    acl.init()
    acl.create_tensor_desc(ACL_FLOAT, [4], ACL_FORMAT_ND)
    with pytest.warns(acllab.AclWarning, match="tensor description 0x[0-9a-f]+ never destroyed"):
        acl.finalize()
