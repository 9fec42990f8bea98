"""``acl.rt`` contexts: create, destroy, set and get (aclrtCreateContext ...)."""

from __future__ import annotations

from ...errors import Fail
from ...streams import Context
from .._api import api, as_int, leak_warning, rt

__all__ = ["create_context", "destroy_context", "set_context", "get_context"]



@api("aclrtCreateContext", outs=(0,))
def create_context(device_id):
    """Create a context on a device and make it the calling thread's current context."""
    r = rt()
    dev = r.device(as_int(device_id, "device_id"))
    r.spend(r.profile.api_ns if dev.open else dev.profile.open_device_ns)
    ctx = r.create_context(dev, is_default=False)
    r.set_current(ctx)
    return ctx.handle


@api("aclrtDestroyContext")
def destroy_context(context):
    """Destroy an explicit context (the default context goes with reset_device).

    A null context is 100000; any other that is not a live explicit context (destroyed
    already, the device's default context, not a context at all) is 107002
    ACL_ERROR_RT_CONTEXT_NULL, as CANN returns (hicann/runtime, src/runtime/api/impl/
    api_impl.cc, ApiImpl::ContextDestroy: a context the runtime no longer tracks, and a
    primary context, give RT_ERROR_CONTEXT_NULL).
    """
    r = rt()
    handle = as_int(context, "context")
    try:
        ctx = r.lookup(handle, Context, "context")
    except Fail as exc:
        if exc.code != 107017:
            raise
        raise Fail(107002, exc.message) from None
    if ctx.is_default:
        raise Fail(107002, f"context 0x{ctx.handle:x} is device {ctx.device.id}'s default "
                           "context; it cannot be destroyed (reset_device releases it)")
    r.spend(r.profile.api_ns)
    leak_warning(r, f"acl.rt.destroy_context(0x{ctx.handle:x})", r.destroy_context(ctx))


@api("aclrtSetContext")
def set_context(context):
    """Make a context current for the calling thread (switching device if needed)."""
    r = rt()
    ctx = r.lookup(as_int(context, "context"), Context, "context")
    r.spend(r.profile.api_ns)
    r.set_current(ctx)


@api("aclrtGetContext", outs=(0,))
def get_context():
    return rt().current_context().handle
