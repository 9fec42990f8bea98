"""The teaching layer: experiments built on the pyACL facade.

- ``scenarios``: the seed's ResNet-50 service loops and its S1-S9 table.
- ``pipeline``: the what-if pipelines behind PipelineExplorer.
- ``deploy``: deployment costing (dynamic-shape strategies, memory per option).

The autograded checks (``acllab.checks``) belong to this layer too; they keep their own
package so that every lesson imports them by the same short name. Each module loads on first
use.
"""

import importlib

_SUBMODULES = ("scenarios", "pipeline", "deploy")


def __getattr__(name: str):
    # PEP 562: a submodule loads when first named as an attribute (not cached here, so that
    # first use adds no name to this namespace; once imported it is an attribute anyway)
    if name in _SUBMODULES:
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_SUBMODULES))
