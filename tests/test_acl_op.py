"""acl.op: single operators from op models, written as Ascend's single-op samples are (the
acl_operator_add, vpc_resnet50 and imageinpainting programs: compile with atc --singleop,
set_model_dir, tensor descriptions, data buffers, execute_v2 on a stream, synchronise).

Facts from hicann/ge, api/acl/acl_op_executor/single_op/op.cpp (aclopSetModelDirImpl,
aclopExecuteV2Impl, aclopCreateHandleImpl, aclopExecWithHandleImpl), builtin/cast_op.cpp
(aclopCastImpl), acl_op_resource_manager.cpp (MatchOpModel, ACL_ERROR_OP_NOT_FOUND) and
runtime/v1/single_op/single_op.cc (SingleOpImpl::ValidateArgs, ACL_ERROR_GE_PARAM_INVALID).
"""

import json
import warnings

import numpy as np
import pytest

import acllab
from acllab import acl
from acllab.acl.constants import (
    ACL_FLOAT,
    ACL_FLOAT16,
    ACL_FORMAT_ND,
    ACL_INT64,
    ACL_MEM_MALLOC_NORMAL_ONLY,
    ACL_MEMCPY_DEVICE_TO_HOST,
    ACL_MEMCPY_HOST_TO_DEVICE,
)
from acllab.analysis import sanitizer
from acllab.device import connect, pair
from acllab.model import opkernels
from acllab.model.atc import compile_singleop
from acllab.model.cost import op_time


def _d(shape, type_="float16"):
    return {"format": "ND", "shape": shape, "type": type_}


CONFIG = [
    {"op": "Add", "input_desc": [_d([8, 16]), _d([8, 16])], "output_desc": [_d([8, 16])]},
    {"op": "MatMul", "input_desc": [_d([16, 32]), _d([32, 8])], "output_desc": [_d([16, 8])],
     "attr": [{"name": "transpose_x1", "type": "bool", "value": False},
              {"name": "transpose_x2", "type": "bool", "value": False}]},
    {"op": "Cast", "input_desc": [_d([1000], "float")], "output_desc": [_d([1000])],
     "attr": [{"name": "truncate", "type": "bool", "value": False},
              {"name": "dst_type", "type": "int", "value": 1}]},
    {"op": "Reshape", "input_desc": [_d([2, 6], "float"),
                                     dict(_d([2], "int64"), is_const=True, const_value=[3, 4])],
     "output_desc": [_d([3, 4], "float")]},
]


@pytest.fixture
def op_dir(tmp_path):
    cfg = tmp_path / "ops.json"
    cfg.write_text(json.dumps(CONFIG))
    compile_singleop(str(cfg), str(tmp_path / "op_models"), "Ascend310")
    return str(tmp_path / "op_models")


class Card:
    """The sample programs' resources: device 0, a context, a stream; then their teardown."""

    def __init__(self, acl, op_dir=None):
        self.acl = acl
        assert acl.init() == 0
        assert acl.rt.set_device(0) == 0
        self.context, ret = acl.rt.create_context(0)
        self.stream, ret2 = acl.rt.create_stream()
        assert (ret, ret2) == (0, 0)
        if op_dir is not None:
            assert acl.op.set_model_dir(op_dir) == 0
        self.descs, self.buffers, self.device = [], [], []

    def tensor(self, dtype, shape, data=None):
        """A description, device memory (filled from ``data``) and its data buffer."""
        acl = self.acl
        desc = acl.create_tensor_desc(dtype, list(shape), ACL_FORMAT_ND)
        size = acl.get_tensor_desc_size(desc)
        ptr, ret = acl.rt.malloc(size, ACL_MEM_MALLOC_NORMAL_ONLY)
        assert ret == 0
        if data is not None:
            raw = np.ascontiguousarray(data).tobytes()
            assert acl.rt.memcpy(ptr, size, acl.util.bytes_to_ptr(raw), size,
                                 ACL_MEMCPY_HOST_TO_DEVICE) == 0
        buf = acl.create_data_buffer(ptr, size)
        self.descs.append(desc)
        self.device.append(ptr)
        self.buffers.append(buf)
        return desc, buf, ptr

    def fetch(self, ptr, dtype, shape):
        size = int(np.prod(shape)) * np.dtype(dtype).itemsize
        host = bytearray(size)
        assert self.acl.rt.memcpy(self.acl.util.bytes_to_ptr(host), size, ptr, size,
                                  ACL_MEMCPY_DEVICE_TO_HOST) == 0
        return np.frombuffer(bytes(host), dtype).reshape(shape)

    def release(self):
        acl = self.acl
        for buf in self.buffers:
            assert acl.destroy_data_buffer(buf) == 0
        for ptr in self.device:
            assert acl.rt.free(ptr) == 0
        for desc in self.descs:
            acl.destroy_tensor_desc(desc)
        assert acl.rt.destroy_stream(self.stream) == 0
        assert acl.rt.destroy_context(self.context) == 0
        assert acl.rt.reset_device(0) == 0
        assert acl.finalize() == 0


@pytest.fixture
def card(op_dir):
    acllab.reset()
    c = Card(acl, op_dir)
    yield c
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        c.release()
    acllab.reset()


def _ops():
    return [t for t in acllab.current_runtime().tasks if t.kind == "single_op"]


def _add(card, a, b):
    x1, b1, _ = card.tensor(ACL_FLOAT16, a.shape, a)
    x2, b2, _ = card.tensor(ACL_FLOAT16, b.shape, b)
    y, by, py = card.tensor(ACL_FLOAT16, a.shape)
    attr = acl.op.create_attr()
    ret = acl.op.execute_v2("Add", [x1, x2], [b1, b2], [y], [by], attr, card.stream)
    acl.op.destroy_attr(attr)
    return ret, py


def test_add_of_two_float16_tensors_end_to_end(card):
    rng = np.random.default_rng(22)
    a = rng.standard_normal((8, 16)).astype(np.float16)
    b = rng.standard_normal((8, 16)).astype(np.float16)
    ret, py = _add(card, a, b)
    assert ret == 0
    assert acl.rt.synchronize_stream(card.stream) == 0
    assert np.array_equal(card.fetch(py, np.float16, (8, 16)), a + b)


def test_the_op_is_a_task_on_the_stream_timed_by_the_roofline(card):
    a = np.ones((8, 16), np.float16)
    ret, py = _add(card, a, a)
    r = acllab.current_runtime()
    task = r.tasks[-1]
    assert (ret, task.name, task.kind, task.api) == (0, "Add", "single_op", "execute_v2")
    assert task.stream.handle == card.stream
    assert task.resource is r.devices[0].aicore
    spec = next(s for s, _n in r.op_models.values() if s.op_type == "Add")
    expected = op_time(opkernels.plan(spec, r.profile.ai_cores), r.profile, huge_pages=False)
    # asynchronous: execute_v2 returned while the task is still queued or running
    assert task.end_ns == -1
    assert acl.rt.synchronize_stream(card.stream) == 0
    assert task.end_ns - task.start_ns == expected.total_ns
    assert task.info["bound"] == "memory"
    assert r.host_ns >= task.end_ns
    # it read two 256-byte inputs and wrote one output: the sanitizer saw them
    assert [n for _a, n in task.reads] == [256, 256] and [n for _a, n in task.writes] == [256]
    assert not [f for f in sanitizer.analyze(r) if f.kind != "leak"]


def test_reading_an_input_nothing_wrote_is_found_by_the_sanitizer(card):
    x1, b1, _ = card.tensor(ACL_FLOAT16, (8, 16), np.ones((8, 16), np.float16))
    x2, b2, _ = card.tensor(ACL_FLOAT16, (8, 16))                 # never written
    y, by, _ = card.tensor(ACL_FLOAT16, (8, 16))
    assert acl.op.execute_v2("Add", [x1, x2], [b1, b2], [y], [by], 0, card.stream) == 0
    acl.rt.synchronize_stream(card.stream)
    kinds = [f.kind for f in sanitizer.analyze(acllab.current_runtime())]
    assert "uninitialised-read" in kinds


def test_matmul_with_bool_attributes(card):
    rng = np.random.default_rng(7)
    a = rng.standard_normal((16, 32)).astype(np.float16)
    b = rng.standard_normal((32, 8)).astype(np.float16)
    x1, b1, _ = card.tensor(ACL_FLOAT16, a.shape, a)
    x2, b2, _ = card.tensor(ACL_FLOAT16, b.shape, b)
    y, by, py = card.tensor(ACL_FLOAT16, (16, 8))
    attr = acl.op.create_attr()
    assert acl.op.set_attr_bool(attr, "transpose_x1", False) == 0
    assert acl.op.set_attr_bool(attr, "transpose_x2", False) == 0
    assert acl.op.execute_v2("MatMul", [x1, x2], [b1, b2], [y], [by], attr, card.stream) == 0
    acl.rt.synchronize_stream(card.stream)
    ref = (a.astype(np.float32) @ b.astype(np.float32)).astype(np.float16)
    assert np.array_equal(card.fetch(py, np.float16, (16, 8)), ref)
    assert _ops()[-1].info["unit"] == "cube"
    # a different attribute value is another op: no model, and the message says what differs
    assert acl.op.set_attr_bool(attr, "transpose_x2", True) == 0
    with pytest.warns(acllab.AclWarning, match="transpose_x2=True, the model's .*"
                                               "transpose_x2=False"):
        assert acl.op.execute_v2("MatMul", [x1, x2], [b1, b2], [y], [by], attr,
                                 card.stream) == 100024
    acl.op.destroy_attr(attr)


def test_cast_float_to_float16_sets_dst_type_and_truncate_itself(card):
    x = np.linspace(-3, 3, 1000, dtype=np.float32)
    src, bsrc, _ = card.tensor(ACL_FLOAT, (1000,), x)
    dst, bdst, pdst = card.tensor(ACL_FLOAT16, (1000,))
    assert acl.op.cast(src, bsrc, dst, bdst, 0, card.stream) == 0
    acl.rt.synchronize_stream(card.stream)
    assert np.array_equal(card.fetch(pdst, np.float16, (1000,)), x.astype(np.float16))
    assert _ops()[-1].api == "cast"


def test_a_constant_input_comes_from_its_description(card):
    x = np.arange(12, dtype=np.float32).reshape(2, 6)
    xd, xb, _ = card.tensor(ACL_FLOAT, (2, 6), x)
    shape_desc = acl.create_tensor_desc(ACL_INT64, [2], ACL_FORMAT_ND)
    card.descs.append(shape_desc)
    value = np.int64([3, 4]).tobytes()
    assert acl.set_tensor_const(shape_desc, acl.util.bytes_to_ptr(value), len(value)) == 0
    empty = acl.create_data_buffer(0, 0)
    card.buffers.append(empty)
    y, by, py = card.tensor(ACL_FLOAT, (3, 4))
    assert acl.op.execute_v2("Reshape", [xd, shape_desc], [xb, empty], [y], [by], 0,
                             card.stream) == 0
    acl.rt.synchronize_stream(card.stream)
    assert np.array_equal(card.fetch(py, np.float32, (3, 4)), x.reshape(3, 4))
    # another constant value is another model: not found
    value = np.int64([4, 3]).tobytes()
    acl.set_tensor_const(shape_desc, acl.util.bytes_to_ptr(value), len(value))
    with pytest.warns(acllab.AclWarning, match="100024"):
        acl.op.execute_v2("Reshape", [xd, shape_desc], [xb, empty], [y], [by], 0, card.stream)


def test_a_handle_binds_the_model_once_and_runs_it_many_times(card):
    x1, b1, _ = card.tensor(ACL_FLOAT16, (8, 16), np.full((8, 16), 2, np.float16))
    x2, b2, _ = card.tensor(ACL_FLOAT16, (8, 16), np.full((8, 16), 3, np.float16))
    y, by, py = card.tensor(ACL_FLOAT16, (8, 16))
    attr = acl.op.create_attr()
    handle, ret = acl.op.create_handle("Add", [x1, x2], [y], attr)
    assert ret == 0 and handle != 0
    for _ in range(3):
        assert acl.op.execute_with_handle(handle, [b1, b2], [by], card.stream) == 0
    acl.rt.synchronize_stream(card.stream)
    assert (card.fetch(py, np.float16, (8, 16)) == 5).all()
    tasks = [t for t in acllab.current_runtime().tasks if t.kind == "single_op"]
    assert [t.api for t in tasks] == ["execute_with_handle"] * 3
    assert tasks[1].start_ns >= tasks[0].end_ns              # in stream order
    # aclopExecWithHandleImpl: counts other than the handle's
    with pytest.warns(acllab.AclWarning, match="1 inputs given"):
        assert acl.op.execute_with_handle(handle, [b1], [by], card.stream) == 100021
    with pytest.warns(acllab.AclWarning, match="2 outputs given"):
        assert acl.op.execute_with_handle(handle, [b1, b2], [by, by], card.stream) == 100022
    assert acl.op.destroy_handle(handle) is None
    with pytest.warns(acllab.AclWarning, match="already destroyed"):
        assert acl.op.execute_with_handle(handle, [b1, b2], [by], card.stream) == 107017
    with pytest.warns(acllab.AclWarning, match="100024"):
        assert acl.op.create_handle("Mul", [x1, x2], [y], attr) == (0, 100024)
    acl.op.destroy_attr(attr)


def test_no_model_returns_op_not_found_and_the_entry_that_would_compile_it(card, tmp_path):
    a = np.ones((4, 4), np.float16)
    x1, b1, _ = card.tensor(ACL_FLOAT16, (4, 4), a)
    x2, b2, _ = card.tensor(ACL_FLOAT16, (4, 4), a)
    y, by, py = card.tensor(ACL_FLOAT16, (4, 4))
    with pytest.warns(acllab.AclWarning) as caught:
        ret = acl.op.execute_v2("Add", [x1, x2], [b1, b2], [y], [by], 0, card.stream)
    assert ret == 100024
    text = str(caught[0].message)
    assert "ACL_ERROR_OP_NOT_FOUND" in text and "input 0 is float16 ND [4, 4]" in text
    entry = json.loads(text.split("that compiles it: ", 1)[1])
    assert entry == {"op": "Add", "input_desc": [_d([4, 4])] * 2, "output_desc": [_d([4, 4])]}
    # that entry, compiled, is the model the call needed (a second set_model_dir is refused,
    # so a fresh program loads it)
    cfg = tmp_path / "more.json"
    cfg.write_text(json.dumps([entry]))
    compile_singleop(str(cfg), str(tmp_path / "more"))
    with pytest.warns(acllab.AclWarning, match="already called"):
        assert acl.op.set_model_dir(str(tmp_path / "more")) == 100002
    acllab.current_runtime().op_models = None      # as a new process would start
    assert acl.op.set_model_dir(str(tmp_path / "more")) == 0
    assert acl.op.execute_v2("Add", [x1, x2], [b1, b2], [y], [by], 0, card.stream) == 0
    acl.rt.synchronize_stream(card.stream)
    assert (card.fetch(py, np.float16, (4, 4)) == 2).all()


def test_bad_descriptions_buffers_and_sizes_return_codes(card):
    a = np.ones((8, 16), np.float16)
    x1, b1, p1 = card.tensor(ACL_FLOAT16, (8, 16), a)
    x2, b2, _ = card.tensor(ACL_FLOAT16, (8, 16), a)
    y, by, py = card.tensor(ACL_FLOAT16, (8, 16))
    s = card.stream

    def code(*args):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            ret = acl.op.execute_v2(*args)
        return ret, " ".join(str(w.message) for w in caught)

    assert code("Add", [x1, 0], [b1, b2], [y], [by], 0, s)[0] == 100000       # null desc
    assert code("Add", [x1, x2], [b1, 0], [y], [by], 0, s)[0] == 100000       # null buffer
    assert code("Add", [x1, x2], [b1], [y], [by], 0, s)[0] == 100000          # lists differ
    assert code("", [x1, x2], [b1, b2], [y], [by], 0, s)[0] == 100000
    assert code("Add", [x1, x2], [b1, b2], [y], [by], 0x1234, s)[0] == 107017  # bad attr
    small = acl.create_data_buffer(p1, 100)
    card.buffers.append(small)
    ret, why = code("Add", [x1, x2], [small, b2], [y], [by], 0, s)
    assert ret == 145000 and "holds 100 B" in why and "256 B" in why
    host = bytearray(256)
    hbuf = acl.create_data_buffer(acl.util.bytes_to_ptr(host), 256)
    card.buffers.append(hbuf)
    ret, why = code("Add", [x1, x2], [b1, b2], [y], [hbuf], 0, s)
    assert ret == 145000 and "host memory" in why
    with pytest.raises(TypeError):
        acl.op.execute_v2(42, [x1, x2], [b1, b2], [y], [by], 0, s)
    with pytest.raises(TypeError):
        acl.op.execute_v2("Add", x1, [b1, b2], [y], [by], 0, s)
    # nothing ran
    assert not [t for t in acllab.current_runtime().tasks if t.kind == "single_op"]


def test_set_model_dir_codes(tmp_path, op_dir):
    acllab.reset()
    acl.init()
    with pytest.warns(acllab.AclWarning, match="does not exist"):
        assert acl.op.set_model_dir(str(tmp_path / "nowhere")) == 100014
    # a folder whose files are not op models loads nothing, skips them, and succeeds
    junk = tmp_path / "junk" / "a" / "b"
    junk.mkdir(parents=True)
    (junk / "x.om").write_bytes(b"not a model")
    assert acl.op.set_model_dir(str(tmp_path / "junk")) == 0
    assert acllab.current_runtime().op_models == {}
    log = " ".join(m for *_x, m in acllab.current_runtime().acl_log)
    assert "x.om" in log and "skip" in log
    acllab.reset()
    acl.init()
    assert acl.op.set_model_dir(op_dir) == 0
    assert len(acllab.current_runtime().op_models) == len(CONFIG)
    with pytest.warns(acllab.AclWarning, match="100002"):
        assert acl.op.set_model_dir(op_dir) == 100002
    acl.finalize()
    acllab.reset()


def test_attribute_setters_keep_typed_values():
    acllab.reset()
    attr = acl.op.create_attr()
    assert acl.op.set_attr_int(attr, "groups", 2) == 0
    assert acl.op.set_attr_float(attr, "epsilon", 1e-5) == 0
    assert acl.op.set_attr_string(attr, "data_format", "NCHW") == 0
    assert acl.op.set_attr_list_int(attr, "strides", [1, 1, 2, 2]) == 0
    assert acl.op.set_attr_list_int(attr, "pads", np.int64([0, 0, 1, 1])) == 0
    assert acl.op.set_attr_list_float(attr, "scales", [0.5, 2.0]) == 0
    assert acl.op.set_attr_list_bool(attr, "flags", [True, False]) == 0
    assert acl.op.set_attr_list_string(attr, "names", ["a", "b"]) == 0
    assert acl.op.set_attr_data_type(attr, "dtype", ACL_FLOAT16) == 0
    a = acllab.current_runtime().handles[attr]
    assert a.attrs["epsilon"] == ("epsilon", "float", float(np.float32(1e-5)))
    assert a.attrs["pads"] == ("pads", "list_int", (0, 0, 1, 1))
    with pytest.raises(TypeError):
        acl.op.set_attr_list_int(attr, "strides", "1,1")
    with pytest.raises(TypeError):
        acl.op.set_attr_bool(attr, 7, True)
    with pytest.warns(acllab.AclWarning, match="null"):
        assert acl.op.set_attr_bool(0, "x", True) == 100000
    assert acl.op.destroy_attr(attr) is None
    acllab.reset()


def _program(acl, op_dir):
    """A sample-style program: two adds and a cast on one stream; its returns and bytes."""
    card = Card(acl, op_dir)
    a = np.arange(128, dtype=np.float16).reshape(8, 16)
    x1, b1, _ = card.tensor(ACL_FLOAT16, a.shape, a)
    y, by, py = card.tensor(ACL_FLOAT16, a.shape)
    z, bz, pz = card.tensor(ACL_FLOAT16, a.shape)
    out = [acl.op.execute_v2("Add", [x1, x1], [b1, b1], [y], [by], 0, card.stream),
           acl.op.execute_v2("Add", [y, x1], [by, b1], [z], [bz], 0, card.stream)]
    # a constant input whose bytes are pageable host memory (they travel with the call)
    r_in, b_in, _ = card.tensor(ACL_FLOAT, (2, 6), np.arange(12, dtype=np.float32))
    shape = acl.create_tensor_desc(ACL_INT64, [2], ACL_FORMAT_ND)
    card.descs.append(shape)
    value = np.int64([3, 4]).tobytes()
    out.append(acl.set_tensor_const(shape, acl.util.bytes_to_ptr(value), len(value)))
    empty = acl.create_data_buffer(0, 0)
    card.buffers.append(empty)
    r_out, b_out, p_out = card.tensor(ACL_FLOAT, (3, 4))
    out.append(acl.op.execute_v2("Reshape", [r_in, shape], [b_in, empty], [r_out], [b_out], 0,
                                 card.stream))
    out.append(acl.rt.synchronize_stream(card.stream))
    data = card.fetch(pz, np.float16, (8, 16)).tobytes() + \
        card.fetch(p_out, np.float32, (3, 4)).tobytes()
    card.release()
    return out, data


def _record(runtime):
    return [(t.name, t.kind, t.start_ns, t.end_ns, t.reads, t.writes) for t in runtime.tasks]


def test_the_same_program_gives_the_same_trace(op_dir):
    runs = []
    for _ in range(2):
        acllab.reset()
        out, data = _program(acl, op_dir)
        runs.append((out, data, _record(acllab.current_runtime())))
    assert runs[0] == runs[1]
    assert runs[0][0] == [0, 0, 0, 0, 0]
    assert np.array_equal(np.frombuffer(runs[0][1][:256], np.float16).reshape(8, 16),
                          np.arange(128, dtype=np.float16).reshape(8, 16) * 3)
    assert np.frombuffer(runs[0][1][256:], np.float32).tolist() == list(range(12))
    acllab.reset()


def test_acl_op_through_the_device_boundary(op_dir):
    """The learner's side of grading: the client's acl tree comes from the server's hello,
    and a single-op program gives the same codes, bytes and trace as in process."""
    acllab.reset()
    local = _program(acl, op_dir)
    local_trace = _record(acllab.current_runtime())
    acllab.reset()
    server, sock = pair()
    client = connect(sock)
    try:
        remote_acl = client.acl
        for name in ("execute_v2", "execute", "set_model_dir", "create_attr", "set_attr_bool",
                     "create_handle", "execute_with_handle", "destroy_handle", "cast"):
            assert callable(getattr(remote_acl.op, name)), name
        assert callable(remote_acl.create_tensor_desc)
        assert remote_acl.data_type_size(ACL_FLOAT16) == 2
        remote = _program(remote_acl, op_dir)
        assert remote == local
        assert _record(acllab.current_runtime()) == local_trace
        # a code and its explanation cross the boundary too
        remote_acl.init()
        with pytest.warns(acllab.AclWarning, match="does not exist"):
            assert remote_acl.op.set_model_dir(op_dir + "-missing") == 100014
        remote_acl.finalize()
    finally:
        client.close()
        server.close()
        acllab.reset()


def test_set_attr_bool_keeps_any_nonzero_uint8_as_true():
    """aclopSetAttrBoolImpl stores static_cast<bool>(attrValue)."""
    acllab.reset()
    attr = acl.op.create_attr()
    assert acl.op.set_attr_bool(attr, "adj_x1", 2) == 0
    assert acllab.current_runtime().handles[attr].attrs["adj_x1"] == ("adj_x1", "bool", True)
    acl.op.destroy_attr(attr)
    acllab.reset()


def test_two_streams_writing_one_output_race_and_a_free_before_the_end_is_found(card):
    a = np.ones((8, 16), np.float16)
    x1, b1, _ = card.tensor(ACL_FLOAT16, (8, 16), a)
    y, by, py = card.tensor(ACL_FLOAT16, (8, 16))
    other, ret = acl.rt.create_stream()
    assert ret == 0
    assert acl.op.execute_v2("Add", [x1, x1], [b1, b1], [y], [by], 0, card.stream) == 0
    assert acl.op.execute_v2("Add", [x1, x1], [b1, b1], [y], [by], 0, other) == 0
    acl.rt.synchronize_device()
    kinds = {f.kind for f in sanitizer.analyze(acllab.current_runtime())}
    assert "race" in kinds
    acl.rt.destroy_stream(other)
    z, bz, pz = card.tensor(ACL_FLOAT16, (8, 16))
    assert acl.op.execute_v2("Add", [x1, x1], [b1, b1], [z], [bz], 0, card.stream) == 0
    assert acl.rt.free(pz) == 0                      # while the op may still write it
    card.device.remove(pz)
    acl.rt.synchronize_stream(card.stream)
    kinds = {f.kind for f in sanitizer.analyze(acllab.current_runtime())}
    assert "use-after-free" in kinds


def test_conv2d_with_list_attributes_on_the_cube(tmp_path):
    """The attributes a Conv2D entry names (strides and pads as list_int, CANN's Conv2D
    prototype) set with acl.op.set_attr_list_int; the result against a direct loop."""
    nchw = {"format": "NCHW", "type": "float"}
    cfg = tmp_path / "conv.json"
    cfg.write_text(json.dumps([{
        "op": "Conv2D",
        "input_desc": [dict(nchw, shape=[1, 2, 6, 6]), dict(nchw, shape=[3, 2, 3, 3])],
        "output_desc": [dict(nchw, shape=[1, 3, 3, 3])],
        "attr": [{"name": "strides", "type": "list_int", "value": [1, 1, 2, 2]},
                 {"name": "pads", "type": "list_int", "value": [1, 1, 1, 1]}]}]))
    compile_singleop(str(cfg), str(tmp_path / "conv"))
    acllab.reset()
    c = Card(acl, str(tmp_path / "conv"))
    rng = np.random.default_rng(5)
    x = rng.standard_normal((1, 2, 6, 6)).astype(np.float32)
    w = rng.standard_normal((3, 2, 3, 3)).astype(np.float32)
    xd, xb, _ = c.tensor(ACL_FLOAT, x.shape, x)
    wd, wb, _ = c.tensor(ACL_FLOAT, w.shape, w)
    for d in (xd, wd):
        acl.set_tensor_origin_format(d, 0)                 # ACL_FORMAT_NCHW
    yd, yb, py = c.tensor(ACL_FLOAT, (1, 3, 3, 3))
    acl.set_tensor_origin_format(yd, 0)
    attr = acl.op.create_attr()
    acl.op.set_attr_list_int(attr, "strides", [1, 1, 2, 2])
    acl.op.set_attr_list_int(attr, "pads", [1, 1, 1, 1])
    assert acl.op.execute_v2("Conv2D", [xd, wd], [xb, wb], [yd], [yb], attr, c.stream) == 0
    acl.rt.synchronize_stream(c.stream)
    pad = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    ref = np.zeros((1, 3, 3, 3), np.float32)
    for o in range(3):
        for i in range(3):
            for j in range(3):
                ref[0, o, i, j] = (pad[0, :, 2 * i:2 * i + 3, 2 * j:2 * j + 3] * w[o]).sum()
    assert np.allclose(c.fetch(py, np.float32, (1, 3, 3, 3)), ref, atol=1e-5)
    assert _ops()[-1].info["unit"] == "cube"
    acl.op.destroy_attr(attr)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        c.release()
    acllab.reset()


# -- random programs of good and bad acl.op calls ----------------------------------------

_DTYPES = [ACL_FLOAT, ACL_FLOAT16, ACL_INT64, 3, 12, -1, 27, 999]
_SHAPES = [[8, 16], [4, 4], [1000], [2, 6], [16, 32], [], [0, 4], [-1, 16], [2]]


def _random_calls(rng, card, n: int):
    """``n`` random acl.op / tensor calls over a pool of live, destroyed and made-up handles;
    every call must return (a code, a handle, None or a tuple), never raise."""
    pool = {"desc": [0, 0x1234], "attr": [0, 0x5678], "buf": [0], "handle": [0, 7]}
    for _ in range(n):
        pick = {k: v[rng.integers(len(v))] for k, v in pool.items()}
        k = int(rng.integers(12))
        if k == 0 and rng.integers(2):       # half of them fit the Add model
            pool["desc"].append(acl.create_tensor_desc(ACL_FLOAT16, [8, 16], ACL_FORMAT_ND))
        elif k == 0:
            shape = _SHAPES[rng.integers(len(_SHAPES))]
            pool["desc"].append(acl.create_tensor_desc(
                int(rng.choice(_DTYPES)), shape, int(rng.integers(-1, 4))))
        elif k == 1:
            acl.destroy_tensor_desc(pick["desc"])
        elif k == 2:
            pool["attr"].append(acl.op.create_attr())
        elif k == 3:
            acl.op.set_attr_bool(pick["attr"], "transpose_x1", int(rng.integers(3)))
        elif k == 4:
            size = int(rng.choice([0, 100, 256, 4000]))
            if size:
                ptr, ret = acl.rt.malloc(size, ACL_MEM_MALLOC_NORMAL_ONLY)
                acl.rt.memset(ptr, size, 0, size)
                card.device.append(ptr)
                buf = acl.create_data_buffer(ptr, size)
            else:
                buf = acl.create_data_buffer(0, 0)
            card.buffers.append(buf)
            pool["buf"].append(buf)
        elif k in (5, 6, 7):
            op_type = str(rng.choice(["Add", "MatMul", "Cast", "Reshape", "Mul", ""]))
            descs = [pool["desc"][i] for i in rng.integers(len(pool["desc"]), size=3)]
            bufs = [pool["buf"][i] for i in rng.integers(len(pool["buf"]), size=3)]
            acl.op.execute_v2(op_type, descs[:2], bufs[:2], descs[2:], bufs[2:], pick["attr"],
                              card.stream)
        elif k == 8:
            h, ret = acl.op.create_handle("Add", [pick["desc"]] * 2, [pick["desc"]],
                                          pick["attr"])
            if ret == 0:
                pool["handle"].append(h)
        elif k == 9:
            acl.op.execute_with_handle(pick["handle"], [pick["buf"]] * 2, [pick["buf"]],
                                       card.stream)
        elif k == 10:
            acl.op.cast(pick["desc"], pick["buf"], pool["desc"][-1], pick["buf"], 0,
                        card.stream)
        else:
            value = np.int64([3, 4]).tobytes()
            acl.set_tensor_const(pick["desc"], acl.util.bytes_to_ptr(value), len(value))
    return pool


@pytest.mark.parametrize("seed", range(12))
def test_random_acl_op_programs_return_codes_and_release_everything(op_dir, seed):
    acllab.reset()
    rng = np.random.default_rng(seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        card = Card(acl, op_dir)
        pool = _random_calls(rng, card, 100)
        assert acl.rt.synchronize_stream(card.stream) in (0, 507015)
        for h in pool["handle"][2:]:
            acl.op.destroy_handle(h)
        for a in pool["attr"][2:]:
            acl.op.destroy_attr(a)
        card.descs += pool["desc"][2:]
        for buf in card.buffers:
            acl.destroy_data_buffer(buf)
        for ptr in card.device:
            acl.rt.free(ptr)
        for d in card.descs:
            acl.destroy_tensor_desc(d)
        acl.rt.destroy_stream(card.stream)
        acl.rt.destroy_context(card.context)
        acl.rt.reset_device(0)
        assert acl.finalize() == 0
    r = acllab.current_runtime()
    assert r.leaks == []
    assert all(t.end_ns >= t.start_ns >= 0 for t in r.tasks)
    acllab.reset()


def test_the_single_op_example_compiles_and_runs_under_acllab_profile(tmp_path, capsys):
    """examples/add_op.json and examples/single_op_add.py, as their docstring says to run
    them: ``import acl`` resolves to acllab, the sum matches numpy, nothing leaks."""
    from pathlib import Path

    from acllab import cli

    examples = Path(__file__).resolve().parents[1] / "examples"
    ops = tmp_path / "op_models"
    assert cli.main(["atc", "--singleop", str(examples / "add_op.json"), "--soc_version",
                     "Ascend310", "--output", str(ops)]) == 0
    assert cli.main(["profile", "--out", str(tmp_path / "t.json"),
                     str(examples / "single_op_add.py"), str(ops)]) == 0
    text = capsys.readouterr().out
    assert "Add matches numpy: True" in text and "single_op 1" in text
    assert "leak" not in text
    script = tmp_path / "attr.py"                # ``import acl.op`` resolves too
    script.write_text("import acl.op\nprint('attr', acl.op.create_attr() != 0)\n")
    assert cli.main(["profile", "--out", str(tmp_path / "u.json"), str(script)]) == 0
    assert "attr True" in capsys.readouterr().out
    acllab.reset()


def test_set_model_dir_needs_no_init(op_dir):
    """aclopSetModelDir and aclopSetModelDirImpl check no init flag (acl_op_executor.cpp)."""
    acllab.reset()
    assert acl.op.set_model_dir(op_dir) == 0
    acllab.reset()


def test_an_input_placed_in_host_memory_is_a_constant_read_from_its_buffer(card):
    """set_tensor_place_ment(desc, ACL_MEMTYPE_HOST): SetHostMemToConst makes the buffer's
    host bytes the constant (CANN's docs: the same as set_tensor_const with exact compile);
    aclopCreateHandleImpl refuses a host-placed input that is no constant (200001)."""
    from acllab.acl.constants import ACL_MEMTYPE_HOST

    x = np.arange(12, dtype=np.float32).reshape(2, 6)
    xd, xb, _ = card.tensor(ACL_FLOAT, (2, 6), x)
    shape_desc = acl.create_tensor_desc(ACL_INT64, [2], ACL_FORMAT_ND)
    card.descs.append(shape_desc)
    assert acl.set_tensor_place_ment(shape_desc, ACL_MEMTYPE_HOST) == 0
    value = bytearray(np.int64([3, 4]).tobytes())
    host = acl.create_data_buffer(acl.util.bytes_to_ptr(value), len(value))
    card.buffers.append(host)
    y, by, py = card.tensor(ACL_FLOAT, (3, 4))
    assert acl.op.execute_v2("Reshape", [xd, shape_desc], [xb, host], [y], [by], 0,
                             card.stream) == 0
    acl.rt.synchronize_stream(card.stream)
    assert np.array_equal(card.fetch(py, np.float32, (3, 4)), x.reshape(3, 4))
    value[:] = np.int64([4, 3]).tobytes()          # read again at each call: now no model
    with pytest.warns(acllab.AclWarning, match="100024"):
        acl.op.execute_v2("Reshape", [xd, shape_desc], [xb, host], [y], [by], 0, card.stream)
    with pytest.warns(acllab.AclWarning, match="placed in host memory"):
        assert acl.op.create_handle("Reshape", [xd, shape_desc], [y], 0) == (0, 200001)


def test_top_class_of_a_model_run_by_cast_then_argmaxv2_on_the_same_stream(tmp_path):
    # The post-processing of Ascend's vpc_resnet50_imagenet_classification Python sample:
    # the model's float32 scores go through acl.op.cast to float16, then ArgMaxV2 with a
    # constant int32 dimension 0 (set_tensor_const, its data buffer create_data_buffer(0, 0))
    # gives the int32 index of the top class; its op_list.json compiles both ops. Here the
    # tiny 4-class model stands in for ResNet-50, and the three steps share one stream with
    # one synchronisation at the end: the stream's order is the only dependency.
    from acllab.acl.constants import ACL_INT32
    from acllab.model import compile_model, save, tiny_dataset, tiny_forward

    classes = 4
    cfg = tmp_path / "op_list.json"
    cfg.write_text(json.dumps([
        {"op": "Cast", "input_desc": [_d([classes], "float")], "output_desc": [_d([classes])],
         "attr": [{"name": "truncate", "type": "bool", "value": False},
                  {"name": "dst_type", "type": "int", "value": 1}]},
        {"op": "ArgMaxV2",
         "input_desc": [_d([classes]), dict(_d([1], "int32"), is_const=True, const_value=[0])],
         "output_desc": [_d([1], "int32")]}]))
    compile_singleop(str(cfg), str(tmp_path / "op_models"), "Ascend310")
    save(compile_model("zoo:tiny"), tmp_path / "tiny.om")
    images, labels = tiny_dataset(3, seed=7)

    acllab.reset()
    card = Card(acl, str(tmp_path / "op_models"))
    model_id, ret = acl.mdl.load_from_file(str(tmp_path / "tiny.om"))
    assert ret == 0
    mdesc = acl.mdl.create_desc()
    assert acl.mdl.get_desc(mdesc, model_id) == 0
    assert acl.mdl.get_output_size_by_index(mdesc, 0) == classes * 4
    _, in_buf, _ = card.tensor(ACL_FLOAT, (1, 1, 16, 16))
    in_ptr = card.device[-1]
    _, out_buf, _ = card.tensor(ACL_FLOAT, (classes,))
    inputs, outputs = acl.mdl.create_dataset(), acl.mdl.create_dataset()
    acl.mdl.add_dataset_buffer(inputs, in_buf)
    acl.mdl.add_dataset_buffer(outputs, out_buf)
    scores = acl.create_tensor_desc(ACL_FLOAT, [classes], ACL_FORMAT_ND)
    half, half_buf, _ = card.tensor(ACL_FLOAT16, (classes,))
    x = acl.create_tensor_desc(ACL_FLOAT16, [classes], ACL_FORMAT_ND)
    dimension = acl.create_tensor_desc(ACL_INT32, [1], ACL_FORMAT_ND)
    zero = bytes(acl.data_type_size(ACL_INT32))
    assert acl.set_tensor_const(dimension, acl.util.bytes_to_ptr(zero), len(zero)) == 0
    no_data = acl.create_data_buffer(0, 0)
    top, top_buf, top_ptr = card.tensor(ACL_INT32, (1,))
    attr = acl.op.create_attr()

    for image, label in zip(images, labels, strict=True):
        raw = np.ascontiguousarray(image[None]).tobytes()
        assert acl.rt.memcpy(in_ptr, len(raw), acl.util.bytes_to_ptr(raw), len(raw),
                             ACL_MEMCPY_HOST_TO_DEVICE) == 0
        assert acl.mdl.execute_async(model_id, inputs, outputs, card.stream) == 0
        assert acl.op.cast(scores, acl.mdl.get_dataset_buffer(outputs, 0), half, half_buf, 0,
                           card.stream) == 0
        assert acl.op.execute_v2("ArgMaxV2", [x, dimension], [half_buf, no_data], [top],
                                 [top_buf], attr, card.stream) == 0
        assert acl.rt.synchronize_stream(card.stream) == 0
        want = np.argmax(tiny_forward(image[None])[0].astype(np.float16))
        got = card.fetch(top_ptr, np.int32, (1,))
        assert got.tolist() == [want] and want == label

    r = acllab.current_runtime()
    names = [(t.kind, t.name) for t in r.tasks if t.kind in ("model_op", "single_op")]
    singles = [n for k, n in names if k == "single_op"]
    assert singles == ["Cast", "ArgMaxV2"] * 3
    # each Cast starts after the model's last op, and each ArgMaxV2 after its Cast
    ops = [t for t in r.tasks if t.kind in ("model_op", "single_op")]
    for before, after in zip(ops, ops[1:], strict=False):
        assert after.start_ns >= before.end_ns
    assert not [f for f in sanitizer.analyze(r) if f.kind != "leak"]

    acl.op.destroy_attr(attr)
    assert acl.destroy_data_buffer(no_data) == 0
    for d in (scores, x, dimension):
        acl.destroy_tensor_desc(d)
    assert acl.mdl.destroy_dataset(inputs) == 0
    assert acl.mdl.destroy_dataset(outputs) == 0
    assert acl.mdl.unload(model_id) == 0
    assert acl.mdl.destroy_desc(mdesc) == 0
    card.release()
    acllab.reset()


def _argmax_program(tmp_path, entries):
    cfg = tmp_path / "argmax.json"
    cfg.write_text(json.dumps(entries))
    compile_singleop(str(cfg), str(tmp_path / "argmax_models"), "Ascend310")
    acllab.reset()
    return Card(acl, str(tmp_path / "argmax_models"))


def test_argmaxv2_not_found_names_the_constant_and_prints_the_entry(tmp_path):
    # a constant that differs is another model (CheckModelAndAttrMatch compares const-ness
    # and value): dimension 1 against a model compiled for 0 is ACL_ERROR_OP_NOT_FOUND 100024
    from acllab.acl.constants import ACL_INT32
    card = _argmax_program(tmp_path, [{
        "op": "ArgMaxV2", "input_desc": [_d([4, 5]), dict(_d([1], "int32"), is_const=True,
                                                          const_value=[0])],
        "output_desc": [_d([5], "int32")]}])
    try:
        x, xb, _ = card.tensor(ACL_FLOAT16, (4, 5), np.ones((4, 5), np.float16))
        dim = acl.create_tensor_desc(ACL_INT32, [1], ACL_FORMAT_ND)
        one = np.int32([1]).tobytes()
        assert acl.set_tensor_const(dim, acl.util.bytes_to_ptr(one), 4) == 0
        card.descs.append(dim)
        nob = acl.create_data_buffer(0, 0)
        card.buffers.append(nob)
        y, yb, _ = card.tensor(ACL_INT32, (4,))
        with pytest.warns(acllab.AclWarning) as caught:
            ret = acl.op.execute_v2("ArgMaxV2", [x, dim], [xb, nob], [y], [yb], 0, card.stream)
        assert ret == 100024
        text = str(caught[0].message)
        assert "input 1 is int32 ND [1], const, the model's int32 ND [1], const" in text
        entry = json.loads(text.split("that compiles it: ", 1)[1])
        assert entry["input_desc"][1]["const_value"] == [1]
        assert entry["output_desc"] == [_d([4], "int32")]
    finally:
        card.release()
        acllab.reset()


def test_argmaxv2_with_a_dimension_from_device_memory_and_a_bad_one_faults(tmp_path):
    # a dimension that is no constant is read when the op runs; one that gives another shape
    # than the output's is an AI Core exception, reported at the synchronisation (507015)
    from acllab.acl.constants import ACL_INT32
    card = _argmax_program(tmp_path, [{
        "op": "ArgMaxV2", "input_desc": [_d([6, 7], "float"), _d([1], "int32")],
        "output_desc": [_d([6], "int64")],
        "attr": [{"name": "dtype", "type": "data_type", "value": 9}]}])
    try:
        m = np.random.default_rng(3).standard_normal((6, 7)).astype(np.float32)
        x, xb, _ = card.tensor(ACL_FLOAT, (6, 7), m)
        d, db, dp = card.tensor(ACL_INT32, (1,), np.int32([-1]))
        y, yb, yp = card.tensor(ACL_INT64, (6,))
        attr = acl.op.create_attr()
        assert acl.op.set_attr_data_type(attr, "dtype", ACL_INT64) == 0
        assert acl.op.execute_v2("ArgMaxV2", [x, d], [xb, db], [y], [yb], attr,
                                 card.stream) == 0
        assert acl.rt.synchronize_stream(card.stream) == 0
        assert card.fetch(yp, np.int64, (6,)).tolist() == np.argmax(m, -1).tolist()
        raw = np.int32([0]).tobytes()                  # [7] values, not the output's [6]
        assert acl.rt.memcpy(dp, 4, acl.util.bytes_to_ptr(raw), 4,
                             ACL_MEMCPY_HOST_TO_DEVICE) == 0
        assert acl.op.execute_v2("ArgMaxV2", [x, d], [xb, db], [y], [yb], attr,
                                 card.stream) == 0
        with pytest.warns(acllab.AclWarning, match="dimension 0 gives an output of"):
            assert acl.rt.synchronize_stream(card.stream) == 507015
        acl.op.destroy_attr(attr)
    finally:
        card.release()
        acllab.reset()


def test_slice_through_a_handle_with_offsets_and_size_in_device_memory(tmp_path):
    # Ascend's acl_execute_slice Python sample: a Slice of float16 [600, 3000] with int32
    # offsets and size, create_handle once, then execute_with_handle on a stream
    from acllab.acl.constants import ACL_INT32
    card = _argmax_program(tmp_path, [{
        "op": "Slice", "input_desc": [_d([60, 300]), _d([2], "int32"), _d([2], "int32")],
        "output_desc": [_d([20, 300])]}])
    try:
        a = np.random.default_rng(4).standard_normal((60, 300)).astype(np.float16)
        x, xb, _ = card.tensor(ACL_FLOAT16, (60, 300), a)
        o, ob, _ = card.tensor(ACL_INT32, (2,), np.int32([10, 0]))
        s, sb, _ = card.tensor(ACL_INT32, (2,), np.int32([20, -1]))
        y, yb, yp = card.tensor(ACL_FLOAT16, (20, 300))
        attr = acl.op.create_attr()
        handle, ret = acl.op.create_handle("Slice", [x, o, s], [y], attr)
        assert ret == 0
        assert acl.op.execute_with_handle(handle, [xb, ob, sb], [yb], card.stream) == 0
        assert acl.rt.synchronize_stream(card.stream) == 0
        assert np.array_equal(card.fetch(yp, np.float16, (20, 300)), a[10:30])
        assert [t.name for t in _ops()] == ["Slice"]
        acl.op.destroy_handle(handle)
        acl.op.destroy_attr(attr)
    finally:
        card.release()
        acllab.reset()


def test_execute_is_execute_v2s_older_form(card):
    # aclopExecuteImpl checks and runs as aclopExecuteV2Impl does (hicann/ge, op.cpp);
    # CANN's pyACL reference: acl.op.execute, to be deprecated, use execute_v2
    a = np.arange(128, dtype=np.float16).reshape(8, 16)
    x1, b1, _ = card.tensor(ACL_FLOAT16, a.shape, a)
    x2, b2, _ = card.tensor(ACL_FLOAT16, a.shape, a)
    y, by, py = card.tensor(ACL_FLOAT16, a.shape)
    assert acl.op.execute("Add", [x1, x2], [b1, b2], [y], [by], 0, card.stream) == 0
    assert acl.rt.synchronize_stream(card.stream) == 0
    assert np.array_equal(card.fetch(py, np.float16, a.shape), a + a)
    assert [t.api for t in _ops()] == ["execute"]
    with pytest.warns(acllab.AclWarning, match="100024"):
        assert acl.op.execute("Sub", [x1, x2], [b1, b2], [y], [by], 0, card.stream) == 100024
