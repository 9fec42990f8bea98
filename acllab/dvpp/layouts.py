"""Picture layouts: how each acldvppPixelFormat that acllab's DVPP reads or writes lies in
memory, its buffer size, and the conversions between layouts (pure numpy; no timing).

Sources (CANN 8.0.0, media data processing V1, "VPC functions and restrictions": the tables
"Restrictions on image formats, width and height alignment, and buffers"; and the comment of
acldvppSetPicDescWidthStride in acl/ops/acl_dvpp.h):

=====================  ==================================  ==========================  ==========
format (value)         memory                              width stride (16-aligned)  buffer
=====================  ==================================  ==========================  ==========
YUV400 (0)             Y plane                             >= width                    ws*hs
YUV/YVU420SP (1, 2)    Y plane, then U V (V U) pairs,      >= width (2-aligned)        ws*hs*3/2
                       hs/2 rows of ws bytes
YUV/YVU422SP (3, 4)    Y plane, then pairs, hs rows        >= width (2-aligned)        ws*hs*2
YUV/YVU444SP (5, 6)    Y plane, then pairs, hs rows of     >= width                    ws*hs*3
                       2*ws bytes
YUYV/UYVY/YVYU/VYUY    one plane, 4 bytes per 2 pixels     >= width*2                  ws*hs
packed 422 (7 to 10)
YUV packed 444 (11),   one plane, 3 bytes a pixel          >= width*3                  ws*hs
RGB888 (12), BGR888
(13)
ARGB/ABGR/RGBA/BGRA    one plane, 4 bytes a pixel          >= width*4                  ws*hs
8888 (14 to 17)
=====================  ==================================  ==========================  ==========

The height stride is at least the height (2-aligned for YUV420SP), a multiple of 2. Width and
height alignment: YUV420SP both 2; YUV422 (semi-planar or packed) the width 2; the others none.

A picture in flight is "planes": Y (h, w) uint8 and chroma (h / sy, w / sx, 2) uint8 in Cb, Cr
order at the layout's subsampling (sx, sy), or None for grey. RGB layouts convert to and from
full-range BT.601 YCbCr (the JFIF matrix JPEG files use) when they are read and written.

Differs from hardware: the VPC's colour-space conversion matrix is not published per chip
(BT.601 or BT.709, full or narrow range); acllab uses full-range BT.601 both ways, and an RGB
to RGB task goes through YCbCr too, so even an unscaled copy may move a level or two. The alpha
byte of ARGB-type outputs is written as 0, as CANN 7.0.0's acldvppVpcResizeAsync restrictions
say of ARGB to ARGB resizing.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["Layout", "LAYOUTS", "layout", "rgb_to_ycbcr", "ycbcr_to_rgb", "subsample",
           "resize", "convert", "VPC_INPUT_FORMATS", "vpc_output_formats"]


def _align(value: int, align: int) -> int:
    return -(-value // align) * align


@dataclass(frozen=True)
class Layout:
    """One pixel format's layout.

    ``kind`` is "grey", "semi" (a Y plane, then a plane of interleaved chroma pairs),
    "yuv422" (packed, 4 bytes for 2 pixels) or "packed" (``bpp`` bytes a pixel); ``sub`` the
    chroma subsampling (sx, sy), None for grey; ``order`` the byte order ("UV"/"VU" for
    semi-planar, e.g. "YUYV" or "BGR" for packed); the buffer is ws * hs * num // den bytes.
    """

    fmt: int
    name: str
    kind: str
    sub: tuple[int, int] | None
    order: str
    bpp: int
    num: int
    den: int

    @property
    def rgb(self) -> bool:
        return self.kind == "packed" and "R" in self.order

    def size(self, width_stride: int, height_stride: int) -> int:
        """Bytes of a picture with these strides."""
        return width_stride * height_stride * self.num // self.den

    def covered(self, width: int, height: int) -> tuple[int, int]:
        """The area the buffer holds for a width x height picture (subsampling-aligned)."""
        sx, sy = self.sub or (1, 1)
        if self.kind == "packed":
            return width, height
        return _align(width, sx), _align(height, sy)

    def min_width_stride(self, width: int) -> int:
        """The smallest width stride (in bytes) that holds a row of ``width`` pixels."""
        w2 = self.covered(width, 1)[0]
        return w2 * (2 if self.kind == "yuv422" else self.bpp)

    def row_spans(self, width_stride: int, height_stride: int, top: int,
                  bottom: int) -> list[tuple[int, int]]:
        """(offset, bytes) of the rows [top, bottom] of every plane (whole rows)."""
        ws, hs = width_stride, height_stride
        spans = [(top * ws, (bottom - top + 1) * ws)]
        if self.kind == "semi":
            sx, sy = self.sub
            row = 2 * ws // sx
            c0, c1 = top // sy, -(-(bottom + 1) // sy)
            spans.append((ws * hs + c0 * row, (c1 - c0) * row))
        return spans

    # -- reading and writing ---------------------------------------------------------------

    def read(self, buf: np.ndarray, width: int, height: int, width_stride: int,
             height_stride: int):
        """(Y, chroma) of the picture in ``buf`` (chroma None for grey); views or copies."""
        ws, hs = width_stride, height_stride
        w2, h2 = self.covered(width, height)
        rows = buf[:ws * hs].reshape(hs, ws)
        if self.kind == "grey":
            return rows[:h2, :w2], None
        if self.kind == "semi":
            sx, sy = self.sub
            c = buf[ws * hs:self.size(ws, hs)].reshape(hs // sy, ws // sx, 2)
            c = c[:h2 // sy, :w2 // sx]
            return rows[:h2, :w2], (c[:, :, ::-1] if self.order == "VU" else c)
        if self.kind == "yuv422":
            quad = rows[:h2, :w2 * 2].reshape(h2, w2 // 2, 4)
            at = {ch: [i for i, o in enumerate(self.order) if o == ch] for ch in "YUV"}
            y = quad[:, :, at["Y"]].reshape(h2, w2)
            return y, np.stack([quad[:, :, at["U"][0]], quad[:, :, at["V"][0]]], axis=-1)
        px = rows[:h2, :w2 * self.bpp].reshape(h2, w2, self.bpp)
        if self.order == "YUV":
            return px[:, :, 0], px[:, :, 1:3]
        rgb = np.stack([px[:, :, self.order.index(ch)] for ch in "RGB"], axis=-1)
        ycc = rgb_to_ycbcr(rgb)
        return ycc[:, :, 0], ycc[:, :, 1:]

    def write(self, buf: np.ndarray, width_stride: int, height_stride: int, y: np.ndarray,
              chroma: np.ndarray | None, top: int = 0, left: int = 0) -> None:
        """Write planes (at this layout's subsampling) into ``buf`` at (top, left)."""
        ws, hs = width_stride, height_stride
        h, w = y.shape
        rows = buf[:ws * hs].reshape(hs, ws)
        if self.kind == "grey":
            rows[top:top + h, left:left + w] = y
            return
        if chroma is None:
            sx, sy = self.sub
            chroma = np.full((h // sy, w // sx, 2), 128, np.uint8)
        if self.kind == "semi":
            sx, sy = self.sub
            rows[top:top + h, left:left + w] = y
            c = buf[ws * hs:self.size(ws, hs)].reshape(hs // sy, ws // sx, 2)
            c[top // sy:top // sy + chroma.shape[0], left // sx:left // sx + chroma.shape[1]] = \
                chroma[:, :, ::-1] if self.order == "VU" else chroma
            return
        if self.kind == "yuv422":
            quad = rows[top:top + h, left * 2:(left + w) * 2].reshape(h, w // 2, 4)
            ys = y.reshape(h, w // 2, 2)
            at = {ch: [i for i, o in enumerate(self.order) if o == ch] for ch in "YUV"}
            quad[:, :, at["Y"][0]], quad[:, :, at["Y"][1]] = ys[:, :, 0], ys[:, :, 1]
            quad[:, :, at["U"][0]], quad[:, :, at["V"][0]] = chroma[:, :, 0], chroma[:, :, 1]
            return
        px = rows[top:top + h, left * self.bpp:(left + w) * self.bpp].reshape(h, w, self.bpp)
        if self.order == "YUV":
            px[:, :, 0], px[:, :, 1:3] = y, chroma
            return
        rgb = ycbcr_to_rgb(np.dstack([y, chroma[:, :, 0], chroma[:, :, 1]]))
        for i, ch in enumerate(self.order):
            px[:, :, i] = 0 if ch == "A" else rgb[:, :, "RGB".index(ch)]


def _table() -> dict[int, Layout]:
    rows = [(0, "YUV400", "grey", None, "Y", 1, 1, 1),
            (1, "YUV420SP NV12", "semi", (2, 2), "UV", 1, 3, 2),
            (2, "YUV420SP NV21", "semi", (2, 2), "VU", 1, 3, 2),
            (3, "YUV422SP", "semi", (2, 1), "UV", 1, 2, 1),
            (4, "YVU422SP", "semi", (2, 1), "VU", 1, 2, 1),
            (5, "YUV444SP", "semi", (1, 1), "UV", 1, 3, 1),
            (6, "YVU444SP", "semi", (1, 1), "VU", 1, 3, 1),
            (7, "YUV422 packed YUYV", "yuv422", (2, 1), "YUYV", 2, 1, 1),
            (8, "YUV422 packed UYVY", "yuv422", (2, 1), "UYVY", 2, 1, 1),
            (9, "YUV422 packed YVYU", "yuv422", (2, 1), "YVYU", 2, 1, 1),
            (10, "YUV422 packed VYUY", "yuv422", (2, 1), "VYUY", 2, 1, 1),
            (11, "YUV444 packed", "packed", (1, 1), "YUV", 3, 1, 1),
            (12, "RGB888", "packed", (1, 1), "RGB", 3, 1, 1),
            (13, "BGR888", "packed", (1, 1), "BGR", 3, 1, 1),
            (14, "ARGB8888", "packed", (1, 1), "ARGB", 4, 1, 1),
            (15, "ABGR8888", "packed", (1, 1), "ABGR", 4, 1, 1),
            (16, "RGBA8888", "packed", (1, 1), "RGBA", 4, 1, 1),
            (17, "BGRA8888", "packed", (1, 1), "BGRA", 4, 1, 1)]
    return {r[0]: Layout(*r) for r in rows}


LAYOUTS: dict[int, Layout] = _table()


def layout(fmt: int) -> Layout | None:
    """The layout of an acldvppPixelFormat acllab's DVPP handles, or None."""
    return LAYOUTS.get(fmt)


# ---------------------------------------------------------------------------------------
# colour and resampling
# ---------------------------------------------------------------------------------------

def rgb_to_ycbcr(rgb: np.ndarray) -> np.ndarray:
    """Full-range BT.601 (JFIF) RGB -> YCbCr, the conversion JPEG files use."""
    f = rgb.astype(np.float64)
    y = 0.299 * f[..., 0] + 0.587 * f[..., 1] + 0.114 * f[..., 2]
    cb = 128 - 0.168736 * f[..., 0] - 0.331264 * f[..., 1] + 0.5 * f[..., 2]
    cr = 128 + 0.5 * f[..., 0] - 0.418688 * f[..., 1] - 0.081312 * f[..., 2]
    return np.clip(np.rint(np.stack([y, cb, cr], axis=-1)), 0, 255).astype(np.uint8)


def ycbcr_to_rgb(ycc: np.ndarray) -> np.ndarray:
    """Full-range BT.601 (JFIF) YCbCr -> RGB, the inverse of :func:`rgb_to_ycbcr`."""
    f = ycc.astype(np.float64)
    y, cb, cr = f[..., 0], f[..., 1] - 128, f[..., 2] - 128
    r = y + 1.402 * cr
    g = y - 0.344136 * cb - 0.714136 * cr
    b = y + 1.772 * cb
    return np.clip(np.rint(np.stack([r, g, b], axis=-1)), 0, 255).astype(np.uint8)


def subsample(chroma: np.ndarray, sx: int, sy: int) -> np.ndarray:
    """Full-resolution (h, w, 2) chroma averaged over sx x sy blocks (edges replicated)."""
    if (sx, sy) == (1, 1):
        return chroma.copy()
    h, w = chroma.shape[:2]
    c = np.pad(chroma.astype(np.uint32), ((0, -h % sy), (0, -w % sx), (0, 0)), mode="edge")
    s = sum(c[j::sy, i::sx] for j in range(sy) for i in range(sx))
    n = sx * sy
    return ((s + n // 2) // n).astype(np.uint8)


#: VPC's resize algorithms (acldvppSetResizeConfigInterpolation, CANN 8.0.0 pyACL reference
#: for the Atlas 200/300/500 inference and Atlas training products): 0 the default, 1 bilinear
#: as OpenCV computes it, 2 nearest neighbour as OpenCV, 3 bilinear as TensorFlow, 4 nearest
#: neighbour as TensorFlow. Differs from hardware: 0 is Huawei's own high-order filter on
#: those chips; acllab draws it as 1.
INTERPOLATIONS = {0: "bilinear", 1: "bilinear", 2: "nearest", 3: "bilinear_tf", 4: "nearest"}


def resize(plane: np.ndarray, oh: int, ow: int, method: str = "bilinear") -> np.ndarray:
    """Resize a plane to ``ow`` x ``oh``: ``bilinear`` with half-pixel centres (as OpenCV's
    INTER_LINEAR), ``bilinear_tf`` with corner-aligned sample positions (as TensorFlow's
    resize_bilinear without half-pixel centres), ``nearest`` taking source pixel
    floor(x * in / out) (as OpenCV's INTER_NEAREST and TensorFlow's nearest); edges clamped."""
    h, w = plane.shape[:2]
    if (h, w) == (oh, ow):
        return plane.copy()
    if method == "nearest":
        ys = np.minimum(np.arange(oh) * h // oh, h - 1)
        xs = np.minimum(np.arange(ow) * w // ow, w - 1)
        return np.ascontiguousarray(plane[ys][:, xs])
    f = plane.astype(np.float64)
    half = 0.0 if method == "bilinear_tf" else 0.5

    def axis(n_in: int, n_out: int):
        pos = np.clip((np.arange(n_out) + half) * n_in / n_out - half, 0, n_in - 1)
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


def convert(y: np.ndarray, chroma: np.ndarray | None, src_sub: tuple[int, int] | None,
            crop: tuple[int, int, int, int], dst: Layout, oh: int, ow: int,
            method: str = "bilinear"):
    """VPC's pixel work: crop (left, right, top, bottom, inclusive) the planes of a picture
    with chroma subsampling ``src_sub``, and resample them to ``ow`` x ``oh`` planes of the
    ``dst`` layout's subsampling (chroma None for a grey output; 128 from a grey input)."""
    left, right, top, bottom = crop
    y = y[top:bottom + 1, left:right + 1]
    if chroma is not None:
        sx, sy = src_sub
        chroma = chroma[top // sy:-(-(bottom + 1) // sy), left // sx:-(-(right + 1) // sx)]
    y_out = resize(y, oh, ow, method)
    if dst.sub is None:
        return y_out, None
    dx, dy = dst.sub
    if chroma is None:
        return y_out, np.full((oh // dy, ow // dx, 2), 128, np.uint8)
    return y_out, resize(chroma, oh // dy, ow // dx, method)


# ---------------------------------------------------------------------------------------
# what each chip's VPC reads and writes
# ---------------------------------------------------------------------------------------

#: VPC input formats, every chip ("VPC functions and restrictions", Table 1: the general
#: formats every model supports; YUV440SP, also listed there, is not modelled).
VPC_INPUT_FORMATS = tuple(LAYOUTS)


def vpc_output_formats(profile) -> tuple[int, ...]:
    """The formats a profile's VPC writes.

    Ascend 310 (Atlas 200/300/500 inference products) and the Atlas training series write
    YUV420SP NV12 and NV21 only (Table 2 of "VPC functions and restrictions", CANN 8.0.0).
    Atlas A2 chips (the 910B) write RGB and other YUV formats too: CANN 7.0.0's
    acldvppVpcResizeAsync restrictions for Atlas A2 speak of ARGB8888 input *and output*.
    (uncertain) acllab lets an Atlas A2 VPC write every layout it models, which may be more
    than a given chip and release allow.
    """
    if profile.soc_name.startswith(("Ascend910B", "Ascend910_93")):
        return tuple(LAYOUTS)
    return (1, 2)
