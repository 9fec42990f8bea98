"""Video and batch VPC in C and C++ (acl_dvpp.h): stream descriptions, VDEC, VENC and batch
crop, through acllab's libascendcl.so, each program beside its pyACL twin.

The programs are written as Ascend's C++ samples write them (vdec, venc, batchcrop under
cplusplus/level2_simple_inference/0_data_process): a pthread looping on aclrtProcessReport
with a timeout runs the channel's callbacks, which copy what they are handed back to the host
and do not wait on other threads. Each program runs on a device in this process and its
output, tasks and API log are compared with those of a pyACL program doing the same calls
(acllab.acl.media.vdec / venc / batch); the decoded pictures are compared with PyAV's own
decode of the same bytes, and the encoded stream is decoded by PyAV. Facts: CANN 8.0.0
AscendCL reference (acldvppSetStreamDesc series, aclvdecSendFrame, aclvencSendFrame,
acldvppVpcBatchCropAsync), as the pyACL modules cite them.
"""

from __future__ import annotations

import re
import shutil
import struct
import threading
from pathlib import Path

import numpy as np
import pytest
from test_native import build, record, run_here, twin

import acllab
from acllab import constants as C
from acllab import session


def video():
    """PyAV and the clip helpers of the pyACL VDEC tests (the video tests skip without PyAV;
    the batch, cancellation and symbol tests do not need it)."""
    av = pytest.importorskip("av")
    import test_acl_media_vdec as helpers

    return av, helpers


NV12 = 1

pytestmark = pytest.mark.skipif(shutil.which("gcc") is None or shutil.which("g++") is None,
                                reason="needs the system's gcc and g++")




def pinned_write(ptr: int, data: bytes) -> None:
    """Fill a pinned host buffer as a C program writes through its pointer (no call)."""
    acllab.current_runtime().region(ptr).data[:len(data)] = np.frombuffer(data, np.uint8)


def pinned_read(ptr: int, n: int) -> bytes:
    return acllab.current_runtime().region(ptr).data[:n].tobytes()


def digest(data: bytes) -> int:
    """The programs' checksum (FNV-1a, 64 bits), for their outputs to compare."""
    h = 0xcbf29ce484222325
    for b in data:
        h = ((h ^ b) * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
    return h


def clip_file(path: Path, packets: list[bytes]) -> Path:
    """Packets as the programs read them: a count, then each packet's length and bytes."""
    path.write_bytes(struct.pack("<I", len(packets))
                     + b"".join(struct.pack("<I", len(p)) + p for p in packets))
    return path


DIGEST_C = r"""
static uint64_t Digest(const unsigned char *p, size_t n)
{
    uint64_t h = 0xcbf29ce484222325ULL;
    for (size_t i = 0; i < n; i++) {
        h = (h ^ p[i]) * 0x100000001b3ULL;
    }
    return h;
}
"""

# -- VDEC ----------------------------------------------------------------------------------------

VDEC_CPP = r"""
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>
#include <pthread.h>
#include "acl/acl.h"
#include "acl/ops/acl_dvpp.h"
""" + DIGEST_C + r"""
static std::atomic<bool> g_run(true), g_ready(false);
static aclrtContext g_context;
static void *g_host = nullptr;
static std::string g_out;
static int g_count = 0;

static void *ProcessReport(void *)
{
    aclrtSetCurrentContext(g_context);
    g_ready = true;
    while (g_run) {
        (void)aclrtProcessReport(100);
    }
    return nullptr;
}

static void Callback(acldvppStreamDesc *input, acldvppPicDesc *output, void *userData)
{
    long user = static_cast<long>(reinterpret_cast<intptr_t>(userData));
    uint32_t ret = acldvppGetPicDescRetCode(output);
    uint32_t w = acldvppGetPicDescWidth(output), h = acldvppGetPicDescHeight(output);
    uint32_t ws = acldvppGetPicDescWidthStride(output);
    uint32_t hs = acldvppGetPicDescHeightStride(output);
    unsigned long long ts = acldvppGetStreamDescTimestamp(input);
    void *data = acldvppGetPicDescData(output);
    uint64_t sum = 0;
    if (ret == 0) {
        size_t n = static_cast<size_t>(ws) * hs * 3 / 2;
        aclrtMemcpy(g_host, n, data, n, ACL_MEMCPY_DEVICE_TO_HOST);
        sum = Digest(static_cast<unsigned char *>(g_host), n);
        std::string name = g_out + "/pic" + std::to_string(g_count) + ".yuv";
        FILE *f = fopen(name.c_str(), "wb");
        fwrite(g_host, 1, n, f);
        fclose(f);
    }
    printf("picture %d: frame %ld ts %llu ret %u %ux%u strides %ux%u sum %016llx\n", g_count,
           user, ts, ret, w, h, ws, hs, static_cast<unsigned long long>(sum));
    g_count++;
    acldvppFree(data);
    acldvppDestroyPicDesc(output);
    acldvppDestroyStreamDesc(input);
}

int main(int argc, char **argv)
{
    FILE *f = fopen(argv[1], "rb");
    fseek(f, 0, SEEK_END);
    long total = ftell(f);
    fseek(f, 0, SEEK_SET);
    int entype = atoi(argv[2]);
    g_out = argv[3];
    aclInit(nullptr);
    aclrtSetDevice(0);
    aclrtCreateContext(&g_context, 0);
    void *clip = nullptr;
    aclrtMallocHost(&clip, total);
    aclrtMallocHost(&g_host, 1 << 18);
    if (fread(clip, 1, total, f) != static_cast<size_t>(total)) return 1;
    fclose(f);
    pthread_t tid;
    pthread_create(&tid, nullptr, ProcessReport, nullptr);
    while (!g_ready) {
    }
    aclvdecChannelDesc *desc = aclvdecCreateChannelDesc();
    int s1 = aclvdecSetChannelDescChannelId(desc, 3);
    int s2 = aclvdecSetChannelDescThreadId(desc, static_cast<uint64_t>(tid));
    int s3 = aclvdecSetChannelDescCallback(desc, Callback);
    int s4 = aclvdecSetChannelDescEnType(desc, static_cast<acldvppStreamFormat>(entype));
    int s5 = aclvdecSetChannelDescOutPicFormat(desc, PIXEL_FORMAT_YUV_SEMIPLANAR_420);
    printf("set %d %d %d %d %d\n", s1, s2, s3, s4, s5);
    uint32_t id = aclvdecGetChannelDescChannelId(desc);
    bool sameTid = aclvdecGetChannelDescThreadId(desc) == static_cast<uint64_t>(tid);
    bool sameCallback = aclvdecGetChannelDescCallback(desc) == Callback;
    int gotType = static_cast<int>(aclvdecGetChannelDescEnType(desc));
    int gotFormat = static_cast<int>(aclvdecGetChannelDescOutPicFormat(desc));
    uint32_t mode = aclvdecGetChannelDescOutMode(desc);
    printf("get %u %s %s %d %d mode %u\n", id, sameTid ? "tid" : "other",
           sameCallback ? "callback" : "other", gotType, gotFormat, mode);
    printf("create %d\n", aclvdecCreateChannel(desc));
    void *inBuffer = nullptr;
    acldvppMalloc(&inBuffer, 1 << 20);
    const unsigned char *p = static_cast<unsigned char *>(clip);
    uint32_t count = *reinterpret_cast<const uint32_t *>(p);
    p += 4;
    for (uint32_t i = 0; i < count; i++) {
        uint32_t n = *reinterpret_cast<const uint32_t *>(p);
        p += 4;
        aclrtMemcpy(inBuffer, 1 << 20, p, n, ACL_MEMCPY_HOST_TO_DEVICE);
        p += n;
        acldvppStreamDesc *input = acldvppCreateStreamDesc();
        acldvppSetStreamDescData(input, inBuffer);
        acldvppSetStreamDescSize(input, n);
        acldvppSetStreamDescTimestamp(input, 1000 + i);
        void *outBuffer = nullptr;
        acldvppMalloc(&outBuffer, 1 << 16);
        acldvppPicDesc *output = acldvppCreatePicDesc();
        acldvppSetPicDescData(output, outBuffer);
        acldvppSetPicDescSize(output, 1 << 16);
        aclError ret = aclvdecSendFrame(desc, input, output, nullptr,
                                        reinterpret_cast<void *>(static_cast<intptr_t>(i + 1)));
        if (ret != ACL_SUCCESS) printf("send %u: %d\n", i, ret);
    }
    if (argc > 4) {        /* no eos: destroying the channel ends the stream (the vdec sample) */
        printf("before destroy, pictures %d\n", g_count);
    } else {
        acldvppStreamDesc *eos = acldvppCreateStreamDesc();
        acldvppSetStreamDescEos(eos, 1);
        aclError eosRet = aclvdecSendFrame(desc, eos, nullptr, nullptr, nullptr);
        printf("eos %d (%u), pictures %d\n", eosRet, acldvppGetStreamDescEos(eos), g_count);
        acldvppDestroyStreamDesc(eos);
    }
    aclError d1 = aclvdecDestroyChannel(desc);
    printf("destroy %d %d, pictures %d\n", d1, aclvdecDestroyChannelDesc(desc), g_count);
    g_run = false;
    pthread_join(tid, nullptr);
    acldvppFree(inBuffer);
    aclrtFreeHost(clip);
    aclrtFreeHost(g_host);
    aclrtDestroyContext(g_context);
    aclrtResetDevice(0);
    aclFinalize();
    return 0;
}
"""


def vdec_twin(acl, clip: bytes, entype: int, out: Path, destroy: bool = False):
    media = acl.media
    lines = []
    acl.init()
    acl.rt.set_device(0)
    context, _ = acl.rt.create_context(0)
    clip_host, _ = acl.rt.malloc_host(len(clip))
    host, _ = acl.rt.malloc_host(1 << 18)
    pinned_write(clip_host, clip)
    run, ready = [True], threading.Event()
    count = [0]

    def process():
        acl.rt.set_context(context)
        ready.set()
        while run[0]:
            acl.rt.process_report(100)

    def callback(input_, output, user):
        ret = media.dvpp_get_pic_desc_ret_code(output)
        w, h = media.dvpp_get_pic_desc_width(output), media.dvpp_get_pic_desc_height(output)
        ws = media.dvpp_get_pic_desc_width_stride(output)
        hs = media.dvpp_get_pic_desc_height_stride(output)
        ts = media.dvpp_get_stream_desc_timestamp(input_)
        data = media.dvpp_get_pic_desc_data(output)
        total = 0
        if ret == 0:
            n = ws * hs * 3 // 2
            acl.rt.memcpy(host, n, data, n, C.ACL_MEMCPY_DEVICE_TO_HOST)
            pic = pinned_read(host, n)
            total = digest(pic)
            (out / f"pic{count[0]}.yuv").write_bytes(pic)
        lines.append(f"picture {count[0]}: frame {user} ts {ts} ret {ret} {w}x{h} strides "
                     f"{ws}x{hs} sum {total:016x}")
        count[0] += 1
        media.dvpp_free(data)
        media.dvpp_destroy_pic_desc(output)
        media.dvpp_destroy_stream_desc(input_)

    thread = threading.Thread(target=process)
    thread.start()
    ready.wait()
    desc = media.vdec_create_channel_desc()
    sets = (media.vdec_set_channel_desc_channel_id(desc, 3),
            media.vdec_set_channel_desc_thread_id(desc, thread.ident),
            media.vdec_set_channel_desc_callback(desc, callback),
            media.vdec_set_channel_desc_entype(desc, entype),
            media.vdec_set_channel_desc_out_pic_format(desc, NV12))
    lines.append("set " + " ".join(map(str, sets)))
    ident = media.vdec_get_channel_desc_channel_id(desc)
    tid = media.vdec_get_channel_desc_thread_id(desc)
    cb = media.vdec_get_channel_desc_callback(desc)
    lines.append(f"get {ident} "
                 f"{'tid' if tid == thread.ident else 'other'} "
                 f"{'callback' if cb is callback else 'other'} "
                 f"{media.vdec_get_channel_desc_entype(desc)} "
                 f"{media.vdec_get_channel_desc_out_pic_format(desc)} "
                 f"mode {media.vdec_get_channel_desc_out_mode(desc)}")
    lines.append(f"create {media.vdec_create_channel(desc)}")
    inbuf, _ = media.dvpp_malloc(1 << 20)
    (count_,), pos = struct.unpack_from("<I", clip), 4
    for i in range(count_):
        (n,) = struct.unpack_from("<I", clip, pos)
        pos += 4
        acl.rt.memcpy(inbuf, 1 << 20, clip_host + pos, n, C.ACL_MEMCPY_HOST_TO_DEVICE)
        pos += n
        sd = media.dvpp_create_stream_desc()
        media.dvpp_set_stream_desc_data(sd, inbuf)
        media.dvpp_set_stream_desc_size(sd, n)
        media.dvpp_set_stream_desc_timestamp(sd, 1000 + i)
        outbuf, _ = media.dvpp_malloc(1 << 16)
        pd = media.dvpp_create_pic_desc()
        media.dvpp_set_pic_desc_data(pd, outbuf)
        media.dvpp_set_pic_desc_size(pd, 1 << 16)
        ret = media.vdec_send_frame(desc, sd, pd, 0, i + 1)
        if ret:
            lines.append(f"send {i}: {ret}")
    if destroy:
        lines.append(f"before destroy, pictures {count[0]}")
    else:
        eos = media.dvpp_create_stream_desc()
        media.dvpp_set_stream_desc_eos(eos, 1)
        ret = media.vdec_send_frame(desc, eos, 0, 0, 0)
        lines.append(f"eos {ret} ({media.dvpp_get_stream_desc_eos(eos)}), pictures {count[0]}")
        media.dvpp_destroy_stream_desc(eos)
    d1 = media.vdec_destroy_channel(desc)
    lines.append(f"destroy {d1} {media.vdec_destroy_channel_desc(desc)}, pictures {count[0]}")
    run[0] = False
    thread.join()
    media.dvpp_free(inbuf)
    acl.rt.free_host(clip_host)
    acl.rt.free_host(host)
    acl.rt.destroy_context(context)
    acl.rt.reset_device(0)
    acl.finalize()
    return "\n".join(lines) + "\n"


def nv12_planes(buf: bytes, w: int, h: int, ws: int, hs: int) -> tuple:
    a = np.frombuffer(buf, np.uint8)
    y = a[:ws * hs].reshape(hs, ws)[:h, :w]
    uv = a[ws * hs:ws * hs * 3 // 2].reshape(hs // 2, ws // 2, 2)[:h // 2, :w // 2]
    return y, uv[:, :, 0], uv[:, :, 1]


@pytest.mark.parametrize("codec, entype, bframes, end", [
    ("libx264", 2, 2, "eos"), ("libx265", 0, 0, "eos"), ("libx264", 3, 2, "destroy")],
    ids=["h264", "h265", "h264-destroy"])
def test_a_vdec_program_decodes_a_clip_as_its_pyacl_twin_and_pyav_do(toolkit, tmp_path, codec,
                                                                    entype, bframes, end):
    """The vdec sample's flow in C++: a channel on a report thread, one stream and picture
    description per frame, the callback copying each picture back and releasing what it was
    handed; then eos (or, as the vdec sample does, aclvdecDestroyChannel with no eos: the
    frames still inside reach the callback before it returns). Every frame reaches the
    callback once, in display order (H.264 with B-frames reorders), each picture equal to
    PyAV's decode of the same bytes, and the run matches its pyACL twin (output, tasks,
    log)."""
    w, h, n = 160, 128, 6
    _, clips = video()
    packets = clips.encode(codec, clips.source_frames(n, w, h, seed=entype), lossless=False,
                           bframes=bframes)
    assert len(packets) == n
    clip = clip_file(tmp_path / "clip.bin", packets)
    out_c, out_py = tmp_path / "c", tmp_path / "py"
    out_c.mkdir()
    out_py.mkdir()
    exe = build(toolkit, tmp_path, VDEC_CPP, "vdec", cpp=True)
    args = [str(clip), str(entype), str(out_c)] + (["destroy"] if end == "destroy" else [])
    code, out = run_here(toolkit, exe, tmp_path, args)
    native = record(session.current_runtime())
    expected, python = twin(lambda acl: vdec_twin(acl, clip.read_bytes(), entype, out_py,
                                                  end == "destroy"))
    assert code == 0, out
    assert out == expected
    assert out.startswith(f"set 0 0 0 0 0\nget 3 tid callback {entype} 1 mode 0\ncreate 0\n")
    if end == "eos":
        assert f"eos 0 (1), pictures {n}\ndestroy 0 0, pictures {n}\n" in out
    else:                          # B-frames: the last pictures come out at the end
        held = int(re.search(r"before destroy, pictures (\d+)", out).group(1))
        assert held < n and f"destroy 0 0, pictures {n}\n" in out
    assert native == python
    reference = clips.pyav_decode({"libx264": "h264", "libx265": "hevc"}[codec], packets)
    assert len(reference) == n
    for k in range(n):
        assert f"picture {k}: frame {k + 1} ts {1000 + k} ret 0 160x128 strides 160x128" in out
        got = nv12_planes((out_c / f"pic{k}.yuv").read_bytes(), w, h, 160, 128)
        for a, b in zip(got, reference[k], strict=True):
            np.testing.assert_array_equal(a, b)
    names = [t.name for t in session.current_runtime().tasks]
    assert names.count("HostCallback") >= n, names


# -- VENC ----------------------------------------------------------------------------------------

VENC_CPP = r"""
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>
#include <pthread.h>
#include "acl/acl.h"
#include "acl/ops/acl_dvpp.h"
""" + DIGEST_C + r"""
static std::atomic<bool> g_run(true), g_ready(false);
static aclrtContext g_context;
static void *g_host = nullptr;
static FILE *g_stream = nullptr;
static std::vector<acldvppPicDesc *> g_pictures;
static int g_packets = 0;

static void *ProcessReport(void *)
{
    aclrtSetCurrentContext(g_context);
    g_ready = true;
    while (g_run) {
        (void)aclrtProcessReport(100);
    }
    return nullptr;
}

static void Callback(acldvppPicDesc *input, acldvppStreamDesc *output, void *userData)
{
    long user = static_cast<long>(reinterpret_cast<intptr_t>(userData));
    uint32_t ret = acldvppGetStreamDescRetCode(output);
    uint32_t size = acldvppGetStreamDescSize(output);
    int format = static_cast<int>(acldvppGetStreamDescFormat(output));
    unsigned long long ts = acldvppGetStreamDescTimestamp(output);
    void *data = acldvppGetStreamDescData(output);
    aclrtMemcpy(g_host, 1 << 20, data, size, ACL_MEMCPY_DEVICE_TO_HOST);
    fwrite(g_host, 1, size, g_stream);
    bool own = user >= 1 && user <= static_cast<long>(g_pictures.size())
               && g_pictures[user - 1] == input;
    printf("packet %d: picture %ld (%s) ts %llu ret %u format %d size %u sum %016llx\n",
           g_packets, user, own ? "own" : "other", ts, ret, format, size,
           static_cast<unsigned long long>(Digest(static_cast<unsigned char *>(g_host), size)));
    g_packets++;
}

int main(int argc, char **argv)
{
    const uint32_t w = 128, h = 128, frameSize = w * h * 3 / 2;
    FILE *f = fopen(argv[1], "rb");
    fseek(f, 0, SEEK_END);
    long total = ftell(f);
    fseek(f, 0, SEEK_SET);
    int frames = static_cast<int>(total / frameSize);
    int entype = atoi(argv[2]);
    g_stream = fopen(argv[3], "wb");
    aclInit(nullptr);
    aclrtSetDevice(0);
    aclrtCreateContext(&g_context, 0);
    void *yuv = nullptr;
    aclrtMallocHost(&yuv, total);
    aclrtMallocHost(&g_host, 1 << 20);
    if (fread(yuv, 1, total, f) != static_cast<size_t>(total)) return 1;
    fclose(f);
    pthread_t tid;
    pthread_create(&tid, nullptr, ProcessReport, nullptr);
    while (!g_ready) {
    }
    aclvencChannelDesc *desc = aclvencCreateChannelDesc();
    int s1 = aclvencSetChannelDescThreadId(desc, static_cast<uint64_t>(tid));
    int s2 = aclvencSetChannelDescCallback(desc, Callback);
    int s3 = aclvencSetChannelDescEnType(desc, static_cast<acldvppStreamFormat>(entype));
    int s4 = aclvencSetChannelDescPicFormat(desc, PIXEL_FORMAT_YUV_SEMIPLANAR_420);
    int s5 = aclvencSetChannelDescPicWidth(desc, w);
    int s6 = aclvencSetChannelDescPicHeight(desc, h);
    int s7 = aclvencSetChannelDescKeyFrameInterval(desc, 4);
    int s8 = aclvencSetChannelDescSrcRate(desc, 25);
    printf("set %d %d %d %d %d %d %d %d\n", s1, s2, s3, s4, s5, s6, s7, s8);
    bool sameTid = aclvencGetChannelDescThreadId(desc) == static_cast<uint64_t>(tid);
    bool sameCallback = aclvencGetChannelDescCallback(desc) == Callback;
    int gotType = static_cast<int>(aclvencGetChannelDescEnType(desc));
    int gotFormat = static_cast<int>(aclvencGetChannelDescPicFormat(desc));
    uint32_t gw = aclvencGetChannelDescPicWidth(desc), gh = aclvencGetChannelDescPicHeight(desc);
    uint32_t key = aclvencGetChannelDescKeyFrameInterval(desc);
    uint32_t rate = aclvencGetChannelDescSrcRate(desc);
    uint32_t buf = aclvencGetChannelDescBufSize(desc);
    printf("get %s %s %d %d %ux%u key %u rate %u buf %u\n", sameTid ? "tid" : "other",
           sameCallback ? "callback" : "other", gotType, gotFormat, gw, gh, key, rate, buf);
    printf("create %d\n", aclvencCreateChannel(desc));
    aclvencFrameConfig *config = aclvencCreateFrameConfig();
    std::vector<void *> buffers;
    for (int i = 0; i < frames; i++) {
        void *dev = nullptr;
        acldvppMalloc(&dev, frameSize);
        aclrtMemcpy(dev, frameSize, static_cast<unsigned char *>(yuv) + i * frameSize,
                    frameSize, ACL_MEMCPY_HOST_TO_DEVICE);
        buffers.push_back(dev);
        acldvppPicDesc *pic = acldvppCreatePicDesc();
        acldvppSetPicDescData(pic, dev);
        acldvppSetPicDescSize(pic, frameSize);
        acldvppSetPicDescFormat(pic, PIXEL_FORMAT_YUV_SEMIPLANAR_420);
        acldvppSetPicDescWidth(pic, w);
        acldvppSetPicDescHeight(pic, h);
        acldvppSetPicDescWidthStride(pic, w);
        acldvppSetPicDescHeightStride(pic, h);
        g_pictures.push_back(pic);
        aclvencSetFrameConfigForceIFrame(config, i == 2 ? 1 : 0);
        aclError ret = aclvencSendFrame(desc, pic, nullptr, config,
                                        reinterpret_cast<void *>(static_cast<intptr_t>(i + 1)));
        if (ret != ACL_SUCCESS) printf("send %d: %d\n", i, ret);
    }
    int e1 = aclvencSetFrameConfigEos(config, 1);
    int e2 = aclvencSetFrameConfigForceIFrame(config, 0);
    unsigned flags = aclvencGetFrameConfigEos(config) * 10u;
    flags += aclvencGetFrameConfigForceIFrame(config);
    aclError eos = aclvencSendFrame(desc, nullptr, nullptr, config, nullptr);
    printf("eos %d %d %02u %d, packets %d\n", e1, e2, flags, eos, g_packets);
    aclError d1 = aclvencDestroyChannel(desc);
    aclError d2 = aclvencDestroyChannelDesc(desc);
    printf("destroy %d %d %d\n", d1, d2, aclvencDestroyFrameConfig(config));
    g_run = false;
    pthread_join(tid, nullptr);
    fclose(g_stream);
    for (size_t i = 0; i < buffers.size(); i++) {
        acldvppDestroyPicDesc(g_pictures[i]);
        acldvppFree(buffers[i]);
    }
    aclrtFreeHost(yuv);
    aclrtFreeHost(g_host);
    aclrtDestroyContext(g_context);
    aclrtResetDevice(0);
    aclFinalize();
    return 0;
}
"""


def venc_twin(acl, yuv: bytes, entype: int, out: Path):
    media = acl.media
    w = h = 128
    frame_size = w * h * 3 // 2
    lines, pictures, packets = [], [], [0]
    stream = open(out, "wb")  # noqa: SIM115 (closed at the program's end, as the C's)
    acl.init()
    acl.rt.set_device(0)
    context, _ = acl.rt.create_context(0)
    yuv_host, _ = acl.rt.malloc_host(len(yuv))
    host, _ = acl.rt.malloc_host(1 << 20)
    pinned_write(yuv_host, yuv)
    run, ready = [True], threading.Event()

    def process():
        acl.rt.set_context(context)
        ready.set()
        while run[0]:
            acl.rt.process_report(100)

    def callback(input_, output, user):
        ret = media.dvpp_get_stream_desc_ret_code(output)
        size = media.dvpp_get_stream_desc_size(output)
        fmt = media.dvpp_get_stream_desc_format(output)
        ts = media.dvpp_get_stream_desc_timestamp(output)
        data = media.dvpp_get_stream_desc_data(output)
        acl.rt.memcpy(host, 1 << 20, data, size, C.ACL_MEMCPY_DEVICE_TO_HOST)
        packet = pinned_read(host, size)
        stream.write(packet)
        own = 1 <= user <= len(pictures) and pictures[user - 1] == input_
        lines.append(f"packet {packets[0]}: picture {user} ({'own' if own else 'other'}) ts "
                     f"{ts} ret {ret} format {fmt} size {size} sum {digest(packet):016x}")
        packets[0] += 1

    thread = threading.Thread(target=process)
    thread.start()
    ready.wait()
    desc = media.venc_create_channel_desc()
    sets = (media.venc_set_channel_desc_thread_id(desc, thread.ident),
            media.venc_set_channel_desc_callback(desc, callback),
            media.venc_set_channel_desc_entype(desc, entype),
            media.venc_set_channel_desc_pic_format(desc, NV12),
            media.venc_set_channel_desc_pic_width(desc, w),
            media.venc_set_channel_desc_pic_height(desc, h),
            media.venc_set_channel_desc_key_frame_interval(desc, 4),
            media.venc_set_channel_desc_src_rate(desc, 25))
    lines.append("set " + " ".join(map(str, sets)))
    tid = media.venc_get_channel_desc_thread_id(desc)
    cb = media.venc_get_channel_desc_callback(desc)
    got = (media.venc_get_channel_desc_entype(desc), media.venc_get_channel_desc_pic_format(desc),
           media.venc_get_channel_desc_pic_width(desc),
           media.venc_get_channel_desc_pic_height(desc),
           media.venc_get_channel_desc_key_frame_interval(desc),
           media.venc_get_channel_desc_src_rate(desc), media.venc_get_channel_desc_buf_size(desc))
    lines.append(f"get {'tid' if tid == thread.ident else 'other'} "
                 f"{'callback' if cb is callback else 'other'} {got[0]} {got[1]} "
                 f"{got[2]}x{got[3]} key {got[4]} rate {got[5]} buf {got[6]}")
    lines.append(f"create {media.venc_create_channel(desc)}")
    config = media.venc_create_frame_config()
    buffers = []
    for i in range(len(yuv) // frame_size):
        dev, _ = media.dvpp_malloc(frame_size)
        acl.rt.memcpy(dev, frame_size, yuv_host + i * frame_size, frame_size,
                      C.ACL_MEMCPY_HOST_TO_DEVICE)
        buffers.append(dev)
        pic = media.dvpp_create_pic_desc()
        for field, value in (("data", dev), ("size", frame_size), ("format", NV12),
                             ("width", w), ("height", h), ("width_stride", w),
                             ("height_stride", h)):
            getattr(media, f"dvpp_set_pic_desc_{field}")(pic, value)
        pictures.append(pic)
        media.venc_set_frame_config_force_i_frame(config, 1 if i == 2 else 0)
        ret = media.venc_send_frame(desc, pic, 0, config, i + 1)
        if ret:
            lines.append(f"send {i}: {ret}")
    e1 = media.venc_set_frame_config_eos(config, 1)
    e2 = media.venc_set_frame_config_force_i_frame(config, 0)
    flags = (media.venc_get_frame_config_eos(config) * 10
             + media.venc_get_frame_config_force_i_frame(config))
    eos = media.venc_send_frame(desc, 0, 0, config, 0)
    lines.append(f"eos {e1} {e2} {flags:02d} {eos}, packets {packets[0]}")
    d1 = media.venc_destroy_channel(desc)
    d2 = media.venc_destroy_channel_desc(desc)
    lines.append(f"destroy {d1} {d2} {media.venc_destroy_frame_config(config)}")
    run[0] = False
    thread.join()
    stream.close()
    for pic, dev in zip(pictures, buffers, strict=True):
        media.dvpp_destroy_pic_desc(pic)
        media.dvpp_free(dev)
    acl.rt.free_host(yuv_host)
    acl.rt.free_host(host)
    acl.rt.destroy_context(context)
    acl.rt.reset_device(0)
    acl.finalize()
    return "\n".join(lines) + "\n"


def nv12_bytes(y, u, v) -> bytes:
    return y.tobytes() + np.stack([u, v], axis=-1).tobytes()


@pytest.mark.parametrize("entype, codec", [(2, "h264"), (0, "hevc")], ids=["h264", "h265"])
def test_a_venc_program_encodes_nv12_frames_to_a_stream_pyav_decodes(toolkit, tmp_path, entype,
                                                                   codec):
    """The venc sample's flow in C++: a channel on a report thread, a picture description per
    NV12 frame, a forced I-frame, then eos through the frame configuration. Each picture
    reaches the callback with its own description and a stream description VENC made; the
    packets written out decode with PyAV to the frames sent (PSNR above 30 dB), and the run
    matches its pyACL twin (the same packets, tasks and log)."""
    n = 5
    av, clips = video()
    frames = clips.source_frames(n, 128, 128, seed=7)
    yuv = tmp_path / "frames.yuv"
    yuv.write_bytes(b"".join(nv12_bytes(*f) for f in frames))
    exe = build(toolkit, tmp_path, VENC_CPP, "venc", cpp=True)
    code, out = run_here(toolkit, exe, tmp_path, [str(yuv), str(entype), str(tmp_path / "c.bin")])
    native = record(session.current_runtime())
    expected, python = twin(lambda acl: venc_twin(acl, yuv.read_bytes(), entype,
                                                  tmp_path / "py.bin"))
    assert code == 0, out
    assert out == expected
    assert out.startswith("set 0 0 0 0 0 0 0 0\n"
                          f"get tid callback {entype} 1 128x128 key 4 rate 25 buf 0\ncreate 0\n")
    assert f"eos 0 0 10 0, packets {n}\ndestroy 0 0 0\n" in out
    for k in range(n):
        assert f"packet {k}: picture {k + 1} (own) ts {k} ret 0 format {entype} size " in out
    assert native == python
    data = (tmp_path / "c.bin").read_bytes()
    assert data == (tmp_path / "py.bin").read_bytes() and len(data) > 100
    dec = av.CodecContext.create(codec, "r")
    parsed = dec.parse(data) + dec.parse(None)          # the whole stream, then its end
    pictures = [f for p in parsed for f in dec.decode(p)] + list(dec.decode(None))
    assert len(pictures) == n
    for pic, (y, _u, _v) in zip(pictures, frames, strict=True):
        got = np.frombuffer(bytes(pic.planes[0]), np.uint8).reshape(-1, pic.planes[0].line_size)
        err = np.mean((got[:128, :128].astype(float) - y) ** 2)
        assert 10 * np.log10(255 ** 2 / max(err, 1e-9)) > 30


# -- batch VPC and bad input ---------------------------------------------------------------------

BATCH_C = r"""
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include "acl/acl.h"
#include "acl/ops/acl_dvpp.h"
""" + DIGEST_C + r"""
#define SHOW(label, call) printf("%s -> %d\n", label, (int)(call))

static void SetPicture(acldvppPicDesc *pic, void *data, uint32_t w, uint32_t h)
{
    acldvppSetPicDescData(pic, data);
    acldvppSetPicDescSize(pic, w * h * 3 / 2);
    acldvppSetPicDescFormat(pic, PIXEL_FORMAT_YUV_SEMIPLANAR_420);
    acldvppSetPicDescWidth(pic, w);
    acldvppSetPicDescHeight(pic, h);
    acldvppSetPicDescWidthStride(pic, w);
    acldvppSetPicDescHeightStride(pic, h);
}

int main(int argc, char **argv)
{
    const uint32_t inSize = 64 * 48 * 3 / 2;
    FILE *f = fopen(argv[1], "rb");
    aclInit(NULL);
    aclrtSetDevice(0);
    aclrtStream stream;
    aclrtCreateStream(&stream);
    unsigned char *host;
    aclrtMallocHost((void **)&host, 1 << 16);
    if (fread(host, 1, 2 * inSize, f) != 2 * inSize) return 1;
    fclose(f);
    acldvppChannelDesc *channel = acldvppCreateChannelDesc();
    SHOW("channel", acldvppCreateChannel(channel));
    acldvppBatchPicDesc *in = acldvppCreateBatchPicDesc(2);
    acldvppBatchPicDesc *out = acldvppCreateBatchPicDesc(3);
    acldvppBatchPicDesc *canvas = acldvppCreateBatchPicDesc(3);
    void *inBuf[2], *outBuf[3], *canvasBuf[3];
    for (int i = 0; i < 2; i++) {
        acldvppMalloc(&inBuf[i], inSize);
        aclrtMemcpy(inBuf[i], inSize, host + i * inSize, inSize, ACL_MEMCPY_HOST_TO_DEVICE);
        SetPicture(acldvppGetPicDesc(in, i), inBuf[i], 64, 48);
    }
    for (int i = 0; i < 3; i++) {
        acldvppMalloc(&outBuf[i], 32 * 32 * 3 / 2);
        SetPicture(acldvppGetPicDesc(out, i), outBuf[i], 32, 32);
        acldvppMalloc(&canvasBuf[i], 64 * 64 * 3 / 2);
        aclrtMemset(canvasBuf[i], 64 * 64 * 3 / 2, 0x40 + i, 64 * 64 * 3 / 2);
        SetPicture(acldvppGetPicDesc(canvas, i), canvasBuf[i], 64, 64);
    }
    uint32_t roiNums[2] = {2, 1};
    acldvppRoiConfig *crops[3], *pastes[3];
    crops[0] = acldvppCreateRoiConfig(0, 31, 0, 31);
    crops[1] = acldvppCreateRoiConfig(16, 47, 8, 39);
    crops[2] = acldvppCreateRoiConfig(10, 57, 4, 43);
    for (int i = 0; i < 3; i++) pastes[i] = acldvppCreateRoiConfig(16, 47, 16 * i, 16 * i + 31);
    SHOW("batch crop", acldvppVpcBatchCropAsync(channel, in, roiNums, 2, out, crops, stream));
    SHOW("batch crop and paste", acldvppVpcBatchCropAndPasteAsync(channel, in, roiNums, 2, canvas,
                                                                  crops, pastes, stream));
    SHOW("sync", aclrtSynchronizeStream(stream));
    uint64_t sums[3][2];
    for (int i = 0; i < 3; i++) {
        aclrtMemcpy(host, 1 << 16, outBuf[i], 32 * 32 * 3 / 2, ACL_MEMCPY_DEVICE_TO_HOST);
        sums[i][0] = Digest(host, 32 * 32 * 3 / 2);
        aclrtMemcpy(host, 1 << 16, canvasBuf[i], 64 * 64 * 3 / 2, ACL_MEMCPY_DEVICE_TO_HOST);
        sums[i][1] = Digest(host, 64 * 64 * 3 / 2);
    }
    /* the same crops, resized with nearest neighbour (Ascend's batchcrop sample's call) */
    acldvppResizeConfig *nearest = acldvppCreateResizeConfig();
    SHOW("nearest", acldvppSetResizeConfigInterpolation(nearest, 2));
    SHOW("batch crop resize", acldvppVpcBatchCropResizeAsync(channel, in, roiNums, 2, out, crops,
                                                             nearest, stream));
    SHOW("batch crop resize paste", acldvppVpcBatchCropResizePasteAsync(
        channel, in, roiNums, 2, canvas, crops, pastes, nearest, stream));
    SHOW("sync", aclrtSynchronizeStream(stream));
    for (int i = 0; i < 3; i++) {
        aclrtMemcpy(host, 1 << 16, outBuf[i], 32 * 32 * 3 / 2, ACL_MEMCPY_DEVICE_TO_HOST);
        uint64_t c = Digest(host, 32 * 32 * 3 / 2);
        aclrtMemcpy(host, 1 << 16, canvasBuf[i], 64 * 64 * 3 / 2, ACL_MEMCPY_DEVICE_TO_HOST);
        printf("picture %d: %016llx %016llx %016llx %016llx ret %u\n", i,
               (unsigned long long)sums[i][0], (unsigned long long)sums[i][1],
               (unsigned long long)c, (unsigned long long)Digest(host, 64 * 64 * 3 / 2),
               acldvppGetPicDescRetCode(acldvppGetPicDesc(out, i)));
    }

    /* what pyACL refuses, C refuses with the same code */
    uint32_t wrongSum[2] = {2, 2};
    SHOW("sum 4 for 3 pictures", acldvppVpcBatchCropAsync(channel, in, wrongSum, 2, out, crops,
                                                          stream));
    SHOW("roiNums NULL", acldvppVpcBatchCropAsync(channel, in, NULL, 2, out, crops, stream));
    SHOW("cropAreas NULL", acldvppVpcBatchCropAsync(channel, in, roiNums, 2, out, NULL, stream));
    SHOW("pasteAreas NULL", acldvppVpcBatchCropAndPasteAsync(channel, in, roiNums, 2, canvas,
                                                             crops, NULL, stream));
    SHOW("size 1 of 2", acldvppVpcBatchCropAsync(channel, in, roiNums, 1, out, crops, stream));
    SHOW("size 300", acldvppVpcBatchCropAsync(channel, in, roiNums, 300, out, crops, stream));
    SHOW("resize config NULL", acldvppVpcBatchCropResizeAsync(channel, in, roiNums, 2, out, crops,
                                                              NULL, stream));
    SHOW("batch 0", acldvppCreateBatchPicDesc(0) == NULL);
    SHOW("batch 257", acldvppCreateBatchPicDesc(257) == NULL);
    SHOW("index 3", acldvppGetPicDesc(out, 3) == NULL);
    SHOW("owned picture", acldvppDestroyPicDesc(acldvppGetPicDesc(out, 0)));

    acldvppStreamDesc *sd = acldvppCreateStreamDesc();
    SHOW("eos 2", acldvppSetStreamDescEos(sd, 2));
    SHOW("format 7", acldvppSetStreamDescFormat(sd, (acldvppStreamFormat)7));
    SHOW("ret code", acldvppSetStreamDescRetCode(sd, 5));
    SHOW("get ret code", acldvppGetStreamDescRetCode(sd));
    SHOW("size of NULL", acldvppSetStreamDescSize(NULL, 4));
    SHOW("get size of NULL", acldvppGetStreamDescSize(NULL));
    SHOW("pic ret code", acldvppSetPicDescRetCode(acldvppGetPicDesc(out, 1), 7));
    SHOW("get pic ret code", acldvppGetPicDescRetCode(acldvppGetPicDesc(out, 1)));

    aclvdecChannelDesc *vdec = aclvdecCreateChannelDesc();
    SHOW("vdec no callback", aclvdecCreateChannel(vdec));
    SHOW("vdec NULL callback", aclvdecSetChannelDescCallback(vdec, NULL));
    SHOW("vdec RGB out", aclvdecSetChannelDescOutPicFormat(vdec, PIXEL_FORMAT_RGB_888));
    SHOW("vdec ref frames", aclvdecSetChannelDescRefFrameNum(vdec, 4));
    SHOW("vdec out mode 2", aclvdecSetChannelDescOutMode(vdec, 2));
    SHOW("vdec entype 9", aclvdecSetChannelDescEnType(vdec, (acldvppStreamFormat)9));
    SHOW("vdec send, no channel", aclvdecSendFrame(vdec, sd, NULL, NULL, NULL));
    SHOW("vdec id 40", aclvdecSetChannelDescChannelId(vdec, 40));
    SHOW("vdec thread", aclvdecSetChannelDescThreadId(vdec, (uint64_t)pthread_self()));
    SHOW("vdec get thread", aclvdecGetChannelDescThreadId(vdec) == (uint64_t)pthread_self());
    SHOW("vdec get callback", aclvdecGetChannelDescCallback(vdec) == NULL);
    SHOW("vdec get NULL", aclvdecGetChannelDescChannelId(NULL));
    SHOW("vdec destroy, no channel", aclvdecDestroyChannel(vdec));
    SHOW("vdec destroy desc", aclvdecDestroyChannelDesc(vdec));
    SHOW("vdec destroy desc again", aclvdecDestroyChannelDesc(vdec));

    aclvencChannelDesc *venc = aclvencCreateChannelDesc();
    aclvencFrameConfig *config = aclvencCreateFrameConfig();
    SHOW("venc width 64", aclvencSetChannelDescPicWidth(venc, 64));
    SHOW("venc thread", aclvencSetChannelDescThreadId(venc, (uint64_t)pthread_self()));
    SHOW("venc no callback", aclvencCreateChannel(venc));
    SHOW("venc RGB", aclvencSetChannelDescPicFormat(venc, PIXEL_FORMAT_RGB_888));
    SHOW("venc rc mode 3", aclvencSetChannelDescRcMode(venc, 3));
    SHOW("venc eos 2", aclvencSetFrameConfigEos(config, 2));
    SHOW("venc force 1", aclvencSetFrameConfigForceIFrame(config, 1));
    SHOW("venc get force", aclvencGetFrameConfigForceIFrame(config));
    SHOW("venc send, no channel", aclvencSendFrame(venc, acldvppGetPicDesc(out, 0), NULL,
                                                   config, NULL));
    SHOW("venc destroy config", aclvencDestroyFrameConfig(config));
    SHOW("venc destroy desc", aclvencDestroyChannelDesc(venc));

    SHOW("destroy stream desc", acldvppDestroyStreamDesc(sd));
    for (int i = 0; i < 3; i++) {
        acldvppDestroyRoiConfig(crops[i]);
        acldvppDestroyRoiConfig(pastes[i]);
        acldvppFree(outBuf[i]);
        acldvppFree(canvasBuf[i]);
    }
    for (int i = 0; i < 2; i++) acldvppFree(inBuf[i]);
    SHOW("destroy batches", acldvppDestroyBatchPicDesc(in) + acldvppDestroyBatchPicDesc(out)
                            + acldvppDestroyBatchPicDesc(canvas));
    acldvppDestroyResizeConfig(nearest);
    acldvppDestroyChannel(channel);
    acldvppDestroyChannelDesc(channel);
    aclrtFreeHost(host);
    aclrtDestroyStream(stream);
    aclrtResetDevice(0);
    aclFinalize();
    return 0;
}
"""


def batch_twin(acl, pictures: bytes):
    media = acl.media
    lines = []
    in_size = 64 * 48 * 3 // 2

    def show(label, value):
        lines.append(f"{label} -> {int(value)}")

    def refused(fn, *args):
        """pyACL raises TypeError for a malformed argument (None for a list, a callback):
        the C function's NULL, which it returns as ACL_ERROR_INVALID_PARAM."""
        try:
            ret = fn(*args)
        except TypeError:
            return 100000
        return ret[-1] if isinstance(ret, tuple) else ret

    def set_picture(pic, data, w, h):
        for field, value in (("data", data), ("size", w * h * 3 // 2), ("format", NV12),
                             ("width", w), ("height", h), ("width_stride", w),
                             ("height_stride", h)):
            getattr(media, f"dvpp_set_pic_desc_{field}")(pic, value)

    acl.init()
    acl.rt.set_device(0)
    stream, _ = acl.rt.create_stream()
    host, _ = acl.rt.malloc_host(1 << 16)
    pinned_write(host, pictures[:2 * in_size])
    channel = media.dvpp_create_channel_desc()
    show("channel", media.dvpp_create_channel(channel))
    inp = media.dvpp_create_batch_pic_desc(2)
    out = media.dvpp_create_batch_pic_desc(3)
    canvas = media.dvpp_create_batch_pic_desc(3)
    in_buf, out_buf, canvas_buf = [], [], []
    for i in range(2):
        in_buf.append(media.dvpp_malloc(in_size)[0])
        acl.rt.memcpy(in_buf[i], in_size, host + i * in_size, in_size,
                      C.ACL_MEMCPY_HOST_TO_DEVICE)
        set_picture(media.dvpp_get_pic_desc(inp, i), in_buf[i], 64, 48)
    for i in range(3):
        out_buf.append(media.dvpp_malloc(32 * 32 * 3 // 2)[0])
        set_picture(media.dvpp_get_pic_desc(out, i), out_buf[i], 32, 32)
        canvas_buf.append(media.dvpp_malloc(64 * 64 * 3 // 2)[0])
        acl.rt.memset(canvas_buf[i], 64 * 64 * 3 // 2, 0x40 + i, 64 * 64 * 3 // 2)
        set_picture(media.dvpp_get_pic_desc(canvas, i), canvas_buf[i], 64, 64)
    rois = [2, 1]
    crops = [media.dvpp_create_roi_config(0, 31, 0, 31),
             media.dvpp_create_roi_config(16, 47, 8, 39),
             media.dvpp_create_roi_config(10, 57, 4, 43)]
    pastes = [media.dvpp_create_roi_config(16, 47, 16 * i, 16 * i + 31) for i in range(3)]
    show("batch crop", media.dvpp_vpc_batch_crop_async(channel, inp, rois, out, crops,
                                                       stream)[-1])
    show("batch crop and paste", media.dvpp_vpc_batch_crop_and_paste_async(
        channel, inp, rois, canvas, crops, pastes, stream)[-1])
    show("sync", acl.rt.synchronize_stream(stream))
    sums = []
    for i in range(3):
        acl.rt.memcpy(host, 1 << 16, out_buf[i], 32 * 32 * 3 // 2, C.ACL_MEMCPY_DEVICE_TO_HOST)
        a = digest(pinned_read(host, 32 * 32 * 3 // 2))
        acl.rt.memcpy(host, 1 << 16, canvas_buf[i], 64 * 64 * 3 // 2,
                      C.ACL_MEMCPY_DEVICE_TO_HOST)
        sums.append((a, digest(pinned_read(host, 64 * 64 * 3 // 2))))
    nearest = media.dvpp_create_resize_config()
    show("nearest", media.dvpp_set_resize_config_interpolation(nearest, 2))
    show("batch crop resize", media.dvpp_vpc_batch_crop_resize_async(channel, inp, rois, out,
                                                                     crops, nearest, stream))
    show("batch crop resize paste", media.dvpp_vpc_batch_crop_resize_paste_async(
        channel, inp, rois, canvas, crops, pastes, nearest, stream))
    show("sync", acl.rt.synchronize_stream(stream))
    for i in range(3):
        acl.rt.memcpy(host, 1 << 16, out_buf[i], 32 * 32 * 3 // 2, C.ACL_MEMCPY_DEVICE_TO_HOST)
        c = digest(pinned_read(host, 32 * 32 * 3 // 2))
        acl.rt.memcpy(host, 1 << 16, canvas_buf[i], 64 * 64 * 3 // 2,
                      C.ACL_MEMCPY_DEVICE_TO_HOST)
        d = digest(pinned_read(host, 64 * 64 * 3 // 2))
        ret = media.dvpp_get_pic_desc_ret_code(media.dvpp_get_pic_desc(out, i))
        lines.append(f"picture {i}: {sums[i][0]:016x} {sums[i][1]:016x} {c:016x} {d:016x} "
                     f"ret {ret}")

    crop = media.dvpp_vpc_batch_crop_async
    show("sum 4 for 3 pictures", crop(channel, inp, [2, 2], out, [], stream)[-1])
    show("roiNums NULL", refused(crop, channel, inp, None, out, [], stream))
    show("cropAreas NULL", refused(crop, channel, inp, rois, out, None, stream))
    show("pasteAreas NULL", refused(media.dvpp_vpc_batch_crop_and_paste_async,
                                    channel, inp, rois, canvas, crops, None, stream))
    show("size 1 of 2", crop(channel, inp, [2], out, crops[:2], stream)[-1])
    show("size 300", crop(channel, inp, [0] * 300, out, [], stream)[-1])
    show("resize config NULL", media.dvpp_vpc_batch_crop_resize_async(channel, inp, rois, out,
                                                                      crops, 0, stream))
    show("batch 0", media.dvpp_create_batch_pic_desc(0) == 0)
    show("batch 257", media.dvpp_create_batch_pic_desc(257) == 0)
    show("index 3", media.dvpp_get_pic_desc(out, 3) == 0)
    show("owned picture", media.dvpp_destroy_pic_desc(media.dvpp_get_pic_desc(out, 0)))

    sd = media.dvpp_create_stream_desc()
    show("eos 2", media.dvpp_set_stream_desc_eos(sd, 2))
    show("format 7", media.dvpp_set_stream_desc_format(sd, 7))
    show("ret code", media.dvpp_set_stream_desc_ret_code(sd, 5))
    show("get ret code", media.dvpp_get_stream_desc_ret_code(sd))
    show("size of NULL", media.dvpp_set_stream_desc_size(0, 4))
    show("get size of NULL", media.dvpp_get_stream_desc_size(0))
    show("pic ret code", media.dvpp_set_pic_desc_ret_code(media.dvpp_get_pic_desc(out, 1), 7))
    show("get pic ret code", media.dvpp_get_pic_desc_ret_code(media.dvpp_get_pic_desc(out, 1)))

    me = threading.get_ident()
    vdec = media.vdec_create_channel_desc()
    show("vdec no callback", media.vdec_create_channel(vdec))
    show("vdec NULL callback", refused(media.vdec_set_channel_desc_callback, vdec, None))
    show("vdec RGB out", media.vdec_set_channel_desc_out_pic_format(vdec, 12))
    show("vdec ref frames", media.vdec_set_channel_desc_ref_frame_num(vdec, 4))
    show("vdec out mode 2", media.vdec_set_channel_desc_out_mode(vdec, 2))
    show("vdec entype 9", media.vdec_set_channel_desc_entype(vdec, 9))
    show("vdec send, no channel", media.vdec_send_frame(vdec, sd, 0, 0, 0))
    show("vdec id 40", media.vdec_set_channel_desc_channel_id(vdec, 40))
    show("vdec thread", media.vdec_set_channel_desc_thread_id(vdec, me))
    show("vdec get thread", media.vdec_get_channel_desc_thread_id(vdec) == me)
    show("vdec get callback", media.vdec_get_channel_desc_callback(vdec) is None)
    show("vdec get NULL", media.vdec_get_channel_desc_channel_id(0))
    show("vdec destroy, no channel", media.vdec_destroy_channel(vdec))
    show("vdec destroy desc", media.vdec_destroy_channel_desc(vdec))
    show("vdec destroy desc again", media.vdec_destroy_channel_desc(vdec))

    venc = media.venc_create_channel_desc()
    config = media.venc_create_frame_config()
    show("venc width 64", media.venc_set_channel_desc_pic_width(venc, 64))
    show("venc thread", media.venc_set_channel_desc_thread_id(venc, me))
    show("venc no callback", media.venc_create_channel(venc))
    show("venc RGB", media.venc_set_channel_desc_pic_format(venc, 12))
    show("venc rc mode 3", media.venc_set_channel_desc_rc_mode(venc, 3))
    show("venc eos 2", media.venc_set_frame_config_eos(config, 2))
    show("venc force 1", media.venc_set_frame_config_force_i_frame(config, 1))
    show("venc get force", media.venc_get_frame_config_force_i_frame(config))
    show("venc send, no channel", media.venc_send_frame(venc, media.dvpp_get_pic_desc(out, 0),
                                                        0, config, 0))
    show("venc destroy config", media.venc_destroy_frame_config(config))
    show("venc destroy desc", media.venc_destroy_channel_desc(venc))

    show("destroy stream desc", media.dvpp_destroy_stream_desc(sd))
    for i in range(3):
        media.dvpp_destroy_roi_config(crops[i])
        media.dvpp_destroy_roi_config(pastes[i])
        media.dvpp_free(out_buf[i])
        media.dvpp_free(canvas_buf[i])
    for buf in in_buf:
        media.dvpp_free(buf)
    show("destroy batches", media.dvpp_destroy_batch_pic_desc(inp)
         + media.dvpp_destroy_batch_pic_desc(out) + media.dvpp_destroy_batch_pic_desc(canvas))
    media.dvpp_destroy_resize_config(nearest)
    media.dvpp_destroy_channel(channel)
    media.dvpp_destroy_channel_desc(channel)
    acl.rt.free_host(host)
    acl.rt.destroy_stream(stream)
    acl.rt.reset_device(0)
    acl.finalize()
    return "\n".join(lines) + "\n"


def test_batch_crop_and_bad_input_match_the_pyacl_twin(toolkit, tmp_path):
    """Batch crop (2 + 1 areas from two pictures, resized to 32 x 32), batch crop and paste
    into 64 x 64 canvases and batch crop-resize (and crop-resize-paste) with nearest
    neighbour, in C, beside pyACL: the
    same pixels, tasks and log; then what pyACL
    refuses (roiNums that do not add up, NULL arrays, batch sizes and indices out of range,
    bad stream description values, VDEC and VENC settings the ascend310 profile refuses,
    calls on channels never created) gives the same codes in C."""
    rng = np.random.default_rng(5)
    pictures = rng.integers(0, 256, 2 * 64 * 48 * 3 // 2, np.uint8).tobytes()
    path = tmp_path / "pictures.yuv"
    path.write_bytes(pictures)
    exe = build(toolkit, tmp_path, BATCH_C, "batch")
    code, out = run_here(toolkit, exe, tmp_path, [str(path)])
    native = record(session.current_runtime())
    expected, python = twin(lambda acl: batch_twin(acl, pictures))
    assert code == 0, out
    assert out == expected
    shown = dict(line.split(" -> ") for line in out.splitlines() if " -> " in line)
    assert shown["batch crop"] == shown["batch crop and paste"] == shown["sync"] == "0"
    assert shown["batch crop resize"] == shown["batch crop resize paste"] == "0"
    for label in ("sum 4 for 3 pictures", "roiNums NULL", "cropAreas NULL", "pasteAreas NULL",
                  "size 1 of 2", "size 300", "resize config NULL", "owned picture", "eos 2",
                  "format 7", "size of NULL", "vdec no callback", "vdec NULL callback",
                  "vdec out mode 2", "vdec entype 9", "vdec send, no channel",
                  "vdec destroy, no channel", "vdec destroy desc again", "venc no callback",
                  "venc rc mode 3", "venc eos 2", "venc send, no channel"):
        assert shown[label] == "100000", label
    for label in ("vdec RGB out", "vdec ref frames", "venc RGB"):
        assert shown[label] == "200006", label
    for label in ("batch 0", "batch 257", "index 3", "vdec get thread", "vdec get callback",
                  "venc get force"):
        assert shown[label] == "1", label
    assert shown["get ret code"] == "5" and shown["get pic ret code"] == "7"
    assert shown["get size of NULL"] == shown["vdec get NULL"] == "0"
    digests = re.findall(r"picture \d: (\w+) (\w+) (\w+) (\w+) ret 0", out)
    assert len(digests) == 3 and len({d for row in digests for d in row[:2]}) == 6
    # unscaled areas (the first two) are the same either way; the scaled one is not
    assert [row[0] == row[2] for row in digests] == [True, True, False]
    assert [row[1] == row[3] for row in digests] == [True, True, False]
    assert native == python


CANCEL_CPP = r"""
#include <atomic>
#include <cstdio>
#include <pthread.h>
#include "acl/acl.h"

static std::atomic<bool> g_run(true), g_waiting(false);
static aclrtContext g_context;

static void *ProcessReport(void *)
{
    aclrtSetCurrentContext(g_context);
    while (g_run) {
        g_waiting = true;
        (void)aclrtProcessReport(200);
    }
    return nullptr;
}

int main()
{
    aclInit(nullptr);
    aclrtSetDevice(0);
    aclrtCreateContext(&g_context, 0);
    for (int round = 0; round < 3; round++) {
        g_run = true;
        g_waiting = false;
        pthread_t tid;
        pthread_create(&tid, nullptr, ProcessReport, nullptr);
        while (!g_waiting) {
        }
        /* as Ascend's venc sample ends its report thread: while it waits in a call */
        g_run = false;
        pthread_cancel(tid);
        void *res = nullptr;
        pthread_join(tid, &res);
        void *dev = nullptr;
        int m = aclrtMalloc(&dev, 4096, ACL_MEM_MALLOC_HUGE_FIRST);
        printf("round %d: %s, then %d %d\n", round,
               res == PTHREAD_CANCELED ? "cancelled" : "returned", m, aclrtFree(dev));
    }
    aclrtDestroyContext(g_context);
    int reset = aclrtResetDevice(0);
    printf("end %d %d\n", reset, aclFinalize());
    return 0;
}
"""


def test_a_report_thread_cancelled_inside_a_call_leaves_the_library_working(toolkit, tmp_path):
    """Ascend's venc sample ends its report thread with pthread_cancel while the thread waits
    in aclrtProcessReport. The call finishes first (it is no cancellation point), so the
    connection's lock and its reader are not lost with the thread: the other threads' calls go
    on working, round after round."""
    from acllab.native.run import run_program

    exe = build(toolkit, tmp_path, CANCEL_CPP, "cancel", cpp=True)
    acllab.reset()
    out = tmp_path / "stdout.txt"
    with open(out, "w") as f:
        code = run_program(str(exe), [], env=toolkit[1], stdout=f, timeout=30)
    text = out.read_text()
    assert code == 0, text
    lines = text.splitlines()
    assert len(lines) == 4 and lines[-1] == "end 0 0"
    for k, line in enumerate(lines[:3]):
        assert re.fullmatch(rf"round {k}: (cancelled|returned), then 0 0", line), line


def test_every_function_the_headers_declare_is_in_the_library(toolkit):
    """Each ACL_FUNC_VISIBILITY prototype of the shipped headers (acl_dvpp.h's video and batch
    calls among them) is a symbol libascendcl.so and libacl_dvpp.so define, so a program the
    headers compile also links and loads."""
    import ctypes

    latest, _ = toolkit
    text = "\n".join(p.read_text() for p in
                     (Path(latest) / "runtime" / "include" / "acl").rglob("*.h"))
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    names = set(re.findall(r"ACL_FUNC_VISIBILITY[^;{]*?\b(acl\w+)\s*\(", text))
    assert {"aclvdecSendFrame", "aclvencSendFrame", "acldvppCreateStreamDesc",
            "acldvppVpcBatchCropAsync", "aclvdecGetChannelDescCallback"} <= names
    assert len(names) > 250
    for lib in ("libascendcl.so", "libacl_dvpp.so"):
        so = ctypes.CDLL(str(Path(latest) / "runtime" / "lib64" / lib))
        missing = sorted(n for n in names if not hasattr(so, n))
        assert not missing, (lib, missing)
