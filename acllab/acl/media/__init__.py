"""``acl.media``: DVPP memory, channels, picture descriptions, JPEG decode/encode, PNG decode
and VPC.

The calls AclLite's image processing and the classification samples use, with pyACL's
conventions: handles are ints; ``create_*`` and ``get_*`` calls return a bare value (0 on
failure), the others the aclError (or a tuple with it last). The work runs on the device's
JPEGD, VPC and JPEGE engines (:mod:`acllab.dvpp`), in stream order, in virtual time.

A typical pipeline (host JPEG bytes -> model input)::

    info = acl.media.dvpp_jpeg_get_image_info(host_ptr, n)        # (w, h, components, ret)
    size, ret = acl.media.dvpp_jpeg_predict_dec_size(host_ptr, n, PIXEL_FORMAT_YUV_SEMIPLANAR_420)
    jpeg_dev, ret = acl.media.dvpp_malloc(n)
    acl.rt.memcpy_async(jpeg_dev, n, host_ptr, n, ACL_MEMCPY_HOST_TO_DEVICE, stream)
    acl.media.dvpp_jpeg_decode_async(channel, jpeg_dev, n, decoded_desc, stream)
    acl.media.dvpp_vpc_resize_async(channel, decoded_desc, resized_desc, resize_cfg, stream)

Pixel formats (:mod:`acllab.dvpp.layouts` has their layouts, sizes and sources): JPEGD writes
YUV420SP NV12/NV21 from any JPEG, and YUV422SP / YUV444SP from 4:2:2 / 4:4:4 JPEGs; VPC reads
YUV400, YUV420SP, YUV422SP, YUV444SP, packed YUV422 and YUV444, RGB888, BGR888 and the
ARGB8888 family, and writes NV12/NV21 (Ascend 310) or every one of those (Atlas A2, 910B);
JPEGE encodes NV12/NV21; PNGD (``png``) writes RGB888, or RGBA8888 from PNGs with alpha. A
real format an engine or chip does not handle returns ACL_ERROR_FEATURE_UNSUPPORTED 200006
(PNGD's calls: ACL_ERROR_FORMAT_NOT_MATCH 100027, as CANN's).

Differs from hardware: YUV440SP and 10-bit formats are not modelled; a channel is bookkeeping
(every channel shares the device's engines, as on hardware, but there is no per-channel
limit); resizing is bilinear.

Video: ``vdec`` decodes H.264 / H.265 annex-b frames (described by ``stream``'s stream
descriptions) to NV12 / NV21 pictures on the device's VDEC engine, with a real decoder
(PyAV), and delivers each picture to the channel's callback on its report thread; ``venc``
encodes NV12 / NV21 pictures to H.264 / H.265 on the VENC engine (ascend310 profile).

One module per section of pyACL's media API, as ``acl.rt``: ``memory`` (DVPP memory),
``channel``, ``picture`` (picture descriptions), ``config`` (ROI, resize and JPEGE configs),
``jpeg`` (JPEGD and JPEGE), ``png`` (PNGD), ``vpc``, ``batch`` (batch VPC), ``stream`` (stream
descriptions), ``vdec`` and ``venc``; ``_desc`` holds the descriptors behind the handles and
``_checks`` the argument checks the engines share.
"""

from __future__ import annotations

from ...dvpp.formats import (  # the real names, as pyACL programs define them
    ACL_JPEG_CSS_411,
    ACL_JPEG_CSS_420,
    ACL_JPEG_CSS_422,
    ACL_JPEG_CSS_440,
    ACL_JPEG_CSS_444,
    ACL_JPEG_CSS_GRAY,
    ACL_JPEG_CSS_UNKNOWN,
    PIXEL_FORMAT_ABGR_8888,
    PIXEL_FORMAT_ARGB_8888,
    PIXEL_FORMAT_BGR_888,
    PIXEL_FORMAT_BGRA_8888,
    PIXEL_FORMAT_RGB_888,
    PIXEL_FORMAT_RGBA_8888,
    PIXEL_FORMAT_UNKNOWN,
    PIXEL_FORMAT_UYVY_PACKED_422,
    PIXEL_FORMAT_VYUY_PACKED_422,
    PIXEL_FORMAT_YUV_400,
    PIXEL_FORMAT_YUV_PACKED_444,
    PIXEL_FORMAT_YUV_SEMIPLANAR_420,
    PIXEL_FORMAT_YUV_SEMIPLANAR_422,
    PIXEL_FORMAT_YUV_SEMIPLANAR_440,
    PIXEL_FORMAT_YUV_SEMIPLANAR_444,
    PIXEL_FORMAT_YUYV_PACKED_422,
    PIXEL_FORMAT_YVU_SEMIPLANAR_420,
    PIXEL_FORMAT_YVU_SEMIPLANAR_422,
    PIXEL_FORMAT_YVU_SEMIPLANAR_440,
    PIXEL_FORMAT_YVU_SEMIPLANAR_444,
    PIXEL_FORMAT_YVYU_PACKED_422,
)
from ._desc import (  # noqa: F401 (the descriptor types, for checks and tests)
    ChannelDesc,
    JpegeConfig,
    PicDesc,
    ResizeConfig,
    RoiConfig,
    _Desc,
)
from .batch import (
    dvpp_create_batch_pic_desc,
    dvpp_destroy_batch_pic_desc,
    dvpp_get_pic_desc,
    dvpp_vpc_batch_crop_and_paste_async,
    dvpp_vpc_batch_crop_async,
    dvpp_vpc_batch_crop_resize_async,
    dvpp_vpc_batch_crop_resize_paste_async,
)
from .channel import (
    dvpp_create_channel,
    dvpp_create_channel_desc,
    dvpp_destroy_channel,
    dvpp_destroy_channel_desc,
)
from .config import (
    dvpp_create_jpege_config,
    dvpp_create_resize_config,
    dvpp_create_roi_config,
    dvpp_destroy_jpege_config,
    dvpp_destroy_resize_config,
    dvpp_destroy_roi_config,
    dvpp_get_resize_config_interpolation,
    dvpp_set_jpege_config_level,
    dvpp_set_resize_config_interpolation,
    dvpp_set_roi_config,
    dvpp_set_roi_config_bottom,
    dvpp_set_roi_config_left,
    dvpp_set_roi_config_right,
    dvpp_set_roi_config_top,
)
from .jpeg import (
    dvpp_jpeg_decode_async,
    dvpp_jpeg_encode_async,
    dvpp_jpeg_get_image_info,
    dvpp_jpeg_get_image_info_v2,
    dvpp_jpeg_predict_dec_size,
    dvpp_jpeg_predict_enc_size,
)
from .memory import dvpp_free, dvpp_malloc
from .picture import (
    dvpp_create_pic_desc,
    dvpp_destroy_pic_desc,
    dvpp_get_pic_desc_data,
    dvpp_get_pic_desc_format,
    dvpp_get_pic_desc_height,
    dvpp_get_pic_desc_height_stride,
    dvpp_get_pic_desc_ret_code,
    dvpp_get_pic_desc_size,
    dvpp_get_pic_desc_width,
    dvpp_get_pic_desc_width_stride,
    dvpp_set_pic_desc_data,
    dvpp_set_pic_desc_format,
    dvpp_set_pic_desc_height,
    dvpp_set_pic_desc_height_stride,
    dvpp_set_pic_desc_ret_code,
    dvpp_set_pic_desc_size,
    dvpp_set_pic_desc_width,
    dvpp_set_pic_desc_width_stride,
)
from .png import dvpp_png_decode_async, dvpp_png_get_image_info, dvpp_png_predict_dec_size
from .stream import (
    dvpp_create_stream_desc,
    dvpp_destroy_stream_desc,
    dvpp_get_stream_desc_data,
    dvpp_get_stream_desc_eos,
    dvpp_get_stream_desc_format,
    dvpp_get_stream_desc_ret_code,
    dvpp_get_stream_desc_size,
    dvpp_get_stream_desc_timestamp,
    dvpp_set_stream_desc_data,
    dvpp_set_stream_desc_eos,
    dvpp_set_stream_desc_format,
    dvpp_set_stream_desc_ret_code,
    dvpp_set_stream_desc_size,
    dvpp_set_stream_desc_timestamp,
)
from .vdec import (
    H264_BASELINE_LEVEL,
    H264_HIGH_LEVEL,
    H264_MAIN_LEVEL,
    H265_MAIN_LEVEL,
    vdec_create_channel,
    vdec_create_channel_desc,
    vdec_create_frame_config,
    vdec_destroy_channel,
    vdec_destroy_channel_desc,
    vdec_destroy_frame_config,
    vdec_get_channel_desc_callback,
    vdec_get_channel_desc_channel_id,
    vdec_get_channel_desc_entype,
    vdec_get_channel_desc_out_mode,
    vdec_get_channel_desc_out_pic_format,
    vdec_get_channel_desc_out_pic_height,
    vdec_get_channel_desc_out_pic_width,
    vdec_get_channel_desc_ref_frame_num,
    vdec_get_channel_desc_thread_id,
    vdec_send_frame,
    vdec_set_channel_desc_callback,
    vdec_set_channel_desc_channel_id,
    vdec_set_channel_desc_entype,
    vdec_set_channel_desc_out_mode,
    vdec_set_channel_desc_out_pic_format,
    vdec_set_channel_desc_out_pic_height,
    vdec_set_channel_desc_out_pic_width,
    vdec_set_channel_desc_ref_frame_num,
    vdec_set_channel_desc_thread_id,
)
from .venc import (
    venc_create_channel,
    venc_create_channel_desc,
    venc_create_frame_config,
    venc_destroy_channel,
    venc_destroy_channel_desc,
    venc_destroy_frame_config,
    venc_get_channel_desc_buf_size,
    venc_get_channel_desc_callback,
    venc_get_channel_desc_entype,
    venc_get_channel_desc_key_frame_interval,
    venc_get_channel_desc_max_bit_rate,
    venc_get_channel_desc_pic_format,
    venc_get_channel_desc_pic_height,
    venc_get_channel_desc_pic_width,
    venc_get_channel_desc_rc_mode,
    venc_get_channel_desc_src_rate,
    venc_get_channel_desc_thread_id,
    venc_get_frame_config_eos,
    venc_get_frame_config_force_i_frame,
    venc_send_frame,
    venc_set_channel_desc_buf_size,
    venc_set_channel_desc_callback,
    venc_set_channel_desc_entype,
    venc_set_channel_desc_key_frame_interval,
    venc_set_channel_desc_max_bit_rate,
    venc_set_channel_desc_pic_format,
    venc_set_channel_desc_pic_height,
    venc_set_channel_desc_pic_width,
    venc_set_channel_desc_rc_mode,
    venc_set_channel_desc_src_rate,
    venc_set_channel_desc_thread_id,
    venc_set_frame_config_eos,
    venc_set_frame_config_force_i_frame,
)
from .vpc import (
    dvpp_vpc_crop_and_paste_async,
    dvpp_vpc_crop_async,
    dvpp_vpc_crop_resize_async,
    dvpp_vpc_crop_resize_paste_async,
    dvpp_vpc_resize_async,
)

__all__ = [
    "PIXEL_FORMAT_YUV_400", "PIXEL_FORMAT_YUV_SEMIPLANAR_420", "PIXEL_FORMAT_YVU_SEMIPLANAR_420",
    "PIXEL_FORMAT_YUV_SEMIPLANAR_422", "PIXEL_FORMAT_YVU_SEMIPLANAR_422",
    "PIXEL_FORMAT_YUV_SEMIPLANAR_444", "PIXEL_FORMAT_YVU_SEMIPLANAR_444",
    "PIXEL_FORMAT_YUYV_PACKED_422", "PIXEL_FORMAT_UYVY_PACKED_422", "PIXEL_FORMAT_YVYU_PACKED_422",
    "PIXEL_FORMAT_VYUY_PACKED_422", "PIXEL_FORMAT_YUV_PACKED_444", "PIXEL_FORMAT_RGB_888",
    "PIXEL_FORMAT_BGR_888", "PIXEL_FORMAT_ARGB_8888", "PIXEL_FORMAT_ABGR_8888",
    "PIXEL_FORMAT_RGBA_8888", "PIXEL_FORMAT_BGRA_8888", "PIXEL_FORMAT_YUV_SEMIPLANAR_440",
    "PIXEL_FORMAT_YVU_SEMIPLANAR_440", "PIXEL_FORMAT_UNKNOWN",
    "ACL_JPEG_CSS_444", "ACL_JPEG_CSS_422", "ACL_JPEG_CSS_420", "ACL_JPEG_CSS_GRAY",
    "ACL_JPEG_CSS_440", "ACL_JPEG_CSS_411", "ACL_JPEG_CSS_UNKNOWN",
    "dvpp_malloc", "dvpp_free",
    "dvpp_create_channel_desc", "dvpp_destroy_channel_desc", "dvpp_create_channel",
    "dvpp_destroy_channel",
    "dvpp_create_pic_desc", "dvpp_destroy_pic_desc",
    "dvpp_set_pic_desc_data", "dvpp_set_pic_desc_size", "dvpp_set_pic_desc_format",
    "dvpp_set_pic_desc_width", "dvpp_set_pic_desc_height", "dvpp_set_pic_desc_width_stride",
    "dvpp_set_pic_desc_height_stride", "dvpp_set_pic_desc_ret_code",
    "dvpp_get_pic_desc_data", "dvpp_get_pic_desc_size", "dvpp_get_pic_desc_format",
    "dvpp_get_pic_desc_width", "dvpp_get_pic_desc_height", "dvpp_get_pic_desc_width_stride",
    "dvpp_get_pic_desc_height_stride",
    "dvpp_get_pic_desc_ret_code",
    "dvpp_create_roi_config", "dvpp_destroy_roi_config", "dvpp_set_roi_config",
    "dvpp_set_roi_config_left", "dvpp_set_roi_config_right", "dvpp_set_roi_config_top",
    "dvpp_set_roi_config_bottom",
    "dvpp_create_resize_config", "dvpp_destroy_resize_config",
    "dvpp_set_resize_config_interpolation", "dvpp_get_resize_config_interpolation",
    "dvpp_create_jpege_config", "dvpp_set_jpege_config_level", "dvpp_destroy_jpege_config",
    "dvpp_jpeg_get_image_info", "dvpp_jpeg_get_image_info_v2", "dvpp_jpeg_predict_dec_size",
    "dvpp_jpeg_decode_async",
    "dvpp_png_get_image_info", "dvpp_png_predict_dec_size", "dvpp_png_decode_async",
    "dvpp_vpc_resize_async", "dvpp_vpc_crop_async", "dvpp_vpc_crop_and_paste_async",
    "dvpp_vpc_crop_resize_async", "dvpp_vpc_crop_resize_paste_async",
    "dvpp_create_batch_pic_desc", "dvpp_destroy_batch_pic_desc", "dvpp_get_pic_desc",
    "dvpp_vpc_batch_crop_async", "dvpp_vpc_batch_crop_and_paste_async",
    "dvpp_vpc_batch_crop_resize_async", "dvpp_vpc_batch_crop_resize_paste_async",
    "dvpp_jpeg_predict_enc_size", "dvpp_jpeg_encode_async",
    "H265_MAIN_LEVEL", "H264_BASELINE_LEVEL", "H264_MAIN_LEVEL", "H264_HIGH_LEVEL",
    "dvpp_create_stream_desc", "dvpp_destroy_stream_desc",
    "dvpp_set_stream_desc_data", "dvpp_set_stream_desc_size", "dvpp_set_stream_desc_format",
    "dvpp_set_stream_desc_timestamp", "dvpp_set_stream_desc_ret_code",
    "dvpp_set_stream_desc_eos",
    "dvpp_get_stream_desc_data", "dvpp_get_stream_desc_size", "dvpp_get_stream_desc_format",
    "dvpp_get_stream_desc_timestamp", "dvpp_get_stream_desc_ret_code",
    "dvpp_get_stream_desc_eos",
    "vdec_create_channel_desc", "vdec_destroy_channel_desc",
    "vdec_set_channel_desc_channel_id", "vdec_get_channel_desc_channel_id",
    "vdec_set_channel_desc_thread_id", "vdec_get_channel_desc_thread_id",
    "vdec_set_channel_desc_callback", "vdec_get_channel_desc_callback",
    "vdec_set_channel_desc_entype", "vdec_get_channel_desc_entype",
    "vdec_set_channel_desc_out_pic_format", "vdec_get_channel_desc_out_pic_format",
    "vdec_set_channel_desc_out_pic_width", "vdec_get_channel_desc_out_pic_width",
    "vdec_set_channel_desc_out_pic_height", "vdec_get_channel_desc_out_pic_height",
    "vdec_set_channel_desc_ref_frame_num", "vdec_get_channel_desc_ref_frame_num",
    "vdec_set_channel_desc_out_mode", "vdec_get_channel_desc_out_mode",
    "vdec_create_frame_config", "vdec_destroy_frame_config",
    "vdec_create_channel", "vdec_destroy_channel", "vdec_send_frame",
    "venc_create_channel_desc",
    "venc_destroy_channel_desc",
    "venc_set_channel_desc_thread_id",
    "venc_get_channel_desc_thread_id",
    "venc_set_channel_desc_callback",
    "venc_get_channel_desc_callback",
    "venc_set_channel_desc_entype",
    "venc_get_channel_desc_entype",
    "venc_set_channel_desc_pic_format",
    "venc_get_channel_desc_pic_format",
    "venc_set_channel_desc_pic_width",
    "venc_get_channel_desc_pic_width",
    "venc_set_channel_desc_pic_height",
    "venc_get_channel_desc_pic_height",
    "venc_set_channel_desc_key_frame_interval",
    "venc_get_channel_desc_key_frame_interval",
    "venc_set_channel_desc_buf_size",
    "venc_get_channel_desc_buf_size",
    "venc_set_channel_desc_rc_mode",
    "venc_get_channel_desc_rc_mode",
    "venc_set_channel_desc_src_rate",
    "venc_get_channel_desc_src_rate",
    "venc_set_channel_desc_max_bit_rate",
    "venc_get_channel_desc_max_bit_rate",
    "venc_create_frame_config",
    "venc_destroy_frame_config",
    "venc_set_frame_config_eos",
    "venc_get_frame_config_eos",
    "venc_set_frame_config_force_i_frame",
    "venc_get_frame_config_force_i_frame",
    "venc_create_channel",
    "venc_destroy_channel",
    "venc_send_frame",
]

