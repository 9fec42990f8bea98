"""``acl.rt`` devices: set, reset, query and synchronise a device (aclrtSetDevice ...)."""

from __future__ import annotations

from ... import constants as C
from ...errors import Fail
from .._api import api, as_int, leak_warning, rt

__all__ = ["set_device", "reset_device", "reset_device_force", "get_device",
           "get_device_count", "get_run_mode", "synchronize_device"]



@api("aclrtSetDevice")
def set_device(device_id):
    """Open a device (reference-counted) and make its default context current."""
    r = rt()
    dev = r.device(as_int(device_id, "device_id"))
    if dev.default_context is None:
        r.spend(dev.profile.open_device_ns)
        r.create_context(dev, is_default=True)
    else:
        r.spend(r.profile.api_ns)
    dev.refcount += 1
    r.set_current(dev.default_context)


def _reset(device_id, force: bool):
    r = rt()
    dev = r.device(as_int(device_id, "device_id"))
    if dev.refcount == 0 and not (force and dev.open):
        raise Fail(107000, f"device {dev.id} is not set: call acl.rt.set_device({dev.id}) "
                           "before resetting it")
    r.spend(r.profile.api_ns)
    dev.refcount = 0 if force else dev.refcount - 1
    if dev.refcount == 0:
        where = f"acl.rt.reset_device{'_force' if force else ''}({dev.id})"
        leak_warning(r, where, r.release_device(dev), stacklevel=5)


@api("aclrtResetDevice")
def reset_device(device_id):
    """Drop one reference to the device; at zero, synchronise and release everything on it.

    Work the synchronisation finds can never finish (behind a blocking callback that no
    thread processes) is discarded with the streams, as are the callback reports that no
    thread processed: none of it runs later, on any stream. The call still returns 0, and
    warns about the objects it had to release."""
    _reset(device_id, force=False)


@api("aclrtResetDeviceForce")
def reset_device_force(device_id):
    """Release the device at once, whatever its reference count (as reset_device does at
    zero, pending work that can never finish included)."""
    _reset(device_id, force=True)


@api("aclrtGetDevice", outs=(-1,))
def get_device():
    """The device of the current context."""
    return rt().current_context().device.id


@api("aclrtGetDeviceCount", outs=(0,), needs_init=False)
def get_device_count():
    """The number of devices. Like CANN's aclrtGetDeviceCount (hicann/runtime: it asks the
    driver, rtGetDeviceCount, with no init check), it answers before acl.init()."""
    return len(rt().devices)


@api("aclrtGetRunMode", outs=(-1,), needs_init=False)
def get_run_mode():
    """ACL_HOST: the program runs on a host driving a PCIe card (as every acllab device).

    CANN's aclrtGetRunModeImpl calls rtGetRunMode with no init check (hicann/runtime), and
    Ascend's AclLite asks for the run mode in a class body at import time, before acl.init():
    so it answers before init too.
    """
    return C.ACL_HOST


@api("aclrtSynchronizeDevice")
def synchronize_device():
    """Block until every stream of the current device has finished its submitted tasks."""
    r = rt()
    dev = r.current_context().device
    r.spend(r.profile.api_ns)
    streams = []
    for ctx in [dev.default_context, *dev.contexts.values()]:
        if ctx is not None:
            streams += [ctx.default_stream, *ctx.streams.values()]
    for s in streams:
        if s.last is not None:
            r.wait_for(s.last)      # also tells the host (and the sanitizer) it is done
    for s in streams:
        r.raise_fault(s)
