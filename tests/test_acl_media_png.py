"""PNGD: acl.media.dvpp_png_get_image_info / _predict_dec_size / _decode_async.

The facts checked, with their sources (see acllab.dvpp.png):
* CANN's AscendCL image processor for the Ascend 310 (image_processor_v100): a PNG of more
  than 29 bytes with the signature, else ACL_ERROR_INVALID_PARAM; components 1 / 2 / 3 / 4 for
  colour types 0 / 4 / 2 / 6, another (palette) ACL_ERROR_FORMAT_NOT_MATCH 100027; the
  prediction (align(w, 128) * bit depth * 3 or 4 + 7) >> 3 bytes a row times align(h, 16),
  for 32 x 32 to 4096 x 4096 pictures; the decode takes RGB888 or UNKNOWN only (100027).
* CANN 8.0.0 AscendCL docs, "PNGD functions and restrictions": RGB888 from every source,
  UNKNOWN as the source (RGBA8888 from RGBA and grey + alpha); width stride = the width
  aligned to 128, times 3 (RGB888) or 4 (RGBA8888); height stride = the height aligned to 16;
  the picture keeps its size.
* PNGD performance (pyACL docs, CANN 5.0.4, Ascend 310): 1080p n x 4 fps for n <= 5, 24 in
  all: six units.

Expected pixels come from the arrays the PNGs were made from, never from Pillow's decoder.
"""

from __future__ import annotations

import io
import struct
import sys
import zlib

import numpy as np
import pytest
from conftest import accounting, expect_code, no_acl_warnings, setup_device
from PIL import Image
from test_acl_media import channel, download, pic, upload

import acllab
from acllab import acl
from acllab.acl import media
from acllab.analysis import sanitizer

RGB, RGBA, UNKNOWN = (media.PIXEL_FORMAT_RGB_888, media.PIXEL_FORMAT_RGBA_8888,
                      media.PIXEL_FORMAT_UNKNOWN)
NV12 = media.PIXEL_FORMAT_YUV_SEMIPLANAR_420
FILL = 0xA5                          # what the output buffer holds before the decode


@pytest.fixture
def s(fresh):
    return setup_device()


# -- PNGs: Pillow's, and hand-made ones (16-bit colour, low depths, Adam7) ----------------------

def pillow_png(arr: np.ndarray, mode: str | None = None, **kw) -> bytes:
    out = io.BytesIO()
    Image.fromarray(arr, mode).save(out, format="PNG", **kw) if mode else \
        Image.fromarray(arr).save(out, format="PNG", **kw)
    return out.getvalue()


def palette_png() -> bytes:
    """A 40 x 40 palette PNG of 256 colours (8-bit indices)."""
    img = Image.fromarray(noise(40, 40, 0, 1).astype(np.uint8), "P")
    img.putpalette([v for i in range(256) for v in (i, 255 - i, i // 2)])
    out = io.BytesIO()
    img.save(out, format="PNG")
    assert out.getvalue()[24:26] == b"\x08\x03"
    return out.getvalue()


def _chunk(kind: bytes, body: bytes) -> bytes:
    return struct.pack(">I", len(body)) + kind + body + struct.pack(
        ">I", zlib.crc32(kind + body) & 0xFFFFFFFF)


_ADAM7 = ((0, 0, 8, 8), (4, 0, 8, 8), (0, 4, 4, 8), (2, 0, 4, 4), (0, 2, 2, 4), (1, 0, 2, 2),
          (0, 1, 1, 2))


def raw_png(samples: np.ndarray, colour_type: int, bit_depth: int = 8,
            interlace: bool = False) -> bytes:
    """A PNG of ``samples`` ((h, w) or (h, w, c) integers) written sample by sample, filter 0:
    16-bit samples big-endian, low depths packed MSB first; Adam7 when ``interlace``."""
    a = samples if samples.ndim == 3 else samples[:, :, None]
    h, w = a.shape[:2]

    def rows(img):
        out = b""
        for row in img:
            if bit_depth == 16:
                data = row.astype(">u2").tobytes()
            elif bit_depth == 8:
                data = row.astype(np.uint8).tobytes()
            else:
                data = np.packbits(np.unpackbits(row.astype(np.uint8).reshape(-1, 1),
                                                 axis=1)[:, 8 - bit_depth:].reshape(-1)).tobytes()
            out += b"\x00" + data
        return out

    if interlace:
        body = b"".join(rows(a[y0::dy, x0::dx]) for x0, y0, dx, dy in _ADAM7
                        if a[y0::dy, x0::dx].size)
    else:
        body = rows(a)
    ihdr = struct.pack(">IIBBBBB", w, h, bit_depth, colour_type, 0, 0, int(interlace))
    return (b"\x89PNG\r\n\x1a\n" + _chunk(b"IHDR", ihdr) + _chunk(b"IDAT", zlib.compress(body))
            + _chunk(b"IEND", b""))


def noise(h: int, w: int, c: int = 0, seed: int = 0, top: int = 256) -> np.ndarray:
    shape = (h, w, c) if c else (h, w)
    return np.random.default_rng(seed).integers(0, top, shape, dtype=np.int64)


def align(v: int, a: int) -> int:
    return -(-v // a) * a


# -- sources: (PNG bytes, the RGB888 picture, the UNKNOWN format, the UNKNOWN picture) -----------

def _case(name: str):
    h, w = 45, 33                                 # odd sizes: nothing aligned
    if name == "rgb":
        a = noise(h, w, 3).astype(np.uint8)
        return pillow_png(a), a, RGB, a
    if name == "rgba":
        a = noise(h, w, 4, 1).astype(np.uint8)
        return pillow_png(a, "RGBA"), a[..., :3], RGBA, a
    if name == "grey":
        g = noise(h, w, 0, 2).astype(np.uint8)
        rgb = np.dstack([g, g, g])
        return pillow_png(g, "L"), rgb, RGB, rgb
    if name == "grey_alpha":
        la = noise(h, w, 2, 3).astype(np.uint8)
        rgb = np.dstack([la[..., 0]] * 3)
        return pillow_png(la, "LA"), rgb, RGBA, np.dstack([rgb, la[..., 1]])
    if name == "grey16":
        g = noise(h, w, 0, 4, 65536)
        hi = (g >> 8).astype(np.uint8)
        rgb = np.dstack([hi] * 3)
        return pillow_png(g.astype(np.uint16)), rgb, RGB, rgb
    if name == "rgb16":
        a = noise(h, w, 3, 5, 65536)
        hi = (a >> 8).astype(np.uint8)
        return raw_png(a, 2, 16), hi, RGB, hi
    if name == "rgba16":
        a = noise(h, w, 4, 6, 65536)
        hi = (a >> 8).astype(np.uint8)
        return raw_png(a, 6, 16), hi[..., :3], RGBA, hi
    if name == "grey_alpha16":
        a = noise(h, w, 2, 7, 65536)
        hi = (a >> 8).astype(np.uint8)
        rgb = np.dstack([hi[..., 0]] * 3)
        return raw_png(a, 4, 16), rgb, RGBA, np.dstack([rgb, hi[..., 1]])
    if name == "rgb_adam7":
        a = noise(h, w, 3, 8)
        return raw_png(a, 2, 8, interlace=True), a.astype(np.uint8), RGB, a.astype(np.uint8)
    if name == "rgba_adam7_16":
        a = noise(h, w, 4, 9, 65536)
        hi = (a >> 8).astype(np.uint8)
        return raw_png(a, 6, 16, interlace=True), hi[..., :3], RGBA, hi
    if name == "grey4":                           # 4-bit greyscale: 0..15 scaled to 0..255
        g = noise(h, w, 0, 10, 16)
        v = (g * 17).astype(np.uint8)
        rgb = np.dstack([v] * 3)
        return raw_png(g, 0, 4), rgb, RGB, rgb
    if name == "grey1":
        g = noise(h, w, 0, 11, 2)
        v = (g * 255).astype(np.uint8)
        rgb = np.dstack([v] * 3)
        return raw_png(g, 0, 1), rgb, RGB, rgb
    raise AssertionError(name)


CASES = ["rgb", "rgba", "grey", "grey_alpha", "grey16", "rgb16", "rgba16", "grey_alpha16",
         "rgb_adam7", "rgba_adam7_16", "grey4", "grey1"]


def test_the_hand_made_pngs_are_real_pngs():
    """Pillow reads the hand-made PNGs back as their samples (so they test PNGD, not a bug
    of the writer)."""
    a = noise(45, 33, 3, 8)
    for data in (raw_png(a, 2), raw_png(a, 2, interlace=True)):
        assert (np.asarray(Image.open(io.BytesIO(data))) == a).all()
    g = noise(45, 33, 0, 10, 16)
    assert (np.asarray(Image.open(io.BytesIO(raw_png(g, 0, 4)))) == g * 17).all()


# -- the header calls -------------------------------------------------------------------------

@pytest.mark.parametrize(("name", "components"), [
    ("rgb", 3), ("rgba", 4), ("grey", 1), ("grey_alpha", 2), ("grey16", 1), ("rgb16", 3),
    ("rgba16", 4), ("grey_alpha16", 2), ("rgb_adam7", 3), ("grey1", 1)])
def test_get_image_info(s, name, components):
    data = _case(name)[0]
    hp = acl.util.bytes_to_ptr(data)
    with no_acl_warnings():
        assert media.dvpp_png_get_image_info(hp, len(data)) == (33, 45, components, 0)


def test_predict_dec_size_is_canns_formula(s):
    """align(w, 128) * bit depth * 3 or 4 bits a row (bytes, rounded up) times align(h, 16):
    each figure written out by hand for a 33 x 45 picture (128 x 48 aligned)."""
    want = {  # (case, format): bytes
        ("rgb", RGB): 128 * 3 * 48, ("rgb", RGBA): 128 * 4 * 48, ("rgb", UNKNOWN): 128 * 4 * 48,
        ("grey", RGB): 18432, ("grey_alpha", UNKNOWN): 24576,
        ("rgb16", RGB): 128 * 6 * 48, ("rgba16", UNKNOWN): 128 * 8 * 48,
        ("grey4", RGB): 128 * 12 // 8 * 48, ("grey1", RGB): 48 * 48, ("grey1", RGBA): 64 * 48,
    }
    for (name, fmt), size in want.items():
        data = _case(name)[0]
        hp = acl.util.bytes_to_ptr(data)
        assert media.dvpp_png_predict_dec_size(hp, len(data), fmt) == (size, 0), (name, fmt)
    big = pillow_png(np.zeros((4096, 4096, 4), np.uint8), "RGBA")   # the largest picture
    hp = acl.util.bytes_to_ptr(big)
    assert media.dvpp_png_predict_dec_size(hp, len(big), UNKNOWN) == (4096 * 4 * 4096, 0)


def test_header_calls_refuse_bad_data_with_canns_codes(s):
    good = _case("rgb")[0]
    before = accounting()
    for bad in (good[:29], b"GIF89a" + good[6:], b"\x00" * 64):
        hp = acl.util.bytes_to_ptr(bad)
        with expect_code(100000):
            assert media.dvpp_png_get_image_info(hp, len(bad)) == (0, 0, 0, 100000)
        with expect_code(100000):
            assert media.dvpp_png_predict_dec_size(hp, len(bad), RGB) == (0, 100000)
    # 30 bytes with the signature pass the header check, as in CANN (nothing is decoded)
    head = good[:30]
    hp = acl.util.bytes_to_ptr(head)
    assert media.dvpp_png_get_image_info(hp, 30) == (33, 45, 3, 0)
    # a palette PNG: no components (100027), but a prediction (CANN reads no colour type there)
    pal = palette_png()
    hp = acl.util.bytes_to_ptr(pal)
    with expect_code(100027):
        assert media.dvpp_png_get_image_info(hp, len(pal)) == (0, 0, 0, 100027)
    assert media.dvpp_png_predict_dec_size(hp, len(pal), RGB) == (128 * 3 * 48, 0)
    # formats: another than RGB888, RGBA8888 and UNKNOWN is 100027
    hp = acl.util.bytes_to_ptr(good)
    for fmt in (NV12, media.PIXEL_FORMAT_BGR_888, media.PIXEL_FORMAT_ARGB_8888, 77):
        with expect_code(100027):
            assert media.dvpp_png_predict_dec_size(hp, len(good), fmt) == (0, 100027)
    # pictures outside 32 x 32 to 4096 x 4096
    for h, w in ((31, 40), (40, 31), (32, 4097)):
        small = pillow_png(np.zeros((h, w), np.uint8), "L")
        hp = acl.util.bytes_to_ptr(small)
        assert media.dvpp_png_get_image_info(hp, len(small)) == (w, h, 1, 0)
        with expect_code(100000) as rec:
            assert media.dvpp_png_predict_dec_size(hp, len(small), RGB) == (0, 100000)
        assert "32 to 4096" in str(rec[0].message)
    # null, size 0
    with expect_code(100000):
        assert media.dvpp_png_get_image_info(0, 64) == (0, 0, 0, 100000)
    with expect_code(100000):
        assert media.dvpp_png_predict_dec_size(acl.util.bytes_to_ptr(good), 0, RGB)[1] == 100000
    assert accounting() == before


# -- decoding: pixels, layout, descriptor -----------------------------------------------------

def _decode(s, data: bytes, fmt: int, size: int | None = None, ws: int = 0, hs: int = 0):
    """Decode ``data`` into a buffer of ``size`` bytes (PNGD's for ``fmt`` if None) filled
    with FILL first; return (desc, ptr, size)."""
    ch = channel()
    if size is None:
        size, ret = media.dvpp_png_predict_dec_size(acl.util.bytes_to_ptr(data), len(data),
                                                    fmt)
        assert ret == 0
    out, ret = media.dvpp_malloc(size)
    assert ret == 0
    assert acl.rt.memset(out, size, FILL, size) == 0
    desc = pic(out, size, ws=ws, hs=hs, fmt=fmt)
    src = upload(data, s)
    assert media.dvpp_png_decode_async(ch, src, len(data), desc, s) == 0
    return desc, out, size


def _check_picture(desc, out, size, want: np.ndarray, fmt: int, ws: int = 0, hs: int = 0):
    h, w, bpp = want.shape
    ws = ws or align(w, 128) * bpp
    hs = hs or align(h, 16)
    assert [media.dvpp_get_pic_desc_width(desc), media.dvpp_get_pic_desc_height(desc),
            media.dvpp_get_pic_desc_width_stride(desc),
            media.dvpp_get_pic_desc_height_stride(desc),
            media.dvpp_get_pic_desc_format(desc)] == [w, h, ws, hs, fmt]
    got = download(out, size)
    plane = got[:ws * hs].reshape(hs, ws)
    assert (plane[:h, :w * bpp].reshape(h, w, bpp) == want).all()
    assert (plane[:h, w * bpp:] == FILL).all() and (plane[h:] == FILL).all()   # padding
    assert (got[ws * hs:] == FILL).all()


@pytest.mark.parametrize("name", CASES)
def test_decode_writes_the_pixels_with_pngd_strides(s, name):
    data, rgb, ufmt, upic = _case(name)
    low = name in ("grey4", "grey1")          # predicted below the RGB888 picture: see below
    for fmt, want, wfmt in ((RGB, rgb, RGB), (UNKNOWN, upic, ufmt)):
        size = align(33, 128) * want.shape[2] * 48 if low else None
        with no_acl_warnings():
            desc, out, size = _decode(s, data, fmt, size)
            assert acl.rt.synchronize_stream(s) == 0
        _check_picture(desc, out, size, want, wfmt)


def test_given_strides_are_used(s):
    data, rgb, _, _ = _case("rgb")
    ws, hs = 512 * 3, 64                        # larger than PNGD's 384 x 48
    desc, out, size = _decode(s, data, RGB, ws * hs, ws, hs)
    assert acl.rt.synchronize_stream(s) == 0
    _check_picture(desc, out, size, rgb, RGB, ws, hs)


def test_the_largest_picture_decodes(s):
    a = np.zeros((4096, 4096, 3), np.uint8)
    a[::97, :, 0] = 200
    a[:, ::89, 2] = 100
    data = pillow_png(a)
    desc, out, size = _decode(s, data, RGB)
    assert acl.rt.synchronize_stream(s) == 0
    assert size == 4096 * 3 * 4096
    got = download(out, size).reshape(4096, 4096, 3)
    assert (got == a).all()


def test_decode_task_timing_engine_and_trace(s):
    """One PngDecode task on the device's PNGD (6 units): 20 us + pixels / (1920 * 1080 * 4 / s);
    six decodes on six streams run together, a seventh waits for a unit."""
    data = _case("rgb")[0]
    streams = [s] + [acl.rt.create_stream()[0] for _ in range(6)]
    ch = channel()
    size = 128 * 3 * 48
    jobs = [(upload(data, st), pic(media.dvpp_malloc(size)[0], size, fmt=RGB), st)
            for st in streams]
    assert acl.rt.synchronize_device() == 0
    for src, desc, st in jobs:
        assert media.dvpp_png_decode_async(ch, src, len(data), desc, st) == 0
    assert acl.rt.synchronize_device() == 0
    r = acllab.current_runtime()
    tasks = [t for t in r.engine.tasks if t.name == "PngDecode"]
    assert len(tasks) == 7 and {t.engine_name for t in tasks} == {"PNGD (device 0)"}
    want = 20_000 + -(-33 * 45 * 1_000_000_000 // 8_294_400)
    assert {t.end_ns - t.start_ns for t in tasks} == {want}
    starts = sorted(t.start_ns for t in tasks)
    assert starts[5] < min(t.end_ns for t in tasks) <= starts[6]
    assert tasks[0].info["engine"] == "PNGD" and tasks[0].info["format"] == "RGB888"


def test_a_jpeg_only_program_has_no_pngd_lane(s):
    from test_acl_media import decode, make_jpeg, smooth_rgb

    decode(make_jpeg(smooth_rgb(64, 64)), s)
    assert acl.rt.synchronize_stream(s) == 0
    names = [res.name for res in acllab.current_runtime().devices[0].resources]
    assert "PNGD (device 0)" not in names and "JPEGD (device 0)" in names


def test_same_program_same_trace(fresh):
    def run():
        acllab.reset()
        s = setup_device()
        for name in ("rgba", "grey16"):
            _decode(s, _case(name)[0], UNKNOWN)
        acl.rt.synchronize_stream(s)
        from acllab.analysis import trace
        return trace.records(acllab.current_runtime()), acllab.current_runtime().api_log

    assert run() == run()


def test_sanitizer_sees_a_read_of_the_output_before_the_decode_ends(s):
    data = _case("rgb")[0]
    desc, out, size = _decode(s, data, RGB)
    other, _ = acl.rt.create_stream()
    host, _ = acl.rt.malloc_host(size)
    assert acl.rt.memcpy_async(host, size, out, size, acl.ACL_MEMCPY_DEVICE_TO_HOST, other) == 0
    acl.rt.synchronize_device()
    races = [f for f in sanitizer.analyze(acllab.current_runtime()) if f.kind == "race"]
    assert any("PngDecode" in str(f) for f in races), races


def test_910b_profile_has_the_same_rules(fresh):
    acllab.configure("ascend910b")
    s = setup_device()
    data, _, ufmt, upic = _case("rgba")
    desc, out, size = _decode(s, data, UNKNOWN)
    assert acl.rt.synchronize_stream(s) == 0
    _check_picture(desc, out, size, upic, ufmt)


# -- decoding: bad input ----------------------------------------------------------------------

def test_decode_call_codes(s):
    data = _case("rgb")[0]
    src = upload(data, s)
    ch = channel()
    size = 128 * 4 * 48
    out, _ = media.dvpp_malloc(size)
    descs = [pic(out, size, fmt=fmt) for fmt in (RGBA, NV12, media.PIXEL_FORMAT_BGR_888)]
    before = accounting()
    for desc in descs:                         # RGBA8888: only through UNKNOWN
        with expect_code(100027):
            assert media.dvpp_png_decode_async(ch, src, len(data), desc, s) == 100027
    assert accounting() == before
    good = pic(out, size, fmt=RGB)
    no_channel = media.dvpp_create_channel_desc()
    host = acl.util.bytes_to_ptr(data)
    plain, _ = acl.rt.malloc(size, acl.ACL_MEM_MALLOC_HUGE_FIRST)
    bad = [(no_channel, src, len(data), good, s), (ch, 0, len(data), good, s),
           (ch, src, 0, good, s), (ch, host, len(data), good, s),
           (ch, src, len(data), 0, s), (ch, src, len(data), pic(out, 0, fmt=RGB), s),
           (ch, src, len(data), pic(0, size, fmt=RGB), s),
           (ch, src, len(data), pic(plain, size, fmt=RGB), s),
           (ch, src, len(data) + 10_000, good, s)]
    before = accounting()
    for args in bad:
        with expect_code(100000):
            assert media.dvpp_png_decode_async(*args) == 100000, args
    assert not [t for t in acllab.current_runtime().engine.tasks if t.name == "PngDecode"]
    after = accounting()
    assert after == before


def _fault(s, data: bytes, fmt: int = RGB, size: int = 128 * 4 * 48, ws: int = 0,
           hs: int = 0) -> str:
    _, out, _ = _decode(s, data, fmt, size, ws, hs)
    with expect_code(507000) as rec:
        assert acl.rt.synchronize_stream(s) == 507000
    return str(rec[0].message)


def test_decode_faults_when_the_task_starts(s):
    good = _case("rgb")[0]
    assert "signature" in _fault(s, b"\x00" * 64)
    assert "cannot be decoded" in _fault(s, good[:len(good) // 2])           # truncated
    crc = bytearray(good)
    crc[29] ^= 0xFF                                                           # IHDR's CRC
    assert "cannot be decoded" in _fault(s, bytes(crc))
    pal = palette_png()
    assert "palette" in _fault(s, pal)
    for h, w in ((31, 40), (40, 4097)):
        msg = _fault(s, pillow_png(np.zeros((h, w), np.uint8), "L"), size=4097 * 3 * 48)
        assert "32 x 32 to 4096 x 4096" in msg and f"{w} x {h}" in msg
    msg = _fault(s, good, size=128 * 3 * 48 - 1)                              # one byte short
    assert "needs 18432 B" in msg
    msg = _fault(s, _case("rgba")[0], UNKNOWN, size=128 * 3 * 48)             # RGBA: 4 bytes
    assert "RGBA8888" in msg and "24576" in msg
    msg = _fault(s, good, ws=256, hs=48)                                      # width stride
    assert "at least 384 x 48" in msg
    msg = _fault(s, good, ws=384, hs=32)                                      # height stride
    assert "at least 384 x 48" in msg
    # a 1-bit greyscale PNG's prediction is below the RGB888 picture PNGD writes
    grey1 = _case("grey1")[0]
    size, _ = media.dvpp_png_predict_dec_size(acl.util.bytes_to_ptr(grey1), len(grey1), RGB)
    assert "needs 18432 B" in _fault(s, grey1, size=size)
    # a fault leaves the output buffer as it was
    desc, out, size = _decode(s, b"\x00" * 64, RGB, 1024)
    with expect_code(507000):
        acl.rt.synchronize_stream(s)
    assert (download(out, 1024) == FILL).all()
    assert media.dvpp_get_pic_desc_width(desc) == 0


def test_without_pillow_the_decode_says_so_and_the_header_calls_work(s, monkeypatch):
    data = _case("rgb")[0]
    src = upload(data, s)
    out, _ = media.dvpp_malloc(128 * 3 * 48)
    ch = channel()
    monkeypatch.setitem(sys.modules, "PIL", None)
    hp = acl.util.bytes_to_ptr(data)
    assert media.dvpp_png_get_image_info(hp, len(data)) == (33, 45, 3, 0)
    assert media.dvpp_png_predict_dec_size(hp, len(data), RGB) == (128 * 3 * 48, 0)
    with expect_code(200006) as rec:
        assert media.dvpp_png_decode_async(ch, src, len(data), pic(out, 128 * 3 * 48, fmt=RGB),
                                           s) == 200006
    assert "Pillow" in str(rec[0].message)


def test_trace_summary_export_and_stepper_show_the_pngd(s):
    from acllab.analysis import stepper, trace

    runtime = acllab.current_runtime()
    _decode(s, _case("rgba")[0], UNKNOWN)
    assert acl.rt.synchronize_stream(s) == 0
    dev = runtime.devices[0]
    assert trace.resolve_resource(runtime, "pngd") is dev.pngd
    task = next(t for t in runtime.engine.tasks if t.name == "PngDecode")
    assert trace.busy_ns(runtime, "pngd") == task.end_ns - task.start_ns > 0
    assert trace.busy_ns(runtime, "jpegd") == 0
    assert "PNGD" in trace.summary(runtime)
    events = trace.to_chrome_trace(runtime)["traceEvents"]
    rows = {(e["pid"], e["tid"]): e["args"]["name"] for e in events
            if e["ph"] == "M" and e["name"] == "thread_name"}
    on_engine = [e for e in events if e["ph"] == "X" and e["name"] == "PngDecode"
                 and rows[(e["pid"], e["tid"])] == "PNGD"]
    assert len(on_engine) == 1
    assert "VDEC" not in rows.values()              # engines made on first use only
    assert "PNGD" in [e.name for e in stepper.snapshot(runtime, task.start_ns).engines]


def test_the_core_imports_and_reads_png_headers_without_pillow():
    """With Pillow unimportable, acllab and acl.media import and the header calls work (the
    decode call then says 200006: test_without_pillow_...)."""
    import subprocess

    code = ("import sys; sys.modules['PIL'] = None\n"
            "import acllab\nfrom acllab import acl\n"
            "acl.init()\nacl.rt.set_device(0)\n"
            f"data = {_case('rgb')[0][:40]!r}\n"
            "p = acl.util.bytes_to_ptr(data)\n"
            "print(acl.media.dvpp_png_get_image_info(p, len(data)))\n"
            "print('PIL' in sys.modules and sys.modules['PIL'] is not None)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n")[:2] == ["(33, 45, 3, 0)", "False"]
