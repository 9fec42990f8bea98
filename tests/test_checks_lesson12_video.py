"""acllab.checks 12.vdec_clip: the reference passes, the placeholder is "not done", and the
mistakes a learner makes with VDEC fail the item that names them.

Each wrong answer below is the reference with one mistake: no end of stream (the last
pictures never come out), pictures made on the host, frames sent twice, NV21 written where
NV12 was asked for, the callback thread left running.
"""

from __future__ import annotations

import threading

import pytest
from checks_support import failed, item, load_solutions, placeholder

from acllab.checks import check

pytest.importorskip("av")

SOLUTIONS = load_solutions("12")
EX = "12.vdec_clip"
H2D = 1


def test_reference_solution_reports_its_items():
    result = check(EX, SOLUTIONS.decode_clip)
    assert result.status == "passed", str(result)
    assert [(i.name, i.kind) for i in result.items] == [
        ("runs", "result"), ("pictures", "result"), ("on VDEC", "result"),
        ("frames sent", "result"), ("again", "result"), ("sanitizer", "process"),
        ("resources", "process")]


def test_reference_solution_passes_on_more_seeds():
    result = check(EX, SOLUTIONS.decode_clip, seeds=range(3, 7))
    assert result.status == "passed", str(result)


def test_the_placeholder_is_not_done():
    result = check(EX, placeholder)
    assert result.status == "not done" and result.score == 0


FLAGS: list = []               # every callback thread's loop flag, to end strays at the end


def _channel(acl, entype, callback):
    """A channel with a callback thread; returns (channel, stop)."""
    media = acl.media
    context, _ = acl.rt.get_context()
    running = [True]
    FLAGS.append(running)

    def poll(_args):
        acl.rt.set_context(context)
        while running[0]:
            acl.rt.process_report(100)

    tid, _ = acl.util.start_thread(poll, [])
    ch = media.vdec_create_channel_desc()
    media.vdec_set_channel_desc_thread_id(ch, tid)
    media.vdec_set_channel_desc_callback(ch, callback)
    media.vdec_set_channel_desc_entype(ch, entype)
    media.vdec_create_channel(ch)

    def stop():
        running[0] = False
        acl.util.stop_thread(tid)

    return ch, stop


def _send_all(acl, ch, frames, outputs, size, fmt=1, twice=False):
    media = acl.media
    inbuf, _ = media.dvpp_malloc(max(map(len, frames)))
    for frame, out in zip(frames, outputs, strict=True):
        for _ in range(2 if twice else 1):
            acl.rt.memcpy(inbuf, len(frame), acl.util.bytes_to_ptr(frame), len(frame), H2D)
            sd = media.dvpp_create_stream_desc()
            media.dvpp_set_stream_desc_data(sd, inbuf)
            media.dvpp_set_stream_desc_size(sd, len(frame))
            pd = media.dvpp_create_pic_desc()
            media.dvpp_set_pic_desc_data(pd, out)
            media.dvpp_set_pic_desc_size(pd, size)
            media.dvpp_set_pic_desc_format(pd, fmt)
            media.vdec_send_frame(ch, sd, pd, 0, None)
    return inbuf


def _size(width, height):
    return max(32, -(-width // 16) * 16) * (-(-height // 2) * 2) * 3 // 2


def _release(acl, sd, pd, _data):
    acl.media.dvpp_destroy_stream_desc(sd)
    acl.media.dvpp_destroy_pic_desc(pd)


def no_end_of_stream(acl, frames, entype, width, height, outputs):
    """Sends every frame, then returns: no eos, the channel left as it is."""
    ch, stop = _channel(acl, entype, lambda sd, pd, d: _release(acl, sd, pd, d))
    _send_all(acl, ch, frames, outputs, _size(width, height))
    acl.rt.synchronize_device()
    stop()


def host_decode(acl, frames, entype, width, height, outputs):
    """PyAV on the host, the pictures copied into the outputs."""
    import av
    import numpy as np

    dec = av.CodecContext.create("hevc" if entype == 0 else "h264", "r")
    pics = [f for u in frames for f in dec.decode(av.Packet(u))] + list(dec.decode(None))
    ws, hs = max(32, -(-width // 16) * 16), -(-height // 2) * 2
    for f, out in zip(pics, outputs, strict=True):
        a = f.to_ndarray(format="nv12")
        buf = np.zeros((hs * 3 // 2, ws), np.uint8)
        buf[:height, :width] = a[:height]
        buf[hs:hs + height // 2, :width] = a[height:]
        data = buf.tobytes()
        acl.rt.memcpy(out, len(data), acl.util.bytes_to_ptr(data), len(data), H2D)


def sent_twice(acl, frames, entype, width, height, outputs):
    ch, stop = _channel(acl, entype, lambda sd, pd, d: _release(acl, sd, pd, d))
    inbuf = _send_all(acl, ch, frames, outputs, _size(width, height), twice=True)
    acl.media.vdec_destroy_channel(ch)
    acl.media.vdec_destroy_channel_desc(ch)
    acl.media.dvpp_free(inbuf)
    stop()


def nv21_pictures(acl, frames, entype, width, height, outputs):
    ch, stop = _channel(acl, entype, lambda sd, pd, d: _release(acl, sd, pd, d))
    inbuf = _send_all(acl, ch, frames, outputs, _size(width, height), fmt=2)
    acl.media.vdec_destroy_channel(ch)
    acl.media.vdec_destroy_channel_desc(ch)
    acl.media.dvpp_free(inbuf)
    stop()


def thread_left_running(acl, frames, entype, width, height, outputs):
    ch, _stop = _channel(acl, entype, lambda sd, pd, d: _release(acl, sd, pd, d))
    inbuf = _send_all(acl, ch, frames, outputs, _size(width, height))
    acl.media.vdec_destroy_channel(ch)
    acl.media.vdec_destroy_channel_desc(ch)
    acl.media.dvpp_free(inbuf)


def destroy_instead_of_eos(acl, frames, entype, width, height, outputs):
    """Correct, written differently: no eos frame, vdec_destroy_channel ends the stream; the
    output descriptions also give the pictures' width, height and strides."""
    media = acl.media
    ws, hs = max(32, -(-width // 16) * 16), -(-height // 2) * 2
    ch, stop = _channel(acl, entype, lambda sd, pd, d: _release(acl, sd, pd, d))
    inbuf, _ = media.dvpp_malloc(max(map(len, frames)))
    for frame, out in zip(frames, outputs, strict=True):
        acl.rt.memcpy(inbuf, len(frame), acl.util.bytes_to_ptr(frame), len(frame), H2D)
        sd = media.dvpp_create_stream_desc()
        media.dvpp_set_stream_desc_data(sd, inbuf)
        media.dvpp_set_stream_desc_size(sd, len(frame))
        pd = media.dvpp_create_pic_desc()
        for field, value in (("data", out), ("size", ws * hs * 3 // 2), ("format", 1),
                             ("width", width), ("height", height), ("width_stride", ws),
                             ("height_stride", hs)):
            getattr(media, f"dvpp_set_pic_desc_{field}")(pd, value)
        media.vdec_send_frame(ch, sd, pd, 0, None)
    media.vdec_destroy_channel(ch)
    media.vdec_destroy_channel_desc(ch)
    media.dvpp_free(inbuf)
    stop()


_DONE: list = []


def decodes_only_once(acl, frames, entype, width, height, outputs):
    """Right the first time; the second call returns at once (the pictures are 'there')."""
    if _DONE:
        return
    _DONE.append(True)
    SOLUTIONS.decode_clip(acl, frames, entype, width, height, outputs)


def test_a_decode_clip_that_remembers_fails_again():
    _DONE.clear()
    result = check(EX, decodes_only_once, seeds=(0,))
    assert failed(result) == {"again"} and result.score == 0


def test_a_correct_answer_written_differently_passes():
    result = check(EX, destroy_instead_of_eos)
    assert result.status == "passed", str(result)


def test_without_the_end_of_stream_the_last_pictures_are_missing():
    result = check(EX, no_end_of_stream)
    assert result.score == 0 and "pictures" in failed(result)
    assert "eos" in item(result, "pictures").hint
    assert "resources" in failed(result)              # the channel is still there


def test_pictures_decoded_on_the_host_are_not_trusted():
    result = check(EX, host_decode)
    assert result.score == 0
    assert "on VDEC" in failed(result) and "pictures" not in failed(result)


def test_frames_sent_twice_fail():
    result = check(EX, sent_twice)
    assert result.score == 0 and "frames sent" in failed(result)


def test_nv21_where_nv12_was_asked_for_fails():
    result = check(EX, nv21_pictures)
    assert result.score == 0 and failed(result) == {"pictures"}


def test_a_callback_thread_left_running_fails_resources():
    from acllab.acl import util

    before, known = threading.active_count(), set(util._THREADS)
    try:
        result = check(EX, thread_left_running)
    finally:
        for flag in FLAGS:                 # end the threads the wrong answer left behind
            flag[0] = False
        for tid in set(util._THREADS) - known:
            util._THREADS.pop(tid).join(5)
    assert failed(result) == {"resources"} and 0 < result.score < 1
    assert "callback thread" in item(result, "resources").message
    assert threading.active_count() == before
