"""The sanitizer orders a blocking host callback before its stream's later tasks.

A program in the style of Ascend's resnet50_async_imagenet_classification sample (written
here from its call sequence, not its code): execute_async on one stream again and again,
after each a callback (launch_callback) that a report thread (start_thread +
process_report, subscribe_report) runs; the callback copies the model's output to the host,
and the next execute_async on the same stream writes that output again.

With ACL_CALLBACK_BLOCK the stream waits for the callback (hicann/runtime,
src/acl/aclrt_impl/callback.cpp, aclrtLaunchCallbackImpl: rtCallbackLaunch(..., isBlock)),
so the callback's copy is done before the next execution starts: no race, even though the
host had submitted that execution before the callback ran. With ACL_CALLBACK_NO_BLOCK the
stream goes on at once and the next execution may overwrite the output while the callback
copies it: a race. A leak is reported either way.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

import acllab
from acllab import acl
from acllab.analysis import sanitizer
from acllab.model import compile_model, load, save

pytestmark = pytest.mark.usefixtures("fresh")

H2D, D2H = acl.ACL_MEMCPY_HOST_TO_DEVICE, acl.ACL_MEMCPY_DEVICE_TO_HOST
BLOCK, NO_BLOCK = acl.ACL_CALLBACK_BLOCK, acl.ACL_CALLBACK_NO_BLOCK
RUNS = 4


def _model(tmp_path) -> str:
    graph = {"format": "acllab-graph", "version": 1, "name": "tiny", "dtype": "fp16",
             "inputs": [{"name": "data", "shape": [1, 3, 8, 8], "dtype": "fp32",
                         "format": "NCHW"}],
             "outputs": [{"name": "logits", "dtype": "fp32"}],
             "ops": [{"type": "Conv2D", "name": "conv", "inputs": ["data"], "outputs": ["c"],
                      "attrs": {"out_channels": 4, "kernel": 3, "pad": 1}},
                     {"type": "GlobalAvgPool", "name": "gap", "inputs": ["c"],
                      "outputs": ["g"]},
                     {"type": "Flatten", "name": "f", "inputs": ["g"], "outputs": ["v"]},
                     {"type": "FullyConnected", "name": "fc", "inputs": ["v"],
                      "outputs": ["logits"], "attrs": {"out_features": 5}}],
             "weights": {"init": "seeded", "seed": 3}}
    g = tmp_path / "tiny.json"
    g.write_text(json.dumps(graph))
    path = str(tmp_path / "tiny.om")
    save(compile_model(str(g)), path)
    return path


def _program(path: str, block_type: int, free_host: bool = True):
    """Run the pipeline; return (the outputs the callbacks copied, the images)."""
    acl.init()
    acl.rt.set_device(0)
    ctx, _ = acl.rt.create_context(0)
    stream, _ = acl.rt.create_stream()
    mid, ret = acl.mdl.load_from_file(path)
    assert ret == 0
    desc = acl.mdl.create_desc()
    acl.mdl.get_desc(desc, mid)
    in_size = acl.mdl.get_input_size_by_index(desc, 0)
    out_size = acl.mdl.get_output_size_by_index(desc, 0)
    dev_out, _ = acl.rt.malloc(out_size, 0)            # one output buffer for every run
    outs = acl.mdl.create_dataset()
    out_buf = acl.create_data_buffer(dev_out, out_size)
    acl.mdl.add_dataset_buffer(outs, out_buf)
    host_out, _ = acl.rt.malloc_host(out_size)

    state = {"exit": False}

    def report_loop(args):
        acl.rt.set_context(args[0])
        while not state["exit"]:
            acl.rt.process_report(100)

    tid, ret = acl.util.start_thread(report_loop, [ctx])
    assert ret == 0
    assert acl.rt.subscribe_report(tid, stream) == 0

    got = {}

    def on_done(index):
        # the sample's callback: copy the output to the host and read it there
        assert acl.rt.memcpy(host_out, out_size, dev_out, out_size, D2H) == 0
        got[index] = np.frombuffer(acl.util.ptr_to_bytes(host_out, out_size), np.float32)

    rng = np.random.default_rng(11)
    images, inputs = [], []
    for _ in range(RUNS):
        x = rng.standard_normal((1, 3, 8, 8)).astype(np.float32)
        images.append(x)
        dev_in, _ = acl.rt.malloc(in_size, 0)           # each run its own input
        raw = x.tobytes()
        assert acl.rt.memcpy(dev_in, in_size, acl.util.bytes_to_ptr(raw), len(raw), H2D) == 0
        ins = acl.mdl.create_dataset()
        buf = acl.create_data_buffer(dev_in, in_size)
        acl.mdl.add_dataset_buffer(ins, buf)
        inputs.append((dev_in, ins, buf))
    # every execution and callback is submitted before the first callback runs: the next
    # execution is on the stream while the callback copies the output
    for i, (_dev_in, ins, _buf) in enumerate(inputs):
        assert acl.mdl.execute_async(mid, ins, outs, stream) == 0
        assert acl.rt.launch_callback(on_done, i, block_type, stream) == 0
    assert acl.rt.synchronize_stream(stream) == 0
    assert acl.rt.unsubscribe_report(tid, stream) == 0
    state["exit"] = True
    assert acl.util.stop_thread(tid) == 0

    for dev_in, ins, buf in inputs:
        acl.destroy_data_buffer(buf)
        acl.mdl.destroy_dataset(ins)
        acl.rt.free(dev_in)
    acl.destroy_data_buffer(out_buf)
    acl.mdl.destroy_dataset(outs)
    acl.rt.free(dev_out)
    if free_host:
        acl.rt.free_host(host_out)
    acl.mdl.destroy_desc(desc)
    acl.mdl.unload(mid)
    acl.rt.destroy_stream(stream)
    acl.rt.destroy_context(ctx)
    acl.rt.reset_device(0)
    acl.finalize()
    return got, images


def _kinds(findings) -> list[str]:
    return [f.kind for f in findings]


def test_a_blocking_callback_that_copies_the_output_is_no_race(tmp_path):
    path = _model(tmp_path)
    got, images = _program(path, BLOCK)
    findings = sanitizer.analyze(acllab.current_runtime())
    assert findings == [], "\n".join(map(str, findings))
    model = load(path)
    for i, x in enumerate(images):
        np.testing.assert_allclose(got[i], model.forward([x])[0].reshape(-1),
                                   rtol=1e-5, atol=1e-6)


def test_its_leak_is_still_reported(tmp_path):
    path = _model(tmp_path)
    with pytest.warns(acllab.AclWarning, match="released resources"):
        _program(path, BLOCK, free_host=False)
    kinds = _kinds(sanitizer.analyze(acllab.current_runtime()))
    assert kinds == ["leak"]


def test_a_callback_that_does_not_block_races_with_the_next_execution(tmp_path):
    path = _model(tmp_path)
    _program(path, NO_BLOCK)
    findings = sanitizer.analyze(acllab.current_runtime())
    races = [f for f in findings if f.kind == "race"]
    assert races, "\n".join(map(str, findings))
    assert "Memcpy" in races[0].message or "memcpy" in races[0].message.lower()
