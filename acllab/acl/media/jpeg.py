"""``acl.media`` JPEG: header info, decode (JPEGD) and encode (JPEGE)."""

from __future__ import annotations

import numpy as np

from ...dvpp import formats as F
from ...dvpp.formats import PIXEL_FORMAT_UNKNOWN
from ...dvpp.tasks import decode_task, dvpp_device, encode_task
from ...errors import Fail
from .._api import as_int, rt
from ._checks import _host_bytes, _span, _stream, _submit, _yuv420sp
from ._desc import FORMAT_NAMES, JpegeConfig, PicDesc, _get, api
from .channel import _channel

__all__ = ["dvpp_jpeg_get_image_info", "dvpp_jpeg_get_image_info_v2",
           "dvpp_jpeg_predict_dec_size", "dvpp_jpeg_decode_async",
           "dvpp_jpeg_predict_enc_size", "dvpp_jpeg_encode_async"]


def _info(raw: bytes) -> F.JpegInfo:
    try:
        return F.jpeg_info(raw)
    except ValueError as exc:
        raise Fail(100000, f"the data is not a JPEG JPEGD can read: {exc}") from None


@api("acldvppJpegGetImageInfo", outs=(0, 0, 0))
def dvpp_jpeg_get_image_info(data, size):
    """(width, height, components, ret) from a JPEG's header in memory the host can read."""
    raw = _host_bytes(data, size)
    r = rt()
    r.spend(r.profile.api_ns)
    info = _info(raw)
    return info.width, info.height, info.components


@api("acldvppJpegGetImageInfoV2", outs=(0, 0, 0, 0))
def dvpp_jpeg_get_image_info_v2(data, size):
    """(width, height, components, jpeg_format, ret): also the JPEG's chroma sampling, an
    acldvppJpegFormat (0 ACL_JPEG_CSS_444, 1 422, 2 420, 3 GRAY, 4 440, 5 411, 1000 UNKNOWN;
    acl/ops/acl_dvpp.h), which tells which output formats JPEGD can write."""
    raw = _host_bytes(data, size)
    r = rt()
    r.spend(r.profile.api_ns)
    info = _info(raw)
    return info.width, info.height, info.components, info.sampling


def _output_format(fmt: int, what: str) -> None:
    """A format JPEGD may write (which one fits the JPEG is known once it is read)."""
    writable = (*F.YUV420SP_FORMATS, *(f for fs in F.JPEGD_SOURCE_FORMATS.values() for f in fs),
                PIXEL_FORMAT_UNKNOWN)
    if fmt not in writable:
        names = ", ".join(f"{FORMAT_NAMES[f]} ({f})" for f in writable)
        raise Fail(200006 if fmt in FORMAT_NAMES else 100000,
                   f"{what} {FORMAT_NAMES.get(fmt, fmt)}: acllab's JPEGD writes {names}")


@api("acldvppJpegPredictDecSize", outs=(0,))
def dvpp_jpeg_predict_dec_size(data, size, output_pixel_format):
    """Bytes JPEGD's output needs: width_stride * height_stride * 3 / 2 for YUV420SP, * 2 for
    YUV422SP, * 3 for YUV444SP (CANN 8.0.0, "JPEGD functions and restrictions").

    The strides are JPEGD's: width aligned to 128 (64 on Atlas A2 chips), height to 16.
    PIXEL_FORMAT_UNKNOWN predicts the JPEG's own format (V first); a format JPEGD does not
    write from this JPEG's sampling (e.g. YUV444SP from a 4:2:0 JPEG) returns 200006.
    """
    fmt = as_int(output_pixel_format, "output_pixel_format")
    raw = _host_bytes(data, size)
    r = rt()
    r.spend(r.profile.api_ns)
    _output_format(fmt, "output format")
    info = _info(raw)
    try:
        ofmt, w, h = F.jpegd_output(info, fmt)
    except ValueError as exc:
        raise Fail(200006, str(exc)) from None
    ws, hs = F.jpegd_strides(w, h, r.profile.jpegd_width_stride_align)
    return F.jpegd_size(ofmt, ws, hs)


@api("acldvppJpegDecodeAsync")
def dvpp_jpeg_decode_async(channel_desc, data, size, output_desc, stream):
    """Enqueue a JPEG decode of ``size`` bytes of DVPP memory into ``output_desc``'s buffer.

    The output description needs data, size and format: NV12 or NV21 from any JPEG,
    YUV/YVU422SP from a 4:2:2 JPEG, YUV/YVU444SP from a 4:4:4 one, or UNKNOWN for the JPEG's
    own format, V first (NV21 for 4:2:0: JPEGD's "source format"; see
    acllab.dvpp.formats.jpegd_output). Strides left at 0 are JPEGD's own (width aligned to
    128, height to 16); given strides must be so aligned. When the task ends, the
    description's width, height, strides and format hold the decoded picture's.

    Differs from hardware: the JPEG's contents are checked when the task starts (they may
    arrive by an earlier copy on the stream), so a broken or too-large picture, or an output
    format that does not fit its sampling, is reported as a fault (507000) at the next
    synchronisation, not by this call.
    """
    _channel(channel_desc)
    out = _get(output_desc, PicDesc, "output_desc")
    addr, n = as_int(data, "data"), as_int(size, "size")
    s = _stream(stream)
    src, soff = _span(addr, n, "data", dvpp=True)
    fmt = out.format
    _output_format(fmt, "output_desc is")
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

    def fill(w: int, h: int, ws_: int, hs_: int, fmt_: int) -> None:
        out.width, out.height = w, h
        out.width_stride, out.height_stride, out.format = ws_, hs_, fmt_

    _submit(decode_task(dvpp_device(rt(), s.device), src, soff, n, dst, doff, out.size, fmt,
                        (ws, hs), s, "dvpp_jpeg_decode_async", fill), s)


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

