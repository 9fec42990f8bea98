"""acl.media with real pixels and virtual time: decode, resize, crop, paste and encode against
independent references (Pillow, numpy, closed forms), timing oracles, streams and events, the
sanitizer and a decode -> resize -> model-input pipeline."""

from __future__ import annotations

import io
import itertools

import numpy as np
import pytest
from conftest import setup_device
from PIL import Image
from test_acl_media import (
    NV12,
    NV21,
    channel,
    decode,
    download,
    make_jpeg,
    pic,
    smooth_rgb,
)

import acllab
from acllab import acl
from acllab.acl import media
from acllab.analysis import sanitizer, trace
from acllab.dvpp import formats as F
from acllab.hardware import PROFILES, ceil_div

P = PROFILES["ascend310"]


@pytest.fixture
def s(fresh):
    return setup_device()


def planes(ptr: int, w: int, h: int, ws: int, hs: int, fmt: int = NV12):
    buf = download(ptr, ws * hs * 3 // 2)
    y, uv = F.split_planes(buf, w, h, ws, hs, fmt)
    return y.copy(), uv.copy()


def reference_ycbcr(rgb: np.ndarray):
    """Y and 2x2-averaged chroma of the original picture (the JFIF conversion, not acllab's)."""
    ycc = np.asarray(Image.fromarray(rgb).convert("YCbCr")).astype(np.float64)
    h, w = rgb.shape[:2]
    c = ycc[:h // 2 * 2, :w // 2 * 2, 1:]
    chroma = (c[0::2, 0::2] + c[1::2, 0::2] + c[0::2, 1::2] + c[1::2, 1::2]) / 4
    return ycc[:, :, 0], chroma


# -- pixels --------------------------------------------------------------------------------

@pytest.mark.parametrize("w,h", [(320, 240), (417, 301)])
def test_decode_matches_pillows_ycbcr(s, w, h):
    rgb = smooth_rgb(w, h)
    desc, out, _ = decode(make_jpeg(rgb, quality=95), s)
    assert acl.rt.synchronize_stream(s) == 0
    ws, hs = media.dvpp_get_pic_desc_width_stride(desc), media.dvpp_get_pic_desc_height_stride(desc)
    assert ws % 128 == 0 and hs % 16 == 0
    y, uv = planes(out, w, h, ws, hs)
    ref_y, ref_c = reference_ycbcr(rgb)
    err = np.abs(y[:h, :w].astype(np.float64) - ref_y)
    assert err.mean() < 1.5 and err.max() < 16
    cerr = np.abs(uv[:h // 2, :w // 2].astype(np.float64) - ref_c)
    assert cerr.mean() < 2.0
    if w % 2:                                   # the 2-aligned picture repeats the last column
        assert np.array_equal(y[:, w], y[:, w - 1])


def test_decode_nv21_swaps_chroma_and_greyscale_fills_128(s):
    jpeg = make_jpeg(smooth_rgb(128, 64))
    d12, o12, _ = decode(jpeg, s, NV12)
    d21, o21, _ = decode(jpeg, s, NV21)
    assert acl.rt.synchronize_stream(s) == 0
    raw12, raw21 = download(o12, 128 * 64 * 3 // 2), download(o21, 128 * 64 * 3 // 2)
    assert np.array_equal(raw12[:128 * 64], raw21[:128 * 64])
    uv12 = raw12[128 * 64:].reshape(-1, 2)
    assert np.array_equal(uv12[:, ::-1], raw21[128 * 64:].reshape(-1, 2))
    dg, og, _ = decode(make_jpeg(smooth_rgb(128, 64)[:, :, 1]), s)
    assert acl.rt.synchronize_stream(s) == 0
    assert np.all(download(og, 128 * 64 * 3 // 2)[128 * 64:] == 128)


def _decoded(s, rgb):
    desc, out, _ = decode(make_jpeg(rgb), s)
    assert acl.rt.synchronize_stream(s) == 0
    return desc, out


def _bilinear(plane: np.ndarray, oh: int, ow: int) -> np.ndarray:
    """An independent reference: separable half-pixel bilinear with edge clamping."""
    def matrix(n_in, n_out):
        m = np.zeros((n_out, n_in))
        for i in range(n_out):
            x = min(max((i + 0.5) * n_in / n_out - 0.5, 0), n_in - 1)
            lo = int(np.floor(x))
            hi = min(lo + 1, n_in - 1)
            m[i, lo] += 1 - (x - lo)
            m[i, hi] += x - lo
        return m
    return matrix(plane.shape[0], oh) @ plane.astype(np.float64) @ matrix(plane.shape[1], ow).T


@pytest.mark.parametrize("ow,oh", [(224, 224), (640, 480), (96, 32)])
def test_resize_matches_a_bilinear_reference(s, ow, oh):
    rgb = smooth_rgb(320, 240)
    desc, out = _decoded(s, rgb)
    y_in, uv_in = planes(out, 320, 240, 384, 240)
    ows, ohs = F.align_up(ow, 16), F.align_up(oh, 2)
    n = ows * ohs * 3 // 2
    dst, _ = media.dvpp_malloc(n)
    odesc = pic(dst, n, ow, oh, ows, ohs)
    assert media.dvpp_vpc_resize_async(channel(), desc, odesc, media.dvpp_create_resize_config(),
                                       s) == 0
    assert acl.rt.synchronize_stream(s) == 0
    y, uv = planes(dst, ow, oh, ows, ohs)
    assert np.abs(y - _bilinear(y_in, oh, ow)).max() <= 1
    for c in range(2):
        assert np.abs(uv[:, :, c] - _bilinear(uv_in[:, :, c], oh // 2, ow // 2)).max() <= 1
    if ow > 320:    # upscaling: Pillow's bilinear is the same filter
        ref = np.asarray(Image.fromarray(y_in).resize((ow, oh), Image.BILINEAR), np.float64)
        assert np.abs(y.astype(np.float64) - ref).mean() < 1.0


def test_crop_is_exact_and_converts_nv12_to_nv21(s):
    desc, out = _decoded(s, smooth_rgb(320, 240))
    y_in, uv_in = planes(out, 320, 240, 384, 240)
    n = 112 * 64 * 3 // 2
    dst, _ = media.dvpp_malloc(n)
    odesc = pic(dst, n, 100, 64, 112, 64, fmt=NV21)
    roi = media.dvpp_create_roi_config(40, 139, 20, 83)          # 100 x 64, even/odd offsets
    assert media.dvpp_vpc_crop_async(channel(), desc, odesc, roi, s) == 0
    assert acl.rt.synchronize_stream(s) == 0
    y, uv = planes(dst, 100, 64, 112, 64, NV21)
    assert np.array_equal(y, y_in[20:84, 40:140])
    assert np.array_equal(uv, uv_in[10:42, 20:70])


def test_crop_and_paste_keeps_the_canvas(s):
    desc, out = _decoded(s, smooth_rgb(320, 240))
    y_in, _ = planes(out, 320, 240, 384, 240)
    n = 128 * 96 * 3 // 2
    dst, _ = media.dvpp_malloc(n)
    assert acl.rt.memset(dst, n, 7, n) == 0
    canvas = pic(dst, n, 128, 96, 128, 96)
    crop = media.dvpp_create_roi_config(0, 31, 0, 31)
    paste = media.dvpp_create_roi_config(32, 63, 16, 47)
    assert media.dvpp_vpc_crop_and_paste_async(channel(), desc, canvas, crop, paste, s) == 0
    assert acl.rt.synchronize_stream(s) == 0
    y, uv = planes(dst, 128, 96, 128, 96)
    assert np.array_equal(y[16:48, 32:64], y_in[0:32, 0:32])
    mask = np.ones_like(y, dtype=bool)
    mask[16:48, 32:64] = False
    assert np.all(y[mask] == 7)
    assert np.all(np.delete(uv, np.s_[8:24], axis=0) == 7)


def test_encode_gives_a_jpeg_a_viewer_opens(s):
    rgb = smooth_rgb(320, 240)
    desc, out = _decoded(s, rgb)
    y_in, _ = planes(out, 320, 240, 384, 240)
    cfg = media.dvpp_create_jpege_config()
    assert media.dvpp_set_jpege_config_level(cfg, 90) == 0
    media.dvpp_set_pic_desc_width(desc, 320)
    size, ret = media.dvpp_jpeg_predict_enc_size(desc, cfg)
    assert ret == 0
    dst, _ = media.dvpp_malloc(size)
    size_host, _ = acl.rt.malloc_host(4)
    r = acllab.current_runtime()
    r.region(size_host).data[:4] = np.frombuffer(np.uint32(size).tobytes(), np.uint8)
    assert media.dvpp_jpeg_encode_async(channel(), desc, dst, size_host, cfg, s) == 0
    assert acl.rt.synchronize_stream(s) == 0
    n = int(np.frombuffer(bytes(r.region(size_host).data[:4]), np.uint32)[0])
    assert 0 < n < size
    jpeg = bytes(download(dst, n))
    img = Image.open(io.BytesIO(jpeg))
    assert img.format == "JPEG" and img.size == (320, 240)
    y = np.asarray(img.convert("YCbCr"))[:, :, 0].astype(np.float64)
    assert np.abs(y - y_in[:240, :320]).mean() < 2.0


# -- time ------------------------------------------------------------------------------------

def _tasks(kind: str = "dvpp"):
    return [t for t in acllab.current_runtime().engine.tasks if t.kind == kind]


def test_decode_time_is_latency_plus_pixels_over_rate(s):
    decode(make_jpeg(smooth_rgb(417, 301)), s)
    assert acl.rt.synchronize_stream(s) == 0
    (t,) = _tasks()
    assert t.end_ns - t.start_ns == P.dvpp_task_ns + ceil_div(417 * 301 * 10**9,
                                                              P.jpegd_pixels_per_s)
    assert t.engine_name == "JPEGD (device 0)"
    # a 1080p picture: 128 per second per unit, as the Ascend 310 figures say
    assert abs(P.dvpp_task_ns + 1920 * 1080 * 10**9 / P.jpegd_pixels_per_s - 1e9 / 128) < 3e4


def test_vpc_time_uses_the_larger_of_input_and_output(s):
    desc, out = _decoded(s, smooth_rgb(320, 240))
    n = 640 * 480 * 3 // 2
    dst, _ = media.dvpp_malloc(n)
    assert media.dvpp_vpc_resize_async(channel(), desc, pic(dst, n, 640, 480, 640, 480),
                                       media.dvpp_create_resize_config(), s) == 0
    assert acl.rt.synchronize_stream(s) == 0
    t = _tasks()[-1]
    assert t.end_ns - t.start_ns == P.dvpp_task_ns + ceil_div(640 * 480 * 10**9,
                                                              P.vpc_pixels_per_s)


def test_two_jpegd_units_decode_in_parallel_the_third_waits(s):
    jpeg = make_jpeg(smooth_rgb(256, 256))
    ch = channel()
    streams = [s] + [acl.rt.create_stream()[0] for _ in range(2)]
    for st in streams:
        decode(jpeg, st, ch=ch)
    assert acl.rt.synchronize_device() == 0
    a, b, c = _tasks()
    assert a.start_ns < b.end_ns and b.start_ns < a.end_ns            # two units at once
    assert c.start_ns == min(a.end_ns, b.end_ns)                       # the third waits


def test_events_order_a_resize_after_a_decode_on_another_stream(s):
    s2, _ = acl.rt.create_stream()
    desc, out, _ = decode(make_jpeg(smooth_rgb(320, 240)), s)
    ev, _ = acl.rt.create_event()
    assert acl.rt.record_event(ev, s) == 0
    assert acl.rt.stream_wait_event(s2, ev) == 0
    n = 224 * 224 * 3 // 2
    dst, _ = media.dvpp_malloc(n)
    media.dvpp_set_pic_desc_width(desc, 320)          # the decode fills these in as it ends;
    media.dvpp_set_pic_desc_height(desc, 240)         # a pipeline that knows them sets them
    media.dvpp_set_pic_desc_width_stride(desc, 384)
    media.dvpp_set_pic_desc_height_stride(desc, 240)
    assert media.dvpp_vpc_resize_async(channel(), desc, pic(dst, n, 224, 224, 224, 224),
                                       media.dvpp_create_resize_config(), s2) == 0
    assert acl.rt.synchronize_stream(s2) == 0
    dec, res = _tasks()
    assert res.start_ns >= dec.end_ns
    r = acllab.current_runtime()
    assert not [f for f in sanitizer.analyze(r) if f.kind == "race"]


def test_sanitizer_finds_a_decode_resize_race(s):
    s2, _ = acl.rt.create_stream()
    desc, out, _ = decode(make_jpeg(smooth_rgb(320, 240)), s)
    for f, v in (("width", 320), ("height", 240), ("width_stride", 384),
                 ("height_stride", 240)):
        getattr(media, f"dvpp_set_pic_desc_{f}")(desc, v)
    n = 224 * 224 * 3 // 2
    dst, _ = media.dvpp_malloc(n)
    assert media.dvpp_vpc_resize_async(channel(), desc, pic(dst, n, 224, 224, 224, 224),
                                       media.dvpp_create_resize_config(), s2) == 0
    assert acl.rt.synchronize_device() == 0
    races = [f for f in sanitizer.analyze(acllab.current_runtime()) if f.kind == "race"]
    assert races and out in races[0].buffers


# -- a pipeline ------------------------------------------------------------------------------

def test_decode_resize_model_input_pipeline(s):
    """JPEG bytes -> DVPP decode -> VPC resize to 224 x 224 -> a D2D copy into the model's
    input buffer, all on one stream; the trace shows every stage in order."""
    rgb = smooth_rgb(500, 375)
    jpeg = make_jpeg(rgb)
    hp = acl.util.bytes_to_ptr(jpeg)
    w, h, _c, ret = media.dvpp_jpeg_get_image_info(hp, len(jpeg))
    assert (w, h, ret) == (500, 375, 0)
    desc, out, _ = decode(jpeg, s)
    media.dvpp_set_pic_desc_width(desc, 500)
    media.dvpp_set_pic_desc_height(desc, 376)
    media.dvpp_set_pic_desc_width_stride(desc, 512)
    media.dvpp_set_pic_desc_height_stride(desc, 384)
    n = 224 * 224 * 3 // 2
    resized, _ = media.dvpp_malloc(n)
    assert media.dvpp_vpc_resize_async(channel(), desc, pic(resized, n, 224, 224, 224, 224),
                                       media.dvpp_create_resize_config(), s) == 0
    model_in, _ = acl.rt.malloc(n, acl.ACL_MEM_MALLOC_HUGE_FIRST)
    assert acl.rt.memcpy_async(model_in, n, resized, n, acl.ACL_MEMCPY_DEVICE_TO_DEVICE, s) == 0
    assert acl.rt.synchronize_stream(s) == 0
    tasks = [t for t in acllab.current_runtime().engine.tasks if t.stream is not None]
    names = [t.name for t in tasks]
    assert names[-3:] == ["JpegDecode", "VpcResize", "MemcpyDeviceToDevice"]
    assert all(b.start_ns >= a.end_ns for a, b in itertools.pairwise(tasks))
    y, _ = planes(model_in, 224, 224, 224, 224)
    ref_y, _ = reference_ycbcr(rgb)
    assert np.abs(y - _bilinear(ref_y, 224, 224)).mean() < 2.0
    chrome = trace.to_chrome_trace(acllab.current_runtime())
    assert {"JpegDecode", "VpcResize"} <= {e.get("name") for e in chrome["traceEvents"]}
    assert not [f for f in sanitizer.analyze(acllab.current_runtime()) if f.kind == "race"]


def test_encode_time_is_latency_plus_pixels_over_rate(s):
    n = 64 * 64 * 3 // 2
    src, _ = media.dvpp_malloc(n)
    assert acl.rt.memset(src, n, 128, n) == 0
    cfg = media.dvpp_create_jpege_config()
    desc = pic(src, n, 64, 64, 64, 64)
    size, _ = media.dvpp_jpeg_predict_enc_size(desc, cfg)
    dst, _ = media.dvpp_malloc(size)
    assert media.dvpp_jpeg_encode_async(channel(), desc, dst, size, cfg, s) == 0
    assert acl.rt.synchronize_stream(s) == 0
    (t,) = _tasks()
    assert t.engine_name == "JPEGE (device 0)"
    assert t.end_ns - t.start_ns == P.dvpp_task_ns + ceil_div(64 * 64 * 10**9,
                                                              P.jpege_pixels_per_s)


def test_dvpp_free_while_a_decode_is_queued_is_a_use_after_free(s):
    jpeg = make_jpeg(smooth_rgb(256, 256))
    desc, out, _ = decode(jpeg, s)
    assert media.dvpp_free(out) == 0           # no implicit synchronisation
    assert acl.rt.synchronize_stream(s) == 0
    found = [f for f in sanitizer.analyze(acllab.current_runtime())
             if f.kind == "use-after-free"]
    assert found and out in found[0].buffers


@pytest.mark.parametrize("seed", range(6))
def test_random_crops_are_exact(s, seed):
    rng = np.random.default_rng(seed)
    w, h, ws = 96, 64, 96
    n = ws * h * 3 // 2
    src, _ = media.dvpp_malloc(n)
    content = rng.integers(0, 256, n, dtype=np.uint8)
    acllab.current_runtime().region(src).data[:n] = content
    y_in, uv_in = F.split_planes(content, w, h, ws, h, NV12)
    left, top = 2 * int(rng.integers(0, 20)), 2 * int(rng.integers(0, 20))
    cw, ch_ = 2 * int(rng.integers(5, (w - left) // 2 + 1)), 2 * int(rng.integers(3,
                                                                               (h - top) // 2 + 1))
    ows = max(32, F.align_up(cw, 16))          # VPC strides are 32 to 16384
    m = ows * ch_ * 3 // 2
    dst, _ = media.dvpp_malloc(m)
    roi = media.dvpp_create_roi_config(left, left + cw - 1, top, top + ch_ - 1)
    assert media.dvpp_vpc_crop_async(channel(), pic(src, n, w, h, ws, h),
                                     pic(dst, m, cw, ch_, ows, ch_), roi, s) == 0
    assert acl.rt.synchronize_stream(s) == 0
    y, uv = planes(dst, cw, ch_, ows, ch_)
    assert np.array_equal(y, y_in[top:top + ch_, left:left + cw])
    assert np.array_equal(uv, uv_in[top // 2:(top + ch_) // 2, left // 2:(left + cw) // 2])


def test_sanitizer_names_dvpp_free_in_a_use_after_free(s):
    desc, out, _ = decode(make_jpeg(smooth_rgb(320, 240)), s)
    assert media.dvpp_free(out) == 0                  # the decode is still queued
    acl.rt.synchronize_stream(s)
    found = [f for f in sanitizer.analyze(acllab.current_runtime())
             if f.kind == "use-after-free"]
    assert len(found) == 1
    assert f"acl.media.dvpp_free(0x{out:x})" in found[0].message
    assert "acl.rt.free(" not in found[0].message
