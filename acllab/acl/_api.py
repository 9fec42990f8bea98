"""How a facade function reports errors: the real code, plus a readable explanation.

Each pyACL function is written as if it always succeeds and simply returns its out-values.
The :func:`api` decorator adds what pyACL does around it: the ``ret`` code last in the tuple
(or alone), default out-values on failure, the explanation kept for
``acl.get_recent_err_msg()``, and an :class:`AclWarning` (or :class:`AclError` in strict mode).
It also holds the process-wide :data:`acllab.runtime.API_LOCK` for the whole call, so the calls
of several threads are atomic with respect to each other; it is taken inside the call's
``try`` and released in its ``finally``, however the call ends (an exception, an asynchronous
exception, a signal handler's).
"""

from __future__ import annotations

import functools
import operator
import threading
import warnings

from .. import session as _session
from ..engine import Deadlock
from ..errors import AclError, AclWarning, Fail, code_name
from ..runtime import API_LOCK
from ..session import current_runtime

__all__ = ["api", "as_int", "rt"]

rt = current_runtime
_acquire, _release = API_LOCK.acquire, API_LOCK.release

#: Wall-clock seconds a call waits for the API lock, while another thread runs a callback,
#: before it says why it may wait forever (see :func:`_acquire_slow`).
LOCK_WAIT_WARN_S = 5.0


def _acquire_slow() -> None:
    """Wait for the API lock that another thread holds. If that thread is running a host
    callback (a VDEC picture's, a launch_callback's) and the wait goes on, say once why it
    may never end: when the callback's report thread does not poll (acl.rt.process_report),
    acllab runs the callback on the thread whose call reached it, holding the lock, so a
    callback that waits for this thread (a full queue it would empty after this call) waits
    forever, where on a card only the report thread would wait (a report thread that polls
    runs its callbacks itself, without the lock: acllab.runtime.Runtime._hand_over)."""
    warned = False
    while not _acquire(True, LOCK_WAIT_WARN_S):
        runtime = _session.live
        running = getattr(runtime, "running_callback", None)
        if running is not None and not warned:
            warned = True
            name, thread = running
            warnings.warn(
                f"acllab: this thread has waited {LOCK_WAIT_WARN_S:g} s for its pyACL call "
                f"while the host callback {name} runs on thread {thread!r}. If that callback "
                "waits for this thread (a full queue that this thread empties after the "
                "call, say), the program never goes on: its report thread did not take the "
                "report (it does not loop on acl.rt.process_report), so acllab runs it on "
                "the thread whose call reached it, holding acllab's lock. Let the report "
                "thread poll, or let the callback hand its result over without waiting (a "
                "queue without a size limit).", AclWarning, stacklevel=3)
_PREFIX = {"acllab.acl.rt": "acl.rt", "acllab.acl.util": "acl.util", "acllab.acl.mdl": "acl.mdl",
           "acllab.acl.op": "acl.op",
           "acllab.acl.media": "acl.media"}


def as_int(value, name: str) -> int:
    """Accept an int-like argument the way the C binding's parser does; else TypeError."""
    if type(value) is int:
        return value
    if isinstance(value, bool):
        return int(value)
    try:
        return operator.index(value)
    except TypeError:
        raise TypeError(f"{name} must be an integer, not {type(value).__name__}") from None


def api(c_name: str, outs: tuple = (), bare: bool = False, needs_init: bool = True):
    """Wrap a facade function: see the module docstring.

    ``outs`` are the out-values returned on failure, before ``ret`` (``(0,)`` for
    ``(ptr, ret)``). ``bare=True`` means the C function returns a value, not a code: on
    failure the wrapper returns ``outs[0]`` and nothing else.
    """

    def deco(fn):
        py_name = fn.__name__
        module = fn.__module__
        if module.startswith("acllab.acl.rt."):      # acl.rt is a package of sections
            module = "acllab.acl.rt"
        where = _PREFIX.get(module, "acl") + "." + py_name

        mode = "bare" if bare else ("status" if not outs else ("one" if len(outs) == 1
                                                                  else "many"))
        status = mode == "status"

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            # the process-wide lock, for the whole call: taken inside the try, so whatever
            # is raised once it is held (a signal handler's, an asynchronous exception, even
            # right after the acquire returns) releases it; an acquire that itself was
            # interrupted (SIGALRM while another thread holds the lock) holds nothing, and
            # its release is skipped. Cheaper than a `with` (one C call each way).
            try:
                if not _acquire(False):
                    _acquire_slow()
                runtime = _session.live       # current_runtime(), without the call
                if runtime is None:
                    runtime = current_runtime()
                if runtime.turn is not None:  # a report thread runs a handed-over callback
                    runtime.wait_turn()
                calls = runtime.calls = runtime.calls + 1
                if calls > runtime.call_budget:
                    runtime.over_budget("API call", f"{runtime.call_budget:,} calls",
                                        "call_budget")
                start = runtime.host_ns
                try:
                    if needs_init and not runtime.initialized:
                        runtime.require_init()
                    result = fn(*args, **kwargs) if kwargs else fn(*args)
                    code = 0
                except Fail as exc:
                    code, message, quiet = exc.code, exc.message, exc.quiet
                except Deadlock as exc:
                    code = 507046
                    quiet = False
                    message = ("the host would wait forever: the task it waits for "
                               f"({exc.args[0].name}) can never finish (a blocking callback "
                               "that no thread processes, or an event that is never recorded)")
                runtime.api_log.append((py_name, start, runtime.host_ns, code))
                if code == 0:
                    if status:
                        return 0
                    if mode == "one":
                        return result, 0
                    if mode == "bare":
                        return result
                    return (*result, 0)
                _report(runtime, where, c_name, code, message, quiet)
                if bare:
                    return outs[0]
                return (*outs, code) if outs else code
            finally:
                try:
                    _release()
                except RuntimeError:   # the acquire was interrupted: this thread holds none
                    pass

        wrapper.c_name = c_name
        return wrapper

    return deco


def _report(runtime, where: str, c_name: str, code: int, message: str, quiet: bool) -> None:
    text = f"{where} ({c_name}) returned {code} {code_name(code)}: {message}"
    runtime.recent_error[threading.get_ident()] = text
    if quiet:
        return
    if runtime.strict:
        raise AclError(code, where, message)
    warnings.warn(text, AclWarning, stacklevel=3)


# -- what every section shares: addresses resolved to allocations, the leak warning -----------

def region_at(r, addr: int, what: str, require_live: bool = True):
    """The region holding ``addr``, or Fail with the reason."""
    if addr == 0:
        raise Fail(100000, f"{what} is a null pointer")
    region = r.space.find(addr)
    if region is None:
        dead = r.space.find_dead(addr)
        if dead is not None and dead.kind == "pageable":
            raise Fail(107000, f"{what} 0x{addr:x} is dangling: the Python object behind it "
                               "(bytes_to_ptr / numpy_to_ptr) no longer exists")
        if dead is not None and dead.kind == "pinned":
            raise Fail(107000, f"{what} 0x{addr:x} was freed by acl.rt.free_host")
        if dead is not None:
            raise Fail(107000, f"{what} 0x{addr:x} belonged to memory that was released "
                               "(reset_device or finalize)")
        raise Fail(107000, f"{what} 0x{addr:x} is not inside any allocation or registered "
                           "host buffer")
    if region.kind == "pageable" and not r.host.check_alive(region):
        raise Fail(107000, f"{what} 0x{addr:x} is dangling: the Python object behind it no "
                           "longer exists")
    if require_live and region.kind == "device" and not region.live:
        raise Fail(107000, f"{what} 0x{addr:x} was freed by acl.rt.free (its block is back "
                           "in the runtime's caching pool)")
    return region


def span(r, addr: int, n: int, what: str, device=None):
    """Resolve [addr, addr+n) to (region, offset), bounds- and device-checked."""
    region = region_at(r, addr, what)
    off = addr - region.start
    if off + n > region.size:
        raise Fail(107000, f"{what} 0x{addr:x} + {n} B runs {off + n - region.size} B past the "
                           f"end of its {region.describe()}")
    if device is not None and region.kind == "device" and region.device != device.id:
        raise Fail(107000, f"{what} 0x{addr:x} is memory of device {region.device}, but the "
                           f"current context is on device {device.id} (peer access is not "
                           "modelled)")
    return region, off


def leak_warning(runtime, where: str, leaked: list[str], stacklevel: int = 4) -> None:
    """Record ``leaked`` as the runtime's leaks and warn once, naming what ``where`` released."""
    if not leaked:
        return
    runtime.leaks.extend(f"{where}: {item}" for item in leaked)
    shown = "; ".join(leaked[:5]) + (f"; and {len(leaked) - 5} more" if len(leaked) > 5 else "")
    warnings.warn(f"{where} released resources the program never released itself: {shown}",
                  AclWarning, stacklevel=stacklevel)
