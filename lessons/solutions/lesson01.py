"""Reference solutions for lesson 01 (Devices and contexts): ``setup`` and ``teardown``.

tests/test_checks_lesson01.py grades them with acllab.checks, and tests/test_lessons.py
injects them into the notebook after the exercise cell. Learners: try the exercise first.
"""

from __future__ import annotations

__all__ = ["setup", "teardown"]


def setup(acl, device_id):
    """Init, set the device, a context and a stream: ``(res, 0)``, or ``(None, ret)``.

    On a failure, whatever was already made is released, last made first, so the caller is
    left exactly as before the call.
    """
    ret = acl.init()
    if ret != 0:
        return None, ret
    ret = acl.rt.set_device(device_id)
    if ret != 0:
        acl.finalize()
        return None, ret
    context, ret = acl.rt.create_context(device_id)     # becomes this thread's current context
    if ret != 0:
        acl.rt.reset_device(device_id)
        acl.finalize()
        return None, ret
    stream, ret = acl.rt.create_stream()                 # in the current context: ours
    if ret != 0:
        acl.rt.destroy_context(context)
        acl.rt.reset_device(device_id)
        acl.finalize()
        return None, ret
    return {"device": device_id, "context": context, "stream": stream}, 0


def teardown(acl, res):
    """Release what setup made, in reverse order: stream, context, device, pyACL."""
    acl.rt.set_context(res["context"])       # the stream belongs to it; make it current again
    acl.rt.destroy_stream(res["stream"])
    acl.rt.destroy_context(res["context"])
    acl.rt.reset_device(res["device"])
    acl.finalize()
