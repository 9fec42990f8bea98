"""A pyACL program in the style of the Ascend samples' ``acl_net.py`` runs unchanged under
``acllab profile``, on models compiled by ``acllab atc`` with the samples' documented flags.

The program (written for this test) initialises resources, loads one model from a file and
one from memory, probes every model for the dynamic input as AclLite does, builds datasets,
runs ``execute`` and ``execute_async`` with a callback thread started by
``acl.util.start_thread``, sets a dynamic batch and a dynamic image size, and tears down in
``__del__`` (which the profile runs before its summary).
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

GRAPH = {"format": "acllab-graph", "version": 1, "name": "rgbnet", "dtype": "fp16",
         "inputs": [{"name": "data", "shape": [1, 3, 8, 8], "dtype": "fp32",
                     "format": "NCHW"}],
         "outputs": [{"name": "logits", "dtype": "fp32"}],
         "ops": [{"type": "Conv2D", "name": "conv", "inputs": ["data"], "outputs": ["c1"],
                  "attrs": {"out_channels": 4, "kernel": 3, "pad": 1, "bias": True}},
                 {"type": "GlobalAvgPool", "name": "gap", "inputs": ["c1"], "outputs": ["g"]},
                 {"type": "Flatten", "name": "feat", "inputs": ["g"], "outputs": ["f"]},
                 {"type": "FullyConnected", "name": "fc", "inputs": ["f"],
                  "outputs": ["logits"], "attrs": {"out_features": 3}}],
         "weights": {"init": "seeded", "seed": 11}}

AIPP = """aipp_op {
    aipp_mode : static
    related_input_rank : 0
    input_format : YUV420SP_U8
    src_image_size_w : 12
    src_image_size_h : 10
    crop : true
    load_start_pos_w : 2
    load_start_pos_h : 0
    crop_size_w : 8
    crop_size_h : 8
    csc_switch : true
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
}
"""

PROGRAM = '''
import sys

import numpy as np

import acl

ACL_MEM_MALLOC_HUGE_FIRST = 0
ACL_MEMCPY_HOST_TO_DEVICE = 1
ACL_MEMCPY_DEVICE_TO_HOST = 2
ACL_CALLBACK_NO_BLOCK = 0
ACL_ERROR = 3
ACL_INFO = 1
DYNAMIC = "ascend_mbatch_shape_data"


def check_ret(message, ret):
    if ret != 0:
        raise Exception("{} failed ret={}".format(message, ret))


class Model:
    def __init__(self, model_id):
        self.model_id = model_id
        self.desc = acl.mdl.create_desc()
        check_ret("acl.mdl.get_desc", acl.mdl.get_desc(self.desc, model_id))
        self.dyn_index, ret = acl.mdl.get_input_index_by_name(self.desc, DYNAMIC)
        if ret != 0:
            self.dyn_index = -1
        acl.app_log(ACL_INFO, "model %d: %d inputs, dynamic index %d" % (
            model_id, acl.mdl.get_num_inputs(self.desc), self.dyn_index))
        self.inputs, self.input_ptrs = self._dataset(
            [acl.mdl.get_input_size_by_index(self.desc, i)
             for i in range(acl.mdl.get_num_inputs(self.desc))])
        self.outputs, self.output_ptrs = self._dataset(
            [acl.mdl.get_output_size_by_index(self.desc, i)
             for i in range(acl.mdl.get_num_outputs(self.desc))])

    def _dataset(self, sizes):
        dataset = acl.mdl.create_dataset()
        ptrs = []
        for size in sizes:
            ptr, ret = acl.rt.malloc(size, ACL_MEM_MALLOC_HUGE_FIRST)
            check_ret("acl.rt.malloc", ret)
            buf = acl.create_data_buffer(ptr, size)
            _, ret = acl.mdl.add_dataset_buffer(dataset, buf)
            check_ret("acl.mdl.add_dataset_buffer", ret)
            ptrs.append((ptr, size))
        return dataset, ptrs

    def feed(self, data):
        ptr, size = self.input_ptrs[0]
        self.host = data                    # keep the bytes alive while in use
        check_ret("acl.rt.memcpy", acl.rt.memcpy(ptr, size, acl.util.bytes_to_ptr(data),
                                                 len(data), ACL_MEMCPY_HOST_TO_DEVICE))

    def result(self, dtype=np.float32):
        ptr, size = self.output_ptrs[0]
        host, ret = acl.rt.malloc_host(size)
        check_ret("acl.rt.malloc_host", ret)
        check_ret("acl.rt.memcpy", acl.rt.memcpy(host, size, ptr, size,
                                                 ACL_MEMCPY_DEVICE_TO_HOST))
        out = np.frombuffer(acl.util.ptr_to_bytes(host, size), dtype)
        acl.rt.free_host(host)
        return out

    def release(self):
        for dataset in (self.inputs, self.outputs):
            for i in range(acl.mdl.get_dataset_num_buffers(dataset)):
                buf = acl.mdl.get_dataset_buffer(dataset, i)
                acl.rt.free(acl.get_data_buffer_addr(buf))
                acl.destroy_data_buffer(buf)
            acl.mdl.destroy_dataset(dataset)
        acl.mdl.destroy_desc(self.desc)
        check_ret("acl.mdl.unload", acl.mdl.unload(self.model_id))


RESULTS = []


def on_done(user_data):
    # a plain function: the runtime keeps each callback in its trace, and a bound method
    # would keep the Net object (and its __del__ teardown) alive
    RESULTS.append(user_data)


def process_callback(args_list):
    context, timeout, exit_flag = args_list
    acl.rt.set_context(context)
    while True:
        acl.rt.process_report(timeout)
        if exit_flag[0]:
            break


class Net:
    def __init__(self, device_id, paths):
        self.device_id = device_id
        check_ret("acl.init", acl.init())
        check_ret("acl.rt.set_device", acl.rt.set_device(device_id))
        self.context, ret = acl.rt.create_context(device_id)
        check_ret("acl.rt.create_context", ret)
        self.stream, ret = acl.rt.create_stream()
        check_ret("acl.rt.create_stream", ret)
        model_id, ret = acl.mdl.load_from_file(paths["aipp"])
        check_ret("acl.mdl.load_from_file", ret)
        self.aipp = Model(model_id)
        with open(paths["batch"], "rb") as f:
            self.om_bytes = f.read()
        model_id, ret = acl.mdl.load_from_mem(acl.util.bytes_to_ptr(self.om_bytes),
                                              len(self.om_bytes))
        check_ret("acl.mdl.load_from_mem", ret)
        self.batch = Model(model_id)
        model_id, ret = acl.mdl.load_from_file(paths["hw"])
        check_ret("acl.mdl.load_from_file", ret)
        self.hw = Model(model_id)
        # the thread gets the flag, not self: a thread holding self would keep the object
        # (and its __del__ teardown) alive for ever
        self.exit_flag = [False]
        self.cb_thread_id, ret = acl.util.start_thread(process_callback,
                                                       [self.context, 50, self.exit_flag])
        check_ret("acl.util.start_thread", ret)
        check_ret("acl.rt.subscribe_report",
                  acl.rt.subscribe_report(self.cb_thread_id, self.stream))

    def run(self, frames):
        self.aipp.feed(frames[0])
        check_ret("acl.mdl.execute",
                  acl.mdl.execute(self.aipp.model_id, self.aipp.inputs, self.aipp.outputs))
        print("sync", np.round(self.aipp.result(np.float16).astype(np.float32), 3).tolist())

    def run_async(self, frames):
        self.batch.feed(b"".join(frames))
        check_ret("acl.mdl.set_dynamic_batch_size", acl.mdl.set_dynamic_batch_size(
            self.batch.model_id, self.batch.inputs, self.batch.dyn_index, len(frames)))
        check_ret("acl.mdl.execute_async", acl.mdl.execute_async(
            self.batch.model_id, self.batch.inputs, self.batch.outputs, self.stream))
        check_ret("acl.rt.launch_callback", acl.rt.launch_callback(
            on_done, len(frames), ACL_CALLBACK_NO_BLOCK, self.stream))
        check_ret("acl.rt.synchronize_stream", acl.rt.synchronize_stream(self.stream))
        dims, ret = acl.mdl.get_cur_output_dims(self.batch.desc, 0)
        print("async", dims["dims"], RESULTS)

    def run_hw(self, h, w):
        image = np.full((1, 1, h, w), 0.5, np.float32).tobytes()
        self.hw.feed(image)
        check_ret("acl.mdl.set_dynamic_hw_size", acl.mdl.set_dynamic_hw_size(
            self.hw.model_id, self.hw.inputs, self.hw.dyn_index, h, w))
        check_ret("acl.mdl.execute",
                  acl.mdl.execute(self.hw.model_id, self.hw.inputs, self.hw.outputs))
        print("hw", h, w, np.round(self.hw.result(), 3).tolist())

    def __del__(self):
        check_ret("acl.rt.unsubscribe_report",
                  acl.rt.unsubscribe_report(self.cb_thread_id, self.stream))
        self.exit_flag[0] = True
        check_ret("acl.util.stop_thread", acl.util.stop_thread(self.cb_thread_id))
        for model in (self.aipp, self.batch, self.hw):
            model.release()
        check_ret("acl.rt.destroy_stream", acl.rt.destroy_stream(self.stream))
        check_ret("acl.rt.destroy_context", acl.rt.destroy_context(self.context))
        check_ret("acl.rt.reset_device", acl.rt.reset_device(self.device_id))
        check_ret("acl.finalize", acl.finalize())
        print("teardown done")


rng = np.random.default_rng(0)
frames = [rng.integers(0, 256, 12 * 10 * 3 // 2, dtype=np.uint8).tobytes() for _ in range(2)]
net = Net(0, {"aipp": sys.argv[1], "batch": sys.argv[2], "hw": sys.argv[3]})
net.run(frames)
net.run_async(frames)
net.run_hw(16, 16)
net.run_hw(32, 32)
print("main done")
'''


def _atc(tmp_path, *flags):
    proc = subprocess.run([sys.executable, "-m", "acllab.cli", "atc", "--framework=5",
                           "--soc_version=Ascend310", *flags], capture_output=True, text=True,
                          timeout=120, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "ATC run success" in proc.stdout


def _profile(tmp_path):
    (tmp_path / "net.json").write_text(json.dumps(GRAPH))
    (tmp_path / "aipp.cfg").write_text(AIPP)
    _atc(tmp_path, "--model=net.json", "--output=aipp_fp16", "--insert_op_conf=aipp.cfg",
         "--output_type=fc:0:FP16", "--out_nodes=fc:0", "--log=error")
    _atc(tmp_path, "--model=net.json", "--output=aipp_batch", "--insert_op_conf=aipp.cfg",
         '--input_shape=data:-1,3,8,8', '--dynamic_batch_size=1,2,4', "--output_type=FP32")
    _atc(tmp_path, "--model=zoo:tiny", "--output=tiny_hw", "--input_shape=data:1,1,-1,-1",
         "--dynamic_image_size=16,16;32,32")
    (tmp_path / "acl_net.py").write_text(textwrap.dedent(PROGRAM))
    return subprocess.run([sys.executable, "-m", "acllab.cli", "profile", "--out",
                           "trace.json", "acl_net.py", "aipp_fp16.om", "aipp_batch.om",
                           "tiny_hw.om"], capture_output=True, text=True, timeout=300,
                          cwd=tmp_path)


def test_an_acl_net_style_program_runs_unchanged_under_profile(tmp_path):
    proc = _profile(tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = proc.stdout
    assert "AclWarning" not in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr, proc.stderr
    lines = out.splitlines()
    assert lines.index("main done") < lines.index("teardown done")
    assert out.index("teardown done") < out.index("== acllab profile")
    assert "async [2, 3] [2]" in out
    assert any(ln.startswith("hw 16 16 [") for ln in lines)
    api = next(ln for ln in lines if ln.startswith("API calls:"))
    assert "errors: 0" in api
    assert "probes: 1" in api                      # the one static model was probed
    assert (tmp_path / "trace.json").is_file()


def test_the_profile_is_the_same_on_every_run(tmp_path):
    first = _profile(tmp_path)
    second = _profile(tmp_path)
    assert first.returncode == second.returncode == 0
    assert first.stdout == second.stdout
