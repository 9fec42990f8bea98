"""``acl.rt`` contexts: create, destroy, set and get (aclrtCreateContext ...)."""

from __future__ import annotations

from ...errors import Fail
from ...streams import Context
from .._api import api, as_int, leak_warning, rt

__all__ = ["create_context", "destroy_context", "set_context", "get_context"]



def _live_context(r, handle: int, code: int) -> Context:
    """The live context ``handle`` names; a handle that is not one (destroyed, never made,
    another kind: the lookup's 107017) fails with ``code``, the one CANN gives that call."""
    try:
        return r.lookup(handle, Context, "context")
    except Fail as exc:
        if exc.code != 107017:
            raise
        raise Fail(code, exc.message) from None


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
    ctx = _live_context(r, as_int(context, "context"), 107002)
    if ctx.is_default:
        raise Fail(107002, f"context 0x{ctx.handle:x} is device {ctx.device.id}'s default "
                           "context; it cannot be destroyed (reset_device releases it)")
    r.spend(r.profile.api_ns)
    leak_warning(r, f"acl.rt.destroy_context(0x{ctx.handle:x})", r.destroy_context(ctx))


@api("aclrtSetContext")
def set_context(context):
    """Make a context current for the calling thread (switching device if needed).

    A null context is 100000 (hicann/runtime, src/acl/aclrt_impl/context.cpp,
    aclrtSetCurrentContextImpl: ACL_REQUIRES_NOT_NULL). Any other handle that is not a live
    context (destroyed already, never created, a handle of another kind) is 107000
    ACL_ERROR_RT_PARAM_INVALID: rtCtxSetCurrent goes through the runtime's error decorator
    first (src/runtime/core/src/runtime.cc: api_ = apiError_), whose
    ApiErrorDecorator::ContextSetCurrent (src/runtime/api/impl/api_error.cc) returns
    RT_ERROR_INVALID_VALUE when ContextManage::CheckContextIsValid
    (src/runtime/core/src/context/context_manage.cc) finds the context no longer tracked,
    before ApiImpl::ContextSetCurrent could give its own code.
    """
    r = rt()
    handle = as_int(context, "context")
    if handle == 0:
        raise Fail(100000, "context is a null handle")
    ctx = _live_context(r, handle, 107000)
    r.spend(r.profile.api_ns)
    r.set_current(ctx)


@api("aclrtGetContext", outs=(0,))
def get_context():
    return rt().current_context().handle
