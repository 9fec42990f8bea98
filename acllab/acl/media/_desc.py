"""``acl.media`` descriptors: the objects behind channel, picture and config handles.

``_new``, ``_get`` and ``_destroy`` make, resolve and destroy them for the other sections;
``api`` is the facade's decorator, naming the calls ``acl.media.*`` in messages.
"""

from __future__ import annotations

from ...dvpp import formats as F
from ...errors import Fail
from .. import _api
from .._api import as_int, rt

__all__ = ["ChannelDesc", "PicDesc", "RoiConfig", "ResizeConfig", "JpegeConfig", "StreamDesc"]

FORMAT_NAMES = F.FORMAT_NAMES


def api(c_name: str, **kw):
    """acl._api.api for a call of acl.media (its messages say ``acl.media.<name>``)."""

    def deco(fn):
        fn.__module__ = "acllab.acl.media"
        return _api.api(c_name, **kw)(fn)

    return deco


class _Desc:
    kind = "descriptor"

    def __init__(self):
        self.alive = True
        self.handle = 0


class ChannelDesc(_Desc):
    """acldvppChannelDesc: a channel once dvpp_create_channel has run on it."""

    kind = "channel description"

    def __init__(self):
        super().__init__()
        self.channel = False
        self.device = -1

    def __repr__(self) -> str:
        state = f"channel on device {self.device}" if self.channel else "no channel"
        return f"<ChannelDesc 0x{self.handle:x}: {state}>"


class PicDesc(_Desc):
    """acldvppPicDesc: where a picture is and how it is laid out."""

    kind = "picture description"

    def __init__(self):
        super().__init__()
        self.data = self.size = self.width = self.height = 0
        self.width_stride = self.height_stride = 0
        self.ret_code = 0             # acldvppGetPicDescRetCode: 0 success (VDEC sets it)
        self.format = F.PIXEL_FORMAT_YUV_SEMIPLANAR_420
        self.region = None
        self.set_fields: set[str] = set()   # the fields a set call gave (VDEC asks)
        self.batch = None                   # the batch description that owns it, if any

    def __repr__(self) -> str:
        return (f"<PicDesc 0x{self.handle:x}: {self.width}x{self.height} "
                f"{FORMAT_NAMES.get(self.format, self.format)}, strides {self.width_stride}x"
                f"{self.height_stride}, {self.size} B at 0x{self.data:x}>")


class StreamDesc(_Desc):
    """acldvppStreamDesc: one frame of a video stream (VDEC's input, VENC's output).

    Fields and defaults as acl_dvpp.h's acldvppSetStreamDesc* / GetStreamDesc* calls have
    them: data 0, size 0, format (an acldvppStreamFormat) 0, timestamp 0, ret code 0, eos 0.
    """

    kind = "stream description"

    def __init__(self):
        super().__init__()
        self.data = self.size = self.format = self.timestamp = self.ret_code = self.eos = 0

    def __repr__(self) -> str:
        eos = ", eos" if self.eos else ""
        return (f"<StreamDesc 0x{self.handle:x}: {self.size} B at 0x{self.data:x}, format "
                f"{self.format}, timestamp {self.timestamp}, ret code {self.ret_code}{eos}>")


class RoiConfig(_Desc):
    """acldvppRoiConfig: an area [left, right] x [top, bottom], offsets inclusive."""

    kind = "ROI config"

    def __init__(self, left: int, right: int, top: int, bottom: int):
        super().__init__()
        self.left, self.right, self.top, self.bottom = left, right, top, bottom

    def __repr__(self) -> str:
        return (f"<RoiConfig 0x{self.handle:x}: left {self.left}, right {self.right}, "
                f"top {self.top}, bottom {self.bottom}>")


class ResizeConfig(_Desc):
    """acldvppResizeConfig: the resize algorithm (``interpolation``, 0 by default)."""

    kind = "resize config"

    def __init__(self):
        super().__init__()
        self.interpolation = 0


class JpegeConfig(_Desc):
    """acldvppJpegeConfig: the encoding level (quality), 0 to 100, default 100."""

    kind = "JPEGE config"

    def __init__(self):
        super().__init__()
        self.level = 100


def _new(obj: _Desc) -> int:
    r = rt()
    r.spend(r.profile.api_ns)
    obj.handle = r.new_handle("desc", obj)
    return obj.handle


def _get(handle, cls: type, what: str):
    """The live descriptor behind ``handle``, or Fail(100000) (media calls check params)."""
    h = as_int(handle, what)
    r = rt()
    obj = r.handles.get(h)
    if isinstance(obj, cls) and obj.alive:
        return obj
    if h == 0:
        raise Fail(100000, f"{what} is a null handle (0)")
    if h in r.dead_handles:
        raise Fail(100000, f"{what} 0x{h:x} was already destroyed")
    if obj is not None:
        raise Fail(100000, f"{what} 0x{h:x} is a {getattr(obj, 'kind', type(obj).__name__)}, "
                           f"not a {cls.kind}")
    raise Fail(100000, f"{what} 0x{h:x} is not a {cls.kind} handle")


def _destroy(handle, cls: type, what: str) -> None:
    obj = _get(handle, cls, what)
    r = rt()
    r.spend(r.profile.api_ns)
    obj.alive = False
    r.drop_handle(obj.handle, cls.kind)
