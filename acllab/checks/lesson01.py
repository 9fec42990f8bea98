"""Checks for lesson 01, Devices and contexts: a setup that reports errors, a clean teardown.

``01.setup``: ``setup(acl, device_id) -> (res, ret)``
    Initialise pyACL, set device ``device_id``, create a context on it and a stream in that
    context. On success return ``({"device": device_id, "context": ctx, "stream": stream}, 0)``
    with the new context current. If a call fails, release what setup already made (last made,
    first released) and return ``(None, ret)`` with the code of the call that failed, so the
    caller is left exactly as before.

``01.teardown``: ``teardown(acl, res) -> None``
    Release everything a successful setup made, in the reverse order: the stream, the context,
    the device (reset_device), then pyACL itself (finalize). Every call must return 0 and
    finalize must find nothing left over. The caller may have made another context current
    meanwhile.

The cases draw the device from the seed; setup also meets a device id that does not exist and
a card with no stream left. The grades come from the runtime itself: its devices, contexts,
streams, the pyACL calls and their return codes, and what finalize reports as leaked.

Every item of both exercises is a result item: what these helpers are for is making exactly
the resources asked for, releasing them in order and leaving nothing behind, so a leak or a
wrong order scores 0 like a wrong value. An error code counts only as the code a pyACL call
really returned (the api log has every call and its code), never one the function made up.
"""

from __future__ import annotations

import sys as _sys

import numpy as np

from .. import acl
from ..constants import (
    ACL_MEM_MALLOC_HUGE_FIRST,
    ACL_MEMCPY_DEVICE_TO_HOST,
    ACL_MEMCPY_HOST_TO_DEVICE,
    ACL_MEMCPY_HOST_TO_HOST,
)
from ..errors import code_name
from ..hardware import PROFILES
from ..streams import Context, Stream
from . import Call, Case, Item, _guard, call_learner, exercise, isolated, ran_item
from ._common import is_int, join_first, leak_texts, new_case, qualified, short_repr

__all__ = ["grade_setup", "grade_teardown", "STREAM_LIMIT"]

STREAM_LIMIT = 2        # the "card with no stream left": room for two default streams only
_KEYS = ("device", "context", "stream")
_TEARDOWN_STEPS = (      # (what, the pyACL names that do it)
    ("acl.rt.destroy_stream", ("destroy_stream", "destroy_stream_force")),
    ("acl.rt.destroy_context", ("destroy_context",)),
    ("acl.rt.reset_device", ("reset_device", "reset_device_force")),
    ("acl.finalize", ("finalize",)),
)
_CODE_HINTS = {
    107003: "the stream belongs to res['context'], but another context was current when it "
            "was destroyed: a call that uses a stream must be made while the stream's own "
            "context is current (section 3 of the lesson shows which call switches)",
    107002: "this thread had no current context when a call needed one: which context must "
            "be current for the calls you make here, and what made it stop being current?",
    107017: "a handle was used after it was destroyed: release each thing once, the stream "
            "before its context (a context takes its streams with it)",
    107000: "reset_device was called more often than set_device (or the device was never set)",
    100037: "finalize was called twice",
    100001: "a call came after acl.finalize(): finalize comes last",
}

#: What acl.rt.set_device returns for a device id that does not exist (aclrtSetDevice:
#: ACL_ERROR_RT_INVALID_DEVICEID, acllab.errors).
_INVALID_DEVICE = 107001


def _code(code: int) -> str:
    return f"{code} ({code_name(code)})"


def _calls(runtime, since: int) -> list[tuple[str, int]]:
    """(name, ret) of every pyACL call made since api-log position ``since``."""
    return [(name, ret) for name, _, _, ret in runtime.api_log[since:]]


def _failures(calls: list[tuple[str, int]]) -> list[str]:
    return [f"{qualified(name)} returned {_code(ret)}" for name, ret in calls if ret]


def _unpack(value) -> tuple[object, int | None, str]:
    """(res, ret, '') from setup's ``(res, ret)``; or (None, None, why it is not a pair)."""
    if isinstance(value, tuple) and len(value) == 2 and is_int(value[1]):
        return value[0], int(value[1]), ""
    return None, None, (f"setup returned {short_repr(value)}, not a pair (res, ret): return "
                        "(res, 0) on success and (None, ret) on failure, as pyACL calls "
                        "return their values with the code last")


def _leftovers(runtime) -> list[str]:
    """What setup or teardown left alive, as finalize reports it.

    If pyACL is still initialised, finalize runs here, so that its leak list is complete.
    """
    found = []
    if runtime.initialized:
        found.append("pyACL is still initialised (acl.finalize() was never called)")
        acl.finalize()
    return found + leak_texts(runtime.leaks, " (found by {source})")


def _log_edited(runtime, call: Call, mark: int) -> Item | None:
    """A failed 'acllab unchanged' item when the function's own entries of the api log were
    edited (removed, reordered or rewritten), else None.

    The framework keeps the log from before the call intact; the calls the function made are
    what these exercises grade. Each entry is (name, start, end, ret), appended as its call
    returns, and the host's virtual clock only moves inside logged calls: the entries tile the
    call's time, their ends in order, without a gap unless the function raised (a pyACL call
    interrupted by an exception is not logged).
    """
    entries = runtime.api_log[mark:]
    clock = call.start_ns
    gaps = call.error is not None
    intact = True
    for entry in entries:
        if not (isinstance(entry, tuple) and len(entry) == 4 and isinstance(entry[0], str)
                and all(is_int(v) for v in entry[1:])):
            intact = False
            break
        _, start, end, _ret = entry
        if (start > clock and not gaps) or end < start or end < clock:
            intact = False
            break
        clock = end
    if intact and (clock == call.end_ns or gaps and clock <= call.end_ns):
        return None
    return Item("acllab unchanged", False,
                "the runtime's log of pyACL calls was edited while the function ran, which a "
                "check never accepts: it grades the calls the function really made",
                "solve the exercise with pyACL calls; leave acllab's modules, the checks and "
                "the runtime's records alone")


def _renamed(item: Item, name: str) -> Item:
    item.name = name
    return item


# -- 01.setup ----------------------------------------------------------------------------------

@exercise("01.setup", "setup: a device, a context and a stream, or a clean failure", "setup",
          seeds=(0, 1, 2, 3), limit_s=10)
def grade_setup(fn, seed: int) -> Case:
    """One case: a working device, a device id that does not exist, or no stream left."""
    rng = np.random.default_rng([1, 1, seed])
    count = PROFILES["ascend310"].device_count
    kind = ("works", "bad id", "no stream left", "works")[seed % 4]
    device_id = int(rng.integers(0, count))
    settings = {}
    if kind == "bad id":
        device_id = int(rng.choice([count, count + int(rng.integers(1, 5)), 64, -1]))
        label = f"device id {device_id} on a host with {count} devices (0 to {count - 1})"
    elif kind == "no stream left":
        settings["profile"] = PROFILES["ascend310"].replace(max_streams=STREAM_LIMIT)
        label = (f"device {device_id} of a card that has room for only {STREAM_LIMIT} "
                 "streams, so one of setup's calls fails")
    else:
        label = f"device {device_id}, which works"
    with isolated(**settings) as runtime:
        mark = len(runtime.api_log)
        call = call_learner(fn, acl, device_id)
        case = new_case(label, call, runtime)
        if case.not_done:
            return case
        edited = _log_edited(runtime, call, mark)
        if edited is not None:
            case.items.append(edited)
            return case
        case.items.append(_renamed(ran_item(call, "setup"), "setup runs"))
        if call.error is not None:
            if kind != "works":
                case.items[-1].hint = ("setup must not raise when a call fails: release what "
                                       "it made and return (None, ret)")
            return case
        calls = _calls(runtime, mark)
        if kind == "works":
            _grade_setup_works(case, runtime, call, calls, device_id, rng)
        else:
            _grade_setup_fails(case, runtime, call, calls, kind)
        return case


def _grade_setup_works(case: Case, runtime, call: Call, calls, device_id: int, rng) -> None:
    res, ret, why = _unpack(call.value)
    failures = _failures(calls)
    if why:
        case.items.append(Item("result", False, why, "end setup with: return res, 0"))
        return
    if ret != 0:
        case.items.append(Item(
            "result", False, f"setup returned ret={ret} for a device that works"
            + (": " + "; ".join(failures[:3]) if failures else ""),
            "check each call's ret; the warnings below say which call failed and why"))
        return
    if not isinstance(res, dict) or not all(isinstance(res.get(k), int) for k in _KEYS):
        case.items.append(Item(
            "result", False, f"res is {short_repr(res)}: it must be a dict with the int handles "
                             "'device', 'context' and 'stream'",
            'return {"device": device_id, "context": context, "stream": stream}, 0'))
        return
    if failures:
        case.items.append(Item(
            "result", False, "setup returned ret 0, but some of its calls failed: "
                             + "; ".join(failures[:3]),
            "every pyACL call returns a code: check it, and stop at the first failure"))
        return
    case.items.append(Item("result", True, f"setup returned (res, 0), and all {len(calls)} of "
                                           "its pyACL calls returned 0"))
    resources = _resources_item(runtime, res, device_id, rng)
    case.items.append(resources)
    if resources.passed:
        case.items.append(_clean_after_setup(runtime, res))


def _resources_item(runtime, res: dict, device_id: int, rng) -> Item:
    """'resources': the device is set, the context is new and current, the stream is in it."""
    dev = runtime.devices[device_id]
    ctx = runtime.handles.get(res["context"])
    stream = runtime.handles.get(res["stream"])
    current = runtime.current_context(required=False)
    problem, hint = "", ""
    if res["device"] != device_id:
        problem = f"res['device'] is {res['device']}, but setup was asked for device {device_id}"
    elif not dev.refcount:
        problem = f"device {device_id} is not set (its reference count is 0)"
        hint = "call acl.rt.set_device(device_id) before creating the context"
    elif not (isinstance(ctx, Context) and ctx.alive):
        problem = f"res['context'] (0x{res['context']:x}) is not a live context"
        hint = "context, ret = acl.rt.create_context(device_id)"
    elif ctx.is_default:
        problem = (f"res['context'] is device {device_id}'s default context, the one "
                   "set_device makes")
        hint = "make your own context with acl.rt.create_context(device_id)"
    elif ctx.device is not dev:
        problem = f"res['context'] lives on device {ctx.device.id}, not on device {device_id}"
    elif not (isinstance(stream, Stream) and stream.alive) or stream.is_default:
        problem = f"res['stream'] (0x{res['stream']:x}) is not a live stream you created"
        hint = "stream, ret = acl.rt.create_stream(), after create_context"
    elif stream.context is not ctx:
        problem = (f"res['stream'] belongs to context 0x{stream.context.handle:x}, not to "
                   "res['context']")
        hint = ("a stream is created in the current context: create it after "
                "create_context, which makes the new context current")
    elif current is not ctx:
        where = (f"context 0x{current.handle:x}" + (" (a default context)" if
                 current.is_default else "") if current is not None else "no context")
        problem = f"when setup returned, the current context was {where}, not res['context']"
        hint = ("the caller will use res['stream'] right away, which needs its context to be "
                "current: a set_device or set_context after create_context switched away")
    if problem:
        return Item("resources", False, problem, hint)
    used = _use_stream(res["stream"], rng)
    if used:
        return Item("resources", False, f"the caller could not use res['stream']: {used}",
                    "read the warnings below: they say why the call failed")
    return Item("resources", True,
                f"device {device_id} is set, res['context'] is a new context on it and is "
                "current, and the caller copied data through res['stream']")


def _use_stream(stream: int, rng) -> str:
    """The caller copies random bytes to the device and back on ``stream``; '' if it worked."""
    n = int(rng.integers(1, 64)) * 1024
    payload = rng.bytes(n)
    made: list[tuple[object, int]] = []       # (how to free it, pointer)
    try:
        for what, alloc, free in (
                ("acl.rt.malloc_host", lambda: acl.rt.malloc_host(n), acl.rt.free_host),
                ("acl.rt.malloc_host", lambda: acl.rt.malloc_host(n), acl.rt.free_host),
                ("acl.rt.malloc", lambda: acl.rt.malloc(n, ACL_MEM_MALLOC_HUGE_FIRST),
                 acl.rt.free)):
            ptr, ret = alloc()
            if ret:
                return f"{what} returned {_code(ret)}"
            made.append((free, ptr))
        (_, src), (_, dst), (_, dev) = made
        steps = (("acl.rt.memcpy", lambda: acl.rt.memcpy(
                      src, n, acl.util.bytes_to_ptr(payload), n, ACL_MEMCPY_HOST_TO_HOST)),
                 ("acl.rt.memcpy_async", lambda: acl.rt.memcpy_async(
                      dev, n, src, n, ACL_MEMCPY_HOST_TO_DEVICE, stream)),
                 ("acl.rt.memcpy_async", lambda: acl.rt.memcpy_async(
                      dst, n, dev, n, ACL_MEMCPY_DEVICE_TO_HOST, stream)),
                 ("acl.rt.synchronize_stream", lambda: acl.rt.synchronize_stream(stream)))
        for what, step in steps:
            ret = step()
            if ret:
                return f"{what}(..., res['stream']) returned {_code(ret)}"
        if acl.util.ptr_to_bytes(dst, n) != payload:
            return "the bytes it copied through the stream did not come back"
        return ""
    finally:
        acl.rt.synchronize_device()
        for free, ptr in made:
            free(ptr)


def _clean_after_setup(runtime, res: dict) -> Item:
    """'nothing extra': the caller's own teardown of res leaves nothing for finalize."""
    acl.rt.set_context(res["context"])
    acl.rt.destroy_stream(res["stream"])
    acl.rt.destroy_context(res["context"])
    acl.rt.reset_device(res["device"])
    acl.finalize()
    if runtime.leaks:
        return Item("nothing extra", False,
                    "after the caller released what res holds, finalize still found: "
                    + "; ".join(leak_texts(runtime.leaks)[:4]),
                    "setup makes exactly what it returns: one set_device, one context, one "
                    "stream; anything else is never released")
    return Item("nothing extra", True, "once the caller released what res holds, finalize "
                                       "found nothing left over")


def _grade_setup_fails(case: Case, runtime, call: Call, calls, kind: str) -> None:
    res, ret, why = _unpack(call.value)
    first = next(((i, name, code) for i, (name, code) in enumerate(calls) if code), None)
    if why:
        case.items.append(Item("reports the error", False, why,
                               "on a failure: return None, ret"))
    elif ret == 0:
        what = (f"{qualified(first[1])} failed" if first else
                "the device id does not exist" if kind == "bad id" else "a call failed")
        case.items.append(Item(
            "reports the error", False, f"setup returned ret 0, but {what}: its caller would "
                                        "go on as if it had a device, a context and a stream",
            "check the ret of every call; at the first non-zero one, clean up and return it"))
    elif first is None and kind == "bad id" and ret == _INVALID_DEVICE and res is None:
        # it checked the id itself (acl.rt.get_device_count) and returned the very code
        # set_device gives an id that does not exist: as correct as letting the call fail
        case.items.append(Item("reports the error", True,
                               f"setup returned (None, {_code(ret)}), the code "
                               "acl.rt.set_device gives an id that does not exist, after "
                               "checking the id itself"))
    elif first is None:
        hint = ("make the calls and pass on the code of the first one that fails, unchanged; "
                "do not make up a code")
        if kind == "bad id":
            hint += (f" (a device id you check yourself is {_code(_INVALID_DEVICE)}, the "
                     "code acl.rt.set_device returns for it)")
        case.items.append(Item(
            "reports the error", False, f"setup returned ret={ret}, but none of its pyACL "
                                        "calls failed and that is not the code the failing "
                                        "call would have returned", hint))
    elif ret != first[2]:
        case.items.append(Item(
            "reports the error", False, f"setup returned ret={ret}, which is not the code "
                                        f"that {qualified(first[1])} returned",
            "pass the failed call's code on unchanged: it is the one the caller can look up "
            "(and acl.get_recent_err_msg() explains)"))
    elif res is not None:
        case.items.append(Item(
            "reports the error", False, f"setup returned the error code together with res "
                                        f"{short_repr(res)}",
            "return None as res on a failure, so nobody uses half-made resources"))
    else:
        case.items.append(Item("reports the error", True,
                               f"setup returned (None, ret) with the code of "
                               f"{qualified(first[1])}, which failed"))
    after = calls[first[0] + 1:] if first else calls
    cleanup = _failures(after)
    left = _leftovers(runtime)
    if cleanup or left:
        text = []
        if cleanup:
            text.append((f"after {qualified(first[1])} failed, setup went on: " if first
                         else "") + "; ".join(cleanup[:3]))
        if left:
            text.append("left behind: " + "; ".join(left[:4]))
        case.items.append(Item(
            "nothing left behind", False, "; ".join(text),
            "on a failure, undo what setup already did, last done first: destroy the context "
            "if you made it, reset_device if set_device succeeded, then acl.finalize(); skip "
            "what was never made"))
    else:
        case.items.append(Item("nothing left behind", True,
                               "setup undid what it had done: no device set, pyACL finalised, "
                               "nothing leaked"))


# -- 01.teardown -------------------------------------------------------------------------------

@exercise("01.teardown", "teardown: release everything, in order", "teardown", limit_s=10)
def grade_teardown(fn, seed: int) -> Case:
    """One case: a device, a context and a used stream; maybe another context is current."""
    rng = np.random.default_rng([1, 2, seed])
    device_id = int(rng.integers(0, PROFILES["ascend310"].device_count))
    switched = seed % 3 == 1
    label = f"device {device_id}" + (", and the caller made the default context current "
                                     "before calling teardown" if switched else "")
    with isolated() as runtime:
        acl.init()
        acl.rt.set_device(device_id)
        default_ctx, _ = acl.rt.get_context()
        ctx, _ = acl.rt.create_context(device_id)
        stream, _ = acl.rt.create_stream()
        res = {"device": device_id, "context": ctx, "stream": stream}
        _use_stream(stream, rng)
        if switched:
            acl.rt.set_context(default_ctx)
        mark = len(runtime.api_log)
        call = call_learner(fn, acl, dict(res))
        case = new_case(label, call, runtime)
        if case.not_done:
            return case
        calls = _calls(runtime, mark)
        edited = _log_edited(runtime, call, mark)
        if edited is not None:
            case.items.append(edited)
            return case
        case.items.append(_renamed(ran_item(call, "teardown"), "teardown runs"))
        if call.error is not None:
            return case
        case.items.append(_codes_item(calls))
        case.items.append(_order_item(calls))
        left = _leftovers(runtime)
        case.items.append(Item(
            "nothing left", not left,
            "finalize found nothing left over: every resource was released by teardown"
            if not left else join_first(left, 4),
            "" if not left else "release everything setup made, stream first and finalize "
                                "last; what you skip is reported as a leak"))
        return case


def _codes_item(calls) -> Item:
    if not calls:
        return Item("return codes", False, "teardown made no pyACL call at all",
                    "release what res holds with pyACL calls: destroy_stream, "
                    "destroy_context, reset_device, finalize")
    failed = [(name, ret) for name, ret in calls if ret]
    if not failed:
        return Item("return codes", True, f"all {len(calls)} pyACL calls of teardown "
                                          "returned 0")
    name, ret = failed[0]
    shown = "; ".join(f"{qualified(n)} returned {_code(r)}" for n, r in failed[:3])
    hint = _CODE_HINTS.get(ret, "acl.get_recent_err_msg() after the call explains it")
    if name == "destroy_context" and ret == 107002:
        hint = ("destroy_context was given a context that was destroyed already, or the "
                "device's default one: destroy res['context'] once, and leave the default "
                "context to reset_device")
    return Item("return codes", False, shown, hint)


def _order_item(calls) -> Item:
    names = [name for name, _ in calls]
    first = {}
    for what, aliases in _TEARDOWN_STEPS:
        at = next((i for i, n in enumerate(names) if n in aliases), None)
        if at is None:
            return Item("order", False, f"teardown never called {what}",
                        "four steps, in this order: destroy_stream, destroy_context, "
                        "reset_device, finalize")
        first[what] = at
    steps = [what for what, _ in _TEARDOWN_STEPS]
    for a, b in zip(steps, steps[1:], strict=False):
        if first[a] > first[b]:
            return Item("order", False,
                        f"teardown called {b} (call {first[b] + 1}) before {a} "
                        f"(call {first[a] + 1})",
                        "release in the reverse order of creation: a context takes its "
                        "streams with it, reset_device takes the device's contexts, finalize "
                        "takes everything, and what they take is reported as leaked")
    return Item("order", True, "the stream, then the context, then the device, then pyACL")


_guard.seal(_sys.modules[__name__])        # the grader's own helpers refuse learner code
