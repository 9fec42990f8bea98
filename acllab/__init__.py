"""acllab: a simulated Ascend NPU runtime that speaks the real pyACL API, for learning.

    from acllab import acl
    acl.init()
    acl.rt.set_device(0)
    ...

Time is virtual and deterministic; data really moves; every task lands in a trace.
"""

from __future__ import annotations

__version__ = "0.1.0"

from .errors import AclError, AclWarning  # noqa: E402
from .kernels import kernel  # noqa: E402
from .session import configure, current_runtime, host_work, reset  # noqa: E402

__all__ = ["acl", "AclError", "AclWarning", "configure", "current_runtime", "host_work", "kernel",
           "reset",
           "__version__"]


from . import acl  # noqa: E402
