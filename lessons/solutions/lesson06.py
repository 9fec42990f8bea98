"""Reference solutions for lesson 06 (the double-stream pipeline).

tests/test_checks_lesson06.py grades them with acllab.checks, and tests/test_lessons.py injects
them into the notebook after the exercise cells. Learners: try the exercises first.
"""

from __future__ import annotations

from acllab.constants import ACL_MEMCPY_DEVICE_TO_HOST, ACL_MEMCPY_HOST_TO_DEVICE

__all__ = ["pipeline", "pipeline_ahead"]


def pipeline(acl, kit, batches, prepare, postprocess):
    """The seed's double-stream loop, fixed: two input slots, an event each way per slot."""
    copy_s, _ = acl.rt.create_stream()
    exec_s, _ = acl.rt.create_stream()
    copied = [acl.rt.create_event()[0] for _ in range(2)]      # slot k's input has landed
    consumed = [acl.rt.create_event()[0] for _ in range(2)]    # slot k's run has read it

    def load(i):
        k = i % 2
        prepare(i, kit.host_in[k])
        if i >= 2:                                   # the slot is free once batch i-2 ran
            acl.rt.stream_wait_event(copy_s, consumed[k])
        acl.rt.memcpy_async(kit.dev_in[k], kit.in_size, kit.host_in[k], kit.in_size,
                            ACL_MEMCPY_HOST_TO_DEVICE, copy_s)
        acl.rt.record_event(copied[k], copy_s)

    load(0)
    for i in range(batches):
        k = i % 2
        acl.rt.stream_wait_event(exec_s, copied[k])
        acl.mdl.execute_async(kit.model_id, kit.inputs[k], kit.outputs[0], exec_s)
        acl.rt.record_event(consumed[k], exec_s)
        if i + 1 < batches:
            load(i + 1)                              # runs while the AI Core works on batch i
        acl.rt.synchronize_stream(exec_s)
        acl.rt.memcpy(kit.host_out[0], kit.out_size, kit.dev_out[0], kit.out_size,
                      ACL_MEMCPY_DEVICE_TO_HOST)
        postprocess(i, kit.host_out[0])
    for ev in copied + consumed:
        acl.rt.destroy_event(ev)
    acl.rt.destroy_stream(copy_s)
    acl.rt.destroy_stream(exec_s)


def pipeline_ahead(acl, kit, batches, prepare, postprocess):
    """Queue batch i+1 before waiting for batch i: post-processing hides behind the AI Core."""
    copy_s, _ = acl.rt.create_stream()
    exec_s, _ = acl.rt.create_stream()
    copied = [acl.rt.create_event()[0] for _ in range(2)]      # slot k's input has landed
    done = [acl.rt.create_event()[0] for _ in range(2)]        # slot k's scores are back

    def load(i):
        k = i % 2
        prepare(i, kit.host_in[k])
        if i >= 2:                                   # batch i-2 has read slot k's input
            acl.rt.stream_wait_event(copy_s, done[k])
        acl.rt.memcpy_async(kit.dev_in[k], kit.in_size, kit.host_in[k], kit.in_size,
                            ACL_MEMCPY_HOST_TO_DEVICE, copy_s)
        acl.rt.record_event(copied[k], copy_s)

    def finish(i):
        k = i % 2
        acl.rt.synchronize_event(done[k])
        postprocess(i, kit.host_out[k])

    load(0)
    for i in range(batches):
        k = i % 2
        acl.rt.stream_wait_event(exec_s, copied[k])
        acl.mdl.execute_async(kit.model_id, kit.inputs[k], kit.outputs[k], exec_s)
        acl.rt.memcpy_async(kit.host_out[k], kit.out_size, kit.dev_out[k], kit.out_size,
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
