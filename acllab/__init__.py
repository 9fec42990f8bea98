"""acllab: a simulated Ascend NPU runtime that speaks the real pyACL API, for learning.

    from acllab import acl
    acl.init()
    acl.rt.set_device(0)
    ...

Time is virtual and deterministic; data really moves; every task lands in a trace.

The package face is lazy (PEP 562): ``import acllab.engine`` loads the engine and nothing
else of acllab; ``acllab.acl``, ``acllab.kernel``, ``acllab.current_runtime`` ... load their
modules on first use, and so does any submodule named as an attribute (``acllab.trace``).
"""

from __future__ import annotations

import importlib

from ._version import __version__

__all__ = ["acl", "AclError", "AclWarning", "configure", "current_runtime", "host_work", "kernel",
           "reset",
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
