"""The grader's guard around a learner's function: a time limit, sealed oracles, intact modules.

A check calls the learner's function through :func:`run_guarded`. While it runs:

* a wall-clock **time limit** stops it, Python-only loops and ``time.sleep`` included: on the
  main thread a ``SIGALRM`` timer raises :class:`CaseTimeout` (a BaseException, so
  ``except Exception`` does not swallow it) and raises it again every 0.1 s until the
  function has let go; elsewhere (or without ``setitimer``) a watchdog thread raises it
  asynchronously in the learner's thread;
* the **grader's own helpers are sealed**: every function defined in a lesson's check module
  (``acllab.checks.lessonNN``) refuses to run when called from code outside acllab, so a
  learner's function cannot ask the oracle for the answer (:func:`seal`; the few tools a
  lesson hands to learners are marked :func:`learner_tool`);
* acllab's **modules are watched**: a :class:`Snapshot` taken before the call notes every
  name bound in acllab's modules (and in ``builtins``, ``numpy`` and ``math``, which checks
  rely on), the code, defaults and closures of acllab's functions, the attributes of its
  classes and the contents of its module-level containers. Whatever the function changed is
  reported in plain words and put back.

The guard only raises the bar: Python cannot keep code in one process from reaching anything
else in it, nor stop a function that catches BaseException in a loop (it is interrupted every
0.1 s, but may carry on: interrupt the kernel). Grades that must hold against a determined
learner come from ``acllab grade``, which runs each exercise's check in a fresh, sandboxed
process and kills it at its deadline.
"""

from __future__ import annotations

import ctypes
import math
import signal
import sys
import threading
import types
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["CaseTimeout", "GraderOnly", "Snapshot", "Outcome", "run_guarded", "seal",
           "learner_tool", "refuse_if_learner"]

_ACLLAB_DIR = str(Path(__file__).resolve().parents[1])
_THIS_FILE = str(Path(__file__).resolve())
_REFIRE_S = 0.1          # after the limit, raise again this often until the function lets go

# state that changes while acllab works normally: (module, name) pairs, and containers whose
# additions are caches
_MUTABLE_NAMES = {
    ("acllab.session", "live"),
    ("acllab.session", "_settings"),     # configure() inside the function is reported apart
    ("acllab.checks", "history"),
    ("acllab.session", "CREATED"),       # how many runtimes the session made: compared apart
}
# modules outside acllab whose names a check relies on (identity of each binding only)
_EXTERNAL = ("builtins", "math", "numpy", "zlib", "operator", "functools", "itertools")


class CaseTimeout(BaseException):
    """The learner's function ran past its wall-clock limit."""


class GraderOnly(Exception):
    """A learner's function called one of the grader's own helpers while being graded."""


# -- learner context and sealed helpers --------------------------------------------------------

class _State:
    depth = 0                       # > 0 while a learner's function runs under a check
    refused: list[str] = []         # the grader helpers the function tried to call


_STATE = _State()


def _outside_acllab(frame) -> bool:
    return frame is not None and not frame.f_code.co_filename.startswith(_ACLLAB_DIR)


def _refuse(qualname: str) -> GraderOnly:
    _STATE.refused.append(qualname)
    return GraderOnly(f"{qualname} is part of the grader: it does not compute answers for the "
                      "function being graded; write the code yourself")


def refuse_if_learner(qualname: str) -> None:
    """Raise :class:`GraderOnly` when learner code (not acllab) is calling ``qualname`` while a
    check runs the learner's function."""
    frame = sys._getframe(2)
    while frame is not None and frame.f_code.co_filename.endswith("contextlib.py"):
        frame = frame.f_back        # `with isolated():` is called from contextlib's __enter__
    if _STATE.depth > 0 and _outside_acllab(frame):
        raise _refuse(qualname)


def learner_tool(fn: Callable) -> Callable:
    """Mark a function of a check module as a tool learners may call (it is not sealed)."""
    fn.__acllab_learner_tool__ = True
    return fn


class _Sealed:
    """A sealed grader helper: calls ``fn`` unless learner code calls it during a check.

    While a check runs a learner's function, learner code can neither call it nor reach what
    it wraps (``__wrapped__``, ``_fn``, ``cache_info`` ...): only its name and docstring.
    """

    _OPEN = frozenset({"__name__", "__qualname__", "__module__", "__doc__", "__class__",
                       "__repr__", "__call__", "_qualname", "__dict__"})

    def __init__(self, fn: Callable, qualname: str):
        self._fn = fn
        self._qualname = qualname
        self.__doc__ = getattr(fn, "__doc__", None)
        self.__name__ = getattr(fn, "__name__", qualname)
        self.__qualname__ = getattr(fn, "__qualname__", qualname)
        self.__module__ = getattr(fn, "__module__", None)

    def __getattribute__(self, name):
        if (name not in _Sealed._OPEN and _STATE.depth > 0
                and _outside_acllab(sys._getframe(1))):
            raise _refuse(object.__getattribute__(self, "_qualname"))
        return object.__getattribute__(self, name)

    def __call__(self, *args, **kwargs):
        if _STATE.depth > 0 and _outside_acllab(sys._getframe(1)):
            raise _refuse(self._qualname)
        return self._fn(*args, **kwargs)

    def __getattr__(self, name):          # cache_info, cache_clear ... of lru_cache helpers
        return getattr(object.__getattribute__(self, "_fn"), name)

    def __repr__(self) -> str:
        return f"<grader helper {self._qualname}>"


def _sealable(value: Any, module: str) -> bool:
    if isinstance(value, (type, _Sealed)) or getattr(value, "__acllab_learner_tool__", False):
        return False
    if isinstance(value, types.FunctionType):
        return value.__module__ == module
    wrapped = getattr(value, "__wrapped__", None)       # functools.lru_cache and friends
    return (callable(value) and isinstance(wrapped, types.FunctionType)
            and wrapped.__module__ == module)


def seal(module: types.ModuleType) -> list[str]:
    """Seal every function defined in ``module`` (see the module docstring); the sealed names.

    Classes stay as they are: their methods are what a check hands to a learner's function
    (a kit, a host's ``prepare``), and sealing a class would break ``isinstance``.
    """
    done: list[str] = []
    if getattr(module, "__acllab_sealed__", False):
        return done
    module.__acllab_sealed__ = True
    for name, value in list(vars(module).items()):
        if name.startswith("__") or not _sealable(value, module.__name__):
            continue
        setattr(module, name, _Sealed(value, f"{module.__name__}.{name}"))
        done.append(name)
    return done


# -- the snapshot of acllab's modules ----------------------------------------------------------

_CONTAINERS = (dict, list, set, bytearray)


def _freeze(value: Any) -> Any:
    """A comparable copy of a module-level container (one level deep) or of an array."""
    if isinstance(value, dict):
        return dict(value)
    if isinstance(value, list):
        return list(value)
    if isinstance(value, set):
        return set(value)
    if isinstance(value, bytearray):
        return bytes(value)
    if isinstance(value, np.ndarray):
        return (value.shape, value.dtype.str, zlib.crc32(np.ascontiguousarray(value).view(
            np.uint8).ravel()) if value.nbytes <= 1 << 24 else value.nbytes)
    return None


def _same(a: Any, b: Any, may_grow: bool = False) -> bool:
    """Whether two frozen containers hold the same objects (identity for each value).

    ``may_grow``: a private container (a cache, a registry) may gain entries; what it held
    must still be there, unchanged.
    """
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        if may_grow:
            return all(k in b and a[k] is b[k] for k in a)
        return a.keys() == b.keys() and all(a[k] is b[k] for k in a)
    if isinstance(a, list):
        if may_grow:
            return len(a) <= len(b) and all(x is y for x, y in zip(a, b, strict=False))
        return len(a) == len(b) and all(x is y for x, y in zip(a, b, strict=True))
    if isinstance(a, set) and may_grow:
        return a <= b
    return a == b


def _function_state(fn: types.FunctionType) -> tuple:
    """What a function runs: its code, defaults, keyword defaults and closure contents (each
    compared by identity in :func:`_same_state`, never by ``==``)."""
    cells = tuple(_cell(c) for c in fn.__closure__ or ())
    return (fn.__code__, fn.__defaults__, dict(fn.__kwdefaults__ or {}), cells)


def _cell(cell) -> Any:
    try:
        return cell.cell_contents
    except ValueError:          # an empty cell
        return _EMPTY


_EMPTY = object()


def _functions_of(value: Any) -> list[types.FunctionType]:
    """The plain functions behind a module or class attribute (methods, properties, sealed
    helpers, lru_cache wrappers)."""
    if isinstance(value, _Sealed):
        value = value._fn
    if isinstance(value, (staticmethod, classmethod)):
        value = value.__func__
    if isinstance(value, property):
        return [f for f in (value.fget, value.fset, value.fdel)
                if isinstance(f, types.FunctionType)]
    wrapped = getattr(value, "__wrapped__", None) if not isinstance(value, type) else None
    if isinstance(wrapped, types.FunctionType):
        return [wrapped]
    if isinstance(value, types.FunctionType):
        return [value]
    return []


def _acllab_modules() -> list[tuple[str, types.ModuleType]]:
    return sorted((name, m) for name, m in list(sys.modules.items())
                  if (name == "acllab" or name.startswith("acllab.")) and m is not None)


@dataclass
class Snapshot:
    """What acllab's modules hold right now; :meth:`changes` and :meth:`restore` compare."""

    modules: dict[str, tuple[types.ModuleType, dict]] = field(default_factory=dict)
    external: dict[str, tuple[types.ModuleType, dict]] = field(default_factory=dict)
    functions: dict[int, tuple[types.FunctionType, str, tuple]] = field(default_factory=dict)
    classes: dict[int, tuple[type, str, dict]] = field(default_factory=dict)
    containers: dict[tuple[str, str], tuple[Any, Any]] = field(default_factory=dict)

    @classmethod
    def take(cls) -> Snapshot:
        snap = cls()
        for name, module in _acllab_modules():
            namespace = dict(vars(module))
            snap.modules[name] = (module, namespace)
            for attr, value in namespace.items():
                where = f"{name}.{attr}"
                for fn in _functions_of(value):
                    if fn.__module__ == name or isinstance(value, _Sealed):
                        snap.functions.setdefault(id(fn), (fn, where, _function_state(fn)))
                if isinstance(value, type) and value.__module__ == name:
                    snap._class(value, where)
                elif (name, attr) not in _MUTABLE_NAMES and (
                        isinstance(value, _CONTAINERS) or isinstance(value, np.ndarray)):
                    snap.containers[(name, attr)] = (value, _freeze(value))
        for name in _EXTERNAL:
            module = sys.modules.get(name)
            if module is not None:
                snap.external[name] = (module, dict(vars(module)))
        return snap

    def _class(self, klass: type, where: str) -> None:
        if id(klass) in self.classes:
            return
        attrs = dict(vars(klass))
        self.classes[id(klass)] = (klass, where, attrs)
        for attr, value in attrs.items():
            for fn in _functions_of(value):
                self.functions.setdefault(id(fn), (fn, f"{where}.{attr}", _function_state(fn)))

    # -- comparing -----------------------------------------------------------------------------
    def changes(self) -> list[str]:
        """What changed since the snapshot, one plain sentence each (empty: nothing)."""
        out: list[str] = []
        current = dict(_acllab_modules())
        for name, (module, namespace) in self.modules.items():
            if current.get(name) is not module:
                out.append(f"the module {name} was replaced in sys.modules")
            out += _namespace_changes(name, namespace, vars(module), self.modules)
        for name, (module, namespace) in self.external.items():
            if sys.modules.get(name) is not module:
                out.append(f"the module {name} was replaced in sys.modules")
            out += [text for text in _namespace_changes(name, namespace, vars(module), {})
                    if "was added" not in text]
        for fn, where, state in self.functions.values():
            if not _same_state(_function_state(fn), state):
                out.append(f"the code of {where} was changed")
        for klass, where, attrs in self.classes.values():
            now = dict(vars(klass))
            for attr in sorted(set(attrs) | set(now)):
                if attr in ("__dict__", "__weakref__", "__doc__", "__abstractmethods__",
                            "_abc_impl"):
                    continue
                if attr not in now:
                    out.append(f"{where}.{attr} was deleted")
                elif attr not in attrs:
                    out.append(f"{where}.{attr} was added")
                elif now[attr] is not attrs[attr]:
                    out.append(f"{where}.{attr} was replaced")
        for (name, attr), (value, frozen) in self.containers.items():
            if not _same(frozen, _freeze(value), attr.startswith("_")):
                out.append(f"the contents of {name}.{attr} were changed")
        return out

    def restore(self) -> None:
        """Put back everything :meth:`changes` would report."""
        for name, (module, _namespace) in self.modules.items():
            if sys.modules.get(name) is not module:
                sys.modules[name] = module
        for name, (module, _namespace) in self.external.items():
            if sys.modules.get(name) is not module:
                sys.modules[name] = module
        for name, (module, namespace) in [*self.modules.items(), *self.external.items()]:
            live = vars(module)
            for attr in [a for a in live if a not in namespace
                         and not _new_submodule(name, a, live[a])
                         and name not in _EXTERNAL]:
                try:
                    delattr(module, attr)
                except (AttributeError, TypeError):
                    pass
            for attr, value in namespace.items():
                if (name, attr) in _MUTABLE_NAMES:
                    continue
                if live.get(attr, _EMPTY) is not value:
                    try:
                        setattr(module, attr, value)
                    except (AttributeError, TypeError):
                        pass
        for fn, _where, (code, defaults, kwdefaults, cells) in self.functions.values():
            try:
                if fn.__code__ is not code:
                    fn.__code__ = code
                fn.__defaults__ = defaults
                fn.__kwdefaults__ = kwdefaults or None
                for cell, value in zip(fn.__closure__ or (), cells, strict=False):
                    if value is not _EMPTY and _cell(cell) is not value:
                        cell.cell_contents = value
            except (AttributeError, TypeError, ValueError):
                pass
        for klass, _where, attrs in self.classes.values():
            now = dict(vars(klass))
            for attr in now:
                if attr not in attrs and attr not in ("__dict__", "__weakref__"):
                    try:
                        delattr(klass, attr)
                    except (AttributeError, TypeError):
                        pass
            for attr, value in attrs.items():
                if now.get(attr, _EMPTY) is not value and attr not in ("__dict__",
                                                                      "__weakref__"):
                    try:
                        setattr(klass, attr, value)
                    except (AttributeError, TypeError):
                        pass
        for (_name, attr), (value, frozen) in self.containers.items():
            if _same(frozen, _freeze(value), attr.startswith("_")):
                continue
            if isinstance(value, dict):
                value.clear()
                value.update(frozen)
            elif isinstance(value, list):
                value[:] = frozen
            elif isinstance(value, set):
                value.clear()
                value.update(frozen)
            elif isinstance(value, bytearray):
                value[:] = frozen
            # an ndarray changed in place cannot be put back from a digest; it is reported


def _same_state(a: tuple, b: tuple) -> bool:
    return (a[0] is b[0] and a[1] is b[1] and a[2].keys() == b[2].keys()
            and all(a[2][k] is b[2][k] for k in a[2]) and len(a[3]) == len(b[3])
            and all(x is y for x, y in zip(a[3], b[3], strict=True)))


def _new_submodule(parent: str, attr: str, value: Any) -> bool:
    """A submodule imported for the first time binds itself in its parent: that is no change."""
    return isinstance(value, types.ModuleType) and value.__name__ == f"{parent}.{attr}"


def _namespace_changes(name: str, before: dict, after: dict, modules: dict) -> list[str]:
    out = []
    for attr in sorted(set(before) | set(after)):
        if (name, attr) in _MUTABLE_NAMES or attr in ("__builtins__", "__loader__", "__spec__"):
            continue
        if attr not in after:
            out.append(f"{name}.{attr} was deleted")
        elif attr not in before:
            if not _new_submodule(name, attr, after[attr]):
                out.append(f"{name}.{attr} was added")
        elif after[attr] is not before[attr]:
            out.append(f"{name}.{attr} was replaced")
    return out


# -- the time limit ----------------------------------------------------------------------------

class _Flush(BaseException):
    """Raised asynchronously in a thread by the guard itself, to cancel a pending timeout."""


def _cancel_async_exc() -> None:
    """Cancel any asynchronous exception pending in this thread, and lower the flag it raised.

    ``PyThreadState_SetAsyncExc(id, NULL)`` cancels the exception but leaves the interpreter's
    "an asynchronous exception is pending" flag raised with nothing to deliver: every thread
    then runs its eval-breaker code at every check, and on CPython 3.11 a thread with a profile
    or trace function spins for ever at its next Python call. Only delivering an asynchronous
    exception lowers the flag, so this one replaces whatever is pending by :class:`_Flush` and
    takes it here (at the call's return, or at the loop's first jump back).
    """
    tid = ctypes.c_ulong(threading.get_ident())
    try:
        ctypes.pythonapi.PyThreadState_SetAsyncExc(tid, ctypes.py_object(_Flush))
        for _ in range(1_000_000):
            pass
    except _Flush:
        return
    ctypes.pythonapi.PyThreadState_SetAsyncExc(tid, None)  # never delivered: cancel it at least


class _Alarm:
    """Raise :class:`CaseTimeout` in the calling thread after ``seconds`` of wall-clock time."""

    def __init__(self, seconds: float | None):
        self.seconds = seconds
        self.fired = False
        self.armed = False
        self._old_handler: Any = None
        self._watchdog: threading.Thread | None = None
        self._stop = threading.Event()
        self._signal = (threading.current_thread() is threading.main_thread()
                        and hasattr(signal, "setitimer"))

    def _handler(self, signum, frame) -> None:
        if not self.armed:
            return
        signal.setitimer(signal.ITIMER_REAL, _REFIRE_S)
        if frame is not None and frame.f_code.co_filename == _THIS_FILE:
            return              # the function has let go: this is the guard's own code
        self.fired = True
        raise CaseTimeout(self.seconds)

    def _watch(self, thread_id: int) -> None:
        if self._stop.wait(self.seconds):
            return
        while self.armed and not self._stop.is_set():
            frame = sys._current_frames().get(thread_id)
            if frame is not None and frame.f_code.co_filename != _THIS_FILE:
                self.fired = True
                ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(thread_id),
                                                           ctypes.py_object(CaseTimeout))
            self._stop.wait(_REFIRE_S)

    def arm(self) -> None:
        if self.seconds is None or self.seconds <= 0 or not math.isfinite(self.seconds):
            return
        self.armed = True
        if self._signal:
            try:
                self._old_handler = signal.signal(signal.SIGALRM, self._handler)
                signal.setitimer(signal.ITIMER_REAL, self.seconds)
                return
            except (ValueError, OSError):
                self._signal = False
        self._watchdog = threading.Thread(target=self._watch, args=(threading.get_ident(),),
                                          daemon=True, name="acllab-check-watchdog")
        self._watchdog.start()

    def disarm(self) -> None:
        """Stop the limit. Idempotent; a call a late timeout interrupted is finished by the next.

        Off the main thread, nothing of the watchdog outlives this: it is joined, and a timeout
        it set but that was not yet delivered is cancelled with the interpreter's flag for it
        lowered (:func:`_cancel_async_exc`), so no later thread, nor the grader, sees either.
        """
        if self._signal:
            if not self.armed:
                return
            self.armed = False
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, self._old_handler or signal.SIG_DFL)
            return
        if self._watchdog is None:
            self.armed = False
            return
        self.armed = False          # the watchdog raises at most once more after this ...
        for _ in range(3):
            try:
                self._stop.set()
                self._watchdog.join()   # ... and, joined, cannot raise at all
                if self.fired:
                    _cancel_async_exc()
                self._watchdog = None
                return
            except CaseTimeout:         # set just before the watchdog stopped, delivered here
                self.fired = True


# -- one guarded call --------------------------------------------------------------------------

@dataclass
class Outcome:
    """What :func:`run_guarded` saw: the value or the exception, and what went wrong."""

    value: Any = None
    error: BaseException | None = None
    timed_out: bool = False
    refused: list[str] = field(default_factory=list)
    changes: list[str] = field(default_factory=list)


def run_guarded(fn: Callable, args: tuple, limit_s: float | None,
                trusted: bool = False) -> Outcome:
    """Call ``fn(*args)`` under the time limit, with the grader sealed and acllab watched.

    Every exception, BaseExceptions included, is returned in the outcome, never raised.
    ``trusted`` (the check's own reference code) skips the seal, not the limit.
    """
    out = Outcome()
    snapshot = Snapshot.take()
    alarm = _Alarm(limit_s)
    saved_depth, saved_refused = _STATE.depth, _STATE.refused
    try:
        _STATE.refused = []
        if not trusted:
            _STATE.depth = saved_depth + 1
        alarm.arm()
        try:
            out.value = fn(*args)
        finally:
            alarm.disarm()
    except BaseException as exc:        # noqa: B036 - the learner's: contained, never raised
        out.error = exc
    finally:
        alarm.disarm()
        out.timed_out = isinstance(out.error, CaseTimeout)
        state_changed = (_STATE.depth != (saved_depth + (0 if trusted else 1))
                         or not isinstance(_STATE.refused, list))
        out.refused = list(_STATE.refused) if isinstance(_STATE.refused, list) else []
        _STATE.depth, _STATE.refused = saved_depth, saved_refused
        out.changes = snapshot.changes()
        if state_changed:
            out.changes.append("the guard's own state (acllab.checks._guard._STATE) was changed")
        if out.changes:
            snapshot.restore()
    if alarm.fired and out.error is None:
        out.timed_out = True     # it swallowed the timeout and went on: still too long
    return out
