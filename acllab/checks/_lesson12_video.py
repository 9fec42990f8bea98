"""Lesson 12's video exercise (registered by :mod:`acllab.checks.lesson12`).

``12.vdec_clip``: ``decode_clip(acl, frames, entype, width, height, outputs) -> None``
    ``frames`` are the access units of an H.264 or H.265 annex-b clip (bytes each, in
    decode order; the clip has B-frames, so pictures come out of the decoder late),
    ``entype`` its acldvppStreamFormat (0 H.265 main, 2 H.264 main, 3 H.264 high); ``outputs``
    as many DVPP buffers as frames, each sized for one YUV420SP NV12 picture of ``width`` x
    ``height`` with VDEC's strides (the width rounded up to 16, the height to 2). Decode the
    clip on VDEC so that ``outputs[i]`` holds the clip's i-th picture (display order), and
    return once every picture is in place, having released everything the function made (the
    channel and its description, stream and picture descriptions, DVPP buffers, the callback
    thread). The caller has called ``acl.init()`` and ``acl.rt.set_device(0)``; it frees
    ``outputs`` itself.

Each case's clip is made by the check (libx264 / libx265 through PyAV) from the seed. A
picture is right when its bytes equal the decode of that clip (every byte of the NV12 picture
within its strides). The work is verified, not assumed: every output's bytes must have been
written by a VdecDecode task of the card's VDEC (a :class:`~._common.Provenance` records what
each task wrote), and each frame must have been sent to VDEC once.

Items: ``runs``, ``pictures``, ``on VDEC``, ``frames sent`` and ``again`` (a second clip of
the same size into the same outputs, in the same runtime) are results; ``sanitizer`` and
``resources`` (nothing left behind; no channel, no callback thread still running) are process
items.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np

from .. import acl
from ..acl import util as _util
from ..dvpp import formats as F
from ..dvpp import video as V
from ..dvpp.tasks import dvpp_device
from . import PROCESS, Case, Item, call_learner, exercise, isolated, ran_item
from ._common import (
    Provenance,
    again_outcome,
    device_bytes,
    hazards,
    new_case,
    resources_item,
    sanitizer_item,
    teardown,
)

__all__ = ["grade_vdec_clip", "make_clip", "vdec_strides"]

# (codec, entype, width, height, frames) per seed; B-frames in every clip
_CASES = (("libx264", V.H264_MAIN_LEVEL, 160, 128, 5),
          ("libx265", V.H265_MAIN_LEVEL, 176, 144, 6),
          ("libx264", V.H264_HIGH_LEVEL, 200, 132, 7))


def vdec_strides(width: int, height: int) -> tuple[int, int]:
    """VDEC's output strides: the width rounded up to 16 (at least 32), the height to 2."""
    return max(32, F.align_up(width, 16)), F.align_up(height, 2)


def make_clip(seed: int, codec: str, width: int, height: int, n: int) -> list[bytes]:
    """An annex-b clip of ``n`` moving pictures with B-frames: one access unit a frame."""
    av = V.load_av()
    rng = np.random.default_rng([12, 2, seed])
    ctx = av.CodecContext.create(codec, "w")
    ctx.width, ctx.height, ctx.pix_fmt = width, height, "yuv420p"
    ctx.time_base = Fraction(1, 25)
    ctx.thread_count = 1
    ctx.options = ({"bframes": "2", "crf": "26", "threads": "1"} if codec == "libx264" else
                   {"x265-params": "bframes=2:log-level=none:pools=none:frame-threads=1"})
    yy, xx = np.mgrid[0:height, 0:width]
    dx, dy = (int(v) for v in rng.integers(1, 6, 2))
    packets = []
    for i in range(n):
        frame = av.VideoFrame(width, height, "yuv420p")
        y = ((xx * 2 + yy + i * 9 * dx) % 256).astype(np.uint8)
        u = np.full((height // 2, width // 2), 90 + 10 * i * dy % 120, np.uint8)
        v = ((np.mgrid[0:height // 2, 0:width // 2][1] + i * 5) % 256).astype(np.uint8)
        for plane, arr in zip(frame.planes, (y, u, v), strict=True):
            rows = np.zeros((plane.buffer_size // plane.line_size, plane.line_size), np.uint8)
            rows[:arr.shape[0], :arr.shape[1]] = arr
            plane.update(rows.tobytes())
        frame.pts = i
        packets += [bytes(p) for p in ctx.encode(frame)]
    return packets + [bytes(p) for p in ctx.encode(None)]


def _reference(frames: list[bytes], entype: int, width: int, height: int) -> list[bytes]:
    """The NV12 pictures of the clip, each laid out with VDEC's strides."""
    dec = V.Decoder(entype)
    pictures = [p for f in frames for p in dec.feed(f)] + dec.flush()
    ws, hs = vdec_strides(width, height)
    out = []
    for pic in pictures:
        buf = np.zeros(ws * hs * 3 // 2, np.uint8)
        rows = buf[:ws * hs].reshape(hs, ws)
        rows[:height, :width] = pic.y
        rows2 = buf[ws * hs:].reshape(hs // 2, ws)
        rows2[:height // 2, :width] = pic.chroma.reshape(height // 2, width)
        out.append(buf.tobytes())
    return out


def _case(seed: int):
    if seed < len(_CASES):
        return _CASES[seed]
    rng = np.random.default_rng([12, 3, seed])
    codec, entype = (("libx264", V.H264_MAIN_LEVEL), ("libx265", V.H265_MAIN_LEVEL))[
        int(rng.integers(2))]
    return codec, entype, int(rng.choice([128, 144, 160, 192])), \
        int(rng.choice([128, 132, 144])), int(rng.integers(4, 8))


@exercise("12.vdec_clip", "vdec_clip: decode a video clip on VDEC", "decode_clip",
          limit_s=30.0)
def grade_vdec_clip(fn, seed: int) -> Case:
    """One case: a 4- to 7-frame H.264 or H.265 clip with B-frames."""
    codec, entype, width, height, n = _case(seed)
    frames = make_clip(seed, codec, width, height, n)
    want = _reference(frames, entype, width, height)
    ws, hs = vdec_strides(width, height)
    size = ws * hs * 3 // 2
    label = f"a {len(frames)}-frame {width} x {height} {codec[3:].upper()} clip"
    with isolated() as runtime:
        prov = Provenance(runtime)
        acl.init()
        acl.rt.set_device(0)
        outputs = [acl.media.dvpp_malloc(size)[0] for _ in frames]
        threads_before = set(_util._THREADS)
        call = call_learner(fn, acl, [bytes(f) for f in frames], entype, width, height,
                            list(outputs))
        case = new_case(label, call, runtime)
        if case.not_done:
            return case
        dd = dvpp_device(runtime, runtime.devices[0])
        got = [device_bytes(runtime, ptr, size) for ptr in outputs]
        sends = [t for t in runtime.engine.tasks[call.first_task:] if t.name == "VdecSendFrame"]
        pictures = _pictures_item(got, want, width, height)
        again = None
        if call.error is None and pictures.passed:
            again = _again(runtime, fn, seed, codec, entype, width, height, n, outputs, size)
        channels = len(dd.vdec_channels)
        threads = [t for t in set(_util._THREADS) - threads_before
                   if _util._THREADS[t].is_alive()]
        findings = hazards(runtime)
        failed = teardown([(f"output {i} (the caller's DVPP buffer) was freed",
                            (acl.media.dvpp_free, p)) for i, p in enumerate(outputs)],
                          reset_failed="acl.rt.reset_device(0) failed: the device was reset "
                                       "already",
                          finalize_failed="acl.finalize() failed: pyACL was finalised already")
        case.items.append(ran_item(call, "decode_clip"))
        if call.error is not None:
            return case
        case.items.append(pictures)
        case.items.append(_vdec_item(prov, outputs, got, size, call.end_ns))
        case.items.append(_sends_item(sends, len(frames)))
        if again is not None:
            case.items.append(again)
        case.items.append(sanitizer_item(findings, "the sanitizer found no hazard"))
        resources = resources_item(
            runtime, failed, "decode_clip", clean="decode_clip released everything it made",
            leaked_hint="destroy the channel (vdec_destroy_channel), then its description, "
                        "the stream and picture descriptions, and free your DVPP buffers")
        if resources.passed and (channels or threads):
            what = ([f"{channels} VDEC channel(s) still exist"] if channels else []) + \
                ([f"{len(threads)} callback thread(s) still run"] if threads else [])
            resources = Item("resources", False, "decode_clip left " + " and ".join(what),
                             "destroy the channel, then end the callback thread's loop and "
                             "acl.util.stop_thread it", kind=PROCESS)
        case.items.append(resources)
        return case


def _again(runtime, fn, seed: int, codec: str, entype: int, width: int, height: int, n: int,
           outputs: list[int], size: int) -> Item:
    """'again': a second clip of the same size and length, into the same outputs."""
    frames = make_clip(1_000_003 + 7 * seed, codec, width, height, n)
    want = _reference(frames, entype, width, height)
    call = call_learner(fn, acl, [bytes(f) for f in frames], entype, width, height,
                        list(outputs))
    got = [device_bytes(runtime, ptr, size) for ptr in outputs]
    pictures = _pictures_item(got, want, width, height)
    return again_outcome("decode_clip", call, "" if pictures.passed else pictures.message,
                         "a clip of the same size, into the same outputs",
                         "decoded the new pictures",
                         "decode the frames of each call, with a channel made for the call "
                         "(destroyed before it returns, so its id is free for the next one)")


def _picture(buf: bytes, width: int, height: int) -> tuple[bytes, bytes]:
    """The Y rows and the chroma rows of an NV12 picture with VDEC's strides (no padding)."""
    ws, hs = vdec_strides(width, height)
    arr = np.frombuffer(buf, np.uint8)
    y = arr[:ws * hs].reshape(hs, ws)[:height, :width]
    c = arr[ws * hs:ws * hs * 3 // 2].reshape(hs // 2, ws)[:height // 2, :width]
    return y.tobytes(), c.tobytes()


def _pictures_item(got: list[bytes], want: list[bytes], width: int, height: int) -> Item:
    wrong = [i for i, (g, w) in enumerate(zip(got, want, strict=True))
             if _picture(g, width, height) != _picture(w, width, height)]
    if not wrong:
        return Item("pictures", True, f"all {len(got)} pictures are right, in display order")
    late = [i for i in wrong if i >= len(got) - 2]
    hint = ("each output gets the picture whose callback came with its picture description; "
            "with B-frames the last pictures come out only at the end of the stream: send an "
            "eos frame (or destroy the channel) before you return" if late == wrong else
            "describe each output as NV12 with the caller's buffer and size, one description "
            "a frame, sent in the clip's order")
    return Item("pictures", False, f"{len(wrong)} of {len(got)} outputs do not hold their "
                                   f"picture (outputs {', '.join(map(str, wrong[:6]))})", hint)


def _vdec_item(prov: Provenance, outputs: list[int], got: list[bytes], size: int,
               end_ns: int) -> Item:
    for i, (ptr, data) in enumerate(zip(outputs, got, strict=True)):
        writers = prov.writers(ptr, ptr + size, end_ns)
        names = {w.task.name for _lo, _hi, w in writers if w is not None}
        if names != {"VdecDecode"} or any(w is None for _lo, _hi, w in writers):
            came = ", ".join(sorted(names)) or "no task"
            return Item("on VDEC", False, f"output {i}'s bytes were written by {came}, not by "
                                          "the card's VDEC",
                        "send each frame to VDEC (acl.media.vdec_send_frame) with an output "
                        "description on the caller's buffer: VDEC writes the picture there")
        if any(w.data is not None and w.data != data[lo - ptr:hi - ptr]
               for lo, hi, w in writers):
            return Item("on VDEC", False, f"output {i} changed after VDEC wrote it",
                        "leave the outputs as VDEC wrote them")
    return Item("on VDEC", True, "VDEC wrote every picture")


def _sends_item(sends, n: int) -> Item:
    if len(sends) == n:
        return Item("frames sent", True, f"each of the {n} frames went to VDEC once")
    return Item("frames sent", False, f"{len(sends)} frames went to VDEC for a clip of {n}",
                "send each access unit once, in the order given, then end the stream")
