"""``acl.media`` batch VPC: batch picture descriptions, dvpp_get_pic_desc, and the batch crop,
crop-and-paste, crop-resize and crop-resize-paste calls (acldvppCreateBatchPicDesc,
acldvppGetPicDesc, acldvppVpcBatchCropAsync, acldvppVpcBatchCropAndPasteAsync,
acldvppVpcBatchCropResizeAsync, acldvppVpcBatchCropResizePasteAsync; CANN 8.0.0 / 8.5.0
references).

A batch description holds ``batch_size`` picture descriptions (``dvpp_get_pic_desc(batch,
i)`` hands out the i-th; the program sets it up with the dvpp_set_pic_desc_* calls as any
other). A batch call crops ``roi_nums[i]`` areas from input picture i, in order, into the
output pictures one by one: the roi_nums list has one entry per input picture (at most
256), its sum is the number of output pictures (at most 256), and there is one crop area (and
one paste area) per output picture. Each crop follows the rules of dvpp_vpc_crop_async
(dvpp_vpc_crop_and_paste_async): the same checks, the same pixels. In pyACL the crop and
crop-and-paste calls return ``(dst_batch_pic_descs, ret)``; the crop-resize and
crop-resize-paste calls, which resize with their resize configuration's algorithm as
dvpp_vpc_crop_resize_async does, return ``ret`` (CANN 8.0.0 pyACL reference,
dvpp_vpc_batch_crop_resize_async and dvpp_vpc_batch_crop_resize_paste_async).

Differs from hardware: each area is a VPC task of its own on the stream (in order), rather
than one task for the batch; a call whose arguments fail a check submits nothing.
"""

from __future__ import annotations

from ...dvpp.tasks import dvpp_device, vpc_task
from ...errors import Fail
from .._api import as_int, rt
from ._checks import _stream, _submit
from ._desc import PicDesc, ResizeConfig, RoiConfig, _Desc, _destroy, _get, _new, api
from .channel import _channel
from .vpc import _plan

__all__ = ["dvpp_create_batch_pic_desc", "dvpp_destroy_batch_pic_desc", "dvpp_get_pic_desc",
           "dvpp_vpc_batch_crop_async", "dvpp_vpc_batch_crop_and_paste_async",
           "dvpp_vpc_batch_crop_resize_async", "dvpp_vpc_batch_crop_resize_paste_async"]

MAX_BATCH = 256      # roiNums: "the maximum number of crop ROIs is 256" (acldvppVpcBatchCropAsync)


class BatchPicDesc(_Desc):
    """acldvppBatchPicDesc: ``batch_size`` picture descriptions owned by the batch."""

    kind = "batch picture description"

    def __init__(self, size: int):
        super().__init__()
        self.pics: list[PicDesc] = []
        self.size = size

    def __repr__(self) -> str:
        return f"<BatchPicDesc 0x{self.handle:x}: {self.size} pictures>"


@api("acldvppCreateBatchPicDesc", bare=True, outs=(0,))
def dvpp_create_batch_pic_desc(batch_size):
    """A batch of ``batch_size`` (1 to 256) empty picture descriptions."""
    n = as_int(batch_size, "batch_size")
    if not 1 <= n <= MAX_BATCH:
        raise Fail(100000, f"batch_size {n}: a batch holds 1 to {MAX_BATCH} pictures")
    batch = BatchPicDesc(n)
    handle = _new(batch)
    r = rt()
    for _ in range(n):
        pic = PicDesc()
        pic.batch = batch
        pic.handle = r.new_handle("desc", pic)
        batch.pics.append(pic)
    return handle


@api("acldvppDestroyBatchPicDesc")
def dvpp_destroy_batch_pic_desc(batch_pic_desc):
    """Destroy the batch and its picture descriptions (not the memory they point at)."""
    batch = _get(batch_pic_desc, BatchPicDesc, "batch_pic_desc")
    r = rt()
    for pic in batch.pics:
        if pic.alive:
            pic.alive = False
            r.drop_handle(pic.handle, pic.kind)
    _destroy(batch_pic_desc, BatchPicDesc, "batch_pic_desc")


@api("acldvppGetPicDesc", bare=True, outs=(0,))
def dvpp_get_pic_desc(batch_pic_desc, index):
    """The ``index``-th picture description of the batch (0 for a bad handle or index)."""
    batch = _get(batch_pic_desc, BatchPicDesc, "batch_pic_desc")
    i = as_int(index, "index")
    if not 0 <= i < batch.size:
        raise Fail(100000, f"index {i}: the batch holds pictures 0 to {batch.size - 1}")
    return batch.pics[i].handle


def _areas(values, n: int, what: str) -> list[RoiConfig]:
    if not isinstance(values, (list, tuple)):
        raise TypeError(f"{what} must be a list of ROI configs, not {type(values).__name__}")
    if len(values) != n:
        raise Fail(100000, f"{what} has {len(values)} areas; the output batch needs one for "
                           f"each of its {n} pictures")
    return [_get(v, RoiConfig, f"{what}[{k}]") for k, v in enumerate(values)]


def _batch(channel_desc, src, roi_nums, dst, crop_areas, paste_areas, stream, api_name,
           name, resize_config=None):
    _channel(channel_desc)
    sb = _get(src, BatchPicDesc, "src_batch_pic_descs")
    db = _get(dst, BatchPicDesc, "dst_batch_pic_descs")
    s = _stream(stream)
    interpolation = 0 if resize_config is None else \
        _get(resize_config, ResizeConfig, "resize_config").interpolation
    if not isinstance(roi_nums, (list, tuple)):
        raise TypeError(f"roi_nums must be a list, not {type(roi_nums).__name__}")
    nums = [as_int(v, "roi_nums") for v in roi_nums]
    if not 1 <= len(nums) <= MAX_BATCH or len(nums) != sb.size:
        raise Fail(100000, f"roi_nums has {len(nums)} entries; it needs one for each of the "
                           f"{sb.size} input pictures (at most {MAX_BATCH})")
    if min(nums) < 0 or sum(nums) > MAX_BATCH or sum(nums) != db.size:
        raise Fail(100000, f"roi_nums {nums} add up to {sum(nums)}: they must add up to the "
                           f"{db.size} output pictures (at most {MAX_BATCH}), none negative")
    crops = _areas(crop_areas, db.size, "crop_area_list")
    pastes = _areas(paste_areas, db.size, "paste_area_list") if paste_areas is not None \
        else [None] * db.size
    plans, k = [], 0
    for i, n in enumerate(nums):
        for _ in range(n):
            inp, out = sb.pics[i], db.pics[k]
            plans.append((inp, out, _plan(inp, out, crops[k].handle,
                                          pastes[k].handle if pastes[k] else None,
                                          f"picture {i} -> {k}: ")))
            k += 1
    dd = dvpp_device(rt(), s.device)
    for inp, out, (crop, paste) in plans:
        _submit(vpc_task(dd, inp, out, crop, paste, s, api_name, name, interpolation), s)
    return db.handle


@api("acldvppVpcBatchCropAsync", outs=(0,))
def dvpp_vpc_batch_crop_async(dvpp_channel_desc, src_batch_pic_descs, roi_nums_list,
                              dst_batch_pic_descs, crop_area_list, stream):
    """Crop ``roi_nums_list[i]`` areas from each input picture into the output pictures
    (resized to each output's size); returns (dst_batch_pic_descs, ret)."""
    return _batch(dvpp_channel_desc, src_batch_pic_descs, roi_nums_list, dst_batch_pic_descs,
                  crop_area_list, None, stream, "dvpp_vpc_batch_crop_async", "VpcBatchCrop")


@api("acldvppVpcBatchCropAndPasteAsync", outs=(0,))
def dvpp_vpc_batch_crop_and_paste_async(dvpp_channel_desc, src_batch_pic_descs, roi_nums_list,
                                        dst_batch_pic_descs, crop_area_list, paste_area_list,
                                        stream):
    """As dvpp_vpc_batch_crop_async, each crop pasted into its paste area of its output
    picture (the other pixels keep their bytes); returns (dst_batch_pic_descs, ret)."""
    if not isinstance(paste_area_list, (list, tuple)):
        raise TypeError("paste_area_list must be a list of ROI configs, not "
                        f"{type(paste_area_list).__name__}")
    return _batch(dvpp_channel_desc, src_batch_pic_descs, roi_nums_list, dst_batch_pic_descs,
                  crop_area_list, paste_area_list, stream,
                  "dvpp_vpc_batch_crop_and_paste_async", "VpcBatchCropAndPaste")


@api("acldvppVpcBatchCropResizeAsync")
def dvpp_vpc_batch_crop_resize_async(dvpp_channel_desc, src_batch_pic_descs, roi_nums_list,
                                     dst_batch_pic_descs, crop_area_list, resize_config, stream):
    """As dvpp_vpc_batch_crop_async, each crop resized to its output picture with
    ``resize_config``'s algorithm (dvpp_set_resize_config_interpolation); returns ret."""
    _batch(dvpp_channel_desc, src_batch_pic_descs, roi_nums_list, dst_batch_pic_descs,
           crop_area_list, None, stream, "dvpp_vpc_batch_crop_resize_async",
           "VpcBatchCropResize", resize_config)


@api("acldvppVpcBatchCropResizePasteAsync")
def dvpp_vpc_batch_crop_resize_paste_async(dvpp_channel_desc, src_batch_pic_descs,
                                           roi_nums_list, dst_batch_pic_descs, crop_area_list,
                                           paste_area_list, resize_config, stream):
    """As dvpp_vpc_batch_crop_and_paste_async, each crop resized into its paste area with
    ``resize_config``'s algorithm; returns ret."""
    if not isinstance(paste_area_list, (list, tuple)):
        raise TypeError("paste_area_list must be a list of ROI configs, not "
                        f"{type(paste_area_list).__name__}")
    _batch(dvpp_channel_desc, src_batch_pic_descs, roi_nums_list, dst_batch_pic_descs,
           crop_area_list, paste_area_list, stream, "dvpp_vpc_batch_crop_resize_paste_async",
           "VpcBatchCropResizePaste", resize_config)
