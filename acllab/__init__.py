"""acllab: a simulated Ascend NPU runtime that speaks the real pyACL API, for learning.

    from acllab import acl
    acl.init()
    acl.rt.set_device(0)
    ...

Time is virtual and deterministic; data really moves; every task lands in a trace.

The package face is lazy (PEP 562): ``import acllab.engine`` loads the engine and nothing
else of acllab; ``acllab.acl``, ``acllab.kernel``, ``acllab.current_runtime`` ... load their
modules on first use, and so does any submodule named as an attribute (``acllab.memory``).

The layers are folders: the runtime core at the top level (engine, hardware, memory, streams,
events, callbacks, transfers, kernels, runtime, session), the pyACL facade in ``acl/``, the
models in ``model/``, the analysis layer in ``analysis/`` (trace, sanitizer, stepper, smi)
and the teaching layer in ``teaching/`` (scenarios, pipeline, deploy) and ``checks/``. The
short names these modules had before the folders (``acllab.trace``, ``acllab.pipeline``,
``acllab.model.deploy`` ...) still import, as the same module objects.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys

from ._version import __version__

__all__ = ["acl", "AclError", "AclWarning", "configure", "current_runtime", "host_work", "kernel",
           "reset", "restore_defaults",
           "__version__"]

# public name -> (module, attribute; None: the module itself)
_LAZY = {
    "acl": ("acl", None),
    "AclError": ("errors", "AclError"),
    "AclWarning": ("errors", "AclWarning"),
    "kernel": ("kernels", "kernel"),
    "configure": ("session", "configure"),
    "current_runtime": ("session", "current_runtime"),
    "host_work": ("session", "host_work"),
    "reset": ("session", "reset"),
    "restore_defaults": ("session", "restore_defaults"),
}


def __getattr__(name: str):
    # not cached in this module's namespace: the checks compare acllab's namespaces before
    # and after a learner's function, so first use must not add names
    # (a submodule, once imported, is an attribute anyway, as in any package)
    module, attr = _LAZY.get(name, (name, None))
    if name.startswith("__") or not name.isidentifier():
        raise AttributeError(f"module 'acllab' has no attribute {name!r}")
    try:
        mod = importlib.import_module(f"{__name__}.{module}")
    except ModuleNotFoundError as exc:
        if exc.name != f"{__name__}.{module}":
            raise
        raise AttributeError(f"module 'acllab' has no attribute {name!r}") from None
    return mod if attr is None else getattr(mod, attr)


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


# the short names of modules that moved into the layer folders: each is the same module object
# as its new name (one set of globals), imported on first use
_MOVED = {
    "acllab.trace": "acllab.analysis.trace",
    "acllab.sanitizer": "acllab.analysis.sanitizer",
    "acllab.stepper": "acllab.analysis.stepper",
    "acllab.smi": "acllab.analysis.smi",
    "acllab.scenarios": "acllab.teaching.scenarios",
    "acllab.pipeline": "acllab.teaching.pipeline",
    "acllab.model.deploy": "acllab.teaching.deploy",
}


class _MovedLoader(importlib.abc.Loader):
    def __init__(self, target: str) -> None:
        self.target = target

    def create_module(self, spec):
        module = importlib.import_module(self.target)
        self.own_spec = module.__spec__
        return module

    def exec_module(self, module) -> None:
        # the target ran when it was imported under its own name; the import system has just
        # given it this alias's spec, so it gets its own back (repr, reload and pickle use it)
        module.__spec__ = self.own_spec


class _MovedFinder(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname, path=None, target=None):
        new = _MOVED.get(fullname)
        if new is None:
            return None
        return importlib.util.spec_from_loader(fullname, _MovedLoader(new))


if not any(isinstance(f, _MovedFinder) for f in sys.meta_path):
    sys.meta_path.insert(0, _MovedFinder())
