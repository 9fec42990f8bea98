"""The ``acllab`` command.

    acllab profile [--out FILE] [--device ascend910b] [--sanitize] SCRIPT.py [ARGS...]
        run an unmodified pyACL script on the simulated device (its ``import acl`` resolves to
        acllab), print a summary, and write the trace as Chrome Trace Event JSON (Perfetto);
        with --sanitize, also print the sanitizer's findings and exit 1 if there are any.
        SCRIPT may also be a native program (C or C++ built against ``acllab env``'s
        headers and libascendcl.so): it runs on the same device, with the same summary
    acllab env
        shell exports for acllab's AscendCL install tree (``eval "$(acllab env)"``): DDK_PATH,
        INSTALL_DIR, NPU_HOST_LIB, CPU_ARCH, LD_LIBRARY_PATH... (libascendcl.so is built
        from the C source in acllab.native on first use, with the system's C compiler)
    acllab atc --model zoo:resnet50 --output resnet50 --input_shape "data:32,3,224,224" ...
        compile a graph into an .om file, with atc's flags (run ``acllab atc --help``)
    acllab atc --singleop ops.json --soc_version Ascend310 --output op_models
        compile each op of a single-op config into an op model (for acl.op.set_model_dir)
    acllab seed [--batches N]
        recompute the seed's figures S1-S9 (ResNet-50, batch 32) from fresh simulations
    acllab smi [--device NAME] [--devices N]
        an ``npu-smi info``-like view of the simulated devices
    acllab devices
        the device profiles, their figures and sources
    acllab grade SUBMISSIONS... --out DIR [--jobs N] [--resume] [--scheduler ADDRESS] ...
        grade a class's notebooks, each exercise in its own sandboxed process (the grading
        package, imported only for this command: run ``acllab grade --help``)
"""

from __future__ import annotations

import argparse
import gc
import os
import sys
import traceback
import types
from pathlib import Path

__all__ = ["main", "run_script"]


def _install_acl_alias() -> dict:
    """Make ``import acl`` (and acl.rt, acl.util) resolve to acllab's facade."""
    from . import acl

    saved = {name: sys.modules.get(name)
             for name in ("acl", "acl.rt", "acl.util", "acl.mdl", "acl.op")}
    sys.modules["acl"] = acl
    sys.modules["acl.rt"] = acl.rt
    sys.modules["acl.util"] = acl.util
    sys.modules["acl.mdl"] = acl.mdl
    sys.modules["acl.op"] = acl.op
    return saved


def _restore(saved: dict) -> None:
    for name, module in saved.items():
        if module is None:
            sys.modules.pop(name, None)
        else:
            sys.modules[name] = module


def _teardown(namespace: dict) -> None:
    """Drop a finished script's globals and collect them, so ``__del__`` teardown runs now.

    Objects go first, newest name first, while the modules, functions and classes they use
    are still bound (a ``__del__`` that calls ``check_ret(...)`` and ``acl.finalize()`` needs
    them); then everything else. A ``gc.collect`` after each step frees reference cycles
    (functions hold their module's globals). An object a running thread still uses (a bound
    method started by ``acl.util.start_thread``) stays alive, as at interpreter exit.
    """
    keep = (types.ModuleType, types.FunctionType, type)
    for name in reversed(list(namespace)):
        if not name.startswith("__") and not isinstance(namespace[name], keep):
            del namespace[name]
    gc.collect()
    namespace.clear()
    gc.collect()


def run_script(path: str, args: list[str]) -> int:
    """Run ``path`` as ``__main__`` with ``import acl`` bound to acllab; return its exit code.

    When the script ends, its globals are dropped and collected (:func:`_teardown`), so a
    teardown in ``__del__`` (as in the samples' ``acl_net.py``) runs inside the profile, as
    it would at interpreter exit.
    """
    saved_argv, saved_path = sys.argv, list(sys.path)
    saved_main = sys.modules.get("__main__")
    saved_modules = _install_acl_alias()
    sys.argv = [path, *args]
    sys.path.insert(0, str(Path(path).resolve().parent))
    module = types.ModuleType("__main__")
    module.__dict__.update(__file__=path, __builtins__=__builtins__, __cached__=None,
                           __loader__=None, __package__=None, __spec__=None)
    code = 0
    try:
        source = Path(path).read_bytes()
        sys.modules["__main__"] = module
        exec(compile(source, path, "exec"), module.__dict__)
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except Exception:
        traceback.print_exc()
        code = 1
    finally:
        try:
            _teardown(module.__dict__)
        finally:
            if saved_main is not None:
                sys.modules["__main__"] = saved_main
            sys.argv, sys.path[:] = saved_argv, saved_path
            _restore(saved_modules)
    return code


def _cmd_profile(ns: argparse.Namespace) -> int:
    from . import session
    from .analysis import trace

    if not os.path.isfile(ns.script):
        print(f"acllab profile: no such script: {ns.script}", file=sys.stderr)
        return 2
    session.configure(ns.device) if ns.device else session.reset()
    native = _is_native(ns.script)
    if native:
        from . import native as _native
        from .native.run import run_program

        try:
            code = run_program(ns.script, ns.args)
        except _native.NativeBuildError as exc:
            print(exc, file=sys.stderr)
            return 2
    else:
        code = run_script(ns.script, ns.args)
    runtime = session.current_runtime()
    out = ns.out or f"{Path(ns.script).stem}.trace.json"
    print()
    print(f"== acllab profile: {ns.script} (exit code {code}) ==")
    print(trace.summary(runtime))
    trace.write_chrome_trace(runtime, out)
    print(f"trace written to {out} (open it in https://ui.perfetto.dev or chrome://tracing)")
    if ns.sanitize:
        from .analysis import sanitizer

        findings = sanitizer.analyze(runtime)
        print()
        print(sanitizer.report(runtime))
        if findings and code == 0:
            code = 1
    return code


def _is_native(path: str) -> bool:
    from .native.run import is_native

    return is_native(path)


def _cmd_env(ns: argparse.Namespace) -> int:
    from . import native

    try:
        sys.stdout.write(native.env_exports())
    except native.NativeBuildError as exc:
        print(exc, file=sys.stderr)
        return 2
    return 0


def _cmd_smi(ns: argparse.Namespace) -> int:
    from . import session
    from .analysis import smi

    runtime = session.configure(ns.device, device_count=ns.devices)
    print(smi.smi_text(runtime, all_devices=True))
    return 0


def _cmd_seed(ns: argparse.Namespace) -> int:
    from .teaching import scenarios

    print(f"The seed's table, recomputed: ResNet-50 int8 on {ns.device or 'ascend310'}, batch "
          f"32, service loops of {ns.batches} batches.")
    rows = scenarios.seed_table(batches=ns.batches)
    print(scenarios.format_table(rows))
    bad = [r["id"] for r in rows if not r["ok"]]
    print("every figure is inside its band" if not bad else f"outside the band: {bad}")
    return 1 if bad else 0


def _cmd_devices(ns: argparse.Namespace) -> int:
    from .hardware import PROFILES

    for p in PROFILES.values():
        print(f"{p.name}: {p.soc_name}, {p.description}")
        print(f"  follows CANN {p.cann_release} (AscendCL {'.'.join(map(str, p.acl_version))}); "
              "release differences: docs/CANN_RELEASES.md")
        print(f"  {p.device_count} devices, {p.ai_cores} AI cores, {p.vector_cores} vector cores, "
              f"{p.l2_bytes // 2**20} MiB L2, {p.peak_fp16_flops / 1e12:g} TFLOPS fp16, "
              f"{p.peak_int8_ops / 1e12:g} TOPS int8")
        print(f"  {p.memory_bytes / 2**30:g} GiB {p.memory_kind} at "
              f"{p.memory_bandwidth_bps / 1e9:g} GB/s; host link "
              f"{p.h2d_bandwidth_bps / 1e9:g} GB/s "
              f"pinned, {p.pageable_bandwidth_bps / 1e9:.1f} GB/s pageable")
        print(f"  limits: {p.max_streams} streams, {p.max_events} events per device")
        for src in p.sources:
            print(f"  source: {src}")
        print()
    return 0


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="acllab", description="acllab: a simulated Ascend "
                                     "NPU runtime with the pyACL API, for learning.")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("profile", help="run a pyACL script on the simulated device, "
                                       "print a summary and write its trace")
    p.add_argument("--out", help="trace file (default: SCRIPT.trace.json)")
    p.add_argument("--device", help="device profile: ascend310 (default) or ascend910b")
    p.add_argument("--sanitize", action="store_true",
                   help="report races, use after free, event misuse and leaks; exit 1 if any")
    p.add_argument("script")
    p.add_argument("args", nargs=argparse.REMAINDER)
    p.set_defaults(func=_cmd_profile)
    v = sub.add_parser("env", help="shell exports for acllab's AscendCL headers and "
                                   "libascendcl.so (eval \"$(acllab env)\")")
    v.set_defaults(func=_cmd_env)
    s = sub.add_parser("smi", help="an npu-smi info view of the simulated devices")
    s.add_argument("--device", help="device profile: ascend310 (default) or ascend910b")
    s.add_argument("--devices", type=int, help="number of devices")
    s.set_defaults(func=_cmd_smi)
    sub.add_parser("atc", help="compile a model graph into an .om file (atc's flags)")
    e = sub.add_parser("seed", help="recompute the seed's figures S1-S9 and check their bands")
    e.add_argument("--batches", type=int, default=1000,
                   help="batches per service loop (default 1000, as the seed)")
    e.set_defaults(func=_cmd_seed, device=None)
    d = sub.add_parser("devices", help="list the device profiles and their sources")
    d.set_defaults(func=_cmd_devices)
    sub.add_parser("grade", help="grade submitted notebooks in sandboxes (run "
                                 "``acllab grade --help``)")
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``acllab`` command."""
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv and argv[0] == "atc":          # atc has its own flags, parsed as atc does
        from .model import atc_main

        return atc_main(argv[1:])
    if argv and argv[0] == "grade":        # the grading package (Jupyter-side), loaded lazily
        from grading.__main__ import main as grade_main

        return grade_main(argv[1:], prog="acllab grade")
    ns = _parser().parse_args(argv)
    return ns.func(ns)


if __name__ == "__main__":
    sys.exit(main())
