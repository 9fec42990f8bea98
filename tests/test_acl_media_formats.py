"""acl.media pixel formats beyond NV12/NV21: JPEGD's source-format outputs (YUV422SP,
YUV444SP, PIXEL_FORMAT_UNKNOWN), VPC's inputs (YUV400, YUV422SP, YUV444SP, packed YUV422,
RGB888, BGR888, RGBA8888) and the Atlas A2 VPC's RGB outputs, with their strides, sizes and
the codes of formats a chip does not handle.

Sources: acldvppPixelFormat and acldvppJpegFormat values (acl/ops/acl_dvpp.h); buffer sizes
and alignments (CANN 8.0.0 "VPC functions and restrictions" and "JPEGD functions and
restrictions": YUV420SP ws*hs*3/2, YUV422SP ws*hs*2, YUV444SP ws*hs*3, packed formats ws*hs
with the width stride in bytes). The references below convert and resample independently of
acllab.dvpp (the JFIF matrix, bilinear with half-pixel centres).
"""

from __future__ import annotations

import io

import numpy as np
import pytest
from conftest import expect_code, setup_device
from PIL import Image
from test_acl_media import _check, channel, download, make_jpeg, pic, smooth_rgb, upload

import acllab
from acllab import acl
from acllab.acl import media

NV12, NV21 = media.PIXEL_FORMAT_YUV_SEMIPLANAR_420, media.PIXEL_FORMAT_YVU_SEMIPLANAR_420
SP422, SP444 = media.PIXEL_FORMAT_YUV_SEMIPLANAR_422, media.PIXEL_FORMAT_YUV_SEMIPLANAR_444
RGB, BGR = media.PIXEL_FORMAT_RGB_888, media.PIXEL_FORMAT_BGR_888


@pytest.fixture
def s(fresh):
    return setup_device()


@pytest.fixture
def a2(fresh):
    acllab.configure("ascend910b")
    return setup_device()


def align(v: int, a: int) -> int:
    return -(-v // a) * a


# -- independent references ------------------------------------------------------------------

def ycc_of(rgb: np.ndarray) -> np.ndarray:
    """JFIF (full-range BT.601) RGB -> YCbCr, float."""
    r, g, b = (rgb[..., k].astype(np.float64) for k in range(3))
    return np.stack([0.299 * r + 0.587 * g + 0.114 * b,
                     128 - 0.168736 * r - 0.331264 * g + 0.5 * b,
                     128 + 0.5 * r - 0.418688 * g - 0.081312 * b], axis=-1)


def rgb_of(ycc: np.ndarray) -> np.ndarray:
    y, cb, cr = ycc[..., 0], ycc[..., 1] - 128, ycc[..., 2] - 128
    return np.clip(np.stack([y + 1.402 * cr, y - 0.344136 * cb - 0.714136 * cr,
                             y + 1.772 * cb], axis=-1), 0, 255)


def bilinear(p: np.ndarray, oh: int, ow: int) -> np.ndarray:
    h, w = p.shape[:2]
    out = np.zeros((oh, ow) + p.shape[2:])
    for i in range(oh):
        sy = min(max((i + 0.5) * h / oh - 0.5, 0.0), h - 1.0)
        y0 = int(sy)
        y1, fy = min(y0 + 1, h - 1), sy - int(sy)
        for j in range(ow):
            sx = min(max((j + 0.5) * w / ow - 0.5, 0.0), w - 1.0)
            x0 = int(sx)
            x1, fx = min(x0 + 1, w - 1), sx - int(sx)
            out[i, j] = ((1 - fy) * ((1 - fx) * p[y0, x0] + fx * p[y0, x1])
                         + fy * ((1 - fx) * p[y1, x0] + fx * p[y1, x1]))
    return out


def blocks(c: np.ndarray, sx: int, sy: int) -> np.ndarray:
    """Average (h, w, k) over sx x sy blocks (sizes divisible)."""
    h, w = c.shape[:2]
    return c.reshape(h // sy, sy, w // sx, sx, -1).mean(axis=(1, 3))


def pillow_ycc(jpeg: bytes) -> np.ndarray:
    img = Image.open(io.BytesIO(jpeg))
    img.draft("YCbCr", img.size)
    return np.asarray(img.convert("YCbCr"), np.float64)


def close(got, want, mean: float, worst: float) -> None:
    err = np.abs(np.asarray(got, np.float64) - want)
    assert err.mean() <= mean and err.max() <= worst, (err.mean(), err.max())


def semi(buf: np.ndarray, w: int, h: int, ws: int, hs: int, sx: int, sy: int):
    """(Y, (Cb, Cr)) of a U-first semi-planar buffer with chroma subsampling (sx, sy)."""
    y = buf[:ws * hs].reshape(hs, ws)[:h, :w]
    c = buf[ws * hs:ws * hs + 2 * ws * hs // (sx * sy)].reshape(hs // sy, ws // sx, 2)
    return y, c[:h // sy, :w // sx]


# -- constants and JPEG sampling ------------------------------------------------------------

def test_constants_are_acl_dvpp_h_values():
    assert (SP422, media.PIXEL_FORMAT_YVU_SEMIPLANAR_422, SP444,
            media.PIXEL_FORMAT_YVU_SEMIPLANAR_444) == (3, 4, 5, 6)
    assert (media.PIXEL_FORMAT_YUYV_PACKED_422, media.PIXEL_FORMAT_VYUY_PACKED_422,
            media.PIXEL_FORMAT_YUV_PACKED_444, RGB, BGR) == (7, 10, 11, 12, 13)
    assert (media.PIXEL_FORMAT_ARGB_8888, media.PIXEL_FORMAT_BGRA_8888) == (14, 17)
    assert (media.PIXEL_FORMAT_YUV_SEMIPLANAR_440, media.PIXEL_FORMAT_UNKNOWN) == (1000, 10000)
    assert (media.ACL_JPEG_CSS_444, media.ACL_JPEG_CSS_422, media.ACL_JPEG_CSS_420,
            media.ACL_JPEG_CSS_GRAY, media.ACL_JPEG_CSS_440, media.ACL_JPEG_CSS_411,
            media.ACL_JPEG_CSS_UNKNOWN) == (0, 1, 2, 3, 4, 5, 1000)


@pytest.mark.parametrize(("sub", "css"), [(0, 0), (1, 1), (2, 2)])
def test_image_info_v2_reports_the_sampling(s, sub, css):
    jpeg = make_jpeg(smooth_rgb(64, 48), subsampling=sub)
    assert media.dvpp_jpeg_get_image_info_v2(acl.util.bytes_to_ptr(jpeg), len(jpeg)) == \
        (64, 48, 3, css, 0)


def test_image_info_v2_of_a_greyscale_jpeg(s):
    out = io.BytesIO()
    Image.fromarray(smooth_rgb(40, 32)[:, :, 0]).save(out, format="JPEG")
    jpeg = out.getvalue()
    assert media.dvpp_jpeg_get_image_info_v2(acl.util.bytes_to_ptr(jpeg), len(jpeg)) == \
        (40, 32, 1, media.ACL_JPEG_CSS_GRAY, 0)


# -- JPEGD: source-format outputs ----------------------------------------------------------

def _predict(jpeg: bytes, fmt: int):
    return media.dvpp_jpeg_predict_dec_size(acl.util.bytes_to_ptr(jpeg), len(jpeg), fmt)


def test_predicted_sizes_follow_the_output_format(s):
    j444 = make_jpeg(smooth_rgb(301, 161), subsampling=0)
    j422 = make_jpeg(smooth_rgb(301, 161), subsampling=1)
    ws, hs = 384, 176
    assert _predict(j444, SP444) == (ws * hs * 3, 0)
    assert _predict(j444, media.PIXEL_FORMAT_YVU_SEMIPLANAR_444) == (ws * hs * 3, 0)
    assert _predict(j444, media.PIXEL_FORMAT_UNKNOWN) == (ws * hs * 3, 0)
    assert _predict(j422, SP422) == (ws * hs * 2, 0)
    assert _predict(j422, media.PIXEL_FORMAT_UNKNOWN) == (ws * hs * 2, 0)
    # 4:4:4 to YUV420SP: 300 x 160 (rounded down), the same strides
    assert _predict(j444, NV12) == (ws * 160 * 3 // 2, 0)


def test_formats_jpegd_does_not_write_return_200006(s):
    j420 = make_jpeg(smooth_rgb(64, 48), subsampling=2)
    j422 = make_jpeg(smooth_rgb(64, 48), subsampling=1)
    with expect_code(200006) as record:
        assert _predict(j420, SP444) == (0, 200006)
    assert "4:2:0" in str(record[0].message)
    with expect_code(200006):
        assert _predict(j422, SP444) == (0, 200006)
    for fmt in (RGB, media.PIXEL_FORMAT_YUYV_PACKED_422, media.PIXEL_FORMAT_YUV_400):
        with expect_code(200006):
            assert _predict(j420, fmt) == (0, 200006)


def _decode(jpeg: bytes, stream: int, fmt: int):
    size, ret = _predict(jpeg, fmt)
    assert ret == 0
    out, _ = media.dvpp_malloc(size)
    desc = pic(out, size, fmt=fmt)
    src = upload(jpeg, stream)
    assert media.dvpp_jpeg_decode_async(channel(), src, len(jpeg), desc, stream) == 0
    assert acl.rt.synchronize_stream(stream) == 0
    return desc, download(out, size)


def _fields(desc):
    return tuple(getattr(media, f"dvpp_get_pic_desc_{f}")(desc)
                 for f in ("format", "width", "height", "width_stride", "height_stride"))


def test_a_422_jpeg_decodes_to_yuv422sp(s):
    jpeg = make_jpeg(smooth_rgb(301, 161), quality=95, subsampling=1)
    desc, buf = _decode(jpeg, s, SP422)
    assert _fields(desc) == (SP422, 302, 161, 384, 176)
    y, c = semi(buf, 302, 161, 384, 176, 2, 1)
    ref = pillow_ycc(jpeg)
    close(y[:, :301], ref[:, :, 0], 0.01, 1)
    close(c[:, :150], blocks(ref[:, :300, 1:], 2, 1), 0.3, 1)


def test_a_444_jpeg_decodes_to_yuv444sp_and_unknown_puts_v_first(s):
    jpeg = make_jpeg(smooth_rgb(301, 161), quality=95, subsampling=0)
    desc, buf = _decode(jpeg, s, SP444)
    assert _fields(desc) == (SP444, 301, 161, 384, 176)
    y, c = semi(buf, 301, 161, 384, 176, 1, 1)
    ref = pillow_ycc(jpeg)
    close(y, ref[:, :, 0], 0.01, 1)
    close(c, ref[:, :, 1:], 0.01, 1)
    desc2, buf2 = _decode(jpeg, s, media.PIXEL_FORMAT_UNKNOWN)
    assert _fields(desc2)[0] == media.PIXEL_FORMAT_YVU_SEMIPLANAR_444
    assert np.array_equal(semi(buf2, 301, 161, 384, 176, 1, 1)[1], c[:, :, ::-1])


def test_a_444_jpeg_to_nv12_rounds_an_odd_size_down(s):
    jpeg = make_jpeg(smooth_rgb(301, 161), quality=95, subsampling=0)
    desc, buf = _decode(jpeg, s, NV12)
    assert _fields(desc) == (NV12, 300, 160, 384, 160)
    y, c = semi(buf, 300, 160, 384, 160, 2, 2)
    ref = pillow_ycc(jpeg)
    close(y, ref[:160, :300, 0], 0.01, 1)
    close(c, blocks(ref[:160, :300, 1:], 2, 2), 0.3, 1)


def test_a_format_that_does_not_fit_the_jpeg_is_a_fault_at_sync(s):
    jpeg = make_jpeg(smooth_rgb(64, 48), subsampling=2)
    out, _ = media.dvpp_malloc(128 * 48 * 3)
    src = upload(jpeg, s)
    assert media.dvpp_jpeg_decode_async(channel(), src, len(jpeg), pic(out, 128 * 48 * 3,
                                                                      fmt=SP444), s) == 0
    with expect_code(507000) as record:
        acl.rt.synchronize_stream(s)
    assert "4:2:0" in str(record[0].message) and "YUV444SP" in str(record[0].message)


def test_decode_output_format_jpegd_never_writes_is_refused_at_once(s):
    jpeg = make_jpeg(smooth_rgb(64, 48))
    src = upload(jpeg, s)
    out, _ = media.dvpp_malloc(128 * 48 * 3)
    _check(200006, media.dvpp_jpeg_decode_async, channel(), src, len(jpeg),
           pic(out, 128 * 48 * 3, fmt=RGB), s)


# -- VPC inputs -----------------------------------------------------------------------------

W, H, OW, OH = 96, 64, 48, 32


def _scene() -> np.ndarray:
    return smooth_rgb(W, H)


def _encode_input(fmt: int, rgb: np.ndarray):
    """(bytes, width stride, height stride, Y ref, chroma ref at the format's sampling)."""
    ycc = np.clip(np.rint(ycc_of(rgb)), 0, 255)
    y8, c8 = ycc[:, :, 0].astype(np.uint8), ycc[:, :, 1:]
    h, w = y8.shape
    if fmt == media.PIXEL_FORMAT_YUV_400:
        ws = align(w, 16)
        buf = np.zeros((h, ws), np.uint8)
        buf[:, :w] = y8
        return buf.tobytes(), ws, h, y8, None
    if fmt in (NV12, SP422, SP444):
        sx, sy = {NV12: (2, 2), SP422: (2, 1), SP444: (1, 1)}[fmt]
        c = np.clip(np.rint(blocks(c8, sx, sy)), 0, 255).astype(np.uint8)
        ws = align(w, 16)
        ys = np.zeros((h, ws), np.uint8)
        ys[:, :w] = y8
        cs = np.zeros((h // sy, ws // sx, 2), np.uint8)
        cs[:, :w // sx] = c
        return ys.tobytes() + cs.tobytes(), ws, h, y8, c
    if fmt == media.PIXEL_FORMAT_YUYV_PACKED_422:
        c = np.clip(np.rint(blocks(c8, 2, 1)), 0, 255).astype(np.uint8)
        ws = align(2 * w, 16)
        rows = np.zeros((h, ws), np.uint8)
        quad = np.stack([y8[:, 0::2], c[:, :, 0], y8[:, 1::2], c[:, :, 1]], axis=-1)
        rows[:, :2 * w] = quad.reshape(h, 2 * w)
        return rows.tobytes(), ws, h, y8, c
    order = {RGB: [0, 1, 2], BGR: [2, 1, 0], media.PIXEL_FORMAT_RGBA_8888: [0, 1, 2, None]}[fmt]
    bpp = len(order)
    ws = align(bpp * w, 16)
    rows = np.zeros((h, ws), np.uint8)
    px = np.stack([rgb[:, :, k] if k is not None else np.full((h, w), 255, np.uint8)
                   for k in order], axis=-1)
    rows[:, :bpp * w] = px.reshape(h, bpp * w)
    return rows.tobytes(), ws, h, ycc_of(rgb)[:, :, 0], ycc_of(rgb)[:, :, 1:]


def _resize_to_nv12(s, fmt: int, data: bytes, ws: int, hs: int):
    src = upload(data, s)
    acl.rt.synchronize_stream(s)
    n_out = OW * OH * 3 // 2
    dst, _ = media.dvpp_malloc(n_out)
    inp = pic(src, len(data), W, H, ws, hs, fmt=fmt)
    out = pic(dst, n_out, OW, OH, OW, OH)
    assert media.dvpp_vpc_resize_async(channel(), inp, out, media.dvpp_create_resize_config(),
                                       s) == 0
    assert acl.rt.synchronize_stream(s) == 0
    return semi(download(dst, n_out), OW, OH, OW, OH, 2, 2)


@pytest.mark.parametrize("fmt", [NV12, SP422, SP444, media.PIXEL_FORMAT_YUYV_PACKED_422,
                                 RGB, BGR, media.PIXEL_FORMAT_RGBA_8888])
def test_vpc_reads_the_format_and_resizes_to_nv12(s, fmt):
    data, ws, hs, y_ref, c_ref = _encode_input(fmt, _scene())
    assert len(data) == {NV12: ws * hs * 3 // 2, SP422: ws * hs * 2,
                         SP444: ws * hs * 3}.get(fmt, ws * hs)
    y, c = _resize_to_nv12(s, fmt, data, ws, hs)
    close(y, bilinear(y_ref, OH, OW), 0.5, 1)
    close(c, bilinear(c_ref, OH // 2, OW // 2), 0.6, 1.5)


def test_vpc_reads_yuv400_and_writes_grey_chroma(s):
    data, ws, hs, y_ref, _ = _encode_input(media.PIXEL_FORMAT_YUV_400, _scene())
    assert len(data) == ws * hs
    y, c = _resize_to_nv12(s, media.PIXEL_FORMAT_YUV_400, data, ws, hs)
    close(y, bilinear(y_ref, OH, OW), 0.5, 1)
    assert (c == 128).all()


def test_rgb_input_strides_are_in_bytes(s):
    rgb = _scene()
    data, ws, hs, _, _ = _encode_input(RGB, rgb)
    src = upload(data, s)
    dst, _ = media.dvpp_malloc(OW * OH * 3 // 2)
    ch, rc = channel(), media.dvpp_create_resize_config()
    out = pic(dst, OW * OH * 3 // 2, OW, OH, OW, OH)
    # a width stride of 96 (one byte a pixel) does not hold 96 RGB pixels
    with expect_code(100000) as record:
        media.dvpp_vpc_resize_async(ch, pic(src, len(data), W, H, 96, H, fmt=RGB), out, rc, s)
    assert "288" in str(record[0].message)
    with expect_code(100000):        # the buffer says less than 288 * 64 bytes
        media.dvpp_vpc_resize_async(ch, pic(src, 288 * 63, W, H, 288, H, fmt=RGB), out, rc, s)


# -- VPC outputs: the chip decides -------------------------------------------------------------

def _vpc_output(s, fmt: int, ws: int, size: int):
    data, iws, ihs, _, _ = _encode_input(NV12, _scene())
    src = upload(data, s)
    dst, _ = media.dvpp_malloc(size)
    inp = pic(src, len(data), W, H, iws, ihs)
    return inp, dst, pic(dst, size, OW, OH, ws, OH, fmt=fmt)


def test_the_310_vpc_writes_yuv420sp_only(s):
    inp, _, out = _vpc_output(s, RGB, 144, 144 * OH)
    with expect_code(200006) as record:
        assert media.dvpp_vpc_resize_async(channel(), inp, out,
                                           media.dvpp_create_resize_config(), s) == 200006
    assert "ascend310" in str(record[0].message) and "NV12" in str(record[0].message)
    with expect_code(100000):            # 18 (10-bit YUV420SP) is a format, 77 is not a VPC one
        media.dvpp_set_pic_desc_format(out, 77)
    assert media.dvpp_set_pic_desc_format(out, 18) == 0
    with expect_code(200006):
        media.dvpp_vpc_resize_async(channel(), inp, out, media.dvpp_create_resize_config(), s)


@pytest.mark.parametrize("fmt", [RGB, BGR])
def test_the_a2_vpc_resizes_nv12_to_rgb(a2, fmt):
    rgb = _scene()
    inp, dst, out = _vpc_output(a2, fmt, OW * 3, OW * 3 * OH)
    assert media.dvpp_vpc_resize_async(channel(), inp, out, media.dvpp_create_resize_config(),
                                       a2) == 0
    assert acl.rt.synchronize_stream(a2) == 0
    got = download(dst, OW * 3 * OH).reshape(OH, OW, 3).astype(np.float64)
    if fmt == BGR:
        got = got[:, :, ::-1]
    # the reference: NV12 of the scene (2 x 2 chroma), each plane resampled to the output's
    # pixels, converted back to RGB
    ycc = np.clip(np.rint(ycc_of(rgb)), 0, 255)
    c = np.clip(np.rint(blocks(ycc[:, :, 1:], 2, 2)), 0, 255)
    want = rgb_of(np.dstack([bilinear(ycc[:, :, 0], OH, OW), bilinear(c, OH, OW)]))
    close(got, want, 0.8, 4)


def test_the_a2_vpc_crops_444sp_exactly(a2):
    data, ws, hs, y_ref, c_ref = _encode_input(SP444, _scene())
    src = upload(data, a2)
    n = 32 * 16 * 3
    dst, _ = media.dvpp_malloc(n)
    roi = media.dvpp_create_roi_config(10, 41, 20, 35)
    assert media.dvpp_vpc_crop_async(channel(), pic(src, len(data), W, H, ws, hs, fmt=SP444),
                                     pic(dst, n, 32, 16, 32, 16, fmt=SP444), roi, a2) == 0
    assert acl.rt.synchronize_stream(a2) == 0
    y, c = semi(download(dst, n), 32, 16, 32, 16, 1, 1)
    assert np.array_equal(y, y_ref[20:36, 10:42])
    assert np.array_equal(c, c_ref[20:36, 10:42])
