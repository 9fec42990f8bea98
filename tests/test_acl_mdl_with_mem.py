"""acl.mdl.load_from_file_with_mem and load_from_mem_with_mem: the caller gives the model's
workspace and weight memory, sized with acl.mdl.query_size (the call sequence of Ascend's
resnet50_async_imagenet_classification sample: QuerySize, two mallocs, LoadFromFileWithMem).

hicann/ge, runtime/v1/graph/load/model_manager/davinci_model.cc: InitFeatureMapAndP2PMem and
InitWeightMem give ACL_ERROR_GE_PARAM_INVALID (145000) for a size below the model's need and
let the runtime allocate a part whose pointer is null.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from conftest import expect_code

import acllab
from acllab import acl
from acllab.analysis import sanitizer
from acllab.model import compile_model, load, save

pytestmark = pytest.mark.usefixtures("fresh")


def _om(tmp_path) -> str:
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


def _execute(mid, x: np.ndarray) -> np.ndarray:
    desc = acl.mdl.create_desc()
    acl.mdl.get_desc(desc, mid)
    n_in, n_out = (acl.mdl.get_input_size_by_index(desc, 0),
                   acl.mdl.get_output_size_by_index(desc, 0))
    dev_in, _ = acl.rt.malloc(n_in, 0)
    dev_out, _ = acl.rt.malloc(n_out, 0)
    raw = x.tobytes()
    acl.rt.memcpy(dev_in, n_in, acl.util.bytes_to_ptr(raw), len(raw), 1)
    ins, outs = acl.mdl.create_dataset(), acl.mdl.create_dataset()
    bi, bo = acl.create_data_buffer(dev_in, n_in), acl.create_data_buffer(dev_out, n_out)
    acl.mdl.add_dataset_buffer(ins, bi)
    acl.mdl.add_dataset_buffer(outs, bo)
    assert acl.mdl.execute(mid, ins, outs) == 0
    host = bytearray(n_out)
    assert acl.rt.memcpy(acl.util.bytes_to_ptr(host), n_out, dev_out, n_out, 2) == 0
    out = np.frombuffer(bytes(host), np.float32)
    for b in (bi, bo):
        acl.destroy_data_buffer(b)
    for d in (ins, outs):
        acl.mdl.destroy_dataset(d)
    acl.rt.free(dev_in)
    acl.rt.free(dev_out)
    acl.mdl.destroy_desc(desc)
    return out


@pytest.mark.parametrize("how", ["file", "mem"])
def test_the_model_runs_in_the_callers_memory(tmp_path, how):
    path = _om(tmp_path)
    acl.init()
    acl.rt.set_device(0)
    work, weight, ret = acl.mdl.query_size(path)
    assert ret == 0 and work > 0 and weight > 0
    work_ptr, _ = acl.rt.malloc(work, 0)
    weight_ptr, _ = acl.rt.malloc(weight, 0)
    heap = acllab.current_runtime().devices[0].heap
    used = heap.runtime_used_bytes
    if how == "file":
        mid, ret = acl.mdl.load_from_file_with_mem(path, work_ptr, work, weight_ptr, weight)
    else:
        data = Path(path).read_bytes()
        mid, ret = acl.mdl.load_from_mem_with_mem(acl.util.bytes_to_ptr(data), len(data),
                                                  work_ptr, work, weight_ptr, weight)
    assert ret == 0
    assert heap.runtime_used_bytes == used           # nothing allocated by the load
    x = np.random.default_rng(1).standard_normal((1, 3, 8, 8)).astype(np.float32)
    want = load(path).forward([x])[0].reshape(-1)
    np.testing.assert_allclose(_execute(mid, x), want, rtol=1e-5, atol=1e-6)
    assert acl.mdl.unload(mid) == 0
    assert acllab.current_runtime().region(work_ptr).live     # the caller's, still
    assert acl.rt.free(work_ptr) == 0 and acl.rt.free(weight_ptr) == 0
    assert [f.kind for f in sanitizer.analyze(acllab.current_runtime())] == []


def test_a_null_pointer_lets_the_runtime_allocate_that_part(tmp_path):
    path = _om(tmp_path)
    acl.init()
    acl.rt.set_device(0)
    work, weight, _ = acl.mdl.query_size(path)
    weight_ptr, _ = acl.rt.malloc(weight, 0)
    mid, ret = acl.mdl.load_from_file_with_mem(path, 0, 0, weight_ptr, weight)
    assert ret == 0
    m = acllab.current_runtime().models[mid]
    assert m.owned == (True, False) and m.workspace.size >= work
    assert acl.mdl.unload(mid) == 0 and not m.workspace.live
    assert acllab.current_runtime().region(weight_ptr).live
    acl.rt.free(weight_ptr)


def test_bad_memory_gives_145000_and_loads_nothing(tmp_path):
    path = _om(tmp_path)
    acl.init()
    acl.rt.set_device(0)
    work, weight, _ = acl.mdl.query_size(path)
    work_ptr, _ = acl.rt.malloc(work, 0)
    weight_ptr, _ = acl.rt.malloc(weight, 0)
    host, _ = acl.rt.malloc_host(work)
    rt = acllab.current_runtime()
    models = dict(rt.models)
    cases = [
        lambda: acl.mdl.load_from_file_with_mem(path, work_ptr, work - 1, weight_ptr, weight),
        lambda: acl.mdl.load_from_file_with_mem(path, work_ptr, work, weight_ptr, weight - 1),
        lambda: acl.mdl.load_from_file_with_mem(path, host, work, weight_ptr, weight),
        lambda: acl.mdl.load_from_file_with_mem(path, work_ptr, work + 4096, weight_ptr,
                                                weight),       # runs past the block
    ]
    for call in cases:
        with expect_code(145000):
            assert call() == (0, 145000)
    with expect_code(145002):
        assert acl.mdl.load_from_file_with_mem(str(tmp_path / "no.om"), work_ptr, work,
                                               weight_ptr, weight) == (0, 145002)
    with expect_code(100000):
        assert acl.mdl.load_from_mem_with_mem(host, 0, work_ptr, work, weight_ptr,
                                              weight) == (0, 100000)
    with pytest.raises(TypeError):
        acl.mdl.load_from_file_with_mem(path, "0", work, weight_ptr, weight)
    assert rt.models == models
    acl.rt.free_host(host)
