"""``acl.media`` configs: ROI (crop and paste areas), resize and JPEGE configurations."""

from __future__ import annotations

from ...dvpp.layouts import INTERPOLATIONS
from ...errors import Fail
from .._api import as_int
from ._desc import JpegeConfig, ResizeConfig, RoiConfig, _destroy, _get, _new, api

__all__ = ["dvpp_create_roi_config", "dvpp_destroy_roi_config", "dvpp_set_roi_config",
           "dvpp_set_roi_config_left", "dvpp_set_roi_config_right", "dvpp_set_roi_config_top",
           "dvpp_set_roi_config_bottom", "dvpp_create_resize_config",
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


#: The largest offset an area holds: CANN keeps each as 16 bits, and its
#: acldvppSetRoiConfig series refuses a larger value with ACL_ERROR_INVALID_PARAM (100000)
#: (CANN's AscendCL source, acl dvpp: acldvppSetRoiConfigLeft... "param great than
#: UINT16_MAX"; pyACL's acl.media.dvpp_set_roi_config(_left/_right/_top/_bottom) wrap them).
ROI_MAX = 0xFFFF


def _roi_offsets(roi_config, **offsets) -> RoiConfig:
    cfg = _get(roi_config, RoiConfig, "roi_config")
    vals = {name: as_int(v, name) for name, v in offsets.items()}
    bad = {name: v for name, v in vals.items() if not 0 <= v <= ROI_MAX}
    if bad:
        raise Fail(100000, "ROI offsets must be between 0 and 65535 (got "
                           + ", ".join(f"{n} {v}" for n, v in bad.items()) + ")")
    for name, v in vals.items():
        setattr(cfg, name, v)
    return cfg


@api("acldvppSetRoiConfig")
def dvpp_set_roi_config(roi_config, left, right, top, bottom):
    """Change all four offsets of an area (as acldvppCreateRoiConfig gives them); a value
    above 65535 gives 100000 and changes none."""
    _roi_offsets(roi_config, left=left, right=right, top=top, bottom=bottom)


@api("acldvppSetRoiConfigLeft")
def dvpp_set_roi_config_left(roi_config, left):
    """Change an area's left column (at most 65535, else 100000)."""
    _roi_offsets(roi_config, left=left)


@api("acldvppSetRoiConfigRight")
def dvpp_set_roi_config_right(roi_config, right):
    """Change an area's right column (at most 65535, else 100000)."""
    _roi_offsets(roi_config, right=right)


@api("acldvppSetRoiConfigTop")
def dvpp_set_roi_config_top(roi_config, top):
    """Change an area's top row (at most 65535, else 100000)."""
    _roi_offsets(roi_config, top=top)


@api("acldvppSetRoiConfigBottom")
def dvpp_set_roi_config_bottom(roi_config, bottom):
    """Change an area's bottom row (at most 65535, else 100000)."""
    _roi_offsets(roi_config, bottom=bottom)


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
