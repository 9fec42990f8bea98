"""``acl.media`` configs: ROI (crop and paste areas), resize and JPEGE configurations."""

from __future__ import annotations

from ...dvpp.layouts import INTERPOLATIONS
from ...errors import Fail
from .._api import as_int
from ._desc import JpegeConfig, ResizeConfig, RoiConfig, _destroy, _get, _new, api

__all__ = ["dvpp_create_roi_config", "dvpp_destroy_roi_config", "dvpp_create_resize_config",
           "dvpp_destroy_resize_config", "dvpp_set_resize_config_interpolation",
           "dvpp_get_resize_config_interpolation", "dvpp_create_jpege_config",
           "dvpp_set_jpege_config_level", "dvpp_destroy_jpege_config"]


@api("acldvppCreateRoiConfig", bare=True, outs=(0,))
def dvpp_create_roi_config(left, right, top, bottom):
    """An area from column ``left`` to ``right`` and row ``top`` to ``bottom`` (inclusive).

    VPC needs left and top even, right and bottom odd (checked when the area is used).
    """
    vals = [as_int(v, n) for v, n in ((left, "left"), (right, "right"), (top, "top"),
                                      (bottom, "bottom"))]
    if min(vals) < 0:
        raise Fail(100000, f"ROI offsets must not be negative (got {vals})")
    return _new(RoiConfig(*vals))


@api("acldvppDestroyRoiConfig")
def dvpp_destroy_roi_config(roi_config):
    _destroy(roi_config, RoiConfig, "roi_config")


@api("acldvppCreateResizeConfig", bare=True, outs=(0,))
def dvpp_create_resize_config():
    """A resize configuration (the default interpolation)."""
    return _new(ResizeConfig())


@api("acldvppDestroyResizeConfig")
def dvpp_destroy_resize_config(resize_config):
    _destroy(resize_config, ResizeConfig, "resize_config")


@api("acldvppSetResizeConfigInterpolation")
def dvpp_set_resize_config_interpolation(resize_config, interpolation):
    """The resize algorithm of the VPC calls that take this configuration: 0 the default,
    1 bilinear (as OpenCV), 2 nearest neighbour (as OpenCV), 3 bilinear (as TensorFlow), 4
    nearest neighbour (as TensorFlow); CANN 8.0.0's pyACL reference lists these five for the
    Atlas 200/300/500 inference and Atlas training products. Another value gives 100000.
    Differs from hardware: 0 is Huawei's own high-order filter there; acllab draws it as 1
    (acllab.dvpp.layouts.INTERPOLATIONS)."""
    cfg = _get(resize_config, ResizeConfig, "resize_config")
    value = as_int(interpolation, "interpolation")
    if value not in INTERPOLATIONS:
        raise Fail(100000, f"interpolation {value} is not one of 0 (default), 1 (bilinear, "
                           "OpenCV), 2 (nearest, OpenCV), 3 (bilinear, TensorFlow), "
                           "4 (nearest, TensorFlow)")
    cfg.interpolation = value


@api("acldvppGetResizeConfigInterpolation", bare=True, outs=(0,), needs_init=False)
def dvpp_get_resize_config_interpolation(resize_config):
    """The configuration's resize algorithm (0 for a bad handle, as the other getters)."""
    return _get(resize_config, ResizeConfig, "resize_config").interpolation


@api("acldvppCreateJpegeConfig", bare=True, outs=(0,))
def dvpp_create_jpege_config():
    """A JPEG encoding configuration (level 100)."""
    return _new(JpegeConfig())


@api("acldvppSetJpegeConfigLevel")
def dvpp_set_jpege_config_level(jpege_config, level):
    """The encoding level, 0 to 100 (higher is better quality; 0 encodes like 100)."""
    cfg = _get(jpege_config, JpegeConfig, "jpege_config")
    level = as_int(level, "level")
    if not 0 <= level <= 100:
        raise Fail(100000, f"level must be between 0 and 100 (got {level})")
    cfg.level = level


@api("acldvppDestroyJpegeConfig")
def dvpp_destroy_jpege_config(jpege_config):
    _destroy(jpege_config, JpegeConfig, "jpege_config")
