#!/usr/bin/env python3
"""Set up the project's environment and run it: the lessons, the tests, the benchmarks.

Needs only Python 3.10+ and its standard library. Every command first makes sure that
``.venv`` exists and holds the project for the current pyproject.toml: ``lab`` installs
``-e .[lab]`` (what the lessons need), ``test`` and ``bench`` install ``-e .[lab,test]``. It
reinstalls when pyproject.toml changes, rebuilds a broken ``.venv`` and shows pip's progress.

    python3 dev.py lab [--port N] [JUPYTERLAB ARGS...]   open lessons/ in JupyterLab
    python3 dev.py test [PYTEST ARGS...]                 run the test suite
    python3 dev.py bench [NAME...]                       run benchmarks/*.py (all, or those
                                                         whose file name contains a NAME)
"""

# Keep this file parseable by old Pythons (no match, no PEP 604 unions at run time), so that
# the version check below can print its message instead of a SyntaxError.
import hashlib
import os
import shutil
import subprocess
import sys

MIN_PYTHON = (3, 10)
LAB_EXTRAS = ("lab",)
TEST_EXTRAS = ("lab", "test")

ROOT = os.path.dirname(os.path.abspath(__file__))
VENV = os.path.join(ROOT, ".venv")
STAMP = os.path.join(VENV, ".acllab-install-hash")
PYPROJECT = os.path.join(ROOT, "pyproject.toml")
LESSONS = os.path.join(ROOT, "lessons")
BENCHMARKS = os.path.join(ROOT, "benchmarks")
WINDOWS = os.name == "nt"

USAGE = __doc__.split("\n\n", 2)[2].rstrip()


def step(message):
    """Print one line saying what happens next."""
    print("[dev] " + message, flush=True)


def fail(message, code=1):
    """Print an error line and exit."""
    print("[dev] error: " + message, file=sys.stderr, flush=True)
    sys.exit(code)


def venv_python():
    """Path of the virtual environment's interpreter."""
    if WINDOWS:
        return os.path.join(VENV, "Scripts", "python.exe")
    return os.path.join(VENV, "bin", "python")


def child_env():
    """Environment for the commands we start: quiet pip, no prompts."""
    env = dict(os.environ)
    env.setdefault("PIP_DISABLE_PIP_VERSION_CHECK", "1")
    env.setdefault("PIP_NO_INPUT", "1")
    # The simulation's numpy work is small: one BLAS thread avoids thread contention that
    # makes tiny matrix products slow on busy machines (results are the same either way).
    env.setdefault("OPENBLAS_NUM_THREADS", "1")
    env.pop("PYTHONHOME", None)
    return env


def run(cmd, what, cwd=ROOT):
    """Run a command that must succeed; exit with a clear message if it does not."""
    try:
        code = subprocess.call(cmd, cwd=cwd, env=child_env())
    except OSError as exc:
        fail(f"{what} failed: {exc}")
    if code != 0:
        fail("{} failed (exit code {}): {}".format(what, code, " ".join(cmd)), code)


def install_hash():
    """Fingerprint of the pyproject.toml the environment was installed from."""
    digest = hashlib.sha256()
    with open(PYPROJECT, "rb") as f:
        digest.update(f.read())
    return digest.hexdigest()


def read_stamp():
    """(pyproject fingerprint, extras installed) recorded by the last install."""
    try:
        with open(STAMP) as f:
            words = f.read().split()
    except OSError:
        return "", ()
    if not words:
        return "", ()
    return words[0], tuple(words[1].split(",")) if len(words) > 1 else ()


def venv_works():
    """True if .venv has an interpreter that runs and is new enough."""
    python = venv_python()
    if not os.path.isfile(python):
        return False
    check = f"import sys; sys.exit(0 if sys.version_info >= {MIN_PYTHON} else 1)"
    try:
        return subprocess.call([python, "-c", check], env=child_env()) == 0
    except OSError:
        return False


def ensure_env(extras=TEST_EXTRAS):
    """Create or refresh .venv so that it holds the project and ``extras`` (at least)."""
    if not os.path.isfile(PYPROJECT):
        fail("pyproject.toml not found next to dev.py")
    if os.path.isdir(VENV) and not venv_works():
        step("removing broken .venv")
        shutil.rmtree(VENV)
    if not os.path.isdir(VENV):
        version = ".".join(str(part) for part in sys.version_info[:3])
        step(f"creating .venv with Python {version} ({sys.executable})")
        try:
            code = subprocess.call([sys.executable, "-m", "venv", VENV], cwd=ROOT)
        except OSError as exc:
            code = exc
        if code != 0 or not venv_works():
            shutil.rmtree(VENV, ignore_errors=True)
            fail(
                f"could not create .venv with {sys.executable} "
                "(on Debian or Ubuntu, install the python3-venv package and try again)"
            )
        # Editable installs from pyproject.toml alone need pip 21.3+; Python 3.10.0 ships 21.2.
        step("making sure pip in .venv is recent")
        run([venv_python(), "-m", "pip", "install", "-q", "pip>=23"], "updating pip")

    wanted = install_hash()
    installed, have = read_stamp()
    if installed == wanted and set(extras) <= set(have):
        step(".venv is up to date with pyproject.toml")
        return
    if installed == wanted:
        extras = tuple(sorted(set(extras) | set(have)))     # keep what is there
    names = ",".join(extras)
    step(f"installing -e .[{names}] into .venv (pyproject.toml changed or first run); "
         "pip lists each package as it goes")
    run(
        [venv_python(), "-m", "pip", "install", "--progress-bar", "off", "-e", f".[{names}]"],
        "pip install",
    )
    with open(STAMP, "w") as f:
        f.write(wanted + " " + names + "\n")


def hand_over(cmd, cwd=ROOT):
    """Run the final command of a verb and exit with its exit code.

    On POSIX the process becomes the command (exec), so Ctrl-C and prompts go straight to it.
    """
    env = child_env()
    sys.stdout.flush()
    sys.stderr.flush()
    if not WINDOWS:
        os.chdir(cwd)
        try:
            os.execve(cmd[0], cmd, env)
        except OSError as exc:
            fail(f"could not start {cmd[0]}: {exc}")
    try:
        sys.exit(subprocess.call(cmd, cwd=cwd, env=env))
    except KeyboardInterrupt:
        sys.exit(130)


def is_root():
    return hasattr(os, "geteuid") and os.geteuid() == 0


def truthy(value):
    return (value or "").strip().lower() not in ("", "0", "false", "no")


def cmd_lab(args):
    """Open lessons/ in JupyterLab from .venv."""
    extra = []
    port = None
    i = 0
    while i < len(args):
        arg = args[i]
        if arg == "--port":
            if i + 1 >= len(args):
                fail("--port needs a number")
            port = args[i + 1]
            i += 2
            continue
        if arg.startswith("--port="):
            port = arg.split("=", 1)[1]
        else:
            extra.append(arg)
        i += 1
    if port is not None and not port.isdigit():
        fail(f"--port needs a number, got {port!r}")

    ensure_env(LAB_EXTRAS)
    cmd = [venv_python(), "-m", "jupyterlab", "--ServerApp.root_dir=" + LESSONS]
    if port is not None:
        cmd.append("--port=" + port)
    if is_root() and "--allow-root" not in extra:
        cmd.append("--allow-root")
    if truthy(os.environ.get("CI")) and "--no-browser" not in extra:
        cmd.append("--no-browser")
    cmd += extra
    step("starting JupyterLab on lessons/" + (f" (port {port})" if port else ""))
    hand_over(cmd, cwd=LESSONS)


def cmd_test(args):
    """Run pytest from .venv with the given arguments."""
    ensure_env()
    step("running pytest" + (" " + " ".join(args) if args else ""))
    hand_over([venv_python(), "-m", "pytest"] + list(args))


def cmd_bench(args):
    """Run benchmarks/*.py (not starting with _) one after another."""
    ensure_env()
    scripts = []
    if os.path.isdir(BENCHMARKS):
        scripts = sorted(
            name
            for name in os.listdir(BENCHMARKS)
            if name.endswith(".py") and not name.startswith("_")
        )
    if args:
        scripts = [name for name in scripts if any(word in name for word in args)]
    if not scripts:
        step("no benchmarks to run" + (" matching " + " ".join(args) if args else ""))
        return 0
    failed = []
    for name in scripts:
        step("running benchmarks/" + name)
        code = subprocess.call(
            [venv_python(), os.path.join(BENCHMARKS, name)], cwd=ROOT, env=child_env()
        )
        if code != 0:
            failed.append(name)
            step(f"benchmarks/{name} exited with code {code}")
    if failed:
        fail("{} of {} benchmarks failed: {}".format(len(failed), len(scripts), ", ".join(failed)))
    step(f"ran {len(scripts)} benchmarks")
    return 0


COMMANDS = {"lab": cmd_lab, "test": cmd_test, "bench": cmd_bench}


def main(argv):
    if sys.version_info < MIN_PYTHON:
        fail(
            f"Python {MIN_PYTHON[0]}.{MIN_PYTHON[1]}+ is needed, but this is "
            f"{sys.version.split()[0]} ({sys.executable}); run dev.py with a newer python3"
        )
    if not argv or argv[0] in ("-h", "--help", "help"):
        print("usage:\n" + USAGE)
        return 0 if argv else 2
    command = COMMANDS.get(argv[0])
    if command is None:
        print("usage:\n" + USAGE, file=sys.stderr)
        fail("unknown command {!r}; use one of: {}".format(argv[0], ", ".join(COMMANDS)), 2)
    try:
        return command(argv[1:])
    except KeyboardInterrupt:
        print(file=sys.stderr)
        fail("interrupted", 130)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
