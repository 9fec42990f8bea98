"""``acl.rt.launch_kernel``: an acllab extension shaped like aclrtLaunchKernel.

The task (its roofline time and its data effect) is built in :mod:`acllab.kernels`."""

from __future__ import annotations

import inspect
import reprlib

from ... import kernels
from ...errors import Fail
from .._api import api, as_int, rt

__all__ = ["launch_kernel"]

_FUNCTION = type(lambda: None)
_POSITIONAL = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
_REPR = reprlib.Repr()
_REPR.maxstring, _REPR.maxother = 30, 30


def _show(args: tuple) -> str:
    """The args a message quotes: large ints (device pointers) in hex, at most six shown."""
    shown = [(f"{a:#x}" if a >= 0 else f"-{-a:#x}") if type(a) is int and abs(a) >= 1 << 16
             else _REPR.repr(a) for a in args[:6]]
    if len(args) > 6:
        shown.append(f"... {len(args) - 6} more")
    return "(" + ", ".join(shown) + ("," if len(args) == 1 else "") + ")"


def _arguments(n: int) -> str:
    return f"{n} argument{'' if n == 1 else 's'}"


def _check_arguments(kernel: kernels.Kernel, args: tuple) -> None:
    """Fail(100000) unless the kernel's function can be called as ``fn(ctx, *args)``."""
    fn = kernel.fn
    code = getattr(fn, "__code__", None)
    if (type(fn) is _FUNCTION and not code.co_kwonlyargcount
            and not code.co_flags & inspect.CO_VARKEYWORDS):
        # the common case, without inspect.signature's cost on every launch
        most = code.co_argcount
        given = 1 + len(args)
        if most - len(fn.__defaults__ or ()) <= given and (
                given <= most or code.co_flags & inspect.CO_VARARGS):
            return
    try:
        sig = inspect.signature(kernel.fn)
    except (TypeError, ValueError):         # no signature to read: the launch will tell
        return
    try:
        sig.bind(None, *args)
        return
    except TypeError:
        pass
    name = kernel.name
    params = list(sig.parameters.values())
    positional = [p for p in params if p.kind in _POSITIONAL]
    star = next((p.name for p in params if p.kind is inspect.Parameter.VAR_POSITIONAL), None)
    if not positional and star is None:
        raise Fail(100000, f"kernel {name} takes no parameters, not even the block context: "
                           f"define it as def {name}(ctx, ...), ctx first")
    required_kw = [p.name for p in params
                   if p.kind is inspect.Parameter.KEYWORD_ONLY and p.default is p.empty]
    if required_kw:
        raise Fail(100000, f"kernel {name} has keyword-only parameters without defaults "
                           f"({', '.join(required_kw)}): launch_kernel passes its args by "
                           "position only, so they can never be given")
    takes = positional[1:]
    least = sum(p.default is p.empty for p in takes)
    if star is not None:
        count = f"at least {_arguments(least)}"
    elif least == len(takes):
        count = _arguments(least)
    else:
        count = f"{least} to {_arguments(len(takes))}"
    names = [p.name for p in takes] + ([f"*{star}"] if star is not None else [])
    listed = f" ({', '.join(names)})" if names else ""
    raise Fail(100000, f"kernel {name} takes {count} after its block context{listed}, but "
                       f"launch_kernel's args holds {len(args)}: {_show(args)}")


@api("aclrtLaunchKernel")
def launch_kernel(kernel, block_dim, args, stream):
    """Launch a ``@acllab.kernel`` function on ``block_dim`` blocks on a stream.

    acllab extension (pyACL has no stable binding): the shape of
    ``aclrtLaunchKernel(func, numBlocks, args, argsSize, stream)``, with ``args`` a tuple of
    Python values (device pointers are ints). See :mod:`acllab.kernels`. ``args`` must fit
    the kernel's parameters after ``ctx`` (else 100000 ACL_ERROR_INVALID_PARAM, as a wrong
    ``argsSize`` is), and so must the kernel's ``flops=`` and ``bytes=`` functions.
    """
    if not isinstance(kernel, kernels.Kernel):
        raise TypeError("kernel must be a function decorated with @acllab.kernel(...)")
    if not isinstance(args, (tuple, list)):
        raise TypeError("args must be a tuple of the kernel's arguments")
    r = rt()
    block_dim = as_int(block_dim, "block_dim")
    if not 1 <= block_dim <= 65535:
        raise Fail(100000, f"block_dim {block_dim} must be between 1 and 65535")
    s = r.stream_for(as_int(stream, "stream"))
    args = tuple(args)
    _check_arguments(kernel, args)
    try:
        flops, nbytes = kernel.cost(args)
    except Exception as exc:    # noqa: BLE001 - the kernel's own cost declaration failed
        raise Fail(100000, f"kernel {kernel.name}: its declared cost (the flops= and bytes= "
                           f"of @acllab.kernel) failed for these {_arguments(len(args))} "
                           f"{_show(args)}: {type(exc).__name__}: {exc}") from None
    if flops < 0 or nbytes < 0:
        raise Fail(100000, f"kernel {kernel.name} declares a negative cost for these arguments "
                           f"({flops} flops, {nbytes} bytes)")
    task = kernels.kernel_task(r, kernel, block_dim, args, s, flops, nbytes)
    r.launch(r.profile.launch_ns)
    r.submit(task, s)
