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
  name bound in acllab's modules, the code, defaults and closures of acllab's functions, the
  attributes of its classes and the contents of its module-level containers. Whatever the
  function changed is reported in plain words and put back;
* so are the **modules the checks compute with**: ``builtins``, ``math`` and the like, and
  every loaded module of numpy (``np.allclose`` runs ``numpy._core.numeric``'s code, which
  reads that module's names): each one's entry in ``sys.modules``, its class, its names
  (replaced, deleted, or added where they hide a builtin), the code, defaults and closures of
  its Python functions and the attributes of its Python classes. That record is built once
  and shared by later snapshots while the modules stay as they were, so a snapshot costs a
  few identity comparisons run in C.

The guard only raises the bar: Python cannot keep code in one process from reaching anything
else in it, nor stop a function that catches BaseException in a loop (it is interrupted every
0.1 s, but may carry on: interrupt the kernel). Grades that must hold against a determined
learner come from ``acllab grade``, which runs each exercise's check in a fresh, sandboxed
process and kills it at its deadline.
"""

from __future__ import annotations

import builtins
import ctypes
import functools
import math
import signal
import sys
import threading
import types
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from itertools import chain
from operator import attrgetter, is_, methodcaller
from pathlib import Path
from typing import Any

import numpy as np
import numpy.random  # noqa: F401 - the checks draw their cases from it: watched from the start

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
# modules outside acllab that a check relies on (see _Foreign), builtins first
_EXTERNAL = ("builtins", "math", "numpy", "zlib", "operator", "functools", "itertools")
# packages outside acllab every loaded module of which is watched as well
_EXTERNAL_PACKAGES = ("numpy",)


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


# -- the modules outside acllab: one record, checked in identity passes run in C ----------------

# the builtins this section calls, bound once: a learner's function may rebind them in builtins,
# and the section must still see that, and put them back, with the real ones
_all, _len, _map, _tuple, _type, _zip, _enumerate = all, len, map, tuple, type, zip, enumerate
_dict, _list, _set, _sorted, _vars, _issubclass = dict, list, set, sorted, vars, issubclass
_object_setattr, _SYS_MODULES, _Exception = object.__setattr__, sys.modules, Exception

_MODULE_DICT = types.ModuleType.__dict__["__dict__"].__get__   # vars(), past any __getattribute__
_BUILTIN_NAMES = frozenset(_vars(builtins))      # an added global by one of these names hides it
_SKIPPED = ("__builtins__", "__loader__", "__spec__")
_CLASS_CACHES = frozenset({"__dict__", "__weakref__", "__doc__", "__abstractmethods__",
                           "_abc_impl", "__slotnames__"})
_HEAPTYPE, _IMMUTABLETYPE = 1 << 9, 1 << 8
_DISPATCHER = _type(np.isclose)                  # numpy's array-function dispatcher
_LRU_WRAPPER = _type(functools.lru_cache(None)(lambda: None))
_CODE, _DEFAULTS = attrgetter("__code__"), attrgetter("__defaults__")
_KWDEFAULTS, _BASES = attrgetter("__kwdefaults__"), attrgetter("__bases__")
_CONTENTS, _VALUES = attrgetter("cell_contents"), methodcaller("values")


def _external_modules() -> list[tuple[str, types.ModuleType]]:
    """The modules outside acllab that checks rely on, as loaded now.

    Those named in ``_EXTERNAL``, and every loaded module of the ``_EXTERNAL_PACKAGES``.
    """
    found = {name: _SYS_MODULES.get(name) for name in _EXTERNAL}
    found.update((name, module) for name, module in _list(_SYS_MODULES.items())
                 if name.partition(".")[0] in _EXTERNAL_PACKAGES)
    return [(name, module) for name, module in found.items()
            if _issubclass(_type(module), types.ModuleType)]


def _identical(before: dict, after) -> bool:
    """Whether ``after`` binds the same names to the very same objects, in the same order.

    A quick test, run in C: False only sends the caller to the careful comparison.
    """
    return (_len(before) == _len(after) and _all(_map(is_, before, after))
            and _all(_map(is_, before.values(), after.values())))


def _same_items(keys: tuple, values: tuple, lens: tuple, mappings: tuple) -> bool:
    """Whether the mappings hold, in order, the keys and values flattened by :func:`_flatten`.

    Each key and value is compared by identity, in C.
    """
    return (_tuple(_map(_len, mappings)) == lens
            and _all(_map(is_, keys, chain.from_iterable(mappings)))
            and _all(_map(is_, values, chain.from_iterable(_map(_VALUES, mappings)))))


def _behind(value: Any) -> list[types.FunctionType]:
    """The Python functions a module's or a class's value runs.

    They are found by exact type only, so that no method of a learner's object runs here.
    """
    kind = _type(value)
    if kind is staticmethod or kind is classmethod:
        value = value.__func__
        kind = _type(value)
    if kind is _DISPATCHER:
        value = value._implementation                # read-only: what np.isclose(...) runs
    elif kind is _LRU_WRAPPER:
        value = value.__dict__.get("__wrapped__")
    elif kind is property:
        return [f for f in (value.fget, value.fset, value.fdel) if _type(f) is types.FunctionType]
    return [value] if _type(value) is types.FunctionType else []


def _mutable_class(value: Any, names: frozenset[str]) -> bool:
    """A Python class (whose attributes can be set) defined in one of the modules ``names``."""
    if not _issubclass(_type(value), type) or not value.__flags__ & _HEAPTYPE or \
            value.__flags__ & _IMMUTABLETYPE:
        return False
    module = _vars(value).get("__module__")
    return _type(module) is str and module in names


@dataclass(frozen=True, eq=False)
class _Foreign:
    """The modules outside acllab that checks rely on, as they were at one moment.

    For each module: its entry in ``sys.modules``, its class and its names; for the Python
    functions behind those names (and behind the methods of its Python classes): their code,
    defaults, keyword defaults and closure cells; for those classes: their bases and
    attributes. Each is kept both as a copy (to say what changed, and put it back) and
    flattened into tuples that :meth:`unchanged` compares with the live objects by identity in
    a few passes run in C. The record is built once and shared by every snapshot taken while
    it still holds (:func:`_foreign`).
    """

    names: tuple[str, ...]
    modules: tuple[types.ModuleType, ...]
    kinds: tuple[type, ...]
    dicts: tuple[dict, ...]                 # each module's own namespace (the live one)
    namespaces: tuple[dict, ...]            # a copy of each
    flat: tuple[tuple, tuple, tuple]        # their keys, values and lengths, flattened
    functions: tuple[types.FunctionType, ...]
    where: tuple[str, ...]                  # the name each function was found under
    codes: tuple
    defaults: tuple
    kwdefaults: tuple                       # each function's keyword-defaults dict, or None
    keyworded: tuple[int, ...]              # the functions that have one ...
    kwcopies: tuple[dict, ...]              # ... a copy of each
    kwflat: tuple[tuple, tuple, tuple]      # ... and their items, flattened
    cells: tuple                            # the filled closure cells of the functions ...
    cell_of: tuple[int, ...]                # ... the function of each
    contents: tuple                         # ... and what each held
    classes: tuple[type, ...]
    class_where: tuple[str, ...]
    bases: tuple[tuple, ...]
    attrs: tuple[dict, ...]                 # a copy of each class's namespace
    class_flat: tuple[tuple, tuple, tuple]

    @classmethod
    def build(cls, loaded: list[tuple[str, types.ModuleType]]) -> _Foreign:
        """The record of the modules ``loaded`` ((name, module) pairs), as they are now."""
        names = frozenset(name for name, _module in loaded)
        modules = _tuple(module for _name, module in loaded)
        dicts = _tuple(_map(_MODULE_DICT, modules))
        found: dict[types.FunctionType, str] = {}
        classes: dict[type, str] = {}
        for (name, _module), namespace in _zip(loaded, dicts, strict=True):
            for attr, value in _list(namespace.items()):
                for fn in _behind(value):
                    found.setdefault(fn, f"{name}.{attr}")
                if _mutable_class(value, names) and value not in classes:
                    classes[value] = f"{name}.{attr}"
                    for method, member in _vars(value).items():
                        for fn in _behind(member):
                            found.setdefault(fn, f"{name}.{attr}.{method}")
        functions = _tuple(found)
        kwdefaults = _tuple(_map(_KWDEFAULTS, functions))
        keyworded = _tuple(i for i, d in _enumerate(kwdefaults) if d is not None)
        cells = [(cell, i) for i, fn in _enumerate(functions) for cell in fn.__closure__ or ()
                 if _cell(cell) is not _EMPTY]
        klasses = _tuple(classes)
        return cls(
            _tuple(name for name, _module in loaded), modules, _tuple(_map(_type, modules)), dicts,
            _tuple(_map(_dict, dicts)), _flatten(dicts), functions, _tuple(found.values()),
            _tuple(_map(_CODE, functions)), _tuple(_map(_DEFAULTS, functions)), kwdefaults,
            keyworded, _tuple(_dict(kwdefaults[i]) for i in keyworded),
            _flatten(_tuple(kwdefaults[i] for i in keyworded)),
            _tuple(cell for cell, _i in cells), _tuple(i for _cell, i in cells),
            _tuple(_CONTENTS(cell) for cell, _i in cells), klasses, _tuple(classes.values()),
            _tuple(_map(_BASES, klasses)), _tuple(_dict(_vars(k)) for k in klasses),
            _flatten(_tuple(_map(_vars, klasses))))

    def holds(self, loaded: list[tuple[str, types.ModuleType]]) -> bool:
        """Whether this record is of the modules ``loaded``, and all of it still holds."""
        return (_len(loaded) == _len(self.modules)
                and _all(_map(is_, self.modules, (module for _name, module in loaded)))
                and self.names == _tuple(name for name, _module in loaded) and self.unchanged())

    def unchanged(self) -> bool:
        """Whether nothing changed since the record was built (False: see :meth:`changes`)."""
        try:
            return (_all(_map(is_, self.modules, _map(_SYS_MODULES.get, self.names)))
                    and _all(_map(is_, self.kinds, _map(_type, self.modules)))
                    and _same_items(*self.flat, self.dicts)
                    and _all(_map(is_, self.codes, _map(_CODE, self.functions)))
                    and _all(_map(is_, self.defaults, _map(_DEFAULTS, self.functions)))
                    and _all(_map(is_, self.kwdefaults, _map(_KWDEFAULTS, self.functions)))
                    and _same_items(*self.kwflat, _tuple(self.kwdefaults[i]
                                                        for i in self.keyworded))
                    and _all(_map(is_, self.contents, _map(_CONTENTS, self.cells)))
                    and _all(_map(is_, self.bases, _map(_BASES, self.classes)))
                    and _same_items(*self.class_flat, _tuple(_map(_vars, self.classes))))
        except ValueError:                  # a closure cell emptied
            return False

    # -- what changed, and putting it back (only when :meth:`unchanged` says so) ---------------
    def _changed_functions(self) -> list[int]:
        """The indices of the functions whose code, defaults or closure changed."""
        changed = {i for i, fn in _enumerate(self.functions)
                   if fn.__code__ is not self.codes[i] or fn.__defaults__ is not self.defaults[i]
                   or fn.__kwdefaults__ is not self.kwdefaults[i]}
        changed.update(i for i, saved in _zip(self.keyworded, self.kwcopies, strict=True)
                       if not _identical(saved, self.kwdefaults[i]))
        changed.update(i for cell, i, value in _zip(self.cells, self.cell_of, self.contents,
                                                   strict=True) if _cell(cell) is not value)
        return _sorted(changed)

    def changes(self) -> list[str]:
        """What changed since the record was built, one plain sentence each."""
        if self.unchanged():
            return []
        out = []
        for name, module, kind, before, after in _zip(self.names, self.modules, self.kinds,
                                                     self.namespaces, self.dicts, strict=True):
            if _SYS_MODULES.get(name) is not module:
                out.append(f"the module {name} was replaced in sys.modules")
            if _type(module) is not kind:
                out.append(f"the class of the module {name} was changed")
            if _identical(before, after):
                continue
            for attr, value in before.items():
                now = after.get(attr, _EMPTY)
                if attr in _SKIPPED or now is value:
                    continue
                out.append(f"{name}.{attr} was " + ("deleted" if now is _EMPTY else "replaced"))
            if name != "builtins":
                out += [f"{name}.{attr} was added, hiding the builtin {attr}"
                        for attr in _hiding(before, after)]
        out += [f"the code of {self.where[i]} was changed" for i in self._changed_functions()]
        for klass, where, bases, attrs in _zip(self.classes, self.class_where, self.bases,
                                              self.attrs, strict=True):
            if klass.__bases__ is not bases:
                out.append(f"the bases of {where} were changed")
            now = _vars(klass)
            if not _identical(attrs, now):
                out += _class_changes(where, attrs, now)
        return out

    def restore(self) -> None:
        """Put back everything :meth:`changes` would report."""
        if self.unchanged():
            return
        for name, module, kind, before, live in _zip(self.names, self.modules, self.kinds,
                                                    self.namespaces, self.dicts, strict=True):
            if _SYS_MODULES.get(name) is not module:
                _SYS_MODULES[name] = module
            if _type(module) is not kind:
                try:
                    _object_setattr(module, "__class__", kind)
                except TypeError:
                    pass
            if _identical(before, live):
                continue
            if name != "builtins":
                for attr in _hiding(before, live):
                    del live[attr]
            for attr, value in before.items():
                if attr not in _SKIPPED and live.get(attr, _EMPTY) is not value:
                    live[attr] = value
        contents = _dict(_zip(self.keyworded, self.kwcopies, strict=True))
        for i in self._changed_functions():
            fn, kwdefaults = self.functions[i], self.kwdefaults[i]
            try:
                if fn.__code__ is not self.codes[i]:
                    fn.__code__ = self.codes[i]
                fn.__defaults__ = self.defaults[i]
                fn.__kwdefaults__ = kwdefaults
                if kwdefaults is not None and not _identical(contents[i], kwdefaults):
                    kwdefaults.clear()
                    kwdefaults.update(contents[i])
            except (AttributeError, TypeError, ValueError, RuntimeError):
                pass
        for cell, value in _zip(self.cells, self.contents, strict=True):
            if _cell(cell) is not value:
                cell.cell_contents = value
        for klass, bases, attrs in _zip(self.classes, self.bases, self.attrs, strict=True):
            try:
                if klass.__bases__ is not bases:
                    klass.__bases__ = bases
                now = _dict(_vars(klass))
                for attr in now:
                    if attr not in attrs and attr not in _CLASS_CACHES:
                        delattr(klass, attr)
                for attr, value in attrs.items():
                    if attr not in _CLASS_CACHES and now.get(attr, _EMPTY) is not value:
                        setattr(klass, attr, value)
            except (AttributeError, TypeError):
                pass


def _class_changes(where: str, attrs: dict, now) -> list[str]:
    """How a class's attributes ``now`` differ from ``attrs``, its own dict when the guard
    looked (caches Python fills in itself aside), one line each; builtins as imported."""
    out: list[str] = []
    for attr in _sorted(_set(attrs) | {a for a in _list(now) if _type(a) is str}):
        if attr in _CLASS_CACHES:
            continue
        if attr not in now:
            out.append(f"{where}.{attr} was deleted")
        elif attr not in attrs:
            out.append(f"{where}.{attr} was added")
        elif now[attr] is not attrs[attr]:
            out.append(f"{where}.{attr} was replaced")
    return out


def _flatten(mappings: tuple) -> tuple[tuple, tuple, tuple]:
    """The keys, the values and the lengths of ``mappings``, each flattened into one tuple."""
    return (_tuple(chain.from_iterable(mappings)),
            _tuple(chain.from_iterable(_map(_VALUES, mappings))), _tuple(_map(_len, mappings)))


def _hiding(before: dict, after: dict) -> list[str]:
    """The names added to a module that hide a builtin from its functions."""
    return [attr for attr in _list(after) if _type(attr) is str and attr in _BUILTIN_NAMES
            and attr not in before]


def _foreign() -> _Foreign:
    """The record of the modules outside acllab as they are now: the last one, if it holds.

    A record built while a learner's function runs (a snapshot inside the call) is not kept,
    so that the kept one changes only between guarded calls.
    """
    loaded = _external_modules()
    last = _FOREIGN[0]
    if last is not None and last.holds(loaded):
        return last
    record = _Foreign.build(loaded)
    if _STATE.depth == 0:
        _FOREIGN[0] = record
    return record


_FOREIGN: list[_Foreign | None] = [None]


@dataclass
class Snapshot:
    """What acllab's modules hold right now; :meth:`changes` and :meth:`restore` compare."""

    modules: dict[str, tuple[types.ModuleType, dict]] = field(default_factory=dict)
    external: _Foreign | None = None
    functions: dict[int, tuple[types.FunctionType, str, tuple]] = field(default_factory=dict)
    classes: dict[int, tuple[type, str, dict]] = field(default_factory=dict)
    containers: dict[tuple[str, str], tuple[Any, Any]] = field(default_factory=dict)

    @classmethod
    def take(cls) -> Snapshot:
        snap = cls()
        snap.external = _foreign()      # first: it may renew _FOREIGN, a container noted below
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
        # first the modules outside acllab, builtins among them: that comparison calls none
        # of the builtins a learner's function may have rebound ...
        out: list[str] = [] if self.external is None else self.external.changes()
        try:
            return out + self._acllab_changes()
        except _Exception:
            if not out:
                raise
        # ... which the comparison of acllab's own modules does call
        return [*out, "acllab's own modules could not be compared with those builtins changed"]

    def _acllab_changes(self) -> list[str]:
        """What changed in acllab's own modules, functions, classes and containers."""
        out: list[str] = []
        current = dict(_acllab_modules())
        for name, (module, namespace) in self.modules.items():
            if current.get(name) is not module:
                out.append(f"the module {name} was replaced in sys.modules")
            if not _identical(namespace, vars(module)):     # the usual case, checked in C
                out += _namespace_changes(name, namespace, vars(module), self.modules)
        for fn, where, state in self.functions.values():
            if not _same_state(_function_state(fn), state):
                out.append(f"the code of {where} was changed")
        for klass, where, attrs in self.classes.values():
            out += _class_changes(where, attrs, _vars(klass))
        for (name, attr), (value, frozen) in self.containers.items():
            if not _same(frozen, _freeze(value), attr.startswith("_")):
                out.append(f"the contents of {name}.{attr} were changed")
        return out

    def restore(self) -> None:
        """Put back everything :meth:`changes` would report."""
        if self.external is not None:       # first: builtins are used below
            self.external.restore()
        for name, (module, _namespace) in self.modules.items():
            if sys.modules.get(name) is not module:
                sys.modules[name] = module
        for name, (module, namespace) in self.modules.items():
            live = vars(module)
            for attr in [a for a in live if a not in namespace
                         and not _new_submodule(name, a, live[a])]:
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
        depth, refused = _STATE.depth, _STATE.refused
        _STATE.depth, _STATE.refused = saved_depth, saved_refused
        out.changes = snapshot.changes()    # first: the code below calls builtins, which
        if out.changes:                     # the function may have rebound
            snapshot.restore()
        out.timed_out = isinstance(out.error, CaseTimeout)
        if depth != saved_depth + (0 if trusted else 1) or not isinstance(refused, list):
            out.changes.append("the guard's own state (acllab.checks._guard._STATE) was changed")
        out.refused = list(refused) if isinstance(refused, list) else []
    if alarm.fired and out.error is None:
        out.timed_out = True     # it swallowed the timeout and went on: still too long
    return out
