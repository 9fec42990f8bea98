"""acl.media batch VPC: batch picture descriptions, dvpp_get_pic_desc, batch crop and batch
crop-and-paste, as vpc_jpeg_resnet50_imagenet_classification calls them (roi_nums per input
picture, one area per output picture, (dst_batch, ret) back). Facts: CANN 8.0.0 / 8.5.0
acldvppVpcBatchCropAsync and acldvppVpcBatchCropAndPasteAsync (at most 256 areas, roiNums'
sum equal to the output batch size).
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import expect_code, setup_device
from test_acl_media import download, upload

import acllab
from acllab import acl
from acllab.acl import media

NV12 = media.PIXEL_FORMAT_YUV_SEMIPLANAR_420


@pytest.fixture
def s():
    acllab.reset()
    setup_device(0)
    stream, _ = acl.rt.create_stream()
    yield stream
    acllab.reset()


def nv12(w: int, h: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[0:h, 0:w]
    y = ((xx * 3 + yy * 2 + seed * 40) % 256).astype(np.uint8)
    c = rng.integers(0, 256, (h // 2, w), np.uint8)
    return np.concatenate([y, c])


def setup_pic(desc: int, data: int, w: int, h: int) -> None:
    for field, value in (("data", data), ("size", w * h * 3 // 2), ("format", NV12),
                         ("width", w), ("height", h), ("width_stride", w),
                         ("height_stride", h)):
        assert getattr(media, f"dvpp_set_pic_desc_{field}")(desc, value) == 0


def batch_of(stream, pictures: list[np.ndarray | None], w: int, h: int) -> tuple[int, list]:
    """A batch description whose pictures hold ``pictures`` (None: a fresh zeroed buffer)."""
    batch = media.dvpp_create_batch_pic_desc(len(pictures))
    assert batch != 0
    bufs = []
    for i, pic in enumerate(pictures):
        data = pic if pic is not None else np.zeros((h * 3 // 2, w), np.uint8)
        buf = upload(data.tobytes(), stream)
        setup_pic(media.dvpp_get_pic_desc(batch, i), buf, w, h)
        bufs.append(buf)
    assert acl.rt.synchronize_stream(stream) == 0
    return batch, bufs


def roi(left, right, top, bottom) -> int:
    return media.dvpp_create_roi_config(left, right, top, bottom)


def test_batch_descriptions_hand_out_their_pictures(s):
    batch = media.dvpp_create_batch_pic_desc(3)
    pics = [media.dvpp_get_pic_desc(batch, i) for i in range(3)]
    assert len(set(pics)) == 3 and 0 not in pics
    assert media.dvpp_get_pic_desc(batch, 1) == pics[1]          # the same one each time
    assert media.dvpp_set_pic_desc_width(pics[2], 64) == 0
    assert media.dvpp_get_pic_desc_width(pics[2]) == 64
    with expect_code(100000):
        assert media.dvpp_get_pic_desc(batch, 3) == 0
    with expect_code(100000):
        assert media.dvpp_destroy_pic_desc(pics[0]) == 100000    # the batch owns it
    for size in (0, 257):
        with expect_code(100000):
            assert media.dvpp_create_batch_pic_desc(size) == 0
    assert media.dvpp_destroy_batch_pic_desc(batch) == 0
    assert media.dvpp_get_pic_desc_width(pics[2]) == 0           # gone with the batch
    with expect_code(100000):
        assert media.dvpp_get_pic_desc(batch, 0) == 0


@pytest.mark.parametrize("paste", [False, True])
def test_batch_crops_equal_one_crop_each(s, paste):
    """Two inputs, three areas (2 from the first, 1 from the second): each output is what a
    single crop (crop-and-paste) of the same area makes."""
    w, h, ow, oh = 128, 96, 64, 48
    src = [nv12(w, h, 1), nv12(w, h, 2)]
    channel = media.dvpp_create_channel_desc()
    assert media.dvpp_create_channel(channel) == 0
    sb, _ = batch_of(s, src, w, h)
    canvas = np.full((oh * 3 // 2, ow), 77, np.uint8)
    db, dbufs = batch_of(s, [canvas] * 3, ow, oh)
    areas = [(0, 63, 0, 47), (64, 127, 48, 95), (10, 41, 20, 43)]   # the last one is resized
    crops = [roi(*a) for a in areas]
    pastes = [roi(16, 47, 0, 23) for _ in areas]
    if paste:
        out, ret = media.dvpp_vpc_batch_crop_and_paste_async(channel, sb, [2, 1], db, crops,
                                                              pastes, s)
    else:
        out, ret = media.dvpp_vpc_batch_crop_async(channel, sb, [2, 1], db, crops, s)
    assert (out, ret) == (db, 0)
    assert acl.rt.synchronize_stream(s) == 0
    got = [download(b, ow * oh * 3 // 2) for b in dbufs]
    # the single-call reference
    for k, (i, area) in enumerate(zip([0, 0, 1], areas, strict=True)):
        inp = media.dvpp_get_pic_desc(sb, i)
        ref_buf = upload(canvas.tobytes(), s)
        ref = media.dvpp_create_pic_desc()
        setup_pic(ref, ref_buf, ow, oh)
        if paste:
            assert media.dvpp_vpc_crop_and_paste_async(channel, inp, ref, roi(*area),
                                                       roi(16, 47, 0, 23), s) == 0
        else:
            assert media.dvpp_vpc_crop_async(channel, inp, ref, roi(*area), s) == 0
        assert acl.rt.synchronize_stream(s) == 0
        assert np.array_equal(got[k], download(ref_buf, ow * oh * 3 // 2))
    # and an independent check: the first area, unscaled, is the input's own pixels
    first = got[0].reshape(oh * 3 // 2, ow)
    if not paste:
        assert np.array_equal(first[:oh], src[0][:oh, :ow])
        assert np.array_equal(first[oh:], src[0][h:h + oh // 2, :ow])
    else:
        assert np.all(first[:oh, :16] == 77)                     # the canvas outside the paste
        assert not np.all(first[:24, 16:48] == 77)
    tasks = [t for t in acllab.current_runtime().tasks if t.name.startswith("VpcBatch")]
    assert len(tasks) == 3 and {t.engine_name for t in tasks} == {"VPC (device 0)"}


def test_batch_crop_checks_its_lists(s):
    w, h = 64, 48
    channel = media.dvpp_create_channel_desc()
    media.dvpp_create_channel(channel)
    sb, _ = batch_of(s, [nv12(w, h, 3), nv12(w, h, 4)], w, h)
    db, _ = batch_of(s, [None, None, None], 32, 24)
    crops = [roi(0, 31, 0, 23) for _ in range(3)]
    bad = [([1, 1], crops, 100000),                 # adds up to 2, the output batch holds 3
           ([3], crops, 100000),                    # one entry for two input pictures
           ([2, 1], crops[:2], 100000),             # two areas for three outputs
           ([2, 1], crops[:2] + [sb], 100000),      # a batch description is no ROI config
           ([4, -1], crops, 100000),                # negative
           ([2, 1], crops[:2] + [roi(0, 31, 0, 60)], 100000)]   # outside the picture
    for nums, areas, code in bad:
        with expect_code(code):
            assert media.dvpp_vpc_batch_crop_async(channel, sb, nums, db, areas, s) == \
                (0, code)
    with pytest.raises(TypeError):
        media.dvpp_vpc_batch_crop_async(channel, sb, 3, db, crops, s)
    assert not [t for t in acllab.current_runtime().tasks if t.name.startswith("VpcBatch")]
    assert media.dvpp_vpc_batch_crop_async(channel, sb, [2, 1], db, crops, s) == (db, 0)
    assert acl.rt.synchronize_stream(s) == 0


@pytest.mark.parametrize("paste", [False, True], ids=["crop-resize", "crop-resize-paste"])
@pytest.mark.parametrize("interpolation", [0, 1, 2, 3, 4])
def test_batch_crop_resize_resizes_each_area_with_its_configuration(s, interpolation, paste):
    """dvpp_vpc_batch_crop_resize_async (acldvppVpcBatchCropResizeAsync, called by Ascend's
    batchcrop sample) and dvpp_vpc_batch_crop_resize_paste_async: each output is what
    dvpp_vpc_crop_resize_async (dvpp_vpc_crop_resize_paste_async, onto the same canvas) makes
    of its area with the same resize configuration; they return ret alone (CANN 8.0.0 pyACL
    reference)."""
    w, h, ow, oh = 128, 96, 48, 32
    src = [nv12(w, h, 5), nv12(w, h, 6)]
    channel = media.dvpp_create_channel_desc()
    assert media.dvpp_create_channel(channel) == 0
    sb, _ = batch_of(s, src, w, h)
    canvas = np.full((oh * 3 // 2, ow), 33, np.uint8)
    db, dbufs = batch_of(s, [canvas] * 3, ow, oh)
    areas = [(0, 99, 0, 71), (30, 61, 10, 41), (4, 123, 2, 93)]   # down and up, both ways
    paste_area = (16, 47, 4, 27)
    config = media.dvpp_create_resize_config()
    assert media.dvpp_set_resize_config_interpolation(config, interpolation) == 0
    crops = [roi(*a) for a in areas]
    if paste:
        pastes = [roi(*paste_area) for _ in areas]
        assert media.dvpp_vpc_batch_crop_resize_paste_async(channel, sb, [1, 2], db, crops,
                                                            pastes, config, s) == 0
    else:
        assert media.dvpp_vpc_batch_crop_resize_async(channel, sb, [1, 2], db, crops, config,
                                                      s) == 0
    assert acl.rt.synchronize_stream(s) == 0
    got = [download(b, ow * oh * 3 // 2) for b in dbufs]
    other = media.dvpp_create_resize_config()
    # a nearest-neighbour algorithm against a bilinear one
    assert media.dvpp_set_resize_config_interpolation(other, 1 if interpolation in (2, 4)
                                                      else 2) == 0
    for k, (i, area) in enumerate(zip([0, 1, 1], areas, strict=True)):
        refs = []
        for cfg in (config, other):
            buf = upload(canvas.tobytes(), s)
            ref = media.dvpp_create_pic_desc()
            setup_pic(ref, buf, ow, oh)
            inp = media.dvpp_get_pic_desc(sb, i)
            if paste:
                ret = media.dvpp_vpc_crop_resize_paste_async(channel, inp, ref, roi(*area),
                                                             roi(*paste_area), cfg, s)
            else:
                ret = media.dvpp_vpc_crop_resize_async(channel, inp, ref, roi(*area), cfg, s)
            assert ret == 0
            assert acl.rt.synchronize_stream(s) == 0
            refs.append(download(buf, ow * oh * 3 // 2))
        assert np.array_equal(got[k], refs[0])
        assert not np.array_equal(got[k], refs[1])            # the algorithm is honoured
        if paste:                                              # the canvas outside the area
            assert np.all(got[k].reshape(oh * 3 // 2, ow)[:oh, :16] == 33)
    call = (lambda *a: media.dvpp_vpc_batch_crop_resize_paste_async(*a[:5], pastes, *a[5:])) \
        if paste else media.dvpp_vpc_batch_crop_resize_async
    with expect_code(100000):                                  # a batch is no resize config
        assert call(channel, sb, [1, 2], db, crops, sb, s) == 100000
    with expect_code(100000):
        assert call(channel, sb, [2, 2], db, crops, config, s) == 100000
    name = "VpcBatchCropResizePaste" if paste else "VpcBatchCropResize"
    tasks = [t.name for t in acllab.current_runtime().tasks if t.name.startswith("VpcBatch")]
    assert tasks == [name] * 3
