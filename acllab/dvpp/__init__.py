"""DVPP, the Ascend chips' media engines: JPEG decode (JPEGD), VPC resize/crop, JPEG encode,
PNG decode (PNGD).

``layouts`` holds every pixel format's memory layout, size and conversions; ``formats`` the
format constants, stride rules and the JPEG work (numpy, Pillow for the JPEG bitstream);
``png`` PNGD's header, strides, sizes and pixels;
``tasks`` the engines, DVPP memory and the tasks with their timing. The pyACL facade is
:mod:`acllab.acl.media`.
"""

from __future__ import annotations

from . import formats, layouts, png, tasks
from .formats import (
    PIXEL_FORMAT_UNKNOWN,
    PIXEL_FORMAT_YUV_400,
    PIXEL_FORMAT_YUV_SEMIPLANAR_420,
    PIXEL_FORMAT_YVU_SEMIPLANAR_420,
)
from .tasks import DvppDevice, dvpp_device, dvpp_ns

__all__ = ["formats", "layouts", "png", "tasks", "DvppDevice", "dvpp_device", "dvpp_ns",
           "PIXEL_FORMAT_YUV_400", "PIXEL_FORMAT_YUV_SEMIPLANAR_420",
           "PIXEL_FORMAT_YVU_SEMIPLANAR_420", "PIXEL_FORMAT_UNKNOWN"]
