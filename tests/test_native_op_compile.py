"""Online op compilation in C (acl/acl_op_compiler.h, -lacl_op_compiler) beside its pyACL twin.

Programs in the style of Ascend's acl_compile_add (op_runner.cpp: aclopCompile, then
aclopExecuteV2 without aclopSetModelDir) and acl_compile_and_execute_conv2d (main.cpp:
aclopCompileAndExecute of an NHWC Conv2D with its bias left out) are built against the
toolkit tree and run on a device in this process; their output, tasks and API log must equal
their pyACL twin's, their results numpy's, and bad input must give the twin's codes
(hicann/ge, api/acl/acl_op_compiler/single_op/op_compiler.cpp). aclFloat16ToFloat and
aclFloatToFloat16 are checked against numpy's float16 on every half and on float bit
patterns of every kind.
"""

from __future__ import annotations

import re
import shutil

import numpy as np
import pytest
from test_native import build, record, run_here, twin

from acllab import constants as C
from acllab import session

pytestmark = pytest.mark.skipif(shutil.which("gcc") is None or shutil.which("g++") is None,
                                reason="needs the system's gcc and g++")



COMPILE_CPP = r"""
#include <cstdio>
#include <cstring>
#include <vector>
#include "acl/acl.h"
#include "acl/acl_op_compiler.h"

struct Tensor {
    aclTensorDesc *desc;
    void *dev;
    aclDataBuffer *buf;
    size_t size;
};

static Tensor Make(aclDataType type, std::vector<int64_t> dims, aclFormat format,
                   const void *host)
{
    Tensor t;
    t.desc = aclCreateTensorDesc(type, (int)dims.size(), dims.data(), format);
    t.size = aclGetTensorDescSize(t.desc);
    aclrtMalloc(&t.dev, t.size, ACL_MEM_MALLOC_HUGE_FIRST);
    if (host != nullptr) {
        aclrtMemcpy(t.dev, t.size, host, t.size, ACL_MEMCPY_HOST_TO_DEVICE);
    }
    t.buf = aclCreateDataBuffer(t.dev, t.size);
    return t;
}

static void Free(Tensor &t)
{
    aclDestroyDataBuffer(t.buf);
    aclrtFree(t.dev);
    aclDestroyTensorDesc(t.desc);
}

/* the output's bytes, as hex words of `word` bytes */
static void Print(const char *name, Tensor &t, size_t word)
{
    std::vector<unsigned char> back(t.size);
    aclrtMemcpy(back.data(), t.size, t.dev, t.size, ACL_MEMCPY_DEVICE_TO_HOST);
    std::printf("%s:", name);
    for (size_t i = 0; i < t.size; i += word) {
        unsigned long long v = 0;
        std::memcpy(&v, back.data() + i, word);
        std::printf(" %0*llx", (int)(2 * word), v);
    }
    std::printf("\n");
    if (word == 2) {                     /* float16: the first value, as the samples print */
        aclFloat16 first;
        std::memcpy(&first, back.data(), 2);
        std::printf("%s first %.3f\n", name, aclFloat16ToFloat(first));
    }
}

int main()
{
    aclInit(nullptr);
    aclrtSetDevice(0);
    aclrtStream stream;
    aclrtCreateStream(&stream);
    int set = aclSetCompileopt(ACL_PRECISION_MODE, "allow_fp32_to_fp16");
    size_t size = aclGetCompileoptSize(ACL_PRECISION_MODE);
    size_t jit = aclGetCompileoptSize(ACL_OP_JIT_COMPILE);
    std::printf("options %d %zu %zu %d\n", set, size, jit,
                aclopSetCompileFlag(ACL_OP_COMPILE_DEFAULT));

    /* acl_compile_add: compile Add, then run it with aclopExecuteV2 (no model directory) */
    std::vector<int32_t> a(128), b(128);
    for (int i = 0; i < 128; i++) { a[i] = i * 3 - 100; b[i] = 50 - i * i % 37; }
    Tensor x1 = Make(ACL_INT32, {8, 16}, ACL_FORMAT_ND, a.data());
    Tensor x2 = Make(ACL_INT32, {8, 16}, ACL_FORMAT_ND, b.data());
    Tensor y = Make(ACL_INT32, {8, 16}, ACL_FORMAT_ND, nullptr);
    aclopAttr *none = aclopCreateAttr();
    const aclTensorDesc *ins[] = {x1.desc, x2.desc};
    const aclTensorDesc *outs[] = {y.desc};
    std::printf("compile add %d\n", aclopCompile("Add", 2, ins, 1, outs, none, ACL_ENGINE_SYS,
                                                ACL_COMPILE_SYS, nullptr));
    aclTensorDesc *inv[] = {x1.desc, x2.desc};
    aclTensorDesc *outv[] = {y.desc};
    aclDataBuffer *inb[] = {x1.buf, x2.buf};
    aclDataBuffer *outb[] = {y.buf};
    std::printf("execute add %d\n", aclopExecuteV2("Add", 2, inv, inb, 1, outv, outb, none,
                                                  stream));
    std::printf("sync %d\n", aclrtSynchronizeStream(stream));
    Print("add", y, 4);

    /* the compiled op has a handle too: run it again with the inputs swapped */
    aclopHandle *handle = nullptr;
    std::printf("handle %d\n", aclopCreateHandle("Add", 2, ins, 1, outs, none, &handle));
    const aclDataBuffer *swapped[] = {x2.buf, x1.buf};
    int ran = aclopExecWithHandle(handle, 2, swapped, 1, outb, stream);
    std::printf("with handle %d %d\n", ran, aclrtSynchronizeStream(stream));
    Print("add again", y, 4);
    aclopDestroyHandle(handle);

    /* acl_compile_and_execute_conv2d: an NHWC Conv2D, its bias left out */
    std::vector<aclFloat16> x(1 * 5 * 6 * 3), w(4 * 3 * 3 * 3);
    for (size_t i = 0; i < x.size(); i++) x[i] = aclFloatToFloat16(((i * 7) % 11 - 5.0f) / 4);
    for (size_t i = 0; i < w.size(); i++) w[i] = aclFloatToFloat16(((i * 5) % 9 - 4.0f) / 2);
    Tensor cx = Make(ACL_FLOAT16, {1, 5, 6, 3}, ACL_FORMAT_NHWC, x.data());
    Tensor cw = Make(ACL_FLOAT16, {4, 3, 3, 3}, ACL_FORMAT_NCHW, w.data());
    Tensor cy = Make(ACL_FLOAT16, {1, 5, 6, 4}, ACL_FORMAT_NHWC, nullptr);
    aclTensorDesc *bias = aclCreateTensorDesc(ACL_DT_UNDEFINED, 0, nullptr, ACL_FORMAT_UNDEFINED);
    aclDataBuffer *noBias = aclCreateDataBuffer(nullptr, 0);
    aclopAttr *conv = aclopCreateAttr();
    int64_t ones[4] = {1, 1, 1, 1};
    aclopSetAttrListInt(conv, "strides", 4, ones);
    aclopSetAttrListInt(conv, "pads", 4, ones);
    aclopSetAttrListInt(conv, "dilations", 4, ones);
    const aclTensorDesc *convIn[] = {cx.desc, cw.desc, bias};
    const aclDataBuffer *convBuf[] = {cx.buf, cw.buf, noBias};
    const aclTensorDesc *convOut[] = {cy.desc};
    aclDataBuffer *convOutBuf[] = {cy.buf};
    std::printf("conv2d %d\n", aclopCompileAndExecute("Conv2D", 3, convIn, convBuf, 1, convOut,
                                                      convOutBuf, conv, ACL_ENGINE_SYS,
                                                      ACL_COMPILE_SYS, nullptr, stream));
    std::printf("sync %d\n", aclrtSynchronizeStream(stream));
    Print("conv", cy, 2);

    /* a MatMul compiled for the AI Core and run in one call (the V2 form) */
    std::vector<float> m1(4 * 8), m2(8 * 3);
    for (size_t i = 0; i < m1.size(); i++) m1[i] = (float)(i % 5) - 1.5f;
    for (size_t i = 0; i < m2.size(); i++) m2[i] = (float)(i % 3) * 0.25f;
    Tensor p = Make(ACL_FLOAT, {4, 8}, ACL_FORMAT_ND, m1.data());
    Tensor q = Make(ACL_FLOAT, {8, 3}, ACL_FORMAT_ND, m2.data());
    Tensor r = Make(ACL_FLOAT, {4, 3}, ACL_FORMAT_ND, nullptr);
    aclTensorDesc *mmIn[] = {p.desc, q.desc};
    aclDataBuffer *mmBuf[] = {p.buf, q.buf};
    aclTensorDesc *mmOut[] = {r.desc};
    aclDataBuffer *mmOutBuf[] = {r.buf};
    std::printf("matmul %d\n", aclopCompileAndExecuteV2("MatMul", 2, mmIn, mmBuf, 1, mmOut,
                                                        mmOutBuf, none, ACL_ENGINE_AICORE,
                                                        ACL_COMPILE_SYS, nullptr, stream));
    std::printf("sync %d\n", aclrtSynchronizeStream(stream));
    Print("matmul", r, 4);

    Tensor *all[] = {&x1, &x2, &y, &cx, &cw, &cy, &p, &q, &r};
    for (Tensor *t : all) Free(*t);
    aclDestroyTensorDesc(bias);
    aclDestroyDataBuffer(noBias);
    aclopDestroyAttr(none);
    aclopDestroyAttr(conv);
    aclrtDestroyStream(stream);
    aclrtResetDevice(0);
    aclFinalize();
    return 0;
}
"""


def compile_twin(acl):
    out = []
    kept = []                           # the host bytes, alive while their address is used

    def make(dtype, dims, fmt, host=None):
        desc = acl.create_tensor_desc(dtype, dims, fmt)
        size = acl.get_tensor_desc_size(desc)
        dev, _ = acl.rt.malloc(size, C.ACL_MEM_MALLOC_HUGE_FIRST)
        if host is not None:
            kept.append(host.tobytes())
            acl.rt.memcpy(dev, size, acl.util.bytes_to_ptr(kept[-1]), size,
                          C.ACL_MEMCPY_HOST_TO_DEVICE)
        return [desc, dev, acl.create_data_buffer(dev, size), size]

    def free(t):
        acl.destroy_data_buffer(t[2])
        acl.rt.free(t[1])
        acl.destroy_tensor_desc(t[0])

    def show(name, t, word):
        back = bytearray(t[3])
        acl.rt.memcpy(acl.util.bytes_to_ptr(back), t[3], t[1], t[3],
                      C.ACL_MEMCPY_DEVICE_TO_HOST)
        words = np.frombuffer(bytes(back), {2: "<u2", 4: "<u4"}[word])
        out.append(name + ":" + "".join(f" {int(v):0{2 * word}x}" for v in words))
        if word == 2:
            out.append(f"{name} first {float(words[:1].view(np.float16)[0]):.3f}")

    acl.init()
    acl.rt.set_device(0)
    stream, _ = acl.rt.create_stream()
    out.append(f"options {acl.set_compile_opt(0, 'allow_fp32_to_fp16')} "
               f"{acl.get_compile_opt_size(0)} {acl.get_compile_opt_size(10)} "
               f"{acl.op.set_compile_flag(0)}")
    i = np.arange(128)
    x1 = make(3, [8, 16], 2, (i * 3 - 100).astype(np.int32))
    x2 = make(3, [8, 16], 2, (50 - i * i % 37).astype(np.int32))
    y = make(3, [8, 16], 2)
    none = acl.op.create_attr()
    out.append(f"compile add {acl.op.compile('Add', [x1[0], x2[0]], [y[0]], none, 0, 0, None)}")
    ret = acl.op.execute_v2("Add", [x1[0], x2[0]], [x1[2], x2[2]], [y[0]], [y[2]], none, stream)
    out.append(f"execute add {ret}")
    out.append(f"sync {acl.rt.synchronize_stream(stream)}")
    show("add", y, 4)
    handle, ret = acl.op.create_handle("Add", [x1[0], x2[0]], [y[0]], none)
    out.append(f"handle {ret}")
    ret = acl.op.execute_with_handle(handle, [x2[2], x1[2]], [y[2]], stream)
    out.append(f"with handle {ret} {acl.rt.synchronize_stream(stream)}")
    show("add again", y, 4)
    acl.op.destroy_handle(handle)

    x = (((np.arange(90) * 7) % 11 - 5.0) / 4).astype(np.float16)
    w = (((np.arange(108) * 5) % 9 - 4.0) / 2).astype(np.float16)
    cx = make(1, [1, 5, 6, 3], 1, x)
    cw = make(1, [4, 3, 3, 3], 0, w)
    cy = make(1, [1, 5, 6, 4], 1)
    bias = acl.create_tensor_desc(-1, [], -1)
    no_bias = acl.create_data_buffer(0, 0)
    conv = acl.op.create_attr()
    for name in ("strides", "pads", "dilations"):
        acl.op.set_attr_list_int(conv, name, [1, 1, 1, 1])
    ret = acl.op.compile_and_execute("Conv2D", [cx[0], cw[0], bias], [cx[2], cw[2], no_bias],
                                     [cy[0]], [cy[2]], conv, 0, 0, None, stream)
    out.append(f"conv2d {ret}")
    out.append(f"sync {acl.rt.synchronize_stream(stream)}")
    show("conv", cy, 2)

    p = make(0, [4, 8], 2, (np.arange(32) % 5 - 1.5).astype(np.float32))
    q = make(0, [8, 3], 2, ((np.arange(24) % 3) * 0.25).astype(np.float32))
    r = make(0, [4, 3], 2)
    ret = acl.op.compile_and_execute_v2("MatMul", [p[0], q[0]], [p[2], q[2]], [r[0]], [r[2]],
                                        none, 1, 0, None, stream)
    out.append(f"matmul {ret}")
    out.append(f"sync {acl.rt.synchronize_stream(stream)}")
    show("matmul", r, 4)
    for t in (x1, x2, y, cx, cw, cy, p, q, r):
        free(t)
    acl.destroy_tensor_desc(bias)
    acl.destroy_data_buffer(no_bias)
    acl.op.destroy_attr(none)
    acl.op.destroy_attr(conv)
    acl.rt.destroy_stream(stream)
    acl.rt.reset_device(0)
    acl.finalize()
    return "\n".join(out) + "\n"


def _words(out: str, name: str, dtype) -> np.ndarray:
    line = next(x for x in out.splitlines() if x.startswith(name + ":"))
    return np.array([int(v, 16) for v in line[len(name) + 1:].split()],
                    dtype={2: np.uint16, 4: np.uint32}[np.dtype(dtype).itemsize]).view(dtype)


def check_results(out: str) -> None:
    """The program's outputs against numpy's: Add (twice, the second with its inputs swapped),
    the NHWC Conv2D (pads 1, no bias) and the MatMul."""
    i = np.arange(128)
    a, b = (i * 3 - 100).astype(np.int32), (50 - i * i % 37).astype(np.int32)
    assert np.array_equal(_words(out, "add", np.int32), a + b)
    assert np.array_equal(_words(out, "add again", np.int32), b + a)
    x = (((np.arange(90) * 7) % 11 - 5.0) / 4).astype(np.float16).reshape(1, 5, 6, 3)
    w = (((np.arange(108) * 5) % 9 - 4.0) / 2).astype(np.float16).reshape(4, 3, 3, 3)
    xp = np.pad(x.astype(np.float64), ((0, 0), (1, 1), (1, 1), (0, 0)))
    ref = np.zeros((1, 5, 6, 4))
    for di in range(3):
        for dj in range(3):
            ref += np.einsum("nhwc,oc->nhwo", xp[:, di:di + 5, dj:dj + 6],
                             w[:, :, di, dj].astype(np.float64))
    got = _words(out, "conv", np.float16).reshape(1, 5, 6, 4)
    assert np.array_equal(got, ref.astype(np.float16))
    p = (np.arange(32) % 5 - 1.5).astype(np.float32).reshape(4, 8)
    q = ((np.arange(24) % 3) * 0.25).astype(np.float32).reshape(8, 3)
    assert np.allclose(_words(out, "matmul", np.float32).reshape(4, 3), p @ q, rtol=1e-6)


def test_a_compiled_op_runs_without_a_model_directory_as_the_pyacl_twin(toolkit, tmp_path):
    exe = build(toolkit, tmp_path, COMPILE_CPP, "compile", cpp=True)
    code, out = run_here(toolkit, exe, tmp_path)
    native = record(session.current_runtime())
    expected, python = twin(compile_twin)
    assert code == 0, out
    assert out == expected
    lines = out.splitlines()
    assert lines[0] == "options 0 19 256 0"
    for step in ("compile add 0", "execute add 0", "handle 0", "with handle 0 0", "conv2d 0",
                 "matmul 0"):
        assert step in lines, step
    check_results(out)
    assert native == python
    kinds = [(t.name, t.api) for t in session.current_runtime().tasks if t.kind == "single_op"]
    assert kinds == [("Add", "execute_v2"), ("Add", "execute_with_handle"),
                     ("Conv2D", "compile_and_execute"), ("MatMul", "compile_and_execute_v2")]


def test_the_result_check_rejects_a_wrong_convolution(toolkit, tmp_path, monkeypatch):
    """The same program on a device whose NHWC convolution reads the filter transposed."""
    from acllab.model import opkernels

    real = opkernels._conv_nhwc
    monkeypatch.setattr(opkernels, "_conv_nhwc",
                        lambda x, w, *a: real(x, w.transpose(0, 1, 3, 2), *a))
    exe = build(toolkit, tmp_path, COMPILE_CPP, "compile", cpp=True)
    code, out = run_here(toolkit, exe, tmp_path)
    assert code == 0 and "conv2d 0" in out
    with pytest.raises(AssertionError):
        check_results(out)


def test_the_comparison_rejects_a_program_that_compiles_nothing(toolkit, tmp_path):
    """Without its aclopCompile the program's aclopExecuteV2 finds no model (100024): its
    output, tasks and log all differ from the twin's."""
    call = re.search(r'aclopCompile\("Add".*?nullptr\)', COMPILE_CPP, re.S).group(0)
    source = COMPILE_CPP.replace(call, "0")
    assert source != COMPILE_CPP
    exe = build(toolkit, tmp_path, source, "no_compile", cpp=True)
    code, out = run_here(toolkit, exe, tmp_path)
    native = record(session.current_runtime())
    expected, python = twin(compile_twin)
    assert "execute add 100024" in out and "handle 100024" in out
    assert out != expected
    assert native[0] != python[0] and native[1] != python[1]


BAD_COMPILE_C = r"""
#include <stdio.h>
#include "acl/acl.h"
#include "acl/acl_op_compiler.h"

int main(void)
{
    aclInit(NULL);
    aclrtSetDevice(0);
    aclrtStream stream;
    aclrtCreateStream(&stream);
    int64_t dims[2] = {4, 4}, three[1] = {3};
    aclTensorDesc *a = aclCreateTensorDesc(ACL_FLOAT, 2, dims, ACL_FORMAT_ND);
    aclTensorDesc *b = aclCreateTensorDesc(ACL_FLOAT, 2, dims, ACL_FORMAT_ND);
    aclTensorDesc *c = aclCreateTensorDesc(ACL_FLOAT, 1, three, ACL_FORMAT_ND);
    aclTensorDesc *h = aclCreateTensorDesc(ACL_FLOAT, 2, dims, ACL_FORMAT_ND);
    aclSetTensorPlaceMent(h, ACL_MEMTYPE_HOST);
    const aclTensorDesc *ins[2] = {a, b}, *outs[1] = {a}, *wrong[1] = {c}, *host[2] = {a, h};
    aclopAttr *attr = aclopCreateAttr();
    void *dev = NULL;
    aclrtMalloc(&dev, 64, ACL_MEM_MALLOC_HUGE_FIRST);
    aclDataBuffer *buf = aclCreateDataBuffer(dev, 64);
    const aclDataBuffer *bufs[2] = {buf, buf}, *holed[2] = {buf, NULL};
    aclDataBuffer *outBufs[1] = {buf};

    /* an op acllab has no kernel for, then the reason */
    printf("%d\n", aclopCompile("Frobnicate", 2, ins, 1, outs, attr, ACL_ENGINE_SYS,
                                ACL_COMPILE_SYS, NULL));
    printf("%s\n", aclGetRecentErrMsg());
    printf("%d\n", aclopCompile("Add", 2, ins, 1, wrong, attr, ACL_ENGINE_SYS,
                                ACL_COMPILE_SYS, NULL));                      /* mismatched */
    printf("%d\n", aclopCompile("Add", 1, ins, 1, outs, attr, ACL_ENGINE_SYS,
                                ACL_COMPILE_SYS, NULL));                      /* one input */
    printf("%d\n", aclopCompile("Add", 2, ins, 1, outs, attr, (aclopEngineType)7,
                                ACL_COMPILE_SYS, NULL));                      /* bad engine */
    printf("%d\n", aclopCompile("Add", 2, ins, 1, outs, attr, ACL_ENGINE_SYS,
                                (aclopCompileType)5, NULL));                  /* bad flag */
    printf("%d\n", aclopCompile("Add", 2, ins, 1, outs, attr, (aclopEngineType)7,
                                (aclopCompileType)5, NULL));                  /* flag first */
    printf("%d\n", aclopCompile("Add", 2, ins, 1, outs, attr, ACL_ENGINE_SYS,
                                ACL_COMPILE_UNREGISTERED, NULL));             /* no opPath */
    printf("%d\n", aclopCompile(NULL, 2, ins, 1, outs, attr, ACL_ENGINE_SYS,
                                ACL_COMPILE_SYS, NULL));
    printf("%d\n", aclopCompile("Add", 2, host, 1, outs, attr, ACL_ENGINE_SYS,
                                ACL_COMPILE_SYS, NULL));                      /* host input */
    printf("%d\n", aclopCompile("MatMul", 2, ins, 1, outs, attr, ACL_ENGINE_VECTOR,
                                ACL_COMPILE_SYS, NULL));                      /* cube op */
    printf("%d\n", aclopCompile("Add", 2, ins, 1, outs, attr, ACL_ENGINE_VECTOR,
                                ACL_COMPILE_SYS, NULL));
    printf("%d\n", aclopCompile("Add", 2, ins, 1, outs, attr, (aclopEngineType)7,
                                ACL_COMPILE_SYS, NULL));   /* registered: engine not looked at */
    printf("%d\n", aclopCompile("Add", 2, ins, 1, outs, attr, ACL_ENGINE_SYS,
                                ACL_COMPILE_UNREGISTERED, "./ops"));          /* acllab's Add */
    aclTensorDesc *inv[2] = {a, b}, *outv[1] = {a};
    aclDataBuffer *inb[2] = {buf, buf};
    printf("%d\n", aclopExecuteV2("Sub", 2, inv, inb, 1, outv, outBufs, attr, stream));
    printf("%d\n", aclopCompileAndExecute("Add", 2, ins, holed, 1, outs, outBufs, attr,
                                          ACL_ENGINE_SYS, ACL_COMPILE_SYS, NULL, stream));
    printf("%d\n", aclopCompileAndExecute("Frobnicate", 2, ins, bufs, 1, outs, outBufs, attr,
                                          ACL_ENGINE_SYS, ACL_COMPILE_SYS, NULL, stream));
    printf("%d\n", aclopCompileAndExecute("Sub", 2, ins, bufs, 1, outs, outBufs, attr,
                                          ACL_ENGINE_SYS, ACL_COMPILE_SYS, NULL, stream));
    printf("%d\n", aclrtSynchronizeStream(stream));
    printf("%d\n", aclSetCompileopt(ACL_AUTO_TUNE_MODE, "on"));
    printf("%d\n", aclSetCompileopt((aclCompileOpt)99, "on"));
    printf("%d\n", aclSetCompileopt(ACL_DEBUG_DIR, NULL));
    printf("%d\n", aclSetCompileopt(ACL_OP_JIT_COMPILE, "enable"));
    size_t dir = aclGetCompileoptSize(ACL_DEBUG_DIR);
    size_t none = aclGetCompileoptSize((aclCompileOpt)99);
    printf("%zu %zu %zu\n", dir, none, aclGetCompileoptSize(ACL_OP_JIT_COMPILE));
    /* negative counts: refused here before any call (ACL_REQUIRES_NON_NEGATIVE) */
    int negIn = aclopCompile("Add", -1, ins, 1, outs, attr, ACL_ENGINE_SYS, ACL_COMPILE_SYS,
                             NULL);
    printf("%d %d\n", negIn, aclopCompileAndExecute("Add", 2, ins, bufs, -1, outs, outBufs,
                                                    attr, ACL_ENGINE_SYS, ACL_COMPILE_SYS,
                                                    NULL, stream));
    aclDestroyDataBuffer(buf);
    aclrtFree(dev);
    aclopDestroyAttr(attr);
    aclrtDestroyStream(stream);
    aclrtResetDevice(0);
    aclFinalize();
    return 0;
}
"""


def bad_compile_twin(acl):
    acl.init()
    acl.rt.set_device(0)
    stream, _ = acl.rt.create_stream()
    a = acl.create_tensor_desc(0, [4, 4], 2)
    b = acl.create_tensor_desc(0, [4, 4], 2)
    c = acl.create_tensor_desc(0, [3], 2)
    h = acl.create_tensor_desc(0, [4, 4], 2)
    acl.set_tensor_place_ment(h, 1)
    attr = acl.op.create_attr()
    dev, _ = acl.rt.malloc(64, C.ACL_MEM_MALLOC_HUGE_FIRST)
    buf = acl.create_data_buffer(dev, 64)
    compile_ = acl.op.compile
    out = [compile_("Frobnicate", [a, b], [a], attr, 0, 0, None)]
    why = acl.get_recent_err_msg()
    out += [compile_("Add", [a, b], [c], attr, 0, 0, None),
            compile_("Add", [a], [a], attr, 0, 0, None),
            compile_("Add", [a, b], [a], attr, 7, 0, None),
            compile_("Add", [a, b], [a], attr, 0, 5, None),
            compile_("Add", [a, b], [a], attr, 7, 5, None),
            compile_("Add", [a, b], [a], attr, 0, 1, None),
            compile_(None, [a, b], [a], attr, 0, 0, None),
            compile_("Add", [a, h], [a], attr, 0, 0, None),
            compile_("MatMul", [a, b], [a], attr, 2, 0, None),
            compile_("Add", [a, b], [a], attr, 2, 0, None),
            compile_("Add", [a, b], [a], attr, 7, 0, None),
            compile_("Add", [a, b], [a], attr, 0, 1, "./ops"),
            acl.op.execute_v2("Sub", [a, b], [buf, buf], [a], [buf], attr, stream),
            acl.op.compile_and_execute("Add", [a, b], [buf, 0], [a], [buf], attr, 0, 0, None,
                                       stream),
            acl.op.compile_and_execute("Frobnicate", [a, b], [buf, buf], [a], [buf], attr, 0,
                                       0, None, stream),
            acl.op.compile_and_execute("Sub", [a, b], [buf, buf], [a], [buf], attr, 0, 0, None,
                                       stream),
            acl.rt.synchronize_stream(stream),
            acl.set_compile_opt(2, "on"), acl.set_compile_opt(99, "on"),
            acl.set_compile_opt(6, None), acl.set_compile_opt(10, "enable")]
    sizes = [acl.get_compile_opt_size(6), acl.get_compile_opt_size(99),
             acl.get_compile_opt_size(10)]
    acl.destroy_data_buffer(buf)
    acl.rt.free(dev)
    acl.op.destroy_attr(attr)
    acl.rt.destroy_stream(stream)
    acl.rt.reset_device(0)
    acl.finalize()
    return out, why, sizes


#: CANN's codes for the calls above, in order
BAD_CODES = [500002, 500002, 500002, 500002, 200001, 200001, 100000, 100000, 200001, 500002,
             0, 0, 0, 100024, 100000, 500002, 0, 0, 200006, 500000, 100000, 0]


def check_bad(out: str, codes: list[int]) -> None:
    lines = out.splitlines()
    got = [int(lines[0])] + [int(x) for x in lines[2:2 + len(codes) - 1]]
    assert got == codes
    assert codes == BAD_CODES


def test_bad_compiles_give_the_codes_pyacl_gives(toolkit, tmp_path):
    exe = build(toolkit, tmp_path, BAD_COMPILE_C, "bad_compile")
    code, out = run_here(toolkit, exe, tmp_path)
    native = record(session.current_runtime())
    (codes, why, sizes), python = twin(bad_compile_twin)
    lines = out.splitlines()
    assert code == 0, out
    check_bad(out, codes)
    assert lines[1] == why and "acllab has no single op 'Frobnicate'" in why
    assert "500002 ACL_ERROR_GE_FAILURE" in why
    assert lines[-2] == " ".join(map(str, sizes)) == "0 0 256"
    assert lines[-1] == "100000 100000"
    assert native == python


def test_the_code_check_rejects_an_engine_type_taken_as_valid(toolkit, tmp_path, monkeypatch):
    """On a device that takes engine type 7, the bad-engine line gives 0: the check fails."""
    from acllab.acl import op

    monkeypatch.setitem(op._ENGINES, 7, "a made-up engine")
    exe = build(toolkit, tmp_path, BAD_COMPILE_C, "bad_compile")
    code, out = run_here(toolkit, exe, tmp_path)
    assert code == 0
    codes = [int(x) for x in out.splitlines()[2:2 + len(BAD_CODES) - 1]]
    with pytest.raises(AssertionError):
        check_bad(out, [int(out.splitlines()[0])] + codes)


# -- aclFloat16ToFloat and aclFloatToFloat16 -----------------------------------------------

FP16_C = r"""
#include <stdio.h>
#include <stdlib.h>
#include "acl/acl.h"

/* argv[1]: float32s to convert to halves (written to argv[2]); argv[3]: every half as a float */
int main(int argc, char **argv)
{
    if (argc != 4) return 2;
    FILE *in = fopen(argv[1], "rb"), *out = fopen(argv[2], "wb"), *all = fopen(argv[3], "wb");
    float f;
    while (fread(&f, sizeof f, 1, in) == 1) {
        aclFloat16 h = aclFloatToFloat16(f);
        fwrite(&h, sizeof h, 1, out);
    }
    for (unsigned v = 0; v < 65536; v++) {
        float g = aclFloat16ToFloat((aclFloat16)v);
        fwrite(&g, sizeof g, 1, all);
    }
    fclose(in);
    fclose(out);
    fclose(all);
    return 0;
}
"""


def _fp16_inputs() -> np.ndarray:
    """Float bit patterns of every kind: random, near every half's midpoints (ties both
    ways, one ulp off), subnormal halves, overflow, infinities and NaNs with payloads."""
    rng = np.random.default_rng(7)
    halves = np.arange(65536, dtype=np.uint32).astype(np.uint16).view(np.float16)
    finite = halves[np.isfinite(halves)].astype(np.float32)
    with np.errstate(over="ignore"):
        nxt = np.nextafter(finite.astype(np.float16), np.float16(np.inf)).astype(np.float32)
    ok = np.isfinite(nxt)
    mid = ((finite[ok].astype(np.float64) + nxt[ok]) / 2).astype(np.float32)
    bits = mid.view(np.uint32)
    special = np.array([0x7f800000, 0xff800000, 0x7fc00000, 0x7f800001, 0xffa00003,
                        0x477fe000, 0x477ff000, 0x477fefff, 0x33000000, 0x33000001,
                        0x00000001, 0x80000000], dtype=np.uint32)
    parts = [rng.integers(0, 2**32, 200_000, dtype=np.uint64).astype(np.uint32), bits,
             bits + 1, bits - 1, special]
    return np.concatenate(parts).view(np.float32)


def check_fp16(inputs: np.ndarray, halves: np.ndarray, floats: np.ndarray) -> None:
    with np.errstate(over="ignore", invalid="ignore"):
        want = inputs.astype(np.float16).view(np.uint16)
    assert np.array_equal(halves, want), np.flatnonzero(halves != want)[:5]
    every = np.arange(65536, dtype=np.uint32).astype(np.uint16).view(np.float16)
    assert np.array_equal(floats.view(np.uint32), every.astype(np.float32).view(np.uint32))


def test_float16_conversions_are_numpy_s_bit_for_bit(toolkit, tmp_path):
    exe = build(toolkit, tmp_path, FP16_C, "fp16")
    inputs = _fp16_inputs()
    (tmp_path / "in.bin").write_bytes(inputs.tobytes())
    args = [str(tmp_path / n) for n in ("in.bin", "out.bin", "all.bin")]
    code, _ = run_here(toolkit, exe, tmp_path, args)
    assert code == 0
    halves = np.frombuffer((tmp_path / "out.bin").read_bytes(), np.uint16)
    floats = np.frombuffer((tmp_path / "all.bin").read_bytes(), np.float32)
    assert len(halves) == len(inputs) and len(floats) == 65536
    check_fp16(inputs, halves, floats)
    # nothing reached the device: the conversions are host functions
    assert not [e for e in session.current_runtime().api_log if isinstance(e, tuple)]
    # the check rejects one half rounded the other way, and one float off by an ulp
    off = halves.copy()
    off[len(off) // 2] ^= 1
    with pytest.raises(AssertionError):
        check_fp16(inputs, off, floats)
    wrong = floats.copy()
    wrong.view(np.uint32)[15360] += 1            # the half 1.0
    with pytest.raises(AssertionError):
        check_fp16(inputs, halves, wrong)


def test_a_program_links_with_acl_op_compiler_alone_in_the_sample_s_way(toolkit, tmp_path):
    """-lascendcl -lacl_op_compiler from compiler/lib64/stub and the headers from
    compiler/include and include, as the two samples' CMakeLists ask."""
    import subprocess

    latest, _ = toolkit
    src = tmp_path / "t.cpp"
    src.write_text('#include "acl/acl.h"\n#include "acl/acl_op_compiler.h"\n'
                   '#include "acl/ops/acl_cblas.h"\n'
                   "int main() { aclTransType t = ACL_TRANS_N; (void)t;\n"
                   "  return aclopSetCompileFlag(ACL_OP_COMPILE_FUZZ) == 100001 ? 0 : 1; }\n")
    for inc in ("compiler/include", "include"):
        exe = tmp_path / "t"
        done = subprocess.run(["g++", "-std=c++11", "-Wall", "-Werror", f"-I{latest}/{inc}",
                               str(src), f"-L{latest}/compiler/lib64/stub", "-lascendcl",
                               "-lacl_op_compiler", "-o", str(exe)],
                              capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
        code, _ = run_here(toolkit, exe, tmp_path)
        assert code == 0           # before aclInit: 100001, through the device
    log = [e for e in session.current_runtime().api_log if isinstance(e, tuple)]
    assert [e[0] for e in log] == ["set_compile_flag"]   # the last run's



@pytest.mark.parametrize("compiler, flags", [("gcc", ["-std=c99", "-pedantic"]),
                                             ("g++", ["-std=c++11"])])
def test_the_new_headers_build_cleanly_in_c_and_cpp(toolkit, tmp_path, compiler, flags):
    import subprocess

    latest, _ = toolkit
    src = tmp_path / ("t.c" if compiler == "gcc" else "t.cpp")
    # CANN's values, checked at compile time (a negative array size does not compile)
    checks = {"ACL_ENGINE_VECTOR": 2, "ACL_COMPILE_UNREGISTERED": 1, "ACL_AUTO_TUNE_MODE": 2,
              "ACL_OP_JIT_COMPILE": 10, "ACL_OP_DEBUG_OPTION": 16, "ACL_OP_COMPILE_FUZZ": 1,
              "ACL_TRANS_NZ_T": 3, "ACL_COMPUTE_LOW_PRECISION": 1}
    src.write_text('#include "acl/acl_op_compiler.h"\n#include "acl/ops/acl_cblas.h"\n' +
                   "".join(f"typedef char check_{n}[{n} == {v} ? 1 : -1];\n"
                           for n, v in checks.items()) +
                   "int main(void) { return 0; }\n")
    done = subprocess.run([compiler, *flags, "-Wall", "-Wextra", "-Werror",
                           f"-I{latest}/runtime/include", "-c", str(src), "-o",
                           str(tmp_path / "t.o")], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
