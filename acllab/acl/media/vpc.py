"""``acl.media`` VPC: resize, crop, and crop-and-paste."""

from __future__ import annotations

from ...dvpp import layouts as L
from ...dvpp.tasks import dvpp_device, vpc_task
from ...errors import Fail
from .._api import rt
from ._checks import _roi, _stream, _submit, _vpc_picture
from ._desc import PicDesc, ResizeConfig, RoiConfig, _get, api
from .channel import _channel

__all__ = ["dvpp_vpc_resize_async", "dvpp_vpc_crop_async", "dvpp_vpc_crop_and_paste_async",
           "dvpp_vpc_crop_resize_async", "dvpp_vpc_crop_resize_paste_async"]


def _vpc(channel_desc, input_desc, output_desc, stream, crop_area, paste_area, api_name,
         name, resize_config=None) -> None:
    _channel(channel_desc)
    inp = _get(input_desc, PicDesc, "input_desc")
    out = _get(output_desc, PicDesc, "output_desc")
    interpolation = 0 if resize_config is None else \
        _get(resize_config, ResizeConfig, "resize_config").interpolation
    s = _stream(stream)
    plan = _plan(inp, out, crop_area, paste_area, large=api_name == "dvpp_vpc_resize_async")
    _submit(vpc_task(dvpp_device(rt(), s.device), inp, out, *plan, s, api_name, name,
                     interpolation), s)


def _plan(inp: PicDesc, out: PicDesc, crop_area, paste_area, what: str = "",
          large: bool = False) -> tuple:
    """Check one VPC task's pictures and areas: its (crop, paste) areas, or Fail. ``large``:
    the input may be up to 8192 x 8192 in YUV420SP (acldvppVpcResizeAsync's)."""
    _vpc_picture(inp, f"{what}input_desc", large=large)
    _vpc_picture(out, f"{what}output_desc", output=True)
    iw, ih = L.layout(inp.format).covered(inp.width, inp.height)
    if crop_area is None:
        crop = (0, iw - 1, 0, ih - 1)
    else:
        crop = _roi(_get(crop_area, RoiConfig, "crop_area"), iw, ih, "crop_area")
    if paste_area is None:
        olay = L.layout(out.format)
        if olay.covered(out.width, out.height) != (out.width, out.height):
            raise Fail(100000, f"output_desc is {out.width} x {out.height}; VPC's {olay.name} "
                               f"output needs a width and height that are multiples of "
                               f"{olay.sub[0]} and {olay.sub[1]}")
        paste = (0, out.width - 1, 0, out.height - 1)
    else:
        paste = _roi(_get(paste_area, RoiConfig, "paste_area"), out.width, out.height,
                     "paste_area", paste=True)
    sx = (paste[1] - paste[0] + 1) / (crop[1] - crop[0] + 1)
    sy = (paste[3] - paste[2] + 1) / (crop[3] - crop[2] + 1)
    if not (1 / 32 <= sx <= 16 and 1 / 32 <= sy <= 16):
        raise Fail(100000, f"scaling by {sx:.3g} x {sy:.3g}: VPC scales by 1/32 to 16")
    if inp.region is out.region and inp.data == out.data:
        raise Fail(100000, f"{what}input_desc and output_desc share one buffer; VPC needs a "
                           "separate output")
    return crop, paste


@api("acldvppVpcResizeAsync")
def dvpp_vpc_resize_async(channel_desc, input_desc, output_desc, resize_config, stream):
    """Enqueue a resize of the whole input picture to the output picture's width and height.

    With the algorithm ``resize_config`` names (dvpp_set_resize_config_interpolation; its
    default is drawn bilinearly: see acllab.dvpp.formats.resize_planes for how it differs from
    the VPC's filter). Input and output formats may differ (NV12 to NV21, RGB888 to NV12,
    NV12 to RGB888 on Atlas A2 ...): the task converts (acllab.dvpp.layouts).
    """
    _vpc(channel_desc, input_desc, output_desc, stream, None, None, "dvpp_vpc_resize_async",
         "VpcResize", resize_config)


@api("acldvppVpcCropAsync")
def dvpp_vpc_crop_async(channel_desc, input_desc, output_desc, crop_area, stream):
    """Enqueue a crop of ``crop_area``; resized when the output's size differs from it."""
    _vpc(channel_desc, input_desc, output_desc, stream, crop_area, None,
         "dvpp_vpc_crop_async", "VpcCrop")


@api("acldvppVpcCropAndPasteAsync")
def dvpp_vpc_crop_and_paste_async(channel_desc, input_desc, output_desc, crop_area,
                                  paste_area, stream):
    """Enqueue a crop of ``crop_area`` pasted (resized if needed) into ``paste_area`` of the
    output; the output's other pixels keep their bytes (the canvas)."""
    _vpc(channel_desc, input_desc, output_desc, stream, crop_area, paste_area,
         "dvpp_vpc_crop_and_paste_async", "VpcCropAndPaste")


@api("acldvppVpcCropResizeAsync")
def dvpp_vpc_crop_resize_async(channel_desc, input_desc, output_desc, crop_area, resize_config,
                               stream):
    """Enqueue a crop of ``crop_area``, resized to the output picture with ``resize_config``'s
    algorithm when their sizes differ (CANN: acldvppVpcCropResizeAsync)."""
    _vpc(channel_desc, input_desc, output_desc, stream, crop_area, None,
         "dvpp_vpc_crop_resize_async", "VpcCropResize", resize_config)


@api("acldvppVpcCropResizePasteAsync")
def dvpp_vpc_crop_resize_paste_async(channel_desc, input_desc, output_desc, crop_area,
                                     paste_area, resize_config, stream):
    """Enqueue a crop of ``crop_area`` pasted into ``paste_area`` of the output, resized with
    ``resize_config``'s algorithm when the areas' sizes differ; the output's other pixels keep
    their bytes (CANN: acldvppVpcCropResizePasteAsync)."""
    _vpc(channel_desc, input_desc, output_desc, stream, crop_area, paste_area,
         "dvpp_vpc_crop_resize_paste_async", "VpcCropResizePaste", resize_config)
