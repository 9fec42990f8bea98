"""acl.media stream descriptions and VDEC: real H.264 / H.265 decoding into DVPP memory.

The clips are made here with PyAV's encoders (libx264, libx265): lossless ones, whose decoded
pictures must equal the source frames exactly, and lossy ones, whose pictures must equal what
PyAV's own decoder makes of the same bytes. The facts checked (codes, stride rules, callback
order, eos) are those the module docstrings of acllab.acl.media.vdec and .stream cite: CANN
8.0.0 / 8.5.0 aclvdecSendFrame, VDEC "Functions and Restrictions", vdec_set_channel_desc_*.
"""

from __future__ import annotations

import sys
import threading
from fractions import Fraction

import numpy as np
import pytest
from conftest import expect_code, setup_device

import acllab
from acllab import acl
from acllab.acl import media
from acllab.analysis import trace

av = pytest.importorskip("av")

NV12, NV21 = media.PIXEL_FORMAT_YUV_SEMIPLANAR_420, media.PIXEL_FORMAT_YVU_SEMIPLANAR_420
H2D, D2H = acl.ACL_MEMCPY_HOST_TO_DEVICE, acl.ACL_MEMCPY_DEVICE_TO_HOST
H265, H264_MAIN = media.H265_MAIN_LEVEL, media.H264_MAIN_LEVEL


# -- clips --------------------------------------------------------------------------------------

def source_frames(n: int, w: int, h: int, seed: int = 0) -> list[tuple]:
    """n distinct (Y, U, V) frames: moving ramps and a little noise, chroma changing too."""
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        yy, xx = np.mgrid[0:h, 0:w]
        y = ((xx * 2 + yy + i * 11) % 256).astype(np.uint8)
        y = np.clip(y.astype(int) + rng.integers(-3, 4, y.shape), 0, 255).astype(np.uint8)
        cy, cx = np.mgrid[0:h // 2, 0:w // 2]
        u = ((cx + 60 + i * 7) % 256).astype(np.uint8)
        v = ((cy * 2 + 90 - i * 5) % 256).astype(np.uint8)
        out.append((y, u, v))
    return out


def encode(codec: str, frames, lossless: bool = True, bframes: int = 0) -> list[bytes]:
    """Annex-b packets, one per frame (PyAV's libx264 / libx265 write annex-b)."""
    h, w = frames[0][0].shape
    c = av.CodecContext.create(codec, "w")
    c.width, c.height, c.pix_fmt = w, h, "yuv420p"
    c.time_base = Fraction(1, 25)
    if codec == "libx264":
        c.options = {"bframes": str(bframes), **({"qp": "0"} if lossless else {"crf": "30"})}
    else:
        params = f"bframes={bframes}:log-level=none" + (":lossless=1" if lossless else "")
        c.options = {"x265-params": params}
    pkts = []
    for i, (y, u, v) in enumerate(frames):
        f = av.VideoFrame(w, h, "yuv420p")
        for plane, arr in zip(f.planes, (y, u, v), strict=True):
            rows = np.zeros((plane.buffer_size // plane.line_size, plane.line_size), np.uint8)
            rows[:arr.shape[0], :arr.shape[1]] = arr
            plane.update(rows.tobytes())
        f.pts = i
        pkts += [bytes(p) for p in c.encode(f)]
    pkts += [bytes(p) for p in c.encode(None)]
    return pkts


def pyav_decode(codec: str, pkts) -> list[tuple]:
    """Another decode of the same bytes: PyAV's, straight (the reference pictures)."""
    d = av.CodecContext.create(codec, "r")
    frames = [f for p in pkts for f in d.decode(av.Packet(p))] + list(d.decode(None))
    return [frame_planes(f) for f in frames]


def frame_planes(f) -> tuple:
    """(Y, U, V) of a yuv420p VideoFrame, each plane without its row padding."""
    out = []
    for i, (pw, ph) in enumerate(((f.width, f.height),) + ((f.width // 2, f.height // 2),) * 2):
        p = f.planes[i]
        out.append(np.frombuffer(bytes(p), np.uint8).reshape(-1, p.line_size)[:ph, :pw])
    return tuple(out)


# -- a pyACL program, as the samples write it ------------------------------------------------

class Decoder:
    """A VDEC channel with a report thread (acl.util.start_thread + process_report), the
    callback keeping what it saw (user data, ret code, the picture's facts and pixels)."""

    def __init__(self, entype: int, fmt: int = NV12, channel_id: int = 0, thread=True,
                 callback=None):
        self.ctx, _ = acl.rt.get_context()
        self.seen: list[dict] = []
        self.running = True
        if thread:
            self.tid, ret = acl.util.start_thread(self._poll, [])
            assert ret == 0
        else:
            self.tid = threading.get_ident()
        d = self.desc = media.vdec_create_channel_desc()
        assert media.vdec_set_channel_desc_channel_id(d, channel_id) == 0
        assert media.vdec_set_channel_desc_thread_id(d, self.tid) == 0
        assert media.vdec_set_channel_desc_callback(d, callback or self._callback) == 0
        assert media.vdec_set_channel_desc_entype(d, entype) == 0
        assert media.vdec_set_channel_desc_out_pic_format(d, fmt) == 0
        self.ret = media.vdec_create_channel(d)
        self.inbuf, _ = media.dvpp_malloc(1 << 20)

    def _poll(self, _args):
        acl.rt.set_context(self.ctx)
        while self.running:
            acl.rt.process_report(50)

    def _callback(self, stream_desc, pic_desc, user_data):
        data = media.dvpp_get_pic_desc_data(pic_desc)
        ws = media.dvpp_get_pic_desc_width_stride(pic_desc)
        hs = media.dvpp_get_pic_desc_height_stride(pic_desc)
        item = {"user": user_data, "ret": media.dvpp_get_pic_desc_ret_code(pic_desc),
                "w": media.dvpp_get_pic_desc_width(pic_desc),
                "h": media.dvpp_get_pic_desc_height(pic_desc), "ws": ws, "hs": hs,
                "format": media.dvpp_get_pic_desc_format(pic_desc),
                "timestamp": media.dvpp_get_stream_desc_timestamp(stream_desc),
                "bytes": None}
        if item["ret"] == 0:
            item["bytes"] = download(data, ws * hs * 3 // 2)
        self.seen.append(item)
        assert media.dvpp_destroy_stream_desc(stream_desc) == 0
        assert media.dvpp_destroy_pic_desc(pic_desc) == 0
        assert media.dvpp_free(data) == 0

    def send(self, packet: bytes, user_data=None, out_size: int | None = None, geometry=None,
             fmt: int | None = None, timestamp: int = 0) -> int:
        n = len(packet)
        assert acl.rt.memcpy(self.inbuf, n, acl.util.bytes_to_ptr(packet), n, H2D) == 0
        sd = media.dvpp_create_stream_desc()
        assert media.dvpp_set_stream_desc_data(sd, self.inbuf) == 0
        assert media.dvpp_set_stream_desc_size(sd, n) == 0
        assert media.dvpp_set_stream_desc_timestamp(sd, timestamp) == 0
        size = out_size or 1 << 18
        out, _ = media.dvpp_malloc(size)
        pd = media.dvpp_create_pic_desc()
        media.dvpp_set_pic_desc_data(pd, out)
        media.dvpp_set_pic_desc_size(pd, size)
        if fmt is not None:
            media.dvpp_set_pic_desc_format(pd, fmt)
        if geometry is not None:
            for field, value in zip(("width", "height", "width_stride", "height_stride"),
                                    geometry, strict=True):
                getattr(media, f"dvpp_set_pic_desc_{field}")(pd, value)
        return media.vdec_send_frame(self.desc, sd, pd, 0, user_data)

    def eos(self) -> int:
        sd = media.dvpp_create_stream_desc()
        media.dvpp_set_stream_desc_eos(sd, 1)
        ret = media.vdec_send_frame(self.desc, sd, 0, 0, None)
        media.dvpp_destroy_stream_desc(sd)
        return ret

    def close(self) -> None:
        assert media.vdec_destroy_channel(self.desc) == 0
        assert media.vdec_destroy_channel_desc(self.desc) == 0
        media.dvpp_free(self.inbuf)
        self.running = False
        if self.tid != threading.get_ident():
            assert acl.util.stop_thread(self.tid) == 0


def download(ptr: int, n: int) -> np.ndarray:
    out = bytearray(n)
    assert acl.rt.memcpy(acl.util.bytes_to_ptr(out), n, ptr, n, D2H) == 0
    return np.frombuffer(bytes(out), np.uint8)


def planes(item: dict) -> tuple:
    """(Y, U, V) of a seen NV12 / NV21 picture, from its buffer with its strides."""
    buf, w, h, ws, hs = item["bytes"], item["w"], item["h"], item["ws"], item["hs"]
    y = buf[:ws * hs].reshape(hs, ws)[:h, :w]
    uv = buf[ws * hs:].reshape(hs // 2, ws // 2, 2)[:h // 2, :w // 2]
    if item["format"] == NV21:
        uv = uv[:, :, ::-1]
    return y, uv[:, :, 0], uv[:, :, 1]


def decode_all(codec_name: str, entype: int, pkts, fmt: int = NV12, **kw) -> Decoder:
    dec = Decoder(entype, fmt)
    assert dec.ret == 0
    for i, p in enumerate(pkts):
        assert dec.send(p, user_data=("frame", i), timestamp=1000 + i, **kw) == 0
    assert dec.eos() == 0
    return dec


@pytest.fixture
def dev():
    acllab.reset()
    setup_device(0)
    yield
    acllab.reset()


@pytest.fixture
def a2(fresh):
    acllab.configure("ascend910b")
    setup_device(0)
    yield


# -- stream descriptions ------------------------------------------------------------------------

STREAM_FIELDS = ("data", "size", "format", "timestamp", "ret_code", "eos")


def test_a_stream_description_starts_empty_and_keeps_what_is_set(dev):
    sd = media.dvpp_create_stream_desc()
    assert sd != 0
    assert [getattr(media, f"dvpp_get_stream_desc_{f}")(sd) for f in STREAM_FIELDS] == [0] * 6
    values = {"data": 0x1234_5678_9ABC, "size": 4096, "format": media.H264_HIGH_LEVEL,
              "timestamp": (1 << 64) - 1, "ret_code": 7, "eos": 1}
    for f, v in values.items():
        assert getattr(media, f"dvpp_set_stream_desc_{f}")(sd, v) == 0
    assert {f: getattr(media, f"dvpp_get_stream_desc_{f}")(sd) for f in STREAM_FIELDS} == values
    other = media.dvpp_create_stream_desc()           # descriptions are separate objects
    assert media.dvpp_get_stream_desc_size(other) == 0
    assert media.dvpp_destroy_stream_desc(sd) == 0
    assert media.dvpp_destroy_stream_desc(other) == 0


@pytest.mark.parametrize(("field", "value"), [
    ("size", -1), ("size", 1 << 32), ("format", 4), ("format", -1), ("eos", 2),
    ("timestamp", 1 << 64), ("ret_code", 1 << 32), ("data", -5)])
def test_a_stream_description_refuses_values_outside_its_fields(dev, field, value):
    sd = media.dvpp_create_stream_desc()
    with expect_code(100000):
        assert getattr(media, f"dvpp_set_stream_desc_{field}")(sd, value) == 100000
    assert getattr(media, f"dvpp_get_stream_desc_{field}")(sd) == 0     # unchanged


def test_stream_description_calls_on_bad_handles(dev):
    pd = media.dvpp_create_pic_desc()
    sd = media.dvpp_create_stream_desc()
    media.dvpp_destroy_stream_desc(sd)
    for handle in (0, pd, sd, 0x7777):
        with expect_code(100000):
            assert media.dvpp_set_stream_desc_size(handle, 10) == 100000
        assert media.dvpp_get_stream_desc_size(handle) == 0
    with expect_code(100000):
        assert media.dvpp_destroy_stream_desc(sd) == 100000       # twice


# -- decoding: the right pictures, in the right buffers ------------------------------------------

@pytest.mark.parametrize(("codec", "decoder", "entype", "fmt", "bframes"), [
    ("libx264", "h264", H264_MAIN, NV12, 0),
    ("libx264", "h264", media.H264_HIGH_LEVEL, NV21, 2),
    ("libx265", "hevc", H265, NV12, 2),
    ("libx265", "hevc", H265, NV21, 0),
])
def test_lossless_clips_decode_to_their_source_frames(dev, codec, decoder, entype, fmt,
                                                      bframes):
    src = source_frames(7, 176, 144, seed=bframes)
    pkts = encode(codec, src, lossless=True, bframes=bframes)
    dec = decode_all(decoder, entype, pkts, fmt)
    assert len(dec.seen) == len(pkts) == len(src)
    assert [s["user"] for s in dec.seen] == [("frame", i) for i in range(len(pkts))]
    assert [s["timestamp"] for s in dec.seen] == [1000 + i for i in range(len(pkts))]
    for item, (y, u, v) in zip(dec.seen, src, strict=True):
        assert item["ret"] == 0
        assert (item["w"], item["h"], item["ws"], item["hs"], item["format"]) == \
            (176, 144, 176, 144, fmt)
        got = planes(item)
        assert np.array_equal(got[0], y) and np.array_equal(got[1], u) \
            and np.array_equal(got[2], v)
    dec.close()


@pytest.mark.parametrize(("codec", "decoder", "entype"), [
    ("libx264", "h264", H264_MAIN), ("libx265", "hevc", H265)])
def test_lossy_clips_decode_to_what_another_decode_makes_of_them(dev, codec, decoder, entype):
    src = source_frames(6, 200, 132, seed=5)          # 200 x 132: strides 208 x 132
    pkts = encode(codec, src, lossless=False, bframes=2)
    ref = pyav_decode(decoder, pkts)
    dec = decode_all(decoder, entype, pkts)
    assert len(dec.seen) == len(ref) == 6
    for item, (y, u, v), (sy, _, _) in zip(dec.seen, ref, src, strict=True):
        assert (item["w"], item["h"], item["ws"], item["hs"]) == (200, 132, 208, 132)
        got = planes(item)
        assert all(np.array_equal(a, b) for a, b in zip(got, (y, u, v), strict=True))
        assert np.abs(got[0].astype(int) - sy).mean() < 8     # and close to the source
    dec.close()


def test_stride_rules_of_the_stream_geometry(dev):
    """Width stride: the width rounded up to 16, at least 32; height stride: the height
    rounded up to 2 (VDEC output restrictions)."""
    for w, h, ws, hs in ((136, 128, 144, 128), (128, 130, 128, 130), (144, 136, 144, 136)):
        acllab.reset()
        setup_device(0)
        pkts = encode("libx264", source_frames(1, w, h), lossless=True)
        dec = decode_all("h264", H264_MAIN, pkts)
        assert [(s["w"], s["h"], s["ws"], s["hs"]) for s in dec.seen] == [(w, h, ws, hs)]
        dec.close()


def test_an_output_description_with_its_own_geometry_gets_that_layout(dev):
    src = source_frames(2, 160, 128)
    pkts = encode("libx264", src, lossless=True)
    dec = Decoder(H264_MAIN)
    # wider strides than needed: the picture lies in the described rows, nothing else moves
    for p in pkts:
        assert dec.send(p, geometry=(160, 128, 256, 140), out_size=256 * 140 * 3 // 2) == 0
    assert dec.eos() == 0
    for item, (y, u, _v) in zip(dec.seen, src, strict=True):
        assert (item["w"], item["h"], item["ws"], item["hs"]) == (160, 128, 256, 140)
        got = planes(item)
        assert np.array_equal(got[0], y) and np.array_equal(got[1], u)
    # a smaller picture: VDEC resizes to it
    assert dec.send(pkts[0], geometry=(80, 64, 80, 64), out_size=80 * 64 * 3 // 2) == 0
    assert dec.eos() == 0
    small = dec.seen[-1]
    assert (small["w"], small["h"], small["ws"], small["hs"]) == (80, 64, 80, 64)
    assert abs(int(planes(small)[0].mean()) - int(src[0][0].mean())) <= 2
    dec.close()


@pytest.mark.parametrize("geometry", [(160, 128, 0, 0), (160, 0, 0, 0), (161, 128, 176, 128),
                                      (160, 128, 168, 128), (160, 128, 160, 127),
                                      (160, 128, 144, 128), (8, 6, 16, 6)])
def test_bad_output_geometry_is_refused(dev, geometry):
    pkts = encode("libx264", source_frames(1, 160, 128), lossless=True)
    dec = Decoder(H264_MAIN)
    with expect_code(100000):
        assert dec.send(pkts[0], geometry=geometry) == 100000
    dec.close()
    assert dec.seen == []


def test_a_frame_reaches_its_callback_only_once_its_picture_is_out(dev):
    """With B-frames the decoder outputs pictures late; eos returns once every callback ran."""
    src = source_frames(6, 160, 128)
    pkts = encode("libx264", src, lossless=False, bframes=2)
    dec = Decoder(H264_MAIN)
    counts = []
    for p in pkts:
        assert dec.send(p) == 0
        acl.rt.synchronize_device()
        counts.append(len(dec.seen))
    assert counts[0] == 0 and counts[-1] < len(pkts)      # some pictures still inside
    assert counts == sorted(counts)
    assert dec.eos() == 0
    assert len(dec.seen) == len(pkts)                      # eos: every callback has run
    dec.close()


def test_callbacks_run_on_the_channels_thread_with_its_context(dev, monkeypatch):
    """aclvdecSetChannelDescThreadId names the thread that runs the callbacks (in its
    aclrtProcessReport): they run there, with that thread's current context, not on the
    thread whose send reached them."""
    from acllab.runtime import Runtime

    monkeypatch.setattr(Runtime, "PICK_S", 10.0)   # a loaded machine still hands them over
    pkts = encode("libx264", source_frames(3, 160, 128), lossless=False)
    where = []
    dec = Decoder(H264_MAIN, callback=lambda sd, pd, data: where.append(
        (data, threading.get_ident(), acl.rt.get_context())))
    for i, p in enumerate(pkts):
        assert dec.send(p, user_data=i) == 0
    assert dec.eos() == 0
    assert where == [(i, dec.tid, (dec.ctx, 0)) for i in range(3)]
    assert dec.tid != threading.get_ident()
    dec.close()


def test_destroy_channel_ends_the_stream_too(dev):
    """vdec_resnet50_classification sends frames and destroys the channel without eos."""
    pkts = encode("libx265", source_frames(3, 128, 128), lossless=True, bframes=2)
    dec = Decoder(H265)
    for p in pkts:
        assert dec.send(p) == 0
    dec.close()
    assert [s["ret"] for s in dec.seen] == [0, 0, 0]


def test_the_same_frame_sent_again_decodes_again(dev):
    """As vdec_resnet50_classification does: one IDR frame, sent ten times."""
    src = source_frames(1, 128, 128)
    pkt = encode("libx265", src, lossless=True)
    assert len(pkt) == 1
    dec = Decoder(H265)
    for _ in range(10):
        assert dec.send(pkt[0]) == 0
    dec.close()
    assert len(dec.seen) == 10
    assert all(np.array_equal(planes(s)[0], src[0][0]) for s in dec.seen)


def test_a_channel_decodes_a_new_stream_after_eos(dev):
    a = encode("libx264", source_frames(2, 128, 128, seed=1), lossless=True)
    b_src = source_frames(3, 144, 128, seed=2)
    b = encode("libx264", b_src, lossless=True)
    dec = decode_all("h264", H264_MAIN, a)
    for p in b:
        assert dec.send(p) == 0
    assert dec.eos() == 0
    assert len(dec.seen) == 5
    assert [(s["w"], s["h"]) for s in dec.seen[2:]] == [(144, 128)] * 3
    assert np.array_equal(planes(dec.seen[4])[0], b_src[2][0])
    dec.close()


# -- the engine, the trace, determinism ----------------------------------------------------------

def test_decodes_run_on_the_devices_vdec_engine_at_the_published_rate(dev):
    pkts = encode("libx264", source_frames(3, 320, 240), lossless=False)
    dec = decode_all("h264", H264_MAIN, pkts)
    r = acllab.current_runtime()
    decodes = [t for t in r.tasks if t.name == "VdecDecode" and t.info["pictures"]]
    assert decodes and all(t.engine_name == "VDEC (device 0)" for t in decodes)
    prof = r.profile
    assert r.devices[0].vdec.capacity == prof.vdec_units == 2
    # 20 us + 320 x 240 px at 1920 x 1080 x 240 px/s
    expect = prof.dvpp_task_ns + -(-320 * 240 * 1_000_000_000 // prof.vdec_pixels_per_s)
    assert all(t.end_ns - t.start_ns == expect for t in decodes)
    # each picture's callback comes after the task that wrote it, on the channel's stream
    reports = [t for t in r.tasks if t.name == "HostCallback"]
    assert len(reports) == 3 and all(c.start_ns >= decodes[0].end_ns for c in reports)
    assert "vdec" in trace.summary(r).lower() or any(
        "VDEC" in str(k) for k in trace.utilisation(r))
    dec.close()


def _program() -> tuple:
    acllab.reset()
    setup_device(0)
    pkts = encode("libx264", source_frames(4, 160, 128), lossless=False, bframes=2)
    dec = decode_all("h264", H264_MAIN, pkts)
    dec.close()
    r = acllab.current_runtime()
    return trace.records(r), [e[:3] + e[3:] for e in r.api_log], \
        [s["bytes"].tobytes() for s in dec.seen]


def test_the_same_program_gives_the_same_trace_and_pixels(dev):
    assert _program() == _program()


def test_eos_on_the_thread_that_should_run_the_callbacks_never_returns_on_a_card(dev):
    """The eos call waits for every callback; when they are the calling thread's own (it
    would have to call process_report), a card hangs: acllab returns 507046 and says why."""
    pkts = encode("libx264", source_frames(1, 128, 128), lossless=True)
    dec = Decoder(H264_MAIN, thread=False)
    assert dec.send(pkts[0]) == 0
    with expect_code(507046):
        assert dec.eos() == 507046
    assert "blocking callback" in acl.get_recent_err_msg()


def test_a_main_thread_channel_delivers_through_process_report(dev):
    pkts = encode("libx264", source_frames(2, 128, 128), lossless=True)
    dec = Decoder(H264_MAIN, thread=False)
    for p in pkts:
        assert dec.send(p) == 0
    acl.rt.synchronize_device()
    assert dec.seen == []                         # waiting for the main thread
    assert acl.rt.process_report(1000) == 0
    assert len(dec.seen) == 1
    assert acl.rt.process_report(1000) == 0
    assert len(dec.seen) == 2
    dec.close()


# -- bad input: CANN's codes -------------------------------------------------------------------

def test_channel_creation_needs_its_settings(dev):
    d = media.vdec_create_channel_desc()
    with expect_code(100000):
        assert media.vdec_create_channel(d) == 100000          # no callback
    media.vdec_set_channel_desc_callback(d, lambda *a: None)
    with expect_code(100000):
        assert media.vdec_create_channel(d) == 100000          # no thread
    media.vdec_set_channel_desc_thread_id(d, threading.get_ident())
    media.vdec_set_channel_desc_channel_id(d, 32)
    with expect_code(100000):
        assert media.vdec_create_channel(d) == 100000          # ids 0 to 31 on the 310
    media.vdec_set_channel_desc_channel_id(d, 31)
    assert media.vdec_create_channel(d) == 0
    with expect_code(100000):
        assert media.vdec_create_channel(d) == 100000          # twice
    with expect_code(100000):
        assert media.vdec_set_channel_desc_entype(d, 1) == 100000   # fixed while it exists
    other = media.vdec_create_channel_desc()
    media.vdec_set_channel_desc_callback(other, lambda *a: None)
    media.vdec_set_channel_desc_thread_id(other, threading.get_ident())
    media.vdec_set_channel_desc_channel_id(other, 31)
    with expect_code(100000):
        assert media.vdec_create_channel(other) == 100000      # the id is in use
    assert media.vdec_destroy_channel(d) == 0
    assert media.vdec_create_channel(other) == 0               # free again
    assert media.vdec_destroy_channel(other) == 0
    with expect_code(100000):
        assert media.vdec_destroy_channel(other) == 100000


def test_channel_ids_up_to_255_and_reference_frames_on_atlas_a2(a2):
    d = media.vdec_create_channel_desc()
    media.vdec_set_channel_desc_callback(d, lambda *a: None)
    media.vdec_set_channel_desc_thread_id(d, threading.get_ident())
    assert media.vdec_set_channel_desc_ref_frame_num(d, 4) == 0
    assert media.vdec_get_channel_desc_ref_frame_num(d) == 4
    media.vdec_set_channel_desc_channel_id(d, 256)
    with expect_code(100000):
        assert media.vdec_create_channel(d) == 100000
    media.vdec_set_channel_desc_channel_id(d, 255)
    assert media.vdec_create_channel(d) == 0
    assert media.vdec_destroy_channel(d) == 0


def test_channel_description_setters_and_getters(dev):
    d = media.vdec_create_channel_desc()
    assert media.vdec_get_channel_desc_out_mode(d) == 0
    assert media.vdec_get_channel_desc_entype(d) == H265
    assert media.vdec_get_channel_desc_out_pic_format(d) == NV12
    assert media.vdec_get_channel_desc_callback(d) is None
    for name, value in (("channel_id", 7), ("thread_id", 12345), ("entype", 3),
                        ("out_pic_format", NV21), ("out_mode", 1), ("out_pic_width", 640),
                        ("out_pic_height", 480)):
        assert getattr(media, f"vdec_set_channel_desc_{name}")(d, value) == 0
        assert getattr(media, f"vdec_get_channel_desc_{name}")(d) == value

    def cb(*_a):
        return None

    assert media.vdec_set_channel_desc_callback(d, cb) == 0
    assert media.vdec_get_channel_desc_callback(d) is cb
    for name, value, code in (("entype", 4, 100000), ("out_mode", 2, 100000),
                              ("out_pic_format", media.PIXEL_FORMAT_RGB_888, 200006),
                              ("out_pic_format", 9999, 100000), ("channel_id", -1, 100000),
                              ("ref_frame_num", 4, 200006)):   # refused on the 310
        with expect_code(code):
            assert getattr(media, f"vdec_set_channel_desc_{name}")(d, value) == code
    assert media.vdec_get_channel_desc_channel_id(0) == 0
    with expect_code(100000):
        assert media.vdec_set_channel_desc_channel_id(0, 1) == 100000
    with pytest.raises(TypeError):
        media.vdec_set_channel_desc_callback(d, 42)
    assert media.vdec_destroy_channel_desc(d) == 0


def test_send_frame_refuses_what_vdec_cannot_take(dev):
    pkts = encode("libx264", source_frames(1, 128, 128), lossless=True)
    dec = Decoder(H264_MAIN)
    sd = media.dvpp_create_stream_desc()
    out, _ = media.dvpp_malloc(1 << 16)
    pd = media.dvpp_create_pic_desc()
    media.dvpp_set_pic_desc_data(pd, out)
    media.dvpp_set_pic_desc_size(pd, 1 << 16)
    with expect_code(100000):                      # an empty frame without eos
        assert media.vdec_send_frame(dec.desc, sd, pd, 0, None) == 100000
    n = len(pkts[0])
    acl.rt.memcpy(dec.inbuf, n, acl.util.bytes_to_ptr(pkts[0]), n, H2D)
    media.dvpp_set_stream_desc_data(sd, dec.inbuf)
    media.dvpp_set_stream_desc_size(sd, n)
    with expect_code(100000):                      # no output description
        assert media.vdec_send_frame(dec.desc, sd, 0, 0, None) == 100000
    host = bytearray(pkts[0])
    media.dvpp_set_stream_desc_data(sd, acl.util.bytes_to_ptr(host))
    with expect_code(100000):                      # host memory
        assert media.vdec_send_frame(dec.desc, sd, pd, 0, None) == 100000
    media.dvpp_set_stream_desc_data(sd, dec.inbuf)
    plain, _ = acl.rt.malloc(1 << 16, 0)
    media.dvpp_set_pic_desc_data(pd, plain)
    with expect_code(100000):                      # output in acl.rt.malloc memory
        assert media.vdec_send_frame(dec.desc, sd, pd, 0, None) == 100000
    media.dvpp_set_pic_desc_data(pd, out)
    media.dvpp_set_pic_desc_format(pd, media.PIXEL_FORMAT_YUV_400)
    with expect_code(200006):                      # a format VDEC does not write
        assert media.vdec_send_frame(dec.desc, sd, pd, 0, None) == 200006
    media.dvpp_set_pic_desc_format(pd, NV12)
    with expect_code(100000):                      # a frame config that is none
        assert media.vdec_send_frame(dec.desc, sd, pd, pd, None) == 100000
    cfg = media.vdec_create_frame_config()
    assert media.vdec_send_frame(dec.desc, sd, pd, cfg, "ok") == 0
    assert media.vdec_destroy_frame_config(cfg) == 0
    no_channel = media.vdec_create_channel_desc()
    with expect_code(100000):
        assert media.vdec_send_frame(no_channel, sd, pd, 0, None) == 100000
    dec.close()
    assert [s["user"] for s in dec.seen] == ["ok"]


def test_bad_streams_reach_the_callback_with_a_failure_code(dev):
    """Garbage, and H.264 on an H.265 channel: every frame gets its callback, none with
    ret code 0, and nothing is written into the output buffers."""
    rng = np.random.default_rng(3)
    garbage = [bytes([0, 0, 0, 1]) + rng.integers(0, 256, 300, np.uint8).tobytes()
               for _ in range(3)]
    h264 = encode("libx264", source_frames(3, 128, 128), lossless=True)
    for entype, pkts in ((H264_MAIN, garbage), (H265, h264)):
        acllab.reset()
        setup_device(0)
        dec = Decoder(entype)
        for i, p in enumerate(pkts):
            assert dec.send(p, user_data=i) == 0
        assert dec.eos() == 0
        assert sorted(s["user"] for s in dec.seen) == [0, 1, 2]
        assert all(s["ret"] in (1, 0x20000) for s in dec.seen)
        dec.close()


def test_a_picture_that_does_not_fit_its_buffer_is_lost_with_code_1(dev):
    pkts = encode("libx264", source_frames(2, 176, 144), lossless=True)
    dec = Decoder(H264_MAIN)
    assert dec.send(pkts[0], out_size=176 * 144) == 0        # needs 176 * 144 * 3 / 2
    assert dec.send(pkts[1]) == 0
    assert dec.eos() == 0
    assert [s["ret"] for s in dec.seen] == [1, 0]
    dec.close()


def test_without_pyav_a_channel_cannot_be_created(dev, monkeypatch):
    from test_acl_media_venc import Encoder as VencChannel

    monkeypatch.setitem(sys.modules, "av", None)
    streams = acllab.current_runtime().devices[0].stream_count
    d = media.vdec_create_channel_desc()
    media.vdec_set_channel_desc_callback(d, lambda *a: None)
    media.vdec_set_channel_desc_thread_id(d, threading.get_ident())
    with expect_code(200006):
        assert media.vdec_create_channel(d) == 200006
    assert "pip install av" in acl.get_recent_err_msg()
    assert acllab.current_runtime().devices[0].stream_count == streams    # nothing left
    with expect_code(200006):
        assert VencChannel(media.H265_MAIN_LEVEL, 128, 128, thread=False).ret == 200006
    assert acllab.current_runtime().devices[0].stream_count == streams
    monkeypatch.setitem(sys.modules, "av", av)
    assert media.vdec_create_channel(d) == 0            # installed again: it works
    assert acllab.current_runtime().devices[0].stream_count == streams + 2
    assert media.vdec_destroy_channel(d) == 0
    assert acllab.current_runtime().devices[0].stream_count == streams


# -- the sanitizer: a picture used before VDEC wrote it ------------------------------------------

def _resize_from(pic_desc: int, stream: int) -> None:
    """VPC reads the decoded picture (a resize to 64 x 64) on the program's stream."""
    ch = media.dvpp_create_channel_desc()
    assert media.dvpp_create_channel(ch) == 0
    out, _ = media.dvpp_malloc(64 * 64 * 3 // 2)
    dst = media.dvpp_create_pic_desc()
    for field, value in (("data", out), ("size", 64 * 64 * 3 // 2), ("width", 64),
                         ("height", 64), ("width_stride", 64), ("height_stride", 64)):
        getattr(media, f"dvpp_set_pic_desc_{field}")(dst, value)
    cfg = media.dvpp_create_resize_config()
    assert media.dvpp_vpc_resize_async(ch, pic_desc, dst, cfg, stream) == 0
    assert acl.rt.synchronize_stream(stream) == 0


@pytest.mark.parametrize("wait", ["nothing", "process_report", "eos"])
def test_vpc_reading_a_picture_before_its_callback_is_a_race(dev, wait):
    from acllab.analysis import sanitizer

    pkts = encode("libx264", source_frames(1, 160, 128), lossless=True)
    stream, _ = acl.rt.create_stream()
    calls = []               # the main thread runs the callbacks, but for eos a report thread
    dec = Decoder(H264_MAIN, thread=wait == "eos", callback=lambda *args: calls.append(args))
    n = len(pkts[0])
    acl.rt.memcpy(dec.inbuf, n, acl.util.bytes_to_ptr(pkts[0]), n, H2D)
    sd = media.dvpp_create_stream_desc()
    media.dvpp_set_stream_desc_data(sd, dec.inbuf)
    media.dvpp_set_stream_desc_size(sd, n)
    out, _ = media.dvpp_malloc(160 * 128 * 3 // 2)
    pd = media.dvpp_create_pic_desc()          # the program keeps this one (no callback use)
    for field, value in (("data", out), ("size", 160 * 128 * 3 // 2), ("width", 160),
                         ("height", 128), ("width_stride", 160), ("height_stride", 128)):
        getattr(media, f"dvpp_set_pic_desc_{field}")(pd, value)
    assert media.vdec_send_frame(dec.desc, sd, pd, 0, None) == 0
    if wait == "process_report":
        assert acl.rt.process_report(1000) == 0
    elif wait == "eos":
        assert dec.eos() == 0
    _resize_from(pd, stream)
    races = [f for f in sanitizer.analyze(acllab.current_runtime()) if f.kind == "race"]
    assert len(calls) == (0 if wait == "nothing" else 1)
    if wait == "nothing":
        assert len(races) == 1 and "VdecDecode" in races[0].message
        assert "callback" in races[0].fix
    else:
        assert races == []


def test_pyav_buffers_have_to_bytes_as_programs_for_pyav_11_call_it():
    """AclLite's VideoCapture reads each packet with ``packet.to_bytes()``, which PyAV 12
    and later lack; acllab gives it back (acllab.dvpp.video.pyav_compat) as bytes(buffer)."""
    from acllab.dvpp.video import pyav_compat

    assert pyav_compat(av) is True and pyav_compat(av) is True      # once is enough
    assert av.Packet(b"\x00\x00\x01\x65abc").to_bytes() == b"\x00\x00\x01\x65abc"
    frame = av.VideoFrame(64, 32, "yuv420p")
    frame.planes[0].update(bytes(range(256)) * (frame.planes[0].buffer_size // 256))
    assert frame.planes[0].to_bytes() == bytes(frame.planes[0])


@pytest.mark.parametrize("frames,capacity", [(9, 0), (40, 4)])
def test_a_videocapture_style_program_decodes_a_clip_file(dev, tmp_path, frames, capacity):
    """AclLite's VideoCapture arrangement, in acllab's own words: PyAV demuxes an annex-b
    file on a decoding thread that sends each packet (``packet.to_bytes()``, PyAV 11's
    spelling, as AclLite writes it) through one reused DVPP input buffer; the channel's
    callback thread (acl.util.start_thread) queues the pictures; the main thread takes them
    off the queue and reads them back. With a bounded queue (AclLite's holds 64) far shorter
    than the clip, the callbacks wait for the main thread, whose copies go on: all the
    frames come, in order, with the pixels of PyAV's own decode."""
    import queue

    src = source_frames(frames, 192, 144, seed=9)
    path = tmp_path / "clip.h264"
    path.write_bytes(b"".join(encode("libx264", src, lossless=False, bframes=2)))
    ref = [frame_planes(f) for f in av.open(str(path)).decode(video=0)]
    ctx, _ = acl.rt.get_context()
    pictures: queue.Queue = queue.Queue(capacity)
    dec = Decoder(media.H264_HIGH_LEVEL,
                  callback=lambda sd, pd, data: pictures.put((pd, data)))
    errors = []

    def decoding_thread():
        acl.rt.set_context(ctx)
        try:
            with av.open(str(path)) as container:
                for i, packet in enumerate(container.demux(video=0)):
                    data = packet.to_bytes()
                    if data:
                        assert dec.send(data, user_data=i) == 0
            assert dec.eos() == 0
        except BaseException as exc:  # noqa: BLE001 - reported by the main thread
            errors.append(exc)
        pictures.put(None)

    thread = threading.Thread(target=decoding_thread)
    thread.start()
    got = []
    while (item := pictures.get(timeout=60)) is not None:
        pd, data = item
        ws = media.dvpp_get_pic_desc_width_stride(pd)
        hs = media.dvpp_get_pic_desc_height_stride(pd)
        got.append((data, {"bytes": download(media.dvpp_get_pic_desc_data(pd), ws * hs * 3 // 2),
                           "w": media.dvpp_get_pic_desc_width(pd),
                           "h": media.dvpp_get_pic_desc_height(pd), "ws": ws, "hs": hs,
                           "format": media.dvpp_get_pic_desc_format(pd)}))
    thread.join(60)
    assert errors == [] and not thread.is_alive()
    assert [d for d, _ in got] == list(range(frames)) and len(ref) == frames
    for (_, item), planes_ref in zip(got, ref, strict=True):
        assert all(np.array_equal(a, b) for a, b in zip(planes(item), planes_ref, strict=True))
    dec.close()


# -- Atlas A2: its own stride rules, and RGB888 / BGR888 ------------------------------------------

def test_atlas_a2_writes_pictures_with_their_own_strides(a2):
    """A2's VDEC: YUV420SP width stride with no alignment (the width will do)."""
    src = source_frames(3, 200, 132, seed=8)
    pkts = encode("libx264", src, lossless=True)
    dec = decode_all("h264", H264_MAIN, pkts)
    assert [(s["w"], s["h"], s["ws"], s["hs"]) for s in dec.seen] == [(200, 132, 200, 132)] * 3
    for item, (y, u, v) in zip(dec.seen, src, strict=True):
        assert all(np.array_equal(a, b) for a, b in zip(planes(item), (y, u, v), strict=True))
    # a stride of 210 (no multiple of 16) is fine on A2, one below the width is not
    assert dec.send(pkts[0], geometry=(200, 132, 210, 134), out_size=210 * 134 * 3 // 2) == 0
    with expect_code(100000):
        assert dec.send(pkts[0], geometry=(200, 132, 198, 132)) == 100000
    assert dec.eos() == 0
    assert (dec.seen[-1]["ws"], dec.seen[-1]["hs"]) == (210, 134)
    assert np.array_equal(planes(dec.seen[-1])[0], src[0][0])
    dec.close()


def test_atlas_a2_writes_rgb888_and_bgr888(a2):
    # colours well inside the gamut (luma 40 to 210, chroma near grey): nothing clips
    src = [(40 + y // 3 + 40, 120 + u // 32, 120 + v // 32)
           for y, u, v in source_frames(2, 160, 128, seed=9)]
    pkts = encode("libx264", src, lossless=True)
    got = {}
    for fmt in (media.PIXEL_FORMAT_RGB_888, media.PIXEL_FORMAT_BGR_888):
        pictures = []

        def keep(sd, pd, data, pictures=pictures):
            w, h = media.dvpp_get_pic_desc_width(pd), media.dvpp_get_pic_desc_height(pd)
            ws, hs = (media.dvpp_get_pic_desc_width_stride(pd),
                      media.dvpp_get_pic_desc_height_stride(pd))
            raw = download(media.dvpp_get_pic_desc_data(pd), ws * hs)
            pictures.append(((w, h, ws, hs), raw.reshape(hs, ws)[:h, :w * 3].reshape(h, w, 3)))

        dec = Decoder(H264_MAIN, fmt, callback=keep)
        for p in pkts:
            assert dec.send(p, out_size=160 * 3 * 128) == 0
        assert dec.eos() == 0
        dec.close()
        got[fmt] = pictures
    rgb, bgr = got[media.PIXEL_FORMAT_RGB_888], got[media.PIXEL_FORMAT_BGR_888]
    assert [g for g, _ in rgb] == [(160, 128, 480, 128)] * 2
    for (_, a), (_, b), (y, _, _) in zip(rgb, bgr, src, strict=True):
        assert np.array_equal(a, b[:, :, ::-1])              # the same pixels, B and R swapped
        luma = a.astype(float) @ np.array([0.299, 0.587, 0.114])   # JFIF's Y from RGB
        assert np.abs(luma - y).mean() < 1.0 and np.abs(luma - y).max() < 4   # its own luma


def test_the_310_writes_no_rgb(dev):
    d = media.vdec_create_channel_desc()
    for fmt in (media.PIXEL_FORMAT_RGB_888, media.PIXEL_FORMAT_BGR_888):
        with expect_code(200006):
            assert media.vdec_set_channel_desc_out_pic_format(d, fmt) == 200006


def test_a_failure_code_stays_on_a_reused_description_until_it_is_cleared(dev):
    """CANN's troubleshooting case: an output description reused after a failed frame keeps
    the failure's code through later good frames, until dvpp_set_pic_desc_ret_code(0)."""
    pkts = encode("libx264", source_frames(3, 128, 128), lossless=True)
    codes = []
    dec = Decoder(H264_MAIN, thread=False,
                  callback=lambda sd, pd, data: codes.append(media.dvpp_get_pic_desc_ret_code(pd)))
    out, _ = media.dvpp_malloc(128 * 128 * 3 // 2)
    pd = media.dvpp_create_pic_desc()
    media.dvpp_set_pic_desc_data(pd, out)

    def send(packet, size):
        n = len(packet)
        acl.rt.memcpy(dec.inbuf, n, acl.util.bytes_to_ptr(packet), n, H2D)
        sd = media.dvpp_create_stream_desc()
        media.dvpp_set_stream_desc_data(sd, dec.inbuf)
        media.dvpp_set_stream_desc_size(sd, n)
        media.dvpp_set_pic_desc_size(pd, size)
        assert media.vdec_send_frame(dec.desc, sd, pd, 0, None) == 0
        assert acl.rt.process_report(1000) == 0

    send(pkts[0], 1000)                           # too small for the picture: lost, code 1
    send(pkts[1], 128 * 128 * 3 // 2)             # decoded, but the code stays
    assert media.dvpp_set_pic_desc_ret_code(pd, 0) == 0
    send(pkts[2], 128 * 128 * 3 // 2)             # cleared first: 0
    assert codes == [1, 1, 0]
    with expect_code(100000):
        assert media.dvpp_set_pic_desc_ret_code(pd, -1) == 100000
    dec.close()
