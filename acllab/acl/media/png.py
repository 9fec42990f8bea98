"""``acl.media`` PNG: header info, the output size, and decoding on PNGD.

The rules are CANN's (:mod:`acllab.dvpp.png` names their sources): the header calls read the
PNG's IHDR as AscendCL does, without decoding; the decode runs on the device's PNGD engine
(:func:`acllab.dvpp.tasks.png_decode_task`) and writes RGB888 or RGBA8888 pictures with
PNGD's strides (width aligned to 128, times 3 or 4 bytes; height aligned to 16).
"""

from __future__ import annotations

from ...dvpp import png as P
from ...dvpp.formats import PIXEL_FORMAT_RGB_888, PIXEL_FORMAT_RGBA_8888, PIXEL_FORMAT_UNKNOWN
from ...dvpp.tasks import dvpp_device, png_decode_task
from ...errors import Fail
from .._api import as_int, rt
from ._checks import _host_bytes, _span, _stream, _submit
from ._desc import FORMAT_NAMES, PicDesc, _get, api
from .channel import _channel

__all__ = ["dvpp_png_get_image_info", "dvpp_png_predict_dec_size", "dvpp_png_decode_async"]


def _header(raw: bytes) -> P.PngHeader:
    try:
        return P.png_header(raw)
    except ValueError as exc:
        raise Fail(100000, f"the data is not a PNG: {exc}") from None


def _format_error(fmt: int, allowed: tuple[int, ...], what: str) -> Fail:
    names = ", ".join(f"{FORMAT_NAMES[f]} ({f})" for f in allowed)
    return Fail(100027, f"{what} {FORMAT_NAMES.get(fmt, fmt)} ({fmt}): PNGD's {names} only "
                        "(ACL_ERROR_FORMAT_NOT_MATCH)")


@api("acldvppPngGetImageInfo", outs=(0, 0, 0))
def dvpp_png_get_image_info(data, data_size):
    """(width, height, components, ret) from a PNG's header in memory the host can read.

    components: 1 greyscale, 2 grey + alpha, 3 RGB, 4 RGBA. As in CANN (the Ascend 310's
    image processor): a buffer of 29 bytes or fewer, or one without the PNG signature, is
    ACL_ERROR_INVALID_PARAM (100000); a palette PNG (colour type 3) is
    ACL_ERROR_FORMAT_NOT_MATCH (100027). The size is not checked here (the decode and
    dvpp_png_predict_dec_size take 32 x 32 to 4096 x 4096).
    """
    raw = _host_bytes(data, data_size)
    r = rt()
    r.spend(r.profile.api_ns)
    head = _header(raw)
    if head.components is None:
        raise Fail(100027, f"the PNG is {head.kind} (colour type {head.colour_type}); PNGD "
                           "takes greyscale, RGB, grey + alpha and RGBA PNGs (colour types 0, "
                           "2, 4, 6)")
    return head.width, head.height, head.components


@api("acldvppPngPredictDecSize", outs=(0,))
def dvpp_png_predict_dec_size(data, data_size, output_pixel_format):
    """(decode_out_size, ret): the bytes PNGD's output needs, by CANN's formula.

    ``output_pixel_format``: PIXEL_FORMAT_RGB_888, PIXEL_FORMAT_RGBA_8888, or
    PIXEL_FORMAT_UNKNOWN (the largest, 4 bytes a pixel); another is
    ACL_ERROR_FORMAT_NOT_MATCH (100027). The size is the width aligned to 128 times the bit
    depth times 3 (or 4) bits, rounded up to bytes, times the height aligned to 16; a picture
    outside 32 x 32 to 4096 x 4096 is ACL_ERROR_INVALID_PARAM. The formula scales with the
    bit depth: see :mod:`acllab.dvpp.png` for what that means for 16-bit and low-depth PNGs.
    """
    fmt = as_int(output_pixel_format, "output_pixel_format")
    raw = _host_bytes(data, data_size)
    r = rt()
    r.spend(r.profile.api_ns)
    allowed = (PIXEL_FORMAT_RGB_888, PIXEL_FORMAT_RGBA_8888, PIXEL_FORMAT_UNKNOWN)
    if fmt not in allowed:
        raise _format_error(fmt, allowed, "output_pixel_format is")
    head = _header(raw)
    try:
        return P.predict_dec_size(head, fmt)
    except ValueError as exc:
        raise Fail(100000, str(exc)) from None


@api("acldvppPngDecodeAsync")
def dvpp_png_decode_async(channel_desc, data, size, output_desc, stream):
    """Enqueue a PNG decode of ``size`` bytes of DVPP memory into ``output_desc``'s buffer.

    The output description needs data, size and format: PIXEL_FORMAT_RGB_888 (from every
    PNG PNGD takes: grey repeated, alpha dropped) or PIXEL_FORMAT_UNKNOWN (as the source:
    RGBA8888 from RGBA and grey + alpha PNGs, RGB888 from the others). Any other format,
    RGBA8888 included, is ACL_ERROR_FORMAT_NOT_MATCH (100027), as in CANN's acldvppPngDecodeAsync
    (ask for RGBA8888 with UNKNOWN). Strides left at 0 are PNGD's own (width aligned to 128,
    times 3 or 4 bytes; height aligned to 16); given strides must be at least those. When
    the task ends, the description's width, height, strides and format hold the decoded
    picture's. Without Pillow the call returns ACL_ERROR_FEATURE_UNSUPPORTED (200006).

    Differs from hardware: the PNG's contents are checked when the task starts (they may
    arrive by an earlier copy on the stream), so a broken, truncated, palette or too-large
    picture, small strides or a small buffer are reported as a fault (507000) at the next
    synchronisation, not by this call.
    """
    _channel(channel_desc)
    out = _get(output_desc, PicDesc, "output_desc")
    addr, n = as_int(data, "data"), as_int(size, "size")
    s = _stream(stream)
    src, soff = _span(addr, n, "data", dvpp=True)
    if out.data == 0:
        raise Fail(100000, "output_desc has no data: set it with acl.media.dvpp_set_pic_desc_data")
    fmt = out.format
    allowed = (PIXEL_FORMAT_RGB_888, PIXEL_FORMAT_UNKNOWN)
    if fmt not in allowed:
        raise _format_error(fmt, allowed, "output_desc is")
    if out.size <= 0:
        raise Fail(100000, "output_desc has no buffer size: set it with "
                           "acl.media.dvpp_set_pic_desc_size")
    dst, doff = _span(out.data, out.size, "the data of output_desc", dvpp=True)
    P.load_pil()

    def fill(w: int, h: int, ws_: int, hs_: int, fmt_: int) -> None:
        out.width, out.height = w, h
        out.width_stride, out.height_stride, out.format = ws_, hs_, fmt_

    _submit(png_decode_task(dvpp_device(rt(), s.device), src, soff, n, dst, doff, out.size,
                            fmt, (out.width_stride, out.height_stride), s,
                            "dvpp_png_decode_async", fill), s)
