"""``acl.media`` argument checks shared by JPEGD, VPC and JPEGE: buffers, pictures, areas."""

from __future__ import annotations

from ...dvpp import formats as F
from ...dvpp import layouts as L
from ...dvpp.formats import PIXEL_FORMAT_UNKNOWN
from ...dvpp.tasks import dvpp_device
from ...errors import Fail
from .._api import as_int, rt
from ._desc import FORMAT_NAMES, PicDesc, RoiConfig


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
        if desc.format in FORMAT_NAMES and desc.format != PIXEL_FORMAT_UNKNOWN:
            raise Fail(200006, f"{what} is {FORMAT_NAMES[desc.format]}: acllab's JPEGE encodes "
                               "YUV420SP NV12 (1) and NV21 (2) only")
        raise Fail(100000, f"{what} has format {desc.format}; use "
                           "PIXEL_FORMAT_YUV_SEMIPLANAR_420 (1) or YVU_SEMIPLANAR_420 (2)")


def _names(formats) -> str:
    return ", ".join(f"{FORMAT_NAMES[f]} ({f})" for f in formats)


#: What acldvppVpcResizeAsync reads beyond 4096: a width or height up to 8192 in YUV420SP
#: (NV12 or NV21), the formats every product of CANN's reference lists for it (CANN 6.0.1
#: and 7.0.0 AscendCL reference, acldvppVpcResizeAsync, Atlas 200/300/500 inference and
#: Atlas training products). Differs from hardware: the Atlas inference series (310P) reads
#: other YUV formats at that size too; acllab takes these two on every profile.
LARGE_RESIZE_SIDE, LARGE_RESIZE_FORMATS = 8192, (1, 2)


def _vpc_picture(desc: PicDesc, what: str, output: bool = False,
                 large: bool = False) -> None:
    """VPC's rules for a picture (acllab.dvpp.layouts names the formats, sizes and sources).

    Both profiles: width stride a multiple of 16 (in bytes: width * 2 for packed YUV422,
    * 3 for RGB888, * 4 for ARGB8888, aligned to 16), height stride a multiple of 2, width
    stride 32 to 16384 and height stride 6 to 16384 (acl_dvpp.h's acldvppSetPicDescWidthStride
    and HeightStride; "VPC functions and restrictions"), pictures 10 x 6 to 4096 x 4096 (a
    resize's input up to 8192 x 8192 in YUV420SP when ``large``).
    A format this chip's VPC does not read or write returns ACL_ERROR_FEATURE_UNSUPPORTED.

    Differs from hardware: Atlas A2 chips accept other width strides (from 10, no alignment);
    acllab asks the Ascend 310's 16-alignment of both.
    """
    r = rt()
    fmt = desc.format
    allowed = L.vpc_output_formats(r.profile) if output else L.VPC_INPUT_FORMATS
    lay = L.layout(fmt)
    if lay is None or fmt not in allowed:
        if fmt in FORMAT_NAMES and fmt != PIXEL_FORMAT_UNKNOWN:
            role = "writes" if output else "reads"
            raise Fail(200006, f"{what} is {FORMAT_NAMES[fmt]} ({fmt}): the {r.profile.name} "
                               f"VPC {role} {_names(allowed)}")
        raise Fail(100000, f"{what} has format {fmt}, which is no picture format VPC handles "
                           f"(use one of {_names(allowed)})")
    w, h, ws, hs = desc.width, desc.height, desc.width_stride, desc.height_stride
    big = large and fmt in LARGE_RESIZE_FORMATS
    top = LARGE_RESIZE_SIDE if big else 4096
    if not (10 <= w <= top and 6 <= h <= top):
        if large and 10 <= w <= LARGE_RESIZE_SIDE and 6 <= h <= LARGE_RESIZE_SIDE:
            raise Fail(100000, f"{what} is {w} x {h} {FORMAT_NAMES[fmt]}; a resize reads "
                               "pictures wider or taller than 4096 (up to 8192 x 8192) only "
                               "in YUV420SP: PIXEL_FORMAT_YUV_SEMIPLANAR_420 (1) or "
                               "YVU_SEMIPLANAR_420 (2)")
        if big:
            raise Fail(100000, f"{what} is {w} x {h}; a resize reads 10 x 6 to 8192 x 8192 "
                               "pictures")
        raise Fail(100000, f"{what} is {w} x {h}; VPC takes 10 x 6 to 4096 x 4096 pictures")
    if ws % 16 or hs % 2:
        raise Fail(100000, f"{what} has strides {ws} x {hs}; VPC needs the width stride "
                           "aligned to 16 and the height stride to 2")
    need_ws, need_hs = lay.min_width_stride(w), lay.covered(w, h)[1]
    if ws < need_ws or hs < need_hs or not (32 <= ws <= 16384 and 6 <= hs <= 16384):
        unit = "" if lay.bpp == 1 else f" (bytes: {lay.bpp} a pixel)"
        raise Fail(100000, f"{what} has strides {ws} x {hs} for a {w} x {h} {lay.name} "
                           f"picture; strides must cover it{unit}, at least {need_ws} x "
                           f"{need_hs}, width stride 32 to 16384, height stride 6 to 16384")
    need = lay.size(ws, hs)
    if desc.size < need:
        raise Fail(100000, f"{what} says its buffer holds {desc.size} B, but {lay.name} with "
                           f"strides {ws} x {hs} needs {need} B")
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
