"""Grade one exercise of one notebook, in a fresh process (run inside the sandbox).

    python -I .../grading/worker.py PACKAGE_ROOT...      (the job arrives as JSON on stdin)

The order of events is the point of this module:

1. read the whole job (the exercise, the grader's seeds and limits, the learner's cells, a
   random key and the number of the result pipe) from stdin, then close stdin, and add the
   grader's audit hook (:func:`_install`): from then on the key and the pipe are held by
   the hook alone, in no module, object or frame that Python code can reach;
2. lower this process's resource limits (CPU time, memory, file size, core dumps): hard
   limits too, so learner code cannot raise them again;
3. import acllab and the checks, load the lesson's check module (sealed), and keep the real
   ``check`` function; then arm the hook (:func:`_arm`: what trusted code may do that
   learner code may not, below) and take a :class:`acllab.checks._guard.Snapshot` of
   acllab's modules;
4. only then run the learner's code cells, each in turn, in one fresh namespace, each with a
   time limit and its exceptions contained (BaseExceptions too). Check cells run too: in
   the cells ``check`` and ``summary`` are inert stand-ins, so ``result = check(...)``
   grades nothing and a later cell that uses ``result`` still runs. IPython syntax is
   handled as :func:`translate` says (what the grader does not run is named in the
   results), and a cell that does not compile is reported with its line;
5. undo whatever the cells changed in acllab (and say so), call the real ``check`` kept in
   step 3 on the learner's function (when the cells left no such function, the failed item
   names the cell that should have defined it and what went wrong there), compare acllab
   with the snapshot once more if threads were alive meanwhile (one may have changed acllab
   while the check ran: then there is no grade, only that error), and have the hook send
   the result; then leave with ``os._exit`` (no atexit hooks, no threads).

The grader's pipe carries lines the hook writes: ``MARK``, a tag (keyed BLAKE2b of the
rest of the line, :func:`line_tag`), a kind and a sequence number, and a hex body. Kinds:
``@`` progress (``cells``, ``cell N LIMIT``, ``end N``, ``check``: the grader reads them as
they come, so after killing the process it knows which cell was running
(:mod:`grading.sandbox`), and it kills a cell that ignores its own timer soon after that
cell's time is up), ``!`` something the hook refused (sent at once, so it counts even if
the process then dies), ``=`` the result. The key never travels on the pipe, so reading,
redirecting or writing the pipe forges nothing: a line without a good tag, or a gap in
the numbers, is itself a refusal. The learner's stdout and stderr go to /dev/null.

The hook (PEP 578) is the wall inside the process. Learner code and the check share it (the
check calls the learner's function on the simulated runtime), so the hook refuses, to any
caller not named below: frames (``sys._getframe``, ``sys._current_frames``, a traceback's,
generator's or coroutine's frame: the standard library's frame users see *frame views*,
the code, globals and line of each frame without its locals; acllab's own callers of
``sys._getframe`` get views too), the heap (``gc.get_objects``, ``get_referrers``,
``get_referents``, ``gc.set_debug(DEBUG_SAVEALL)``), tracing and profiling (but acllab's own
profile function in ``acl.util.start_thread``), audit hooks of the learner's, ctypes' audited
entry points unless acllab or numpy is calling, opening anything under /proc, new processes
(``os.fork``, ``posix_spawn``, ``exec``, ``subprocess``, ``_posixsubprocess.fork_exec``),
symbolic links, builtin functions as signal handlers (a handler of the learner's own is
called with ``None`` for the frame), fresh copies of the modules it guards, and every use of
its own channel but the worker's. It depends on nothing learner code can rebind (builtins,
this module, ``os``, ``marshal``...); rebinding this module, or what the channel and the
wall are made of, is a refusal too, and is undone. Each refusal is an error in the learner's
code, a line to the grader and no credit for the exercise.

Not covered (bubblewrap remains the outer wall; an audit hook is no sandbox): memory read or
written through ctypes without an audited call, that is with its data types (a pointer in a
union, ``c_char_p(address)``) and the function pointers that already exist, or through
acllab's own views of host memory, which use ctypes at the addresses acllab is given; bugs
in the interpreter or in an extension module; a progress line that learner code has the
grader's own :func:`run_cells` send for it (a progress line can only bring its own kill
forward or name the wrong cell of its own notebook). With arbitrary
memory access learner code can change anything in this process, the grade included.
"""

from __future__ import annotations

import sys

if __name__ == "__main__":          # run as a script with -I: import only from the roots named
    sys.path[0:1] = sys.argv[1:]

import _thread  # noqa: E402
import builtins  # noqa: E402
import gc  # noqa: E402
import hashlib  # noqa: E402
import json  # noqa: E402
import linecache  # noqa: E402
import marshal  # noqa: E402
import os  # noqa: E402
import re  # noqa: E402
import signal  # noqa: E402
import time  # noqa: E402
import traceback  # noqa: E402
import types  # noqa: E402


class CellTimeout(BaseException):
    """A learner's cell ran past its time limit."""


class _Inert:
    """What ``check``, ``summary`` and the widgets are while the learner's cells run: any
    call, attribute or iteration gives another inert value, except that a keyword given when
    it was made reads back (``ipw.IntSlider(value=2).value`` is 2, so a cell that runs its
    demonstration at a control's starting value still does)."""

    def __init__(self, *args, **kwargs):
        self.__dict__["_given"] = kwargs

    def __call__(self, *args, **kwargs):
        return _Inert(**kwargs)

    def __getattr__(self, name):
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        given = self.__dict__.get("_given", {})
        if name in given:
            return given[name]
        return _Inert()

    def __iter__(self):
        return iter(())

    def __bool__(self):
        return False

    def __repr__(self):
        return "<not shown while grading>"


class _InertModule(types.ModuleType):
    """A stand-in for the widgets package and its modules (no figures while grading)."""

    __path__: list[str] = []

    def __getattr__(self, name):
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        return _Inert


class _InertFinder:
    """Serves :class:`_InertModule` for ``widgets`` and ``IPython`` imports."""

    prefixes = ("widgets", "IPython", "ipywidgets", "plotly", "matplotlib")

    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] not in self.prefixes:
            return None
        import importlib.machinery

        return importlib.machinery.ModuleSpec(name, self, is_package=True)

    def create_module(self, spec):
        return _InertModule(spec.name)

    def exec_module(self, module):
        pass


class _RefuseFinder:
    """Refuses the repository's own packages (lessons.solutions, tests) to learner code, for
    the run without a sandbox, where the repository may be on the import path."""

    refused = ("lessons", "tests")

    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in self.refused:
            raise ModuleNotFoundError(f"No module named {name!r} (not while grading)", name=name)
        return None


def _limit_resources(job: dict) -> None:
    try:
        import resource
    except ImportError:          # not POSIX: the grader's wall-clock kill still applies
        return
    cpu = max(1, int(job.get("cpu_s", 600)))
    memory = int(job.get("memory_bytes", 4 << 30))
    for name, value in (("RLIMIT_CPU", cpu), ("RLIMIT_AS", memory),
                        ("RLIMIT_FSIZE", 64 << 20), ("RLIMIT_CORE", 0)):
        which = getattr(resource, name, None)
        if which is None:
            continue
        try:
            resource.setrlimit(which, (value, value))
        except (ValueError, OSError):
            pass


# -- the grader's channel, and the audit hook that keeps learner code away from it ----------

MARK = b"ACLLAB-GRADE "                 # how each line of the grader's pipe starts
_EVENT = "acllab.grading"               # the audit event the worker talks to its hook with
_PERSON = b"acllab-grading"
_FRAME_ATTRS = frozenset({"tb_frame", "gi_frame", "cr_frame", "ag_frame"})
_TRACE = ("sys.settrace", "sys.setprofile", "sys._settraceallthreads",
          "sys._setprofileallthreads")
_ALWAYS = ("sys.addaudithook", "gc.get_objects", "gc.get_referrers", "gc.get_referents",
           "sys._current_exceptions", "os.fork", "os.forkpty", "os.posix_spawn", "os.exec",
           "os.spawn", "os.system", "os.startfile", "subprocess.Popen", "pty.spawn",
           "os.symlink", "os.link", "sys.monitoring.register_callback", "sys.remote_exec",
           "cpython.remote_debugger_script")
_NO_IMPORT = frozenset({"_xxsubinterpreters", "_xxinterpchannels", "_xxinterpqueues",
                        "_interpreters", "_interpchannels", "_interpqueues", "_ctypes_test",
                        "_xxtestfuzz", "_remote_debugging"})
_NO_IMPORT_PREFIXES = ("_test", "_xxsub", "_xxinterp")
_PROC_OK = frozenset({"/proc/cpuinfo", "/proc/meminfo", "/proc/loadavg", "/proc/uptime",
                      "/proc/version", "/proc/stat"})
# modules whose frame users keep the real frames (introspection tools: refused, not served)
_NOT_VIEWED = ("inspect", "pdb", "bdb", "doctest", "trace", "cgitb", "pydoc", "dis",
               "grading")


def line_tag(key: bytes, message: bytes) -> bytes:
    """The tag of one line of the grader's pipe: keyed BLAKE2b of its message, in hex."""
    return hashlib.blake2b(message, key=key, digest_size=16,
                           person=_PERSON).hexdigest().encode()


def _finish_line(code: types.CodeType) -> int:
    """The line of ``main`` that sends the result (the one that loads the constant '=')."""
    import dis

    offset = next(i.offset for i in dis.get_instructions(code)
                  if i.opname == "LOAD_CONST" and i.argval == "=")
    return next(line for start, end, line in code.co_lines() if start <= offset < end)


def _install(key: bytes, fd: int, main_frame, progress_code, arm_code,
             progress_callers: tuple) -> None:
    """Add the grader's audit hook: the result channel, and the wall around it.

    The hook alone holds ``key`` and ``fd`` (in its closure; nothing references the hook but
    the interpreter's list of hooks, which Python code cannot read). The worker talks to it
    with ``sys.audit(_EVENT, op, ...)``, and it answers only the worker's own frames: progress
    from :func:`_progress` called by ``progress_callers`` (code objects: :func:`run_cells`,
    :func:`_grade`), the result from ``main_frame`` at its one sending line (once),
    the policy from :func:`_arm` (once, before learner code), the real functions behind the
    wrappers :func:`_arm` installs to their own frames. Once armed it refuses what the
    module docstring lists. Everything it calls is bound here: learner code may later rebind
    any builtin or module attribute.
    """
    finish = _finish_line(main_frame.f_code)
    get_ident, getframe, write, blake2b = _thread.get_ident, sys._getframe, os.write, \
        hashlib.blake2b
    getcwd, readlink, lock = os.getcwd, os.readlink, _thread.allocate_lock()
    str_, int_, bytes_, dict_, list_, type_, id_, len_ = str, int, bytes, dict, list, type, \
        id, len
    callable_, issubclass_, range_ = callable, issubclass, range
    function_type, method_type = types.FunctionType, types.MethodType
    runtime_error, permission_error, import_error = RuntimeError, PermissionError, ImportError
    os_error, value_error, key_error = OSError, ValueError, KeyError
    startswith, as_str, split, rpartition, encode = str.startswith, str.__str__, str.split, \
        str.rpartition, str.encode
    decode, hexlify, int_and = bytes.decode, bytes.hex, int.__and__
    mark, event_name, person, frame_attrs = MARK, _EVENT, _PERSON, _FRAME_ATTRS
    no_import, no_import_prefixes, proc_ok = _NO_IMPORT, _NO_IMPORT_PREFIXES, _PROC_OK
    save_all = gc.DEBUG_SAVEALL
    kinds = {"open": "open", "import": "import", event_name: "channel",
             "sys._getframe": "frames", "sys._current_frames": "frames"}
    kinds.update((name, "trace") for name in _TRACE)
    kinds.update((name, "always") for name in _ALWAYS)
    kinds_get = kinds.get
    busy: set = set()
    busy_add, busy_discard = busy.add, busy.discard
    st = {"seq": 0, "armed": False, "sent": False, "cell": -1, "check": False}
    refusals: list = []
    pol: dict = {}
    empty: dict = {}

    def send(kind: bytes, body) -> None:
        if type_(body) is not bytes_:
            body = encode(body, "utf-8", "replace")
        with lock:
            n = st["seq"]
            st["seq"] = n + 1
            message = kind + b"%d " % n + encode(hexlify(body))
            line = (b"\n" + mark + encode(blake2b(message, key=key, digest_size=16,
                                                  person=person).hexdigest())
                    + b" " + message + b"\n")
            try:
                while line:
                    line = line[write(fd, line):]
            except os_error:            # closed by learner code: the grader says so
                pass

    def filename(code) -> str:
        name = code.co_filename
        return name if type_(name) is str_ else as_str(name)

    def locate(frame) -> tuple:
        """(cell, where): the learner's cell on the stack, else the one running, else ''."""
        f, via, depth = frame, "", 0
        while f is not None and depth < 200:
            name = filename(f.f_code)
            if startswith(name, "<cell "):
                try:
                    cell = int_(name[6:-1])
                except value_error:
                    cell = -1
                return cell, f"cell {name[6:-1]}, line {f.f_lineno}{via}"
            if depth == 0:
                via = f", through {rpartition(name, '/')[2]}"
            f, depth = f.f_back, depth + 1
        if st["cell"] >= 0:
            return st["cell"], f"while cell {st['cell']} ran{via}"
        return -1, ("in the check" if st["check"] else "in the grader") + via

    def record(what: str, frame) -> None:
        cell, where = locate(frame)
        if len_(refusals) < 20:
            note = f"{what} ({where})"
            refusals.append(note)
            send(b"!", f"{cell}\t{note}")

    def refuse(what: str, frame, error=runtime_error):
        record(what, frame)
        return error(f"{what}: not allowed while grading")

    def known(table: dict, obj) -> bool:
        return table.get(id_(obj)) is obj

    def any_is(candidates: tuple, obj) -> bool:       # no hashing of what learner code made
        for candidate in candidates:
            if obj is candidate:
                return True
        return False

    def local(frame, name: str):
        try:
            return frame.f_locals[name]
        except key_error:
            return empty

    def resolve(path: str) -> str | None:
        """The path with every link followed, or None when it cannot be told."""
        if not startswith(path, "/"):
            try:
                path = getcwd() + "/" + path
            except os_error:
                return None
        todo = split(path, "/")
        todo.reverse()
        done, hops = "", 0
        while todo:
            part = todo.pop()
            if part == "" or part == ".":
                continue
            if part == "..":
                done = rpartition(done, "/")[0]
                continue
            step = done + "/" + part
            try:
                target = readlink(step)
            except (os_error, value_error):
                done = step
                continue
            hops += 1
            if hops > 40:
                return None
            if startswith(target, "/"):
                done = ""
            more = split(target, "/")
            more.reverse()
            todo.extend(more)
        return done or "/"

    def proc_path(path: str) -> bool:
        if not startswith(path, "/"):           # maybe relative to a directory descriptor
            for part in split(path, "/"):
                if part == "proc" or part == "..":
                    return True
        real = resolve(path)
        if real is None:
            return True
        return (real == "/proc" or startswith(real, "/proc/")) and real not in proc_ok

    def check_open(args, caller):
        if not args or type_(args[0]) is int_:
            return None                          # a descriptor already open
        kind = type_(args[0])
        if issubclass_(kind, str_):
            path = as_str(args[0])
        elif issubclass_(kind, bytes_):
            path = decode(args[0], "utf-8", "surrogateescape")
        else:
            return refuse("opening a path the grader cannot read", caller, permission_error)
        if proc_path(path):
            return refuse(f"opening {path} (the grader's /proc/)", caller, permission_error)
        return None

    def check_fetch(args, caller):
        """A wrapper asks for the real function it stands for: only the wrapper itself, for
        the very arguments in its frame, and only what the policy allows."""
        if len_(args) < 3 or type_(args[1]) is not str_ or type_(args[2]) is not list_:
            return refuse("using the grader's channel", caller)
        name, box, rest = args[1], args[2], args[3:]
        params = (pol.get("params") or empty).get(name)
        code = (pol.get("wrappers") or empty).get(name)
        if params is None or caller.f_code is not code or local(caller, "box") is not box \
                or box or len_(rest) != len_(params):
            return refuse("using the grader's channel", caller)
        for i in range_(len_(params)):
            if local(caller, params[i]) is not rest[i]:
                return refuse("using the grader's channel", caller)
        why, instead = None, None
        if name == "signal":
            handler = rest[1]
            kind = type_(handler)
            fn = handler.__func__ if kind is method_type else handler
            if handler is pol["sig_ign"] or handler is pol["sig_dfl"] \
                    or handler is pol["sig_int"] or not callable_(handler) \
                    or (type_(fn) is function_type and known(pol["handlers"], fn.__code__)):
                pass                            # the grader's, acllab's, or no function
            elif any_is(pol["builtin_types"], kind):    # a frame's sink, no line of Python
                why = "installing a builtin function as a signal handler"
            else:                               # the learner's own: called without a frame
                def instead(signum, frame, handler=handler):
                    return handler(signum, None)
        elif name == "set_debug":
            if issubclass_(type_(rest[0]), int_) and int_and(rest[0], save_all):
                why = "gc.set_debug(DEBUG_SAVEALL)"
        elif name in ("create_builtin", "create_dynamic"):
            module, origin = rest
            if type_(module) is not str_:
                why = "creating a module"
            elif module in pol["setup_names"] or module in no_import \
                    or startswith(module, no_import_prefixes):
                why = f"creating module {module} again (_imp)"
            elif name == "create_dynamic":
                real = resolve(origin) if type_(origin) is str_ else None
                if real is None or not startswith(real, pol["extension_roots"]):
                    why = "loading an extension module from outside Python's own folders"
        elif name in ("exec_builtin", "exec_dynamic"):
            if known(pol["setup_modules"], rest[0]):
                why = "running a module the grader uses again (_imp)"
        else:
            why = "_posixsubprocess.fork_exec"
        if why is not None:
            return refuse(why, caller)
        box.append(pol["real"][name])
        if instead is not None:
            box.append(instead)
        return None

    def channel(args, caller):
        op = args[0] if args else None
        if type_(op) is not str_:
            return refuse("using the grader's channel", caller)
        if op == "fetch":
            return check_fetch(args, caller)
        if len_(args) != 2:
            return refuse("using the grader's channel", caller)
        value = args[1]
        back = caller.f_back
        if op == "@" and type_(value) is str_ and caller.f_code is progress_code \
                and local(caller, "text") is value and back is not None \
                and any_is(progress_callers, back.f_code):
            words = split(value, " ")
            if words[0] == "cell" and len_(words) > 1:
                try:
                    st["cell"] = int_(words[1])
                except value_error:
                    pass
            elif words[0] == "end":
                st["cell"] = -1
            elif words[0] == "check":
                st["cell"], st["check"] = -1, True
            send(b"@", value)
            return None
        if op == "=" and type_(value) is bytes_ and caller is main_frame \
                and caller.f_lineno == finish and not st["sent"] \
                and local(caller, "data") is value:
            st["sent"] = True
            send(b"=", b"%d " % len_(refusals) + value)
            return None
        if op == "arm" and type_(value) is dict_ and not st["armed"] \
                and caller.f_code is arm_code:
            pol.update(value)
            st["armed"] = True
            return None
        if op == "tamper" and type_(value) is str_ and st["armed"] \
                and known(pol["checkers"], caller.f_code):
            record(f"changing the grader's own code ({value})", caller)
            return None
        return refuse("using the grader's channel", caller)

    def decide(kind: str, event: str, args: tuple, caller):
        if kind == "channel":
            return channel(args, caller)
        if kind == "frame":                     # tb_frame, gi_frame, cr_frame, ag_frame
            back = caller.f_back
            if known(pol["walkers"], caller.f_code) and back is not None \
                    and known(pol["consumers"], back.f_code):
                return None
            what = args[1] if type_(args[1]) is str_ else "a frame"
            return refuse(f"reading {what}", caller)
        if kind == "frames":                    # sys._getframe, sys._current_frames
            if known(pol["views"], caller.f_code):
                return None
            return refuse(event, caller)
        if kind == "trace":
            if known(pol["profilers"], caller.f_code):
                return None
            return refuse(event, caller)
        if kind == "always":
            return refuse(event, caller)
        if kind == "setattr":                   # a function's __code__
            if known(pol["recoders"], caller.f_code):
                return None                     # types.coroutine (asyncio's import)
            return refuse("changing a function's __code__", caller)
        if kind == "open":
            return check_open(args, caller)
        if kind == "import":
            name = args[0] if args else None
            if not issubclass_(type_(name), str_):
                return None
            name = as_str(name)
            if name in no_import or startswith(name, no_import_prefixes):
                return refuse(f"importing {name}", caller, import_error)
            return None
        # ctypes: only acllab's or numpy's own calls (the ctypes package's frames between)
        f = caller
        while f is not None and startswith(filename(f.f_code), pol["ctypes_dirs"]):
            f = f.f_back
        if f is not None and startswith(filename(f.f_code), pol["ctypes_callers"]):
            return None
        return refuse(f"ctypes ({event})", caller)

    def guarded(kind: str, event: str, args: tuple) -> None:
        tid = get_ident()
        if tid in busy:                         # the hook's own frame reads: let them be
            return
        busy_add(tid)
        try:
            error = decide(kind, as_str(event), args, getframe(2))
        finally:
            busy_discard(tid)
        if error is not None:
            raise error

    def hook(event, args) -> None:
        if event == "object.__getattr__":
            if st["armed"] and len_(args) > 1 and args[1] in frame_attrs:
                guarded("frame", event, args)
            return
        if event == "object.__setattr__":
            if st["armed"] and len_(args) > 1 and args[1] == "__code__":
                guarded("setattr", event, args)
            return
        kind = kinds_get(event)
        if kind is None:
            if not (st["armed"] and type_(event) is str_ and startswith(event, "ctypes.")):
                return
            kind = "ctypes"
        elif kind != "channel" and not st["armed"]:
            return
        guarded(kind, event, args)

    sys.addaudithook(hook)


def _no_breakpoint(*args, **kwargs) -> None:
    """``breakpoint()`` while grading: nothing (no one is there to use the debugger, which
    would need the tracing the hook refuses)."""


def _progress(text: str) -> None:
    """One progress line for the grader (the hook takes it from this function only)."""
    sys.audit(_EVENT, "@", text)


def _codes(obj, seen: dict) -> None:
    """Every code object of a function (or class, property, method), nested ones too."""
    if isinstance(obj, (staticmethod, classmethod)):
        obj = obj.__func__
    if isinstance(obj, property):
        for part in (obj.fget, obj.fset, obj.fdel):
            if part is not None:
                _codes(part, seen)
        return
    if isinstance(obj, type):
        for value in list(vars(obj).values()):
            if not isinstance(value, type):
                _codes(value, seen)
        return
    code = getattr(obj, "__code__", None) if isinstance(obj, types.FunctionType) else obj
    if not isinstance(code, types.CodeType) or id(code) in seen:
        return
    seen[id(code)] = code
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            _codes(const, seen)


def _functions(module: types.ModuleType):
    """(function, its code objects) for the functions of a module: its own, its classes'
    methods and properties, and those wrapped in its objects (acllab's sealed helpers)."""
    for value in list(vars(module).values()):
        if isinstance(value, types.FunctionType):
            found = [value]
        elif isinstance(value, type):
            if getattr(value, "__module__", None) != module.__name__:
                continue
            found = []
            for member in list(vars(value).values()):
                member = getattr(member, "__func__", member)
                found += [member.fget] if isinstance(member, property) else [member]
        elif isinstance(value, types.ModuleType):
            continue
        else:
            try:
                found = list(vars(value).values())
            except TypeError:
                continue
        for fn in found:
            for _ in range(8):                  # and what they wrap (functools.wraps)
                if not isinstance(fn, types.FunctionType):
                    break
                codes: dict = {}
                _codes(fn, codes)
                yield fn, codes
                fn = vars(fn).get("__wrapped__")


def _frame_views(getframe, current_frames, namespace_type):
    """(_getframe, _current_frames) that give frame views: the code, globals and line of each
    frame and the view of its caller, never its locals. Nothing here passes a frame to
    anything rebindable; a learner who rebinds these functions' closures gets bad views, no
    frame."""

    def _getframe(depth=0):
        f = getframe(depth + 1)
        first = last = None
        while f is not None:
            view = namespace_type(f_code=f.f_code, f_globals=f.f_globals, f_lineno=f.f_lineno,
                                  f_lasti=f.f_lasti, f_builtins=f.f_builtins, f_back=None)
            if last is None:
                first = view
            else:
                last.f_back = view
            last, f = view, f.f_back
        return first

    def _current_frames():
        found, views = current_frames(), {}
        for thread, f in found.items():
            first = last = None
            while f is not None:
                view = namespace_type(f_code=f.f_code, f_globals=f.f_globals,
                                      f_lineno=f.f_lineno, f_lasti=f.f_lasti,
                                      f_builtins=f.f_builtins, f_back=None)
                if last is None:
                    first = view
                else:
                    last.f_back = view
                last, f = view, f.f_back
            views[thread] = first
        found = f = None
        return views

    return _getframe, _current_frames


def _traceback_views(walk, namespace_type):
    """A stand-in for traceback's generator ``walk`` (walk_tb, _walk_tb_with_full_positions)
    that yields frame views: the hook lets ``walk`` read a traceback's frames only for it."""

    def walk_views(tb, *args):
        seen = {}
        for f, where in walk(tb, *args):
            first = last = None
            while f is not None:
                view = seen.get(f)
                if view is not None:
                    if last is None:
                        first = view
                    else:
                        last.f_back = view
                    break
                view = namespace_type(f_code=f.f_code, f_globals=f.f_globals,
                                      f_lineno=f.f_lineno, f_lasti=f.f_lasti,
                                      f_builtins=f.f_builtins, f_back=None)
                seen[f] = view
                if last is None:
                    first = view
                else:
                    last.f_back = view
                last, f = view, f.f_back
            f = None
            yield first, where

    walk_views.__name__ = walk_views.__qualname__ = walk.__name__
    walk_views.__doc__ = walk.__doc__
    return walk_views


class _SysView(types.ModuleType):
    """``sys`` as the grader shows it to modules that read frames: its ``_getframe`` and
    ``_current_frames`` give frame views; everything else is the real module's."""

    def __getattr__(self, name):
        return getattr(sys, name)

    def __setattr__(self, name, value):
        setattr(sys, name, value)

    def __delattr__(self, name):
        delattr(sys, name)


def _wrappers(audit, namespace_type) -> dict:
    """The stand-ins for the functions the hook keeps: each asks the hook for the real one
    for its own arguments (the hook checks it is this frame asking), then calls it."""
    event = _EVENT

    def signal(signalnum, handler):
        box: list = []
        audit(event, "fetch", "signal", box, signalnum, handler)
        return box[0](signalnum, box[1] if box[1:] else handler)

    def set_debug(flags):
        box: list = []
        audit(event, "fetch", "set_debug", box, flags)
        return box[0](flags)

    def create_builtin(spec):
        name, origin = str.__str__(spec.name), getattr(spec, "origin", None)
        origin = str.__str__(origin) if isinstance(origin, str) else None
        box: list = []
        audit(event, "fetch", "create_builtin", box, name, origin)
        return box[0](namespace_type(name=name, origin=origin))

    def create_dynamic(spec, file=None):
        name, origin = str.__str__(spec.name), getattr(spec, "origin", None)
        origin = str.__str__(origin) if isinstance(origin, str) else None
        box: list = []
        audit(event, "fetch", "create_dynamic", box, name, origin)
        spec = namespace_type(name=name, origin=origin)
        return box[0](spec) if file is None else box[0](spec, file)

    def exec_builtin(mod):
        box: list = []
        audit(event, "fetch", "exec_builtin", box, mod)
        return box[0](mod)

    def exec_dynamic(mod):
        box: list = []
        audit(event, "fetch", "exec_dynamic", box, mod)
        return box[0](mod)

    def fork_exec(*args, **kwargs):
        box: list = []
        audit(event, "fetch", "fork_exec", box)
        return box[0](*args, **kwargs)

    return {"signal": (signal, ("signalnum", "handler")), "set_debug": (set_debug, ("flags",)),
            "create_builtin": (create_builtin, ("name", "origin")),
            "create_dynamic": (create_dynamic, ("name", "origin")),
            "exec_builtin": (exec_builtin, ("mod",)), "exec_dynamic": (exec_dynamic, ("mod",)),
            "fork_exec": (fork_exec, ())}


def _checker(watched: list, audit):
    """A function that puts back any of ``watched`` ((label, namespace, {name: value})) that
    learner code rebound, and tells the hook; it uses nothing learner code can rebind."""
    event, missing = _EVENT, object()

    def check_own() -> list:
        changed = []
        for label, space, names in watched:
            for name, value in names.items():
                if space.get(name, missing) is not value:
                    changed.append(f"{label}.{name}")
                    space[name] = value
        for text in changed[:5]:
            audit(event, "tamper", text)
        return changed

    return check_own


def _rebind(swaps: dict) -> None:
    """Replace each ``old`` of ``swaps`` ({id(old): (old, new)}) wherever a loaded module
    binds it."""
    for module in list(sys.modules.values()):
        space = getattr(module, "__dict__", None)
        if not isinstance(space, dict):
            continue
        for name, value in list(space.items()):
            swap = swaps.get(id(value))
            if swap is not None and swap[0] is value:
                space[name] = swap[1]


def _arm(lesson: str):
    """Make this process ready for learner code, and tell the hook what trusted code may do.

    Imports what learner code could otherwise make the grader import later (acllab's
    modules, logging, _posixsubprocess); gives the standard library's and acllab's frame
    users frame views (:func:`_frame_views`, traceback's walkers); puts the wrappers of
    :func:`_wrappers` in place of the functions the hook keeps; returns the checker of
    :func:`_checker` and a function that counts the threads alive."""
    import _imp
    import _signal
    import importlib
    import logging  # noqa: F401 - its frame use (findCaller) is given views below
    import pkgutil

    import acllab
    try:
        import _posixsubprocess
    except ImportError:                # not POSIX
        _posixsubprocess = None
    acllab_dir = os.path.dirname(os.path.realpath(acllab.__file__))
    for info in pkgutil.walk_packages(acllab.__path__, "acllab.", onerror=lambda name: None):
        name = info.name
        if name.endswith((".__main__", ".cli")) or (name.startswith("acllab.checks.lesson")
                                                    and name != f"acllab.checks.lesson{lesson}"):
            continue
        try:
            importlib.import_module(name)
        except Exception:              # a module that does not import is no one's to use
            pass

    stdlib = os.path.dirname(os.path.realpath(os.__file__))
    stdlib_homes = tuple({d + os.sep for d in (stdlib, os.path.dirname(os.__file__))})
    acllab_homes = tuple({d + os.sep for d in (acllab_dir, os.path.dirname(acllab.__file__))})
    views: dict = {}
    getframe_view, current_view = _frame_views(sys._getframe, sys._current_frames,
                                               types.SimpleNamespace)
    sys_view = _SysView("sys")
    vars(sys_view).update(_getframe=getframe_view, _current_frames=current_view)
    for fn in (getframe_view, current_view):
        _codes(fn, views)
    profilers: dict = {}
    handlers: dict = {}
    _codes(_on_alarm, handlers)
    viewed: dict = {}
    for name, module in list(sys.modules.items()):
        path = getattr(module, "__file__", None)
        if not isinstance(path, str) or name.split(".")[0] in _NOT_VIEWED \
                or module is sys.modules.get(__name__):
            continue
        if not path.startswith(acllab_homes) and (not path.startswith(stdlib_homes)
                                                  or "site-packages" in path):
            continue                        # acllab (wherever installed) and the stdlib
        for fn, codes in _functions(module):
            where = fn.__code__.co_filename
            home = fn.__globals__.get("__name__")
            if where.startswith(acllab_homes):
                mine = True
            elif where.startswith(stdlib_homes) and "site-packages" not in where \
                    and isinstance(home, str) and home.split(".")[0] not in _NOT_VIEWED:
                mine = False
            else:
                continue                    # imported from a module not served here
            names = set().union(*(c.co_names for c in codes.values()))
            if "_getframe" in names or "_current_frames" in names:
                viewed[id(fn.__globals__)] = fn.__globals__
            if mine and ("setprofile" in names or "settrace" in names):
                profilers.update(codes)
            if mine:
                for code in codes.values():
                    args = code.co_varnames[:code.co_argcount]
                    if args[-2:] == ("signum", "frame"):
                        handlers[id(code)] = code

    recoders: dict = {}
    _codes(types.coroutine, recoders)
    walkers: dict = {}
    consumers: dict = {}
    traceback_views = {}
    for name in ("walk_tb", "_walk_tb_with_full_positions"):
        walk = getattr(traceback, name, None)
        if isinstance(walk, types.FunctionType):
            _codes(walk, walkers)
            traceback_views[name] = _traceback_views(walk, types.SimpleNamespace)
            _codes(traceback_views[name], consumers)

    wrappers = _wrappers(sys.audit, types.SimpleNamespace)
    real = {"signal": _signal.signal, "set_debug": gc.set_debug,
            "create_builtin": _imp.create_builtin, "create_dynamic": _imp.create_dynamic,
            "exec_builtin": _imp.exec_builtin, "exec_dynamic": _imp.exec_dynamic,
            "fork_exec": getattr(_posixsubprocess, "fork_exec", None)}
    roots = tuple(sorted({os.path.realpath(p) + os.sep for p in (
        stdlib, sys.prefix, sys.exec_prefix, sys.base_prefix, sys.base_exec_prefix)}))
    numpy = sys.modules.get("numpy")
    callers = [acllab_dir + os.sep]
    if numpy is not None and getattr(numpy, "__file__", None):
        callers.append(os.path.dirname(os.path.realpath(numpy.__file__)) + os.sep)
    ctypes = sys.modules.get("ctypes")
    ctypes_dirs = (os.path.dirname(os.path.realpath(ctypes.__file__)) + os.sep,) \
        if ctypes is not None else ("\0",)
    check_own_holder: dict = {}
    policy = {"views": views, "walkers": walkers, "consumers": consumers,
              "profilers": profilers, "handlers": handlers, "real": real,
              "wrappers": {name: fn.__code__ for name, (fn, _) in wrappers.items()},
              "params": {name: params for name, (_, params) in wrappers.items()},
              "sig_ign": _signal.SIG_IGN, "sig_dfl": _signal.SIG_DFL,
              "sig_int": _signal.default_int_handler,
              "builtin_types": (types.BuiltinFunctionType, types.MethodWrapperType,
                                types.WrapperDescriptorType, types.MethodDescriptorType,
                                types.ClassMethodDescriptorType),
              "setup_names": frozenset(sys.modules),
              "setup_modules": {id(m): m for m in sys.modules.values()},
              "extension_roots": roots, "ctypes_dirs": ctypes_dirs,
              "ctypes_callers": tuple(callers), "checkers": check_own_holder,
              "recoders": recoders}

    # the real functions go to the hook; their stand-ins take their places
    for globals_ in viewed.values():
        for name, value in list(globals_.items()):
            if value is sys:
                globals_[name] = sys_view
            elif value is sys._getframe:
                globals_[name] = getframe_view
            elif value is sys._current_frames:
                globals_[name] = current_view
    for name, walk in traceback_views.items():
        setattr(traceback, name, walk)
    _rebind({id(real[name]): (real[name], fn) for name, (fn, _) in wrappers.items()
             if real[name] is not None})

    watched = [("grading.worker", globals(), dict(globals())),
               ("marshal", vars(marshal), dict(vars(marshal))),
               ("json", vars(json), dict(vars(json))),
               ("sys (the frame views)", vars(sys_view), dict(vars(sys_view)))]
    for module, names in ((os, ("write", "read", "_exit", "open", "close", "dup", "dup2",
                                "fstat", "kill", "getpid")),
                          (sys, ("audit", "_getframe", "_current_frames", "settrace",
                                 "setprofile", "addaudithook", "exc_info")),
                          (signal, ("signal", "setitimer", "getsignal", "SIGALRM",
                                    "ITIMER_REAL", "SIG_DFL", "SIG_IGN")),
                          (_signal, tuple(vars(_signal))), (gc, tuple(vars(gc))),
                          (_imp, tuple(vars(_imp))), (_thread, tuple(vars(_thread))),
                          (hashlib, ("blake2b",)), (traceback, tuple(vars(traceback))),
                          (types, ("SimpleNamespace", "FunctionType", "MethodType",
                                   "ModuleType", "CodeType")),
                          (_posixsubprocess, ("fork_exec",))):
        if module is not None:
            space = vars(module)
            watched.append((module.__name__, space,
                            {n: space[n] for n in names if n in space}))
    sys.breakpointhook = _no_breakpoint
    check_own = _checker(watched, sys.audit)
    _codes(check_own, check_own_holder)
    sys.audit(_EVENT, "arm", policy)
    del policy, real
    count = _thread._count
    return check_own, count


# IPython syntax, as the grader runs it. A cell magic (%%name on the first line) is not run;
# a line magic or shell escape at the start of a line (also ``x = %name ...``, ``x = !cmd``)
# becomes ``pass`` (or ``x = None``), except ``%time STATEMENT``, which IPython runs once,
# as it is.
_MAGIC_LINE = re.compile(r"^(?P<indent>[ \t]*)(?:(?P<target>[A-Za-z_][\w.]*(?:[ \t]*,[ \t]*"
                         r"[A-Za-z_][\w.]*)*)[ \t]*=[ \t]*)?(?P<magic>[%!].*)$")
_RUN_AS_PYTHON = ("time",)


def _magic_name(magic: str) -> str:
    """'%matplotlib' for '%matplotlib inline', '!pip' for '!pip install x', '%%bash'..."""
    escape = re.match(r"[%!]+", magic).group(0)
    word = magic[len(escape):].split(None, 1)
    return escape + (word[0] if word else "")


def translate(source: str) -> tuple[str | None, list[str]]:
    """(the cell's Python, notes on what of it the grader does not run).

    None for a cell magic (``%%bash``, ``%%writefile``...: the note names it). A cell that
    compiles as it is runs as it is. Otherwise each line that starts (after its indent) with
    ``%`` or ``!`` becomes ``pass``, or ``x = None`` for ``x = %magic``/``x = !cmd``, and a
    note names the lines; ``%time STATEMENT`` becomes STATEMENT (IPython runs it once, as
    it is). Lines keep their numbers, so a syntax error names the learner's line.
    """
    first = source.lstrip()
    if first.startswith("%%"):
        return None, [f"the grader does not run {_magic_name(first.split(chr(10), 1)[0])} "
                      "cells"]
    try:
        compile(source, "<cell>", "exec")
        return source, []
    except (SyntaxError, ValueError):
        pass
    lines, skipped, names, bound = [], [], [], []
    for number, line in enumerate(source.splitlines(), 1):
        match = _MAGIC_LINE.match(line)
        if match is None:
            lines.append(line)
            continue
        indent, target, magic = match.group("indent", "target", "magic")
        name = _magic_name(magic)
        statement = magic[len(name):].strip()
        if name[1:] in _RUN_AS_PYTHON and name.startswith("%") and statement:
            lines.append(f"{indent}{target} = {statement}" if target else indent + statement)
            continue
        lines.append(f"{indent}{target} = None" if target else indent + "pass")
        skipped.append(str(number))
        if name not in names:
            names.append(name)
        if target:
            bound.append(f"{target} is None")
    notes = []
    if skipped:
        what = ", ".join(names) + "".join(f"; {b}" for b in bound)
        notes.append(f"line{'s' if len(skipped) > 1 else ''} {', '.join(skipped)} skipped "
                     f"(the grader does not run {what})")
    return "\n".join(lines) + "\n", notes


def learner_source(source: str) -> str | None:
    """The cell's Python as the grader runs it (:func:`translate`); None for a cell magic."""
    return translate(source)[0]


def _syntax_error(index: int, exc: BaseException) -> str:
    if not isinstance(exc, SyntaxError):            # ValueError: a null byte
        return f"cell {index} has a syntax error: {exc}"
    text = (exc.text or "").strip()
    text = text if len(text) <= 60 else text[:57] + "..."
    where = f"line {exc.lineno}" + (f": {text}" if text else "") if exc.lineno else ""
    return f"cell {index} has a syntax error: {exc.msg}" + (f" ({where})" if where else "")


def _on_alarm(signum, frame):
    raise CellTimeout()


class Report:
    """What :func:`run_cells` found besides its lines: each cell's first problem by cell
    number, the cells stopped at their limit ({cell: limit}) and those not run for want of
    time."""

    def __init__(self) -> None:
        self.problems: dict[int, str] = {}
        self.stopped: dict[int, float] = {}
        self.starved: list[int] = []


def run_cells(cells: list[dict], namespace: dict, cell_s: float, total_s: float,
              progress=None, report: Report | None = None, after=None) -> list[str]:
    """Execute the cells in ``namespace``; return one line per cell that raised, ran over,
    did not compile or was not run (whole or in part).

    A cell with a ``skip`` note (the grader's: it hung or ended the process before) is not
    run. ``progress`` (if given) is called with the progress lines of the module docstring;
    ``report`` (if given) is filled in as :class:`Report` says; ``after`` (if given) is
    called after each cell that ran (the grader's check of its own code, :func:`_checker`).
    """
    say = progress or (lambda text: None)
    report = Report() if report is None else report
    problems, stopped, starved = report.problems, report.stopped, report.starved
    errors: list[str] = []
    deadline = time.monotonic() + total_s
    say("cells")

    def note(index: int, line: str, aside: bool = False) -> None:
        errors.append(line)
        if aside:                   # a line not run: the cell's problem only if no other
            problems.setdefault(index, line)
        else:
            problems[index] = line

    for cell in cells:
        index = cell["index"]
        if cell.get("skip"):
            problems[index] = cell["skip"]
            continue
        source, notes = translate(cell["source"])
        for line in notes:
            note(index, f"cell {index} skipped: {line}" if source is None
                 else f"cell {index}: {line}", aside=source is not None)
        if source is None:
            continue
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            note(index, f"cell {index} not run: the cells' {total_s:g} s were used up")
            starved.append(index)
            continue
        filename = f"<cell {index}>"
        try:
            code = compile(source, filename, "exec")
        except (SyntaxError, ValueError) as exc:
            note(index, _syntax_error(index, exc))
            continue
        linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
        limit = min(cell_s, remaining)
        say(f"cell {index} {limit:.3f}")
        try:
            signal.signal(signal.SIGALRM, _on_alarm)
            signal.setitimer(signal.ITIMER_REAL, limit, 0.1)
            try:
                exec(code, namespace)
            finally:
                signal.setitimer(signal.ITIMER_REAL, 0)
        except CellTimeout:
            note(index, f"cell {index} was stopped after {limit:g} s")
            stopped[index] = limit
        except BaseException as exc:     # noqa: B036 - the learner's: contained
            note(index, f"cell {index} raised {type(exc).__name__}: {exc}".rstrip(": "))
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, signal.SIG_DFL)
            if after is not None:
                after()
        say(f"end {index}")
    return errors


def _defines(source: str, name: str) -> bool:
    """Whether a cell's source looks like it defines ``name`` (def, class, =, import)."""
    n = re.escape(name)
    return re.search(rf"^[ \t]*(?:%\w+[ \t]+)?(?:(?:async[ \t]+)?def|class)[ \t]+{n}\b"
                     rf"|^[ \t]*(?:%\w+[ \t]+)?{n}[ \t]*(?::[^=\n]*)?=(?!=)"
                     rf"|^[ \t]*(?:from[ \t].*)?import[ \t].*\b{n}\b", source, re.M) is not None


def _missing(name: str, value, cells: list[dict], problems: dict[int, str]) -> tuple[str, str]:
    """(message, hint) for an exercise whose function the cells did not leave defined."""
    defining = [c["index"] for c in cells if _defines(c["source"], name)]
    troubled = [i for i in defining if i in problems]
    if value is not None:
        return (f"{name} is a {type(value).__name__}, not a function, after the notebook's "
                "cells ran", f"define {name} with `def {name}(...):` in its exercise cell")
    if troubled:
        cell = troubled[-1]
        problem = problems[cell]
        magic = re.search(r"does not run (%%\S+) cells", problem)
        line = re.search(r"syntax error: .* \(line (\d+)", problem)
        if magic:
            hint = (f"take the {magic.group(1)} line off cell {cell}: the grader runs the "
                    "notebook's Python only")
        elif line:
            hint = f"fix line {line.group(1)} of cell {cell}, the cell that defines {name}"
        elif "time" in problem or "ended the grading process" in problem:
            hint = f"make cell {cell}, which defines {name}, finish well within its time"
        else:
            hint = f"fix cell {cell}, which defines {name}, so that it runs to the end"
        return f"{name} is not defined: {problem}", hint
    if defining:
        return (f"{name} is not defined after the notebook's cells ran (cell "
                f"{defining[-1]} mentions it)", f"define {name} at the top level of its "
                "exercise cell, and run the notebook from the top to check")
    return (f"{name} is not defined: no cell of the notebook defines it",
            f"define {name} in its exercise cell: `def {name}(...):`")


def main() -> None:
    job = json.loads(sys.stdin.buffer.read())
    sys.stdin.close()
    audit, event, dumps, collector_off, leave = sys.audit, _EVENT, marshal.dumps, \
        gc.disable, os._exit
    _install(bytes.fromhex(job.pop("key")), int(job.pop("result_fd")), sys._getframe(),
             _progress.__code__, _arm.__code__, (run_cells.__code__, _grade.__code__))
    try:
        payload = _grade(job, _progress)
    except BaseException:           # noqa: B036 - a bug in grading, reported as such
        payload = {"crash": traceback.format_exc(limit=8)}
    data = dumps(payload)
    collector_off()                 # no finalizer of the learner's runs from here on
    audit(event, "=", data)         # the result: the hook takes it from this line only
    leave(0)


def _grade(job: dict, progress=None) -> dict:
    say = progress or (lambda text: None)
    _limit_resources(job)
    import acllab  # noqa: F401 - the real modules, loaded before any learner code
    import acllab.checks as checks
    from acllab.checks import _guard

    check, summary = checks.check, checks.summary
    lesson = job["exercise"].split(".")[0]
    checks.exercises(lesson)                  # the lesson's graders: imported and sealed
    sys.meta_path[0:0] = [_RefuseFinder(), _InertFinder()]
    for name in [m for m in sys.modules if m.split(".")[0] in _InertFinder.prefixes]:
        del sys.modules[name]
    check_own, threads = _arm(lesson)
    snapshot = _guard.Snapshot.take()
    changes_of, restore = snapshot.changes, snapshot.restore
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    os.dup2(devnull, 2)
    before = threads()

    checks.check = checks.summary = _Inert()
    namespace = {"__name__": "__main__", "__builtins__": builtins, "display": _Inert(),
                 "get_ipython": _Inert()}
    report = Report()
    cell_errors = run_cells(job["cells"], namespace, float(job["cell_s"]),
                            float(job["cells_s"]), say, report, check_own)
    say("check")
    checks.check, checks.summary = check, summary
    tampered = changes_of()
    if tampered:
        restore()
    check_own()
    function = namespace.get(job["function"])
    seeds = job.get("seeds")
    alive = threads() > before                  # a learner's thread may act meanwhile
    result = check(job["exercise"], function, seeds=tuple(seeds) if seeds else None,
                   limit_s=job.get("limit_s"))
    if not callable(function) and result.items:
        item = result.items[0]
        item.message, item.hint = _missing(job["function"], function, job["cells"],
                                           report.problems)
    check_own()
    late = changes_of() if alive or threads() > before else []
    if late:
        return {"crash": "", "tampered_during_check": late[:10], "cell_errors": cell_errors}
    return {"result": {**result.to_dict(), "text": str(result)}, "cell_errors": cell_errors,
            "tampered": tampered[:10], "stopped": dict(report.stopped),
            "starved": list(report.starved)}


if __name__ == "__main__":
    main()
