"""What Ascend's C++ samples need of acllab's AscendCL beyond tests/test_native.py, each piece
in a program written as those samples write it, beside its pyACL twin.

- jpegd, jpege and vpc_resnet50_imagenet_classification link ``acl_cblas`` beside
  ``acl_dvpp`` from ``runtime/lib64/stub`` (as CANN's stub directory holds both);
- smallResolution_cropandpaste moves an area's edges with the ``acldvppSetRoiConfig`` series
  (CANN's AscendCL source: each offset is kept in 16 bits, a NULL configuration or a value
  above 65535 gives ACL_ERROR_INVALID_PARAM 100000; pyACL wraps them as
  ``acl.media.dvpp_set_roi_config(_left/_right/_top/_bottom)``);
- jpegd asks ``acldvppJpegGetImageInfoV2`` for width, height and format with ``components``
  NULL: in CANN's source every out-parameter is optional and only those given are filled;
- resnet50_imagenet_dynamic_dims' destructors destroy host objects after ``aclFinalize``:
  CANN's destroy calls only delete them and return 0 (hicann/ge, model_om2.cpp).
"""

from __future__ import annotations

import shutil
import subprocess
import textwrap
from pathlib import Path

import numpy as np
import pytest
from test_native import build, record, run_here, twin

from acllab import constants as C
from acllab import session

pytestmark = pytest.mark.skipif(shutil.which("g++") is None, reason="needs the system's g++")


def build_as_jpegd(toolkit, tmp_path: Path, source: str, name: str) -> Path:
    """Compile as jpegd's CMakeLists does: -DENABLE_DVPP_INTERFACE, runtime/include, and
    ``ascendcl acl_cblas acl_dvpp stdc++`` from runtime/lib64/stub."""
    latest, _ = toolkit
    src = tmp_path / f"{name}.cpp"
    src.write_text(textwrap.dedent(source))
    exe = tmp_path / name
    cmd = ["g++", "-std=c++11", "-Wall", "-Werror", "-O1", "-DENABLE_DVPP_INTERFACE",
           f"-I{latest}/runtime/include", str(src), f"-L{latest}/runtime/lib64/stub",
           "-lascendcl", "-lacl_cblas", "-lacl_dvpp", "-lstdc++", "-pthread", "-o", str(exe)]
    done = subprocess.run(cmd, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return exe


W = H = 64          # the source picture (NV12), Y[i, j] = (7 i + 3 j) mod 256, UV 128
CW = CH = 32        # the crop's size


def source_y() -> np.ndarray:
    i, j = np.mgrid[0:H, 0:W]
    return ((7 * i + 3 * j) % 256).astype(np.uint8)


ROI_CPP = r"""
#include <cstdio>
#include <vector>
#include "acl/acl.h"
#include "acl/ops/acl_dvpp.h"

static const uint32_t W = 64, H = 64, CW = 32, CH = 32;

static acldvppPicDesc *picture(void *data, uint32_t w, uint32_t h)
{
    acldvppPicDesc *d = acldvppCreatePicDesc();
    acldvppSetPicDescData(d, data);
    acldvppSetPicDescSize(d, w * h * 3 / 2);
    acldvppSetPicDescFormat(d, PIXEL_FORMAT_YUV_SEMIPLANAR_420);
    acldvppSetPicDescWidth(d, w);
    acldvppSetPicDescHeight(d, h);
    acldvppSetPicDescWidthStride(d, w);
    acldvppSetPicDescHeightStride(d, h);
    return d;
}

int main(int argc, char *argv[])
{
    aclInit(nullptr);
    aclrtSetDevice(0);
    aclrtStream stream;
    aclrtCreateStream(&stream);

    /* jpegd's call: width, height and format, no components */
    std::vector<unsigned char> jpeg;
    FILE *f = std::fopen(argv[1], "rb");
    int ch;
    while ((ch = std::fgetc(f)) != EOF) jpeg.push_back((unsigned char)ch);
    std::fclose(f);
    uint32_t jw = 0, jh = 0;
    acldvppJpegFormat jf = ACL_JPEG_CSS_UNKNOWN;
    aclError i1 = acldvppJpegGetImageInfoV2(jpeg.data(), jpeg.size(), &jw, &jh, nullptr, &jf);
    uint32_t onlyHeight = 0;
    aclError i2 = acldvppJpegGetImageInfo(jpeg.data(), jpeg.size(), nullptr, &onlyHeight,
                                          nullptr);
    std::printf("info %d %ux%u css %d; %d height %u\n", i1, jw, jh, (int)jf, i2, onlyHeight);

    const uint32_t inSize = W * H * 3 / 2, outSize = CW * CH * 3 / 2;
    std::vector<unsigned char> host(inSize, 128);
    for (uint32_t i = 0; i < H; i++)
        for (uint32_t j = 0; j < W; j++) host[i * W + j] = (unsigned char)((7 * i + 3 * j) % 256);
    void *in = nullptr, *out = nullptr;
    acldvppMalloc(&in, inSize);
    acldvppMalloc(&out, outSize);
    aclrtMemcpy(in, inSize, host.data(), inSize, ACL_MEMCPY_HOST_TO_DEVICE);
    acldvppChannelDesc *channel = acldvppCreateChannelDesc();
    acldvppCreateChannel(channel);
    acldvppPicDesc *src = picture(in, W, H), *dst = picture(out, CW, CH);

    /* the area moved edge by edge, as smallResolution_cropandpaste moves it */
    acldvppRoiConfig *area = acldvppCreateRoiConfig(0, CW - 1, 0, CH - 1);
    aclError s1 = acldvppSetRoiConfigLeft(area, 16);
    aclError s2 = acldvppSetRoiConfigRight(area, 16 + CW - 1);
    aclError s3 = acldvppSetRoiConfigTop(area, 8);
    aclError s4 = acldvppSetRoiConfigBottom(area, 8 + CH - 1);
    aclError bad1 = acldvppSetRoiConfigLeft(area, 70000);
    aclError bad2 = acldvppSetRoiConfig(area, 2, 65536, 0, 1);
    aclError bad3 = acldvppSetRoiConfigTop(nullptr, 2);
    aclError c1 = acldvppVpcCropAsync(channel, src, dst, area, stream);
    aclError c2 = aclrtSynchronizeStream(stream);
    std::vector<unsigned char> back(outSize);
    aclrtMemcpy(back.data(), outSize, out, outSize, ACL_MEMCPY_DEVICE_TO_HOST);
    std::printf("set %d %d %d %d, refused %d %d %d, crop %d %d:", s1, s2, s3, s4, bad1, bad2,
                bad3, c1, c2);
    for (uint32_t k = 0; k < CW * CH; k += 97) std::printf(" %u", back[k]);
    std::printf("\n");

    /* all four at once, back to the top-left corner */
    aclError s5 = acldvppSetRoiConfig(area, 0, CW - 1, 0, CH - 1);
    aclError c3 = acldvppVpcCropAsync(channel, src, dst, area, stream);
    aclrtSynchronizeStream(stream);
    aclrtMemcpy(back.data(), outSize, out, outSize, ACL_MEMCPY_DEVICE_TO_HOST);
    std::printf("set %d, crop %d:", s5, c3);
    for (uint32_t k = 0; k < CW * CH; k += 97) std::printf(" %u", back[k]);
    std::printf("\n");
    FILE *o = std::fopen(argv[2], "wb");
    std::fwrite(back.data(), 1, outSize, o);
    std::fclose(o);

    acldvppDestroyRoiConfig(area);
    acldvppDestroyPicDesc(src);
    acldvppDestroyPicDesc(dst);
    acldvppDestroyChannel(channel);
    acldvppDestroyChannelDesc(channel);
    acldvppFree(in);
    acldvppFree(out);
    aclrtDestroyStream(stream);
    aclrtResetDevice(0);
    aclFinalize();
    return 0;
}
"""


def roi_twin(acl, jpeg_path: Path) -> str:
    media = acl.media
    nv12 = media.PIXEL_FORMAT_YUV_SEMIPLANAR_420

    def picture(data, w, h):
        d = media.dvpp_create_pic_desc()
        media.dvpp_set_pic_desc_data(d, data)
        media.dvpp_set_pic_desc_size(d, w * h * 3 // 2)
        media.dvpp_set_pic_desc_format(d, nv12)
        media.dvpp_set_pic_desc_width(d, w)
        media.dvpp_set_pic_desc_height(d, h)
        media.dvpp_set_pic_desc_width_stride(d, w)
        media.dvpp_set_pic_desc_height_stride(d, h)
        return d

    lines = []
    acl.init()
    acl.rt.set_device(0)
    stream, _ = acl.rt.create_stream()
    jpeg = bytearray(jpeg_path.read_bytes())
    jp = acl.util.bytes_to_ptr(jpeg)
    jw, jh, _, jf, i1 = media.dvpp_jpeg_get_image_info_v2(jp, len(jpeg))
    _, only_height, _, i2 = media.dvpp_jpeg_get_image_info(jp, len(jpeg))
    lines.append(f"info {i1} {jw}x{jh} css {jf}; {i2} height {only_height}")
    in_size, out_size = W * H * 3 // 2, CW * CH * 3 // 2
    host = bytearray([128]) * in_size
    host[:W * H] = source_y().tobytes()
    inp, _ = media.dvpp_malloc(in_size)
    out, _ = media.dvpp_malloc(out_size)
    acl.rt.memcpy(inp, in_size, acl.util.bytes_to_ptr(host), in_size,
                  C.ACL_MEMCPY_HOST_TO_DEVICE)
    channel = media.dvpp_create_channel_desc()
    media.dvpp_create_channel(channel)
    src, dst = picture(inp, W, H), picture(out, CW, CH)
    area = media.dvpp_create_roi_config(0, CW - 1, 0, CH - 1)
    s = [media.dvpp_set_roi_config_left(area, 16),
         media.dvpp_set_roi_config_right(area, 16 + CW - 1),
         media.dvpp_set_roi_config_top(area, 8),
         media.dvpp_set_roi_config_bottom(area, 8 + CH - 1)]
    bad = [media.dvpp_set_roi_config_left(area, 70000),
           media.dvpp_set_roi_config(area, 2, 65536, 0, 1),
           media.dvpp_set_roi_config_top(0, 2)]
    c1 = media.dvpp_vpc_crop_async(channel, src, dst, area, stream)
    c2 = acl.rt.synchronize_stream(stream)
    back = bytearray(out_size)
    bp = acl.util.bytes_to_ptr(back)
    acl.rt.memcpy(bp, out_size, out, out_size, C.ACL_MEMCPY_DEVICE_TO_HOST)
    picks = " ".join(str(back[k]) for k in range(0, CW * CH, 97))
    lines.append(f"set {' '.join(map(str, s))}, refused {' '.join(map(str, bad))}, "
                 f"crop {c1} {c2}: {picks}")
    s5 = media.dvpp_set_roi_config(area, 0, CW - 1, 0, CH - 1)
    c3 = media.dvpp_vpc_crop_async(channel, src, dst, area, stream)
    acl.rt.synchronize_stream(stream)
    acl.rt.memcpy(bp, out_size, out, out_size, C.ACL_MEMCPY_DEVICE_TO_HOST)
    picks = " ".join(str(back[k]) for k in range(0, CW * CH, 97))
    lines.append(f"set {s5}, crop {c3}: {picks}")
    media.dvpp_destroy_roi_config(area)
    media.dvpp_destroy_pic_desc(src)
    media.dvpp_destroy_pic_desc(dst)
    media.dvpp_destroy_channel(channel)
    media.dvpp_destroy_channel_desc(channel)
    media.dvpp_free(inp)
    media.dvpp_free(out)
    acl.rt.destroy_stream(stream)
    acl.rt.reset_device(0)
    acl.finalize()
    return "".join(line + "\n" for line in lines)


def test_roi_setters_and_optional_image_info_outputs_match_the_pyacl_twin(toolkit, tmp_path):
    """A program linked as jpegd links (acl_cblas too) asks for a JPEG's size without its
    components, moves a crop area with the setters, and gets the twin's output, tasks and
    API log; the crops are the source picture's moved and corner areas."""
    from PIL import Image

    jpeg = tmp_path / "picture.jpg"
    Image.fromarray(np.zeros((40, 72, 3), np.uint8) + 90).save(jpeg, quality=90)
    exe = build_as_jpegd(toolkit, tmp_path, ROI_CPP, "roi")
    crop_file = tmp_path / "crop.yuv"
    code, out = run_here(toolkit, exe, tmp_path, [str(jpeg), str(crop_file)])
    native = record(session.current_runtime())
    expected, python = twin(lambda acl: roi_twin(acl, jpeg))
    assert code == 0, out
    assert out == expected
    assert native == python
    lines = out.splitlines()
    assert lines[0] == "info 0 72x40 css 2; 0 height 40"          # 4:2:0 (Pillow's default)
    assert lines[1].startswith("set 0 0 0 0, refused 100000 100000 100000, crop 0 0:")
    y = source_y()
    moved = y[8:8 + CH, 16:16 + CW].reshape(-1)
    assert lines[1].split(":")[1].split() == [str(moved[k]) for k in range(0, CW * CH, 97)]
    corner = np.frombuffer(crop_file.read_bytes()[:CW * CH], np.uint8).reshape(CH, CW)
    assert lines[2].startswith("set 0, crop 0:")
    assert (corner == y[:CH, :CW]).all()


def test_a_refused_offset_changes_nothing_in_the_area():
    """pyACL alone: 65535 is taken, 65536 refused with 100000 and the area as it was (all
    four of acl.media.dvpp_set_roi_config at once: none is changed); negative offsets, a
    destroyed configuration and another kind of handle are refused too."""
    import acllab

    acllab.reset()
    acl = acllab.acl
    media = acl.media
    acl.init()
    acl.rt.set_device(0)
    area = media.dvpp_create_roi_config(0, 1, 0, 1)
    roi = session.current_runtime().handles[area]
    assert media.dvpp_set_roi_config_right(area, 65535) == 0
    assert (roi.left, roi.right, roi.top, roi.bottom) == (0, 65535, 0, 1)
    assert media.dvpp_set_roi_config(area, 4, 9, 65536, 11) == 100000
    assert (roi.left, roi.right, roi.top, roi.bottom) == (0, 65535, 0, 1)
    assert media.dvpp_set_roi_config_bottom(area, -1) == 100000
    assert media.dvpp_set_roi_config(area, 4, 9, 6, 11) == 0
    assert (roi.left, roi.right, roi.top, roi.bottom) == (4, 9, 6, 11)
    resize = media.dvpp_create_resize_config()
    assert media.dvpp_set_roi_config_left(resize, 2) == 100000
    media.dvpp_destroy_roi_config(area)
    assert media.dvpp_set_roi_config_top(area, 2) == 100000
    acl.rt.reset_device(0)
    acl.finalize()


AFTER_FINALIZE_C = r"""
    #include <stdio.h>
    #include "acl/acl.h"

    int main(void)
    {
        aclInit(NULL);
        aclmdlDesc *desc = aclmdlCreateDesc();
        aclmdlDataset *dataset = aclmdlCreateDataset();
        aclDataBuffer *buffer = aclCreateDataBuffer(NULL, 0);
        aclTensorDesc *tensor = aclCreateTensorDesc(ACL_FLOAT, 0, NULL, ACL_FORMAT_ND);
        printf("finalize %d\n", aclFinalize());
        aclError d = aclmdlDestroyDesc(desc);
        aclError s = aclmdlDestroyDataset(dataset);
        aclError b = aclDestroyDataBuffer(buffer);
        printf("destroy %d %d %d\n", d, s, b);
        aclDestroyTensorDesc(tensor);
        printf("again %d\n", aclmdlDestroyDesc(desc));
        return 0;
    }
"""


def after_finalize_twin(acl):
    acl.init()
    desc, dataset = acl.mdl.create_desc(), acl.mdl.create_dataset()
    buffer = acl.create_data_buffer(0, 0)
    tensor = acl.create_tensor_desc(C.ACL_FLOAT, [], C.ACL_FORMAT_ND)
    text = f"finalize {acl.finalize()}\n"
    text += (f"destroy {acl.mdl.destroy_desc(desc)} {acl.mdl.destroy_dataset(dataset)} "
             f"{acl.destroy_data_buffer(buffer)}\n")
    acl.destroy_tensor_desc(tensor)
    return text + f"again {acl.mdl.destroy_desc(desc)}\n"


def test_host_objects_destroyed_after_finalize_as_the_pyacl_twin(toolkit, tmp_path):
    exe = build(toolkit, tmp_path, AFTER_FINALIZE_C, "after_finalize")
    code, out = run_here(toolkit, exe, tmp_path)
    native = record(session.current_runtime())
    expected, python = twin(after_finalize_twin)
    assert code == 0 and out == expected == "finalize 0\ndestroy 0 0 0\nagain 107017\n"
    assert native == python

