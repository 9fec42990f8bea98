"""Reference solution for lesson 11 (the capstone: an inference service).

tests/test_checks_lesson11.py grades it with acllab.checks, and tests/test_lessons.py injects it
into the notebook after the exercise cell. Learners: try the exercise first.
"""

from __future__ import annotations

from acllab.constants import (
    ACL_MEM_MALLOC_HUGE_FIRST,
    ACL_MEMCPY_DEVICE_TO_HOST,
    ACL_MEMCPY_HOST_TO_DEVICE,
)

__all__ = ["service"]


def service(acl, kit, batches, prepare, postprocess):
    """Fixed model, huge pages, pinned memory, two slots, and one batch queued ahead."""
    model_id, _ = acl.mdl.load_from_file(kit.fixed_model)    # faster than the dynamic one
    slots = range(2)
    dev_in = [acl.rt.malloc(kit.in_size, ACL_MEM_MALLOC_HUGE_FIRST)[0] for _ in slots]
    dev_out = [acl.rt.malloc(kit.out_size, ACL_MEM_MALLOC_HUGE_FIRST)[0] for _ in slots]
    host_in = [acl.rt.malloc_host(kit.in_size)[0] for _ in slots]       # pinned
    host_out = [acl.rt.malloc_host(kit.out_size)[0] for _ in slots]
    buffers, inputs, outputs = [], [], []
    for datasets, ptrs, size in ((inputs, dev_in, kit.in_size),
                                 (outputs, dev_out, kit.out_size)):
        for ptr in ptrs:
            buf = acl.create_data_buffer(ptr, size)
            ds = acl.mdl.create_dataset()
            acl.mdl.add_dataset_buffer(ds, buf)
            buffers.append(buf)
            datasets.append(ds)
    copy_s, _ = acl.rt.create_stream()
    exec_s, _ = acl.rt.create_stream()
    copied = [acl.rt.create_event()[0] for _ in slots]    # slot k's input has landed
    done = [acl.rt.create_event()[0] for _ in slots]      # slot k's scores are back on the host

    def load(i):
        k = i % 2
        prepare(i, host_in[k])
        if i >= 2:                                   # batch i - 2 is done with slot k
            acl.rt.stream_wait_event(copy_s, done[k])
        acl.rt.memcpy_async(dev_in[k], kit.in_size, host_in[k], kit.in_size,
                            ACL_MEMCPY_HOST_TO_DEVICE, copy_s)
        acl.rt.record_event(copied[k], copy_s)

    def finish(i):
        acl.rt.synchronize_event(done[i % 2])
        postprocess(i, host_out[i % 2])

    load(0)
    for i in range(batches):
        k = i % 2
        acl.rt.stream_wait_event(exec_s, copied[k])
        acl.mdl.execute_async(model_id, inputs[k], outputs[k], exec_s)
        acl.rt.memcpy_async(host_out[k], kit.out_size, dev_out[k], kit.out_size,
                            ACL_MEMCPY_DEVICE_TO_HOST, exec_s)
        acl.rt.record_event(done[k], exec_s)
        if i >= 1:
            finish(i - 1)                            # while the AI Core runs batch i
        if i + 1 < batches:
            load(i + 1)
    finish(batches - 1)

    for ev in copied + done:
        acl.rt.destroy_event(ev)
    acl.rt.destroy_stream(copy_s)
    acl.rt.destroy_stream(exec_s)
    for ds in inputs + outputs:
        acl.mdl.destroy_dataset(ds)
    for buf in buffers:
        acl.destroy_data_buffer(buf)
    for ptr in dev_in + dev_out:
        acl.rt.free(ptr)
    for ptr in host_in + host_out:
        acl.rt.free_host(ptr)
    acl.mdl.unload(model_id)
