"""PNGD from C++: acldvppPngGetImageInfo, acldvppPngPredictDecSize and acldvppPngDecodeAsync
beside their pyACL twin (as tests/test_native.py does for JPEG): the same output, tasks
(names, times, bytes, what they read and write) and API log, the decoded picture's bytes
against the array the PNG was made from, and bad input's codes (a NULL out-parameter refused
in the library, before any call, as the other calls do).
"""

from __future__ import annotations

import io
import shutil
from pathlib import Path

import numpy as np
import pytest
from PIL import Image
from test_native import build, record, run_here, twin

from acllab import constants as C
from acllab import session

pytestmark = pytest.mark.skipif(shutil.which("gcc") is None or shutil.which("g++") is None,
                                reason="needs the system's gcc and g++")

PNG_CPP = r"""
#include <cstdio>
#include <vector>
#include "acl/acl.h"
#include "acl/ops/acl_dvpp.h"

#define ALIGN_UP(x, a) ((((x) + (a) - 1) / (a)) * (a))

static std::vector<unsigned char> slurp(const char *path)
{
    FILE *f = std::fopen(path, "rb");
    std::fseek(f, 0, SEEK_END);
    long n = std::ftell(f);
    std::fseek(f, 0, SEEK_SET);
    std::vector<unsigned char> data(n);
    if (std::fread(data.data(), 1, n, f) != (size_t)n) data.clear();
    std::fclose(f);
    return data;
}

static unsigned long digest(const unsigned char *p, size_t n)
{
    unsigned long h = 0;
    for (size_t i = 0; i < n; i++) h = h * 31 + p[i];
    return h;
}

/* decode png (in DVPP memory) into a fresh buffer; AclLite's PngDHelper sets every field */
static void *decode(acldvppChannelDesc *ch, void *in, uint32_t n, acldvppPixelFormat fmt,
                    uint32_t w, uint32_t h, uint32_t size, bool strides, aclrtStream stream,
                    const char *what)
{
    void *out = nullptr;
    acldvppMalloc(&out, size);
    acldvppPicDesc *d = acldvppCreatePicDesc();
    acldvppSetPicDescData(d, out);
    acldvppSetPicDescSize(d, size);
    acldvppSetPicDescFormat(d, fmt);
    if (strides) {
        acldvppSetPicDescWidth(d, w);
        acldvppSetPicDescHeight(d, h);
        acldvppSetPicDescWidthStride(d, ALIGN_UP(w, 128) * 3);
        acldvppSetPicDescHeightStride(d, ALIGN_UP(h, 16));
    }
    int r1 = acldvppPngDecodeAsync(ch, in, n, d, stream);
    int r2 = aclrtSynchronizeStream(stream);
    uint32_t dw = acldvppGetPicDescWidth(d), dh = acldvppGetPicDescHeight(d);
    uint32_t dws = acldvppGetPicDescWidthStride(d), dhs = acldvppGetPicDescHeightStride(d);
    int df = (int)acldvppGetPicDescFormat(d);
    std::printf("%s: decode %d %d: %ux%u strides %ux%u format %d\n", what, r1, r2, dw, dh, dws,
                dhs, df);
    acldvppDestroyPicDesc(d);
    return out;
}

int main(int argc, char **argv)
{
    std::vector<unsigned char> rgba = slurp(argv[1]), pal = slurp(argv[2]);
    aclInit(nullptr);
    aclrtSetDevice(0);
    aclrtStream stream;
    aclrtCreateStream(&stream);
    uint32_t w = 0, h = 0, rgbSize = 0, anySize = 0;
    int32_t comps = 0;
    uint32_t n = (uint32_t)rgba.size();
    int r1 = acldvppPngGetImageInfo(rgba.data(), n, &w, &h, &comps);
    int r2 = acldvppPngPredictDecSize(rgba.data(), n, PIXEL_FORMAT_RGB_888, &rgbSize);
    int r3 = acldvppPngPredictDecSize(rgba.data(), n, PIXEL_FORMAT_UNKNOWN, &anySize);
    std::printf("info %d %ux%u %d comps; predict %d %u, %d %u\n", r1, w, h, comps, r2, rgbSize,
                r3, anySize);

    acldvppChannelDesc *ch = acldvppCreateChannelDesc();
    acldvppCreateChannel(ch);
    void *in = nullptr;
    acldvppMalloc(&in, n);
    aclrtMemcpy(in, n, rgba.data(), n, ACL_MEMCPY_HOST_TO_DEVICE);
    void *rgb = decode(ch, in, n, PIXEL_FORMAT_RGB_888, w, h, rgbSize, true, stream, "rgb");
    void *any = decode(ch, in, n, PIXEL_FORMAT_UNKNOWN, w, h, anySize, false, stream, "source");
    std::vector<unsigned char> back(rgbSize), back4(anySize);
    aclrtMemcpy(back.data(), rgbSize, rgb, rgbSize, ACL_MEMCPY_DEVICE_TO_HOST);
    aclrtMemcpy(back4.data(), anySize, any, anySize, ACL_MEMCPY_DEVICE_TO_HOST);
    std::printf("pictures %lu %lu\n", digest(back.data(), rgbSize), digest(back4.data(), anySize));
    FILE *f = std::fopen(argv[3], "wb");
    std::fwrite(back.data(), 1, rgbSize, f);
    std::fwrite(back4.data(), 1, anySize, f);
    std::fclose(f);

    /* bad input */
    uint32_t pw = 0, ph = 0, psize = 0;
    int32_t pc = 0;
    int b1 = acldvppPngGetImageInfo(pal.data(), (uint32_t)pal.size(), &pw, &ph, &pc);
    int b2 = acldvppPngPredictDecSize(pal.data(), (uint32_t)pal.size(), PIXEL_FORMAT_RGB_888,
                                      &psize);
    int b3 = acldvppPngPredictDecSize(rgba.data(), 29, PIXEL_FORMAT_RGB_888, &psize);
    int b4 = acldvppPngPredictDecSize(rgba.data(), n, PIXEL_FORMAT_YUV_SEMIPLANAR_420, &psize);
    int b5 = acldvppPngPredictDecSize(rgba.data(), n, PIXEL_FORMAT_RGB_888, nullptr);
    int b6 = acldvppPngGetImageInfo(rgba.data(), n, &pw, nullptr, &pc);
    acldvppPicDesc *d = acldvppCreatePicDesc();
    acldvppSetPicDescData(d, any);
    acldvppSetPicDescSize(d, anySize);
    acldvppSetPicDescFormat(d, PIXEL_FORMAT_RGBA_8888);
    int b7 = acldvppPngDecodeAsync(ch, in, n, d, stream);
    acldvppSetPicDescFormat(d, PIXEL_FORMAT_RGB_888);
    int b8 = acldvppPngDecodeAsync(ch, rgba.data(), n, d, stream);
    acldvppSetPicDescSize(d, 1024);
    int b9 = acldvppPngDecodeAsync(ch, in, n, d, stream);
    int b10 = aclrtSynchronizeStream(stream);
    std::printf("bad: %d %ux%u, %d %u, %d, %d, %d, %d, %d, %d, %d %d\n", b1, pw, ph, b2, psize,
                b3, b4, b5, b6, b7, b8, b9, b10);
    acldvppDestroyPicDesc(d);

    acldvppDestroyChannel(ch);
    acldvppDestroyChannelDesc(ch);
    for (void *p : {in, rgb, any}) acldvppFree(p);
    aclrtDestroyStream(stream);
    aclrtResetDevice(0);
    aclFinalize();
    return 0;
}
"""


def png_twin(acl, rgba_path, pal_path):
    media = acl.media

    def digest(data):
        total = 0
        for x in data:
            total = (total * 31 + x) % (1 << 64)
        return total

    def align(v, a):
        return -(-v // a) * a

    out = []
    pictures = []

    def decode(ch, inp, n, fmt, w, h, size, strides, stream, what):
        buf, _ = media.dvpp_malloc(size)
        d = media.dvpp_create_pic_desc()
        media.dvpp_set_pic_desc_data(d, buf)
        media.dvpp_set_pic_desc_size(d, size)
        media.dvpp_set_pic_desc_format(d, fmt)
        if strides:
            media.dvpp_set_pic_desc_width(d, w)
            media.dvpp_set_pic_desc_height(d, h)
            media.dvpp_set_pic_desc_width_stride(d, align(w, 128) * 3)
            media.dvpp_set_pic_desc_height_stride(d, align(h, 16))
        r1 = media.dvpp_png_decode_async(ch, inp, n, d, stream)
        r2 = acl.rt.synchronize_stream(stream)
        out.append(f"{what}: decode {r1} {r2}: {media.dvpp_get_pic_desc_width(d)}x"
                   f"{media.dvpp_get_pic_desc_height(d)} strides "
                   f"{media.dvpp_get_pic_desc_width_stride(d)}x"
                   f"{media.dvpp_get_pic_desc_height_stride(d)} format "
                   f"{media.dvpp_get_pic_desc_format(d)}")
        media.dvpp_destroy_pic_desc(d)
        return buf

    rgba = bytearray(Path(rgba_path).read_bytes())
    pal = bytearray(Path(pal_path).read_bytes())
    acl.init()
    acl.rt.set_device(0)
    stream, _ = acl.rt.create_stream()
    n = len(rgba)
    rp = acl.util.bytes_to_ptr(rgba)
    w, h, comps, r1 = media.dvpp_png_get_image_info(rp, n)
    rgb_size, r2 = media.dvpp_png_predict_dec_size(rp, n, media.PIXEL_FORMAT_RGB_888)
    any_size, r3 = media.dvpp_png_predict_dec_size(rp, n, media.PIXEL_FORMAT_UNKNOWN)
    out.append(f"info {r1} {w}x{h} {comps} comps; predict {r2} {rgb_size}, {r3} {any_size}")
    ch = media.dvpp_create_channel_desc()
    media.dvpp_create_channel(ch)
    inp, _ = media.dvpp_malloc(n)
    acl.rt.memcpy(inp, n, rp, n, C.ACL_MEMCPY_HOST_TO_DEVICE)
    rgb = decode(ch, inp, n, media.PIXEL_FORMAT_RGB_888, w, h, rgb_size, True, stream, "rgb")
    anyp = decode(ch, inp, n, media.PIXEL_FORMAT_UNKNOWN, w, h, any_size, False, stream,
                  "source")
    back, back4 = bytearray(rgb_size), bytearray(any_size)
    acl.rt.memcpy(acl.util.bytes_to_ptr(back), rgb_size, rgb, rgb_size,
                  C.ACL_MEMCPY_DEVICE_TO_HOST)
    acl.rt.memcpy(acl.util.bytes_to_ptr(back4), any_size, anyp, any_size,
                  C.ACL_MEMCPY_DEVICE_TO_HOST)
    out.append(f"pictures {digest(back)} {digest(back4)}")
    pictures.append(bytes(back) + bytes(back4))
    pp = acl.util.bytes_to_ptr(pal)
    pw, ph, _, b1 = media.dvpp_png_get_image_info(pp, len(pal))
    psize, b2 = media.dvpp_png_predict_dec_size(pp, len(pal), media.PIXEL_FORMAT_RGB_888)
    _, b3 = media.dvpp_png_predict_dec_size(rp, 29, media.PIXEL_FORMAT_RGB_888)
    _, b4 = media.dvpp_png_predict_dec_size(rp, n, media.PIXEL_FORMAT_YUV_SEMIPLANAR_420)
    b5 = b6 = 100000          # NULL out-parameters: refused in the library, before any call
    d = media.dvpp_create_pic_desc()
    media.dvpp_set_pic_desc_data(d, anyp)
    media.dvpp_set_pic_desc_size(d, any_size)
    media.dvpp_set_pic_desc_format(d, media.PIXEL_FORMAT_RGBA_8888)
    b7 = media.dvpp_png_decode_async(ch, inp, n, d, stream)
    media.dvpp_set_pic_desc_format(d, media.PIXEL_FORMAT_RGB_888)
    b8 = media.dvpp_png_decode_async(ch, rp, n, d, stream)
    media.dvpp_set_pic_desc_size(d, 1024)
    b9 = media.dvpp_png_decode_async(ch, inp, n, d, stream)
    b10 = acl.rt.synchronize_stream(stream)
    out.append(f"bad: {b1} {pw}x{ph}, {b2} {psize}, {b3}, {b4}, {b5}, {b6}, {b7}, {b8}, "
               f"{b9} {b10}")
    media.dvpp_destroy_pic_desc(d)
    media.dvpp_destroy_channel(ch)
    media.dvpp_destroy_channel_desc(ch)
    for p in (inp, rgb, anyp):
        media.dvpp_free(p)
    acl.rt.destroy_stream(stream)
    acl.rt.reset_device(0)
    acl.finalize()
    return "\n".join(out) + "\n", pictures[0]


def test_png_decoding_from_cpp_matches_the_pyacl_twin(toolkit, tmp_path):  # noqa: F811
    """An RGBA PNG of odd size decoded to RGB888 (AclLite's PngDHelper's fields) and as the
    source (RGBA8888), then bad input: the same output, tasks and log as the pyACL twin, and
    the pictures' bytes are the array's, rows at PNGD's strides."""
    h, w = 45, 70
    a = np.random.default_rng(3).integers(0, 256, (h, w, 4), dtype=np.uint8)
    buf = io.BytesIO()
    Image.fromarray(a, "RGBA").save(buf, format="PNG")
    rgba_path = tmp_path / "picture.png"
    rgba_path.write_bytes(buf.getvalue())
    pal = Image.fromarray(a[..., 0], "P")
    pal.putpalette([v for i in range(256) for v in (i, i, 255 - i)])
    buf = io.BytesIO()
    pal.save(buf, format="PNG")
    pal_path = tmp_path / "palette.png"
    pal_path.write_bytes(buf.getvalue())
    dump = tmp_path / "decoded.bin"
    exe = build(toolkit, tmp_path, PNG_CPP, "pngd", cpp=True)
    code, out = run_here(toolkit, exe, tmp_path, [str(rgba_path), str(pal_path), str(dump)])
    native = record(session.current_runtime())
    (expected, pictures), python = twin(lambda acl: png_twin(acl, rgba_path, pal_path))
    assert code == 0, out
    assert out == expected
    assert native == python
    assert out.startswith(f"info 0 {w}x{h} 4 comps; predict 0 {384 * 48}, 0 {512 * 48}\n")
    assert f"rgb: decode 0 0: {w}x{h} strides 384x48 format 12\n" in out
    assert f"source: decode 0 0: {w}x{h} strides 512x48 format 16\n" in out
    assert "bad: 100027 0x0, 0 18432, 100000, 100027, 100000, 100000, 100027, 100000, " \
           "0 507000\n" in out
    got = dump.read_bytes()
    assert got == pictures
    rgb = np.frombuffer(got[:384 * 48], np.uint8).reshape(48, 384)[:h, :w * 3]
    assert (rgb.reshape(h, w, 3) == a[..., :3]).all()
    rgba = np.frombuffer(got[384 * 48:], np.uint8).reshape(48, 512)[:h, :w * 4]
    assert (rgba.reshape(h, w, 4) == a).all()
    tasks = [t for t in session.current_runtime().tasks if t.name == "PngDecode"]
    assert len(tasks) == 3 and tasks[-1].info.get("fault")
