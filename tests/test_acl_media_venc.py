"""acl.media VENC: NV12 / NV21 pictures in DVPP memory to H.264 / H.265 streams PyAV decodes.

Facts checked (sources in acllab.acl.media.venc's docstring: CANN 8.0.0 / 8.5.0
aclvencCreateChannel and aclvencSendFrame, the Atlas 300 DVPP guide's VENC function): 128 to
1920 even sides, NV12 / NV21 input, the eos frame config, no VENC on Atlas A2, the callback's
(picture, stream description, user data).
"""

from __future__ import annotations

import threading

import numpy as np
import pytest
from conftest import expect_code, setup_device
from test_acl_media_vdec import Decoder, frame_planes, planes, source_frames

import acllab
from acllab import acl
from acllab.acl import media

av = pytest.importorskip("av")

NV12, NV21 = media.PIXEL_FORMAT_YUV_SEMIPLANAR_420, media.PIXEL_FORMAT_YVU_SEMIPLANAR_420
H2D, D2H = acl.ACL_MEMCPY_HOST_TO_DEVICE, acl.ACL_MEMCPY_DEVICE_TO_HOST


@pytest.fixture
def dev():
    acllab.reset()
    setup_device(0)
    yield
    acllab.reset()


def nv_bytes(y, u, v, fmt: int, ws: int | None = None) -> bytes:
    """A picture as VENC reads it: Y rows then interleaved chroma rows, width stride ``ws``."""
    h, w = y.shape
    ws = ws or -(-w // 16) * 16
    buf = np.zeros((h * 3 // 2, ws), np.uint8)
    buf[:h, :w] = y
    pairs = np.stack([u, v] if fmt == NV12 else [v, u], axis=-1).reshape(h // 2, w)
    buf[h:, :w] = pairs
    return buf.tobytes()


class Encoder:
    """A VENC channel as the venc_image sample makes one, keeping every packet it gets."""

    def __init__(self, entype: int, w: int, h: int, fmt: int = NV12, thread: bool = True,
                 **settings):
        self.packets: list[bytes] = []
        self.seen: list[dict] = []
        self.running = True
        ctx, _ = acl.rt.get_context()

        def poll(_args):
            acl.rt.set_context(ctx)
            while self.running:
                acl.rt.process_report(50)

        self.tid = acl.util.start_thread(poll, [])[0] if thread else threading.get_ident()
        d = self.desc = media.venc_create_channel_desc()
        assert d != 0
        media.venc_set_channel_desc_thread_id(d, self.tid)
        media.venc_set_channel_desc_callback(d, self._callback)
        media.venc_set_channel_desc_entype(d, entype)
        media.venc_set_channel_desc_pic_format(d, fmt)
        media.venc_set_channel_desc_pic_width(d, w)
        media.venc_set_channel_desc_pic_height(d, h)
        for name, value in settings.items():
            assert getattr(media, f"venc_set_channel_desc_{name}")(d, value) == 0
        self.ret = media.venc_create_channel(d)
        self.config = media.venc_create_frame_config()
        self.w, self.h, self.fmt = w, h, fmt

    def _callback(self, pic_desc, stream_desc, user_data):
        size = media.dvpp_get_stream_desc_size(stream_desc)
        item = {"pic": pic_desc, "stream": stream_desc, "user": user_data, "size": size,
                "ret": media.dvpp_get_stream_desc_ret_code(stream_desc),
                "format": media.dvpp_get_stream_desc_format(stream_desc),
                "timestamp": media.dvpp_get_stream_desc_timestamp(stream_desc)}
        if item["ret"] == 0 and size:
            out = bytearray(size)
            acl.rt.memcpy(acl.util.bytes_to_ptr(out), size,
                          media.dvpp_get_stream_desc_data(stream_desc), size, D2H)
            self.packets.append(bytes(out))
        self.seen.append(item)

    def picture(self, data: bytes) -> tuple[int, int]:
        buf, _ = media.dvpp_malloc(len(data))
        acl.rt.memcpy(buf, len(data), acl.util.bytes_to_ptr(data), len(data), H2D)
        pd = media.dvpp_create_pic_desc()
        media.dvpp_set_pic_desc_data(pd, buf)
        media.dvpp_set_pic_desc_size(pd, len(data))
        return pd, buf

    def send(self, pd: int, user_data=None, force_i: int = 0) -> int:
        media.venc_set_frame_config_force_i_frame(self.config, force_i)
        return media.venc_send_frame(self.desc, pd, 0, self.config, user_data)

    def eos(self) -> int:
        media.venc_set_frame_config_eos(self.config, 1)
        ret = media.venc_send_frame(self.desc, 0, 0, self.config, None)
        media.venc_set_frame_config_eos(self.config, 0)
        return ret

    def close(self) -> None:
        assert media.venc_destroy_channel(self.desc) == 0
        assert media.venc_destroy_frame_config(self.config) == 0
        assert media.venc_destroy_channel_desc(self.desc) == 0
        self.running = False
        if self.tid != threading.get_ident():
            assert acl.util.stop_thread(self.tid) == 0


def decode(codec: str, packets: list[bytes]) -> list:
    d = av.CodecContext.create(codec, "r")
    frames = []
    for p in packets:
        frames += d.decode(av.Packet(p))
    return frames + list(d.decode(None))


def psnr(a: np.ndarray, b: np.ndarray) -> float:
    mse = np.mean((a.astype(float) - b.astype(float)) ** 2)
    return 99.0 if mse == 0 else 10 * np.log10(255 ** 2 / mse)


@pytest.mark.parametrize(("entype", "codec", "fmt", "w", "h"), [
    (media.H265_MAIN_LEVEL, "hevc", NV12, 176, 144),
    (media.H264_MAIN_LEVEL, "h264", NV21, 200, 132),      # width stride 208
    (media.H264_BASELINE_LEVEL, "h264", NV12, 128, 128),
    (media.H264_HIGH_LEVEL, "h264", NV21, 320, 240),
])
def test_encoded_streams_decode_to_the_pictures_sent(dev, entype, codec, fmt, w, h):
    src = source_frames(6, w, h, seed=entype)
    enc = Encoder(entype, w, h, fmt)
    assert enc.ret == 0
    pics = [enc.picture(nv_bytes(*f, fmt)) for f in src]
    for i, (pd, _) in enumerate(pics):
        assert enc.send(pd, user_data=("pic", i)) == 0
    assert enc.eos() == 0
    assert [s["user"] for s in enc.seen] == [("pic", i) for i in range(6)]
    assert [s["pic"] for s in enc.seen] == [pd for pd, _ in pics]
    assert all(s["ret"] == 0 and s["size"] > 0 and s["format"] == entype for s in enc.seen)
    assert [s["timestamp"] for s in enc.seen] == list(range(6))
    frames = decode(codec, enc.packets)
    assert len(frames) == 6 and (frames[0].width, frames[0].height) == (w, h)
    for f, (y, u, v) in zip(frames, src, strict=True):
        fy, fu, fv = frame_planes(f)
        assert psnr(fy, y) > 30 and psnr(fu, u) > 30 and psnr(fv, v) > 30
    if codec == "h264":
        profile = {media.H264_BASELINE_LEVEL: 66, media.H264_MAIN_LEVEL: 77,
                   media.H264_HIGH_LEVEL: 100}[entype]
        assert enc.packets[0][5] == profile or enc.packets[0][4] == profile   # SPS profile_idc
    # VENC's own output descriptions are gone once their callbacks returned
    assert all(media.dvpp_get_stream_desc_size(s["stream"]) == 0 for s in enc.seen)
    enc.close()


@pytest.mark.parametrize("height_stride", [None, 144, 160])
def test_venc_takes_no_height_stride(dev, height_stride):
    """VENC reads width stride x height x 3 / 2 bytes, the chroma rows right after the
    picture's height in luma rows, whatever height stride the description carries (CANN 6.0.1
    and 8.0.0, VENC buffer restrictions: "the height stride does not need to be configured";
    Ascend's venc sample sets 1088 for a 1080-row picture): a buffer of exactly that size
    encodes to the pictures sent."""
    w, h = 192, 136
    src = source_frames(3, w, h, seed=5)
    enc = Encoder(media.H264_MAIN_LEVEL, w, h)
    pics = []
    for f in src:
        data = nv_bytes(*f, NV12)
        assert len(data) == 192 * 136 * 3 // 2
        pd, buf = enc.picture(data)
        media.dvpp_set_pic_desc_width(pd, w)
        media.dvpp_set_pic_desc_height(pd, h)
        media.dvpp_set_pic_desc_width_stride(pd, 192)
        if height_stride is not None:
            media.dvpp_set_pic_desc_height_stride(pd, height_stride)
        pics.append(pd)
    for pd in pics:
        assert enc.send(pd) == 0
    assert enc.eos() == 0
    frames = decode("h264", enc.packets)
    assert len(frames) == 3
    for f, (y, u, v) in zip(frames, src, strict=True):
        fy, fu, fv = frame_planes(f)
        assert psnr(fy, y) > 30 and psnr(fu, u) > 30 and psnr(fv, v) > 30
    enc.close()


def test_key_frames_follow_the_interval_and_forced_i_frames(dev):
    src = source_frames(10, 128, 128)
    enc = Encoder(media.H264_MAIN_LEVEL, 128, 128, key_frame_interval=4)
    pics = [enc.picture(nv_bytes(*f, NV12)) for f in src]
    for i, (pd, _) in enumerate(pics):
        assert enc.send(pd, force_i=int(i == 6)) == 0
    assert enc.eos() == 0
    keys = [i for i, f in enumerate(decode("h264", enc.packets)) if f.key_frame]
    assert keys[:3] == [0, 4, 6] and len(enc.packets) == 10    # 6: forced
    enc.close()


def test_after_eos_the_channel_starts_a_new_stream(dev):
    enc = Encoder(media.H265_MAIN_LEVEL, 128, 128)
    pd, _ = enc.picture(nv_bytes(*source_frames(1, 128, 128)[0], NV12))
    assert enc.send(pd) == 0 and enc.eos() == 0
    first = len(enc.packets)
    assert enc.send(pd) == 0 and enc.eos() == 0
    assert first == 1 and len(enc.packets) == 2
    assert len(decode("hevc", enc.packets[1:])) == 1       # decodes on its own: a new stream
    enc.close()


def test_venc_output_decodes_through_vdec_on_the_card(dev):
    src = source_frames(4, 160, 128, seed=4)
    enc = Encoder(media.H264_HIGH_LEVEL, 160, 128)
    for f in src:
        assert enc.send(enc.picture(nv_bytes(*f, NV12))[0]) == 0
    assert enc.eos() == 0
    enc.close()
    dec = Decoder(media.H264_HIGH_LEVEL)
    for p in enc.packets:
        assert dec.send(p) == 0
    dec.close()
    ref = decode("h264", enc.packets)
    assert len(dec.seen) == len(ref) == 4
    for item, f in zip(dec.seen, ref, strict=True):
        assert all(np.array_equal(a, b) for a, b in zip(planes(item), frame_planes(f),
                                                         strict=True))


def test_encodes_run_on_the_venc_engine_at_the_published_rate(dev):
    enc = Encoder(media.H265_MAIN_LEVEL, 320, 240)
    pd, _ = enc.picture(nv_bytes(*source_frames(1, 320, 240)[0], NV12))
    assert enc.send(pd) == 0 and enc.send(pd) == 0 and enc.eos() == 0
    r = acllab.current_runtime()
    tasks = [t for t in r.tasks if t.name == "VencEncode"]
    assert len(tasks) == 2 and {t.engine_name for t in tasks} == {"VENC (device 0)"}
    prof = r.profile
    expect = prof.dvpp_task_ns + -(-320 * 240 * 1_000_000_000 // prof.venc_pixels_per_s)
    assert [t.end_ns - t.start_ns for t in tasks] == [expect, expect]
    assert tasks[1].start_ns >= tasks[0].end_ns        # one unit: one picture at a time
    enc.close()


def _encode_program() -> list[bytes]:
    acllab.reset()
    setup_device(0)
    enc = Encoder(media.H265_MAIN_LEVEL, 128, 128)
    for f in source_frames(3, 128, 128):
        enc.send(enc.picture(nv_bytes(*f, NV12))[0])
    enc.eos()
    enc.close()
    return enc.packets


def test_the_same_pictures_give_the_same_stream(dev):
    assert _encode_program() == _encode_program()


def test_no_venc_on_atlas_a2(fresh):
    acllab.configure("ascend910b")
    setup_device(0)
    with expect_code(200006):
        assert media.venc_create_channel_desc() == 0


def test_channel_creation_checks(dev):
    d = media.venc_create_channel_desc()
    cases = [({}, 100000),                                           # no callback
             ({"callback": lambda *a: None}, 100000),                # no thread
             ({"thread_id": threading.get_ident(), "pic_width": 127, "pic_height": 128},
              100000),                                               # too narrow
             ({"pic_width": 1922}, 100000),                          # too wide
             ({"pic_width": 130, "pic_height": 131}, 100000)]        # odd
    for settings, code in cases:
        for name, value in settings.items():
            assert getattr(media, f"venc_set_channel_desc_{name}")(d, value) == 0
        with expect_code(code):
            assert media.venc_create_channel(d) == code
    media.venc_set_channel_desc_pic_height(d, 1920)
    media.venc_set_channel_desc_pic_width(d, 130)
    assert media.venc_create_channel(d) == 0
    with expect_code(100000):
        assert media.venc_set_channel_desc_entype(d, 1) == 100000    # fixed now
    assert media.venc_destroy_channel(d) == 0
    with expect_code(100000):
        assert media.venc_destroy_channel(d) == 100000
    for name, value, code in (("entype", 4, 100000), ("pic_format", media.PIXEL_FORMAT_RGB_888,
                                                      200006), ("pic_format", 777, 100000),
                              ("rc_mode", 3, 100000), ("pic_width", -2, 100000)):
        with expect_code(code):
            assert getattr(media, f"venc_set_channel_desc_{name}")(d, value) == code
    cfg = media.venc_create_frame_config()
    assert media.venc_get_frame_config_eos(cfg) == 0
    assert media.venc_get_frame_config_force_i_frame(cfg) == 0
    for setter in (media.venc_set_frame_config_eos, media.venc_set_frame_config_force_i_frame):
        with expect_code(100000):
            assert setter(cfg, 2) == 100000
    assert media.venc_set_frame_config_force_i_frame(cfg, 1) == 0
    assert media.venc_get_frame_config_force_i_frame(cfg) == 1
    with expect_code(100000):
        assert media.venc_send_frame(d, 0, 0, cfg, None) == 100000    # no channel


def test_send_frame_refuses_what_venc_cannot_read(dev):
    enc = Encoder(media.H264_MAIN_LEVEL, 144, 128)
    need = 144 * 128 * 3 // 2
    small, _ = enc.picture(bytes(need - 16))
    with expect_code(100000):
        assert enc.send(small) == 100000                      # buffer smaller than the picture
    with expect_code(100000):
        assert enc.send(0) == 100000                          # no picture and no eos
    plain, _ = acl.rt.malloc(need, 0)
    pd = media.dvpp_create_pic_desc()
    media.dvpp_set_pic_desc_data(pd, plain)
    media.dvpp_set_pic_desc_size(pd, need)
    with expect_code(100000):
        assert enc.send(pd) == 100000                         # not DVPP memory
    media.dvpp_set_pic_desc_width_stride(pd, 136)
    with expect_code(100000):
        assert enc.send(pd) == 100000                         # a stride below the width's 16
    assert enc.seen == []
    enc.close()


def test_a_packet_larger_than_the_output_buffer_reaches_the_callback_with_code_1(dev):
    enc = Encoder(media.H265_MAIN_LEVEL, 128, 128, buf_size=64)
    pd, _ = enc.picture(nv_bytes(*source_frames(1, 128, 128)[0], NV12))
    assert enc.send(pd) == 0 and enc.eos() == 0
    assert [(s["ret"], s["size"]) for s in enc.seen] == [(1, 0)]
    enc.close()
