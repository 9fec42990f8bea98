"""``acl.media``: DVPP memory, channels, picture descriptions, JPEG decode/encode and VPC.

The calls AclLite's image processing and the classification samples use, with pyACL's
conventions: handles are ints; ``create_*`` and ``get_*`` calls return a bare value (0 on
failure), the others the aclError (or a tuple with it last). The work runs on the device's
JPEGD, VPC and JPEGE engines (:mod:`acllab.dvpp`), in stream order, in virtual time.

A typical pipeline (host JPEG bytes -> model input)::

    info = acl.media.dvpp_jpeg_get_image_info(host_ptr, n)        # (w, h, components, ret)
    size, ret = acl.media.dvpp_jpeg_predict_dec_size(host_ptr, n, PIXEL_FORMAT_YUV_SEMIPLANAR_420)
    jpeg_dev, ret = acl.media.dvpp_malloc(n)
    acl.rt.memcpy_async(jpeg_dev, n, host_ptr, n, ACL_MEMCPY_HOST_TO_DEVICE, stream)
    acl.media.dvpp_jpeg_decode_async(channel, jpeg_dev, n, decoded_desc, stream)
    acl.media.dvpp_vpc_resize_async(channel, decoded_desc, resized_desc, resize_cfg, stream)

Differs from hardware: only YUV420SP pictures (NV12, NV21) are supported (other formats
return ACL_ERROR_FEATURE_UNSUPPORTED 200006); a channel is bookkeeping (every channel shares
the device's engines, as on hardware, but there is no per-channel limit); resizing is bilinear.
"""

from __future__ import annotations

import numpy as np

from ..constants import ACL_MEM_MALLOC_HUGE_FIRST
from ..dvpp import formats as F
from ..dvpp.formats import (  # the real names, as pyACL programs define them
    PIXEL_FORMAT_UNKNOWN,
    PIXEL_FORMAT_YUV_400,
    PIXEL_FORMAT_YUV_SEMIPLANAR_420,
    PIXEL_FORMAT_YVU_SEMIPLANAR_420,
)
from ..dvpp.tasks import decode_task, dvpp_device, encode_task, vpc_task
from ..errors import Fail
from ._api import api, as_int, rt

__all__ = [
    "PIXEL_FORMAT_YUV_400", "PIXEL_FORMAT_YUV_SEMIPLANAR_420", "PIXEL_FORMAT_YVU_SEMIPLANAR_420",
    "PIXEL_FORMAT_UNKNOWN",
    "dvpp_malloc", "dvpp_free",
    "dvpp_create_channel_desc", "dvpp_destroy_channel_desc", "dvpp_create_channel",
    "dvpp_destroy_channel",
    "dvpp_create_pic_desc", "dvpp_destroy_pic_desc",
    "dvpp_set_pic_desc_data", "dvpp_set_pic_desc_size", "dvpp_set_pic_desc_format",
    "dvpp_set_pic_desc_width", "dvpp_set_pic_desc_height", "dvpp_set_pic_desc_width_stride",
    "dvpp_set_pic_desc_height_stride",
    "dvpp_get_pic_desc_data", "dvpp_get_pic_desc_size", "dvpp_get_pic_desc_format",
    "dvpp_get_pic_desc_width", "dvpp_get_pic_desc_height", "dvpp_get_pic_desc_width_stride",
    "dvpp_get_pic_desc_height_stride",
    "dvpp_create_roi_config", "dvpp_destroy_roi_config",
    "dvpp_create_resize_config", "dvpp_destroy_resize_config",
    "dvpp_create_jpege_config", "dvpp_set_jpege_config_level", "dvpp_destroy_jpege_config",
    "dvpp_jpeg_get_image_info", "dvpp_jpeg_predict_dec_size", "dvpp_jpeg_decode_async",
    "dvpp_vpc_resize_async", "dvpp_vpc_crop_async", "dvpp_vpc_crop_and_paste_async",
    "dvpp_jpeg_predict_enc_size", "dvpp_jpeg_encode_async",
]

_FORMATS = {PIXEL_FORMAT_YUV_400: "YUV400", PIXEL_FORMAT_YUV_SEMIPLANAR_420: "YUV420SP NV12",
            PIXEL_FORMAT_YVU_SEMIPLANAR_420: "YUV420SP NV21", PIXEL_FORMAT_UNKNOWN: "UNKNOWN",
            **{k: f"acldvppPixelFormat {k}" for k in range(3, 13)}}


# ---------------------------------------------------------------------------------------
# the descriptors behind the handles
# ---------------------------------------------------------------------------------------

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
        self.format = PIXEL_FORMAT_YUV_SEMIPLANAR_420
        self.region = None

    def __repr__(self) -> str:
        return (f"<PicDesc 0x{self.handle:x}: {self.width}x{self.height} "
                f"{_FORMATS.get(self.format, self.format)}, strides {self.width_stride}x"
                f"{self.height_stride}, {self.size} B at 0x{self.data:x}>")


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
    kind = "resize config"


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


# ---------------------------------------------------------------------------------------
# DVPP memory
# ---------------------------------------------------------------------------------------

@api("acldvppMalloc", outs=(0,))
def dvpp_malloc(size):
    """Allocate DVPP memory: device memory the media engines may use (rounded as malloc).

    DVPP buffers of one device share a window of ``dvpp_memory_bytes`` (4 GiB on the 310
    profile); starts are page aligned, so they meet JPEGD's 128-byte input alignment.
    Free them with dvpp_free.
    """
    r = rt()
    size = as_int(size, "size")
    if size <= 0:
        raise Fail(100000, f"size must be positive (got {size})")
    dev = r.current_context().device
    dd = dvpp_device(r, dev)
    limit = dev.profile.dvpp_memory_bytes
    if dd.used_bytes + size > limit:
        raise Fail(207001, f"DVPP memory of device {dev.id} is limited to {limit // 2**20} MB "
                           f"(its address window); {dd.used_bytes // 2**20} MB are in use")
    region, cost, _hit = dev.heap.malloc(size, ACL_MEM_MALLOC_HUGE_FIRST)
    region.label = "dvpp"
    dd.buffers[region.start] = (region, region.generation)
    r.spend(cost)
    return region.start


@api("acldvppFree")
def dvpp_free(dev_ptr):
    """Free DVPP memory at once (no implicit synchronisation, as acl.rt.free)."""
    r = rt()
    addr = as_int(dev_ptr, "dev_ptr")
    if addr == 0:
        raise Fail(100000, "dev_ptr is a null pointer")
    region = r.space.find(addr)
    r.current_context()
    if region is None or region.kind != "device":
        raise Fail(100000, f"0x{addr:x} is not device memory from acl.media.dvpp_malloc")
    dd = dvpp_device(r, r.devices[region.device])
    if not region.live:
        raise Fail(207002, f"0x{addr:x} was already freed (double free)")
    if not dd.is_dvpp(region):
        raise Fail(100000, f"0x{addr:x} was allocated by acl.rt.malloc: free it with "
                           "acl.rt.free (dvpp_free takes DVPP memory only)")
    if addr != region.start:
        raise Fail(100000, f"0x{addr:x} points {addr - region.start} B into a DVPP buffer; "
                           f"dvpp_free takes its start 0x{region.start:x}")
    r.spend(r.profile.malloc_pool_ns)
    r.log("dvpp_free", region.start, region.generation, region.size)
    del dd.buffers[region.start]
    r.devices[region.device].heap.free(region)


# ---------------------------------------------------------------------------------------
# channels
# ---------------------------------------------------------------------------------------

@api("acldvppCreateChannelDesc", bare=True, outs=(0,))
def dvpp_create_channel_desc():
    """A channel description (then dvpp_create_channel makes the channel)."""
    return _new(ChannelDesc())


@api("acldvppCreateChannel")
def dvpp_create_channel(channel_desc):
    """Create the image-processing channel on the current device."""
    desc = _get(channel_desc, ChannelDesc, "channel_desc")
    if desc.channel:
        raise Fail(100000, f"channel_desc 0x{desc.handle:x} already has a channel")
    r = rt()
    dev = r.current_context().device
    r.spend(r.profile.api_ns)
    dvpp_device(r, dev)
    desc.channel, desc.device = True, dev.id


@api("acldvppDestroyChannel")
def dvpp_destroy_channel(channel_desc):
    """Destroy the channel (tasks already submitted still run)."""
    desc = _get(channel_desc, ChannelDesc, "channel_desc")
    if not desc.channel:
        raise Fail(100000, f"channel_desc 0x{desc.handle:x} has no channel to destroy")
    r = rt()
    r.spend(r.profile.api_ns)
    desc.channel = False


@api("acldvppDestroyChannelDesc")
def dvpp_destroy_channel_desc(channel_desc):
    _destroy(channel_desc, ChannelDesc, "channel_desc")


def _channel(channel_desc) -> ChannelDesc:
    desc = _get(channel_desc, ChannelDesc, "channel_desc")
    if not desc.channel:
        raise Fail(100000, f"channel_desc 0x{desc.handle:x} has no channel: call "
                           "acl.media.dvpp_create_channel(channel_desc) first")
    return desc


# ---------------------------------------------------------------------------------------
# picture descriptions
# ---------------------------------------------------------------------------------------

@api("acldvppCreatePicDesc", bare=True, outs=(0,))
def dvpp_create_pic_desc():
    """An empty picture description (set data, size, format, width, height, strides)."""
    return _new(PicDesc())


@api("acldvppDestroyPicDesc")
def dvpp_destroy_pic_desc(pic_desc):
    """Destroy the description (not the memory it points at)."""
    _destroy(pic_desc, PicDesc, "pic_desc")


def _setter(field: str, c_name: str):
    def setter(pic_desc, value):
        desc = _get(pic_desc, PicDesc, "pic_desc")
        value = as_int(value, field)
        if value < 0:
            raise Fail(100000, f"{field} must not be negative (got {value})")
        if field == "format" and value not in _FORMATS:
            raise Fail(100000, f"format {value} is not an acldvppPixelFormat")
        setattr(desc, field, value)

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
dvpp_get_pic_desc_data = _getter("data", "acldvppGetPicDescData")
dvpp_get_pic_desc_size = _getter("size", "acldvppGetPicDescSize")
dvpp_get_pic_desc_format = _getter("format", "acldvppGetPicDescFormat")
dvpp_get_pic_desc_width = _getter("width", "acldvppGetPicDescWidth")
dvpp_get_pic_desc_height = _getter("height", "acldvppGetPicDescHeight")
dvpp_get_pic_desc_width_stride = _getter("width_stride", "acldvppGetPicDescWidthStride")
dvpp_get_pic_desc_height_stride = _getter("height_stride", "acldvppGetPicDescHeightStride")


# ---------------------------------------------------------------------------------------
# configs
# ---------------------------------------------------------------------------------------

@api("acldvppCreateRoiConfig", bare=True, outs=(0,))
def dvpp_create_roi_config(left, right, top, bottom):
    """An area from column ``left`` to ``right`` and row ``top`` to ``bottom`` (inclusive).

    VPC needs left and top even, right and bottom odd (checked when the area is used).
    """
    vals = [as_int(v, n) for v, n in ((left, "left"), (right, "right"), (top, "top"),
                                      (bottom, "bottom"))]
    if min(vals) < 0:
        raise Fail(100000, f"ROI offsets must not be negative (got {vals})")
    return _new(RoiConfig(*vals))


@api("acldvppDestroyRoiConfig")
def dvpp_destroy_roi_config(roi_config):
    _destroy(roi_config, RoiConfig, "roi_config")


@api("acldvppCreateResizeConfig", bare=True, outs=(0,))
def dvpp_create_resize_config():
    """A resize configuration (the default interpolation)."""
    return _new(ResizeConfig())


@api("acldvppDestroyResizeConfig")
def dvpp_destroy_resize_config(resize_config):
    _destroy(resize_config, ResizeConfig, "resize_config")


@api("acldvppCreateJpegeConfig", bare=True, outs=(0,))
def dvpp_create_jpege_config():
    """A JPEG encoding configuration (level 100)."""
    return _new(JpegeConfig())


@api("acldvppSetJpegeConfigLevel")
def dvpp_set_jpege_config_level(jpege_config, level):
    """The encoding level, 0 to 100 (higher is better quality; 0 encodes like 100)."""
    cfg = _get(jpege_config, JpegeConfig, "jpege_config")
    level = as_int(level, "level")
    if not 0 <= level <= 100:
        raise Fail(100000, f"level must be between 0 and 100 (got {level})")
    cfg.level = level


@api("acldvppDestroyJpegeConfig")
def dvpp_destroy_jpege_config(jpege_config):
    _destroy(jpege_config, JpegeConfig, "jpege_config")


# ---------------------------------------------------------------------------------------
# buffers and pictures: validation
# ---------------------------------------------------------------------------------------

def _span(addr: int, n: int, what: str, dvpp: bool):
    """(region, offset) of [addr, addr + n): live, in bounds, on the current device, and
    (``dvpp``) DVPP memory."""
    r = rt()
    dev = r.current_context().device
    if addr == 0:
        raise Fail(100000, f"{what} is a null pointer")
    if n <= 0:
        raise Fail(100000, f"the size of {what} must be positive (got {n})")
    region = r.space.find(addr)
    if region is None:
        raise Fail(100000, f"{what} 0x{addr:x} is not inside any allocation or registered "
                           "host buffer")
    if region.kind == "device" and not region.live:
        raise Fail(100000, f"{what} 0x{addr:x} was freed")
    if region.kind == "pageable" and not r.host.check_alive(region):
        raise Fail(100000, f"{what} 0x{addr:x} is dangling: the Python object behind it no "
                           "longer exists")
    off = addr - region.start
    if off + n > region.size:
        raise Fail(100000, f"{what} 0x{addr:x} + {n} B runs {off + n - region.size} B past the "
                           f"end of its {region.describe()}")
    if dvpp:
        if region.kind != "device":
            raise Fail(100000, f"{what} 0x{addr:x} is host memory; DVPP engines read and write "
                               "DVPP memory only (acl.media.dvpp_malloc, then copy to it)")
        if region.device != dev.id:
            raise Fail(100000, f"{what} 0x{addr:x} is memory of device {region.device}, but "
                               f"the current context is on device {dev.id}")
        if not dvpp_device(r, dev).is_dvpp(region):
            raise Fail(100000, f"{what} 0x{addr:x} is device memory from acl.rt.malloc; DVPP "
                               "engines need memory from acl.media.dvpp_malloc")
    return region, off


def _yuv420sp(desc: PicDesc, what: str) -> None:
    if desc.format not in F.YUV420SP_FORMATS:
        if desc.format in _FORMATS and desc.format != PIXEL_FORMAT_UNKNOWN:
            raise Fail(200006, f"{what} is {_FORMATS[desc.format]}: acllab's DVPP supports "
                               "YUV420SP NV12 (1) and NV21 (2) only")
        raise Fail(100000, f"{what} has format {desc.format}; use "
                           "PIXEL_FORMAT_YUV_SEMIPLANAR_420 (1) or YVU_SEMIPLANAR_420 (2)")


def _vpc_picture(desc: PicDesc, what: str) -> None:
    """VPC's rules for a YUV420SP picture (module docstring of acllab.dvpp.formats)."""
    _yuv420sp(desc, what)
    w, h, ws, hs = desc.width, desc.height, desc.width_stride, desc.height_stride
    if not (10 <= w <= 4096 and 6 <= h <= 4096):
        raise Fail(100000, f"{what} is {w} x {h}; VPC takes 10 x 6 to 4096 x 4096 pictures")
    if ws % 16 or hs % 2:
        raise Fail(100000, f"{what} has strides {ws} x {hs}; VPC needs the width stride "
                           "aligned to 16 and the height stride to 2")
    if ws < F.align_up(w, 2) or hs < F.align_up(h, 2) or not (32 <= ws <= 16384 and
                                                               6 <= hs <= 16384):
        raise Fail(100000, f"{what} has strides {ws} x {hs} for a {w} x {h} picture; strides "
                           "must cover the (2-aligned) picture, width stride 32 to 16384, "
                           "height stride 6 to 16384")
    need = F.yuv420sp_size(ws, hs)
    if desc.size < need:
        raise Fail(100000, f"{what} says its buffer holds {desc.size} B, but YUV420SP with "
                           f"strides {ws} x {hs} needs {ws} * {hs} * 3 / 2 = {need} B")
    desc.region = _span(desc.data, need, f"the data of {what}", dvpp=True)[0]


def _roi(cfg: RoiConfig, w: int, h: int, what: str, paste: bool = False) -> tuple:
    left, right, top, bottom = cfg.left, cfg.right, cfg.top, cfg.bottom
    if left % 2 or top % 2 or right % 2 == 0 or bottom % 2 == 0:
        raise Fail(100000, f"{what} ({left}, {right}, {top}, {bottom}): VPC needs the left and "
                           "top offsets even and the right and bottom offsets odd")
    if right - left + 1 < 10 or bottom - top + 1 < 6:
        raise Fail(100000, f"{what} is {right - left + 1} x {bottom - top + 1}; VPC areas are "
                           "at least 10 x 6")
    if right >= F.align_up(w, 2) or bottom >= F.align_up(h, 2):
        raise Fail(100000, f"{what} reaches column {right}, row {bottom}, outside the "
                           f"{w} x {h} picture")
    if paste and left % 16:
        raise Fail(100000, f"{what} starts at column {left}; a paste area's left offset must "
                           "be a multiple of 16")
    return left, right, top, bottom


def _stream(stream):
    r = rt()
    return r.stream_for(as_int(stream, "stream"))


def _submit(task, s) -> None:
    r = rt()
    r.launch(r.profile.launch_ns)
    r.submit(task, s)


def _host_bytes(data, size) -> bytes:
    addr, n = as_int(data, "data"), as_int(size, "size")
    region, off = _span(addr, n, "data", dvpp=False)
    return region.read_bytes(off, n)


# ---------------------------------------------------------------------------------------
# JPEG decode
# ---------------------------------------------------------------------------------------

@api("acldvppJpegGetImageInfo", outs=(0, 0, 0))
def dvpp_jpeg_get_image_info(data, size):
    """(width, height, components, ret) from a JPEG's header in memory the host can read."""
    raw = _host_bytes(data, size)
    r = rt()
    r.spend(r.profile.api_ns)
    try:
        info = F.jpeg_info(raw)
    except ValueError as exc:
        raise Fail(100000, f"the data is not a JPEG JPEGD can read: {exc}") from None
    return info.width, info.height, info.components


@api("acldvppJpegPredictDecSize", outs=(0,))
def dvpp_jpeg_predict_dec_size(data, size, output_pixel_format):
    """Bytes JPEGD's output needs: width_stride * height_stride * 3 / 2 for YUV420SP.

    The strides are JPEGD's: width aligned to 128 (64 on Atlas A2 chips), height to 16.
    """
    fmt = as_int(output_pixel_format, "output_pixel_format")
    raw = _host_bytes(data, size)
    r = rt()
    r.spend(r.profile.api_ns)
    if fmt not in F.YUV420SP_FORMATS and fmt != PIXEL_FORMAT_UNKNOWN:
        raise Fail(200006 if fmt in _FORMATS else 100000,
                   f"output format {fmt}: acllab's JPEGD outputs YUV420SP NV12 (1) or NV21 (2)")
    try:
        info = F.jpeg_info(raw)
    except ValueError as exc:
        raise Fail(100000, f"the data is not a JPEG JPEGD can read: {exc}") from None
    ws, hs = F.jpegd_strides(info.width, info.height, r.profile.jpegd_width_stride_align)
    return F.yuv420sp_size(ws, hs)


@api("acldvppJpegDecodeAsync")
def dvpp_jpeg_decode_async(channel_desc, data, size, output_desc, stream):
    """Enqueue a JPEG decode of ``size`` bytes of DVPP memory into ``output_desc``'s buffer.

    The output description needs data, size and format (NV12 or NV21; UNKNOWN gives NV21,
    as JPEGD's "source format, V first" does for 4:2:0). Strides left at 0 are JPEGD's own
    (width aligned to 128, height to 16); given strides must be so aligned. When the task
    ends, the description's width, height and strides hold the decoded picture's.

    Differs from hardware: the JPEG's contents are checked when the task starts (they may
    arrive by an earlier copy on the stream), so a broken or too-large picture is reported
    as a fault (507000) at the next synchronisation, not by this call.
    """
    _channel(channel_desc)
    out = _get(output_desc, PicDesc, "output_desc")
    addr, n = as_int(data, "data"), as_int(size, "size")
    s = _stream(stream)
    src, soff = _span(addr, n, "data", dvpp=True)
    fmt = out.format
    if fmt == PIXEL_FORMAT_UNKNOWN:
        fmt = PIXEL_FORMAT_YVU_SEMIPLANAR_420
    probe = PicDesc()
    probe.format = fmt
    _yuv420sp(probe, "output_desc")
    align = rt().profile.jpegd_width_stride_align
    ws, hs = out.width_stride, out.height_stride
    if ws % align or hs % 16:
        raise Fail(100000, f"output_desc has strides {ws} x {hs}; JPEGD writes width strides "
                           f"aligned to {align} and height strides aligned to 16 (leave them 0 "
                           "for JPEGD's own)")
    if out.size <= 0:
        raise Fail(100000, "output_desc has no buffer size: set it with "
                           "acl.media.dvpp_set_pic_desc_size")
    dst, doff = _span(out.data, out.size, "the data of output_desc", dvpp=True)

    def fill(w: int, h: int, ws_: int, hs_: int) -> None:
        out.width, out.height = F.align_up(w, 2), F.align_up(h, 2)
        out.width_stride, out.height_stride, out.format = ws_, hs_, fmt

    _submit(decode_task(dvpp_device(rt(), s.device), src, soff, n, dst, doff, out.size, fmt,
                        (ws, hs), s, "dvpp_jpeg_decode_async", fill), s)


# ---------------------------------------------------------------------------------------
# VPC
# ---------------------------------------------------------------------------------------

def _vpc(channel_desc, input_desc, output_desc, stream, crop_area, paste_area, api_name,
         name) -> None:
    _channel(channel_desc)
    inp = _get(input_desc, PicDesc, "input_desc")
    out = _get(output_desc, PicDesc, "output_desc")
    s = _stream(stream)
    _vpc_picture(inp, "input_desc")
    _vpc_picture(out, "output_desc")
    if crop_area is None:
        crop = (0, F.align_up(inp.width, 2) - 1, 0, F.align_up(inp.height, 2) - 1)
    else:
        crop = _roi(_get(crop_area, RoiConfig, "crop_area"), inp.width, inp.height,
                    "crop_area")
    if paste_area is None:
        if out.width % 2 or out.height % 2:
            raise Fail(100000, f"output_desc is {out.width} x {out.height}; VPC's YUV420SP "
                               "output needs an even width and height")
        paste = (0, out.width - 1, 0, out.height - 1)
    else:
        paste = _roi(_get(paste_area, RoiConfig, "paste_area"), out.width, out.height,
                     "paste_area", paste=True)
    sx = (paste[1] - paste[0] + 1) / (crop[1] - crop[0] + 1)
    sy = (paste[3] - paste[2] + 1) / (crop[3] - crop[2] + 1)
    if not (1 / 32 <= sx <= 16 and 1 / 32 <= sy <= 16):
        raise Fail(100000, f"scaling by {sx:.3g} x {sy:.3g}: VPC scales by 1/32 to 16")
    if inp.region is out.region and inp.data == out.data:
        raise Fail(100000, "input_desc and output_desc share one buffer; VPC needs a "
                           "separate output")
    _submit(vpc_task(dvpp_device(rt(), s.device), inp, out, crop, paste, s, api_name, name), s)


@api("acldvppVpcResizeAsync")
def dvpp_vpc_resize_async(channel_desc, input_desc, output_desc, resize_config, stream):
    """Enqueue a resize of the whole input picture to the output picture's width and height.

    Bilinear (see acllab.dvpp.formats.resize_planes for how it differs from the VPC's filter);
    NV12 in and NV21 out (or the reverse) also converts.
    """
    _get(resize_config, ResizeConfig, "resize_config")
    _vpc(channel_desc, input_desc, output_desc, stream, None, None, "dvpp_vpc_resize_async",
         "VpcResize")


@api("acldvppVpcCropAsync")
def dvpp_vpc_crop_async(channel_desc, input_desc, output_desc, crop_area, stream):
    """Enqueue a crop of ``crop_area``; resized when the output's size differs from it."""
    _vpc(channel_desc, input_desc, output_desc, stream, crop_area, None,
         "dvpp_vpc_crop_async", "VpcCrop")


@api("acldvppVpcCropAndPasteAsync")
def dvpp_vpc_crop_and_paste_async(channel_desc, input_desc, output_desc, crop_area,
                                  paste_area, stream):
    """Enqueue a crop of ``crop_area`` pasted (resized if needed) into ``paste_area`` of the
    output; the output's other pixels keep their bytes (the canvas)."""
    _vpc(channel_desc, input_desc, output_desc, stream, crop_area, paste_area,
         "dvpp_vpc_crop_and_paste_async", "VpcCropAndPaste")


# ---------------------------------------------------------------------------------------
# JPEG encode
# ---------------------------------------------------------------------------------------

def _jpege_input(desc: PicDesc) -> None:
    _yuv420sp(desc, "input_desc")
    w, h, ws, hs = desc.width, desc.height, desc.width_stride, desc.height_stride
    if not (32 <= w <= 8192 and 32 <= h <= 8192) or w % 2 or h % 2:
        raise Fail(100000, f"input_desc is {w} x {h}; JPEGE encodes even widths and heights "
                           "from 32 x 32 to 8192 x 8192")
    if ws % 16 or ws < w or hs not in (h, max(32, F.align_up(h, 16))):
        raise Fail(100000, f"input_desc has strides {ws} x {hs} for {w} x {h}; JPEGE needs a "
                           "width stride aligned to 16 and a height stride equal to the height "
                           "or to the height aligned to 16")
    need = F.yuv420sp_size(ws, hs)
    if desc.size < need:
        raise Fail(100000, f"input_desc says its buffer holds {desc.size} B, but {ws} * {hs} "
                           f"* 3 / 2 = {need} B are needed")
    desc.region = _span(desc.data, need, "the data of input_desc", dvpp=True)[0]


@api("acldvppJpegPredictEncSize", outs=(0,))
def dvpp_jpeg_predict_enc_size(input_desc, config):
    """An upper bound of the encoded size (allocate the output with it)."""
    desc = _get(input_desc, PicDesc, "input_desc")
    _get(config, JpegeConfig, "config")
    _jpege_input(desc)
    r = rt()
    r.spend(r.profile.api_ns)
    return F.predict_enc_size(desc.width_stride, desc.height_stride)


@api("acldvppJpegEncodeAsync")
def dvpp_jpeg_encode_async(channel_desc, input_desc, data, size, config, stream):
    """Enqueue a JPEG encode of the picture into ``data`` (DVPP memory).

    ``size`` is either the output buffer's size, or (as the C API's ``uint32_t *size``) the
    address of a uint32 in host or device memory that holds the buffer size and receives the
    encoded length when the task ends.
    """
    _channel(channel_desc)
    inp = _get(input_desc, PicDesc, "input_desc")
    cfg = _get(config, JpegeConfig, "config")
    s = _stream(stream)
    _jpege_input(inp)
    r = rt()
    size = as_int(size, "size")
    size_region = r.space.find(size) if size > 0xFFFF_FFFF else None
    size_off = 0
    if size_region is not None:
        sreg, size_off = _span(size, 4, "size", dvpp=False)
        capacity = int(np.frombuffer(sreg.read_bytes(size_off, 4), np.uint32)[0])
        size_region = sreg
    elif size > 0xFFFF_FFFF:
        raise Fail(100000, f"size 0x{size:x} is neither a buffer size nor the address of one")
    else:
        capacity = size
    dst, doff = _span(as_int(data, "data"), capacity, "data", dvpp=True)
    quality = cfg.level or 100
    _submit(encode_task(dvpp_device(r, s.device), inp, dst, doff, capacity, quality, s,
                        "dvpp_jpeg_encode_async", size_region, size_off), s)
