"""Pixel formats, stride rules and the pixel work of DVPP: JPEG decode/encode, resize, crop.

Pictures are YUV420SP (semi-planar 4:2:0): a Y plane of ``height_stride`` rows of
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

__all__ = [
    "PIXEL_FORMAT_YUV_400", "PIXEL_FORMAT_YUV_SEMIPLANAR_420",
    "PIXEL_FORMAT_YVU_SEMIPLANAR_420", "PIXEL_FORMAT_UNKNOWN", "YUV420SP_FORMATS", "FORMAT_NAMES",
    "align_up", "yuv420sp_size", "jpegd_strides", "JpegInfo", "jpeg_info", "decode_jpeg",
    "encode_jpeg", "split_planes", "join_planes", "resize_planes", "crop_planes",
    "rgb_to_ycbcr", "predict_enc_size",
]

# acldvppPixelFormat (acl/ops/acl_dvpp.h)
PIXEL_FORMAT_YUV_400 = 0
PIXEL_FORMAT_YUV_SEMIPLANAR_420 = 1     # NV12: Y plane, then U V U V ...
PIXEL_FORMAT_YVU_SEMIPLANAR_420 = 2     # NV21: Y plane, then V U V U ...
PIXEL_FORMAT_UNKNOWN = 10000
YUV420SP_FORMATS = (PIXEL_FORMAT_YUV_SEMIPLANAR_420, PIXEL_FORMAT_YVU_SEMIPLANAR_420)
FORMAT_NAMES = {PIXEL_FORMAT_YUV_400: "YUV400", PIXEL_FORMAT_YUV_SEMIPLANAR_420: "YUV420SP NV12",
                PIXEL_FORMAT_YVU_SEMIPLANAR_420: "YUV420SP NV21", PIXEL_FORMAT_UNKNOWN: "UNKNOWN",
                **{k: f"acldvppPixelFormat {k}" for k in range(3, 13)}}


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

    __slots__ = ("width", "height", "components", "progressive", "mode")

    def __init__(self, width: int, height: int, components: int, progressive: bool, mode: str):
        self.width, self.height, self.components = width, height, components
        self.progressive, self.mode = progressive, mode

    def __repr__(self) -> str:
        return (f"<JpegInfo {self.width}x{self.height}, {self.components} components"
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
    return JpegInfo(img.width, img.height, components, progressive, img.mode)


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
        y = _even(np.asarray(img, dtype=np.uint8))
        h, w = y.shape
        return y, np.full((h // 2, w // 2, 2), 128, dtype=np.uint8)
    if img.mode != "YCbCr":
        img = img.convert("RGB").convert("YCbCr")
    ycc = np.asarray(img, dtype=np.uint8)
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


def rgb_to_ycbcr(rgb: np.ndarray) -> np.ndarray:
    """Full-range BT.601 (JFIF) RGB -> YCbCr, the conversion JPEG files use."""
    f = rgb.astype(np.float64)
    y = 0.299 * f[..., 0] + 0.587 * f[..., 1] + 0.114 * f[..., 2]
    cb = 128 - 0.168736 * f[..., 0] - 0.331264 * f[..., 1] + 0.5 * f[..., 2]
    cr = 128 + 0.5 * f[..., 0] - 0.418688 * f[..., 1] - 0.081312 * f[..., 2]
    return np.clip(np.rint(np.stack([y, cb, cr], axis=-1)), 0, 255).astype(np.uint8)


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


def _resize(plane: np.ndarray, oh: int, ow: int) -> np.ndarray:
    """Bilinear resize with half-pixel centres (as OpenCV's INTER_LINEAR), edges clamped."""
    h, w = plane.shape[:2]
    if (h, w) == (oh, ow):
        return plane.copy()
    f = plane.astype(np.float64)

    def axis(n_in: int, n_out: int):
        pos = np.clip((np.arange(n_out) + 0.5) * n_in / n_out - 0.5, 0, n_in - 1)
        lo = np.floor(pos).astype(np.intp)
        hi = np.minimum(lo + 1, n_in - 1)
        return lo, hi, pos - lo

    y0, y1, wy = axis(h, oh)
    x0, x1, wx = axis(w, ow)
    shape = (-1, 1) + (1,) * (plane.ndim - 2)
    wy, wx_ = wy.reshape(shape), wx.reshape((1, -1) + (1,) * (plane.ndim - 2))
    top = f[y0][:, x0] * (1 - wx_) + f[y0][:, x1] * wx_
    bottom = f[y1][:, x0] * (1 - wx_) + f[y1][:, x1] * wx_
    return np.clip(np.rint(top * (1 - wy) + bottom * wy), 0, 255).astype(np.uint8)


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
