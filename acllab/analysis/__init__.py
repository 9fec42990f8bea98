"""The analysis layer: what happened, read from the runtime without changing it.

- ``trace``: one record per task; queries (utilisation, overlap, throughput); Chrome Trace
  Event export named like msprof.
- ``sanitizer``: happens-before analysis over the trace (races, use after free, event misuse,
  leaks).
- ``stepper``: the moments of a run, one after another, for StreamStepper.
- ``smi``: the ``npu-smi info`` view of the simulated cards.

It builds on the runtime core and never imports the facade's callers (the teaching layer,
the checks, the widgets). Each module loads on first use.
"""

import importlib

_SUBMODULES = ("trace", "sanitizer", "stepper", "smi")


def __getattr__(name: str):
    # PEP 562: a submodule loads when first named as an attribute (not cached here, so that
    # first use adds no name to this namespace; once imported it is an attribute anyway)
    if name in _SUBMODULES:
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_SUBMODULES))
