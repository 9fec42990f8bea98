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

import os
import shutil
import struct
import threading
from pathlib import Path

import numpy as np
import pytest
from test_acl_media_vdec import encode, pyav_decode, source_frames
from test_native import build, record, run_here, twin

import acllab
from acllab import constants as C
from acllab import session

av = pytest.importorskip("av")

NV12 = 1

pytestmark = pytest.mark.skipif(shutil.which("gcc") is None or shutil.which("g++") is None,
                                reason="needs the system's gcc and g++")


@pytest.fixture(scope="module")
def toolkit(tmp_path_factory):
    """The toolkit tree, built once for this module in a cache of its own."""
    from acllab import native

    env = {**os.environ, "ACLLAB_CACHE": str(tmp_path_factory.mktemp("cache"))}
    env.pop("CC", None)
    env.pop("ACLLAB_CC", None)
    return native.toolkit(env), env


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
    acldvppStreamDesc *eos = acldvppCreateStreamDesc();
    acldvppSetStreamDescEos(eos, 1);
    aclError eosRet = aclvdecSendFrame(desc, eos, nullptr, nullptr, nullptr);
    printf("eos %d (%u), pictures %d\n", eosRet, acldvppGetStreamDescEos(eos), g_count);
    acldvppDestroyStreamDesc(eos);
    aclError d1 = aclvdecDestroyChannel(desc);
    printf("destroy %d %d\n", d1, aclvdecDestroyChannelDesc(desc));
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


def vdec_twin(acl, clip: bytes, entype: int, out: Path):
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
    eos = media.dvpp_create_stream_desc()
    media.dvpp_set_stream_desc_eos(eos, 1)
    ret = media.vdec_send_frame(desc, eos, 0, 0, 0)
    lines.append(f"eos {ret} ({media.dvpp_get_stream_desc_eos(eos)}), pictures {count[0]}")
    media.dvpp_destroy_stream_desc(eos)
    lines.append(f"destroy {media.vdec_destroy_channel(desc)} "
                 f"{media.vdec_destroy_channel_desc(desc)}")
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


@pytest.mark.parametrize("codec, entype, bframes", [("libx264", 2, 2), ("libx265", 0, 0)],
                         ids=["h264", "h265"])
def test_a_vdec_program_decodes_a_clip_as_its_pyacl_twin_and_pyav_do(toolkit, tmp_path, codec,
                                                                    entype, bframes):
    """The vdec sample's flow in C++: a channel on a report thread, one stream and picture
    description per frame, the callback copying each picture back and releasing what it was
    handed; then eos. Every frame reaches the callback once, in display order (H.264 with
    B-frames reorders), each picture equal to PyAV's decode of the same bytes, and the run
    matches its pyACL twin (output, tasks, log)."""
    w, h, n = 160, 128, 6
    packets = encode(codec, source_frames(n, w, h, seed=entype), lossless=False,
                     bframes=bframes)
    assert len(packets) == n
    clip = clip_file(tmp_path / "clip.bin", packets)
    out_c, out_py = tmp_path / "c", tmp_path / "py"
    out_c.mkdir()
    out_py.mkdir()
    exe = build(toolkit, tmp_path, VDEC_CPP, "vdec", cpp=True)
    code, out = run_here(toolkit, exe, tmp_path, [str(clip), str(entype), str(out_c)])
    native = record(session.current_runtime())
    expected, python = twin(lambda acl: vdec_twin(acl, clip.read_bytes(), entype, out_py))
    assert code == 0, out
    assert out == expected
    assert out.startswith(f"set 0 0 0 0 0\nget 3 tid callback {entype} 1 mode 0\ncreate 0\n")
    assert f"eos 0 (1), pictures {n}\ndestroy 0 0\n" in out
    assert native == python
    reference = pyav_decode({"libx264": "h264", "libx265": "hevc"}[codec], packets)
    assert len(reference) == n
    for k in range(n):
        assert f"picture {k}: frame {k + 1} ts {1000 + k} ret 0 160x128 strides 160x128" in out
        got = nv12_planes((out_c / f"pic{k}.yuv").read_bytes(), w, h, 160, 128)
        for a, b in zip(got, reference[k], strict=True):
            np.testing.assert_array_equal(a, b)
    names = [t.name for t in session.current_runtime().tasks]
    assert names.count("HostCallback") >= n, names
