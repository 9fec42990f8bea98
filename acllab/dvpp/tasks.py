"""DVPP engines, DVPP memory and the JPEGD / VPC / JPEGE tasks: data effect and timing together.

Each device has three media engines of its own (``Resource`` objects, created on first use):
JPEGD, VPC and JPEGE, with ``jpegd_units`` / ``vpc_units`` / ``jpege_units`` units each, so
that several channels decode in parallel up to the published totals; PNGD (``pngd_units``),
VDEC and VENC join them when a program first uses them. A task's time is

    ``t = dvpp_task_ns + pixels / pixels_per_s``

per unit, with the profile's rates (hardware.py names their sources): a JPEGD decode counts
the picture's pixels, a VPC task the larger of its input (crop) area and its output area (the
docs' "reference resolution"), a JPEGE encode the picture's pixels. So one 1080p decode on the
ascend310 profile takes 20 us + 2,073,600 / 265.4 Mpx/s = 7.83 ms, 128 per second per unit.

As with copies, a task reads its inputs when it starts and writes its outputs when it ends;
``info['mem']`` lists the byte ranges it touches, so the sanitizer sees DVPP races too.
"""

from __future__ import annotations

import numpy as np

from ..engine import Resource, Task
from ..errors import Fail
from ..hardware import ceil_div
from . import formats as F
from . import png as P
from .layouts import INTERPOLATIONS, LAYOUTS, convert

__all__ = ["DvppDevice", "dvpp_device", "dvpp_ns", "decode_task", "png_decode_task", "vpc_task",
           "encode_task"]


class DvppDevice:
    """The media side of one device: its three engines and the DVPP buffers allocated."""

    def __init__(self, device):
        p = device.profile
        self.device = device
        self.jpegd = Resource(f"JPEGD (device {device.id})", p.jpegd_units)
        self.vpc = Resource(f"VPC (device {device.id})", p.vpc_units)
        self.jpege = Resource(f"JPEGE (device {device.id})", p.jpege_units)
        self.buffers: dict[int, tuple] = {}    # start -> (region, generation)
        # the video engines, created when a video channel first needs them (so that a
        # program that only decodes JPEGs keeps its trace's rows): see the vdec property
        self._vdec: Resource | None = None
        self._venc: Resource | None = None
        self._pngd: Resource | None = None   # the PNG decoder, as lazily (acl.media.png)
        self.vdec_channels: dict[int, object] = {}   # channel id -> its acl.media channel

    @property
    def vdec(self) -> Resource:
        """The video decoder (``vdec_units`` units), created on first use."""
        if self._vdec is None:
            self._vdec = Resource(f"VDEC (device {self.device.id})",
                                  self.device.profile.vdec_units)
        return self._vdec

    @property
    def venc(self) -> Resource:
        """The video encoder (``venc_units`` units), created on first use."""
        if self._venc is None:
            self._venc = Resource(f"VENC (device {self.device.id})",
                                  max(self.device.profile.venc_units, 1))
        return self._venc

    @property
    def pngd(self) -> Resource:
        """The PNG decoder (``pngd_units`` units), created on first use."""
        if self._pngd is None:
            self._pngd = Resource(f"PNGD (device {self.device.id})",
                                  self.device.profile.pngd_units)
        return self._pngd

    @property
    def has_video(self) -> bool:
        """True once a video engine exists on this device."""
        return self._vdec is not None or self._venc is not None

    def has_engine(self, short: str) -> bool:
        """True once the engine ``short`` made on first use ('vdec', 'venc', 'pngd') exists."""
        return getattr(self, f"_{short}") is not None

    @property
    def resources(self) -> tuple[Resource, ...]:
        return (self.jpegd, self.vpc, self.jpege) + tuple(
            r for r in (self._pngd, self._vdec, self._venc) if r is not None)

    def is_dvpp(self, region) -> bool:
        """True while ``region`` is a live block that dvpp_malloc handed out."""
        entry = self.buffers.get(region.start)
        return (entry is not None and entry[0] is region and region.live
                and region.generation == entry[1])

    @property
    def used_bytes(self) -> int:
        return sum(reg.size for reg, gen in self.buffers.values()
                   if reg.live and reg.generation == gen)

    def __repr__(self) -> str:
        live = sum(1 for reg, gen in self.buffers.values() if reg.live and reg.generation == gen)
        return (f"<DvppDevice {self.device.id}: {live} DVPP buffers ({self.used_bytes} B), "
                f"JPEGD x{self.jpegd.capacity}, VPC x{self.vpc.capacity}, "
                f"JPEGE x{self.jpege.capacity}>")


def dvpp_device(runtime, device) -> DvppDevice:
    """The device's media engines and DVPP memory (``device.dvpp``), created on first use;
    its engines are then part of ``device.resources``."""
    return device.dvpp


def dvpp_ns(profile, engine: str, pixels: int) -> int:
    """Nanoseconds of one task on ``engine`` ('jpegd', 'vpc', 'jpege', 'vdec', 'pngd') for
    ``pixels``."""
    rate = getattr(profile, f"{engine}_pixels_per_s")
    return profile.dvpp_task_ns + ceil_div(pixels * 1_000_000_000, rate)


def _mem(region, lo: int, n: int, op: str) -> tuple:
    return (region.start, region.generation, lo, lo + n, op)


def _fault(task: Task, message: str) -> None:
    task.info["fault"] = message


def decode_task(dd: DvppDevice, src, src_off: int, n: int, dst, dst_off: int,
                capacity: int, fmt: int, strides: tuple[int, int], stream, api: str,
                on_done=None) -> Task:
    """A JPEGD task: reads ``n`` JPEG bytes when it starts, decodes them, and writes the
    picture in format ``fmt`` (PIXEL_FORMAT_UNKNOWN: the JPEG's own sampling, V first) into
    ``dst`` (at most ``capacity`` bytes) when it ends.

    The picture's size and sampling are known only once the bytes are read (an earlier copy
    on the stream may bring them), so the checks that need them run when the task starts: a
    broken stream, a picture outside 32 x 32 to 8192 x 8192, an output format JPEGD does not
    write from this JPEG's sampling (:func:`acllab.dvpp.formats.jpegd_output`), or a buffer
    too small for the format's size (ws * hs * 3/2, * 2 or * 3) is a fault of the task,
    reported (507000) at the stream's next synchronisation. ``strides`` are the descriptor's
    (0 = JPEGD's own); ``on_done(width, height, width_stride, height_stride, format)`` fills
    the descriptor in.
    """
    dev = dd.device
    prof = dev.profile
    src_addr, dst_addr = src.start + src_off, dst.start + dst_off
    box: list = [None]

    def on_start(task: Task) -> None:
        try:
            raw = src.read_bytes(src_off, n)
            info = F.jpeg_info(raw)
        except Fail as exc:
            return _fault(task, exc.message)
        except ValueError as exc:
            return _fault(task, f"JPEGD cannot decode the stream: {exc}")
        w, h = info.width, info.height
        task.info["width"], task.info["height"] = w, h
        if info.progressive:
            return _fault(task, "JPEGD decodes baseline Huffman JPEGs only; this one is "
                                "progressive")
        if not (32 <= w <= 8192 and 32 <= h <= 8192):
            return _fault(task, f"JPEGD decodes 32 x 32 to 8192 x 8192 pictures; this one is "
                                f"{w} x {h}")
        try:
            ofmt, ow, oh = F.jpegd_output(info, fmt)
        except ValueError as exc:
            return _fault(task, str(exc))
        need_ws, need_hs = F.jpegd_strides(ow, oh, prof.jpegd_width_stride_align)
        ws, hs = strides[0] or need_ws, strides[1] or need_hs
        if ws < need_ws or hs < need_hs:
            return _fault(task, f"the output strides {ws} x {hs} are too small for a {w} x {h} "
                                f"picture: JPEGD needs at least {need_ws} x {need_hs}")
        nbytes = F.jpegd_size(ofmt, ws, hs)
        if nbytes > capacity:
            return _fault(task, f"the output buffer holds {capacity} B but a {w} x {h} picture "
                                f"in {F.FORMAT_NAMES[ofmt]} with strides {ws} x {hs} needs "
                                f"{nbytes} B (use acl.media.dvpp_jpeg_predict_dec_size)")
        try:
            y, c = F.jpegd_planes(raw, ofmt, ow, oh)
        except ValueError as exc:
            return _fault(task, f"JPEGD cannot decode the stream: {exc}")
        task.info["format"] = F.FORMAT_NAMES[ofmt]
        task.info["strides"] = (ws, hs)           # those it writes the picture with
        box[0] = (y, c, ow, oh, ws, hs, ofmt)

    def duration(task: Task) -> int:          # the JPEG's own pixels
        return dvpp_ns(prof, "jpegd", task.info["width"] * task.info["height"]
                       if box[0] else 0)

    def on_end(task: Task) -> None:
        planes, box[0] = box[0], None
        if planes is None or dst.dangling:
            return
        y, c, w, h, ws, hs, ofmt = planes
        lay = LAYOUTS[ofmt]
        buf = dst.read(dst_off, lay.size(ws, hs))
        lay.write(buf, ws, hs, y, c)
        dst.write(dst_off, buf)
        if on_done is not None:
            on_done(w, h, ws, hs, ofmt)

    return Task("JpegDecode", "dvpp", resource=dd.jpegd, duration_ns=duration, stream=stream,
                device=dev.id, nbytes=n, reads=((src_addr, n),), writes=((dst_addr, capacity),),
                on_start=on_start, on_end=on_end,
                info={"engine": "JPEGD", "src": src_addr, "dst": dst_addr,
                      "mem": (_mem(src, src_addr, n, "r"), _mem(dst, dst_addr, capacity, "w"))},
                api=api)


def png_decode_task(dd: DvppDevice, src, src_off: int, n: int, dst, dst_off: int,
                    capacity: int, fmt: int, strides: tuple[int, int], stream, api: str,
                    on_done=None) -> Task:
    """A PNGD task: reads ``n`` PNG bytes when it starts, decodes them, and writes the picture
    in ``fmt`` (PIXEL_FORMAT_RGB_888, or PIXEL_FORMAT_UNKNOWN: RGBA8888 from a source with
    alpha, RGB888 otherwise) into ``dst`` (at most ``capacity`` bytes) when it ends, rows of
    width * 3 (or 4) bytes every width stride bytes (:mod:`acllab.dvpp.png` has the rules).

    As with JPEGD, what needs the picture is checked when the task starts (an earlier copy on
    the stream may bring the bytes): data that is not a PNG, a colour type PNGD does not take
    (palette), a picture outside 32 x 32 to 4096 x 4096, strides smaller than PNGD's, a buffer
    smaller than width stride * height stride, or a stream Pillow cannot decode (truncated, a
    bad CRC) is a fault of the task, reported (507000) at the stream's next synchronisation.
    ``strides`` are the descriptor's (0 = PNGD's own); ``on_done(width, height, width_stride,
    height_stride, format)`` fills the descriptor in. Its time is ``dvpp_task_ns + pixels /
    pngd_pixels_per_s`` on one of the PNGD's units.
    """
    dev = dd.device
    prof = dev.profile
    src_addr, dst_addr = src.start + src_off, dst.start + dst_off
    box: list = [None]

    def on_start(task: Task) -> None:
        try:
            raw = src.read_bytes(src_off, n)
            head = P.png_header(raw)
        except Fail as exc:
            return _fault(task, exc.message)
        except ValueError as exc:
            return _fault(task, f"PNGD cannot decode the data: {exc}")
        w, h = head.width, head.height
        if head.components is None:
            return _fault(task, f"PNGD decodes greyscale, RGB, grey + alpha and RGBA PNGs "
                                f"(colour types 0, 2, 4, 6); this one is {head.kind}")
        if not (P.PNGD_MIN <= w <= P.PNGD_MAX and P.PNGD_MIN <= h <= P.PNGD_MAX):
            return _fault(task, f"PNGD decodes 32 x 32 to 4096 x 4096 pictures; this one is "
                                f"{w} x {h}")
        task.info["width"], task.info["height"] = w, h
        ofmt = P.pngd_output(head, fmt)
        need_ws, need_hs = P.pngd_strides(w, h, ofmt)
        ws, hs = strides[0] or need_ws, strides[1] or need_hs
        name = F.FORMAT_NAMES[ofmt]
        if ws < need_ws or hs < need_hs:
            return _fault(task, f"the output strides {ws} x {hs} are too small for a {w} x {h} "
                                f"{name} picture: PNGD needs at least {need_ws} x {need_hs}")
        nbytes = P.pngd_size(ws, hs)
        if nbytes > capacity:
            return _fault(task, f"the output buffer holds {capacity} B but a {w} x {h} picture "
                                f"in {name} with strides {ws} x {hs} needs {nbytes} B")
        try:
            pixels = P.pngd_pixels(raw, head, ofmt)
        except Fail as exc:
            return _fault(task, exc.message)
        except ValueError as exc:
            return _fault(task, f"PNGD cannot decode the stream: {exc}")
        task.info["format"] = name
        task.info["strides"] = (ws, hs)
        box[0] = (pixels, w, h, ws, hs, ofmt)

    def duration(task: Task) -> int:          # the picture's pixels
        return dvpp_ns(prof, "pngd", task.info["width"] * task.info["height"]
                       if box[0] else 0)

    def on_end(task: Task) -> None:
        done, box[0] = box[0], None
        if done is None or dst.dangling:
            return
        pixels, w, h, ws, hs, ofmt = done
        buf = dst.read(dst_off, ws * hs)      # the padding keeps its bytes
        buf.reshape(hs, ws)[:h, :pixels.shape[1] * pixels.shape[2]] = pixels.reshape(h, -1)
        dst.write(dst_off, buf)
        if on_done is not None:
            on_done(w, h, ws, hs, ofmt)

    return Task("PngDecode", "dvpp", resource=dd.pngd, duration_ns=duration, stream=stream,
                device=dev.id, nbytes=n, reads=((src_addr, n),), writes=((dst_addr, capacity),),
                on_start=on_start, on_end=on_end,
                info={"engine": "PNGD", "src": src_addr, "dst": dst_addr,
                      "mem": (_mem(src, src_addr, n, "r"), _mem(dst, dst_addr, capacity, "w"))},
                api=api)


def _rows(pic, top: int, bottom: int) -> list[tuple[int, int]]:
    """(address, bytes) of every plane's rows [top, bottom] of a picture (whole rows)."""
    spans = LAYOUTS[pic.format].row_spans(pic.width_stride, pic.height_stride, top, bottom)
    return [(pic.data + off, n) for off, n in spans]


def vpc_task(dd: DvppDevice, inp, out, crop: tuple[int, int, int, int],
             paste: tuple[int, int, int, int], stream, api: str, name: str,
             interpolation: int = 0) -> Task:
    """A VPC task: crop ``crop`` = (left, right, top, bottom) of ``inp``, resize it to the
    ``paste`` area of ``out`` (the whole output for resize and crop), and convert between the
    two pictures' formats (:mod:`acllab.dvpp.layouts`).

    Pixels of ``out`` outside the paste area keep their bytes (crop-and-paste onto a canvas).
    ``interpolation`` is the resize configuration's algorithm (layouts.INTERPOLATIONS).
    """
    dev = dd.device
    prof = dev.profile
    cl, cr, ct, cb = crop
    pl, pr, pt, pb = paste
    in_reads = _rows(inp, ct, cb)
    out_writes = _rows(out, pt, pb)
    ireg, oreg = inp.region, out.region
    ioff, ooff = inp.data - ireg.start, out.data - oreg.start
    ilay, olay = LAYOUTS[inp.format], LAYOUTS[out.format]
    in_n = ilay.size(inp.width_stride, inp.height_stride)
    out_n = olay.size(out.width_stride, out.height_stride)
    iw, ih, iws, ihs = inp.width, inp.height, inp.width_stride, inp.height_stride
    ows, ohs = out.width_stride, out.height_stride
    box: list = [None]
    method = INTERPOLATIONS[interpolation]

    def on_start(task: Task) -> None:
        try:
            buf = ireg.read(ioff, in_n)
        except Fail as exc:
            _fault(task, exc.message)
            return
        y, c = ilay.read(buf, iw, ih, iws, ihs)
        box[0] = convert(y, c, ilay.sub, crop, olay, pb - pt + 1, pr - pl + 1, method)

    def on_end(task: Task) -> None:
        planes, box[0] = box[0], None
        if planes is None or oreg.dangling:
            return
        buf = oreg.read(ooff, out_n)          # pixels outside the paste area keep their bytes
        olay.write(buf, ows, ohs, planes[0], planes[1], pt, pl)
        oreg.write(ooff, buf)

    pixels = max((cr - cl + 1) * (cb - ct + 1), (pr - pl + 1) * (pb - pt + 1))
    mem = tuple(_mem(ireg, a, n, "r") for a, n in in_reads) + \
        tuple(_mem(oreg, a, n, "w") for a, n in out_writes)
    info = {"engine": "VPC", "src": inp.data, "dst": out.data,
            "crop": f"{cl},{cr},{ct},{cb}", "paste": f"{pl},{pr},{pt},{pb}",
            "in": ilay.name, "out": olay.name, "in_strides": (iws, ihs), "mem": mem}
    if interpolation:                  # (the default keeps the records as they were)
        info["interpolation"] = interpolation
    return Task(name, "dvpp", resource=dd.vpc, duration_ns=dvpp_ns(prof, "vpc", pixels),
                stream=stream, device=dev.id,
                nbytes=sum(n for _, n in in_reads) + sum(n for _, n in out_writes),
                reads=tuple(in_reads), writes=tuple(out_writes), on_start=on_start,
                on_end=on_end, info=info, api=api)


def encode_task(dd: DvppDevice, inp, dst, dst_off: int, capacity: int, quality: int,
                stream, api: str, size_region=None, size_off: int = 0) -> Task:
    """A JPEGE task: reads the picture, writes the JPEG into ``dst`` (at most ``capacity``
    bytes) and, given ``size_region``, the encoded length as a uint32 there."""
    dev = dd.device
    prof = dev.profile
    ireg, ioff = inp.region, inp.data - inp.region.start
    w, h, ws, hs, fmt = inp.width, inp.height, inp.width_stride, inp.height_stride, inp.format
    in_n = F.yuv420sp_size(ws, hs)
    dst_addr = dst.start + dst_off
    box: list = [None]

    def on_start(task: Task) -> None:
        try:
            buf = ireg.read(ioff, in_n)
        except Fail as exc:
            _fault(task, exc.message)
            return
        y, uv = F.split_planes(buf, w, h, ws, hs, fmt)
        jpeg = F.encode_jpeg(np.ascontiguousarray(y[:h, :w]), uv, quality)
        if len(jpeg) > capacity:
            _fault(task, f"the encoded JPEG needs {len(jpeg)} B but the output buffer holds "
                         f"{capacity} B (size it with acl.media.dvpp_jpeg_predict_enc_size)")
            return
        box[0] = jpeg
        task.info["encoded_bytes"] = len(jpeg)

    def on_end(task: Task) -> None:
        jpeg, box[0] = box[0], None
        if jpeg is None or dst.dangling:
            return
        dst.write(dst_off, jpeg)
        if size_region is not None and not size_region.dangling:
            size_region.write(size_off, np.uint32(len(jpeg)).tobytes())

    mem = [_mem(ireg, inp.data, in_n, "r"), _mem(dst, dst_addr, capacity, "w")]
    writes = [(dst_addr, capacity)]
    if size_region is not None:
        mem.append(_mem(size_region, size_region.start + size_off, 4, "w"))
        writes.append((size_region.start + size_off, 4))
    return Task("JpegEncode", "dvpp", resource=dd.jpege, duration_ns=dvpp_ns(prof, "jpege", w * h),
                stream=stream, device=dev.id, nbytes=in_n, reads=((inp.data, in_n),),
                writes=tuple(writes), on_start=on_start, on_end=on_end,
                info={"engine": "JPEGE", "width": w, "height": h, "quality": quality,
                      "src": inp.data, "dst": dst_addr, "mem": tuple(mem)},
                api=api)
