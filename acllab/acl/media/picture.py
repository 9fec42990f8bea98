"""``acl.media`` picture descriptions: create, destroy, and every set/get of a field."""

from __future__ import annotations

from ...errors import Fail
from .._api import as_int
from ._desc import FORMAT_NAMES, PicDesc, _destroy, _get, _new, api

__all__ = [
    "dvpp_create_pic_desc", "dvpp_destroy_pic_desc",
    "dvpp_set_pic_desc_data", "dvpp_set_pic_desc_size", "dvpp_set_pic_desc_format",
    "dvpp_set_pic_desc_width", "dvpp_set_pic_desc_height", "dvpp_set_pic_desc_width_stride",
    "dvpp_set_pic_desc_height_stride", "dvpp_set_pic_desc_ret_code",
    "dvpp_get_pic_desc_data", "dvpp_get_pic_desc_size", "dvpp_get_pic_desc_format",
    "dvpp_get_pic_desc_width", "dvpp_get_pic_desc_height", "dvpp_get_pic_desc_width_stride",
    "dvpp_get_pic_desc_height_stride", "dvpp_get_pic_desc_ret_code",
]


@api("acldvppCreatePicDesc", bare=True, outs=(0,))
def dvpp_create_pic_desc():
    """An empty picture description (set data, size, format, width, height, strides)."""
    return _new(PicDesc())


@api("acldvppDestroyPicDesc")
def dvpp_destroy_pic_desc(pic_desc):
    """Destroy the description (not the memory it points at). A picture of a batch
    description goes with its batch (dvpp_destroy_batch_pic_desc): 100000."""
    desc = _get(pic_desc, PicDesc, "pic_desc")
    if desc.batch is not None:
        raise Fail(100000, f"pic_desc 0x{desc.handle:x} belongs to batch description "
                           f"0x{desc.batch.handle:x}: destroy the batch "
                           "(acl.media.dvpp_destroy_batch_pic_desc)")
    _destroy(pic_desc, PicDesc, "pic_desc")


def _setter(field: str, c_name: str):
    def setter(pic_desc, value):
        desc = _get(pic_desc, PicDesc, "pic_desc")
        value = as_int(value, field)
        if value < 0:
            raise Fail(100000, f"{field} must not be negative (got {value})")
        if field == "format" and value not in FORMAT_NAMES:
            raise Fail(100000, f"format {value} is not an acldvppPixelFormat")
        setattr(desc, field, value)
        desc.set_fields.add(field)

    setter.__name__ = setter.__qualname__ = f"dvpp_set_pic_desc_{field}"
    setter.__doc__ = f"Set the picture's {field.replace('_', ' ')}."
    return api(c_name)(setter)


def _getter(field: str, c_name: str):
    def getter(pic_desc):
        return getattr(_get(pic_desc, PicDesc, "pic_desc"), field)

    getter.__name__ = getter.__qualname__ = f"dvpp_get_pic_desc_{field}"
    getter.__doc__ = f"The picture's {field.replace('_', ' ')} (0 for a bad handle)."
    return api(c_name, bare=True, outs=(0,), needs_init=False)(getter)


dvpp_set_pic_desc_data = _setter("data", "acldvppSetPicDescData")
dvpp_set_pic_desc_size = _setter("size", "acldvppSetPicDescSize")
dvpp_set_pic_desc_format = _setter("format", "acldvppSetPicDescFormat")
dvpp_set_pic_desc_width = _setter("width", "acldvppSetPicDescWidth")
dvpp_set_pic_desc_height = _setter("height", "acldvppSetPicDescHeight")
dvpp_set_pic_desc_width_stride = _setter("width_stride", "acldvppSetPicDescWidthStride")
dvpp_set_pic_desc_height_stride = _setter("height_stride", "acldvppSetPicDescHeightStride")
dvpp_set_pic_desc_ret_code = _setter("ret_code", "acldvppSetPicDescRetCode")
dvpp_set_pic_desc_ret_code.__doc__ = """Set the picture's return code (0 to clear it). VDEC
sets a failed frame's code and leaves it there: a description reused for later frames keeps
it until the program sets it back to 0 (CANN troubleshooting, "VDEC exception due to
incorrect setting of retCode")."""
dvpp_get_pic_desc_data = _getter("data", "acldvppGetPicDescData")
dvpp_get_pic_desc_size = _getter("size", "acldvppGetPicDescSize")
dvpp_get_pic_desc_format = _getter("format", "acldvppGetPicDescFormat")
dvpp_get_pic_desc_width = _getter("width", "acldvppGetPicDescWidth")
dvpp_get_pic_desc_height = _getter("height", "acldvppGetPicDescHeight")
dvpp_get_pic_desc_width_stride = _getter("width_stride", "acldvppGetPicDescWidthStride")
dvpp_get_pic_desc_height_stride = _getter("height_stride", "acldvppGetPicDescHeightStride")
dvpp_get_pic_desc_ret_code = _getter("ret_code", "acldvppGetPicDescRetCode")
dvpp_get_pic_desc_ret_code.__doc__ = """The picture's return code: 0 success, non-zero a failure
(CANN documentation, "acldvppGetPicDesc series": VDEC reports each frame's decode result
there). 0 for a bad handle. VDEC sets it for each output picture before the channel's
callback runs (:mod:`acllab.acl.media.vdec`) when a frame fails: 1 the decoder rejected the
frame, 0x20000 (ERR_DECODE_NOPIC) no picture came out for it by the end of the stream. A
decoded picture leaves the code as it was, so a description reused after a failure keeps
the failure's code until dvpp_set_pic_desc_ret_code(desc, 0).

Differs from hardware: JPEGD and VPC report their failures through their calls' codes, so it
stays 0 for their pictures."""
