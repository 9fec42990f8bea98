"""acl.media conformance: pyACL's calling conventions and the real error codes of bad input.

Pixels, timing and pipelines are in test_acl_media_pixels.py; the helpers below are shared.
"""

from __future__ import annotations

import io

import numpy as np
import pytest
from conftest import accounting, expect_code, no_acl_warnings, setup_device
from PIL import Image

import acllab
from acllab import acl
from acllab.acl import media

NV12, NV21 = media.PIXEL_FORMAT_YUV_SEMIPLANAR_420, media.PIXEL_FORMAT_YVU_SEMIPLANAR_420
H2D, D2H = acl.ACL_MEMCPY_HOST_TO_DEVICE, acl.ACL_MEMCPY_DEVICE_TO_HOST


# -- helpers (also imported by test_acl_media_pixels) -----------------------------------------

def smooth_rgb(w: int, h: int) -> np.ndarray:
    """A smooth test picture (ramps and a soft blob), which JPEG keeps close to the original."""
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float64)
    blob = 255 * np.exp(-((xx - w / 3) ** 2 + (yy - h / 2) ** 2) / (2 * (min(w, h) / 4) ** 2))
    rgb = np.dstack([xx * 255 / max(w - 1, 1), yy * 255 / max(h - 1, 1), blob])
    return np.clip(np.rint(rgb), 0, 255).astype(np.uint8)


def make_jpeg(rgb: np.ndarray, quality: int = 95, **kw) -> bytes:
    out = io.BytesIO()
    Image.fromarray(rgb).save(out, format="JPEG", quality=quality, **kw)
    return out.getvalue()


def pic(data: int, size: int, w: int = 0, h: int = 0, ws: int = 0, hs: int = 0,
        fmt: int = NV12) -> int:
    desc = media.dvpp_create_pic_desc()
    for field, value in (("data", data), ("size", size), ("format", fmt), ("width", w),
                         ("height", h), ("width_stride", ws), ("height_stride", hs)):
        assert getattr(media, f"dvpp_set_pic_desc_{field}")(desc, value) == 0
    return desc


def upload(data: bytes, stream: int) -> int:
    """The bytes in fresh DVPP memory (a pinned host buffer, then an async copy)."""
    n = len(data)
    host, ret = acl.rt.malloc_host(n)
    assert ret == 0
    acllab.current_runtime().region(host).data[:n] = np.frombuffer(data, np.uint8)
    dev, ret = media.dvpp_malloc(n)
    assert ret == 0
    assert acl.rt.memcpy_async(dev, n, host, n, H2D, stream) == 0
    return dev


def download(ptr: int, n: int) -> np.ndarray:
    host, ret = acl.rt.malloc_host(n)
    assert ret == 0
    assert acl.rt.memcpy(host, n, ptr, n, D2H) == 0
    return acllab.current_runtime().region(host).data[:n].copy()


def channel() -> int:
    ch = media.dvpp_create_channel_desc()
    assert ch != 0
    assert media.dvpp_create_channel(ch) == 0
    return ch


def decode(jpeg: bytes, stream: int, fmt: int = NV12, ch: int | None = None):
    """Submit a decode of ``jpeg``; return (output desc, output ptr, output size)."""
    ch = ch or channel()
    hp = acl.util.bytes_to_ptr(jpeg)
    size, ret = media.dvpp_jpeg_predict_dec_size(hp, len(jpeg), fmt)
    assert ret == 0
    out, ret = media.dvpp_malloc(size)
    assert ret == 0
    desc = pic(out, size, fmt=fmt)
    src = upload(jpeg, stream)
    assert media.dvpp_jpeg_decode_async(ch, src, len(jpeg), desc, stream) == 0
    return desc, out, size


@pytest.fixture
def s(fresh):
    return setup_device()


# -- calling conventions ---------------------------------------------------------------------

def test_constants_are_acl_media_values():
    assert (media.PIXEL_FORMAT_YUV_400, NV12, NV21, media.PIXEL_FORMAT_UNKNOWN) == \
        (0, 1, 2, 10000)
    assert acl.media is media


def test_return_conventions(s):
    with no_acl_warnings():
        ptr, ret = media.dvpp_malloc(1000)
        assert ret == 0 and ptr % 128 == 0
        ch = media.dvpp_create_channel_desc()
        assert isinstance(ch, int) and ch != 0
        assert media.dvpp_create_channel(ch) == 0
        desc = pic(ptr, 1000, 16, 10, 16, 10)
        assert [media.dvpp_get_pic_desc_data(desc), media.dvpp_get_pic_desc_size(desc),
                media.dvpp_get_pic_desc_format(desc), media.dvpp_get_pic_desc_width(desc),
                media.dvpp_get_pic_desc_height(desc), media.dvpp_get_pic_desc_width_stride(desc),
                media.dvpp_get_pic_desc_height_stride(desc)] == [ptr, 1000, NV12, 16, 10, 16, 10]
        # acldvppGetPicDescRetCode: 0 success (CANN documentation, "acldvppGetPicDesc series")
        assert media.dvpp_get_pic_desc_ret_code(desc) == 0
        roi = media.dvpp_create_roi_config(0, 15, 0, 9)
        rc = media.dvpp_create_resize_config()
        jc = media.dvpp_create_jpege_config()
        assert all(isinstance(h, int) and h for h in (roi, rc, jc))
        assert media.dvpp_set_jpege_config_level(jc, 90) == 0
        for fn, h in ((media.dvpp_destroy_roi_config, roi),
                      (media.dvpp_destroy_resize_config, rc),
                      (media.dvpp_destroy_jpege_config, jc),
                      (media.dvpp_destroy_pic_desc, desc),
                      (media.dvpp_destroy_channel, ch),
                      (media.dvpp_destroy_channel_desc, ch)):
            assert fn(h) == 0
        assert media.dvpp_free(ptr) == 0
    names = [name for name, *_ in acllab.current_runtime().api_log]
    assert "dvpp_set_pic_desc_width_stride" in names and "dvpp_jpeg_decode_async" not in names


def test_image_info_and_predicted_size(s):
    jpeg = make_jpeg(smooth_rgb(417, 301))
    hp = acl.util.bytes_to_ptr(jpeg)
    assert media.dvpp_jpeg_get_image_info(hp, len(jpeg)) == (417, 301, 3, 0)
    grey = make_jpeg(smooth_rgb(64, 48)[:, :, 0])
    assert media.dvpp_jpeg_get_image_info(acl.util.bytes_to_ptr(grey), len(grey))[2:] == (1, 0)
    # width 417 -> 418 -> stride 512 (128-aligned); height 301 -> 302 -> 304 (16-aligned)
    assert media.dvpp_jpeg_predict_dec_size(hp, len(jpeg), NV12) == (512 * 304 * 3 // 2, 0)


def test_predicted_size_on_atlas_a2_uses_64_alignment(fresh):
    acllab.configure("ascend910b")
    setup_device()
    jpeg = make_jpeg(smooth_rgb(417, 301))
    assert media.dvpp_jpeg_predict_dec_size(acl.util.bytes_to_ptr(jpeg), len(jpeg), NV12) == \
        (448 * 304 * 3 // 2, 0)


def test_decode_fills_the_output_description(s):
    desc, _out, _size = decode(make_jpeg(smooth_rgb(417, 301)), s)
    assert media.dvpp_get_pic_desc_width(desc) == 0      # not before the task has run
    assert acl.rt.synchronize_stream(s) == 0
    assert (media.dvpp_get_pic_desc_width(desc), media.dvpp_get_pic_desc_height(desc),
            media.dvpp_get_pic_desc_width_stride(desc),
            media.dvpp_get_pic_desc_height_stride(desc)) == (418, 302, 512, 304)


def test_messages_name_acl_media(s):
    with expect_code(100000) as record:
        media.dvpp_malloc(0)
    assert "acl.media.dvpp_malloc (acldvppMalloc)" in str(record[0].message)
    assert "acldvppMalloc" in acl.get_recent_err_msg()


def test_needs_init(fresh):
    with expect_code(100001):
        assert media.dvpp_malloc(64) == (0, 100001)
    assert media.dvpp_get_pic_desc_width(0) == 0


# -- bad input: the real codes, and nothing changes ------------------------------------------

def _check(code: int, call, *args, bare: bool = False):
    """The call fails with ``code`` (a bare call returns 0) and changes nothing."""
    before = accounting()
    with expect_code(code):
        result = call(*args)
    assert result == 0 if bare else (result if isinstance(result, int) else result[-1]) == code
    assert accounting() == before
    return result


def test_memory_errors(s):
    _check(100000, media.dvpp_malloc, 0)
    _check(100000, media.dvpp_malloc, -5)
    ptr, _ = acl.rt.malloc(1024, 0)
    _check(100000, media.dvpp_free, ptr)              # acl.rt.malloc memory
    _check(100000, media.dvpp_free, 0)
    dp, _ = media.dvpp_malloc(1024)
    _check(100000, media.dvpp_free, dp + 64)
    assert media.dvpp_free(dp) == 0
    _check(207002, media.dvpp_free, dp)               # double free
    with pytest.raises(TypeError):
        media.dvpp_malloc("1024")


def test_dvpp_memory_window(fresh):
    profile = acllab.hardware.PROFILES["ascend310"].replace(dvpp_memory_bytes=4 * 2**20)
    acllab.configure(profile)
    setup_device()
    ptr, ret = media.dvpp_malloc(3 * 2**20)
    assert ret == 0
    _check(207001, media.dvpp_malloc, 2 * 2**20)
    assert media.dvpp_free(ptr) == 0
    assert media.dvpp_malloc(2 * 2**20)[1] == 0


def test_handle_errors(s):
    ch = media.dvpp_create_channel_desc()
    jpeg = make_jpeg(smooth_rgb(64, 64))
    src = upload(jpeg, s)
    out, _ = media.dvpp_malloc(128 * 64 * 3 // 2)
    desc = pic(out, 128 * 64 * 3 // 2)
    _check(100000, media.dvpp_jpeg_decode_async, ch, src, len(jpeg), desc, s)   # no channel
    assert media.dvpp_create_channel(ch) == 0
    _check(100000, media.dvpp_create_channel, ch)                               # twice
    _check(100000, media.dvpp_jpeg_decode_async, ch, src, len(jpeg), ch, s)     # wrong kind
    _check(100000, media.dvpp_jpeg_decode_async, 0, src, len(jpeg), desc, s)
    roi = media.dvpp_create_roi_config(0, 9, 0, 5)
    assert media.dvpp_destroy_roi_config(roi) == 0
    _check(100000, media.dvpp_destroy_roi_config, roi)                          # destroyed
    with expect_code(100000):
        assert media.dvpp_get_pic_desc_width(roi) == 0
    _check(100000, media.dvpp_set_pic_desc_format, desc, 77)
    _check(100000, media.dvpp_set_pic_desc_width, desc, -1)
    jc = media.dvpp_create_jpege_config()
    _check(100000, media.dvpp_set_jpege_config_level, jc, 101)
    _check(100000, media.dvpp_create_roi_config, -2, 9, 0, 5, bare=True)


def test_decode_input_must_be_dvpp_memory(s):
    ch = channel()
    jpeg = make_jpeg(smooth_rgb(64, 64))
    out, _ = media.dvpp_malloc(128 * 64 * 3 // 2)
    desc = pic(out, 128 * 64 * 3 // 2)
    host, _ = acl.rt.malloc_host(len(jpeg))
    dev, _ = acl.rt.malloc(len(jpeg), 0)
    for bad in (host, dev, acl.util.bytes_to_ptr(jpeg)):
        _check(100000, media.dvpp_jpeg_decode_async, ch, bad, len(jpeg), desc, s)
    src, _ = media.dvpp_malloc(len(jpeg))
    _check(100000, media.dvpp_jpeg_decode_async, ch, src, len(jpeg) + 4096, desc, s)
    odev, _ = acl.rt.malloc(128 * 64 * 3 // 2, 0)
    _check(100000, media.dvpp_jpeg_decode_async, ch, src, len(jpeg),
           pic(odev, 128 * 64 * 3 // 2), s)


def test_decode_output_strides_must_be_aligned(s):
    ch = channel()
    jpeg = make_jpeg(smooth_rgb(64, 64))
    src = upload(jpeg, s)
    out, _ = media.dvpp_malloc(256 * 64 * 3 // 2)
    _check(100000, media.dvpp_jpeg_decode_async, ch, src, len(jpeg),
           pic(out, 256 * 64 * 3 // 2, 64, 64, 64, 64), s)          # width stride 64 on a 310
    _check(100000, media.dvpp_jpeg_decode_async, ch, src, len(jpeg),
           pic(out, 256 * 64 * 3 // 2, 64, 64, 128, 72), s)         # height stride 72
    _check(200006, media.dvpp_jpeg_decode_async, ch, src, len(jpeg),
           pic(out, 256 * 64 * 3 // 2, fmt=media.PIXEL_FORMAT_YUV_400), s)
    _check(100000, media.dvpp_jpeg_decode_async, ch, src, len(jpeg), pic(out, 0), s)


def test_corrupt_jpeg(s):
    good = make_jpeg(smooth_rgb(64, 64))
    for bad in (b"not a jpeg at all", good[:200]):
        hp = acl.util.bytes_to_ptr(bad)
        with expect_code(100000):
            assert media.dvpp_jpeg_get_image_info(hp, len(bad)) == (0, 0, 0, 100000)
        with expect_code(100000):
            assert media.dvpp_jpeg_predict_dec_size(hp, len(bad), NV12) == (0, 100000)
    # the decode call only queues the task; its fault surfaces at the synchronisation
    ch = channel()
    out, _ = media.dvpp_malloc(128 * 64 * 3 // 2)
    for bad in (b"\x00" * 64, good[:len(good) // 2]):
        src = upload(bad, s)
        assert media.dvpp_jpeg_decode_async(ch, src, len(bad), pic(out, 128 * 64 * 3 // 2),
                                            s) == 0
        with expect_code(507000):
            assert acl.rt.synchronize_stream(s) == 507000


def test_decode_buffer_too_small_is_a_fault(s):
    ch = channel()
    jpeg = make_jpeg(smooth_rgb(200, 100))
    src = upload(jpeg, s)
    out, _ = media.dvpp_malloc(128 * 112 * 3 // 2)
    assert media.dvpp_jpeg_decode_async(ch, src, len(jpeg), pic(out, 128 * 112 * 3 // 2),
                                        s) == 0
    with expect_code(507000) as record:
        acl.rt.synchronize_stream(s)
    assert "256 x 112" in str(record[0].message)


def _vpc_setup(s):
    ch = channel()
    n = 64 * 32 * 3 // 2
    a, _ = media.dvpp_malloc(n)
    b, _ = media.dvpp_malloc(n)
    return ch, a, b, n, media.dvpp_create_resize_config()


def test_vpc_picture_rules(s):
    ch, a, b, n, rc = _vpc_setup(s)
    good_in, good_out = pic(a, n, 64, 32, 64, 32), pic(b, n, 32, 16, 32, 16)
    with no_acl_warnings():
        assert media.dvpp_vpc_resize_async(ch, good_in, good_out, rc, s) == 0
    bad = [pic(a, n, 64, 32, 72, 32),        # width stride not 16-aligned
           pic(a, n, 64, 31, 64, 31),        # height stride odd
           pic(a, n - 1, 64, 32, 64, 32),    # buffer smaller than 64 * 32 * 3 / 2
           pic(a, n, 64, 32, 48, 32),        # stride narrower than the picture
           pic(a, n, 8, 32, 64, 32),         # narrower than 10
           pic(a + 64 * 32, n, 64, 32, 64, 32)]  # runs past the end of its buffer
    for desc in bad:
        _check(100000, media.dvpp_vpc_resize_async, ch, desc, good_out, rc, s)
    _check(100000, media.dvpp_vpc_resize_async, ch, good_in, pic(b, n, 31, 16, 32, 16), rc, s)
    _check(100000, media.dvpp_vpc_resize_async, ch, good_in, good_in, rc, s)
    _check(100000, media.dvpp_vpc_resize_async, ch, good_in, good_out, ch, s)
    host, _ = acl.rt.malloc_host(n)
    _check(100000, media.dvpp_vpc_resize_async, ch, pic(host, n, 64, 32, 64, 32), good_out,
           rc, s)


def test_crop_area_rules(s):
    ch, a, b, n, _rc = _vpc_setup(s)
    inp, out = pic(a, n, 64, 32, 64, 32), pic(b, n, 16, 16, 16, 16)
    for area in ((1, 16, 0, 15), (0, 15, 1, 16), (0, 14, 0, 15), (0, 15, 0, 14),
                 (0, 7, 0, 15), (0, 65, 0, 15), (0, 15, 0, 33)):
        roi = media.dvpp_create_roi_config(*area)
        _check(100000, media.dvpp_vpc_crop_async, ch, inp, out, roi, s)
    # scaling beyond 1/32 .. 16
    big, _ = media.dvpp_malloc(1024 * 1024 * 3 // 2)
    _check(100000, media.dvpp_vpc_crop_async, ch, inp, pic(big, 1024 * 1024 * 3 // 2, 1024,
                                                           1024, 1024, 1024),
           media.dvpp_create_roi_config(0, 15, 0, 15), s)
    # a paste area's left offset must be a multiple of 16
    canvas = pic(b, n, 64, 32, 64, 32)
    _check(100000, media.dvpp_vpc_crop_and_paste_async, ch, inp, canvas,
           media.dvpp_create_roi_config(0, 15, 0, 15), media.dvpp_create_roi_config(8, 23, 0, 15),
           s)


def test_jpege_rules(s):
    ch = channel()
    n = 64 * 64 * 3 // 2
    a, _ = media.dvpp_malloc(n)
    jc = media.dvpp_create_jpege_config()
    good = pic(a, n, 64, 64, 64, 64)
    size, ret = media.dvpp_jpeg_predict_enc_size(good, jc)
    assert ret == 0 and size >= n
    out, _ = media.dvpp_malloc(size)
    for bad in (pic(a, n, 63, 64, 64, 64), pic(a, n, 64, 64, 72, 64), pic(a, n, 64, 64, 64, 66),
                pic(a, n, 16, 16, 16, 16), pic(a, n - 1, 64, 64, 64, 64)):
        _check(100000, media.dvpp_jpeg_predict_enc_size, bad, jc)
        _check(100000, media.dvpp_jpeg_encode_async, ch, bad, out, size, jc, s)
    host, _ = acl.rt.malloc_host(size)
    _check(100000, media.dvpp_jpeg_encode_async, ch, good, host, size, jc, s)
    _check(100000, media.dvpp_jpeg_encode_async, ch, good, out, size + 4096, jc, s)


# -- the media engines are the device's resources -------------------------------------------

def test_decode_runs_on_a_device_engine_in_the_trace(s):
    from acllab import session
    from acllab.analysis import stepper, trace

    runtime = session.current_runtime()
    dev = runtime.devices[0]
    decode(make_jpeg(smooth_rgb(417, 301)), s)
    assert acl.rt.synchronize_stream(s) == 0
    assert dev.jpegd in dev.resources and dev.vpc in dev.resources
    assert trace.resolve_resource(runtime, "jpegd") is dev.jpegd
    task = next(t for t in runtime.engine.tasks if t.name == "JpegDecode")
    assert trace.busy_ns(runtime, "jpegd") == task.end_ns - task.start_ns > 0
    assert trace.busy_ns(runtime, "vpc") == 0
    assert trace.utilisation(runtime, "jpegd") > 0
    assert "JPEGD" in trace.summary(runtime)
    events = trace.to_chrome_trace(runtime)["traceEvents"]
    rows = {(e["pid"], e["tid"]): e["args"]["name"] for e in events
            if e["ph"] == "M" and e["name"] == "thread_name"}
    on_engine = [e for e in events if e["ph"] == "X" and e["name"] == "JpegDecode"
                 and rows[(e["pid"], e["tid"])] == "JPEGD"]
    assert len(on_engine) == 1 and on_engine[0]["pid"] == 2
    assert {"VPC", "JPEGE"} <= set(rows.values())
    names = [e.name for e in stepper.snapshot(runtime, task.start_ns).engines]
    assert "JPEGD" in names


def test_programs_without_dvpp_show_no_media_engines(fresh):
    from acllab import session
    from acllab.analysis import trace

    setup_device()
    ptr, _ = acl.rt.malloc(64, 0)
    acl.rt.memset(ptr, 64, 0, 64)
    runtime = session.current_runtime()
    events = trace.to_chrome_trace(runtime)["traceEvents"]
    labels = {e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "thread_name"}
    assert not labels & {"JPEGD", "VPC", "JPEGE"}
    assert not runtime.devices[0].has_dvpp
    assert trace.busy_ns(runtime, "jpegd") == 0
