"""acllab.checks.lesson12: the reference passes, the placeholder is "not done", known bugs fail.

Each known-wrong answer is a mistake a learner makes when moving preprocessing onto DVPP, and
the test asserts which graded items catch it. Two correct answers written differently from the
reference show that the check grades the work, not one way of writing it.
"""

from __future__ import annotations

import sys

import numpy as np
import pytest
from checks_support import ROOT, failed, item, load_solutions

import acllab
from acllab import session
from acllab.checks import check, exercises, summary
from acllab.constants import ACL_MEMCPY_HOST_TO_DEVICE
from acllab.dvpp import formats as F

H2D = ACL_MEMCPY_HOST_TO_DEVICE
SOLUTIONS = load_solutions("12")
EX = "12.dvpp_pipeline"


def up(value, to):
    return -(-value // to) * to


# -- the learner's building blocks, reused by the answers below --------------------------------

class Media:
    """A channel, a resize config and picture descriptions, as the lesson builds them."""

    def __init__(self, acl):
        self.acl, self.m = acl, acl.media
        self.channel = self.m.dvpp_create_channel_desc()
        self.m.dvpp_create_channel(self.channel)
        self.resize = self.m.dvpp_create_resize_config()
        self.descs, self.buffers = [], []

    def pic(self, ptr, size, w=0, h=0, ws=0, hs=0, fmt=1):
        d = self.m.dvpp_create_pic_desc()
        for field, value in (("data", ptr), ("size", size), ("format", fmt), ("width", w),
                             ("height", h), ("width_stride", ws), ("height_stride", hs)):
            getattr(self.m, f"dvpp_set_pic_desc_{field}")(d, value)
        self.descs.append(d)
        return d

    def malloc(self, n):
        ptr, _ = self.m.dvpp_malloc(n)
        self.buffers.append(ptr)
        return ptr

    def upload(self, data):
        ptr = self.malloc(len(data))
        self.acl.rt.memcpy(ptr, len(data), self.acl.util.bytes_to_ptr(data), len(data), H2D)
        return ptr

    def decode(self, jpeg, stream, ws_align=128):
        """Submit a decode; return the picture's description, set up for VPC."""
        host = self.acl.util.bytes_to_ptr(jpeg)
        w, h, _c, _ = self.m.dvpp_jpeg_get_image_info(host, len(jpeg))
        size, _ = self.m.dvpp_jpeg_predict_dec_size(host, len(jpeg), 1)
        src = self.upload(jpeg)
        dec = self.malloc(size)
        desc = self.pic(dec, size)
        self.m.dvpp_jpeg_decode_async(self.channel, src, len(jpeg), desc, stream)
        w2, h2 = up(w, 2), up(h, 2)
        for field, value in (("width", w2), ("height", h2), ("width_stride", up(w2, ws_align)),
                             ("height_stride", up(h2, 16))):
            getattr(self.m, f"dvpp_set_pic_desc_{field}")(desc, value)
        return desc

    def output(self, ptr, width, height, min_ws=32):
        ws, hs = max(min_ws, up(width, 16)), up(height, 2)
        return self.pic(ptr, ws * hs * 3 // 2, width, height, ws, hs)

    def release(self, descs=True, buffers=True, channel=True):
        if descs:
            for d in self.descs:
                self.m.dvpp_destroy_pic_desc(d)
        if buffers:
            for p in self.buffers:
                self.m.dvpp_free(p)
        if channel:
            self.m.dvpp_destroy_resize_config(self.resize)
            self.m.dvpp_destroy_channel(self.channel)
            self.m.dvpp_destroy_channel_desc(self.channel)


def serial(acl, jpegs, outputs, width, height, stream):
    """Right pictures, one stream: decode, resize, decode, resize ... (no overlap)."""
    md = Media(acl)
    for jpeg, out in zip(jpegs, outputs, strict=False):
        desc = md.decode(jpeg, stream)
        acl.media.dvpp_vpc_resize_async(md.channel, desc, md.output(out, width, height),
                                        md.resize, stream)
    acl.rt.synchronize_stream(stream)
    md.release()


# -- registration and more seeds (the generic promises: test_checks_common.py) -----------------

def test_lesson12_registers_its_exercises():
    assert [(ex.id, ex.function) for ex in exercises("12")] == [
        (EX, "preprocess"), ("12.vdec_clip", "decode_clip")]   # (test_checks_lesson12_video)
    assert [len(ex.seeds) for ex in exercises("12")] == [3, 3]


def test_reference_solution_reports_its_items():
    result = check(EX, SOLUTIONS.preprocess)
    assert result.status == "passed", str(result)
    assert [(i.name, i.kind) for i in result.items] == [
        ("runs", "result"), ("pictures", "result"), ("on DVPP", "result"),
        ("streams", "result"), ("overlap", "process"), ("again", "result"),
        ("sanitizer", "process"),
        ("resources", "process")]


def test_reference_solution_passes_on_more_seeds():
    result = check(EX, SOLUTIONS.preprocess, seeds=range(3, 9))
    assert result.status == "passed", str(result)


def test_cases_cover_odd_pictures_and_several_output_sizes():
    seen = []

    def spy(acl, jpegs, outputs, width, height, stream):
        sizes = [F.jpeg_info(j) for j in jpegs]
        seen.append((width, height, [(i.width, i.height) for i in sizes]))
        return SOLUTIONS.preprocess(acl, jpegs, outputs, width, height, stream)

    assert check(EX, spy).passed
    assert len({(w, h) for w, h, _ in seen}) == 3
    assert all(len(s) >= 3 for *_, s in seen)
    assert any(w % 2 and h % 2 for *_, s in seen for w, h in s)


# -- two correct answers, written differently --------------------------------------------------

def pinned_and_async(acl, jpegs, outputs, width, height, stream):
    """Pinned staging buffers and async uploads on the decode stream; one event reused per
    picture after its wait is queued; descriptions of the outputs made up front."""
    m = acl.media
    ch = m.dvpp_create_channel_desc()
    m.dvpp_create_channel(ch)
    cfg = m.dvpp_create_resize_config()
    side, _ = acl.rt.create_stream()
    ows = (width + 15) // 16 * 16
    ows = ows if ows >= 32 else 32
    ohs = height + (height & 1)
    outs = []
    for ptr in outputs:
        d = m.dvpp_create_pic_desc()
        m.dvpp_set_pic_desc_data(d, ptr)
        m.dvpp_set_pic_desc_size(d, ows * ohs * 3 // 2)
        m.dvpp_set_pic_desc_format(d, m.PIXEL_FORMAT_YUV_SEMIPLANAR_420)
        m.dvpp_set_pic_desc_width(d, width)
        m.dvpp_set_pic_desc_height(d, height)
        m.dvpp_set_pic_desc_width_stride(d, ows)
        m.dvpp_set_pic_desc_height_stride(d, ohs)
        outs.append(d)
    hosts, devs, descs, events = [], [], [], []
    plan = []
    for jpeg in jpegs:                   # the host's share first, so the card never waits
        n = len(jpeg)
        host, _ = acl.rt.malloc_host(n)
        acllab.current_runtime().region(host).data[:n] = np.frombuffer(jpeg, np.uint8)
        hosts.append(host)
        w, h, _c, _ = m.dvpp_jpeg_get_image_info(host, n)
        size, _ = m.dvpp_jpeg_predict_dec_size(host, n, 1)
        src, _ = m.dvpp_malloc(n)
        dst, _ = m.dvpp_malloc(size)
        devs += [src, dst]
        plan.append((n, w, h, size, src, dst))
    for (n, w, h, size, src, dst), host, out in zip(plan, hosts, outs, strict=False):
        acl.rt.memcpy_async(src, n, host, n, H2D, side)
        d = m.dvpp_create_pic_desc()
        m.dvpp_set_pic_desc_data(d, dst)
        m.dvpp_set_pic_desc_size(d, size)
        m.dvpp_set_pic_desc_format(d, 1)
        m.dvpp_jpeg_decode_async(ch, src, n, d, side)
        ev, _ = acl.rt.create_event()
        acl.rt.record_event(ev, side)
        acl.rt.stream_wait_event(stream, ev)
        events.append(ev)
        w += w & 1
        h += h & 1
        m.dvpp_set_pic_desc_width(d, w)
        m.dvpp_set_pic_desc_height(d, h)
        m.dvpp_set_pic_desc_width_stride(d, (w + 127) & ~127)
        m.dvpp_set_pic_desc_height_stride(d, (h + 15) & ~15)
        m.dvpp_vpc_resize_async(ch, d, out, cfg, stream)
        descs.append(d)
    acl.rt.synchronize_stream(side)
    acl.rt.synchronize_stream(stream)
    for d in descs + outs:
        m.dvpp_destroy_pic_desc(d)
    for p in devs:
        m.dvpp_free(p)
    for h in hosts:
        acl.rt.free_host(h)
    for ev in events:
        acl.rt.destroy_event(ev)
    acl.rt.destroy_stream(side)
    m.dvpp_destroy_resize_config(cfg)
    m.dvpp_destroy_channel(ch)
    m.dvpp_destroy_channel_desc(ch)


def two_decode_streams(acl, jpegs, outputs, width, height, stream):
    """Decodes alternate between two streams of its own (both JPEGD units busy); all of them
    are queued before the first resize, and the decoded layout comes from the JPEG header."""
    md = Media(acl)
    sides = [acl.rt.create_stream()[0] for _ in range(2)]
    events, pictures = [], []
    for k, jpeg in enumerate(jpegs):
        host = acl.util.bytes_to_ptr(jpeg)
        w, h, _c, _ = acl.media.dvpp_jpeg_get_image_info(host, len(jpeg))
        size, _ = acl.media.dvpp_jpeg_predict_dec_size(host, len(jpeg), 1)
        src = md.upload(jpeg)
        desc = md.pic(md.malloc(size), size)
        acl.media.dvpp_jpeg_decode_async(md.channel, src, len(jpeg), desc, sides[k % 2])
        ev, _ = acl.rt.create_event()
        acl.rt.record_event(ev, sides[k % 2])
        events.append(ev)
        w, h = w + w % 2, h + h % 2
        pictures.append(md.pic(acl.media.dvpp_get_pic_desc_data(desc), size, w, h,
                               (w + 127) // 128 * 128, (h + 15) // 16 * 16))
    for desc, out, ev in zip(pictures, outputs, events, strict=False):
        acl.rt.stream_wait_event(stream, ev)
        acl.media.dvpp_vpc_resize_async(md.channel, desc, md.output(out, width, height),
                                        md.resize, stream)
    acl.rt.synchronize_stream(stream)
    for ev in events:
        acl.rt.destroy_event(ev)
    for s in sides:
        acl.rt.destroy_stream(s)
    md.release()


@pytest.mark.parametrize("answer", [pinned_and_async, two_decode_streams])
def test_correct_answers_written_differently_pass(answer):
    result = check(EX, answer, seeds=(0, 1, 2, 3, 4))
    assert result.status == "passed", str(result)
    assert result.score == 1.0 and result.warnings == []


# -- known-wrong answers -----------------------------------------------------------------------

def empty(acl, jpegs, outputs, width, height, stream):
    return None


def host_decode_and_resize(acl, jpegs, outputs, width, height, stream):
    """Decode and resize on the host (as the lesson's host path does), then copy each picture
    into its output: the right pixels, but not made on the card."""
    ws, hs = max(32, up(width, 16)), up(height, 2)
    for jpeg, out in zip(jpegs, outputs, strict=False):
        y, uv = F.resize_planes(*F.decode_jpeg(jpeg), height, width)
        buf = np.zeros(ws * hs * 3 // 2, np.uint8)
        F.join_planes(buf, y, uv, 0, 0, ws, hs, 1)
        data = buf.tobytes()
        acl.rt.memcpy(out, len(data), acl.util.bytes_to_ptr(data), len(data), H2D)


def pillow_on_the_host(acl, jpegs, outputs, width, height, stream):
    """What a host-side service does: Pillow decodes and resizes, the picture is copied in."""
    import io

    from PIL import Image

    ws, hs = max(32, up(width, 16)), up(height, 2)
    for jpeg, out in zip(jpegs, outputs, strict=True):
        img = Image.open(io.BytesIO(jpeg)).convert("YCbCr").resize((width, height))
        ycc = np.asarray(img)
        buf = np.zeros(ws * hs * 3 // 2, np.uint8)
        buf[:ws * hs].reshape(hs, ws)[:height, :width] = ycc[:, :, 0]
        chroma = buf[ws * hs:].reshape(hs // 2, ws // 2, 2)
        chroma[:height // 2, :width // 2] = ycc[0::2, 0::2, 1:]
        data = buf.tobytes()
        acl.rt.memcpy(out, len(data), acl.util.bytes_to_ptr(data), len(data), H2D)


def host_decode_dvpp_resize(acl, jpegs, outputs, width, height, stream):
    """Decode with Pillow on the host, upload the picture, resize it on VPC."""
    md = Media(acl)
    for jpeg, out in zip(jpegs, outputs, strict=False):
        y, uv = F.decode_jpeg(jpeg)
        h, w = y.shape
        ws, hs = up(w, 128), up(h, 16)
        buf = np.zeros(ws * hs * 3 // 2, np.uint8)
        F.join_planes(buf, y, uv, 0, 0, ws, hs, 1)
        src = md.upload(buf.tobytes())
        acl.media.dvpp_vpc_resize_async(md.channel, md.pic(src, buf.size, w, h, ws, hs),
                                        md.output(out, width, height), md.resize, stream)
    acl.rt.synchronize_stream(stream)
    md.release()


def oracle(acl, jpegs, outputs, width, height, stream):
    from acllab.checks import lesson12

    lesson12._expected(jpegs[0], width, height)
    return SOLUTIONS.preprocess(acl, jpegs, outputs, width, height, stream)


def tamper(acl, jpegs, outputs, width, height, stream):
    sys.modules["acllab.checks.lesson12"].TOLERANCE = 255
    return empty(acl, jpegs, outputs, width, height, stream)


def decoded_strides_of_16(acl, jpegs, outputs, width, height, stream):
    """Describes the decoded picture with VPC's 16-aligned width stride, not JPEGD's 128."""
    md = Media(acl)
    for jpeg, out in zip(jpegs, outputs, strict=False):
        desc = md.decode(jpeg, stream, ws_align=16)
        acl.media.dvpp_vpc_resize_async(md.channel, desc, md.output(out, width, height),
                                        md.resize, stream)
    acl.rt.synchronize_stream(stream)
    md.release()


def output_stride_without_minimum(acl, jpegs, outputs, width, height, stream):
    """Aligns the output's width stride to 16 but forgets VPC's minimum of 32."""
    md = Media(acl)
    for jpeg, out in zip(jpegs, outputs, strict=False):
        desc = md.decode(jpeg, stream)
        acl.media.dvpp_vpc_resize_async(md.channel, desc, md.output(out, width, height, 16),
                                        md.resize, stream)
    acl.rt.synchronize_stream(stream)
    md.release()


def no_sync(acl, jpegs, outputs, width, height, stream):
    """Queues everything and returns at once; releases nothing (it cannot, yet)."""
    md = Media(acl)
    for jpeg, out in zip(jpegs, outputs, strict=False):
        desc = md.decode(jpeg, stream)
        acl.media.dvpp_vpc_resize_async(md.channel, desc, md.output(out, width, height),
                                        md.resize, stream)


def frees_before_sync(acl, jpegs, outputs, width, height, stream):
    md = Media(acl)
    for jpeg, out in zip(jpegs, outputs, strict=False):
        desc = md.decode(jpeg, stream)
        acl.media.dvpp_vpc_resize_async(md.channel, desc, md.output(out, width, height),
                                        md.resize, stream)
    md.release()                                  # frees the decode buffers still in use
    acl.rt.synchronize_stream(stream)


def decodes_twice(acl, jpegs, outputs, width, height, stream):
    """Decodes every JPEG once to look at it, then again for the resize."""
    md = Media(acl)
    for jpeg in jpegs:
        md.decode(jpeg, stream)
    acl.rt.synchronize_stream(stream)
    for jpeg, out in zip(jpegs, outputs, strict=False):
        desc = md.decode(jpeg, stream)
        acl.media.dvpp_vpc_resize_async(md.channel, desc, md.output(out, width, height),
                                        md.resize, stream)
    acl.rt.synchronize_stream(stream)
    md.release()


def swapped_outputs(acl, jpegs, outputs, width, height, stream):
    return SOLUTIONS.preprocess(acl, jpegs, outputs[::-1], width, height, stream)


def default_stream(acl, jpegs, outputs, width, height, stream):
    return SOLUTIONS.preprocess(acl, jpegs, outputs, width, height, 0)


def leaks_descriptions(acl, jpegs, outputs, width, height, stream):
    md = Media(acl)
    side, _ = acl.rt.create_stream()
    for jpeg, out in zip(jpegs, outputs, strict=False):
        desc = md.decode(jpeg, side)
        ev, _ = acl.rt.create_event()              # never destroyed
        acl.rt.record_event(ev, side)
        acl.rt.stream_wait_event(stream, ev)
        acl.media.dvpp_vpc_resize_async(md.channel, desc, md.output(out, width, height),
                                        md.resize, stream)
    acl.rt.synchronize_stream(stream)
    acl.rt.destroy_stream(side)
    md.release(descs=False, channel=False)


def hangs(acl, jpegs, outputs, width, height, stream):
    while True:
        pass


def exits(acl, jpegs, outputs, width, height, stream):
    raise SystemExit(0)


def frees_the_callers_outputs(acl, jpegs, outputs, width, height, stream):
    SOLUTIONS.preprocess(acl, jpegs, outputs, width, height, stream)
    acl.rt.destroy_stream(stream)


def test_an_empty_function_scores_zero():
    result = check(EX, empty)
    assert result.score == 0 and "pictures" in failed(result)
    assert "never written" in item(result, "pictures").message


def test_pictures_made_on_the_host_are_not_trusted():
    result = check(EX, host_decode_and_resize)
    assert result.score == 0
    assert failed(result) >= {"on DVPP"} and "pictures" not in failed(result)
    assert "host" in item(result, "on DVPP").message


def test_pillow_on_the_host_scores_zero():
    result = check(EX, pillow_on_the_host)
    assert result.score == 0 and "pictures" in failed(result)


def test_a_host_decode_before_a_vpc_resize_is_not_trusted():
    result = check(EX, host_decode_dvpp_resize)
    assert result.score == 0 and "pictures" not in failed(result)
    message = item(result, "on DVPP").message
    assert "resized by VPC" in message and "not from JPEGD" in message


def test_calling_the_graders_helpers_is_not_own_work():
    result = check(EX, oracle)
    assert result.score == 0 and failed(result) == {"own work"}


def test_tampering_with_the_check_is_detected_and_undone():
    from acllab.checks import lesson12

    result = check(EX, tamper)
    assert result.score == 0 and failed(result) == {"acllab unchanged"}
    assert lesson12.TOLERANCE == 2


def test_wrong_strides_for_the_decoded_picture_give_wrong_pixels():
    result = check(EX, decoded_strides_of_16)
    assert result.score == 0 and "pictures" in failed(result)
    assert "aligned up to 128" in item(result, "pictures").hint


def test_an_output_stride_below_32_is_refused_and_nothing_is_written():
    result = check(EX, output_stride_without_minimum, seeds=(0,))      # a 16 x 16 output
    assert result.score == 0 and "pictures" in failed(result)
    assert any("width stride 32" in w for w in result.warnings)


def test_returning_before_the_work_is_done_fails():
    result = check(EX, no_sync)
    assert result.score == 0 and "pictures" in failed(result)
    assert "synchronise" in item(result, "pictures").hint


def test_freeing_decode_buffers_before_synchronising_is_a_use_after_free():
    result = check(EX, frees_before_sync)
    assert "sanitizer" in failed(result) and result.score < 1
    assert "use-after-free" in item(result, "sanitizer").message


def test_decoding_each_jpeg_twice_fails():
    result = check(EX, decodes_twice)
    assert result.score == 0 and failed(result) == {"on DVPP", "overlap"}
    assert "decoded 2 times" in item(result, "on DVPP").message


def test_pictures_in_the_wrong_outputs_fail():
    result = check(EX, swapped_outputs)
    assert result.score == 0 and "pictures" in failed(result)


def test_resizes_on_the_default_stream_fail():
    result = check(EX, default_stream)
    assert result.score == 0 and failed(result) == {"streams"}
    assert "default stream" in item(result, "streams").message


def test_one_stream_gets_everything_but_overlap():
    result = check(EX, serial)
    assert failed(result) == {"overlap"}
    assert result.score == pytest.approx(7 / 8)
    assert "second stream" in item(result, "overlap").hint


def test_leaks_are_reported_by_kind():
    result = check(EX, leaks_descriptions)
    assert failed(result) == {"resources"}
    message = item(result, "resources").message
    assert "picture description" in message and "channel" in message and "event" in message
    assert "dvpp_destroy_pic_desc" in item(result, "resources").hint


def test_destroying_the_callers_stream_fails_resources():
    result = check(EX, frees_the_callers_outputs)
    assert {"resources", "again"} <= failed(result)     # its caller cannot ask again
    assert "belong to its caller" in item(result, "resources").message


def test_a_hang_is_stopped_at_the_limit():
    result = check(EX, hangs, limit_s=1)
    assert result.score == 0 and failed(result) == {"runs"}
    assert "stopped after 1 s" in item(result, "runs").message


def test_system_exit_ends_only_the_case():
    result = check(EX, exits)
    assert result.score == 0 and failed(result) == {"runs"}
    assert "SystemExit" in item(result, "runs").message


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_messages_never_show_the_expected_pixels(seed):
    def grey(acl, jpegs, outputs, width, height, stream):
        for out in outputs:
            n = max(32, up(width, 16)) * up(height, 2) * 3 // 2
            acl.rt.memset(out, n, 128, n)

    result = check(EX, grey, seeds=(seed,))
    pictures = item(result, "pictures")
    assert not pictures.passed and "[" not in pictures.message


# -- grading never disturbs the learner --------------------------------------------------------

def test_settings_and_the_learners_runtime_are_restored(fresh):
    from acllab import acl

    acllab.configure("ascend910b", strict=True)
    runtime = acllab.current_runtime()
    acl.init()
    acl.rt.set_device(0)
    settings = dict(session._settings)
    tasks = len(runtime.tasks)
    assert check(EX, SOLUTIONS.preprocess).passed
    check(EX, empty)
    assert session._settings == settings
    assert acllab.current_runtime() is runtime and len(runtime.tasks) == tasks


def test_summary_counts_the_exercise():
    check(EX, SOLUTIONS.preprocess)
    assert summary("12").passed == 1


# -- the second call in the same runtime ----------------------------------------------------------

def test_a_preprocess_that_decodes_only_once_fails_again():
    done = set()

    def preprocess(acl, jpegs, outputs, width, height, stream):
        key = (len(jpegs), width, height)
        if key not in done:            # "the outputs are ready already"
            done.add(key)
            SOLUTIONS.preprocess(acl, jpegs, outputs, width, height, stream)

    result = check(EX, preprocess)
    assert result.score == 0 and failed(result) == {"again"}, str(result)
    again = item(result, "again")
    assert again.kind == "result" and "same sizes, into the same outputs" in again.message


def test_a_preprocess_that_decodes_the_first_jpegs_again_fails_again():
    first = {}

    def preprocess(acl, jpegs, outputs, width, height, stream):
        jpegs = first.setdefault(len(jpegs), jpegs)
        SOLUTIONS.preprocess(acl, jpegs, outputs, width, height, stream)

    result = check(EX, preprocess)
    assert result.score == 0 and failed(result) == {"again"}, str(result)


def test_the_reference_preprocess_passes_the_second_call():
    result = check(EX, SOLUTIONS.preprocess)
    assert item(result, "again").passed, str(result)


# -- a wrong stride is named as a stride ----------------------------------------------------------

def _with_decoded_height_stride_aligned_to(to: int):
    """The reference, except that it describes the decoded picture to VPC with its height
    stride aligned to ``to`` instead of JPEGD's 16."""
    source = (ROOT / "lessons" / "solutions" / "lesson12.py").read_text()
    wrong = source.replace("_align(w2, 128), _align(h2, 16)", f"_align(w2, 128), _align(h2, {to})")
    assert wrong != source
    namespace: dict = {}
    exec(compile(wrong, "lesson12_wrong_stride", "exec"), namespace)
    return namespace["preprocess"]


def test_a_decoded_height_stride_aligned_to_2_is_named_not_blamed_on_the_format():
    result = check(EX, _with_decoded_height_stride_aligned_to(2))
    pictures = item(result, "pictures")
    assert not pictures.passed
    assert "read the decoded picture with a height stride" in pictures.message, pictures.message
    assert "where JPEGD wrote" in pictures.message
    assert "NV12" not in pictures.hint and "format" not in pictures.hint
    assert "strides JPEGD wrote it with" in pictures.hint
