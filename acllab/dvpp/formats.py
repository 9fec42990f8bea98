"""Pixel formats, stride rules and the pixel work of DVPP: JPEG decode/encode, resize, crop.

Every format's layout, size and conversions are in :mod:`acllab.dvpp.layouts`; this module
holds the format and JPEG-sampling constants, the JPEG bitstream (JPEGD's output formats per
sampling: :func:`jpegd_output`) and the YUV420SP helpers the lessons and checks use.

The common picture is YUV420SP (semi-planar 4:2:0): a Y plane of ``height_stride`` rows of
``width_stride`` bytes, then an interleaved chroma plane of ``height_stride / 2`` rows of the
same width: U, V pairs for NV12 (PIXEL_FORMAT_YUV_SEMIPLANAR_420 = 1), V, U pairs for NV21
(PIXEL_FORMAT_YVU_SEMIPLANAR_420 = 2). Buffer size = width_stride * height_stride * 3 / 2.

Alignment rules (pyACL/AscendCL docs, "JPEGD restrictions" and "VPC restrictions" of the
media data processing V1 chapter; CANN 8.0.0):

* JPEGD output (Ascend 310, Atlas training): width stride = width aligned up to 128, height
  stride = height aligned up to 16 (Atlas A2 chips: width stride aligned to 64); the picture's
  width and height come out 2-aligned; buffer >= width_stride * height_stride * 3 / 2.
* VPC input and output (YUV420SP): width stride a multiple of 16, height stride a multiple of
  2, width stride 32 to 16384, height stride 6 to 16384; pictures 10 x 6 to 4096 x 4096.
* Crop areas (acldvppCreateRoiConfig): left and top offsets even, right and bottom offsets
  odd (so the area's width and height are even), at least 10 x 6. A paste area's left offset
  must also be a multiple of 16.
* JPEGE input: width and height even, width stride a multiple of 16, height stride equal to
  the height or to the height aligned up to 16.

Everything here is pure numpy (and Pillow for the JPEG bitstream); no timing.
"""

from __future__ import annotations

import io

import numpy as np

from .layouts import LAYOUTS, rgb_to_ycbcr, subsample
from .layouts import resize as _resize

__all__ = [
    "PIXEL_FORMAT_YUV_400", "PIXEL_FORMAT_YUV_SEMIPLANAR_420",
    "PIXEL_FORMAT_YVU_SEMIPLANAR_420", "PIXEL_FORMAT_YUV_SEMIPLANAR_422",
    "PIXEL_FORMAT_YVU_SEMIPLANAR_422", "PIXEL_FORMAT_YUV_SEMIPLANAR_444",
    "PIXEL_FORMAT_YVU_SEMIPLANAR_444", "PIXEL_FORMAT_YUYV_PACKED_422",
    "PIXEL_FORMAT_UYVY_PACKED_422", "PIXEL_FORMAT_YVYU_PACKED_422", "PIXEL_FORMAT_VYUY_PACKED_422",
    "PIXEL_FORMAT_YUV_PACKED_444", "PIXEL_FORMAT_RGB_888", "PIXEL_FORMAT_BGR_888",
    "PIXEL_FORMAT_ARGB_8888", "PIXEL_FORMAT_ABGR_8888", "PIXEL_FORMAT_RGBA_8888",
    "PIXEL_FORMAT_BGRA_8888", "PIXEL_FORMAT_YUV_SEMIPLANAR_440", "PIXEL_FORMAT_YVU_SEMIPLANAR_440",
    "PIXEL_FORMAT_UNKNOWN", "YUV420SP_FORMATS", "FORMAT_NAMES",
    "ACL_JPEG_CSS_444", "ACL_JPEG_CSS_422", "ACL_JPEG_CSS_420", "ACL_JPEG_CSS_GRAY",
    "ACL_JPEG_CSS_440", "ACL_JPEG_CSS_411", "ACL_JPEG_CSS_UNKNOWN", "JPEGD_SOURCE_FORMATS",
    "align_up", "yuv420sp_size", "jpegd_strides", "JpegInfo", "jpeg_info", "decode_jpeg",
    "decode_ycbcr", "jpegd_output", "jpegd_planes", "jpegd_size", "JPEG_SAMPLING_NAMES",
    "encode_jpeg", "split_planes", "join_planes", "resize_planes", "crop_planes",
    "rgb_to_ycbcr", "predict_enc_size",
]

# acldvppPixelFormat (acl/ops/acl_dvpp.h, CANN 8.0.0): the values DVPP V1 pictures use
PIXEL_FORMAT_YUV_400 = 0
PIXEL_FORMAT_YUV_SEMIPLANAR_420 = 1     # NV12: Y plane, then U V U V ...
PIXEL_FORMAT_YVU_SEMIPLANAR_420 = 2     # NV21: Y plane, then V U V U ...
PIXEL_FORMAT_YUV_SEMIPLANAR_422 = 3
PIXEL_FORMAT_YVU_SEMIPLANAR_422 = 4
PIXEL_FORMAT_YUV_SEMIPLANAR_444 = 5
PIXEL_FORMAT_YVU_SEMIPLANAR_444 = 6
PIXEL_FORMAT_YUYV_PACKED_422 = 7
PIXEL_FORMAT_UYVY_PACKED_422 = 8
PIXEL_FORMAT_YVYU_PACKED_422 = 9
PIXEL_FORMAT_VYUY_PACKED_422 = 10
PIXEL_FORMAT_YUV_PACKED_444 = 11
PIXEL_FORMAT_RGB_888 = 12
PIXEL_FORMAT_BGR_888 = 13
PIXEL_FORMAT_ARGB_8888 = 14
PIXEL_FORMAT_ABGR_8888 = 15
PIXEL_FORMAT_RGBA_8888 = 16
PIXEL_FORMAT_BGRA_8888 = 17
PIXEL_FORMAT_YUV_SEMIPLANAR_440 = 1000
PIXEL_FORMAT_YVU_SEMIPLANAR_440 = 1001
PIXEL_FORMAT_UNKNOWN = 10000
YUV420SP_FORMATS = (PIXEL_FORMAT_YUV_SEMIPLANAR_420, PIXEL_FORMAT_YVU_SEMIPLANAR_420)

# acldvppJpegFormat (acl/ops/acl_dvpp.h): a JPEG's chroma sampling, as
# acldvppJpegGetImageInfoV2 reports it
ACL_JPEG_CSS_444, ACL_JPEG_CSS_422, ACL_JPEG_CSS_420 = 0, 1, 2
ACL_JPEG_CSS_GRAY, ACL_JPEG_CSS_440, ACL_JPEG_CSS_411 = 3, 4, 5
ACL_JPEG_CSS_UNKNOWN = 1000
JPEG_SAMPLING_NAMES = {0: "4:4:4", 1: "4:2:2", 2: "4:2:0", 3: "greyscale", 4: "4:4:0",
                       5: "4:1:1", 1000: "unknown-sampling"}
#: the source formats JPEGD also writes besides YUV420SP ("JPEGD functions and restrictions")
JPEGD_SOURCE_FORMATS = {ACL_JPEG_CSS_422: (PIXEL_FORMAT_YUV_SEMIPLANAR_422,
                                           PIXEL_FORMAT_YVU_SEMIPLANAR_422),
                        ACL_JPEG_CSS_444: (PIXEL_FORMAT_YUV_SEMIPLANAR_444,
                                           PIXEL_FORMAT_YVU_SEMIPLANAR_444)}

#: Every acldvppPixelFormat value a picture description takes, with a readable name. The
#: enum's other picture formats (10-bit, planar, 16-bit RGB, Bayer: 18 to 54) are named but
#: no engine here handles them; its tensor formats (70 to 84: planar BGR, HSV, LAB, S8C1 ...)
#: and values outside the enum are refused by dvpp_set_pic_desc_format.
FORMAT_NAMES = {**{f: lay.name for f, lay in LAYOUTS.items()},
                **{k: f"acldvppPixelFormat {k}" for k in (*range(18, 41), *range(50, 55))},
                PIXEL_FORMAT_YUV_SEMIPLANAR_440: "YUV440SP",
                PIXEL_FORMAT_YVU_SEMIPLANAR_440: "YVU440SP", 1002: "FLOAT32",
                PIXEL_FORMAT_UNKNOWN: "UNKNOWN"}

def align_up(value: int, align: int) -> int:
    """``value`` rounded up to a multiple of ``align``."""
    return -(-value // align) * align


def yuv420sp_size(width_stride: int, height_stride: int) -> int:
    """Bytes of a YUV420SP picture: width_stride * height_stride * 3 / 2."""
    return width_stride * height_stride * 3 // 2


def jpegd_strides(width: int, height: int, width_align: int = 128) -> tuple[int, int]:
    """(width_stride, height_stride) of a JPEGD output picture: 128 (or 64) and 16 aligned."""
    return align_up(align_up(width, 2), width_align), align_up(align_up(height, 2), 16)


class JpegInfo:
    """What the JPEG header says: size, components, and whether JPEGD can decode it."""

    __slots__ = ("width", "height", "components", "progressive", "mode", "sampling")

    def __init__(self, width: int, height: int, components: int, progressive: bool, mode: str,
                 sampling: int = 2):
        self.width, self.height, self.components = width, height, components
        self.progressive, self.mode, self.sampling = progressive, mode, sampling

    def __repr__(self) -> str:
        return (f"<JpegInfo {self.width}x{self.height}, {self.components} components, "
                f"{JPEG_SAMPLING_NAMES[self.sampling]}"
                f"{', progressive' if self.progressive else ''}>")


def _open(data: bytes):
    from PIL import Image

    img = Image.open(io.BytesIO(data))
    if img.format != "JPEG":
        raise ValueError(f"the data is a {img.format} image, not a JPEG")
    return img


def jpeg_info(data: bytes) -> JpegInfo:
    """Parse the header; raise ValueError for data that is not a JPEG (or is truncated)."""
    if len(data) < 4 or data[:2] != b"\xff\xd8":
        raise ValueError("the data does not start with a JPEG SOI marker (FF D8)")
    try:
        img = _open(data)
    except ValueError:
        raise
    except Exception as exc:   # noqa: BLE001 (Pillow's errors for a broken header)
        raise ValueError(f"the JPEG header cannot be parsed: {exc}") from None
    components = {"L": 1, "RGB": 3, "YCbCr": 3, "CMYK": 4}.get(img.mode, len(img.getbands()))
    progressive = bool(img.info.get("progressive") or img.info.get("progression"))
    return JpegInfo(img.width, img.height, components, progressive, img.mode,
                    _sampling(getattr(img, "layer", []), components))


def _sampling(layer: list, components: int) -> int:
    """acldvppJpegFormat of the frame header's sampling factors (id, h, v, table) per
    component: Y's factors over Cb's, as CANN's acldvppJpegGetImageInfoV2 compares them."""
    if components == 1:
        return ACL_JPEG_CSS_GRAY
    if components != 3 or len(layer) != 3 or layer[1][1:3] != layer[2][1:3]:
        return ACL_JPEG_CSS_UNKNOWN
    (yh, yv), (ch, cv) = layer[0][1:3], layer[1][1:3]
    if yh % ch or yv % cv:
        return ACL_JPEG_CSS_UNKNOWN
    return {(1, 1): ACL_JPEG_CSS_444, (2, 1): ACL_JPEG_CSS_422, (2, 2): ACL_JPEG_CSS_420,
            (1, 2): ACL_JPEG_CSS_440, (4, 1): ACL_JPEG_CSS_411}.get(
        (yh // ch, yv // cv), ACL_JPEG_CSS_UNKNOWN)


def decode_ycbcr(data: bytes) -> np.ndarray:
    """Decode to full-resolution YCbCr (h, w, 3) uint8 (greyscale: Cb = Cr = 128).

    libjpeg (through Pillow) upsamples the chroma of subsampled JPEGs; :func:`jpegd_planes`
    averages it back to the output's sampling. Raises ValueError when the bitstream is broken.
    """
    try:
        img = _open(data)
        if img.mode in ("RGB", "YCbCr"):
            img.draft("YCbCr", img.size)
        img.load()
    except ValueError:
        raise
    except Exception as exc:   # noqa: BLE001 (truncated or corrupt entropy data)
        raise ValueError(f"the JPEG bitstream cannot be decoded: {exc}") from None
    if img.mode == "L":
        y = np.asarray(img, dtype=np.uint8)
        return np.dstack([y, np.full_like(y, 128), np.full_like(y, 128)])
    if img.mode != "YCbCr":
        img = img.convert("RGB").convert("YCbCr")
    return np.asarray(img, dtype=np.uint8)


def jpegd_output(info: JpegInfo, fmt: int) -> tuple[int, int, int]:
    """(format, width, height) of the picture JPEGD writes for output format ``fmt``.

    CANN 8.0.0, "JPEGD functions and restrictions": YUV420SP (NV12 or NV21) from every
    sampling, greyscale included (chroma 0x80, "fake 420"); a 4:2:2 JPEG also to YUV422SP and
    a 4:4:4 JPEG to YUV444SP (its source format); PIXEL_FORMAT_UNKNOWN gives the source format,
    V before U. YUV420SP output is 2-aligned: an odd width or height of a 4:4:4 JPEG is rounded
    down ("JPEGD rounds the odd width/height down to a multiple of 2", acldvppJpegDecodeAsync);
    a 4:2:0 JPEG's is rounded up (its chroma covers the padded area); a 4:2:2 JPEG's odd
    height is rounded down as a 4:4:4's (by analogy: the page names only 4:4:4).
    Raises ValueError for a format JPEGD does not write from this JPEG.

    Differs from hardware: 4:4:0 JPEGs decode to YUV420SP only (also for UNKNOWN, which on
    hardware gives YVU440SP), and JPEGD's YUV400 output is not modelled.
    """
    css = info.sampling
    if fmt == PIXEL_FORMAT_UNKNOWN:
        fmt = {ACL_JPEG_CSS_422: PIXEL_FORMAT_YVU_SEMIPLANAR_422,
               ACL_JPEG_CSS_444: PIXEL_FORMAT_YVU_SEMIPLANAR_444}.get(
            css, PIXEL_FORMAT_YVU_SEMIPLANAR_420)
    allowed = {*YUV420SP_FORMATS, *JPEGD_SOURCE_FORMATS.get(css, ())}
    if fmt not in allowed:
        names = ", ".join(f"{FORMAT_NAMES[f]} ({f})" for f in sorted(allowed))
        raise ValueError(f"JPEGD decodes a {JPEG_SAMPLING_NAMES[css]} JPEG to {names}, not to "
                         f"{FORMAT_NAMES.get(fmt, fmt)} ({fmt})")
    w, h = info.width, info.height
    if fmt in YUV420SP_FORMATS:
        sx, sy = {ACL_JPEG_CSS_444: (1, 1), ACL_JPEG_CSS_422: (2, 1),
                  ACL_JPEG_CSS_440: (1, 2)}.get(css, (2, 2))
        w = align_up(w, 2) if sx == 2 else w // 2 * 2
        h = align_up(h, 2) if sy == 2 else h // 2 * 2
    elif fmt in (PIXEL_FORMAT_YUV_SEMIPLANAR_422, PIXEL_FORMAT_YVU_SEMIPLANAR_422):
        w = align_up(w, 2)
    return fmt, w, h


def jpegd_planes(data: bytes, fmt: int, width: int, height: int):
    """(Y, chroma) of the picture JPEGD writes: the JPEG decoded, cut or edge-padded to
    ``width`` x ``height`` and its chroma averaged to ``fmt``'s sampling.

    Differs from hardware: JPEGD hands out the JPEG's own chroma samples; libjpeg's upsampling
    averaged back here may differ from them by a level or two.
    """
    ycc = decode_ycbcr(data)
    h0, w0 = ycc.shape[:2]
    ycc = np.pad(ycc[:height, :width], ((0, max(0, height - h0)), (0, max(0, width - w0)),
                                        (0, 0)), mode="edge")
    sx, sy = LAYOUTS[fmt].sub
    return np.ascontiguousarray(ycc[:, :, 0]), subsample(ycc[:, :, 1:], sx, sy)


def jpegd_size(fmt: int, width_stride: int, height_stride: int) -> int:
    """JPEGD's output buffer: ws * hs * 3/2 (YUV420SP), * 2 (YUV422SP), * 3 (YUV444SP)."""
    return LAYOUTS[fmt].size(width_stride, height_stride)


def decode_jpeg(data: bytes) -> tuple[np.ndarray, np.ndarray]:
    """Decode to (Y plane, chroma (h/2, w/2, 2) as Cb, Cr), 2-aligned, full range.

    An odd width or height is padded to even by repeating the last column or row (JPEGD's
    YUV420SP output is 2-aligned).

    Pillow (libjpeg) decodes to YCbCr without converting to RGB; chroma is upsampled by
    libjpeg and averaged back over 2 x 2 blocks here. A greyscale JPEG gets chroma 128, as
    JPEGD fills UV with 0x80. Raises ValueError when the bitstream is broken.

    Differs from hardware: JPEGD hands out the JPEG's own 4:2:0 chroma samples; the
    upsample-then-average round trip here may differ by a level or two.
    """
    ycc = decode_ycbcr(data)
    return _even(ycc[:, :, 0]), _subsample(ycc[:, :, 1:])


def _even(plane: np.ndarray) -> np.ndarray:
    h, w = plane.shape[:2]
    return np.pad(plane, ((0, h % 2), (0, w % 2)), mode="edge")


def _subsample(chroma: np.ndarray) -> np.ndarray:
    """(h, w, 2) -> (ceil(h/2), ceil(w/2), 2) by 2 x 2 averaging (edges replicated)."""
    h, w = chroma.shape[:2]
    c = np.pad(chroma.astype(np.uint16), ((0, h % 2), (0, w % 2), (0, 0)), mode="edge")
    s = c[0::2, 0::2] + c[1::2, 0::2] + c[0::2, 1::2] + c[1::2, 1::2]
    return ((s + 2) // 4).astype(np.uint8)


def split_planes(buf: np.ndarray, width: int, height: int, width_stride: int,
                 height_stride: int, fmt: int) -> tuple[np.ndarray, np.ndarray]:
    """Views of a YUV420SP buffer: (Y (h, w), chroma (h/2, w/2, 2) in Cb, Cr order).

    Odd widths and heights cover the 2-aligned area. The chroma view of an NV21 picture is a
    reordered copy (V, U swapped back), so write with :func:`join_planes`.
    """
    w2, h2 = align_up(width, 2), align_up(height, 2)
    y = buf[:width_stride * height_stride].reshape(height_stride, width_stride)[:h2, :w2]
    uv = buf[width_stride * height_stride:yuv420sp_size(width_stride, height_stride)]
    uv = uv.reshape(height_stride // 2, width_stride // 2, 2)[:h2 // 2, :w2 // 2]
    if fmt == PIXEL_FORMAT_YVU_SEMIPLANAR_420:
        uv = uv[:, :, ::-1]
    return y, uv


def join_planes(buf: np.ndarray, y: np.ndarray, uv: np.ndarray, top: int, left: int,
                width_stride: int, height_stride: int, fmt: int) -> None:
    """Write Y (h, w) and chroma (h/2, w/2, 2 as Cb, Cr) into ``buf`` at an even (top, left)."""
    h, w = y.shape
    ys = buf[:width_stride * height_stride].reshape(height_stride, width_stride)
    ys[top:top + h, left:left + w] = y
    cs = buf[width_stride * height_stride:yuv420sp_size(width_stride, height_stride)]
    cs = cs.reshape(height_stride // 2, width_stride // 2, 2)
    if fmt == PIXEL_FORMAT_YVU_SEMIPLANAR_420:
        uv = uv[:, :, ::-1]
    cs[top // 2:top // 2 + uv.shape[0], left // 2:left // 2 + uv.shape[1]] = uv


def resize_planes(y: np.ndarray, uv: np.ndarray, oh: int, ow: int) -> tuple[np.ndarray, ...]:
    """Resize a picture's planes to ``ow`` x ``oh`` (even) pixels, bilinearly.

    Differs from hardware: the Ascend 310 VPC uses its own fixed-point filter (the docs call
    the default "Huawei's own" algorithm, bilinear only on some newer chips), so a real VPC's
    pixels may differ from these by a few levels, most at sharp edges.
    """
    return _resize(y, oh, ow), _resize(uv, oh // 2, ow // 2)


def crop_planes(y: np.ndarray, uv: np.ndarray, left: int, right: int, top: int,
                bottom: int) -> tuple[np.ndarray, np.ndarray]:
    """The area [left, right] x [top, bottom] (inclusive, even-odd offsets), exactly."""
    return (y[top:bottom + 1, left:right + 1],
            uv[top // 2:(bottom + 1) // 2, left // 2:(right + 1) // 2])


def encode_jpeg(y: np.ndarray, uv: np.ndarray, quality: int) -> bytes:
    """A baseline 4:2:0 JPEG of the planes (Pillow), which any viewer opens."""
    from PIL import Image

    h, w = y.shape
    chroma = np.repeat(np.repeat(uv, 2, axis=0), 2, axis=1)[:h, :w]
    ycc = np.dstack([y, chroma[:, :, 0], chroma[:, :, 1]]).astype(np.uint8)
    out = io.BytesIO()
    Image.fromarray(ycc, "YCbCr").save(out, format="JPEG", quality=max(1, min(quality, 100)),
                                       subsampling=2)
    return out.getvalue()


def predict_enc_size(width_stride: int, height_stride: int) -> int:
    """An upper bound for the encoded size: the raw picture plus 8 KiB of headers.

    (uncertain) CANN does not publish acldvppJpegPredictEncSize's formula; like it, this is
    an estimate that a real encoding stays under for camera-like pictures.
    """
    return align_up(yuv420sp_size(width_stride, height_stride) + 8 * 1024, 128)
