"""Tensor descriptions (``aclTensorDesc``): what ``acl.op.execute_v2`` matches an op model by.

``desc = acl.create_tensor_desc(ACL_FLOAT16, [8, 16], ACL_FORMAT_ND)`` describes a tensor's
data type, format and dims; ``acl.get_tensor_desc_size(desc)`` gives its bytes (element count
times ``acl.data_type_size``), the size a program allocates for it. The behaviour follows
hicann/ge, api/acl/acl_model/types/tensor_desc_internal_om2.cpp (the ``*ImplOm2`` functions
that acl_model.cpp's aclCreateTensorDesc ... call), and ``data_type_size`` hicann/runtime,
src/acl/aclrt_impl/data_buffer.cpp (aclDataTypeSizeImpl). None of them needs acl.init().

``set_tensor_format`` and ``set_tensor_shape`` set the *storage* format and shape, as
aclSetTensorFormatImplOm2 and aclSetTensorShapeImplOm2 do (``set_tensor_origin_format`` /
``set_tensor_origin_shape`` change the format and dims themselves); execute_v2 compares the
storage format too (aclTensorDesc::operator==), and an op model compiled from a config has
none, so a description whose storage format was set matches no model from atc.
"""

from __future__ import annotations

import math

from ..errors import Fail
from ..model.singleop import itemsize
from ._api import api, as_int, region_at, rt

__all__ = ["TensorDesc", "create_tensor_desc", "destroy_tensor_desc", "get_tensor_desc_type",
           "get_tensor_desc_format", "get_tensor_desc_size", "get_tensor_desc_element_count",
           "get_tensor_desc_num_dims", "get_tensor_desc_dim", "get_tensor_desc_dim_v2",
           "set_tensor_desc_name", "get_tensor_desc_name", "set_tensor_format",
           "set_tensor_shape", "set_tensor_origin_format", "set_tensor_origin_shape",
           "set_tensor_const", "set_tensor_place_ment", "data_type_size"]

ACL_DT_UNDEFINED = -1
ACL_FORMAT_UNDEFINED = -1
_MAX_DIMS = 64


class TensorDesc:
    """aclTensorDesc: data type, format, dims, and what execute_v2 also compares."""

    def __init__(self, handle: int, dtype: int, dims: list[int], fmt: int):
        self.handle = handle
        self.dtype = dtype
        self.format = fmt
        self.dims = dims
        self.storage_format = ACL_FORMAT_UNDEFINED
        self.storage_dims: list[int] = []
        self.name = ""
        self.const: bytes | None = None
        self.memtype = 0               # aclMemType: ACL_MEMTYPE_DEVICE 0, ACL_MEMTYPE_HOST 1
        self.alive = True

    def element_count(self) -> int:
        """aclGetTensorDescElementCountImplOm2: 1 for no dims, 0 if a dim is negative."""
        if any(d < 0 for d in self.dims):
            return 0
        return math.prod(self.dims)

    def __repr__(self) -> str:
        const = ", const" if self.const is not None else ""
        return (f"<TensorDesc 0x{self.handle:x}: type {self.dtype}, format {self.format}, "
                f"dims {self.dims}{const}>")


def _dims(dims, what: str = "dims") -> list[int]:
    if dims is None:
        return []
    if not isinstance(dims, (list, tuple)):
        raise TypeError(f"{what} must be a list of ints, not {type(dims).__name__}")
    if len(dims) > _MAX_DIMS:
        raise Fail(100000, f"{what} has {len(dims)} dimensions; acllab allows {_MAX_DIMS}")
    return [as_int(d, what) for d in dims]


def desc_of(handle) -> TensorDesc:
    """The live TensorDesc behind a handle, or Fail (100000 for 0, 107017 otherwise)."""
    return rt().lookup(as_int(handle, "desc"), TensorDesc, "tensor description")


@api("aclCreateTensorDesc", bare=True, outs=(0,), needs_init=False)
def create_tensor_desc(data_type, dims, format):  # noqa: A002 (pyACL's parameter name)
    """A tensor description handle: ``acl.create_tensor_desc(data_type, dims, format)``.

    ``dims`` is a list (``None`` or ``[]`` for a scalar or an unused optional input, with
    ACL_DT_UNDEFINED and ACL_FORMAT_UNDEFINED, as CANN's docs describe). Any data type and
    format code is accepted, as aclCreateTensorDescImplOm2 does; execute_v2 judges them.
    """
    dtype, fmt = as_int(data_type, "data_type"), as_int(format, "format")
    d = TensorDesc(0, dtype, _dims(dims), fmt)
    d.handle = rt().new_handle("tensor_desc", d)
    return d.handle


@api("aclDestroyTensorDesc", bare=True, outs=(None,), needs_init=False)
def destroy_tensor_desc(desc):
    """Destroy a description; returns None (the C function returns void).

    Differs from hardware: pyACL's return value for this void function is taken to be None
    (uncertain); a handle that is not a live description gives a warning here, where C would
    free whatever the pointer names.
    """
    d = desc_of(desc)
    d.alive = False
    rt().drop_handle(d.handle, "tensor description")


@api("aclGetTensorDescType", bare=True, outs=(ACL_DT_UNDEFINED,), needs_init=False)
def get_tensor_desc_type(desc):
    """The aclDataType (ACL_DT_UNDEFINED -1 for a bad handle)."""
    return desc_of(desc).dtype


@api("aclGetTensorDescFormat", bare=True, outs=(ACL_FORMAT_UNDEFINED,), needs_init=False)
def get_tensor_desc_format(desc):
    """The aclFormat given at creation (ACL_FORMAT_UNDEFINED -1 for a bad handle)."""
    return desc_of(desc).format


@api("aclGetTensorDescElementCount", bare=True, outs=(0,), needs_init=False)
def get_tensor_desc_element_count(desc):
    """The product of the dims (1 for no dims, 0 if a dim is negative)."""
    return desc_of(desc).element_count()


@api("aclGetTensorDescSize", bare=True, outs=(0,), needs_init=False)
def get_tensor_desc_size(desc):
    """Bytes of the tensor: element count times the type's size (0 for a dynamic dim)."""
    d = desc_of(desc)
    if any(x < 0 for x in d.dims):
        raise Fail(100000, f"dims {d.dims} have a dynamic (negative) dimension: the size is "
                           "unknown, aclGetTensorDescSize gives 0")
    return d.element_count() * itemsize(d.dtype)


@api("aclGetTensorDescNumDims", bare=True, outs=(0,), needs_init=False)
def get_tensor_desc_num_dims(desc):
    """The number of dims."""
    return len(desc_of(desc).dims)


def _dim(desc, index) -> int:
    d = desc_of(desc)
    i = as_int(index, "index")
    if not 0 <= i < len(d.dims):
        raise Fail(100000, f"index {i} is out of range: the description has {len(d.dims)} "
                           "dims")
    return d.dims[i]


@api("aclGetTensorDescDim", bare=True, outs=(-1,), needs_init=False)
def get_tensor_desc_dim(desc, index):
    """Dim ``index`` (-1 if out of range). Deprecated in CANN: use get_tensor_desc_dim_v2."""
    return _dim(desc, index)


@api("aclGetTensorDescDimV2", outs=(0,), needs_init=False)
def get_tensor_desc_dim_v2(desc, index):
    """(dim, ret); an index past the last dim returns 100000 (aclGetTensorDescDimV2ImplOm2)."""
    return _dim(desc, index)


@api("aclSetTensorDescName", bare=True, outs=(None,), needs_init=False)
def set_tensor_desc_name(desc, name):
    """Name the tensor (None clears it); returns None, as the void C function."""
    if name is not None and not isinstance(name, str):
        raise TypeError("name must be a str")
    desc_of(desc).name = name or ""


@api("aclGetTensorDescName", bare=True, outs=("",), needs_init=False)
def get_tensor_desc_name(desc):
    """The name set by set_tensor_desc_name ('' if none)."""
    return desc_of(desc).name


@api("aclSetTensorFormat", needs_init=False)
def set_tensor_format(desc, format):  # noqa: A002
    """Set the storage format (aclSetTensorFormatImplOm2; see the module docstring)."""
    value = as_int(format, "format")
    desc_of(desc).storage_format = value


@api("aclSetTensorShape", needs_init=False)
def set_tensor_shape(desc, dims):
    """Set the storage shape (aclSetTensorShapeImplOm2 fills storageDims; the dims that
    execute_v2 matches stay: use set_tensor_origin_shape or a new description for those)."""
    values = _dims(dims)            # the argument parser first, as pyACL's
    desc_of(desc).storage_dims = values


@api("aclSetTensorOriginFormat", needs_init=False)
def set_tensor_origin_format(desc, format):  # noqa: A002
    """Change the format itself (aclSetTensorOriginFormatImplOm2)."""
    value = as_int(format, "format")
    desc_of(desc).format = value


@api("aclSetTensorOriginShape", needs_init=False)
def set_tensor_origin_shape(desc, dims):
    """Change the dims themselves (aclSetTensorOriginShapeImplOm2)."""
    values = _dims(dims)
    desc_of(desc).dims = values


@api("aclSetTensorConst", needs_init=False)
def set_tensor_const(desc, data_buffer, length):
    """Make the input a constant: copy ``length`` bytes of host memory at ``data_buffer``.

    aclSetTensorConstImplOm2: a null pointer or a length of 0 returns 100000; the bytes are
    copied at once (later changes of the host buffer do not matter). The constant's value is
    part of what execute_v2 matches (the const data is saved into the attributes before the
    lookup: hicann/ge, api/acl/utils/acl_op_map.h, AclOpMap::Get, SaveConstToAttr); its
    data buffer at execute may be ``acl.create_data_buffer(0, 0)``.
    """
    r = rt()
    d = desc_of(desc)
    ptr, n = as_int(data_buffer, "data_buffer"), as_int(length, "length")
    if ptr == 0:
        raise Fail(100000, "data_buffer is a null pointer")
    if n <= 0:
        raise Fail(100000, f"length must be positive (got {n})")
    region = region_at(r, ptr, "data_buffer")
    off = ptr - region.start
    if region.kind == "device":
        raise Fail(100000, f"data_buffer 0x{ptr:x} is device memory: set_tensor_const copies "
                           "host memory (acl.util.bytes_to_ptr of the values)")
    if off + n > region.size:
        raise Fail(100000, f"data_buffer 0x{ptr:x} + {n} B runs past the end of its "
                           f"{region.describe()}")
    d.const = bytes(region.read_bytes(off, n))


@api("aclSetTensorPlaceMent", needs_init=False)
def set_tensor_place_ment(desc, mem_type):
    """Say where the tensor's data lies: ACL_MEMTYPE_DEVICE 0 or ACL_MEMTYPE_HOST 1.

    ``ret = acl.set_tensor_place_ment(desc, mem_type)`` (CANN's pyACL reference). An input
    placed in host memory is a constant whose value is its data buffer's host bytes at each
    execute_v2 (AclOpResourceManager::SetHostMemToConst, hicann/ge); CANN's docs say that with
    exact compilation this is the same as set_tensor_const. create_handle refuses such an
    input (aclopCreateHandleImpl: IsHostMemTensorDesc, 200001).

    Differs from hardware: CANN also compares the placement when it matches a model
    (aclTensorDesc::operator==); acllab matches a host-placed input by its value only, as a
    constant (uncertain how CANN's parsed model records the placement of a const input).
    """
    value = as_int(mem_type, "mem_type")      # the argument parser first, as pyACL's
    desc_of(desc).memtype = value


@api("aclDataTypeSize", bare=True, outs=(0,), needs_init=False)
def data_type_size(data_type):
    """Bytes per element of an aclDataType (ACL_FLOAT16 2, ACL_INT32 4 ...); see
    :func:`acllab.model.singleop.itemsize` for the whole table (ACL_STRING 0)."""
    return itemsize(as_int(data_type, "data_type"))
