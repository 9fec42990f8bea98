"""``acl.media`` VDEC: video decoding channels (aclvdecChannelDesc, aclvdecCreateChannel,
aclvdecSendFrame), H.264 / H.265 annex-b frames to YUV420SP pictures in DVPP memory.

The flow of pyACL's samples (vdec_resnet50_classification, AclLite's DvppVdec)::

    tid, _ = acl.util.start_thread(poll, [])      # loops on acl.rt.process_report(timeout)
    desc = acl.media.vdec_create_channel_desc()
    acl.media.vdec_set_channel_desc_channel_id(desc, 0)
    acl.media.vdec_set_channel_desc_thread_id(desc, tid)
    acl.media.vdec_set_channel_desc_callback(desc, on_frame)   # (stream_desc, pic_desc, data)
    acl.media.vdec_set_channel_desc_entype(desc, H264_MAIN_LEVEL)
    acl.media.vdec_set_channel_desc_out_pic_format(desc, PIXEL_FORMAT_YUV_SEMIPLANAR_420)
    acl.media.vdec_create_channel(desc)
    for each frame: a stream description (data, size) and an output picture description
        (DVPP buffer, size), then acl.media.vdec_send_frame(desc, stream, pic, config, data)
    an eos stream description (or vdec_destroy_channel) ends the stream

What acllab does, with the facts' sources (CANN 8.0.0 / 8.5.0 AscendCL and pyACL references:
aclvdecSendFrame, VDEC "Functions and Restrictions", vdec_set_channel_desc_*):

* ``vdec_create_channel`` makes the channel's two streams in the current context, as CANN
  does: a send stream, and the stream its callbacks are reported on, subscribed to the
  channel's thread (``acl.rt.subscribe_report``), so the callbacks run through that thread's
  ``acl.rt.process_report`` like any report. Channel ids are 0 to 31 on Atlas 200/300/500
  inference and training products and 0 to 255 on Atlas A2 (``vdec_channels``); an id in
  use on the device cannot make a second channel.
* ``vdec_send_frame`` hands one whole frame to the decoder (a VdecSendFrame task the call
  waits for: the input buffer is free when it returns), which decodes it with a real
  decoder (:mod:`acllab.dvpp.video`, PyAV); a VdecDecode task on the device's VDEC engine
  then writes the pictures the decoder output into the output descriptions' DVPP buffers,
  and each picture's callback follows on the callback stream (aclvdecSendFrame "wraps
  aclrtLaunchCallback"; launched as ACL_CALLBACK_BLOCK, so the callbacks run in order).
  Pictures come out in display order: with B-frames a frame's picture arrives only after
  later frames were sent, and the i-th picture goes to the i-th output description sent.
* Output pictures: YUV420SP NV12 or NV21, width and height even, width stride the width
  rounded up to 16 (at least 32), height stride the height rounded up to 2, buffer at least
  ws * hs * 3 / 2 bytes. Atlas A2 (the ascend910b profile) has rules of its own: strides
  with no alignment (at least the width and height; the picture's own by default), and
  RGB888 / BGR888 too (width stride at least width x 3, buffer ws * hs), converted with the
  full-range BT.601 matrix VPC uses in acllab (:mod:`acllab.dvpp.layouts`; the card's matrix
  is not published). A description that sets none of width, height and strides gets the
  stream's own; one that sets them must set all four (VDEC resizes to them); a format set on
  the description wins over the channel's.
* A frame the decoder rejects (or whose picture does not fit its buffer) reaches the
  callback with its picture description's ret code 1; a frame that gave no picture by the
  end of the stream, with 0x20000 (ERR_DECODE_NOPIC). VDEC never writes 0 there: a
  description reused after a failure keeps the code until the program clears it with
  dvpp_set_pic_desc_ret_code (CANN troubleshooting, "VDEC exception due to incorrect setting
  of retCode"). An empty frame (size 0 or no data)
  without eos is refused (100000).
* A frame with eos 1 ends the stream: the call returns once every frame sent was decoded and
  every callback ran (no callback for the eos frame itself), and the channel takes a new
  stream. ``vdec_destroy_channel`` does the same before it destroys the channel.

Differs from hardware: the decoder is FFmpeg's (through PyAV), and its output delay is
FFmpeg's (the frames a stream's reordering needs), in either output mode; VDEC's own
buffering ("default mode", out_mode 0) holds frames longer. Calls and codes the references
do not give are ACL_ERROR_INVALID_PARAM (100000), with an explanation. The callbacks run on
the channel's thread, in its process_report, as every report-thread callback in acllab does
(:mod:`acllab.callbacks`): one that waits for another thread's pyACL call (a full bounded
queue that the main thread empties between acl calls, as AclLite's VideoCapture has) waits
only its own thread, as on a card.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from ... import constants as C
from ...dvpp import formats as F
from ...dvpp import video as V
from ...dvpp.tasks import dvpp_device
from ...errors import Fail
from .._api import as_int, rt
from ..util import write_log
from ._checks import _span
from ._desc import FORMAT_NAMES, PicDesc, StreamDesc, _Desc, _destroy, _get, _new, api

__all__ = [
    "vdec_create_channel_desc", "vdec_destroy_channel_desc",
    "vdec_set_channel_desc_channel_id", "vdec_get_channel_desc_channel_id",
    "vdec_set_channel_desc_thread_id", "vdec_get_channel_desc_thread_id",
    "vdec_set_channel_desc_callback", "vdec_get_channel_desc_callback",
    "vdec_set_channel_desc_entype", "vdec_get_channel_desc_entype",
    "vdec_set_channel_desc_out_pic_format", "vdec_get_channel_desc_out_pic_format",
    "vdec_set_channel_desc_out_pic_width", "vdec_get_channel_desc_out_pic_width",
    "vdec_set_channel_desc_out_pic_height", "vdec_get_channel_desc_out_pic_height",
    "vdec_set_channel_desc_ref_frame_num", "vdec_get_channel_desc_ref_frame_num",
    "vdec_set_channel_desc_out_mode", "vdec_get_channel_desc_out_mode",
    "vdec_create_frame_config", "vdec_destroy_frame_config",
    "vdec_create_channel", "vdec_destroy_channel", "vdec_send_frame",
    "H265_MAIN_LEVEL", "H264_BASELINE_LEVEL", "H264_MAIN_LEVEL", "H264_HIGH_LEVEL",
    "ERR_DECODE_NOPIC",
]

H265_MAIN_LEVEL = V.H265_MAIN_LEVEL
H264_BASELINE_LEVEL = V.H264_BASELINE_LEVEL
H264_MAIN_LEVEL = V.H264_MAIN_LEVEL
H264_HIGH_LEVEL = V.H264_HIGH_LEVEL
#: the ret code of a frame that gave no picture (CANN's aclvdecSendFrame: ERR_DECODE_NOPIC)
ERR_DECODE_NOPIC = 0x20000
#: the ret code of a frame the decoder lost ("0 indicates success, 1 failure": pyACL VDEC
#: development guide, CANN 8.0.0)
ERR_DECODE_FAIL = 1

VDEC_OUTPUT_FORMATS = F.YUV420SP_FORMATS
#: Atlas A2 chips' VDEC also writes packed RGB888 and BGR888 ("VDEC functions and
#: restrictions", the Atlas A2 columns, CANN 8.0.0.alpha and 8.5.0)
VDEC_A2_OUTPUT_FORMATS = (*F.YUV420SP_FORMATS, F.PIXEL_FORMAT_RGB_888, F.PIXEL_FORMAT_BGR_888)


def _a2(profile) -> bool:
    """True for the Atlas A2 (910B) profile, whose VDEC has its own stride rules."""
    return profile.soc_name.startswith(("Ascend910B", "Ascend910_93"))


def _output_formats() -> tuple[int, ...]:
    return VDEC_A2_OUTPUT_FORMATS if _a2(rt().profile) else VDEC_OUTPUT_FORMATS


class VdecChannelDesc(_Desc):
    """aclvdecChannelDesc: a decoding channel's settings, and the channel once created.

    Defaults: channel id 0, thread id 0 (none), no callback, entype H265_MAIN_LEVEL (0),
    output format YUV420SP NV12 (the documented default), out mode 0, output width
    and height 0 (the stream's), reference frames 0.
    """

    kind = "VDEC channel description"

    def __init__(self):
        super().__init__()
        self.channel_id = self.thread_id = self.entype = self.out_mode = 0
        self.out_pic_width = self.out_pic_height = self.ref_frame_num = 0
        self.out_pic_format = F.PIXEL_FORMAT_YUV_SEMIPLANAR_420
        self.callback = None
        self.channel: _Channel | None = None

    def __repr__(self) -> str:
        state = (f"channel {self.channel_id} on device {self.channel.device.id}"
                 if self.channel is not None else "no channel")
        return (f"<VdecChannelDesc 0x{self.handle:x}: {state}, "
                f"{V.STREAM_FORMATS.get(self.entype, self.entype)}>")


class VdecFrameConfig(_Desc):
    """aclvdecFrameConfig: reserved by CANN (vdec_send_frame also takes 0)."""

    kind = "VDEC frame config"


@dataclass
class _Sent:
    """A frame sent and waiting for its picture: what its callback gets."""

    stream_handle: int
    pic: PicDesc
    user_data: object
    region: object              # the output buffer's region and the picture's offset in it
    offset: int


class _Channel:
    """A created channel: its device, streams, decoder and the frames awaiting pictures."""

    def __init__(self, desc: VdecChannelDesc, device, dd, send, report, decoder):
        self.desc, self.device, self.dd = desc, device, dd
        self.send_stream, self.report_stream = send, report
        self.decoder = decoder
        self.engine = dd.vdec       # the device's VDEC engine (it exists from now on)
        self.callback = desc.callback
        self.id = desc.channel_id
        self.out_format = desc.out_pic_format
        self.pending: deque[_Sent] = deque()
        self.size = (0, 0)          # the stream's width and height, once known


def _desc(handle) -> VdecChannelDesc:
    return _get(handle, VdecChannelDesc, "vdec_channel_desc")


@api("aclvdecCreateChannelDesc", bare=True, outs=(0,))
def vdec_create_channel_desc():
    """A VDEC channel description (set its fields, then vdec_create_channel)."""
    return _new(VdecChannelDesc())


@api("aclvdecDestroyChannelDesc")
def vdec_destroy_channel_desc(vdec_channel_desc):
    """Destroy the description (destroy its channel first: vdec_destroy_channel)."""
    _destroy(vdec_channel_desc, VdecChannelDesc, "vdec_channel_desc")


def _u32(value, name: str) -> int:
    v = as_int(value, name)
    if not 0 <= v < 1 << 32:
        raise Fail(100000, f"{name} {v} does not fit its 32-bit unsigned field")
    return v


def _settable(desc: VdecChannelDesc) -> None:
    if desc.channel is not None:
        raise Fail(100000, f"vdec_channel_desc 0x{desc.handle:x} already has a channel: its "
                           "settings are fixed until vdec_destroy_channel")


@api("aclvdecSetChannelDescChannelId")
def vdec_set_channel_desc_channel_id(vdec_channel_desc, channel_id):
    """The decoding channel's id: 0 to 31 on Atlas 200/300/500 inference and Atlas training
    products, 0 to 255 on Atlas A2 (pyACL reference, vdec_set_channel_desc_channel_id); the
    id is checked against the device when the channel is created."""
    desc = _desc(vdec_channel_desc)
    v = _u32(channel_id, "channel_id")
    _settable(desc)
    desc.channel_id = v


@api("aclvdecSetChannelDescThreadId")
def vdec_set_channel_desc_thread_id(vdec_channel_desc, thread_id):
    """The thread whose acl.rt.process_report runs the channel's callbacks."""
    desc = _desc(vdec_channel_desc)
    v = as_int(thread_id, "thread_id")
    if not 0 <= v < 1 << 64:
        raise Fail(100000, f"thread_id {v} is no thread id")
    _settable(desc)
    desc.thread_id = v


@api("aclvdecSetChannelDescCallback")
def vdec_set_channel_desc_callback(vdec_channel_desc, callback):
    """The function each decoded frame reaches: ``callback(stream_desc, pic_desc,
    user_data)`` with the frame's stream description, its output picture description and the
    user data given to vdec_send_frame."""
    desc = _desc(vdec_channel_desc)
    if not callable(callback):
        raise TypeError(f"callback must be callable, not {type(callback).__name__}")
    _settable(desc)
    desc.callback = callback


@api("aclvdecSetChannelDescEnType")
def vdec_set_channel_desc_entype(vdec_channel_desc, entype):
    """The stream's format, an acldvppStreamFormat: 0 H265_MAIN_LEVEL, 1 H264_BASELINE_LEVEL,
    2 H264_MAIN_LEVEL, 3 H264_HIGH_LEVEL."""
    desc = _desc(vdec_channel_desc)
    v = as_int(entype, "entype")
    if v not in V.STREAM_FORMATS:
        names = ", ".join(f"{n} ({k})" for k, n in V.STREAM_FORMATS.items())
        raise Fail(100000, f"entype {v} is not an acldvppStreamFormat: use {names}")
    _settable(desc)
    desc.entype = v


@api("aclvdecSetChannelDescOutPicFormat")
def vdec_set_channel_desc_out_pic_format(vdec_channel_desc, out_pic_format):
    """The output pictures' format: YUV420SP NV12 (1) or NV21 (2) (VDEC "Functions and
    Restrictions", Atlas 200/300/500 inference and training products). Another
    acldvppPixelFormat returns ACL_ERROR_FEATURE_UNSUPPORTED (200006).

    On the ascend910b profile (Atlas A2) VDEC also writes RGB888 (12) and BGR888 (13), as
    CANN documents for Atlas A2 products; NV12 is the default (pyACL reference,
    vdec_set_channel_desc_out_pic_format: "if not set, YUV420SP NV12")."""
    desc = _desc(vdec_channel_desc)
    v = as_int(out_pic_format, "out_pic_format")
    _out_format(v, "out_pic_format")
    _settable(desc)
    desc.out_pic_format = v


def _out_format(fmt: int, what: str) -> None:
    allowed = _output_formats()
    if fmt in allowed:
        return
    names = ", ".join(f"{FORMAT_NAMES[f]} ({f})" for f in allowed)
    if fmt in FORMAT_NAMES and fmt != F.PIXEL_FORMAT_UNKNOWN:
        raise Fail(200006, f"{what} is {FORMAT_NAMES[fmt]} ({fmt}): the {rt().profile.name} "
                           f"VDEC writes {names}")
    raise Fail(100000, f"{what} {fmt} is not an output format of VDEC: use one of {names}")


def _plain_setter(field: str, c_name: str, doc: str, check=None):
    def setter(vdec_channel_desc, value):
        desc = _desc(vdec_channel_desc)
        v = _u32(value, field)
        if check is not None:
            check(v)
        _settable(desc)
        setattr(desc, field, v)

    setter.__name__ = setter.__qualname__ = f"vdec_set_channel_desc_{field}"
    setter.__doc__ = doc
    return api(c_name)(setter)


def _out_mode(v: int) -> None:
    if v not in (0, 1):
        raise Fail(100000, f"out_mode is 0 (default: VDEC may hold frames before it outputs "
                           f"them) or 1 (fast: one frame in, one picture out), not {v}")


def _ref_frames(v: int) -> None:
    r = rt()
    if not r.profile.soc_name.startswith(("Ascend910B", "Ascend910_93")):
        raise Fail(200006, f"the {r.profile.name} VDEC takes no reference frame number: CANN "
                           "refuses vdec_set_channel_desc_ref_frame_num on Atlas 200/300/500 "
                           "inference and Atlas training products (aclvdecSendFrame)")
    if v > 16:
        raise Fail(100000, f"ref_frame_num {v}: 0 to 16")


vdec_set_channel_desc_out_mode = _plain_setter(
    "out_mode", "aclvdecSetChannelDescOutMode",
    "Whether pictures come out at once: 0 default mode, 1 fast mode (simple streams only: no "
    "B-frames, no long-term references).", _out_mode)
vdec_set_channel_desc_out_pic_width = _plain_setter(
    "out_pic_width", "aclvdecSetChannelDescOutPicWidth",
    "The channel's output width (kept; the output picture descriptions decide).")
vdec_set_channel_desc_out_pic_height = _plain_setter(
    "out_pic_height", "aclvdecSetChannelDescOutPicHeight",
    "The channel's output height (kept; the output picture descriptions decide).")
vdec_set_channel_desc_ref_frame_num = _plain_setter(
    "ref_frame_num", "aclvdecSetChannelDescRefFrameNum",
    "The number of reference frames: refused (200006) on the ascend310 profile, as CANN "
    "refuses it on Atlas 200/300/500 inference products.", _ref_frames)


def _getter(field: str, c_name: str):
    def getter(vdec_channel_desc):
        return getattr(_desc(vdec_channel_desc), field)

    getter.__name__ = getter.__qualname__ = f"vdec_get_channel_desc_{field}"
    getter.__doc__ = f"The channel description's {field.replace('_', ' ')} (0 for a bad handle)."
    return api(c_name, bare=True, outs=(0,), needs_init=False)(getter)


vdec_get_channel_desc_channel_id = _getter("channel_id", "aclvdecGetChannelDescChannelId")
vdec_get_channel_desc_thread_id = _getter("thread_id", "aclvdecGetChannelDescThreadId")
vdec_get_channel_desc_entype = _getter("entype", "aclvdecGetChannelDescEnType")
vdec_get_channel_desc_out_pic_format = _getter("out_pic_format",
                                               "aclvdecGetChannelDescOutPicFormat")
vdec_get_channel_desc_out_pic_width = _getter("out_pic_width", "aclvdecGetChannelDescOutPicWidth")
vdec_get_channel_desc_out_pic_height = _getter("out_pic_height",
                                               "aclvdecGetChannelDescOutPicHeight")
vdec_get_channel_desc_ref_frame_num = _getter("ref_frame_num",
                                              "aclvdecGetChannelDescRefFrameNum")
vdec_get_channel_desc_out_mode = _getter("out_mode", "aclvdecGetChannelDescOutMode")


@api("aclvdecGetChannelDescCallback", bare=True, outs=(None,), needs_init=False)
def vdec_get_channel_desc_callback(vdec_channel_desc):
    """The channel description's callback (None when unset or for a bad handle)."""
    return _desc(vdec_channel_desc).callback


@api("aclvdecCreateFrameConfig", bare=True, outs=(0,))
def vdec_create_frame_config():
    """A frame configuration (reserved by CANN; vdec_send_frame also takes 0)."""
    return _new(VdecFrameConfig())


@api("aclvdecDestroyFrameConfig")
def vdec_destroy_frame_config(vdec_frame_config):
    _destroy(vdec_frame_config, VdecFrameConfig, "vdec_frame_config")


# -- channels ----------------------------------------------------------------------------------

@api("aclvdecCreateChannel")
def vdec_create_channel(vdec_channel_desc):
    """Create the decoding channel on the current device: its send and callback streams
    (the callback stream subscribed to the channel's thread) and its decoder."""
    desc = _desc(vdec_channel_desc)
    if desc.channel is not None:
        raise Fail(100000, f"vdec_channel_desc 0x{desc.handle:x} already has a channel")
    if desc.callback is None:
        raise Fail(100000, "the channel has no callback: call "
                           "acl.media.vdec_set_channel_desc_callback first")
    if desc.thread_id == 0:
        raise Fail(100000, "the channel has no callback thread: call "
                           "acl.media.vdec_set_channel_desc_thread_id with the id of the "
                           "thread that calls acl.rt.process_report (acl.util.start_thread)")
    r = rt()
    ctx = r.current_context()
    dev = ctx.device
    limit = dev.profile.vdec_channels
    if desc.channel_id >= limit:
        raise Fail(100000, f"channel id {desc.channel_id}: the {dev.profile.name} VDEC has "
                           f"channels 0 to {limit - 1}")
    dd = dvpp_device(r, dev)
    if desc.channel_id in dd.vdec_channels:
        raise Fail(100000, f"channel id {desc.channel_id} is already in use on device "
                           f"{dev.id} (HI_ERR_VDEC_EXIST): each channel needs its own id")
    V.load_av()                       # without PyAV: 200006 before anything is made
    r.spend(r.profile.api_ns)
    send = r.create_stream(ctx)
    try:
        report = r.create_stream(ctx)
    except Fail:
        r.destroy_stream(send)
        raise
    send.role = f"VDEC channel {desc.channel_id} send"
    report.role = f"VDEC channel {desc.channel_id} callbacks"
    # subscribed first (the report thread is polling already), then the decoder is opened
    r.subscribe(report, desc.thread_id)
    try:
        decoder = V.Decoder(desc.entype)
    except BaseException:
        r.destroy_stream(report)
        r.destroy_stream(send)
        raise
    ch = _Channel(desc, dev, dd, send, report, decoder)
    dd.vdec_channels[desc.channel_id] = ch
    desc.channel = ch


@api("aclvdecDestroyChannel")
def vdec_destroy_channel(vdec_channel_desc):
    """End the stream (as an eos frame does: every frame sent is decoded and its callback
    has run), then destroy the channel and its streams."""
    desc = _desc(vdec_channel_desc)
    ch = desc.channel
    if ch is None:
        raise Fail(100000, f"vdec_channel_desc 0x{desc.handle:x} has no channel to destroy")
    r = rt()
    r.spend(r.profile.api_ns)
    try:
        _end_of_stream(r, ch)
    finally:
        desc.channel = None
        ch.dd.vdec_channels.pop(ch.id, None)
        for s in (ch.send_stream, ch.report_stream):
            r.destroy_stream(s)


def _channel(handle) -> _Channel:
    desc = _desc(handle)
    if desc.channel is None:
        raise Fail(100000, f"vdec_channel_desc 0x{desc.handle:x} has no channel: call "
                           "acl.media.vdec_create_channel first")
    return desc.channel


def _geometry(pic: PicDesc, fmt: int) -> tuple[int, int, int, int] | None:
    """The output description's own (width, height, width stride, height stride), checked,
    or None when it sets none of them (the stream's are used)."""
    fields = ("width", "height", "width_stride", "height_stride")
    given = [f for f in fields if f in pic.set_fields]
    if not given:
        return None
    if len(given) < 4:
        missing = ", ".join(f for f in fields if f not in given)
        raise Fail(100000, f"the output picture description sets {', '.join(given)} but not "
                           f"{missing}: VDEC takes all four or none (none: the stream's own)")
    w, h, ws, hs = pic.width, pic.height, pic.width_stride, pic.height_stride
    rgb = fmt not in F.YUV420SP_FORMATS
    if not (10 <= w <= 4096 and 6 <= h <= 4096) or (not rgb and (w % 2 or h % 2)):
        raise Fail(100000, f"the output picture is {w} x {h}: VDEC writes pictures from 10 x 6 "
                           "to 4096 x 4096, with even widths and heights in YUV420SP")
    if _a2(rt().profile):
        return _a2_strides(w, h, ws, hs, rgb)
    need_ws = max(F.align_up(w, 16), 32)
    if ws % 16 or ws < need_ws or (w < 16 and ws % 32) or ws > 16384:
        raise Fail(100000, f"the output width stride {ws} for width {w}: VDEC needs a "
                           f"multiple of 16 (32 for widths below 16), at least {need_ws}, at "
                           "most 16384")
    if hs % 2 or hs < h or hs > 16384 or hs < 6:
        raise Fail(100000, f"the output height stride {hs} for height {h}: VDEC needs an even "
                           "height stride of at least the height (6 to 16384)")
    return w, h, ws, hs


def _a2_strides(w: int, h: int, ws: int, hs: int, rgb: bool) -> tuple[int, int, int, int]:
    """Atlas A2's VDEC strides (the A2 columns of VDEC's restrictions): YUV420SP width
    stride at least the width, 10 to 24576, no alignment, height stride at least the height,
    6 to 24576; RGB888 / BGR888 width stride at least width x 3 (30 to 24576), height
    stride at least the height (6 to 16384). (uncertain: the RGB rule is the one CANN gives
    for A2 media V2.)"""
    lo_ws, hi_hs = (max(w * 3, 30), 16384) if rgb else (max(w, 10), 24576)
    if not lo_ws <= ws <= 24576:
        raise Fail(100000, f"the output width stride {ws} for width {w}: the Atlas A2 VDEC "
                           f"needs {lo_ws} to 24576")
    if not max(h, 6) <= hs <= hi_hs:
        raise Fail(100000, f"the output height stride {hs} for height {h}: the Atlas A2 VDEC "
                           f"needs {max(h, 6)} to {hi_hs}")
    return w, h, ws, hs


def _stream_geometry(w: int, h: int, fmt: int = F.PIXEL_FORMAT_YUV_SEMIPLANAR_420
                     ) -> tuple[int, int, int, int]:
    """The stream's own picture with VDEC's strides: on the 310 the width stride is the
    width rounded up to 16 (at least 32) and the height stride the height rounded up to 2;
    on Atlas A2 the strides are the picture's own (width x 3 for RGB)."""
    if fmt not in F.YUV420SP_FORMATS:
        return w, h, w * 3, h
    w2, h2 = F.align_up(w, 2), F.align_up(h, 2)
    if _a2(rt().profile):
        return w2, h2, w2, h2
    return w2, h2, max(F.align_up(w2, 16), 32), h2


@api("aclvdecSendFrame")
def vdec_send_frame(vdec_channel_desc, dvpp_stream_desc, dvpp_pic_desc, vdec_frame_config,
                    user_data):
    """Send one whole frame (or, with the stream description's eos 1, the end of the stream)
    to the channel's decoder; see the module docstring."""
    ch = _channel(vdec_channel_desc)
    sdesc = _get(dvpp_stream_desc, StreamDesc, "dvpp_stream_desc")
    if as_int(vdec_frame_config, "vdec_frame_config") != 0:
        _get(vdec_frame_config, VdecFrameConfig, "vdec_frame_config")
    r = rt()
    if r.current_context().device is not ch.device:
        raise Fail(100000, f"the channel is on device {ch.device.id}, but the current context "
                           f"is on device {r.current_context().device.id}")
    if sdesc.eos:
        r.spend(r.profile.api_ns)
        _end_of_stream(r, ch)
        return
    if sdesc.data == 0 or sdesc.size == 0:
        raise Fail(100000, "the stream description has no data (size 0 or a null address) "
                           "and eos 0: VDEC takes no empty frame (set eos 1 to end the stream)")
    pic = _get(dvpp_pic_desc, PicDesc, "dvpp_pic_desc")
    fmt = pic.format if "format" in pic.set_fields else ch.out_format
    _out_format(fmt, "the output picture's format")
    geometry = _geometry(pic, fmt)
    if geometry is not None:
        need = _size(fmt, geometry[2], geometry[3])
        if pic.size < need:
            raise Fail(100000, f"the output picture description says its buffer holds "
                               f"{pic.size} B, but a {geometry[0]} x {geometry[1]} picture "
                               f"with strides {geometry[2]} x {geometry[3]} needs {need} B")
    if pic.size <= 0:
        raise Fail(100000, "the output picture description has size 0: set the size of its "
                           "DVPP buffer (acl.media.dvpp_set_pic_desc_size)")
    out_region, out_off = _span(pic.data, pic.size, "the data of dvpp_pic_desc", dvpp=True)
    region, off = _span(sdesc.data, sdesc.size, "the data of dvpp_stream_desc", dvpp=False)
    if region.kind != "device" or region.device != ch.device.id:
        raise Fail(100000, f"the stream data 0x{sdesc.data:x} is not device memory of device "
                           f"{ch.device.id}: VDEC reads frames from acl.media.dvpp_malloc or "
                           "acl.rt.malloc memory (copy the frame there first)")
    # the frame goes to the decoder: the call returns once VDEC took its bytes
    box: list = [None]
    task = V.send_task(ch.dd, region, off, sdesc.size, ch.send_stream, box,
                       "vdec_send_frame")
    r.launch(r.profile.launch_ns)
    r.submit(task, ch.send_stream)
    r.wait_for(task)
    ch.pending.append(_Sent(sdesc.handle, pic, user_data, out_region, out_off))
    if box[0] is None:                     # the read failed (the task's fault says why)
        results = [V.FrameError((task.info or {}).get("fault", "the frame was not read"))]
    else:
        results = ch.decoder.feed(box[0])
    if ch.decoder.size[0]:
        ch.size = ch.decoder.size
    _deliver(r, ch, results)


def _deliver(r, ch: _Channel, results: list) -> None:
    """Pair the decoder's results with the oldest frames awaiting pictures, and submit the
    VdecDecode task that writes them and one callback for each."""
    outputs, sent = [], []
    for res in results:
        if not ch.pending:
            write_log(r, 2, "VDEC", f"channel {ch.id}: the decoder output a picture no frame "
                                    "was waiting for (more than one picture in a frame?); "
                                    "it is dropped")
            continue
        s = ch.pending.popleft()
        outputs.append(_output(s, res, ch))
        sent.append(s)
    w, h = ch.size
    task = V.decode_task(ch.dd, ch.report_stream, w * h, outputs, "vdec_send_frame",
                         log=lambda m: write_log(r, 3, "VDEC", f"channel {ch.id}: {m}"))
    r.launch(r.profile.launch_ns)
    r.submit(task, ch.report_stream)
    for s in sent:
        r.launch_callback(_callback_for(ch, s), None, C.ACL_CALLBACK_BLOCK, ch.report_stream)


def _output(s: _Sent, res, ch: _Channel) -> V.Output:
    pic = s.pic
    fmt = pic.format if "format" in pic.set_fields else ch.out_format
    if isinstance(res, V.FrameError):
        return V.Output(pic, res, fmt)
    geometry = None
    try:
        geometry = _geometry(pic, fmt)
    except Fail:
        pass
    w, h, ws, hs = geometry or _stream_geometry(res.width, res.height, fmt)
    need = _size(fmt, ws, hs)
    room = min(pic.size, s.region.size - s.offset)
    if room < need:
        return V.Output(pic, V.FrameError(
            f"the output buffer holds {room} B, but the {res.width} x {res.height} "
            f"picture in {FORMAT_NAMES[fmt]} with strides {ws} x {hs} needs {need} B: the "
            "picture is lost"), fmt)
    return V.Output(pic, res, fmt, w, h, ws, hs, s.region, s.offset, need)


def _size(fmt: int, ws: int, hs: int) -> int:
    """Bytes of a VDEC output picture: ws * hs * 3 / 2 for YUV420SP, ws * hs for RGB888."""
    return ws * hs * 3 // 2 if fmt in F.YUV420SP_FORMATS else ws * hs


def _callback_for(ch: _Channel, s: _Sent):
    fn = ch.callback

    def vdec_callback(_data=None):
        fn(s.stream_handle, s.pic.handle, s.user_data)

    for attr in ("__name__", "__qualname__", "__module__"):
        try:
            setattr(vdec_callback, attr, getattr(fn, attr))
        except (AttributeError, TypeError):
            pass
    return vdec_callback


def _end_of_stream(r, ch: _Channel) -> None:
    """The end of the stream: the decoder's last pictures, ERR_DECODE_NOPIC for the frames
    still without one, then wait until every callback ran."""
    results = ch.decoder.flush()
    missing = len(ch.pending) - len(results)
    results += [V.FrameError("no picture came out for this frame by the end of the stream",
                             ERR_DECODE_NOPIC)] * max(missing, 0)
    if results:
        _deliver(r, ch, results)
    for s in (ch.send_stream, ch.report_stream):
        if s.last is not None:
            r.wait_for(s.last)
