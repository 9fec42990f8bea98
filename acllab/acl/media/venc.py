"""``acl.media`` VENC: video encoding channels (aclvencChannelDesc, aclvencCreateChannel,
aclvencSendFrame), YUV420SP NV12 / NV21 pictures to an H.264 / H.265 annex-b stream.

The flow of Ascend's venc_image sample::

    tid, _ = acl.util.start_thread(poll, [...])   # loops on acl.rt.process_report(timeout)
    desc = acl.media.venc_create_channel_desc()
    acl.media.venc_set_channel_desc_thread_id(desc, tid)
    acl.media.venc_set_channel_desc_callback(desc, on_packet)   # (pic_desc, stream_desc, data)
    acl.media.venc_set_channel_desc_entype(desc, 0)              # H.265 main
    acl.media.venc_set_channel_desc_pic_format(desc, PIXEL_FORMAT_YUV_SEMIPLANAR_420)
    acl.media.venc_set_channel_desc_pic_width(desc, 128) / _pic_height(desc, 128)
    acl.media.venc_create_channel(desc)
    config = acl.media.venc_create_frame_config()                # eos 0, force_i_frame 0
    acl.media.venc_send_frame(desc, pic_desc, 0, config, None)   # per picture
    acl.media.venc_set_frame_config_eos(config, 1)
    acl.media.venc_send_frame(desc, 0, 0, config, None)          # the end of the stream

What acllab does (CANN 8.0.0 / 8.5.0 references: aclvencCreateChannel, aclvencSendFrame,
VENC "Functions and Restrictions"; the Atlas 300 DVPP guide's VENC function):

* VENC exists on the Atlas 200/300/500 inference products (the ascend310 profile); Atlas A2
  training products do not support aclvencCreateChannelDesc or aclvencCreateChannel, so on
  the ascend910b profile they fail with ACL_ERROR_FEATURE_UNSUPPORTED (200006).
* ``venc_create_channel`` makes the channel's two streams in the current context, as CANN
  does ("one for the encoding tasks, one for the callbacks"), the callback stream subscribed
  to the channel's thread, and VENC's output buffer (system-managed DVPP memory,
  ``venc_set_channel_desc_buf_size`` bytes, 8 MiB when unset; uncertain). Pictures: 128 x
  128 to 1920 x 1920, width and height even, NV12 or NV21; their buffers: DVPP memory of at
  least width stride (the width rounded up to 16) x height x 3 / 2 bytes. VENC takes no
  height stride ("the height stride does not need to be configured": CANN 6.0.1 and 8.0.0
  VENC "Restrictions on ... Buffers"): one set on the description is ignored, and the
  chroma rows follow the picture's height in luma rows (Ascend's C++ venc sample sets a
  1088-row stride for a 1080-row picture whose file holds 1080 rows).
* ``venc_send_frame`` puts a VencEncode task on the VENC engine (1080p at 30 fps, one unit):
  it reads the picture when it starts and encodes it with a real encoder (x264 / x265
  through PyAV: :class:`acllab.dvpp.video.Encoder`), writes the packet into the output
  buffer when it ends, and the channel's callback follows with the input picture
  description, an output stream description VENC made (data, size, format, timestamp: the
  picture's number, ret code 0; 1 when the packet did not fit the buffer) and the user
  data. VENC destroys the output description when the callback returns, and reuses its
  buffer for the next picture (the callbacks block their stream, so the next packet waits).
* A frame config with eos 1 ends the stream: the call returns once every picture sent has
  reached its callback (none for the eos frame), and the channel takes a new stream;
  ``venc_destroy_channel`` does the same first.

Differs from hardware: the encoder is x264 / x265 with a hardware-like configuration (no
B-frames, no look-ahead, a key frame every key_frame_interval pictures with the parameter
sets before it), so sizes and quality are theirs, not the card's; rc_mode is kept but the
rate control is the encoder's (max_bit_rate, when set, is its bit rate); the encoding
stream and the callback stream are one stream here (the second is made, and counts
against the device's streams, but holds no task).
"""

from __future__ import annotations

from ... import constants as C
from ...constants import ACL_MEM_MALLOC_HUGE_FIRST
from ...dvpp import formats as F
from ...dvpp import video as V
from ...dvpp.tasks import dvpp_device
from ...errors import Fail
from .._api import as_int, rt
from ..util import write_log
from ._checks import _span
from ._desc import FORMAT_NAMES, PicDesc, StreamDesc, _Desc, _destroy, _get, _new, api

__all__ = [
    "venc_create_channel_desc", "venc_destroy_channel_desc",
    "venc_set_channel_desc_thread_id", "venc_get_channel_desc_thread_id",
    "venc_set_channel_desc_callback", "venc_get_channel_desc_callback",
    "venc_set_channel_desc_entype", "venc_get_channel_desc_entype",
    "venc_set_channel_desc_pic_format", "venc_get_channel_desc_pic_format",
    "venc_set_channel_desc_pic_width", "venc_get_channel_desc_pic_width",
    "venc_set_channel_desc_pic_height", "venc_get_channel_desc_pic_height",
    "venc_set_channel_desc_key_frame_interval", "venc_get_channel_desc_key_frame_interval",
    "venc_set_channel_desc_buf_size", "venc_get_channel_desc_buf_size",
    "venc_set_channel_desc_rc_mode", "venc_get_channel_desc_rc_mode",
    "venc_set_channel_desc_src_rate", "venc_get_channel_desc_src_rate",
    "venc_set_channel_desc_max_bit_rate", "venc_get_channel_desc_max_bit_rate",
    "venc_create_frame_config", "venc_destroy_frame_config",
    "venc_set_frame_config_eos", "venc_get_frame_config_eos",
    "venc_set_frame_config_force_i_frame", "venc_get_frame_config_force_i_frame",
    "venc_create_channel", "venc_destroy_channel", "venc_send_frame",
]

#: VENC's output buffer when venc_set_channel_desc_buf_size was not called (uncertain)
DEFAULT_BUF_SIZE = 8 << 20
MIN_SIDE, MAX_SIDE = 128, 1920


def _check_supported() -> None:
    r = rt()
    if r.profile.venc_units <= 0:
        raise Fail(200006, f"the {r.profile.name} profile has no VENC: CANN does not support "
                           "aclvencCreateChannelDesc / aclvencCreateChannel on Atlas A2 "
                           "training products (use the ascend310 profile)")


class VencChannelDesc(_Desc):
    """aclvencChannelDesc: an encoding channel's settings, and the channel once created.

    Defaults: thread 0 (none), no callback, entype H265_MAIN_LEVEL (0), NV12, 0 x 0, key
    frame interval 16 (uncertain), output buffer 0 (8 MiB), rc mode 0, source rate 0,
    maximum bit rate 0 (the encoder's own).
    """

    kind = "VENC channel description"

    def __init__(self):
        super().__init__()
        self.thread_id = self.entype = self.pic_width = self.pic_height = 0
        self.buf_size = self.rc_mode = self.src_rate = self.max_bit_rate = 0
        self.key_frame_interval = 16
        self.pic_format = F.PIXEL_FORMAT_YUV_SEMIPLANAR_420
        self.callback = None
        self.channel: _Channel | None = None


class VencFrameConfig(_Desc):
    """aclvencFrameConfig: eos (0 or 1) and force_i_frame (0 or 1), both 0 at first."""

    kind = "VENC frame config"

    def __init__(self):
        super().__init__()
        self.eos = self.force_i_frame = 0


class _Channel:
    def __init__(self, desc, device, dd, send, report, encoder, region):
        self.desc, self.device, self.dd = desc, device, dd
        self.send_stream, self.report_stream = send, report
        self.encoder, self.region = encoder, region
        self.engine = dd.venc
        self.callback, self.entype = desc.callback, desc.entype
        self.width, self.height, self.format = desc.pic_width, desc.pic_height, desc.pic_format
        self.sent = 0


def _desc(handle) -> VencChannelDesc:
    return _get(handle, VencChannelDesc, "venc_channel_desc")


@api("aclvencCreateChannelDesc", bare=True, outs=(0,))
def venc_create_channel_desc():
    """A VENC channel description (0 on a profile without VENC)."""
    _check_supported()
    return _new(VencChannelDesc())


@api("aclvencDestroyChannelDesc")
def venc_destroy_channel_desc(venc_channel_desc):
    _destroy(venc_channel_desc, VencChannelDesc, "venc_channel_desc")


def _fixed(desc: VencChannelDesc) -> None:
    if desc.channel is not None:
        raise Fail(100000, f"venc_channel_desc 0x{desc.handle:x} already has a channel: its "
                           "settings are fixed until venc_destroy_channel")


def _setter(field: str, c_name: str, doc: str, check=None, bits: int = 32):
    def setter(venc_channel_desc, value):
        desc = _desc(venc_channel_desc)
        v = as_int(value, field)
        if not 0 <= v < 1 << bits:
            raise Fail(100000, f"{field} {v} does not fit its {bits}-bit unsigned field")
        if check is not None:
            check(v)
        _fixed(desc)
        setattr(desc, field, v)

    setter.__name__ = setter.__qualname__ = f"venc_set_channel_desc_{field}"
    setter.__doc__ = doc
    return api(c_name)(setter)


def _getter(field: str, c_name: str):
    def getter(venc_channel_desc):
        return getattr(_desc(venc_channel_desc), field)

    getter.__name__ = getter.__qualname__ = f"venc_get_channel_desc_{field}"
    getter.__doc__ = f"The channel description's {field.replace('_', ' ')} (0 for a bad handle)."
    return api(c_name, bare=True, outs=(0,), needs_init=False)(getter)


def _entype(v: int) -> None:
    if v not in V.STREAM_FORMATS:
        names = ", ".join(f"{n} ({k})" for k, n in V.STREAM_FORMATS.items())
        raise Fail(100000, f"entype {v} is not an acldvppStreamFormat: use {names}")


def _pic_format(v: int) -> None:
    if v in F.YUV420SP_FORMATS:
        return
    if v in FORMAT_NAMES and v != F.PIXEL_FORMAT_UNKNOWN:
        raise Fail(200006, f"pic_format is {FORMAT_NAMES[v]} ({v}): VENC encodes YUV420SP NV12 "
                           "(1) and NV21 (2)")
    raise Fail(100000, f"pic_format {v} is not an acldvppPixelFormat VENC reads: use 1 (NV12) "
                       "or 2 (NV21)")


def _rc_mode(v: int) -> None:
    if v > 2:
        raise Fail(100000, f"rc_mode {v}: 0 (default), 1 (VBR) or 2 (CBR)")


venc_set_channel_desc_thread_id = _setter(
    "thread_id", "aclvencSetChannelDescThreadId",
    "The thread whose acl.rt.process_report runs the channel's callbacks.", bits=64)
venc_set_channel_desc_entype = _setter(
    "entype", "aclvencSetChannelDescEnType",
    "The stream to make: 0 H.265 main, 1 H.264 baseline, 2 H.264 main, 3 H.264 high.", _entype)
venc_set_channel_desc_pic_format = _setter(
    "pic_format", "aclvencSetChannelDescPicFormat",
    "The pictures' format: NV12 (1) or NV21 (2); another picture format is 200006.",
    _pic_format)
venc_set_channel_desc_pic_width = _setter(
    "pic_width", "aclvencSetChannelDescPicWidth",
    "The pictures' width: even, 128 to 1920 (checked when the channel is created).")
venc_set_channel_desc_pic_height = _setter(
    "pic_height", "aclvencSetChannelDescPicHeight",
    "The pictures' height: even, 128 to 1920 (checked when the channel is created).")
venc_set_channel_desc_key_frame_interval = _setter(
    "key_frame_interval", "aclvencSetChannelDescKeyFrameInterval",
    "A key (I) frame every this many pictures.")
venc_set_channel_desc_buf_size = _setter(
    "buf_size", "aclvencSetChannelDescBufSize",
    "The size of VENC's output buffer (0: 8 MiB); a packet that does not fit is lost.")
venc_set_channel_desc_rc_mode = _setter(
    "rc_mode", "aclvencSetChannelDescRcMode",
    "The rate control mode: 0 default, 1 VBR, 2 CBR (kept; see the module docstring).",
    _rc_mode)
venc_set_channel_desc_src_rate = _setter(
    "src_rate", "aclvencSetChannelDescSrcRate", "The pictures' frame rate (fps).")
venc_set_channel_desc_max_bit_rate = _setter(
    "max_bit_rate", "aclvencSetChannelDescMaxBitRate",
    "The maximum bit rate in kbit/s (0: the encoder's own rate control).")

venc_get_channel_desc_thread_id = _getter("thread_id", "aclvencGetChannelDescThreadId")
venc_get_channel_desc_entype = _getter("entype", "aclvencGetChannelDescEnType")
venc_get_channel_desc_pic_format = _getter("pic_format", "aclvencGetChannelDescPicFormat")
venc_get_channel_desc_pic_width = _getter("pic_width", "aclvencGetChannelDescPicWidth")
venc_get_channel_desc_pic_height = _getter("pic_height", "aclvencGetChannelDescPicHeight")
venc_get_channel_desc_key_frame_interval = _getter("key_frame_interval",
                                                   "aclvencGetChannelDescKeyFrameInterval")
venc_get_channel_desc_buf_size = _getter("buf_size", "aclvencGetChannelDescBufSize")
venc_get_channel_desc_rc_mode = _getter("rc_mode", "aclvencGetChannelDescRcMode")
venc_get_channel_desc_src_rate = _getter("src_rate", "aclvencGetChannelDescSrcRate")
venc_get_channel_desc_max_bit_rate = _getter("max_bit_rate", "aclvencGetChannelDescMaxBitRate")


@api("aclvencSetChannelDescCallback")
def venc_set_channel_desc_callback(venc_channel_desc, callback):
    """The function each encoded picture reaches: ``callback(pic_desc, stream_desc,
    user_data)``."""
    desc = _desc(venc_channel_desc)
    if not callable(callback):
        raise TypeError(f"callback must be callable, not {type(callback).__name__}")
    _fixed(desc)
    desc.callback = callback


@api("aclvencGetChannelDescCallback", bare=True, outs=(None,), needs_init=False)
def venc_get_channel_desc_callback(venc_channel_desc):
    return _desc(venc_channel_desc).callback


# -- frame configs ---------------------------------------------------------------------------

@api("aclvencCreateFrameConfig", bare=True, outs=(0,))
def venc_create_frame_config():
    """A frame configuration: eos 0, force_i_frame 0."""
    return _new(VencFrameConfig())


@api("aclvencDestroyFrameConfig")
def venc_destroy_frame_config(venc_frame_config):
    _destroy(venc_frame_config, VencFrameConfig, "venc_frame_config")


def _config(handle) -> VencFrameConfig:
    return _get(handle, VencFrameConfig, "venc_frame_config")


def _flag(field: str, c_name: str):
    def setter(venc_frame_config, value):
        cfg = _config(venc_frame_config)
        v = as_int(value, field)
        if v not in (0, 1):
            raise Fail(100000, f"{field} is 0 or 1, not {v}")
        setattr(cfg, field, v)

    def getter(venc_frame_config):
        return getattr(_config(venc_frame_config), field)

    setter.__name__ = setter.__qualname__ = f"venc_set_frame_config_{field}"
    getter.__name__ = getter.__qualname__ = f"venc_get_frame_config_{field}"
    setter.__doc__ = f"Set the frame config's {field.replace('_', ' ')} (0 or 1)."
    getter.__doc__ = f"The frame config's {field.replace('_', ' ')} (0 for a bad handle)."
    return (api("aclvencSetFrameConfig" + c_name)(setter),
            api("aclvencGetFrameConfig" + c_name, bare=True, outs=(0,),
                needs_init=False)(getter))


venc_set_frame_config_eos, venc_get_frame_config_eos = _flag("eos", "Eos")
venc_set_frame_config_force_i_frame, venc_get_frame_config_force_i_frame = _flag(
    "force_i_frame", "ForceIFrame")


# -- channels ----------------------------------------------------------------------------------

@api("aclvencCreateChannel")
def venc_create_channel(venc_channel_desc):
    """Create the encoding channel on the current device (see the module docstring)."""
    _check_supported()
    desc = _desc(venc_channel_desc)
    if desc.channel is not None:
        raise Fail(100000, f"venc_channel_desc 0x{desc.handle:x} already has a channel")
    if desc.callback is None:
        raise Fail(100000, "the channel has no callback: call "
                           "acl.media.venc_set_channel_desc_callback first")
    if desc.thread_id == 0:
        raise Fail(100000, "the channel has no callback thread: call "
                           "acl.media.venc_set_channel_desc_thread_id first")
    w, h = desc.pic_width, desc.pic_height
    if not (MIN_SIDE <= w <= MAX_SIDE and MIN_SIDE <= h <= MAX_SIDE) or w % 2 or h % 2:
        raise Fail(100000, f"the pictures are {w} x {h}: VENC encodes even widths and heights "
                           f"from {MIN_SIDE} x {MIN_SIDE} to {MAX_SIDE} x {MAX_SIDE} (set them "
                           "with venc_set_channel_desc_pic_width / _pic_height)")
    r = rt()
    ctx = r.current_context()
    dev = ctx.device
    dd = dvpp_device(r, dev)
    V.load_av()                       # without PyAV: 200006 before anything is made
    made: list = []
    try:
        size = desc.buf_size or DEFAULT_BUF_SIZE
        region, cost, _hit = dev.heap.malloc(size, ACL_MEM_MALLOC_HUGE_FIRST)
        region.label = "dvpp"
        made.append(region)
        r.spend(cost + r.profile.api_ns)
        send = r.create_stream(ctx)
        made.append(send)
        report = r.create_stream(ctx)
        made.append(report)
        send.role = "VENC send"
        report.role = "VENC callbacks"
        # subscribed first (the report thread is polling already), then the encoder opens
        r.subscribe(report, desc.thread_id)
        encoder = V.Encoder(desc.entype, w, h, desc.key_frame_interval, desc.max_bit_rate,
                            desc.src_rate)
    except BaseException:
        for thing in reversed(made):
            if thing is made[0]:
                dev.heap.free(thing)
            else:
                r.destroy_stream(thing)
        raise
    desc.channel = _Channel(desc, dev, dd, send, report, encoder, region)


@api("aclvencDestroyChannel")
def venc_destroy_channel(venc_channel_desc):
    """End the stream (every picture sent reaches its callback), then destroy the channel,
    its streams and its output buffer."""
    desc = _desc(venc_channel_desc)
    ch = desc.channel
    if ch is None:
        raise Fail(100000, f"venc_channel_desc 0x{desc.handle:x} has no channel to destroy")
    r = rt()
    r.spend(r.profile.api_ns)
    try:
        _end_of_stream(r, ch)
    finally:
        desc.channel = None
        for s in (ch.send_stream, ch.report_stream):
            r.destroy_stream(s)
        ch.device.heap.free(ch.region)


def _end_of_stream(r, ch: _Channel) -> None:
    """Wait until every picture sent was encoded and its callback ran, then start a fresh
    encoder (no B-frames and no look-ahead: nothing was left inside the old one)."""
    if ch.report_stream.last is not None:
        r.wait_for(ch.report_stream.last)
    ch.encoder.flush()
    ch.encoder = V.Encoder(ch.entype, ch.width, ch.height, ch.desc.key_frame_interval,
                           ch.desc.max_bit_rate, ch.desc.src_rate)


@api("aclvencSendFrame")
def venc_send_frame(venc_channel_desc, dvpp_pic_desc, reserve, venc_frame_config, user_data):
    """Send one picture to the channel's encoder (or, with the frame config's eos 1, end the
    stream); see the module docstring."""
    desc = _desc(venc_channel_desc)
    ch = desc.channel
    if ch is None:
        raise Fail(100000, f"venc_channel_desc 0x{desc.handle:x} has no channel: call "
                           "acl.media.venc_create_channel first")
    as_int(reserve, "reserve")
    cfg = _config(venc_frame_config) if as_int(venc_frame_config, "venc_frame_config") \
        else None
    r = rt()
    if r.current_context().device is not ch.device:
        raise Fail(100000, f"the channel is on device {ch.device.id}, but the current context "
                           f"is on device {r.current_context().device.id}")
    if cfg is not None and cfg.eos:
        r.spend(r.profile.api_ns)
        _end_of_stream(r, ch)
        return
    pic = _get(dvpp_pic_desc, PicDesc, "dvpp_pic_desc")
    w, h = ch.width, ch.height
    ws = pic.width_stride if "width_stride" in pic.set_fields else F.align_up(w, 16)
    hs = h               # VENC takes no height stride: the chroma rows follow the h luma rows
    if ws < F.align_up(w, 16) or ws % 16:
        raise Fail(100000, f"the picture's width stride {ws} for a {w} x {h} picture: VENC "
                           f"needs a multiple of 16 of at least {F.align_up(w, 16)}")
    need = ws * hs * 3 // 2
    if pic.size < need:
        raise Fail(100000, f"the picture description says its buffer holds {pic.size} B, but "
                           f"a {w} x {h} picture with width stride {ws} needs {need} B "
                           f"({ws} x {h} x 3 / 2)")
    region, off = _span(pic.data, need, "the data of dvpp_pic_desc", dvpp=True)
    out = StreamDesc()
    _new(out)
    out.format, out.timestamp = ch.entype, ch.sent
    ch.sent += 1

    def done(nbytes: int, error: str | None) -> None:
        out.data, out.size, out.ret_code = ch.region.start, nbytes, 1 if error else 0
        if error:
            write_log(r, 3, "VENC", error)

    task = V.encode_task(ch.dd, ch.report_stream, ch.encoder,
                         (region, off, ch.format, ws, hs), (ch.region, 0, ch.region.size),
                         bool(cfg is not None and cfg.force_i_frame), "venc_send_frame", done)
    r.launch(r.profile.launch_ns)
    r.submit(task, ch.report_stream)
    fn = ch.callback

    def venc_callback(_data=None):
        try:
            fn(pic.handle, out.handle, user_data)
        finally:
            if out.alive:                    # VENC's own description: gone after the call
                out.alive = False
                r.drop_handle(out.handle, out.kind)

    for attr in ("__name__", "__qualname__", "__module__"):
        try:
            setattr(venc_callback, attr, getattr(fn, attr))
        except (AttributeError, TypeError):
            pass
    r.launch_callback(venc_callback, None, C.ACL_CALLBACK_BLOCK, ch.report_stream)
