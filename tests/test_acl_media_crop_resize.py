"""VPC's crop-and-resize calls and its resize algorithms (acldvppVpcCropResizeAsync,
acldvppVpcCropResizePasteAsync, acldvppSetResizeConfigInterpolation), against references
written here from the algorithms' definitions. The five algorithms are CANN 8.0.0 pyACL
reference's list for the Atlas 200/300/500 inference and Atlas training products: 0 default,
1 bilinear as OpenCV, 2 nearest neighbour as OpenCV, 3 bilinear as TensorFlow, 4 nearest
neighbour as TensorFlow; Ascend's C++ VPC classification samples call these."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import setup_device
from test_acl_media import channel, pic, smooth_rgb
from test_acl_media_pixels import _bilinear, _decoded, planes

import acllab
from acllab import acl
from acllab.acl import media
from acllab.dvpp import formats as F


@pytest.fixture
def s(fresh):
    return setup_device()


def nearest(plane: np.ndarray, oh: int, ow: int) -> np.ndarray:
    """Nearest neighbour, as OpenCV's INTER_NEAREST: output x takes input floor(x * in / out)."""
    h, w = plane.shape[:2]
    out = np.empty((oh, ow) + plane.shape[2:], plane.dtype)
    for i in range(oh):
        for j in range(ow):
            out[i, j] = plane[min(i * h // oh, h - 1), min(j * w // ow, w - 1)]
    return out


def bilinear_tf(plane: np.ndarray, oh: int, ow: int) -> np.ndarray:
    """TensorFlow's resize_bilinear without half-pixel centres: x samples input x * in / out."""
    def matrix(n_in, n_out):
        m = np.zeros((n_out, n_in))
        for i in range(n_out):
            x = min(i * n_in / n_out, n_in - 1)
            lo = int(np.floor(x))
            hi = min(lo + 1, n_in - 1)
            m[i, lo] += 1 - (x - lo)
            m[i, hi] += x - lo
        return m
    return matrix(plane.shape[0], oh) @ plane.astype(np.float64) @ matrix(plane.shape[1], ow).T


def config(interpolation: int) -> int:
    cfg = media.dvpp_create_resize_config()
    assert media.dvpp_set_resize_config_interpolation(cfg, interpolation) == 0
    assert media.dvpp_get_resize_config_interpolation(cfg) == interpolation
    return cfg


def output(ow: int, oh: int, fill: int | None = None):
    ows, ohs = F.align_up(ow, 16), F.align_up(oh, 2)
    n = ows * ohs * 3 // 2
    dst, _ = media.dvpp_malloc(n)
    if fill is not None:
        assert acl.rt.memset(dst, n, fill, n) == 0
    return dst, pic(dst, n, ow, oh, ows, ohs), ows, ohs


@pytest.mark.parametrize("interpolation, ow, oh", [(2, 96, 64), (4, 200, 150), (2, 240, 180)])
def test_crop_resize_with_nearest_neighbour(s, interpolation, ow, oh):
    desc, out = _decoded(s, smooth_rgb(320, 240))
    y_in, uv_in = planes(out, 320, 240, 384, 240)
    dst, odesc, ows, ohs = output(ow, oh)
    roi = media.dvpp_create_roi_config(40, 199, 20, 139)        # 160 x 120
    assert media.dvpp_vpc_crop_resize_async(channel(), desc, odesc, roi, config(interpolation),
                                            s) == 0
    assert acl.rt.synchronize_stream(s) == 0
    y, uv = planes(dst, ow, oh, ows, ohs)
    assert np.array_equal(y, nearest(y_in[20:140, 40:200], oh, ow))
    assert np.array_equal(uv, nearest(uv_in[10:70, 20:100], oh // 2, ow // 2))


@pytest.mark.parametrize("ow, oh", [(96, 64), (480, 360)])
def test_bilinear_as_opencv_and_as_tensorflow_differ_as_their_definitions(s, ow, oh):
    desc, out = _decoded(s, smooth_rgb(320, 240))
    y_in, _ = planes(out, 320, 240, 384, 240)
    crop = y_in[0:120, 0:160]
    got = {}
    for interpolation in (0, 1, 3):
        dst, odesc, ows, ohs = output(ow, oh)
        roi = media.dvpp_create_roi_config(0, 159, 0, 119)
        assert media.dvpp_vpc_crop_resize_async(channel(), desc, odesc, roi,
                                                config(interpolation), s) == 0
        assert acl.rt.synchronize_stream(s) == 0
        got[interpolation] = planes(dst, ow, oh, ows, ohs)[0].astype(np.float64)
    assert np.abs(got[1] - _bilinear(crop, oh, ow)).max() <= 1
    assert np.abs(got[3] - bilinear_tf(crop, oh, ow)).max() <= 1
    assert np.array_equal(got[0], got[1])        # the default is drawn as 1 (docstring)
    assert not np.array_equal(got[1], got[3])


def test_crop_resize_without_a_change_of_size_is_the_crop_and_resize_async_uses_its_config(s):
    desc, out = _decoded(s, smooth_rgb(320, 240))
    y_in, _ = planes(out, 320, 240, 384, 240)
    dst, odesc, ows, ohs = output(64, 48)
    roi = media.dvpp_create_roi_config(64, 127, 32, 79)
    assert media.dvpp_vpc_crop_resize_async(channel(), desc, odesc, roi, config(2), s) == 0
    assert acl.rt.synchronize_stream(s) == 0
    assert np.array_equal(planes(dst, 64, 48, ows, ohs)[0], y_in[32:80, 64:128])
    dst, odesc, ows, ohs = output(80, 60)
    assert media.dvpp_vpc_resize_async(channel(), desc, odesc, config(2), s) == 0
    assert acl.rt.synchronize_stream(s) == 0
    assert np.array_equal(planes(dst, 80, 60, ows, ohs)[0], nearest(y_in, 60, 80))


def test_crop_resize_paste_keeps_the_canvas_and_resizes_into_the_area(s):
    desc, out = _decoded(s, smooth_rgb(320, 240))
    y_in, _ = planes(out, 320, 240, 384, 240)
    dst, canvas, ows, ohs = output(128, 96, fill=7)
    crop = media.dvpp_create_roi_config(0, 63, 0, 63)             # 64 x 64 into 32 x 32
    paste = media.dvpp_create_roi_config(32, 63, 16, 47)
    assert media.dvpp_vpc_crop_resize_paste_async(channel(), desc, canvas, crop, paste,
                                                  config(2), s) == 0
    assert acl.rt.synchronize_stream(s) == 0
    y, _ = planes(dst, 128, 96, ows, ohs)
    assert np.array_equal(y[16:48, 32:64], nearest(y_in[0:64, 0:64], 32, 32))
    mask = np.ones_like(y, dtype=bool)
    mask[16:48, 32:64] = False
    assert np.all(y[mask] == 7)
    tasks = [t for t in acllab.current_runtime().tasks if t.name == "VpcCropResizePaste"]
    assert len(tasks) == 1 and tasks[0].info["interpolation"] == 2


def test_bad_values_give_100000_and_leave_the_configuration(s):
    cfg = config(3)
    for bad in (5, -1, 1 << 32):
        assert media.dvpp_set_resize_config_interpolation(cfg, bad) == 100000
        assert "interpolation" in acl.get_recent_err_msg()
        assert media.dvpp_get_resize_config_interpolation(cfg) == 3
    with pytest.raises(TypeError):
        media.dvpp_set_resize_config_interpolation(cfg, "2")
    assert media.dvpp_get_resize_config_interpolation(0) == 0
    media.dvpp_destroy_resize_config(cfg)
    assert media.dvpp_set_resize_config_interpolation(cfg, 1) != 0
    desc, _out = _decoded(s, smooth_rgb(64, 48))
    _dst, odesc, _, _ = output(32, 32)
    roi = media.dvpp_create_roi_config(0, 31, 0, 31)
    assert media.dvpp_vpc_crop_resize_async(channel(), desc, odesc, roi, 0, s) != 0   # null
    assert media.dvpp_vpc_crop_resize_async(channel(), desc, odesc, roi, cfg, s) != 0  # gone


def test_resize_reads_a_yuv420sp_picture_wider_than_4096_and_nothing_else_does(s):
    """acldvppVpcResizeAsync reads a picture up to 8192 x 8192 in NV12 or NV21 (CANN 6.0.1 and
    7.0.0 AscendCL reference, acldvppVpcResizeAsync: "input width or height in (4096, 8192]",
    Atlas 200/300/500 inference and Atlas training products; Ascend's
    vpc_jpeg_resnet50_imagenet_classification resizes 8192 x 8192 to 4000 x 4000): halved
    bilinearly it is a 2 x 2 average. Crops, other formats, outputs and inputs past 8192
    are refused with 100000."""
    from test_acl_media import upload

    w, h = 4608, 64                        # wider than 4096
    yy, xx = np.mgrid[0:h, 0:w]
    y = ((xx // 2 * 2 + yy // 2 * 2) % 251).astype(np.uint8)
    uv = np.full((h // 2, w), 128, np.uint8)
    src = upload(y.tobytes() + uv.tobytes(), s)
    size = w * h * 3 // 2
    big = pic(src, size, w, h, w, h)
    dst, odesc, ows, ohs = output(w // 2, h // 2)
    assert media.dvpp_vpc_resize_async(channel(), big, odesc, config(1), s) == 0
    assert acl.rt.synchronize_stream(s) == 0
    y_out, _ = planes(dst, w // 2, h // 2, ows, ohs)
    assert np.array_equal(y_out, y[::2, ::2])

    ch = channel()
    roi = media.dvpp_create_roi_config(0, 63, 0, 31)
    assert media.dvpp_vpc_crop_async(ch, big, odesc, roi, s) == 100000
    assert media.dvpp_vpc_crop_resize_async(ch, big, odesc, roi, config(1), s) == 100000
    nv21 = pic(src, size, w, h, w, h, fmt=2)
    assert media.dvpp_vpc_resize_async(ch, nv21, odesc, config(1), s) == 0
    yuv400 = pic(src, size, w, h, w, h, fmt=0)
    with pytest.warns(acllab.AclWarning, match="only in YUV420SP"):
        assert media.dvpp_vpc_resize_async(ch, yuv400, odesc, config(1), s) == 100000
    too_big = pic(src, size, 8208, 32, 8208, 32)
    with pytest.warns(acllab.AclWarning, match="a resize reads 10 x 6 to 8192 x 8192"):
        assert media.dvpp_vpc_resize_async(ch, too_big, odesc, config(1), s) == 100000
    wide_out = pic(src, size, w, h, w, h)            # an output past 4096
    assert media.dvpp_vpc_resize_async(ch, nv21, wide_out, config(1), s) == 100000
    assert acl.rt.synchronize_stream(s) == 0
