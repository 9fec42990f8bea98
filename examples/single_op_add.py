"""A real pyACL program: add two float16 matrices with a single op, then check the sum.

    acllab atc --singleop examples/add_op.json --soc_version Ascend310 --output op_models
    acllab profile examples/single_op_add.py op_models

loads the op models, copies two 8x16 matrices to the device, runs Add on a stream with
acl.op.execute_v2, copies the result back and compares it with numpy. On a real Ascend host
the same file runs with CANN's own atc and pyACL.
"""

import sys

import acl
import numpy as np

ACL_FLOAT16, ACL_FORMAT_ND = 1, 2
ACL_MEM_MALLOC_NORMAL_ONLY = 2
ACL_MEMCPY_HOST_TO_DEVICE, ACL_MEMCPY_DEVICE_TO_HOST = 1, 2
SHAPE = [8, 16]


def check(ret, what):
    if ret != 0:
        raise RuntimeError(f"{what} failed with {ret}: {acl.get_recent_err_msg()}")


def to_device(desc, array=None):
    """Device memory sized by the description (filled from ``array``) and its data buffer."""
    size = acl.get_tensor_desc_size(desc)
    ptr, ret = acl.rt.malloc(size, ACL_MEM_MALLOC_NORMAL_ONLY)
    check(ret, "rt.malloc")
    if array is not None:
        data = array.tobytes()
        check(acl.rt.memcpy(ptr, size, acl.util.bytes_to_ptr(data), size,
                            ACL_MEMCPY_HOST_TO_DEVICE), "rt.memcpy")
    return ptr, acl.create_data_buffer(ptr, size)


def main(model_dir):
    check(acl.init(), "init")
    check(acl.rt.set_device(0), "rt.set_device")
    stream, ret = acl.rt.create_stream()
    check(ret, "rt.create_stream")
    check(acl.op.set_model_dir(model_dir), "op.set_model_dir")

    rng = np.random.default_rng(0)
    a = rng.standard_normal(SHAPE).astype(np.float16)
    b = rng.standard_normal(SHAPE).astype(np.float16)
    descs = [acl.create_tensor_desc(ACL_FLOAT16, SHAPE, ACL_FORMAT_ND) for _ in range(3)]
    (pa, ba), (pb, bb), (py, by) = to_device(descs[0], a), to_device(descs[1], b), \
        to_device(descs[2])
    attr = acl.op.create_attr()
    check(acl.op.execute_v2("Add", descs[:2], [ba, bb], descs[2:], [by], attr, stream),
          "op.execute_v2")
    check(acl.rt.synchronize_stream(stream), "rt.synchronize_stream")

    size = acl.get_tensor_desc_size(descs[2])
    out = bytearray(size)
    check(acl.rt.memcpy(acl.util.bytes_to_ptr(out), size, py, size,
                        ACL_MEMCPY_DEVICE_TO_HOST), "rt.memcpy")
    y = np.frombuffer(bytes(out), np.float16).reshape(SHAPE)
    print("Add matches numpy:", bool(np.array_equal(y, a + b)))

    acl.op.destroy_attr(attr)
    for buf in (ba, bb, by):
        check(acl.destroy_data_buffer(buf), "destroy_data_buffer")
    for ptr in (pa, pb, py):
        check(acl.rt.free(ptr), "rt.free")
    for desc in descs:
        acl.destroy_tensor_desc(desc)
    check(acl.rt.destroy_stream(stream), "rt.destroy_stream")
    check(acl.rt.reset_device(0), "rt.reset_device")
    check(acl.finalize(), "finalize")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "op_models")
