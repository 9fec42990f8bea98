"""Video decoding for VDEC: H.264 / H.265 annex-b frames to YUV420 planes, with PyAV.

A real decoder is the point (no fake frames): :class:`Decoder` feeds each frame's bytes to
PyAV's (FFmpeg's) ``h264`` or ``hevc`` decoder and hands back the pictures it outputs, in
display order, as the planes :mod:`acllab.dvpp.layouts` writes (Y, and Cb Cr pairs at 4:2:0).
PyAV is imported only here, and only when a channel is created, so that the runtime core
still imports with numpy alone; without it the call fails with an ACL code and a message
that says to install it (``pip install av``, in acllab's ``lab`` and ``test`` extras).

Stream formats (acldvppStreamFormat, acl/ops/acl_dvpp.h): H265_MAIN_LEVEL 0,
H264_BASELINE_LEVEL 1, H264_MAIN_LEVEL 2, H264_HIGH_LEVEL 3. VDEC decodes H.264 BP/MP/HP
level 5.1 and H.265 8/10-bit level 5.1 YUV420 annex-b raw streams, one whole frame a call,
128 x 128 to 4096 x 4096 (CANN 8.0.0 and 8.5.0 pyACL docs, VDEC "Functions and
Restrictions"); the output is 8-bit, so a 10-bit H.265 picture is rounded to 8 bits.

Differs from hardware: the decoder is FFmpeg's, not Huawei's VFMW, so the pixels are
FFmpeg's (both are conformant decoders of the same standards: a conformant stream decodes to
the same pictures); a damaged stream may be concealed differently.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from ..engine import Task
from ..errors import Fail
from .layouts import LAYOUTS, convert
from .tasks import _fault, _mem, dvpp_ns

__all__ = ["H265_MAIN_LEVEL", "H264_BASELINE_LEVEL", "H264_MAIN_LEVEL", "H264_HIGH_LEVEL",
           "STREAM_FORMATS", "Picture", "FrameError", "Decoder", "load_av", "pyav_compat",
           "Output", "send_task", "decode_task", "Encoder", "encode_task"]

H265_MAIN_LEVEL = 0
H264_BASELINE_LEVEL = 1
H264_MAIN_LEVEL = 2
H264_HIGH_LEVEL = 3
STREAM_FORMATS = {H265_MAIN_LEVEL: "H265_MAIN_LEVEL", H264_BASELINE_LEVEL: "H264_BASELINE_LEVEL",
                  H264_MAIN_LEVEL: "H264_MAIN_LEVEL", H264_HIGH_LEVEL: "H264_HIGH_LEVEL"}

# the smallest and largest stream VDEC decodes (CANN 8.0.0 / 8.5.0, VDEC resolution limits)
MIN_SIDE, MAX_SIDE = 128, 4096


def load_av():
    """The ``av`` module (PyAV), or Fail(200006) saying how to install it."""
    try:
        import av
    except ImportError:
        raise Fail(200006, "acllab's VDEC and VENC decode and encode with PyAV, which is not "
                           "installed: pip install av (or install acllab with its lab or "
                           "test extra)") from None
    pyav_compat(av)
    return av


def pyav_compat(av) -> bool:
    """Give PyAV's buffers (packets, planes) back ``to_bytes()``, as ``bytes(buffer)``.

    Programs written for PyAV 11 and older call ``packet.to_bytes()``: AclLite's
    ``VideoCapture`` (Ascend/samples, python/common/acllite/videocapture.py,
    ``_prepare_frame_data``) does for every frame it sends to VDEC. PyAV 12 and later have
    no such method (their buffers give their bytes with ``bytes(packet)``; checked in the
    12.3.0 and 18.1.0 wheels), and the registries hold no PyAV older than 12 for Python
    3.11 and later, so such a program would stop at its first frame. acllab adds the method
    back, with the same meaning, to the extension type that defines the buffer protocol
    (``av.buffer.Buffer``, base of ``av.Packet`` and of the planes) when it is missing. The
    type is immutable from Python, so the method goes into its dictionary directly and
    CPython's method cache is told (``PyType_Modified``). Returns whether the buffers have
    ``to_bytes`` now (False where that cannot be done: another Python implementation).
    """
    buffer = getattr(getattr(av, "buffer", None), "Buffer", None)
    if buffer is None:
        return False
    if hasattr(buffer, "to_bytes"):
        return True
    try:
        import ctypes
        import gc

        def to_bytes(self) -> bytes:
            """The buffer's bytes (PyAV <= 11's method; ``bytes(self)`` since PyAV 12)."""
            return bytes(self)

        namespace = gc.get_referents(buffer.__dict__)[0]
        if not isinstance(namespace, dict):
            return False
        namespace["to_bytes"] = to_bytes
        ctypes.pythonapi.PyType_Modified(ctypes.py_object(buffer))
    except (AttributeError, IndexError, OSError, TypeError):
        return False
    return hasattr(buffer, "to_bytes")


@dataclass
class Picture:
    """One decoded picture: Y (h, w) and chroma (h/2, w/2, 2) in Cb, Cr order, uint8."""

    y: np.ndarray
    chroma: np.ndarray
    width: int
    height: int


@dataclass
class FrameError:
    """A frame the decoder rejected: its picture is lost (ret code ``code``)."""

    message: str
    code: int = 1


def _planes(frame) -> Picture:
    """A PyAV VideoFrame as 8-bit 4:2:0 planes (10-bit and other formats via swscale)."""
    if frame.format.name != "yuv420p":
        frame = frame.reformat(format="yuv420p")
    w, h = frame.width, frame.height

    def plane(i: int, pw: int, ph: int) -> np.ndarray:
        p = frame.planes[i]
        rows = np.frombuffer(p, np.uint8).reshape(-1, p.line_size)
        return rows[:ph, :pw]

    cw, ch = (w + 1) // 2, (h + 1) // 2
    y = np.array(plane(0, w, h))
    c = np.stack([plane(1, cw, ch), plane(2, cw, ch)], axis=-1)
    return Picture(y, np.ascontiguousarray(c), w, h)


class Decoder:
    """One channel's decoder: H.264 (entype 1 to 3) or H.265 (entype 0).

    ``feed(data)`` decodes one frame's bytes and returns what came out of the decoder: the
    pictures it output (display order: with B-frames a picture comes out only after later
    frames were fed) and, for a frame it rejected, a :class:`FrameError`. ``flush()`` (the
    end of the stream) returns the pictures still inside and starts a fresh decoder, so the
    channel can take a new stream. Single-threaded, so the output does not depend on the
    machine.
    """

    def __init__(self, entype: int):
        self.entype = entype
        self.codec = "hevc" if entype == H265_MAIN_LEVEL else "h264"
        self._av = load_av()
        self._ctx = None
        self._open()

    def _open(self) -> None:
        ctx = self._av.CodecContext.create(self.codec, "r")
        ctx.thread_count = 1
        self._ctx = ctx

    @property
    def size(self) -> tuple[int, int]:
        """(width, height) of the stream as far as the decoder has read it (0 before)."""
        return self._ctx.width, self._ctx.height

    def _out(self, frames, out: list) -> None:
        for f in frames:
            if not (MIN_SIDE <= f.width <= MAX_SIDE and MIN_SIDE <= f.height <= MAX_SIDE):
                out.append(FrameError(f"the stream is {f.width} x {f.height}; VDEC decodes "
                                      f"{MIN_SIDE} x {MIN_SIDE} to {MAX_SIDE} x {MAX_SIDE}"))
                continue
            out.append(_planes(f))

    def feed(self, data: bytes) -> list:
        out: list = []
        try:
            self._out(self._ctx.decode(self._av.Packet(data)), out)
        except self._av.error.FFmpegError as exc:
            out.append(FrameError(f"the {self.codec.upper()} decoder rejected the frame "
                                  f"({type(exc).__name__}: {exc.strerror or exc})"))
        return out

    def flush(self) -> list:
        out: list = []
        try:
            self._out(self._ctx.decode(None), out)
        except self._av.error.FFmpegError as exc:
            out.append(FrameError(f"the {self.codec.upper()} decoder failed at the end of the "
                                  f"stream ({type(exc).__name__}: {exc.strerror or exc})"))
        self._open()
        return out


# -- VDEC's tasks: data effect and timing together (acllab.dvpp.tasks has the others) ------

def send_task(dd, region, off: int, n: int, stream, box: list, api: str):
    """The VdecSendFrame task: VDEC takes the frame's ``n`` bytes (into ``box[0]``) when it
    starts, on the channel's send stream, and the call waits for it (see
    :func:`acllab.acl.media.vdec.vdec_send_frame`), so the input buffer is free again when
    the call returns. It takes ``dvpp_task_ns`` and no engine (the copy into the decoder's
    stream buffer; uncertain)."""
    dev = dd.device
    addr = region.start + off

    def on_start(task) -> None:
        try:
            box[0] = region.read_bytes(off, n)
        except Fail as exc:
            _fault(task, exc.message)

    return Task("VdecSendFrame", "dvpp", duration_ns=dev.profile.dvpp_task_ns, stream=stream,
                device=dev.id, nbytes=n, reads=((addr, n),), on_start=on_start,
                info={"engine": "VDEC", "src": addr, "mem": (_mem(region, addr, n, "r"),)},
                api=api)


@dataclass
class Output:
    """Where one decoder result goes: a picture description's buffer and geometry."""

    pic: object                 # the PicDesc (acl.media) that receives it
    result: object              # a Picture or a FrameError
    fmt: int = 1
    width: int = 0
    height: int = 0
    width_stride: int = 0
    height_stride: int = 0
    region: object = None       # the DVPP buffer and the offset of the picture in it
    offset: int = 0
    nbytes: int = 0


def decode_task(dd, stream, pixels: int, outputs: list[Output], api: str, log=None):
    """A VdecDecode task on the VDEC engine: ``dvpp_task_ns + pixels / vdec_pixels_per_s``
    (the frame's own pixels, one unit); when it ends it writes each of ``outputs`` (the
    pictures the decoder gave for this frame) into its picture description's DVPP buffer and
    fills the description in: width, height, strides and format of the picture it holds;
    a FrameError's code goes into the ret code (a decoded picture leaves it as it was).
    ``log(message)`` reports a lost frame."""
    dev = dd.device

    def on_end(task) -> None:
        for out in outputs:
            pic, res = out.pic, out.result
            if isinstance(res, FrameError):
                pic.ret_code = res.code
                if log is not None:
                    log(res.message)
                continue
            if out.region is None or out.region.dangling:
                continue
            lay = LAYOUTS[out.fmt]
            y, c = res.y, res.chroma
            w2, h2 = lay.covered(res.width, res.height)
            if (w2, h2) != y.shape[::-1]:          # an odd side: repeat the last column / row
                y = np.pad(y, ((0, h2 - y.shape[0]), (0, w2 - y.shape[1])), mode="edge")
            if (out.width, out.height) != (w2, h2) or lay.sub != (2, 2):
                # VDEC's own VPC resizes, and converts to RGB (chroma at full resolution)
                y, c = convert(y, c, (2, 2), (0, w2 - 1, 0, h2 - 1), lay, out.height,
                               out.width)
            buf = out.region.read(out.offset, out.nbytes)
            lay.write(buf, out.width_stride, out.height_stride, y, c)
            out.region.write(out.offset, buf)
            pic.width, pic.height = out.width, out.height
            pic.width_stride, pic.height_stride = out.width_stride, out.height_stride
            pic.format = out.fmt             # the ret code stays as it was (CANN: see
            # acllab.acl.media.picture.dvpp_set_pic_desc_ret_code)

    written = [o for o in outputs if o.region is not None]
    mem = tuple(_mem(o.region, o.region.start + o.offset, o.nbytes, "w") for o in written)
    return Task("VdecDecode", "dvpp", resource=dd.vdec,
                duration_ns=dvpp_ns(dev.profile, "vdec", pixels), stream=stream,
                device=dev.id, nbytes=sum(o.nbytes for o in written),
                writes=tuple((o.region.start + o.offset, o.nbytes) for o in written),
                on_end=on_end,
                info={"engine": "VDEC", "pictures": sum(isinstance(o.result, Picture)
                                                        for o in outputs),
                      "lost": sum(isinstance(o.result, FrameError) for o in outputs),
                      "mem": mem},
                api=api)


# -- VENC ------------------------------------------------------------------------------------

#: VENC's H.264 profiles by stream format (acldvppStreamFormat); 0 is H.265 main
_X264_PROFILES = {H264_BASELINE_LEVEL: "baseline", H264_MAIN_LEVEL: "main",
                  H264_HIGH_LEVEL: "high"}


class Encoder:
    """One channel's encoder: NV12 / NV21 pictures to an H.264 (libx264, the entype's profile)
    or H.265 main (libx265) annex-b stream, one packet a picture.

    Configured as a hardware encoder of a camera pipeline works: no B-frames and no
    look-ahead (each picture comes out as one access unit at once), parameter sets in the
    stream before each key frame, a key frame every ``key_frame_interval`` pictures (and when
    a picture is forced to be one), a bit rate of ``max_bit_rate`` kbit/s when given, and one
    thread, so that the same pictures always give the same bytes.

    Differs from hardware: the bitstream is x264's / x265's, not the card's encoder's (both
    are standard streams any decoder reads; their sizes and quality differ).
    """

    def __init__(self, entype: int, width: int, height: int, key_frame_interval: int = 16,
                 max_bit_rate: int = 0, src_rate: int = 0):
        av = load_av()
        self._av = av
        codec = "libx265" if entype == H265_MAIN_LEVEL else "libx264"
        ctx = av.CodecContext.create(codec, "w")
        ctx.width, ctx.height, ctx.pix_fmt = width, height, "yuv420p"
        ctx.time_base = Fraction(1, src_rate or 30)
        if max_bit_rate:
            ctx.bit_rate = max_bit_rate * 1000
        gop = max(key_frame_interval, 1)
        ctx.thread_count = 1
        if codec == "libx264":
            ctx.options = {"profile": _X264_PROFILES[entype], "tune": "zerolatency",
                           "x264-params": f"keyint={gop}:min-keyint={gop}:scenecut=0:"
                                          "sliced-threads=0:threads=1"}
        else:
            ctx.options = {"x265-params": f"bframes=0:rc-lookahead=0:frame-threads=1:"
                                          f"pools=none:keyint={gop}:min-keyint={gop}:"
                                          f"scenecut=0:repeat-headers=1:log-level=none"}
        self._ctx = ctx
        self.width, self.height = width, height
        self._pts = 0

    def encode(self, y: np.ndarray, chroma: np.ndarray, force_key: bool = False) -> list[bytes]:
        """The packets for one picture (planes as layouts reads them: Y, Cb Cr pairs)."""
        av = self._av
        frame = av.VideoFrame(self.width, self.height, "yuv420p")
        for plane, arr in zip(frame.planes, (y, chroma[:, :, 0], chroma[:, :, 1]), strict=True):
            rows = np.zeros((plane.buffer_size // plane.line_size, plane.line_size), np.uint8)
            rows[:arr.shape[0], :arr.shape[1]] = arr
            plane.update(rows.tobytes())
        frame.pts = self._pts
        self._pts += 1
        if force_key:
            frame.pict_type = av.video.frame.PictureType.I
        return [bytes(p) for p in self._ctx.encode(frame)]

    def flush(self) -> list[bytes]:
        return [bytes(p) for p in self._ctx.encode(None)]


def encode_task(dd, stream, encoder: Encoder, inp: tuple, out: tuple, force_key: bool,
                api: str, done=None):
    """A VencEncode task on the VENC engine, ``dvpp_task_ns + w * h / venc_pixels_per_s``:
    it reads the picture when it starts (``inp`` = (region, offset, fmt, width stride,
    height stride)), encodes it, and when it ends writes the packet into the channel's output
    buffer (``out`` = (region, offset, capacity)) and calls ``done(nbytes, error)``."""
    region, off, fmt, ws, hs = inp
    oregion, ooff, capacity = out
    dev = dd.device
    w, h = encoder.width, encoder.height
    lay = LAYOUTS[fmt]
    n_in = lay.size(ws, hs)
    box: list = [None]

    def on_start(task) -> None:
        try:
            buf = region.read(off, n_in)
        except Fail as exc:
            _fault(task, exc.message)
            return
        y, c = lay.read(buf, w, h, ws, hs)
        box[0] = b"".join(encoder.encode(np.ascontiguousarray(y), np.ascontiguousarray(c),
                                         force_key))
        task.info["encoded_bytes"] = len(box[0])

    def on_end(task) -> None:
        data, box[0] = box[0], None
        if data is None:
            if done is not None:
                done(0, "VENC could not read the picture")
            return
        if len(data) > capacity:
            if done is not None:
                done(0, f"the encoded frame needs {len(data)} B but the channel's output "
                        f"buffer holds {capacity} B (venc_set_channel_desc_buf_size)")
            return
        if not oregion.dangling:
            oregion.write(ooff, np.frombuffer(data, np.uint8))
        if done is not None:
            done(len(data), None)

    iaddr, oaddr = region.start + off, oregion.start + ooff
    return Task("VencEncode", "dvpp", resource=dd.venc,
                duration_ns=dvpp_ns(dev.profile, "venc", w * h), stream=stream, device=dev.id,
                nbytes=n_in, reads=((iaddr, n_in),), writes=((oaddr, capacity),),
                on_start=on_start, on_end=on_end,
                info={"engine": "VENC", "width": w, "height": h, "src": iaddr, "dst": oaddr,
                      "mem": (_mem(region, iaddr, n_in, "r"),
                              _mem(oregion, oaddr, capacity, "w"))},
                api=api)
