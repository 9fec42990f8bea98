"""PNG decoding for PNGD: the header, the output formats, strides and sizes, and the pixels.

What CANN does (AscendCL's DVPP V1 image processor of the Ascend 310, ``image_processor_v100``,
and the "PNGD functions and restrictions" pages of the CANN 8.0.0 and 8.5.0 AscendCL docs):

* the header: a PNG of more than 29 bytes starting with the 8-byte signature; width and height
  are IHDR's (bytes 16 to 23, big-endian), the bit depth byte 24, the colour type byte 25;
  ``acldvppPngGetImageInfo``'s components are 1 (greyscale, colour type 0), 2 (grey + alpha,
  4), 3 (RGB, 2) or 4 (RGBA, 6); another colour type (3, palette) is
  ACL_ERROR_FORMAT_NOT_MATCH. A short buffer or a wrong signature is ACL_ERROR_INVALID_PARAM.
* output formats: PIXEL_FORMAT_RGB_888 from every source (grey repeated, alpha dropped), or
  PIXEL_FORMAT_UNKNOWN, "as the source": RGB888 from RGB and greyscale, RGBA8888 from RGBA and
  grey + alpha. acldvppPngDecodeAsync takes only those two (anything else, RGBA8888 included,
  is ACL_ERROR_FORMAT_NOT_MATCH); acldvppPngPredictDecSize also takes RGBA8888.
* pictures 32 x 32 to 4096 x 4096; the output keeps the picture's size (no alignment of width
  or height). Width stride = the width aligned up to 128, times 3 (RGB888) or 4 (RGBA8888),
  in bytes; height stride = the height aligned up to 16; the buffer holds width stride *
  height stride bytes.
* acldvppPngPredictDecSize: align the width to 128 and the height to 16, then
  ``(width * bit_depth * channels + 7) >> 3`` bytes a row (3 channels for RGB888, 4 for
  RGBA8888 and for UNKNOWN, "the largest"), times the height; the result must be at most
  4096 * 4096 * 4 * 2 bytes.

Differs from hardware (uncertain): the prediction scales with the bit depth, so a 16-bit PNG
gets twice the 8-bit size and a 1, 2 or 4-bit greyscale one less; PNGD's output formats are
8 bits a sample ("RGBA8888 8bit"), and acllab writes a 16-bit PNG's high bytes into them and
expands low-depth greyscale to 0..255, so a low-depth greyscale PNG needs more than its
prediction (the decode reports the buffer as too small). Palette PNGs, which the docs do not
list as an input, are refused when the task starts. Interlaced (Adam7) PNGs decode.

Pillow reads the bitstream; it is imported only when a PNG is decoded (:func:`load_pil`), so
the runtime core imports with numpy alone and the header calls work without it.
"""

from __future__ import annotations

import io
import struct

import numpy as np

from ..errors import Fail
from .formats import PIXEL_FORMAT_RGB_888, PIXEL_FORMAT_RGBA_8888, PIXEL_FORMAT_UNKNOWN, align_up

__all__ = ["PngHeader", "png_header", "COLOUR_TYPES", "COMPONENTS", "pngd_output",
           "pngd_strides", "pngd_size", "predict_dec_size", "pngd_pixels", "load_pil",
           "PNGD_MIN", "PNGD_MAX", "PNGD_MAX_OUTPUT", "SIGNATURE"]

SIGNATURE = b"\x89PNG\r\n\x1a\n"
PNGD_MIN, PNGD_MAX = 32, 4096                # pictures 32 x 32 to 4096 x 4096
PNGD_MAX_OUTPUT = 4096 * 4096 * 4 * 2        # acldvppPngPredictDecSize's upper bound
#: the PNG colour types (PNG specification, IHDR)
COLOUR_TYPES = {0: "greyscale", 2: "RGB", 3: "palette", 4: "greyscale with alpha", 6: "RGBA"}
#: acldvppPngGetImageInfo's components for each colour type PNGD takes
COMPONENTS = {0: 1, 4: 2, 2: 3, 6: 4}
_BPP = {PIXEL_FORMAT_RGB_888: 3, PIXEL_FORMAT_RGBA_8888: 4}


class PngHeader:
    """What IHDR says: size, bit depth, colour type, interlace."""

    __slots__ = ("width", "height", "bit_depth", "colour_type", "interlace")

    def __init__(self, width: int, height: int, bit_depth: int, colour_type: int,
                 interlace: int):
        self.width, self.height, self.bit_depth = width, height, bit_depth
        self.colour_type, self.interlace = colour_type, interlace

    @property
    def components(self) -> int | None:
        """acldvppPngGetImageInfo's components, None for a colour type PNGD does not take."""
        return COMPONENTS.get(self.colour_type)

    @property
    def kind(self) -> str:
        return COLOUR_TYPES.get(self.colour_type, f"colour type {self.colour_type}")

    def __repr__(self) -> str:
        return (f"<PngHeader {self.width}x{self.height}, {self.bit_depth}-bit {self.kind}"
                f"{', interlaced' if self.interlace else ''}>")


def png_header(raw: bytes) -> PngHeader:
    """The header of a PNG, as CANN reads it; ValueError for a buffer of 29 bytes or fewer or
    one without the PNG signature (ACL_ERROR_INVALID_PARAM in the calls)."""
    if len(raw) <= 29:
        raise ValueError(f"the data is {len(raw)} B; a PNG has more than 29")
    if raw[:8] != SIGNATURE:
        raise ValueError("the data does not start with the PNG signature "
                         "(89 50 4E 47 0D 0A 1A 0A)")
    width, height = struct.unpack(">II", raw[16:24])
    return PngHeader(width, height, raw[24], raw[25], raw[28])


def pngd_output(header: PngHeader, fmt: int) -> int:
    """The format PNGD writes for output format ``fmt`` (RGB888 or UNKNOWN): UNKNOWN is
    RGBA8888 for a source with alpha, RGB888 otherwise."""
    if fmt == PIXEL_FORMAT_UNKNOWN:
        return PIXEL_FORMAT_RGBA_8888 if header.colour_type in (4, 6) else PIXEL_FORMAT_RGB_888
    return fmt


def pngd_strides(width: int, height: int, fmt: int) -> tuple[int, int]:
    """(width stride in bytes, height stride) of a PNGD output picture."""
    return align_up(width, 128) * _BPP[fmt], align_up(height, 16)


def pngd_size(width_stride: int, height_stride: int) -> int:
    """PNGD's output buffer: width stride * height stride bytes."""
    return width_stride * height_stride


def predict_dec_size(header: PngHeader, fmt: int) -> int:
    """acldvppPngPredictDecSize's figure for ``fmt`` (RGB888, RGBA8888 or UNKNOWN): see the
    module docstring. ValueError for a picture outside 32 x 32 to 4096 x 4096 or a result
    above 4096 * 4096 * 4 * 2."""
    w, h = header.width, header.height
    for what, v in (("width", w), ("height", h)):
        if not PNGD_MIN <= v <= PNGD_MAX:
            raise ValueError(f"the PNG's {what} is {v}; PNGD decodes {PNGD_MIN} to {PNGD_MAX}")
    channels = 3 if fmt == PIXEL_FORMAT_RGB_888 else 4
    size = ((align_up(w, 128) * header.bit_depth * channels + 7) >> 3) * align_up(h, 16)
    if not 0 < size <= PNGD_MAX_OUTPUT:
        raise ValueError(f"the output would need {size} B; PNGD writes at most "
                         f"{PNGD_MAX_OUTPUT} B (4096 * 4096 * 4 * 2)")
    return size


def load_pil():
    """Pillow's Image module, or Fail(200006) saying how to install it."""
    try:
        from PIL import Image
    except ImportError:
        raise Fail(200006, "acllab's PNGD decodes with Pillow, which is not installed: "
                           "pip install Pillow (acl.media's PNG header calls work without it)"
                   ) from None
    return Image


def pngd_pixels(raw: bytes, header: PngHeader, fmt: int) -> np.ndarray:
    """The picture PNGD writes in ``fmt`` (RGB888 or RGBA8888): (height, width, 3 or 4) uint8.

    Greyscale is repeated into R, G and B; RGB888 drops the alpha; 16-bit samples keep their
    high byte. Raises ValueError when Pillow cannot decode the stream (truncated, a bad CRC or
    zlib stream) or it disagrees with the header.
    """
    Image = load_pil()
    try:
        img = Image.open(io.BytesIO(raw), formats=["PNG"])
        img.load()
    except Exception as exc:   # noqa: BLE001 (Pillow's errors for a broken stream)
        raise ValueError(f"the PNG cannot be decoded: {exc}") from None
    if img.size != (header.width, header.height):
        raise ValueError(f"the PNG decodes to {img.size[0]} x {img.size[1]}, but its header "
                         f"says {header.width} x {header.height}")
    ct = header.colour_type
    if ct == 0:
        if img.mode.startswith("I"):              # 16-bit greyscale: the high byte
            grey = (np.asarray(img).astype(np.uint32) >> (header.bit_depth - 8)).astype(np.uint8)
        else:
            grey = np.asarray(img.convert("L"), dtype=np.uint8)
        planes = [grey, grey, grey]
    elif ct == 4:
        la = np.asarray(img.convert("LA"), dtype=np.uint8)
        planes = [la[..., 0], la[..., 0], la[..., 0], la[..., 1]]
    elif ct == 2:
        rgb = np.asarray(img.convert("RGB"), dtype=np.uint8)
        planes = [rgb[..., 0], rgb[..., 1], rgb[..., 2]]
    else:                                          # 6, RGBA
        rgba = np.asarray(img.convert("RGBA"), dtype=np.uint8)
        planes = [rgba[..., i] for i in range(4)]
    if fmt == PIXEL_FORMAT_RGB_888:
        planes = planes[:3]
    elif len(planes) == 3:                         # (RGBA8888 comes from sources with alpha)
        planes.append(np.full_like(planes[0], 255))
    return np.ascontiguousarray(np.dstack(planes))
