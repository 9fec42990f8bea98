"""acl.op.compile and compile_and_execute: single ops compiled at run time, as Ascend's
acl_compile_add (op_runner.cpp: aclopCompile, then aclopExecuteV2 with no aclopSetModelDir)
and acl_compile_and_execute_conv2d (main.cpp: aclopCompileAndExecute of an NHWC Conv2D whose
bias is left out) do, and acl.set_compile_opt.

Facts from hicann/ge: api/acl/acl_op_compiler/single_op/op_compiler.cpp (aclopCompile,
aclopCompileAndExecute's CheckInput and ConstructAclOp, aclSetCompileopt,
aclGetCompileoptSize), acl_op_executor/single_op/acl_op_resource_manager.cpp (GetOpModel:
a registered model first, else a build), compiler/api/generator/ge_generator.cc
(CheckEngineTypeSupport) and api/acl/common/error_codes_inner.h (ACL_GET_ERRCODE_GE: GE's
FAILED becomes ACL_ERROR_GE_FAILURE 500002). Results are checked against numpy references
written from the ops' definitions.
"""

import warnings

import numpy as np
import pytest

import acllab
from acllab import acl
from acllab.acl import op as op_module
from acllab.acl.constants import (
    ACL_MEM_MALLOC_NORMAL_ONLY,
    ACL_MEMCPY_DEVICE_TO_HOST,
    ACL_MEMCPY_HOST_TO_DEVICE,
)
from acllab.model import opkernels

F32, F16, I32 = 0, 1, 3
NCHW, NHWC, ND = 0, 1, 2


@pytest.fixture
def dev():
    acllab.reset()
    acl.init()
    acl.rt.set_device(0)
    stream, _ = acl.rt.create_stream()
    kept = []

    class Dev:
        s = stream

        @staticmethod
        def tensor(dtype, dims, fmt=ND, data=None):
            """(desc, buffer, device address, bytes) of a device tensor holding ``data``."""
            desc = acl.create_tensor_desc(dtype, list(dims), fmt)
            size = acl.get_tensor_desc_size(desc)
            ptr, _ = acl.rt.malloc(max(size, 1), ACL_MEM_MALLOC_NORMAL_ONLY)
            if data is not None:
                kept.append(np.ascontiguousarray(data).tobytes())
                acl.rt.memcpy(ptr, size, acl.util.bytes_to_ptr(kept[-1]), size,
                              ACL_MEMCPY_HOST_TO_DEVICE)
            return desc, acl.create_data_buffer(ptr, size), ptr, size

        @staticmethod
        def read(t, dtype, dims):
            back = bytearray(t[3])
            acl.rt.memcpy(acl.util.bytes_to_ptr(back), t[3], t[2], t[3],
                          ACL_MEMCPY_DEVICE_TO_HOST)
            return np.frombuffer(bytes(back), dtype).reshape(dims)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield Dev
    acllab.reset()


def _conv_ref(x_nchw, w_oihw, bias, pad):
    """Convolution from its definition, in float64: y[n,o,i,j] = b[o] + sum over c, di, dj of
    x[n,c,i+di-pad,j+dj-pad] * w[o,c,di,dj] (zeros outside x), stride 1."""
    n, c, h, wd = x_nchw.shape
    o, _, kh, kw = w_oihw.shape
    xp = np.pad(x_nchw.astype(np.float64), ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    ho, wo = h + 2 * pad - kh + 1, wd + 2 * pad - kw + 1
    y = np.zeros((n, o, ho, wo))
    for i in range(ho):
        for j in range(wo):
            y[:, :, i, j] = np.einsum("ncab,ocab->no", xp[:, :, i:i + kh, j:j + kw],
                                      w_oihw.astype(np.float64))
    return y + (0 if bias is None else bias.reshape(1, -1, 1, 1))


def _add_sample(d, a, b):
    """op_runner.cpp's CompileStaticOp then RunOp: compile, then execute_v2; the output."""
    x1, x2 = d.tensor(I32, a.shape, ND, a), d.tensor(I32, b.shape, ND, b)
    y = d.tensor(I32, a.shape)
    attr = acl.op.create_attr()
    codes = [acl.op.compile("Add", [x1[0], x2[0]], [y[0]], attr, op_module.ACL_ENGINE_SYS,
                            op_module.ACL_COMPILE_SYS, None),
             acl.op.execute_v2("Add", [x1[0], x2[0]], [x1[1], x2[1]], [y[0]], [y[1]], attr,
                               d.s),
             acl.rt.synchronize_stream(d.s)]
    return codes, d.read(y, np.int32, a.shape)


def test_compiled_add_runs_with_execute_v2_and_no_model_directory(dev):
    rng = np.random.default_rng(3)
    a = rng.integers(-100, 100, (8, 16)).astype(np.int32)
    b = rng.integers(-100, 100, (8, 16)).astype(np.int32)
    codes, out = _add_sample(dev, a, b)
    assert codes == [0, 0, 0]
    assert np.array_equal(out, a + b)
    tasks = [t for t in acllab.current_runtime().tasks if t.kind == "single_op"]
    assert [(t.name, t.api) for t in tasks] == [("Add", "execute_v2")]


def test_the_add_check_rejects_a_compile_that_registers_nothing(dev, monkeypatch):
    """If compile built the op but registered nothing, execute_v2 finds no model (100024)."""
    monkeypatch.setattr(op_module, "_build", lambda call, engine: call)
    a = np.ones((8, 16), np.int32)
    codes, out = _add_sample(dev, a, a)
    assert codes[1] == 100024
    assert not np.array_equal(out, a + a)


def test_compile_and_execute_runs_the_conv2d_sample_s_nhwc_convolution(dev):
    """main.cpp's call at a small size: x NHWC, filter NCHW, bias ACL_DT_UNDEFINED with a
    null data buffer, strides, pads and dilations [1, 1, 1, 1], no data_format."""
    rng = np.random.default_rng(5)
    x = rng.uniform(1, 10, (2, 9, 7, 3)).astype(np.float16)
    w = rng.uniform(1, 3, (6, 3, 3, 3)).astype(np.float16)
    tx, tw = dev.tensor(F16, x.shape, NHWC, x), dev.tensor(F16, w.shape, NCHW, w)
    ty = dev.tensor(F16, (2, 9, 7, 6), NHWC)
    bias = acl.create_tensor_desc(-1, None, -1)
    attr = acl.op.create_attr()
    for name in ("strides", "pads", "dilations"):
        acl.op.set_attr_list_int(attr, name, [1, 1, 1, 1])
    ret = acl.op.compile_and_execute("Conv2D", [tx[0], tw[0], bias],
                                     [tx[1], tw[1], acl.create_data_buffer(0, 0)], [ty[0]],
                                     [ty[1]], attr, 0, 0, None, dev.s)
    assert (ret, acl.rt.synchronize_stream(dev.s)) == (0, 0)
    got = dev.read(ty, np.float16, (2, 9, 7, 6)).astype(np.float64)
    ref = _conv_ref(x.transpose(0, 3, 1, 2), w, None, 1).transpose(0, 2, 3, 1)
    assert np.allclose(got, ref, rtol=1e-3)
    # a later execute_v2 of the same op finds the compiled model
    again = acl.op.execute_v2("Conv2D", [tx[0], tw[0], bias],
                              [tx[1], tw[1], acl.create_data_buffer(0, 0)], [ty[0]], [ty[1]],
                              attr, dev.s)
    assert again == 0


def test_the_conv_check_rejects_a_kernel_that_ignores_the_layout(dev, monkeypatch):
    """A kernel running the NHWC data as if it were NCHW (with the axes swapped back)."""
    def wrong(x, w, bias, stride, pad, groups):
        return np.swapaxes(opkernels.conv2d(x.transpose(0, 3, 2, 1), w, bias, stride, pad,
                                            groups), 1, 3)
    monkeypatch.setattr(opkernels, "_conv_nhwc", wrong)
    rng = np.random.default_rng(5)
    x = rng.uniform(1, 10, (1, 6, 6, 3)).astype(np.float16)
    w = rng.uniform(1, 3, (2, 3, 3, 3)).astype(np.float16)
    tx, tw = dev.tensor(F16, x.shape, NHWC, x), dev.tensor(F16, w.shape, NCHW, w)
    ty = dev.tensor(F16, (1, 6, 6, 2), NHWC)
    attr = acl.op.create_attr()
    for name in ("strides", "pads"):
        acl.op.set_attr_list_int(attr, name, [1, 1, 1, 1])
    assert acl.op.compile_and_execute("Conv2D", [tx[0], tw[0]], [tx[1], tw[1]], [ty[0]],
                                      [ty[1]], attr, 0, 0, None, dev.s) == 0
    acl.rt.synchronize_stream(dev.s)
    got = dev.read(ty, np.float16, (1, 6, 6, 2)).astype(np.float64)
    ref = _conv_ref(x.transpose(0, 3, 1, 2), w, None, 1).transpose(0, 2, 3, 1)
    assert not np.allclose(got, ref, rtol=1e-3)


@pytest.mark.parametrize("layout", ["NCHW", "NHWC-filter"])
def test_compile_and_execute_a_conv2d_with_bias_and_stride(dev, layout):
    """NCHW with a bias and stride 2, and an NCHW x with its filter in NHWC (Cout, kh, kw,
    Cin): both against the definition."""
    rng = np.random.default_rng(11)
    x = rng.standard_normal((1, 4, 9, 9)).astype(np.float32)
    w = rng.standard_normal((5, 4, 3, 3)).astype(np.float32)
    b = rng.standard_normal(5).astype(np.float32)
    wdata, wfmt = (w, NCHW) if layout == "NCHW" else (w.transpose(0, 2, 3, 1), NHWC)
    tx, tw = dev.tensor(F32, x.shape, NCHW, x), dev.tensor(F32, wdata.shape, wfmt, wdata)
    tb, ty = dev.tensor(F32, (5,), ND, b), dev.tensor(F32, (1, 5, 5, 5), NCHW)
    attr = acl.op.create_attr()
    acl.op.set_attr_list_int(attr, "strides", [1, 1, 2, 2])
    acl.op.set_attr_list_int(attr, "pads", [1, 1, 1, 1])
    ret = acl.op.compile_and_execute("Conv2D", [tx[0], tw[0], tb[0]], [tx[1], tw[1], tb[1]],
                                     [ty[0]], [ty[1]], attr, op_module.ACL_ENGINE_AICORE, 0,
                                     None, dev.s)
    assert (ret, acl.rt.synchronize_stream(dev.s)) == (0, 0)
    ref = _conv_ref(x, w, b, 1)[:, :, ::2, ::2]
    assert np.allclose(dev.read(ty, np.float32, (1, 5, 5, 5)), ref, rtol=1e-4, atol=1e-4)


def test_compiled_cast_softmax_and_relu_on_the_vector_engine(dev):
    """Three more ops, compiled for ACL_ENGINE_VECTOR: cast finds its compiled Cast model."""
    x = np.linspace(-4, 4, 24, dtype=np.float32).reshape(4, 6)
    tx = dev.tensor(F32, x.shape, ND, x)
    t16, tsm, trl = (dev.tensor(F16, x.shape), dev.tensor(F32, x.shape),
                     dev.tensor(F32, x.shape))
    cast_attr = acl.op.create_attr()
    acl.op.set_attr_int(cast_attr, "dst_type", F16)
    empty = acl.op.create_attr()
    vec = op_module.ACL_ENGINE_VECTOR
    assert acl.op.compile("Cast", [tx[0]], [t16[0]], cast_attr, vec, 0, None) == 0
    assert acl.op.cast(tx[0], tx[1], t16[0], t16[1], 0, dev.s) == 0
    for name, out in (("Softmax", tsm), ("Relu", trl)):
        assert acl.op.compile_and_execute(name, [tx[0]], [tx[1]], [out[0]], [out[1]], empty,
                                          vec, 0, None, dev.s) == 0
    acl.rt.synchronize_stream(dev.s)
    assert np.array_equal(dev.read(t16, np.float16, x.shape), x.astype(np.float16))
    e = np.exp(x.astype(np.float64) - x.max(axis=1, keepdims=True))
    assert np.allclose(dev.read(tsm, np.float32, x.shape), e / e.sum(axis=1, keepdims=True),
                       rtol=1e-6)
    assert np.array_equal(dev.read(trl, np.float32, x.shape), np.maximum(x, 0))


def test_a_second_compile_finds_the_registered_model_and_ignores_the_engine(dev):
    """GetOpModel matches a registered model before it builds: the second compile costs one
    API time and, finding the model, never looks at its (bad) engine type."""
    a = dev.tensor(F16, (4, 4))
    attr = acl.op.create_attr()
    r = acllab.current_runtime()
    t0 = r.host_ns
    assert acl.op.compile("Mul", [a[0], a[0]], [a[0]], attr, 0, 0, None) == 0
    t1 = r.host_ns
    assert acl.op.compile("Mul", [a[0], a[0]], [a[0]], attr, 99, 0, None) == 0
    t2 = r.host_ns
    assert t2 - t1 < t1 - t0
    assert len(r.op_compiled) == 1
    assert acl.op.compile("Mul", [a[0], a[0]], [dev.tensor(F16, (4, 4))[0]], attr, 99, 0,
                          None) == 0             # another description, the same dims
    b = dev.tensor(F16, (2, 4))
    assert acl.op.compile("Mul", [b[0], b[0]], [b[0]], attr, 99, 0, None) == 500002


def _bad_cases(dev):
    f = dev.tensor(F32, (4, 4))
    g = dev.tensor(F32, (3,))
    h = dev.tensor(F32, (4, 4))
    acl.set_tensor_place_ment(h[0], 1)
    attr = acl.op.create_attr()
    compile_ = acl.op.compile
    cae = acl.op.compile_and_execute
    fd, fb = f[0], f[1]
    undefined = acl.create_tensor_desc(-1, None, -1)
    nobuf = acl.create_data_buffer(0, 0)
    return [
        ("unknown op", lambda: compile_("Frobnicate", [fd], [fd], attr, 0, 0, None), 500002,
         "acllab has no single op 'Frobnicate'"),
        ("mismatched output", lambda: compile_("Add", [fd, fd], [g[0]], attr, 0, 0, None),
         500002, "output 0 is float [4, 4]"),
        ("one input of two", lambda: compile_("Add", [fd], [fd], attr, 0, 0, None), 500002,
         "takes 2 inputs"),
        ("bad engine", lambda: compile_("Sub", [fd, fd], [fd], attr, 3, 0, None), 500002,
         "engine type 3"),
        ("bad flag", lambda: compile_("Sub", [fd, fd], [fd], attr, 3, 2, None), 200001,
         "compile_flag 2"),
        ("unregistered, no op_path", lambda: compile_("Sub", [fd, fd], [fd], attr, 0, 1, None),
         100000, "op_path is null"),
        ("null op type", lambda: compile_(None, [fd, fd], [fd], attr, 0, 0, None), 100000,
         "op_type is null"),
        ("null description", lambda: compile_("Sub", [fd, 0], [fd], attr, 0, 0, None), 100000,
         "input_desc[1] is a null tensor description"),
        ("host input", lambda: compile_("Sub", [fd, h[0]], [fd], attr, 0, 0, None), 200001,
         "placed in host memory"),
        ("cube op on the vector engine",
         lambda: compile_("MatMul", [fd, fd], [fd], attr, 2, 0, None), 500002,
         "no kernel on VectorEngine"),
        ("absent input first", lambda: compile_("MatMul", [undefined, fd, fd], [fd], attr, 0,
                                                 0, None), 500002, "input 0 is left out"),
        ("conv data_format against x's format",
         lambda: _conv_format_clash(dev, attr), 500002, "does not match x's format NHWC"),
        ("null data buffer", lambda: cae("Add", [fd, fd], [fb, 0], [fd], [fb], attr, 0, 0, None,
                                         dev.s), 100000, "inputs[1] is a null data buffer"),
        ("flag before buffers", lambda: cae("Add", [fd, fd], [fb, 0], [fd], [fb], attr, 0, 9,
                                            None, dev.s), 200001, "compile_flag 9"),
        ("unknown op, executed", lambda: cae("Nope", [fd], [fb], [fd], [fb], attr, 0, 0, None,
                                             dev.s), 500002, "no single op 'Nope'"),
        ("count mismatch", lambda: cae("Add", [fd, fd], [fb], [fd], [fb], attr, 0, 0, None,
                                       dev.s), 100000, "2 input descriptions but 1"),
        ("absent with a buffer", lambda: cae("Relu", [fd, undefined], [fb, nobuf], [fd], [fb],
                                             attr, 0, 0, None, dev.s), 500002,
         "has no optional input to leave out"),
        ("auto tune", lambda: acl.set_compile_opt(2, "x"), 200006, "AOE"),
        ("no such option", lambda: acl.set_compile_opt(17, "x"), 500000, "no aclCompileOpt"),
        ("null option value", lambda: acl.set_compile_opt(0, None), 100000, "value is null"),
    ]


def _conv_format_clash(dev, attr):
    x = dev.tensor(F32, (1, 5, 5, 2), NHWC)
    w = dev.tensor(F32, (3, 2, 3, 3), NCHW)
    y = dev.tensor(F32, (1, 3, 3, 3), NCHW)
    a = acl.op.create_attr()
    acl.op.set_attr_list_int(a, "strides", [1, 1, 1, 1])
    acl.op.set_attr_string(a, "data_format", "NCHW")
    return acl.op.compile("Conv2D", [x[0], w[0]], [y[0]], a, 0, 0, None)


def test_bad_input_gives_cann_s_codes_and_says_why(dev):
    cases = _bad_cases(dev)
    seen = []
    for name, call, code, why in cases:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            got = call()
        msgs = " ".join(str(w.message) for w in caught)
        assert got == code, (name, got, msgs)
        assert why in msgs, (name, msgs)
        seen.append(got)
    assert set(seen) == {100000, 200001, 200006, 500000, 500002}
    assert not acllab.current_runtime().op_compiled       # none of them registered a model
    assert not [t for t in acllab.current_runtime().tasks if t.kind == "single_op"]


def test_the_bad_input_check_rejects_a_wrong_code(dev, monkeypatch):
    """With the engine check gone, the bad-engine case compiles (0): the check fails."""
    monkeypatch.setitem(op_module._ENGINES, 3, "a made-up engine")
    with pytest.raises(AssertionError, match="bad engine"):
        test_bad_input_gives_cann_s_codes_and_says_why(dev)


def test_unregistered_with_an_op_path_compiles_acllab_s_kernel(dev):
    a = dev.tensor(F32, (2, 3), ND, np.arange(6, dtype=np.float32))
    y = dev.tensor(F32, (2, 3))
    attr = acl.op.create_attr()
    assert acl.op.compile_and_execute("Relu", [a[0]], [a[1]], [y[0]], [y[1]], attr, 0,
                                      op_module.ACL_COMPILE_UNREGISTERED, "./my_ops",
                                      dev.s) == 0
    acl.rt.synchronize_stream(dev.s)
    assert np.array_equal(dev.read(y, np.float32, (2, 3)), np.arange(6).reshape(2, 3))


def test_empty_outputs_compile_and_run_nothing(dev):
    e = dev.tensor(F32, (0, 4))
    attr = acl.op.create_attr()
    assert acl.op.compile_and_execute("Relu", [e[0]], [e[1]], [e[0]], [e[1]], attr, 0, 0, None,
                                      dev.s) == 0
    assert not acllab.current_runtime().op_compiled
    assert not acllab.current_runtime().tasks or all(
        t.kind != "single_op" for t in acllab.current_runtime().tasks)


def test_execute_of_another_shape_names_the_compiled_model_it_misses(dev):
    a, b = dev.tensor(F16, (8, 16)), dev.tensor(F16, (8, 8))
    attr = acl.op.create_attr()
    assert acl.op.compile("Add", [a[0], a[0]], [a[0]], attr, 0, 0, None) == 0
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ret = acl.op.execute_v2("Add", [b[0], b[0]], [b[1], b[1]], [b[0]], [b[1]], attr, dev.s)
    assert ret == 100024
    assert "the closest Add model differs: input 0 is float16 ND [8, 8]" in str(
        caught[0].message)


def test_compile_options_and_flag(dev):
    assert acl.get_compile_opt_size(6) == 0
    assert acl.set_compile_opt(6, "/tmp/debug") == 0
    assert acl.get_compile_opt_size(6) == len("/tmp/debug") + 1
    assert acl.set_compile_opt(10, "enable") == 0
    assert acllab.current_runtime().compile_opts[10] == "1"
    assert acl.set_compile_opt(10, "disable") == 0
    assert acllab.current_runtime().compile_opts[10] == "0"
    assert acl.get_compile_opt_size(10) == 256
    assert acl.get_compile_opt_size(99) == 0
    assert acl.op.set_compile_flag(op_module.ACL_OP_COMPILE_FUZZ) == 0
    assert acllab.current_runtime().compile_flag == 1


def test_reset_forgets_compiled_ops(dev):
    a = dev.tensor(F16, (4,))
    attr = acl.op.create_attr()
    assert acl.op.compile("Relu", [a[0]], [a[0]], attr, 0, 0, None) == 0
    assert acllab.current_runtime().op_compiled
    acllab.reset()
    assert not acllab.current_runtime().op_compiled


def test_the_same_program_gives_the_same_trace_twice(dev):
    def run():
        acllab.reset()
        acl.init()
        acl.rt.set_device(0)
        stream, _ = acl.rt.create_stream()
        dev.s = stream
        a = np.arange(128, dtype=np.int32).reshape(8, 16)
        _add_sample(dev, a, a)
        r = acllab.current_runtime()
        return [(t.name, t.start_ns, t.end_ns) for t in r.tasks], [e[:4] for e in r.api_log
                                                                   if isinstance(e, tuple)]

    assert run() == run()


def test_a_matmul_with_its_bias_left_out(dev):
    """MatMul's optional bias as aclopCompileAndExecute's docs say to leave it out."""
    p = np.arange(12, dtype=np.float32).reshape(3, 4) / 4
    q = np.arange(8, dtype=np.float32).reshape(4, 2) - 3
    tp, tq = dev.tensor(F32, p.shape, ND, p), dev.tensor(F32, q.shape, ND, q)
    ty = dev.tensor(F32, (3, 2))
    bias = acl.create_tensor_desc(-1, None, -1)
    attr = acl.op.create_attr()
    assert acl.op.compile_and_execute("MatMul", [tp[0], tq[0], bias],
                                      [tp[1], tq[1], acl.create_data_buffer(0, 0)], [ty[0]],
                                      [ty[1]], attr, 0, 0, None, dev.s) == 0
    acl.rt.synchronize_stream(dev.s)
    assert np.allclose(dev.read(ty, np.float32, (3, 2)), p @ q, rtol=1e-6)


def test_an_op_with_an_input_left_out_and_no_model_says_to_compile_it(dev):
    p = dev.tensor(F32, (3, 4))
    q, y = dev.tensor(F32, (4, 2)), dev.tensor(F32, (3, 2))
    bias = acl.create_tensor_desc(-1, None, -1)
    attr = acl.op.create_attr()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ret = acl.op.execute_v2("MatMul", [p[0], q[0], bias],
                                [p[1], q[1], acl.create_data_buffer(0, 0)], [y[0]], [y[1]],
                                attr, dev.s)
    assert ret == 100024
    assert "compile the op at run time first (acl.op.compile" in str(caught[0].message)
    assert "absent (ACL_DT_UNDEFINED)" in str(caught[0].message)


def test_compile_and_execute_takes_an_input_placed_in_host_memory(dev):
    """aclopCompileAndExecute's docs: an input placed in host memory (a shape) is read from
    the host when the op runs, where aclopCompile refuses it (200001)."""
    x = np.arange(12, dtype=np.float32)
    tx, ty = dev.tensor(F32, (2, 6), ND, x), dev.tensor(F32, (3, 4))
    shape = np.array([3, 4], np.int64)
    sdesc = acl.create_tensor_desc(9, [2], ND)
    acl.set_tensor_place_ment(sdesc, 1)
    held = shape.tobytes()
    sbuf = acl.create_data_buffer(acl.util.bytes_to_ptr(held), len(held))
    attr = acl.op.create_attr()
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        assert acl.op.compile("Reshape", [tx[0], sdesc], [ty[0]], attr, 0, 0, None) == 200001
    assert acl.op.compile_and_execute("Reshape", [tx[0], sdesc], [tx[1], sbuf], [ty[0]],
                                      [ty[1]], attr, 0, 0, None, dev.s) == 0
    acl.rt.synchronize_stream(dev.s)
    assert np.array_equal(dev.read(ty, np.float32, (3, 4)), x.reshape(3, 4))
