"""Checks for lesson 12, Preprocessing on DVPP: decode and resize JPEGs on the card's engines.

``12.dvpp_pipeline``: ``preprocess(acl, jpegs, outputs, width, height, stream) -> None``
    ``jpegs`` is a list of JPEG files (bytes) of different sizes; ``outputs`` a list of as many
    DVPP buffers (from ``acl.media.dvpp_malloc``), each sized for one YUV420SP NV12 picture of
    ``width`` x ``height`` pixels with VPC's strides (width stride: the width aligned up to 16,
    at least 32; height stride: the height aligned up to 2). Decode each JPEG on JPEGD and
    resize it on VPC into its output buffer; the resizes run on ``stream``, the decodes on
    ``stream`` or on a stream of the function's own. Return once every picture is in place,
    having released everything the function created (DVPP buffers, pinned memory, picture
    descriptions, configs, the channel, streams, events). The caller has called ``acl.init()``,
    ``acl.rt.set_device(0)`` and made ``stream``; it frees ``outputs`` itself.

Each case draws the pictures, their sizes (odd ones too) and the output size from the seed. A
picture is right when its Y plane and its chroma are within 2 levels of the decode and resize
of that JPEG. The device work is verified, not assumed: a :class:`~._common.Provenance`
records what every task wrote; each output's rows must have been written by a VPC task whose
input was written by a JPEGD task that read that very JPEG; every JPEG is decoded exactly
once. Pictures decoded or resized on the host (Pillow, numpy) and copied in fail.

Items: ``runs``, ``pictures``, ``on DVPP`` and ``streams`` are results (any failure scores 0);
``overlap`` (in stream order, no decode waits behind a resize and no resize behind the decode
of a later picture, so JPEGD can decode picture i + 1 while VPC resizes picture i; graded on
the order, not on the time saved, which depends on the host's pace too), ``sanitizer`` and
``resources`` are process items, counted once every result is right.
"""

from __future__ import annotations

import io
import sys as _sys

import numpy as np

from .. import acl
from ..dvpp import formats as F
from ..dvpp.tasks import dvpp_device
from ..model import tiny_dataset
from . import PROCESS, Case, Item, _guard, call_learner, exercise, isolated, ran_item
from ._common import (
    Provenance,
    again_outcome,
    device_bytes,
    hazards,
    leak_texts,
    new_case,
    released_item,
    sanitizer_item,
)

__all__ = ["grade_dvpp_pipeline", "make_jpeg", "vpc_strides"]

NV12 = F.PIXEL_FORMAT_YUV_SEMIPLANAR_420
TOLERANCE = 2          # levels a decoded and resized pixel may differ from the reference

# (images, output width, output height) per seed; seeds beyond these draw from the ranges.
_CASES = ((3, 16, 16), (4, 48, 30), (5, 100, 64))


def vpc_strides(width: int, height: int) -> tuple[int, int]:
    """VPC's strides for a YUV420SP picture: width aligned to 16 (at least 32), height to 2."""
    return max(32, F.align_up(width, 16)), max(6, F.align_up(height, 2))


def make_jpeg(seed: int, width: int, height: int, quality: int = 90) -> bytes:
    """A colour JPEG of ``width`` x ``height``: one of the tiny model's patterns, tinted."""
    from PIL import Image

    rng = np.random.default_rng([12, seed, width, height])
    images, _ = tiny_dataset(1, int(rng.integers(1 << 30)))
    grey = np.clip(images[0, 0], 0, 1)
    big = np.asarray(Image.fromarray((grey * 255).astype(np.uint8)).resize(
        (width, height), Image.BILINEAR), np.float64)[:, :, None] / 255
    tint, ground = rng.uniform(60, 255, 3), rng.uniform(0, 90, 3)
    rgb = np.clip(np.rint(big * tint + (1 - big) * ground), 0, 255).astype(np.uint8)
    out = io.BytesIO()
    Image.fromarray(rgb).save(out, format="JPEG", quality=quality)
    return out.getvalue()


def _case(seed: int) -> tuple[list[bytes], int, int]:
    rng = np.random.default_rng([12, 1, seed])
    if seed < len(_CASES):
        count, width, height = _CASES[seed]
    else:
        count = int(rng.integers(3, 7))
        width = int(rng.choice([16, 32, 48, 64, 100, 128, 224]))
        height = int(rng.choice([16, 30, 48, 64, 96, 224]))
    sizes = [(int(rng.integers(40, 400)), int(rng.integers(32, 300))) for _ in range(count)]
    sizes[0] = (sizes[0][0] | 1, sizes[0][1] | 1)            # an odd width and height
    jpegs = [make_jpeg(int(rng.integers(1 << 30)), w, h) for w, h in sizes]
    return jpegs, width, height


def _expected(jpeg: bytes, width: int, height: int) -> tuple[np.ndarray, np.ndarray]:
    y, uv = F.decode_jpeg(jpeg)
    return F.resize_planes(y, uv, height, width)


@exercise("12.dvpp_pipeline", "dvpp_pipeline: decode and resize JPEGs on DVPP", "preprocess",
          limit_s=20.0)
def grade_dvpp_pipeline(fn, seed: int) -> Case:
    """One case: 3 to 6 JPEGs of 40 x 32 to 400 x 300 pixels, resized to one output size."""
    jpegs, width, height = _case(seed)
    count = len(jpegs)
    label = f"{count} JPEGs resized to {width} x {height}"
    ws, hs = vpc_strides(width, height)
    size = F.yuv420sp_size(ws, hs)
    want = [_expected(j, width, height) for j in jpegs]
    with isolated() as runtime:
        prov = Provenance(runtime)
        acl.init()
        acl.rt.set_device(0)
        stream, _ = acl.rt.create_stream()
        caller = runtime.stream_for(stream)
        outputs = [acl.media.dvpp_malloc(size)[0] for _ in jpegs]
        dd = dvpp_device(runtime, runtime.devices[0])
        call = call_learner(fn, acl, [bytes(j) for j in jpegs], list(outputs), width, height,
                            stream)
        case = new_case(label, call, runtime)
        if case.not_done:
            return case
        got = [device_bytes(runtime, ptr, size) for ptr in outputs]
        tasks = [t for t in runtime.engine.tasks[call.first_task:]
                 if t.resource is dd.jpegd or t.resource is dd.vpc]
        pictures = _pictures_item(got, want, width, height, ws, hs,
                                  _stride_mismatches(tasks, dd, outputs))
        again = None
        if call.error is None and pictures.passed:
            again = _again(runtime, fn, seed, jpegs, outputs, width, height, stream, size)
        census = _census(runtime, dd, outputs)
        failed = _teardown(stream, outputs)

        case.items.append(ran_item(call, "preprocess"))
        if call.error is not None:
            return case
        case.items.append(pictures)
        origin = _origins(prov, dd, outputs, jpegs, width, height, ws, hs, call.end_ns)
        case.items.append(_dvpp_item(prov, dd, tasks, origin, outputs, jpegs, got, ws, hs,
                                     height, call.end_ns))
        case.items.append(_streams_item(caller, tasks, origin))
        images_of = _images_of(prov, tasks, jpegs)
        case.items.append(_overlap_item(runtime, dd, tasks, origin, images_of))
        if again is not None:
            case.items.append(again)
        case.items.append(_sanitizer_item(runtime))
        case.items.append(_resources_item(census, runtime.leaks, failed))
        return case


def _again(runtime, fn, seed: int, jpegs: list[bytes], outputs: list[int], width: int,
           height: int, stream, size: int) -> Item:
    """'again': the caller decodes other JPEGs of the same sizes into the same outputs."""
    sizes = [(info.width, info.height) for info in map(F.jpeg_info, jpegs)]
    fresh = [make_jpeg(1_000_003 + 7 * seed + i, w, h) for i, (w, h) in enumerate(sizes)]
    call = call_learner(fn, acl, [bytes(j) for j in fresh], list(outputs), width, height,
                        stream)
    got = [device_bytes(runtime, ptr, size) for ptr in outputs]
    ws, hs = vpc_strides(width, height)
    pictures = _pictures_item(got, [_expected(j, width, height) for j in fresh], width,
                              height, ws, hs)
    return again_outcome("preprocess", call, "" if pictures.passed else pictures.message,
                         "JPEGs of the same sizes, into the same outputs",
                         "decoded and resized the new pictures",
                         "decode and resize the JPEGs of each call: a picture kept from an "
                         "earlier call is wrong once the images change")


def _teardown(stream, outputs) -> list[str]:
    acl.rt.synchronize_device()
    failed = []
    for i, ptr in enumerate(outputs):
        if acl.media.dvpp_free(ptr) != 0:
            failed.append(f"output {i} (the caller's DVPP buffer) was freed")
    if acl.rt.destroy_stream(stream) != 0:
        failed.append("the caller's stream was destroyed")
    if acl.rt.reset_device(0) != 0:
        failed.append("acl.rt.reset_device(0) failed: the device was reset already")
    if acl.finalize() != 0:
        failed.append("acl.finalize() failed: pyACL was finalised already")
    return failed


# -- results -----------------------------------------------------------------------------------

def _planes(buf: bytes, width: int, height: int, ws: int, hs: int):
    arr = np.frombuffer(buf, np.uint8)
    return F.split_planes(arr, width, height, ws, hs, NV12)


def _stride_mismatches(tasks, dd, outputs: list[int]) -> dict[int, str]:
    """Per output: how the description VPC read its input with disagrees with the strides
    JPEGD wrote that picture with (a wrong stride moves every row and the chroma plane)."""
    out: dict[int, str] = {}
    for i, ptr in enumerate(outputs):
        vpc = [t for t in tasks if t.resource is dd.vpc and (t.info or {}).get("dst") == ptr]
        if not vpc:
            continue
        v = vpc[-1]
        src, used = v.info.get("src"), v.info.get("in_strides")
        dec = [t for t in tasks if t.resource is dd.jpegd and t.id < v.id
               and (t.info or {}).get("dst") == src and "strides" in t.info]
        if not dec or used is None or tuple(dec[-1].info["strides"]) == tuple(used):
            continue
        (ws, hs), (uws, uhs) = dec[-1].info["strides"], used
        which = [f"{name} stride {u} where JPEGD wrote {w}"
                 for name, u, w in (("width", uws, ws), ("height", uhs, hs)) if u != w]
        out[i] = (f"task {v.id} {v.name} read the decoded picture with a "
                  f"{' and a '.join(which)} (task {dec[-1].id} {dec[-1].name}): the rows and "
                  "the chroma plane, which starts width_stride x height_stride bytes in, were "
                  "read from the wrong places")
    return out


def _pictures_item(got: list[bytes], want: list, width: int, height: int, ws: int,
                   hs: int, strides: dict[int, str] | None = None) -> Item:
    wrong = []
    first = ("", "")
    for i, (buf, (wy, wuv)) in enumerate(zip(got, want, strict=True)):
        y, uv = _planes(buf, width, height, ws, hs)
        dy = np.abs(y.astype(int) - wy).max()
        duv = np.abs(uv.astype(int) - wuv).max()
        if dy <= TOLERANCE and duv <= TOLERANCE:
            continue
        wrong.append(i)
        if first[0]:
            continue
        if strides and i in strides:
            first = (f"output {i} is not the resize of JPEG {i}: {strides[i]}",
                     "describe the decoded picture to VPC with the strides JPEGD wrote it "
                     "with: width stride aligned up to 128 and height stride aligned up to 16 "
                     "(the lesson's table), or read them from the decode's picture "
                     "description once the decode has ended")
        elif bytes(y[:1, :4].tobytes()) == b"\xde\xad\xbe\xef"[:min(4, width)]:
            first = (f"output {i} was never written (it still holds DE AD BE EF, the pattern "
                     "of memory nothing has written)",
                     "resize every picture into its output, and synchronise the stream "
                     "before returning: the caller reads the outputs as soon as you return")
        elif dy <= TOLERANCE:
            first = (f"output {i}'s Y plane is right but its chroma is not",
                     "the outputs are NV12 (PIXEL_FORMAT_YUV_SEMIPLANAR_420, U before V): "
                     "set that format on both picture descriptions")
        elif np.abs(y[:1].astype(int) - wy[:1]).max() <= TOLERANCE:
            first = (f"output {i}'s first row is right but later rows are not: the picture "
                     "was laid out with other strides",
                     "a VPC picture's rows are width_stride bytes apart: width stride = "
                     "width aligned up to 16 (at least 32), height stride = height aligned "
                     "up to 2; the Y plane is width_stride * height_stride bytes")
        else:
            first = (f"output {i} differs from the decode and resize of JPEG {i} by up to "
                     f"{max(dy, duv)} levels",
                     "describe the decoded picture as JPEGD wrote it: its width and height "
                     "(aligned up to 2), width stride aligned up to 128 and height stride "
                     "aligned up to 16 (or read them from the description once the decode "
                     "has ended); then resize the whole picture into output i")
    if not wrong:
        return Item("pictures", True, f"all {len(got)} pictures match the decode and resize "
                                      f"of their JPEG to {width} x {height}")
    shown = ", ".join(str(i) for i in wrong[:5])
    return Item("pictures", False, f"{len(wrong)} of {len(got)} outputs are wrong (output "
                                   f"{shown}): " + first[0], first[1])


def _jpeg_read(prov: Provenance, task) -> bytes | None:
    """The bytes a JPEGD task read when it started, from what the tasks before it wrote."""
    lo, n = task.reads[0]
    out = []
    for a, b, w in prov.writers(lo, lo + n, task.start_ns):
        if w is None or w.data is None:
            return None
        out.append(w.data[a - w.lo:b - w.lo])
    return b"".join(out)


def _origins(prov, dd, outputs, jpegs, width, height, ws, hs, end_ns) -> list:
    """For each output: (the VPC task that last wrote it, the JPEGD tasks its input came
    from, and the images those decoded), or None where no VPC task wrote it."""
    out = []
    for ptr in outputs:
        last = prov.writers(ptr, ptr + 1, end_ns)[0][2]
        if last is None or last.task.resource is not dd.vpc:
            out.append(None)
            continue
        vpc = last.task
        decoders, images = [], set()
        for lo, n in vpc.reads:
            for piece in prov.trace_back(lo, lo + n, vpc.start_ns):
                t = piece.origin.task if piece.origin is not None else None
                decoders.append(t)
                if t is not None and t.resource is dd.jpegd:
                    data = _jpeg_read(prov, t)
                    images |= {k for k, j in enumerate(jpegs) if data == j}
        out.append((vpc, decoders, images))
    return out


def _images_of(prov, tasks, jpegs) -> dict[int, set[int]]:
    """{JPEGD task id: the images whose bytes it read}."""
    out = {}
    for t in tasks:
        if t.engine_name.startswith("JPEGD"):
            data = _jpeg_read(prov, t)
            out[t.id] = {k for k, j in enumerate(jpegs) if data == j}
    return out


_DEVICE = "on DVPP"


def _dvpp_item(prov, dd, tasks, origin, outputs, jpegs, got, ws, hs, height,
               end_ns) -> Item:
    hint = ("for each JPEG: copy its bytes into DVPP memory, dvpp_jpeg_decode_async into a "
            "DVPP buffer, then dvpp_vpc_resize_async from that picture into its output "
            "buffer: the pictures must come from the card's JPEGD and VPC, not from the host")
    for i, ptr in enumerate(outputs):
        rows = ((ptr, ws * height), (ptr + ws * hs, ws * height // 2))
        for lo, n in rows:
            why = prov.computed_on(lo, got[i][lo - ptr:lo - ptr + n], end_ns,
                                   engines=(dd.vpc,), what=f"output {i}")
            if why:
                return Item(_DEVICE, False, why, hint)
        vpc, decoders, images = origin[i]
        if any(t is None or t.resource is not dd.jpegd for t in decoders):
            other = next((t for t in decoders if t is not None and t.resource is not dd.jpegd),
                         None)
            came = (f"task {other.id} {other.name} on {other.engine_name}" if other else
                    "host memory the host filled itself")
            return Item(_DEVICE, False, f"output {i} was resized by VPC (task {vpc.id}), but "
                                        f"its input picture came from {came}, not from JPEGD",
                        hint)
        if i not in images:
            return Item(_DEVICE, False, f"output {i} was resized from a picture JPEGD decoded "
                                        f"from other bytes than JPEG {i}",
                        "resize picture i into output i, from the decode of jpegs[i]")
    decodes = [t for t in tasks if t.resource is dd.jpegd]
    counts = [0] * len(jpegs)
    for t in decodes:
        data = _jpeg_read(prov, t)
        for k, j in enumerate(jpegs):
            if data == j:
                counts[k] += 1
    again = [k for k, c in enumerate(counts) if c > 1]
    if again:
        return Item(_DEVICE, False, f"JPEG {again[0]} was decoded {counts[again[0]]} times",
                    "decode every JPEG exactly once: a decode costs JPEGD time that a "
                    "service pays for each picture")
    if len(decodes) > len(jpegs):
        return Item(_DEVICE, False, f"JPEGD ran {len(decodes)} decodes for {len(jpegs)} JPEGs",
                    "decode every JPEG exactly once")
    return Item(_DEVICE, True, f"every output was resized on VPC from a picture JPEGD decoded "
                               f"from its JPEG, and each of the {len(jpegs)} JPEGs was decoded "
                               "exactly once")


def _streams_item(caller, tasks, origin) -> Item:
    resizes = [o[0] for o in origin if o is not None]
    off = next((t for t in resizes if t.stream is not caller), None)
    if off is not None:
        where = "the default stream" if off.stream is None or off.stream.is_default else \
            off.stream.name
        return Item("streams", False, f"the resize that wrote an output (task {off.id}) ran on "
                                      f"{where}, not on the caller's stream",
                    "submit every dvpp_vpc_resize_async on `stream`, so that work the caller "
                    "queues on it next (the model) runs after the resizes")
    default = next((t for t in tasks if t.stream is None or t.stream.is_default), None)
    if default is not None:
        return Item("streams", False, f"task {default.id} {default.name} ran on the default "
                                      "stream",
                    "decode on `stream` or on a stream you create (and destroy)")
    return Item("streams", True, "the resizes ran on the caller's stream")


# -- process -----------------------------------------------------------------------------------

def _overlap_item(runtime, dd, tasks, origin, images_of) -> Item:
    """Could the engines work side by side? No decode may wait in stream order behind a
    resize, and no resize behind the decode of a later picture: either makes JPEGD and VPC
    take turns. (How much they then overlap depends on the host too.)"""
    picture = {o[0].id: i for i, o in enumerate(origin) if o is not None}
    hint = ("on one stream each task waits for the one before it. Decode on a second stream "
            "of your own, record an event after each decode, and make `stream` wait for it "
            "before that picture's resize: then JPEGD decodes picture i + 1 while VPC resizes "
            "picture i")
    by_stream: dict[int, list] = {}
    for t in tasks:
        by_stream.setdefault(id(t.stream), []).append(t)
    for queue in by_stream.values():
        for k, t in enumerate(queue):
            before = queue[:k]
            if t.resource is dd.jpegd:
                ahead = next((b for b in before if b.resource is dd.vpc), None)
                if ahead is not None:
                    return Item("overlap", False,
                                f"the decode of JPEG {_first(images_of.get(t.id))} (task "
                                f"{t.id}) waited on {t.stream.name} for a resize (task "
                                f"{ahead.id}) to finish: JPEGD and VPC took turns", hint,
                                kind=PROCESS)
            elif t.id in picture:
                later = next((b for b in before if b.resource is dd.jpegd
                              and min(images_of.get(b.id) or {-1}) > picture[t.id]), None)
                if later is not None:
                    return Item("overlap", False,
                                f"the resize of picture {picture[t.id]} (task {t.id}) waited "
                                f"on {t.stream.name} for the decode of a later JPEG (task "
                                f"{later.id}): JPEGD and VPC took turns", hint, kind=PROCESS)
    from ..analysis import trace

    together = trace.overlap_ns(runtime, dd.jpegd, dd.vpc)
    return Item("overlap", True, "no decode waited for a resize, nor a resize for a later "
                                 f"decode: JPEGD and VPC worked side by side for "
                                 f"{together / 1000:,.1f} us", kind=PROCESS)


def _first(images) -> str:
    return str(min(images)) if images else "?"


def _sanitizer_item(runtime) -> Item:
    return sanitizer_item(hazards(runtime), "no hazards: every resize read a finished decode, "
                                            "and nothing was freed while in use", kind=PROCESS)


def _census(runtime, dd, outputs) -> dict[str, int]:
    """What is still alive right after the learner's function returned, by kind."""
    from ..acl import media

    out = {"DVPP buffer": 0, "device buffer": 0, "pinned host buffer": 0,
           "picture description": 0, "resize config": 0, "ROI config": 0,
           "channel": 0, "channel description": 0}
    mine = set(outputs)
    dvpp = {start for start, (reg, gen) in dd.buffers.items()
            if reg.live and reg.generation == gen}
    out["DVPP buffer"] = len(dvpp - mine)
    out["device buffer"] = sum(1 for dev in runtime.devices for reg in dev.heap.live.values()
                               if reg.start not in dvpp and reg.start not in mine)
    out["pinned host buffer"] = len(runtime.host.pinned)
    for obj in runtime.handles.values():
        if isinstance(obj, media._Desc) and obj.alive:
            if isinstance(obj, media.ChannelDesc) and obj.channel:
                out["channel"] += 1
            if obj.kind in out:
                out[obj.kind] += 1
    return out


_RELEASE = {"DVPP buffer": "acl.media.dvpp_free", "device buffer": "acl.rt.free",
            "pinned host buffer": "acl.rt.free_host",
            "picture description": "acl.media.dvpp_destroy_pic_desc",
            "resize config": "acl.media.dvpp_destroy_resize_config",
            "ROI config": "acl.media.dvpp_destroy_roi_config",
            "channel": "acl.media.dvpp_destroy_channel",
            "channel description": "acl.media.dvpp_destroy_channel_desc"}


def _resources_item(census: dict[str, int], leaks: list[str], failed: list[str]) -> Item:
    if failed:
        return released_item("preprocess", failed, "free only what preprocess created; the "
                                                   "outputs and the stream are the caller's")
    left = [f"{n} {kind}{'s' if n > 1 else ''}" for kind, n in census.items() if n]
    covered = ("never freed",)
    left += [t for t in leak_texts(leaks) if not any(w in t for w in covered)][:3]
    if not left:
        return Item("resources", True, "nothing leaked: every DVPP buffer, description, "
                                       "config, channel, stream and event was released",
                    kind=PROCESS)
    release = [_RELEASE[k] for k, n in census.items() if n]
    return Item("resources", False, "preprocess left behind: " + "; ".join(left),
                "after the final synchronisation, release what you created: "
                + ", ".join(release or ["acl.rt.destroy_event", "acl.rt.destroy_stream"]),
                kind=PROCESS)


_guard.seal(_sys.modules[__name__])        # the grader's own helpers refuse learner code


# the video exercise, 12.vdec_clip, registered after 12.dvpp_pipeline
from . import _lesson12_video  # noqa: E402, F401
