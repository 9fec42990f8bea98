"""An image pipeline in the style of Ascend's AclLite (``AclLiteImageProc``, ``AclLiteImage``,
``AclLiteModel``, ``AclLiteResource``) runs unchanged under ``acllab profile``.

The program below is written for this test; it makes the calls AclLite's image processing
makes, with its arguments and conventions (read from Ascend/samples,
python/common/acllite/: acllite_imageproc.py, acllite_image.py, acllite_utils.py,
acllite_model.py, acllite_resource.py), spread over modules as AclLite is:

* resources: ``acl.init``, ``set_device``, ``create_context``, ``create_stream``,
  ``get_run_mode`` (ACL_HOST on a PCIe card); teardown in ``__del__`` (a resource list
  destroyed before the stream, the context, ``reset_device`` and ``acl.finalize``).
* an image read from a ``.jpg`` file with ``np.fromfile(dtype=np.byte)``, its size from
  Pillow, its address from ``acl.util.numpy_to_ptr``; copied to DVPP memory by
  ``dvpp_malloc`` and a synchronous ``acl.rt.memcpy`` HOST_TO_DEVICE.
* one channel (``dvpp_create_channel_desc`` / ``dvpp_create_channel``), a resize config and
  a JPEGE config at level 100, created once and destroyed in ``destroy()``.
* picture descriptions set field by field in the order data, format, width, height,
  width stride, height stride, size, always PIXEL_FORMAT_YUV_SEMIPLANAR_420 (NV12).
* JPEG decode: in host run mode and DVPP memory, the output buffer is
  ``yuv420sp_size(width, height) * 3`` bytes (not predict_dec_size, which needs memory the
  host reads); the output description has the picture's own (maybe odd) width and height and
  strides aligned to 128 and 16; the decoded image keeps those strides.
* VPC: input strides as the image has them (16 / 2 aligned when it has none), output
  strides 16 / 2 aligned, output buffer ``yuv420sp_size(stride_w, stride_h)``; resize with
  the resize config; crop-and-paste with a crop area of the even-cropped whole picture and
  a paste area of the whole output (``crop_and_paste_get_roi``) or an aspect-kept area at
  the top left (``crop_and_paste``), onto a canvas straight from dvpp_malloc.
* JPEG encode: ``dvpp_jpeg_predict_enc_size``, a DVPP buffer of that size, the size passed
  as the address of an int32 numpy array (``numpy_to_ptr``) that receives the encoded length.
* every async call followed by ``synchronize_stream`` on the one stream; return codes
  checked against 0; descriptions destroyed after use; DVPP buffers freed by
  ``dvpp_free`` when an image is destroyed.
* a model loaded from a file; its input dataset takes the resized picture's DVPP buffer
  and size as they are (the model has static AIPP from YUV420SP_U8, as AclLite's samples'
  models do); outputs in ``acl.rt.malloc`` memory (NORMAL_ONLY), copied back with
  ``acl.rt.memcpy`` DEVICE_TO_HOST into a ``bytes`` object via ``acl.util.bytes_to_ptr``.

The test checks the program's pictures against Pillow / numpy references computed here,
the model's output against the model run on the reference picture, and that the trace shows
the work on the JPEGD, VPC and JPEGE lanes.
"""

from __future__ import annotations

import io
import json
import re
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from PIL import Image

W, H = 301, 161          # odd on purpose: AclLite keeps the JPEG's own width and height
MW, MH = 64, 48          # the model's input

GRAPH = {"format": "acllab-graph", "version": 1, "name": "yuvnet", "dtype": "fp16",
         "inputs": [{"name": "data", "shape": [1, 3, MH, MW], "dtype": "fp32",
                     "format": "NCHW"}],
         "outputs": [{"name": "logits", "dtype": "fp32"}],
         "ops": [{"type": "Conv2D", "name": "conv", "inputs": ["data"], "outputs": ["c1"],
                  "attrs": {"out_channels": 4, "kernel": 3, "pad": 1, "bias": True}},
                 {"type": "GlobalAvgPool", "name": "gap", "inputs": ["c1"], "outputs": ["g"]},
                 {"type": "Flatten", "name": "feat", "inputs": ["g"], "outputs": ["f"]},
                 {"type": "FullyConnected", "name": "fc", "inputs": ["f"],
                  "outputs": ["logits"], "attrs": {"out_features": 5}}],
         "weights": {"init": "seeded", "seed": 5}}

# the classification samples' AIPP: YUV420SP from the DVPP, BT.601 full-range CSC to RGB
AIPP = f"""aipp_op {{
    aipp_mode : static
    related_input_rank : 0
    input_format : YUV420SP_U8
    src_image_size_w : {MW}
    src_image_size_h : {MH}
    crop : false
    csc_switch : true
    rbuv_swap_switch : false
    matrix_r0c0 : 256
    matrix_r0c1 : 0
    matrix_r0c2 : 359
    matrix_r1c0 : 256
    matrix_r1c1 : -88
    matrix_r1c2 : -183
    matrix_r2c0 : 256
    matrix_r2c1 : 454
    matrix_r2c2 : 0
    input_bias_0 : 0
    input_bias_1 : 128
    input_bias_2 : 128
    mean_chn_0 : 104
    mean_chn_1 : 117
    mean_chn_2 : 123
    var_reci_chn_0 : 0.0171
    var_reci_chn_1 : 0.0175
    var_reci_chn_2 : 0.0174
}}
"""

MODULES = {
    "lite_const.py": '''
        ACL_SUCCESS = 0
        ACL_DEVICE, ACL_HOST = 0, 1
        ACL_MEM_MALLOC_NORMAL_ONLY = 2
        ACL_MEMCPY_HOST_TO_HOST, ACL_MEMCPY_HOST_TO_DEVICE = 0, 1
        ACL_MEMCPY_DEVICE_TO_HOST, ACL_MEMCPY_DEVICE_TO_DEVICE = 2, 3
        MEMORY_NORMAL, MEMORY_HOST, MEMORY_DEVICE, MEMORY_DVPP = 0, 1, 2, 3
        PIXEL_FORMAT_YUV_SEMIPLANAR_420 = 1
        ACL_FLOAT = 0
    ''',
    "lite_utils.py": '''
        import acl

        import lite_const as C


        def check_ret(what, ret):
            if ret != 0:
                raise Exception("{} failed ret={}".format(what, ret))


        def align_up(value, align):
            return int(int((value + align - 1) / align) * align)


        def yuv420sp_size(width, height):
            return int(width * height * 3 / 2)


        def copy_to_dvpp(ptr, size, run_mode):
            kind = C.ACL_MEMCPY_HOST_TO_DEVICE
            if run_mode == C.ACL_DEVICE:
                kind = C.ACL_MEMCPY_DEVICE_TO_DEVICE
            buf, ret = acl.media.dvpp_malloc(size)
            check_ret("acl.media.dvpp_malloc", ret)
            check_ret("acl.rt.memcpy", acl.rt.memcpy(buf, size, ptr, size, kind))
            return buf


        def dvpp_to_bytes(ptr, size):
            out = bytes(size)
            check_ret("acl.rt.memcpy", acl.rt.memcpy(acl.util.bytes_to_ptr(out), size, ptr, size,
                                                     C.ACL_MEMCPY_DEVICE_TO_HOST))
            return out
    ''',
    "lite_resource.py": '''
        import acl

        from lite_utils import check_ret


        class Resources:
            """Everything holding ACL objects registers here, released before the device."""

            def __init__(self):
                self.items = []

            def register(self, obj):
                self.items.append(obj)

            def destroy(self):
                for obj in reversed(self.items):
                    obj.destroy()
                self.items = []


        resources = Resources()


        class Resource:
            def __init__(self, device_id=0):
                self.device_id = device_id
                self.context = self.stream = None

            def init(self):
                check_ret("acl.init", acl.init())
                check_ret("acl.rt.set_device", acl.rt.set_device(self.device_id))
                self.context, ret = acl.rt.create_context(self.device_id)
                check_ret("acl.rt.create_context", ret)
                self.stream, ret = acl.rt.create_stream()
                check_ret("acl.rt.create_stream", ret)
                self.run_mode, ret = acl.rt.get_run_mode()
                check_ret("acl.rt.get_run_mode", ret)

            def __del__(self):
                resources.destroy()
                if self.stream:
                    acl.rt.destroy_stream(self.stream)
                if self.context:
                    acl.rt.destroy_context(self.context)
                acl.rt.reset_device(self.device_id)
                acl.finalize()
                print("resources released")
    ''',
    "lite_image.py": '''
        import numpy as np
        from PIL import Image

        import acl
        import lite_const as C
        import lite_utils as U


        class Picture:
            """Image bytes (a numpy array read from a file, or a buffer) and their geometry."""

            run_mode, _ = acl.rt.get_run_mode()      # asked at import time, as AclLite does

            def __init__(self, data, width=0, height=0, stride_w=0, stride_h=0, size=0,
                         memory=C.MEMORY_NORMAL):
                self.width, self.height = width, height
                self.stride_w, self.stride_h = stride_w, stride_h
                self.memory = memory
                if isinstance(data, str):
                    self._data = np.fromfile(data, dtype=np.byte)
                    self.size = self._data.itemsize * self._data.size
                    self.width, self.height = Image.open(data).size
                else:
                    self._data, self.size = data, size

            def data(self):
                if isinstance(self._data, np.ndarray):
                    return acl.util.numpy_to_ptr(self._data)
                return self._data

            def is_local(self):
                if Picture.run_mode == C.ACL_DEVICE:
                    return True
                return self.memory in (C.MEMORY_NORMAL, C.MEMORY_HOST)

            def copy_to_dvpp(self):
                ptr = U.copy_to_dvpp(self.data(), self.size, self.run_mode)
                return Picture(ptr, self.width, self.height, 0, 0, self.size, C.MEMORY_DVPP)

            def to_bytes(self):
                return U.dvpp_to_bytes(self._data, self.size)

            def destroy(self):
                if self._data is None or self.size == 0:
                    return
                if self.memory == C.MEMORY_DVPP:
                    acl.media.dvpp_free(self._data)
                self._data, self.size = None, 0

            def __del__(self):
                self.destroy()
    ''',
    "lite_imageproc.py": '''
        import numpy as np

        import acl
        import lite_const as C
        import lite_utils as U
        from lite_image import Picture
        from lite_resource import resources


        class ImageProc:
            def __init__(self, resource):
                self.stream = resource.stream
                self.run_mode = resource.run_mode
                self.channel = acl.media.dvpp_create_channel_desc()
                U.check_ret("acl.media.dvpp_create_channel",
                            acl.media.dvpp_create_channel(self.channel))
                self.resize_config = acl.media.dvpp_create_resize_config()
                self.jpege_config = acl.media.dvpp_create_jpege_config()
                U.check_ret("acl.media.dvpp_set_jpege_config_level",
                            acl.media.dvpp_set_jpege_config_level(self.jpege_config, 100))
                self.destroyed = False
                resources.register(self)

            def _desc(self, ptr, size, width, height, stride_w, stride_h):
                desc = acl.media.dvpp_create_pic_desc()
                acl.media.dvpp_set_pic_desc_data(desc, ptr)
                acl.media.dvpp_set_pic_desc_format(desc, C.PIXEL_FORMAT_YUV_SEMIPLANAR_420)
                acl.media.dvpp_set_pic_desc_width(desc, width)
                acl.media.dvpp_set_pic_desc_height(desc, height)
                acl.media.dvpp_set_pic_desc_width_stride(desc, stride_w)
                acl.media.dvpp_set_pic_desc_height_stride(desc, stride_h)
                acl.media.dvpp_set_pic_desc_size(desc, size)
                return desc

            def _input_desc(self, image):
                if image.stride_w == 0 and image.stride_h == 0:
                    image.stride_w = U.align_up(image.width, 16)
                    image.stride_h = U.align_up(image.height, 2)
                return self._desc(image.data(), image.size, image.width, image.height,
                                  image.stride_w, image.stride_h)

            def _output(self, width, height):
                sw, sh = U.align_up(width, 16), U.align_up(height, 2)
                size = U.yuv420sp_size(sw, sh)
                buf, ret = acl.media.dvpp_malloc(size)
                U.check_ret("acl.media.dvpp_malloc", ret)
                return buf, size, sw, sh, self._desc(buf, size, width, height, sw, sh)

            def _sync(self, what, ret):
                U.check_ret(what, ret)
                U.check_ret("acl.rt.synchronize_stream", acl.rt.synchronize_stream(self.stream))

            def jpegd(self, image):
                if image.is_local():
                    size, ret = acl.media.dvpp_jpeg_predict_dec_size(
                        image.data(), image.size, C.PIXEL_FORMAT_YUV_SEMIPLANAR_420)
                    U.check_ret("acl.media.dvpp_jpeg_predict_dec_size", ret)
                else:
                    size = int(U.yuv420sp_size(image.width, image.height) * 3)
                buf, ret = acl.media.dvpp_malloc(size)
                U.check_ret("acl.media.dvpp_malloc", ret)
                sw, sh = U.align_up(image.width, 128), U.align_up(image.height, 16)
                desc = self._desc(buf, size, image.width, image.height, sw, sh)
                self._sync("acl.media.dvpp_jpeg_decode_async", acl.media.dvpp_jpeg_decode_async(
                    self.channel, image.data(), image.size, desc, self.stream))
                acl.media.dvpp_destroy_pic_desc(desc)
                return Picture(buf, image.width, image.height, sw, sh, U.yuv420sp_size(sw, sh),
                               C.MEMORY_DVPP)

            def resize(self, image, width, height):
                inp = self._input_desc(image)
                buf, size, sw, sh, out = self._output(width, height)
                self._sync("acl.media.dvpp_vpc_resize_async", acl.media.dvpp_vpc_resize_async(
                    self.channel, inp, out, self.resize_config, self.stream))
                acl.media.dvpp_destroy_pic_desc(inp)
                acl.media.dvpp_destroy_pic_desc(out)
                return Picture(buf, width, height, sw, sh, size, C.MEMORY_DVPP)

            def _crop_and_paste(self, image, width, height, out_w, out_h, paste):
                inp = self._input_desc(image)
                buf, size, sw, sh, out = self._output(out_w, out_h)
                crop = acl.media.dvpp_create_roi_config(0, (width >> 1 << 1) - 1, 0,
                                                        (height >> 1 << 1) - 1)
                area = acl.media.dvpp_create_roi_config(*paste)
                self._sync("acl.media.dvpp_vpc_crop_and_paste_async",
                           acl.media.dvpp_vpc_crop_and_paste_async(self.channel, inp, out, crop,
                                                                   area, self.stream))
                for roi in (crop, area):
                    acl.media.dvpp_destroy_roi_config(roi)
                acl.media.dvpp_destroy_pic_desc(inp)
                acl.media.dvpp_destroy_pic_desc(out)
                return Picture(buf, out_w, out_h, sw, sh, size, C.MEMORY_DVPP)

            def crop_and_paste_get_roi(self, image, width, height, out_w, out_h):
                return self._crop_and_paste(image, width, height, out_w, out_h,
                                            (0, out_w - 1, 0, out_h - 1))

            def crop_and_paste(self, image, width, height, out_w, out_h):
                # keep the aspect ratio: paste at the top left, odd right and bottom offsets
                rx, ry = float(width) / out_w, float(height) / out_h
                if rx > ry:
                    dx, dy = 0, int((out_h - height / rx) / 2)
                else:
                    dx, dy = int((out_w - width / ry) / 2), 0
                right, bottom = int(out_w - 2 * dx), int(out_h - 2 * dy)
                right -= 1 if right % 2 == 0 else 0
                bottom -= 1 if bottom % 2 == 0 else 0
                return self._crop_and_paste(image, width, height, out_w, out_h,
                                            (0, right, 0, bottom))

            def jpege(self, image):
                inp = self._input_desc(image)
                size, ret = acl.media.dvpp_jpeg_predict_enc_size(inp, self.jpege_config)
                U.check_ret("acl.media.dvpp_jpeg_predict_enc_size", ret)
                buf, ret = acl.media.dvpp_malloc(size)
                U.check_ret("acl.media.dvpp_malloc", ret)
                size_array = np.array([size], dtype=np.int32)
                size_ptr = acl.util.numpy_to_ptr(size_array)
                self._sync("acl.media.dvpp_jpeg_encode_async", acl.media.dvpp_jpeg_encode_async(
                    self.channel, inp, buf, size_ptr, self.jpege_config, self.stream))
                acl.media.dvpp_destroy_pic_desc(inp)
                return Picture(buf, image.width, image.height, 0, 0, int(size_array[0]),
                               C.MEMORY_DVPP)

            def destroy(self):
                if self.destroyed:
                    return
                acl.media.dvpp_destroy_resize_config(self.resize_config)
                acl.media.dvpp_destroy_channel(self.channel)
                acl.media.dvpp_destroy_channel_desc(self.channel)
                acl.media.dvpp_destroy_jpege_config(self.jpege_config)
                self.destroyed = True
    ''',
    "lite_model.py": '''
        import numpy as np

        import acl
        import lite_const as C
        from lite_image import Picture
        from lite_resource import resources
        from lite_utils import check_ret


        class Model:
            def __init__(self, path):
                self.model_id, ret = acl.mdl.load_from_file(path)
                check_ret("acl.mdl.load_from_file", ret)
                self.desc = acl.mdl.create_desc()
                check_ret("acl.mdl.get_desc", acl.mdl.get_desc(self.desc, self.model_id))
                self.outputs = acl.mdl.create_dataset()
                for i in range(acl.mdl.get_num_outputs(self.desc)):
                    size = acl.mdl.get_output_size_by_index(self.desc, i)
                    buf, ret = acl.rt.malloc(size, C.ACL_MEM_MALLOC_NORMAL_ONLY)
                    check_ret("acl.rt.malloc", ret)
                    _, ret = acl.mdl.add_dataset_buffer(self.outputs,
                                                        acl.create_data_buffer(buf, size))
                    check_ret("acl.mdl.add_dataset_buffer", ret)
                self.destroyed = False
                resources.register(self)

            def execute(self, inputs):
                _, ret = acl.mdl.get_input_index_by_name(self.desc, "ascend_mbatch_shape_data")
                assert ret != 0                     # a static model: AclLite's probe fails
                dataset = acl.mdl.create_dataset()
                for i, item in enumerate(inputs):
                    assert isinstance(item, Picture)
                    if item.size != acl.mdl.get_input_size_by_index(self.desc, i):
                        print("input %d: size %d is not the model's" % (i, item.size))
                    _, ret = acl.mdl.add_dataset_buffer(
                        dataset, acl.create_data_buffer(item.data(), item.size))
                    check_ret("acl.mdl.add_dataset_buffer", ret)
                check_ret("acl.mdl.execute", acl.mdl.execute(self.model_id, dataset,
                                                             self.outputs))
                for i in range(acl.mdl.get_dataset_num_buffers(dataset)):
                    acl.destroy_data_buffer(acl.mdl.get_dataset_buffer(dataset, i))
                acl.mdl.destroy_dataset(dataset)
                results = []
                for i in range(acl.mdl.get_dataset_num_buffers(self.outputs)):
                    buf = acl.mdl.get_dataset_buffer(self.outputs, i)
                    size = int(acl.get_data_buffer_size(buf))
                    dims, ret = acl.mdl.get_output_dims(self.desc, i)
                    assert acl.mdl.get_output_data_type(self.desc, i) == C.ACL_FLOAT
                    host = np.zeros(size // 4, np.float32).tobytes()
                    check_ret("acl.rt.memcpy", acl.rt.memcpy(
                        acl.util.bytes_to_ptr(host), len(host), acl.get_data_buffer_addr(buf),
                        size, C.ACL_MEMCPY_DEVICE_TO_HOST))
                    results.append(np.frombuffer(host, np.float32).reshape(dims["dims"]).copy())
                return results

            def destroy(self):
                if self.destroyed:
                    return
                for i in range(acl.mdl.get_dataset_num_buffers(self.outputs)):
                    buf = acl.mdl.get_dataset_buffer(self.outputs, i)
                    acl.rt.free(acl.get_data_buffer_addr(buf))
                    acl.destroy_data_buffer(buf)
                acl.mdl.destroy_dataset(self.outputs)
                acl.mdl.destroy_desc(self.desc)
                check_ret("acl.mdl.unload", acl.mdl.unload(self.model_id))
                self.destroyed = True
    ''',
    "classify.py": '''
        import sys

        import numpy as np

        from lite_image import Picture
        from lite_imageproc import ImageProc
        from lite_model import Model
        from lite_resource import Resource

        MODEL_W, MODEL_H = int(sys.argv[3]), int(sys.argv[4])


        def keep(name, picture):
            np.save(name, np.frombuffer(picture.to_bytes(), np.uint8))


        class Classifier:
            def __init__(self, model_path):
                self.resource = Resource(0)
                self.resource.init()
                self.dvpp = ImageProc(self.resource)
                self.model = Model(model_path)

            def pre_process(self, image):
                image_dvpp = image.copy_to_dvpp()
                yuv = self.dvpp.jpegd(image_dvpp)
                keep("decoded.npy", yuv)
                print("decoded", yuv.width, yuv.height, yuv.stride_w, yuv.stride_h, yuv.size)
                resized = self.dvpp.resize(yuv, MODEL_W, MODEL_H)
                keep("resized.npy", resized)
                roi = self.dvpp.crop_and_paste_get_roi(yuv, image.width, image.height,
                                                       MODEL_W, MODEL_H)
                keep("roi.npy", roi)
                kept = self.dvpp.crop_and_paste(yuv, image.width, image.height, MODEL_W, MODEL_H)
                keep("aspect.npy", kept)
                jpeg = self.dvpp.jpege(resized)
                with open("resized.jpg", "wb") as f:
                    f.write(jpeg.to_bytes())
                print("encoded", jpeg.size)
                return resized

            def inference(self, picture):
                return self.model.execute([picture])


        classifier = Classifier(sys.argv[1])
        image = Picture(sys.argv[2])
        print("image", image.width, image.height, image.size)
        result = classifier.inference(classifier.pre_process(image))
        np.save("logits.npy", result[0])
        print("top", int(np.argmax(result[0])))
        print("main done")
    ''',
}


def scene(w: int, h: int) -> np.ndarray:
    """A smooth picture (JPEG keeps it close to the original) with a few colour areas."""
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float64)
    blob = 255 * np.exp(-((xx - w / 3) ** 2 + (yy - h / 2) ** 2) / (2 * (min(w, h) / 4) ** 2))
    rgb = np.dstack([xx * 255 / (w - 1), yy * 255 / (h - 1), blob])
    return np.clip(np.rint(rgb), 0, 255).astype(np.uint8)


def _atc(tmp_path, *flags):
    proc = subprocess.run([sys.executable, "-m", "acllab.cli", "atc", "--framework=5",
                           "--soc_version=Ascend310", *flags], capture_output=True, text=True,
                          timeout=120, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "ATC run success" in proc.stdout


def _trial(tmp, *device):
    (tmp / "net.json").write_text(json.dumps(GRAPH))
    (tmp / "aipp.cfg").write_text(AIPP)
    _atc(tmp, "--model=net.json", "--output=yuvnet", "--insert_op_conf=aipp.cfg",
         "--output_type=FP32", "--log=error")
    for name, source in MODULES.items():
        (tmp / name).write_text(textwrap.dedent(source).lstrip())
    Image.fromarray(scene(W, H)).save(tmp / "dog.jpg", format="JPEG", quality=95)
    proc = subprocess.run([sys.executable, "-m", "acllab.cli", "profile", *device, "--out",
                           "trace.json", "classify.py", "yuvnet.om", "dog.jpg", str(MW),
                           str(MH)], capture_output=True, text=True, timeout=300, cwd=tmp)
    return tmp, proc


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    return _trial(tmp_path_factory.mktemp("acllite"))


# ---- references, computed here from Pillow's decode ---------------------------------------

def ref_planes() -> tuple[np.ndarray, np.ndarray]:
    """The JPEG's Y and 2 x 2-averaged (Cb, Cr) planes, 2-aligned, from Pillow's YCbCr."""
    img = Image.open(io.BytesIO(_jpeg()))
    img.draft("YCbCr", img.size)
    ycc = np.asarray(img.convert("YCbCr"), np.float64)
    ycc = np.pad(ycc, ((0, H % 2), (0, W % 2), (0, 0)), mode="edge")
    c = ycc[:, :, 1:]
    uv = (c[0::2, 0::2] + c[1::2, 0::2] + c[0::2, 1::2] + c[1::2, 1::2]) / 4
    return ycc[:, :, 0], uv


def _jpeg() -> bytes:
    out = io.BytesIO()
    Image.fromarray(scene(W, H)).save(out, format="JPEG", quality=95)
    return out.getvalue()


def linear(plane: np.ndarray, oh: int, ow: int) -> np.ndarray:
    """Half-pixel-centre bilinear resampling of a (h, w[, c]) plane, edges clamped."""
    h, w = plane.shape[:2]

    def taps(n_in, n_out):
        pos = np.clip((np.arange(n_out) + 0.5) * n_in / n_out - 0.5, 0, n_in - 1)
        lo = np.floor(pos).astype(int)
        return lo, np.minimum(lo + 1, n_in - 1), pos - lo

    y0, y1, fy = taps(h, oh)
    x0, x1, fx = taps(w, ow)
    fy = fy.reshape((-1, 1) + (1,) * (plane.ndim - 2))
    fx = fx.reshape((1, -1) + (1,) * (plane.ndim - 2))
    p = plane.astype(np.float64)
    rows = p[y0] * (1 - fy) + p[y1] * fy
    return rows[:, x0] * (1 - fx) + rows[:, x1] * fx


def nv12(buf: np.ndarray, w: int, h: int, ws: int, hs: int):
    y = buf[:ws * hs].reshape(hs, ws)[:h, :w]
    uv = buf[ws * hs:ws * hs * 3 // 2].reshape(hs // 2, ws // 2, 2)[:h // 2, :w // 2]
    return y.astype(np.float64), uv.astype(np.float64)


def close(got: np.ndarray, want: np.ndarray, mean: float, worst: float) -> None:
    err = np.abs(got - want)
    assert err.mean() <= mean and err.max() <= worst, (err.mean(), err.max())


# ---- the run ------------------------------------------------------------------------------

def test_the_program_runs_unchanged_and_tears_down(run):
    tmp, proc = run
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr, proc.stderr
    # one finding, and a true one: crop_and_paste pastes onto a canvas that nothing wrote
    # (AclLite does not clear it), and the program copies the whole picture back
    warnings = [ln for ln in proc.stderr.splitlines() if "AclWarning" in ln]
    assert len(warnings) == 1 and "1 problem" in warnings[0], proc.stderr
    assert proc.stderr.count("[uninitialised-read]") == 1, proc.stderr
    lo, hi = (int(a, 16) for a in re.search(r"memory (0x[0-9a-f]+)-(0x[0-9a-f]+)",
                                             proc.stderr).groups())
    assert hi - lo == MW * MH * 3 // 2          # the aspect-kept picture, nothing else
    lines = proc.stdout.splitlines()
    assert f"image {W} {H} {len(_jpeg())}" in lines
    assert lines.index("main done") < lines.index("resources released")
    assert "is not the model's" not in proc.stdout      # the picture is the model's input
    api = next(ln for ln in lines if ln.startswith("API calls:"))
    assert "errors: 0" in api
    assert "leak" not in proc.stdout.lower()


def test_decode_keeps_acllites_strides_and_matches_pillow(run):
    tmp, _ = run
    sw, sh = -(-W // 128) * 128, -(-H // 16) * 16
    buf = np.load(tmp / "decoded.npy")
    assert buf.size == sw * sh * 3 // 2
    y, uv = nv12(buf, W + 1, H + 1, sw, sh)
    ry, ruv = ref_planes()
    close(y, ry, 0.01, 1)
    close(uv, ruv, 0.3, 1)


def test_resize_matches_a_bilinear_reference(run):
    tmp, _ = run
    ry, ruv = ref_planes()
    y, uv = nv12(np.load(tmp / "resized.npy"), MW, MH, -(-MW // 16) * 16, MH)
    close(y, linear(ry, MH, MW), 0.35, 1)
    close(uv, linear(ruv, MH // 2, MW // 2), 0.4, 1.5)


def test_crop_and_paste_whole_area_is_the_resize_of_the_even_crop(run):
    tmp, _ = run
    ry, ruv = ref_planes()
    ry, ruv = ry[:H // 2 * 2, :W // 2 * 2], ruv[:H // 2, :W // 2]
    y, uv = nv12(np.load(tmp / "roi.npy"), MW, MH, MW, MH)
    close(y, linear(ry, MH, MW), 0.35, 1)
    close(uv, linear(ruv, MH // 2, MW // 2), 0.4, 1.5)


def test_crop_and_paste_keeping_the_aspect_ratio_leaves_the_canvas(run):
    tmp, _ = run
    # W / MW > H / MH: the picture fills the width; the paste area is MW x (odd) rows
    r = W / MW
    dy = int((MH - H / r) / 2)
    bottom = MH - 2 * dy - (1 if (MH - 2 * dy) % 2 == 0 else 0)
    ph = bottom + 1
    assert ph < MH
    ry, ruv = ref_planes()
    ry, ruv = ry[:H // 2 * 2, :W // 2 * 2], ruv[:H // 2, :W // 2]
    buf = np.load(tmp / "aspect.npy")
    y, uv = nv12(buf, MW, MH, MW, MH)
    close(y[:ph], linear(ry, ph, MW), 0.35, 1)
    close(uv[:ph // 2], linear(ruv, ph // 2, MW // 2), 0.4, 1.5)
    # below the paste area: the bytes dvpp_malloc handed out (acllab's DE AD BE EF filler),
    # untouched by VPC
    filler = np.resize(np.frombuffer(b"\xde\xad\xbe\xef", np.uint8), buf.size)
    assert (buf[MW * ph:MW * MH] == filler[MW * ph:MW * MH]).all()
    assert (buf[MW * MH + MW * ph // 2:] == filler[MW * MH + MW * ph // 2:]).all()


def test_the_encoded_jpeg_opens_and_shows_the_resized_picture(run):
    tmp, proc = run
    data = (tmp / "resized.jpg").read_bytes()
    assert f"encoded {len(data)}" in proc.stdout
    img = Image.open(io.BytesIO(data))
    assert (img.format, img.size) == ("JPEG", (MW, MH))
    img.draft("YCbCr", img.size)
    got = np.asarray(img.convert("YCbCr"), np.float64)[:, :, 0]
    y, _ = nv12(np.load(tmp / "resized.npy"), MW, MH, MW, MH)
    close(got, y, 0.25, 3)


def test_the_model_classifies_the_resized_picture(run):
    from acllab.model import load

    tmp, proc = run
    model = load(str(tmp / "yuvnet.om"))
    got = np.load(tmp / "logits.npy").reshape(-1)
    # the same model on a picture resized by the reference, through a reference AIPP
    ry, ruv = ref_planes()
    y = np.clip(np.rint(linear(ry, MH, MW)), 0, 255)
    uv = np.clip(np.rint(linear(ruv, MH // 2, MW // 2)), 0, 255)
    u = np.repeat(np.repeat(uv[:, :, 0], 2, 0), 2, 1) - 128
    v = np.repeat(np.repeat(uv[:, :, 1], 2, 0), 2, 1) - 128
    rgb = [np.floor((256 * y + 359 * v) / 256), np.floor((256 * y - 88 * u - 183 * v) / 256),
           np.floor((256 * y + 454 * u) / 256)]
    mean, var = (104, 117, 123), (0.0171, 0.0175, 0.0174)
    x = np.stack([(np.clip(c, 0, 255) - m) * s for c, m, s in zip(rgb, mean, var, strict=True)])
    want = model.forward([x[None].astype(np.float16).astype(np.float32)])[0].reshape(-1)
    np.testing.assert_allclose(got, want, rtol=0, atol=0.05 * np.abs(want).max() + 1e-3)
    assert f"top {int(np.argmax(want))}" in proc.stdout


def test_the_trace_has_the_dvpp_lanes(run):
    tmp, _ = run
    events = json.loads((tmp / "trace.json").read_text())["traceEvents"]
    rows = {(e["pid"], e["tid"]): e["args"]["name"] for e in events
            if e["ph"] == "M" and e["name"] == "thread_name"}
    on = {}
    for e in events:
        if e["ph"] == "X" and e.get("cat") == "dvpp":
            on.setdefault(rows[(e["pid"], e["tid"])], []).append(e["name"])
    assert on.get("JPEGD") == ["JpegDecode"]
    assert on.get("VPC") == ["VpcResize", "VpcCropAndPaste", "VpcCropAndPaste"]
    assert on.get("JPEGE") == ["JpegEncode"]
    api = [e["name"] for e in events if e["ph"] == "X" and e.get("cat") == "AscendCL"]
    assert api.count("dvpp_jpeg_decode_async") == 1
    assert api.count("dvpp_vpc_crop_and_paste_async") == 2


def test_the_same_program_on_the_910b_profile_gives_the_same_pictures(run, tmp_path):
    # AclLite's 128-aligned JPEGD strides are also 64-aligned, as Atlas A2's JPEGD needs
    tmp, proc = _trial(tmp_path, "--device", "ascend910b")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr, proc.stderr
    api = next(ln for ln in proc.stdout.splitlines() if ln.startswith("API calls:"))
    assert "errors: 0" in api
    for name in ("decoded.npy", "resized.npy", "roi.npy", "logits.npy"):
        assert np.array_equal(np.load(tmp / name), np.load(run[0] / name)), name
