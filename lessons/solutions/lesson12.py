"""Reference solution for lesson 12 (Preprocessing on DVPP): the function the notebook's exercise
asks for.

tests/test_checks_lesson12.py grades it with acllab.checks, and tests/test_lessons.py injects it
into the notebook after the exercise cell. Learners: try the exercise first.
"""

from __future__ import annotations

from acllab.constants import ACL_MEMCPY_HOST_TO_DEVICE

__all__ = ["preprocess", "decode_clip"]


def _align(value, to):
    return -(-value // to) * to


def _describe(media, desc, ptr, size, width, height, width_stride, height_stride):
    media.dvpp_set_pic_desc_data(desc, ptr)
    media.dvpp_set_pic_desc_size(desc, size)
    media.dvpp_set_pic_desc_format(desc, media.PIXEL_FORMAT_YUV_SEMIPLANAR_420)
    media.dvpp_set_pic_desc_width(desc, width)
    media.dvpp_set_pic_desc_height(desc, height)
    media.dvpp_set_pic_desc_width_stride(desc, width_stride)
    media.dvpp_set_pic_desc_height_stride(desc, height_stride)


def preprocess(acl, jpegs, outputs, width, height, stream):
    """Decode each JPEG on JPEGD (a stream of its own) and resize it on VPC (on ``stream``)
    into its output: an NV12 picture of ``width`` x ``height`` with VPC's strides."""
    media = acl.media
    nv12 = media.PIXEL_FORMAT_YUV_SEMIPLANAR_420
    channel = media.dvpp_create_channel_desc()
    media.dvpp_create_channel(channel)
    resize = media.dvpp_create_resize_config()
    decode_stream, _ = acl.rt.create_stream()
    out_ws, out_hs = max(32, _align(width, 16)), _align(height, 2)
    out_size = out_ws * out_hs * 3 // 2

    # 1. on the host: read each header, size the decoded picture, copy the JPEG to DVPP memory
    jobs = []
    for jpeg in jpegs:
        n = len(jpeg)
        host = acl.util.bytes_to_ptr(jpeg)
        w, h, _components, _ = media.dvpp_jpeg_get_image_info(host, n)
        dec_size, _ = media.dvpp_jpeg_predict_dec_size(host, n, nv12)
        src, _ = media.dvpp_malloc(n)
        dec, _ = media.dvpp_malloc(dec_size)
        acl.rt.memcpy(src, n, host, n, ACL_MEMCPY_HOST_TO_DEVICE)
        w2, h2 = _align(w, 2), _align(h, 2)
        jobs.append((src, n, dec, dec_size, w2, h2, _align(w2, 128), _align(h2, 16)))

    # 2. on the card: decode i on decode_stream, then resize i on stream once decode i is done
    descs, events = [], []
    for (src, n, dec, dec_size, w2, h2, ws, hs), out in zip(jobs, outputs, strict=True):
        decoded = media.dvpp_create_pic_desc()
        _describe(media, decoded, dec, dec_size, 0, 0, 0, 0)      # JPEGD fills in the rest
        media.dvpp_jpeg_decode_async(channel, src, n, decoded, decode_stream)
        event, _ = acl.rt.create_event()
        acl.rt.record_event(event, decode_stream)
        acl.rt.stream_wait_event(stream, event)
        _describe(media, decoded, dec, dec_size, w2, h2, ws, hs)  # for VPC, known already
        resized = media.dvpp_create_pic_desc()
        _describe(media, resized, out, out_size, width, height, out_ws, out_hs)
        media.dvpp_vpc_resize_async(channel, decoded, resized, resize, stream)
        descs += [decoded, resized]
        events.append(event)

    # 3. wait, then release everything made here (not the outputs, not the stream)
    acl.rt.synchronize_stream(stream)
    for desc in descs:
        media.dvpp_destroy_pic_desc(desc)
    for src, _n, dec, *_rest in jobs:
        media.dvpp_free(src)
        media.dvpp_free(dec)
    for event in events:
        acl.rt.destroy_event(event)
    acl.rt.destroy_stream(decode_stream)
    media.dvpp_destroy_resize_config(resize)
    media.dvpp_destroy_channel(channel)
    media.dvpp_destroy_channel_desc(channel)


def decode_clip(acl, frames, entype, width, height, outputs):
    """Decode an annex-b clip on VDEC: picture i (display order) into ``outputs[i]``."""
    media = acl.media
    ws, hs = max(32, _align(width, 16)), _align(height, 2)
    size = ws * hs * 3 // 2
    context, _ = acl.rt.get_context()
    running = [True]

    def poll(_args):                      # the callback thread: it runs the callbacks
        acl.rt.set_context(context)
        while running[0]:
            acl.rt.process_report(100)

    def on_picture(stream_desc, pic_desc, user_data):
        media.dvpp_destroy_stream_desc(stream_desc)
        media.dvpp_destroy_pic_desc(pic_desc)

    thread_id, _ = acl.util.start_thread(poll, [])
    channel = media.vdec_create_channel_desc()
    media.vdec_set_channel_desc_channel_id(channel, 0)
    media.vdec_set_channel_desc_thread_id(channel, thread_id)
    media.vdec_set_channel_desc_callback(channel, on_picture)
    media.vdec_set_channel_desc_entype(channel, entype)
    media.vdec_set_channel_desc_out_pic_format(channel, media.PIXEL_FORMAT_YUV_SEMIPLANAR_420)
    media.vdec_create_channel(channel)
    inbuf, _ = media.dvpp_malloc(max(len(f) for f in frames))
    for frame, out in zip(frames, outputs, strict=True):
        n = len(frame)
        acl.rt.memcpy(inbuf, n, acl.util.bytes_to_ptr(frame), n, ACL_MEMCPY_HOST_TO_DEVICE)
        stream_desc = media.dvpp_create_stream_desc()
        media.dvpp_set_stream_desc_data(stream_desc, inbuf)
        media.dvpp_set_stream_desc_size(stream_desc, n)
        pic_desc = media.dvpp_create_pic_desc()
        media.dvpp_set_pic_desc_data(pic_desc, out)
        media.dvpp_set_pic_desc_size(pic_desc, size)
        media.vdec_send_frame(channel, stream_desc, pic_desc, 0, None)
    eos = media.dvpp_create_stream_desc()           # the end: every callback has run after it
    media.dvpp_set_stream_desc_eos(eos, 1)
    media.vdec_send_frame(channel, eos, 0, 0, None)
    media.dvpp_destroy_stream_desc(eos)
    media.vdec_destroy_channel(channel)
    media.vdec_destroy_channel_desc(channel)
    media.dvpp_free(inbuf)
    running[0] = False
    acl.util.stop_thread(thread_id)
