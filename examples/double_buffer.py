"""A real pyACL program: double-buffered host->device->host copies on two streams.

Run it on the simulated device with

    acllab profile examples/double_buffer.py

(on a real Ascend host, plain ``python double_buffer.py`` runs it on the NPU). Stream A copies
batch i to the device; stream B waits for that copy with an event, then copies the result back.
Two device buffers let the copy of batch i+1 overlap the copy-back of batch i.
"""

import sys

import acl
import numpy as np

ACL_MEM_MALLOC_HUGE_FIRST = 0
ACL_MEMCPY_HOST_TO_DEVICE = 1
ACL_MEMCPY_DEVICE_TO_HOST = 2
ACL_MEMCPY_HOST_TO_HOST = 0


def check(ret, what):
    if ret != 0:
        raise RuntimeError(f"{what} failed with {ret}: {acl.get_recent_err_msg()}")


def main(batches=8, nbytes=4 * 1024 * 1024):
    check(acl.init(), "acl.init")
    check(acl.rt.set_device(0), "set_device")
    copy_stream, ret = acl.rt.create_stream()
    check(ret, "create_stream")
    back_stream, ret = acl.rt.create_stream()
    check(ret, "create_stream")

    host_in, ret = acl.rt.malloc_host(nbytes)
    check(ret, "malloc_host")
    host_out, ret = acl.rt.malloc_host(nbytes)
    check(ret, "malloc_host")
    # fill the pinned input buffer from a numpy array (malloc_host memory is not zeroed)
    pattern = (np.arange(nbytes) % 251).astype(np.uint8).tobytes()
    check(acl.rt.memcpy(host_in, nbytes, acl.util.bytes_to_ptr(pattern), nbytes,
                        ACL_MEMCPY_HOST_TO_HOST), "memcpy H2H")
    dev = []
    for _ in range(2):
        ptr, ret = acl.rt.malloc(nbytes, ACL_MEM_MALLOC_HUGE_FIRST)
        check(ret, "malloc")
        dev.append(ptr)
    copied = [acl.rt.create_event()[0] for _ in range(2)]
    returned = [acl.rt.create_event()[0] for _ in range(2)]

    for i in range(batches):
        slot = i % 2
        if i >= 2:   # the buffer is free again once its previous batch went back to the host
            check(acl.rt.stream_wait_event(copy_stream, returned[slot]), "wait")
        check(acl.rt.memcpy_async(dev[slot], nbytes, host_in, nbytes,
                                  ACL_MEMCPY_HOST_TO_DEVICE, copy_stream), "memcpy_async H2D")
        check(acl.rt.record_event(copied[slot], copy_stream), "record")
        check(acl.rt.stream_wait_event(back_stream, copied[slot]), "wait")
        check(acl.rt.memcpy_async(host_out, nbytes, dev[slot], nbytes,
                                  ACL_MEMCPY_DEVICE_TO_HOST, back_stream), "memcpy_async D2H")
        check(acl.rt.record_event(returned[slot], back_stream), "record")
    check(acl.rt.synchronize_stream(back_stream), "synchronize_stream")

    data = np.frombuffer(acl.util.ptr_to_bytes(host_out, 16), dtype=np.uint8)
    print(f"{batches} batches of {nbytes} bytes done; first bytes back: {data[:4]}")

    for ev in copied + returned:
        check(acl.rt.destroy_event(ev), "destroy_event")
    for ptr in dev:
        check(acl.rt.free(ptr), "free")
    check(acl.rt.free_host(host_in), "free_host")
    check(acl.rt.free_host(host_out), "free_host")
    check(acl.rt.destroy_stream(copy_stream), "destroy_stream")
    check(acl.rt.destroy_stream(back_stream), "destroy_stream")
    check(acl.rt.reset_device(0), "reset_device")
    check(acl.finalize(), "finalize")


if __name__ == "__main__":
    main(*(int(a) for a in sys.argv[1:3]))
