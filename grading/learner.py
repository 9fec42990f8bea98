"""The learner's side of grading: run the notebook's cells, then answer the check's calls.

    python -I .../grading/learner.py PACKAGE_ROOT...      (the job arrives as JSON on stdin)

This process runs in the sandbox (:mod:`grading.sandbox`) and holds nothing the grade depends
on: the simulated device and the check run in the grader's device process
(:mod:`grading.device`), which this one reaches only through the device protocol
(:mod:`acllab.device`) on the socket it inherits (``job["fd"]``).

1. read the job (the learner's cells, the function's name, the limits) from stdin, lower this
   process's resource limits, connect to the device (``acllab.device.connect``);
2. run the cells, each in turn, in one namespace, with a time limit and their exceptions
   contained, as :func:`grading.worker.run_cells` does (``check``, ``summary``, widgets and
   IPython are inert stand-ins; their demonstrations use this process's own in-process
   runtime, which grades nothing); each cell's start and end are progress requests to the
   device, which the grader uses to stop a cell that runs past its time;
3. point every name the cells bound to the local pyACL (``acl``, ``acl.rt``... and
   ``acllab.host_work``) at the device's, and tell the device what the cells left
   (``learner.ready``: the problems of each cell, whether the function is defined); that
   request is answered only when the check is over, and meanwhile this process serves the
   check's ``learner.call`` requests: it calls the learner's function with the check's
   arguments (``acl`` is the device's pyACL) and sends back its value as plain data;
4. leave with ``os._exit``.

Whatever the learner's code does here (threads, gc callbacks, finalizers, signal handlers,
patching acllab, lying return values) can change only what this process sends: the device
decodes plain values and runs none of this process's code.
"""

from __future__ import annotations

import sys

if __name__ == "__main__":          # run as a script with -I: import only from the roots named
    sys.path[0:1] = sys.argv[1:]

import builtins  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import socket  # noqa: E402
import types  # noqa: E402


def _rebind(namespace: dict, client) -> None:
    """Point the local pyACL the cells imported at the device's pyACL."""
    import acllab
    import acllab.acl as local

    pairs: dict[int, object] = {id(local): client.acl}
    for sub in ("rt", "util", "mdl", "media", "op"):
        mod = getattr(local, sub, None)
        if mod is not None and sub in client.acl.__dict__:
            pairs[id(mod)] = client.acl.__dict__[sub]
            for name in dir(mod):
                fn = getattr(mod, name)
                remote = client.acl.__dict__[sub].__dict__.get(name)
                if callable(fn) and remote is not None and not isinstance(fn, type):
                    pairs[id(fn)] = remote
    for name in dir(local):
        fn = getattr(local, name)
        remote = client.acl.__dict__.get(name)
        if callable(fn) and remote is not None and not isinstance(fn, (type,
                                                                       types.ModuleType)):
            pairs[id(fn)] = remote
    pairs[id(acllab.host_work)] = client.host_work
    for key, value in list(namespace.items()):
        swap = pairs.get(id(value))
        if swap is not None:
            namespace[key] = swap
    acllab.acl = client.acl
    acllab.host_work = client.host_work
    sys.modules["acllab"].__dict__["acl"] = client.acl
    import acllab.session as session

    session.host_work = client.host_work


class _LearnerChecks:
    """Serves ``acllab.checks`` from the learner-facing folder (grading.sandbox's
    learner_checks) where no sandbox shows that folder in its place: the public helpers,
    never the checks' oracles or cases."""

    def __init__(self, folder: str) -> None:
        self.folder = folder

    def find_spec(self, name, path=None, target=None):
        import importlib.util

        if name != "acllab.checks" and not name.startswith("acllab.checks."):
            return None
        leaf = "__init__" if name == "acllab.checks" else name.rsplit(".", 1)[1]
        file = os.path.join(self.folder, f"{leaf}.py")
        if "." in name[len("acllab.checks."):] or not os.path.isfile(file):
            raise ModuleNotFoundError(f"No module named {name!r} (not while grading: the "
                                      "checks run on the grader's side)", name=name)
        return importlib.util.spec_from_file_location(
            name, file, submodule_search_locations=[self.folder] if leaf == "__init__"
            else None)


class GraderOnly(PermissionError):
    """The learner's function called a helper that computes the exercise's answer."""


def _refusals() -> types.ModuleType:
    """What stands in for acllab.checks._guard here: the teaching layer's answer helpers
    (``best_deployment``, ``compare``) ask it whether learner code is calling them while
    the check runs the learner's function, and are refused then."""
    import acllab

    module = types.ModuleType("acllab.checks._guard")
    module.depth = 0
    home = os.path.dirname(os.path.abspath(acllab.__file__))

    def refuse_if_learner(qualname: str) -> None:
        frame = sys._getframe(2)
        while frame is not None and frame.f_code.co_filename.endswith("contextlib.py"):
            frame = frame.f_back
        mine = frame is not None and not os.path.abspath(
            frame.f_code.co_filename).startswith(home)
        if module.depth > 0 and mine:
            raise GraderOnly(f"{qualname} belongs to the grader: a check gives no credit for "
                             "answers the grader computes; compute it in your own code")

    module.refuse_if_learner = refuse_if_learner
    return module


_NOT_THE_DEVICE = ("acllab.{name}() works on this process's own simulated card, not on the "
                   "device the check gave your function (its acl): what it does there cannot be "
                   "graded; use the acl you were given")


def _guard_session(refusals) -> None:
    """acllab's runtime-level calls (configure, reset, override, current_runtime...) refuse
    the learner's function while the check calls it: they would work on this process's own
    runtime, not the device the check gave it (as in process, where the check refuses them)."""
    import acllab
    import acllab.session as session

    home = os.path.dirname(os.path.abspath(acllab.__file__))
    for name in ("configure", "reset", "restore_defaults", "override", "current_runtime"):
        original = getattr(session, name, None)
        if original is None:
            continue

        def guarded(*args, _original=original, _name=name, **kwargs):
            caller = sys._getframe(1).f_code.co_filename
            if refusals.depth > 0 and not os.path.abspath(caller).startswith(home):
                raise GraderOnly(_NOT_THE_DEVICE.format(name=_name))
            return _original(*args, **kwargs)

        guarded.__name__ = name
        setattr(session, name, guarded)
        if getattr(acllab, name, None) is original or name in ("configure", "reset",
                                                               "restore_defaults",
                                                               "current_runtime"):
            setattr(acllab, name, guarded)


def _under_check(fn, refusals):
    """``fn`` as the check calls it: the grader's answer helpers refuse it meanwhile."""

    def call(*args, **kwargs):
        refusals.depth += 1
        try:
            return fn(*args, **kwargs)
        finally:
            refusals.depth -= 1

    call.__name__ = getattr(fn, "__name__", "function")
    return call


def main() -> None:
    job = json.loads(sys.stdin.buffer.read())
    sys.stdin.close()
    if job.get("overlay"):
        sys.meta_path.insert(0, _LearnerChecks(job["overlay"]))
    from grading import worker

    worker._limit_resources(job)
    import acllab  # noqa: F401 - the in-process runtime the cells' demonstrations use
    from acllab.device import client as device_client

    sock = socket.socket(fileno=int(job["fd"]))
    client = device_client.connect(sock)
    sys.meta_path[0:0] = [worker._RefuseFinder(), worker._InertFinder()]
    for name in [m for m in sys.modules if m.split(".")[0] in worker._InertFinder.prefixes]:
        del sys.modules[name]
    import acllab.checks as checks

    checks.check = checks.summary = worker._Inert()
    sys.breakpointhook = worker._no_breakpoint      # no one is there to use a debugger
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    os.dup2(devnull, 2)
    namespace = {"__name__": "__main__", "__builtins__": builtins, "display": worker._Inert(),
                 "get_ipython": worker._Inert()}
    report = worker.Report()

    def say(text: str) -> None:
        try:
            client.request("learner.progress", [text])
        except Exception:  # noqa: BLE001 - the device went away: the grader sees it
            os._exit(3)

    cells = job["cells"]
    errors = worker.run_cells(cells, namespace, float(job["cell_s"]), float(job["cells_s"]),
                              say, report)
    say("check")
    function = namespace.get(job["function"])
    missing = None
    if not callable(function):
        missing = list(worker._missing(job["function"], function, cells, report.problems))
    else:
        refusals = sys.modules["acllab.checks._guard"] = _refusals()
        client.functions[job["function"]] = _under_check(function, refusals)
        _guard_session(refusals)
    _rebind(namespace, client)
    try:
        client.request("learner.ready", [{
            "cell_errors": errors, "missing": missing, "stopped": {
                str(k): v for k, v in report.stopped.items()},
            "starved": list(report.starved)}])
    except BaseException:  # noqa: B036 - the device ended the session: nothing is left to do
        pass
    os._exit(0)


if __name__ == "__main__":
    main()
