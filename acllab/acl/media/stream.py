"""``acl.media`` stream descriptions (acldvppStreamDesc): a video frame's bytes and facts.

VDEC reads its input frames through them (``vdec_send_frame``) and hands them back to the
channel's callback; a frame with ``eos`` 1 ends the stream. The calls, their fields and their
C types follow acl/ops/acl_dvpp.h (acldvppCreateStreamDesc, acldvppSetStreamDesc*,
acldvppGetStreamDesc*; CANN 8.0.0 pyACL reference, "dvpp_set_stream_desc_*"): data (an
address), size (uint32), format (an acldvppStreamFormat: 0 H265_MAIN_LEVEL,
1 H264_BASELINE_LEVEL, 2 H264_MAIN_LEVEL, 3 H264_HIGH_LEVEL), timestamp (uint64), ret code
(uint32) and eos (0 or 1). A setter given a bad handle or a value outside its type returns
ACL_ERROR_INVALID_PARAM (100000); a getter given a bad handle returns 0, as pyACL's do.

The format a channel decodes is the channel's (vdec_set_channel_desc_entype): CANN's
aclvdecSendFrame says the stream description's format is ignored for VDEC.
"""

from __future__ import annotations

from ...dvpp.video import STREAM_FORMATS
from ...errors import Fail
from .._api import as_int
from ._desc import StreamDesc, _destroy, _get, _new, api

__all__ = [
    "dvpp_create_stream_desc", "dvpp_destroy_stream_desc",
    "dvpp_set_stream_desc_data", "dvpp_set_stream_desc_size", "dvpp_set_stream_desc_format",
    "dvpp_set_stream_desc_timestamp", "dvpp_set_stream_desc_ret_code",
    "dvpp_set_stream_desc_eos",
    "dvpp_get_stream_desc_data", "dvpp_get_stream_desc_size", "dvpp_get_stream_desc_format",
    "dvpp_get_stream_desc_timestamp", "dvpp_get_stream_desc_ret_code",
    "dvpp_get_stream_desc_eos",
]

_U32, _U64 = (1 << 32) - 1, (1 << 64) - 1


@api("acldvppCreateStreamDesc", bare=True, outs=(0,))
def dvpp_create_stream_desc():
    """An empty stream description (every field 0)."""
    return _new(StreamDesc())


@api("acldvppDestroyStreamDesc")
def dvpp_destroy_stream_desc(stream_desc):
    """Destroy the description (not the memory it points at)."""
    _destroy(stream_desc, StreamDesc, "stream_desc")


def _check(field: str, value: int) -> None:
    if value < 0:
        raise Fail(100000, f"{field} must not be negative (got {value})")
    if field == "format" and value not in STREAM_FORMATS:
        names = ", ".join(f"{n} ({v})" for v, n in STREAM_FORMATS.items())
        raise Fail(100000, f"format {value} is not an acldvppStreamFormat: use {names}")
    if field == "eos" and value not in (0, 1):
        raise Fail(100000, f"eos is 0 (more frames follow) or 1 (the end of the stream), "
                           f"not {value}")
    limit = _U64 if field in ("data", "timestamp") else _U32
    if value > limit:
        bits = 64 if limit == _U64 else 32
        raise Fail(100000, f"{field} {value} does not fit its {bits}-bit field")


def _setter(field: str, c_name: str):
    def setter(stream_desc, value):
        desc = _get(stream_desc, StreamDesc, "stream_desc")
        value = as_int(value, field)
        _check(field, value)
        setattr(desc, field, value)

    setter.__name__ = setter.__qualname__ = f"dvpp_set_stream_desc_{field}"
    setter.__doc__ = f"Set the stream description's {field.replace('_', ' ')}."
    return api(c_name)(setter)


def _getter(field: str, c_name: str):
    def getter(stream_desc):
        return getattr(_get(stream_desc, StreamDesc, "stream_desc"), field)

    getter.__name__ = getter.__qualname__ = f"dvpp_get_stream_desc_{field}"
    getter.__doc__ = (f"The stream description's {field.replace('_', ' ')} "
                      "(0 for a bad handle).")
    return api(c_name, bare=True, outs=(0,), needs_init=False)(getter)


dvpp_set_stream_desc_data = _setter("data", "acldvppSetStreamDescData")
dvpp_set_stream_desc_size = _setter("size", "acldvppSetStreamDescSize")
dvpp_set_stream_desc_format = _setter("format", "acldvppSetStreamDescFormat")
dvpp_set_stream_desc_timestamp = _setter("timestamp", "acldvppSetStreamDescTimestamp")
dvpp_set_stream_desc_ret_code = _setter("ret_code", "acldvppSetStreamDescRetCode")
dvpp_set_stream_desc_eos = _setter("eos", "acldvppSetStreamDescEos")
dvpp_get_stream_desc_data = _getter("data", "acldvppGetStreamDescData")
dvpp_get_stream_desc_size = _getter("size", "acldvppGetStreamDescSize")
dvpp_get_stream_desc_format = _getter("format", "acldvppGetStreamDescFormat")
dvpp_get_stream_desc_timestamp = _getter("timestamp", "acldvppGetStreamDescTimestamp")
dvpp_get_stream_desc_ret_code = _getter("ret_code", "acldvppGetStreamDescRetCode")
dvpp_get_stream_desc_eos = _getter("eos", "acldvppGetStreamDescEos")
