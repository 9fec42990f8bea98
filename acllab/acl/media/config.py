"""``acl.media`` configs: ROI (crop and paste areas), resize and JPEGE configurations."""

from __future__ import annotations

from ...errors import Fail
from .._api import as_int
from ._desc import JpegeConfig, ResizeConfig, RoiConfig, _destroy, _get, _new, api

__all__ = ["dvpp_create_roi_config", "dvpp_destroy_roi_config", "dvpp_create_resize_config",
           "dvpp_destroy_resize_config", "dvpp_create_jpege_config",
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
