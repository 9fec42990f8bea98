"""The notebook's ``%%ascendcl`` cell magic (issue 25): C and C++ cells on the kernel's runtime.

Each test runs cells in a real IPython shell (``InteractiveShell``, as a kernel does) with the
extension loaded by ``%load_ext widgets.ascendcl``; the cells are compiled with the system's
gcc and g++. What is checked: the program's tasks land in ``acllab.current_runtime()`` (the
same trace and API log as the program's pyACL twin run in Python, added to what the notebook
did before), the sanitizer finds the article's single-buffer race and the missing wait but
not in the fixed loop, the Timeline and StreamStepper draw the program's streams, and every
failure (a bad option, a compile error, no compiler, an exit code, a crash, a hang) is a few
lines without a Python traceback, after which the kernel and its runtime still work.
"""

from __future__ import annotations

import os
import shutil
import textwrap
import warnings
from pathlib import Path

import pytest

import acllab
from acllab import constants as C
from acllab import session

ROOT = Path(__file__).resolve().parents[1]

IPython = pytest.importorskip("IPython")
from IPython.core.interactiveshell import InteractiveShell  # noqa: E402
from IPython.utils.capture import capture_output  # noqa: E402

pytestmark = pytest.mark.skipif(shutil.which("gcc") is None or shutil.which("g++") is None,
                                reason="needs the system's gcc and g++")


@pytest.fixture(scope="module")
def shell(tmp_path_factory):
    """An IPython shell with the extension loaded, and a toolkit cache of this module's own."""
    cache = tmp_path_factory.mktemp("cache")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("ACLLAB_CACHE", str(cache))
        for var in ("CC", "CXX", "ACLLAB_CC", "ACLLAB_CXX"):
            mp.delenv(var, raising=False)
        ip = InteractiveShell.instance()
        ip.run_line_magic("load_ext", "widgets.ascendcl")
        yield ip
    # the shell goes with the module: else get_ipython() answers for every later test in the
    # process (a widget with live=True would hook into it)
    InteractiveShell.clear_instance()


def cell(ip, line: str, source: str):
    """Run ``%%ascendcl line`` over ``source``: (the shell's result, stdout, stderr)."""
    with capture_output() as io, warnings.catch_warnings():
        warnings.simplefilter("always")
        result = ip.run_cell(f"%%ascendcl {line}\n" + textwrap.dedent(source).lstrip("\n"))
    return result, io.stdout, io.stderr


def no_traceback(*texts: str) -> None:
    for text in texts:
        assert "Traceback" not in text and 'File "' not in text and "---->" not in text, text


def record(runtime) -> tuple[list, list]:
    tasks = [(t.name, t.kind, t.stream.name if t.stream else None, t.start_ns, t.end_ns,
              t.nbytes, t.reads, t.writes) for t in runtime.tasks]
    log = [entry[:4] for entry in runtime.api_log if isinstance(entry, tuple)]
    return tasks, log


# -- a C cell and its pyACL twin --------------------------------------------------------------

ROUND_TRIP_C = r"""
#include <stdio.h>
#include "acl/acl.h"

int main(void)
{
    aclrtStream stream;
    void *dev, *host;
    aclInit(NULL);
    aclrtSetDevice(0);
    aclrtCreateStream(&stream);
    aclrtMalloc(&dev, 4096, ACL_MEM_MALLOC_HUGE_FIRST);
    aclrtMallocHost(&host, 4096);
    for (int i = 0; i < 4096; i++) ((unsigned char *)host)[i] = (unsigned char)(i % 13);
    aclrtMemcpyAsync(dev, 4096, host, 4096, ACL_MEMCPY_HOST_TO_DEVICE, stream);
    aclrtMemsetAsync(dev, 16, 0, 16, stream);
    aclrtMemcpyAsync(host, 4096, dev, 4096, ACL_MEMCPY_DEVICE_TO_HOST, stream);
    aclrtSynchronizeStream(stream);
    printf("byte 100 came back as %d\n", ((unsigned char *)host)[100]);
    aclrtFreeHost(host);
    aclrtFree(dev);
    aclrtDestroyStream(stream);
    aclrtResetDevice(0);
    aclFinalize();
    return 0;
}
"""


def round_trip_twin(acl):
    import numpy as np

    acl.init()
    acl.rt.set_device(0)
    stream, _ = acl.rt.create_stream()
    dev, _ = acl.rt.malloc(4096, C.ACL_MEM_MALLOC_HUGE_FIRST)
    host, _ = acl.rt.malloc_host(4096)
    view = acl.util.ptr_to_numpy(host, (4096,), C.NPY_UINT8)
    view[:] = (np.arange(4096) % 13).astype(np.uint8)
    acl.rt.memcpy_async(dev, 4096, host, 4096, C.ACL_MEMCPY_HOST_TO_DEVICE, stream)
    acl.rt.memset_async(dev, 16, 0, 16, stream)
    acl.rt.memcpy_async(host, 4096, dev, 4096, C.ACL_MEMCPY_DEVICE_TO_HOST, stream)
    acl.rt.synchronize_stream(stream)
    del view
    acl.rt.free_host(host)
    acl.rt.free(dev)
    acl.rt.destroy_stream(stream)
    acl.rt.reset_device(0)
    acl.finalize()


def test_a_c_cell_runs_on_the_kernel_s_runtime_as_its_pyacl_twin(shell):
    runtime = acllab.reset()
    result, out, err = cell(shell, "", ROUND_TRIP_C)
    assert result.success, (out, err)
    assert out == "byte 100 came back as 9\n"
    assert session.current_runtime() is runtime           # no runtime of its own
    native = record(runtime)
    assert [t[1] for t in native[0]] == ["memcpy", "memset", "memcpy"]

    acllab.reset()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        round_trip_twin(acllab.acl)
    names = {"ptr_to_numpy"}
    twin = record(session.current_runtime())
    assert native[0] == twin[0]
    assert native[1] == [e for e in twin[1] if e[0] not in names]


def test_a_cell_adds_to_what_the_notebook_did_before(shell):
    acl = acllab.acl
    runtime = acllab.reset()
    acl.init()
    acl.rt.set_device(0)
    dev, _ = acl.rt.malloc(1024, C.ACL_MEM_MALLOC_HUGE_FIRST)
    acl.rt.memset(dev, 1024, 7, 1024)
    before = len(runtime.tasks)
    result, out, err = cell(shell, "--c", r"""
        #include "acl/acl.h"
        int main(void) {
            void *dev;
            aclrtSetDevice(0);
            aclrtMalloc(&dev, 2048, ACL_MEM_MALLOC_HUGE_FIRST);
            aclrtMemset(dev, 2048, 1, 2048);
            aclrtMemset(dev, 2048, 2, 2048);
            aclrtFree(dev);
            return 0;
        }
        """)
    assert result.success, (out, err)
    assert acllab.current_runtime() is runtime
    assert [t.kind for t in runtime.tasks[before:]] == ["memset", "memset"]
    assert all(t.nbytes == 2048 for t in runtime.tasks[before:])
    # and the notebook goes on where it was, on the same runtime
    assert acl.rt.memset(dev, 1024, 9, 1024) == 0
    assert len(runtime.tasks) == before + 3
    acl.rt.free(dev)
    acl.rt.reset_device(0)
    acl.finalize()


def test_fresh_runs_the_cell_on_a_new_runtime(shell):
    old = acllab.reset()
    acllab.acl.rt.set_device(0)
    result, out, err = cell(shell, "--fresh", ROUND_TRIP_C)
    assert result.success, (out, err)
    new = acllab.current_runtime()
    assert new is not old and len(new.tasks) == 3 and not old.tasks


# -- C++: detected, options, arguments ---------------------------------------------------------

ARGS_CPP = r"""
#include <cstdio>
#include <string>
#include "acl/acl.h"

class Greeter {
public:
    explicit Greeter(std::string who) : who_(std::move(who)) {}
    void hello() const { std::printf("%d %s\n", TAG, who_.c_str()); }
private:
    std::string who_;
};

int main(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) Greeter(argv[i]).hello();
    int32_t count = -1;
    aclError ret = aclrtGetDeviceCount(reinterpret_cast<uint32_t *>(&count));
    std::printf("ret %d, %d devices\n", static_cast<int>(ret), count);
    return argc > 3 ? 3 : 0;
}
"""


def test_cpp_is_detected_and_flags_and_arguments_reach_the_program(shell):
    from widgets import ascendcl

    devices = len(acllab.reset().devices)
    result, out, err = cell(shell, "--flags '-DTAG=7 -O2' -- Ada 'Grace H'", ARGS_CPP)
    assert result.success, (out, err)
    assert out == f"7 Ada\n7 Grace H\nret 0, {devices} devices\n"
    assert ascendcl.last_run.language == "c++" and "-O2" in ascendcl.last_run.compile_command
    # an exit code other than 0: the output, then one line saying so
    result, out, err = cell(shell, "--flags=-DTAG=8 -- a b c", ARGS_CPP)
    assert not result.success
    assert out.startswith("8 a\n8 b\n8 c\n")
    assert "%%ascendcl: the program exited with code 3" in out + err
    no_traceback(out, err)
    assert ascendcl.last_run.returncode == 3


def test_python_variables_expand_in_the_line(shell):
    shell.user_ns["who"] = "Linus"
    shell.user_ns["tag"] = 41
    result, out, err = cell(shell, "--cpp --flags -DTAG={tag + 1} -- {who} $who", ARGS_CPP)
    assert result.success, (out, err)
    assert out.startswith("42 Linus\n42 Linus\n")


@pytest.mark.parametrize("source, cpp", [
    ("#include <stdio.h>\nint main(void) { return 0; }", False),
    ('#include "acl/acl.h"\n/* std::vector would be C++ */\nint main(void) { return 0; }',
     False),
    ("// class Foo in a comment\nstruct classic { int x; };\nint main(void) { return 0; }",
     False),
    ("#include <cstdio>\nint main() { return 0; }", True),
    ("#include <vector>\nint main() { return 0; }", True),
    ("int main() { auto x = 1; return x - 1; }", True),
    ("int main() { int *p = nullptr; return p != nullptr; }", True),
    ("namespace a { int f(); }\nint main() { return 0; }", True),
    ("int main() { std::printf(\"\"); }", True),
])
def test_the_language_is_told_from_the_source(source, cpp):
    from widgets.ascendcl import looks_like_cpp

    assert looks_like_cpp(source) is cpp


# -- the article's double-stream loop and the sanitizer -----------------------------------------

PIPELINE_CPP = r"""
#include <cstdio>
#include <cstdlib>
#include "acl/acl.h"

#define CHECK(call) do { aclError ret = (call); if (ret != ACL_SUCCESS) { \
    std::printf("%s failed: %d\n", #call, ret); return 1; } } while (0)

int main(int argc, char *argv[])
{
    const int batches = std::atoi(argv[2]);
    CHECK(aclInit(nullptr));
    CHECK(aclrtSetDevice(0));
    aclrtStream copyStream, execStream;
    CHECK(aclrtCreateStream(&copyStream));
    CHECK(aclrtCreateStream(&execStream));
    uint32_t modelId;
    CHECK(aclmdlLoadFromFile(argv[1], &modelId));
    aclmdlDesc *desc = aclmdlCreateDesc();
    CHECK(aclmdlGetDesc(desc, modelId));
    size_t inSize = aclmdlGetInputSizeByIndex(desc, 0);
    size_t outSize = aclmdlGetOutputSizeByIndex(desc, 0);
    void *images;
    CHECK(aclrtMallocHost(&images, inSize * batches));
    void *devIn[SLOTS], *devOut;
    aclmdlDataset *input[SLOTS], *output = aclmdlCreateDataset();
    aclrtEvent copied[SLOTS], consumed[SLOTS];
    CHECK(aclrtMalloc(&devOut, outSize, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK(aclmdlAddDatasetBuffer(output, aclCreateDataBuffer(devOut, outSize)));
    for (int k = 0; k < SLOTS; k++) {
        CHECK(aclrtMalloc(&devIn[k], inSize, ACL_MEM_MALLOC_HUGE_FIRST));
        input[k] = aclmdlCreateDataset();
        CHECK(aclmdlAddDatasetBuffer(input[k], aclCreateDataBuffer(devIn[k], inSize)));
        CHECK(aclrtCreateEvent(&copied[k]));
        CHECK(aclrtCreateEvent(&consumed[k]));
    }
    for (int i = 0; i < batches; i++) {
        int k = i % SLOTS;
        if (WAIT && i >= SLOTS) CHECK(aclrtStreamWaitEvent(copyStream, consumed[k]));
        char *batch = static_cast<char *>(images) + i * inSize;
        CHECK(aclrtMemcpyAsync(devIn[k], inSize, batch, inSize,
                               ACL_MEMCPY_HOST_TO_DEVICE, copyStream));
        CHECK(aclrtRecordEvent(copied[k], copyStream));
        CHECK(aclrtStreamWaitEvent(execStream, copied[k]));
        CHECK(aclmdlExecuteAsync(modelId, input[k], output, execStream));
        CHECK(aclrtRecordEvent(consumed[k], execStream));
    }
    CHECK(aclrtSynchronizeStream(execStream));
    std::printf("%d batches, %d input buffer(s)\n", batches, SLOTS);
    for (int k = 0; k < SLOTS; k++) {
        CHECK(aclDestroyDataBuffer(aclmdlGetDatasetBuffer(input[k], 0)));
        CHECK(aclmdlDestroyDataset(input[k]));
        CHECK(aclrtFree(devIn[k]));
        CHECK(aclrtDestroyEvent(copied[k]));
        CHECK(aclrtDestroyEvent(consumed[k]));
    }
    CHECK(aclDestroyDataBuffer(aclmdlGetDatasetBuffer(output, 0)));
    CHECK(aclmdlDestroyDataset(output));
    CHECK(aclmdlDestroyDesc(desc));
    CHECK(aclmdlUnload(modelId));
    CHECK(aclrtFree(devOut));
    CHECK(aclrtFreeHost(images));
    CHECK(aclrtDestroyStream(copyStream));
    CHECK(aclrtDestroyStream(execStream));
    CHECK(aclrtResetDevice(0));
    CHECK(aclFinalize());
    return 0;
}
"""


@pytest.fixture(scope="module")
def tiny_om(tmp_path_factory):
    from acllab.model import atc_main

    out = tmp_path_factory.mktemp("om") / "tiny"
    assert atc_main(["--model", "zoo:tiny", "--output", str(out), "--soc_version",
                     "Ascend310", "--input_shape", "data:8,1,16,16"]) == 0
    return f"{out}.om"


@pytest.mark.parametrize("slots, wait, batches, race", [
    (1, 0, 6, True),        # the article's loop: one input buffer for both streams
    (2, 0, 6, True),        # two buffers, but the copy into a slot does not wait for its run
    (2, 1, 6, False),       # two buffers and the wait: race-free
    (2, 1, 2, False),
    (3, 1, 7, False),
])
def test_the_sanitizer_sees_the_program_s_races(shell, tiny_om, slots, wait, batches, race):
    from acllab.analysis import sanitizer

    result, out, err = cell(shell, f"--fresh --flags '-DSLOTS={slots} -DWAIT={wait}' -- "
                                   f"{tiny_om} {batches}", PIPELINE_CPP)
    assert result.success, (out, err)
    assert out == f"{batches} batches, {slots} input buffer(s)\n"
    runtime = acllab.current_runtime()
    streams = {t.stream for t in runtime.tasks if t.kind == "memcpy"}
    runs = {t.stream for t in runtime.tasks if t.kind == "model_op"}
    assert len(streams) == 1 and len(runs) == 1 and streams != runs    # two streams
    findings = sanitizer.analyze(runtime)
    if race:
        assert findings and {f.kind for f in findings} == {"race"}, findings
        for finding in findings:                 # a copy in and a model run, each time
            kinds = {t.kind for t in runtime.tasks if t.id in finding.tasks}
            assert kinds == {"memcpy", "model_op"}, finding
        assert f"acllab sanitizer: {len(findings)} problem" in err    # aclFinalize said so
    else:
        assert findings == []
        assert "sanitizer" not in err


def test_the_timeline_and_the_stream_stepper_draw_the_program(shell, tiny_om):
    pytest.importorskip("plotly")
    from widgets.stream_stepper import StreamStepper
    from widgets.timeline import Timeline

    result, out, err = cell(shell, f"--fresh --flags '-DSLOTS=2 -DWAIT=1' -- {tiny_om} 3",
                            PIPELINE_CPP)
    assert result.success, (out, err)
    runtime = acllab.current_runtime()
    names = {trace.name for trace in Timeline(runtime).to_figure().data}
    assert any("Stream 1" in n for n in names) and any("Stream 2" in n for n in names), names
    stepper = StreamStepper()                   # follows the current runtime
    moments = stepper.moments()
    assert len(moments) > 10 and moments[-1] >= max(t.end_ns for t in runtime.tasks)


# -- what goes wrong: a few lines, no traceback, and the kernel goes on -------------------------

def test_a_compile_error_shows_the_diagnostics_and_no_traceback(shell):
    runtime = acllab.reset()
    result, out, err = cell(shell, "", """
        #include "acl/acl.h"
        int main(void) {
            aclrtSetDevice(0);
            return undeclared_thing;
        }
        """)
    assert not result.success
    text = out + err
    assert "%%ascendcl: the C cell does not compile" in text
    assert "cell.c:4:" in text and "undeclared_thing" in text
    assert "ascend-toolkit" not in text                     # no long toolkit paths
    assert len(text.splitlines()) < 15
    no_traceback(out, err)
    assert acllab.current_runtime() is runtime and not runtime.api_log   # nothing ran


def test_long_diagnostics_are_cut(shell):
    source = "int main(void) {\n" + "".join(f"    x{i} = 1;\n" for i in range(40)) + "}\n"
    result, out, err = cell(shell, "", source)
    assert not result.success
    assert "more lines)" in out + err and len((out + err).splitlines()) < 35
    no_traceback(out, err)


@pytest.mark.parametrize("var, value, line, source", [
    ("ACLLAB_CC", "/nonexistent/bin/gcc", "", ROUND_TRIP_C),
    ("CC", "/nonexistent/bin/cc", "--cpp", ARGS_CPP),        # the library needs C too
    ("CXX", "/nonexistent/bin/g++", "--flags -DTAG=1", ARGS_CPP),
    ("ACLLAB_CXX", "no-such-compiler-here", "--flags=-DTAG=1", ARGS_CPP),
])
def test_a_missing_compiler_is_a_clear_message(shell, monkeypatch, var, value, line, source):
    runtime = acllab.reset()
    monkeypatch.setenv(var, value)
    result, out, err = cell(shell, line, source)
    assert result.success          # the notebook goes on (Run All does not stop here)
    assert f"{var}={value!r} names no program on PATH" in err
    assert "%%ascendcl: cannot compile the" in err and "compiler" in err
    assert len(err.splitlines()) == 1 and out == ""
    no_traceback(out, err)
    assert not runtime.api_log


def test_no_compiler_on_path_is_a_clear_message(shell, monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))                 # an empty folder
    result, out, err = cell(shell, "", ROUND_TRIP_C)
    assert result.success
    assert "no C compiler was found" in err and "apt-get install gcc" in err
    no_traceback(out, err)


CRASH_C = r"""
#include <stdio.h>
#include "acl/acl.h"
int main(void) {
    void *dev, *host;
    aclrtStream stream;
    aclInit(NULL);
    aclrtSetDevice(0);
    aclrtCreateStream(&stream);
    aclrtMalloc(&dev, 1 << 20, ACL_MEM_MALLOC_HUGE_FIRST);
    aclrtMallocHost(&host, 1 << 20);
    aclrtMemcpyAsync(dev, 1 << 20, host, 1 << 20, ACL_MEMCPY_HOST_TO_DEVICE, stream);
    printf("about to crash\n");
    fflush(stdout);
    *(volatile int *)16 = 1;
    return 0;
}
"""


def test_a_crash_is_reported_and_the_runtime_stays_usable(shell):
    from acllab.analysis import sanitizer
    from widgets.timeline import Timeline

    runtime = acllab.reset()
    result, out, err = cell(shell, "", CRASH_C)
    assert not result.success
    assert out.startswith("about to crash\n")
    assert "%%ascendcl: the program crashed: it was ended by SIGSEGV" in out + err
    no_traceback(out, err)
    assert acllab.current_runtime() is runtime
    assert [t.kind for t in runtime.tasks] == ["memcpy"]     # what it queued is there
    sanitizer.analyze(runtime)
    Timeline(runtime).to_figure()
    # the notebook's Python goes on on the same runtime ...
    acl = acllab.acl
    assert acl.rt.set_device(0) == 0
    dev, ret = acl.rt.malloc(4096, C.ACL_MEM_MALLOC_HUGE_FIRST)
    assert ret == 0 and acl.rt.memset(dev, 4096, 1, 4096) == 0
    assert acl.rt.free(dev) == 0
    # ... and so does the next cell
    result, out, err = cell(shell, "--fresh", ROUND_TRIP_C)
    assert result.success and out == "byte 100 came back as 9\n", (out, err)


def test_a_hang_is_stopped_at_the_timeout(shell):
    from widgets import ascendcl

    runtime = acllab.reset()
    result, out, err = cell(shell, "--timeout 1.5", r"""
        #include <stdio.h>
        #include "acl/acl.h"
        int main(void) {
            aclrtSetDevice(0);
            printf("spinning\n");
            for (volatile unsigned long i = 0;; i++) { }
        }
        """)
    assert not result.success
    assert out.startswith("spinning\n")
    assert "%%ascendcl: the program was stopped: it ran for more than 1.5 s (--timeout)" \
        in out + err
    no_traceback(out, err)
    assert "--timeout" in ascendcl.last_run.stopped
    assert [e[0] for e in runtime.api_log if isinstance(e, tuple)] == ["set_device"]
    result, out, err = cell(shell, "--fresh", ROUND_TRIP_C)
    assert result.success, (out, err)


@pytest.mark.parametrize("line, expected", [
    ("--bogus", "unrecognized arguments: --bogus"),
    ("--cpp --c", "not allowed with argument"),
    ("--timeout 0", "--timeout must be a positive number"),
    ("--timeout soon", "invalid float value"),
    ("--flags '-DX=\"unclosed'", "cannot read --flags"),
    ("--flags", "expected one argument"),
])
def test_a_bad_option_is_a_usage_line(shell, line, expected):
    result, out, err = cell(shell, line, "int main(void) { return 0; }\n")
    assert not result.success
    assert expected in out + err and "%%ascendcl" in out + err
    no_traceback(out, err)


def test_an_aclwarning_of_the_program_shows_in_the_cell(shell):
    acllab.reset()
    result, out, err = cell(shell, "", r"""
        #include <stdio.h>
        #include "acl/acl.h"
        int main(void) {
            aclInit(NULL);
            aclrtSetDevice(0);
            aclError ret = aclrtFree((void *)0x1234);
            printf("aclrtFree gave %d\n", (int)ret);
            aclrtResetDevice(0);
            aclFinalize();
            return 0;
        }
        """)
    assert result.success, (out, err)
    assert out == "aclrtFree gave 107000\n"
    assert err.startswith("AclWarning: acl.rt.free (aclrtFree) returned 107000")
    no_traceback(err)


def test_the_extension_unloads(shell):
    from widgets import ascendcl

    ascendcl.unload_ipython_extension(shell)
    try:
        assert "ascendcl" not in shell.magics_manager.magics["cell"]
    finally:
        ascendcl.load_ipython_extension(shell)
    assert "ascendcl" in shell.magics_manager.magics["cell"]


def test_the_module_does_not_need_ipython_to_import():
    import subprocess
    import sys

    code = ("import sys, widgets.ascendcl; "
            "print(sorted(m for m in ('IPython', 'ipywidgets', 'plotly') if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0 and done.stdout.strip() == "[]", done.stderr


# -- the grader skips the course's C++ cells without a note ------------------------------------

@pytest.mark.parametrize("source, python, notes", [
    ("%%ascendcl --fresh -- {FIXED} 8\nint main() { return 0; }\n", None, []),
    ("  %%ascendcl\nint main(void) { return 0; }\n", None, []),
    ("%load_ext widgets.ascendcl", "pass\n", []),
    ("%load_ext  widgets.ascendcl\nx = 1", "pass\nx = 1\n", []),
    ("%load_ext widgets.ascendcl_magic", "pass\n", []),
    # everything else is still named
    ("%%bash\nls\n", None, ["the grader does not run %%bash cells"]),
    ("%%ascendclx\nint main;\n", None, ["the grader does not run %%ascendclx cells"]),
    ("%load_ext autoreload\nx = 1", "pass\nx = 1\n",
     ["line 1 skipped (the grader does not run %load_ext)"]),
    ("%load_ext widgets.ascendcl\n%matplotlib inline", "pass\npass\n",
     ["line 2 skipped (the grader does not run %matplotlib)"]),
    ("ext = %load_ext widgets.ascendcl", "ext = None\n",
     ["line 1 skipped (the grader does not run %load_ext; ext is None)"]),
])
def test_the_grader_skips_the_course_s_cpp_cells_without_a_note(source, python, notes):
    from grading.worker import translate

    assert translate(source) == (python, notes)


def test_lesson_06_gives_the_grader_nothing_to_note():
    nbformat = pytest.importorskip("nbformat")
    from grading.worker import translate

    nb = nbformat.read(ROOT / "lessons" / "06-double-stream-pipeline.ipynb", as_version=4)
    magic = [c for c in nb.cells if c.cell_type == "code" and "ascendcl" in c.source]
    assert len(magic) == 3
    for c in nb.cells:
        if c.cell_type == "code":
            assert translate(c.source)[1] == [], c.source[:80]


def running_in_group(pgid: int) -> list[int]:
    """The processes of group ``pgid`` that are not zombies (read from /proc)."""
    alive = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":
            alive.append(int(stat.parent.name))
    return alive


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc")
def test_an_interrupt_stops_the_program_and_the_kernel_goes_on(shell, tmp_path):
    """Interrupting the kernel (SIGINT, the stop button) while a cell's program runs ends the
    program (and what it started) at once; the next cell runs."""
    import signal
    import threading
    import time

    from widgets import ascendcl

    marker = tmp_path / "running"

    def interrupt():
        deadline = time.monotonic() + 60
        while not marker.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.2)
        os.kill(os.getpid(), signal.SIGINT)

    acllab.reset()
    thread = threading.Thread(target=interrupt)
    thread.start()
    started = time.monotonic()
    result, out, err = cell(shell, "--timeout 120", r"""
        #include <stdio.h>
        #include <unistd.h>
        #include "acl/acl.h"
        int main(void) {
            aclrtSetDevice(0);
            if (fork() == 0) for (;;) pause();       /* a child of its own, also ended */
            FILE *f = fopen("%s", "w");
            fclose(f);
            for (;;) { }
        }
        """.replace("%s", str(marker)))
    thread.join()
    assert isinstance(result.error_in_exec, KeyboardInterrupt)
    assert time.monotonic() - started < 60
    run = ascendcl.last_run
    assert run.stopped == "it was interrupted" and run.pid
    with pytest.raises(ProcessLookupError):
        os.kill(run.pid, 0)                     # ended and reaped
    assert running_in_group(run.pid) == []      # its fork too (a zombie at most)
    result, out, err = cell(shell, "--fresh", ROUND_TRIP_C)
    assert result.success and out == "byte 100 came back as 9\n", (out, err)


@pytest.mark.parametrize("ending, told", [
    ("abort();", "SIGABRT (abort(): an assertion failed"),
    ("raise(SIGFPE);", "SIGFPE (an arithmetic error"),
    ("kill(getpid(), SIGKILL);", "ended by SIGKILL\n"),
    ("exit(0);", None),
    ("_exit(5);", "the program exited with code 5"),
])
def test_each_way_a_program_ends_is_told(shell, ending, told):
    from widgets import ascendcl

    acllab.reset()
    result, out, err = cell(shell, "--c", r"""
        #include <signal.h>
        #include <stdio.h>
        #include <stdlib.h>
        #include <unistd.h>
        #include "acl/acl.h"
        int main(void) {
            aclInit(NULL);
            aclrtSetDevice(0);
            printf("no newline yet");
            fflush(stdout);
            ENDING
        }
        """.replace("ENDING", ending))
    assert out.startswith("no newline yet")
    no_traceback(out, err)
    if told is None:
        assert result.success and out == "no newline yet" and err == ""
    else:
        assert not result.success and told in out + err, (out, err)
        assert len((out + err).splitlines()) == 2
    assert ascendcl.last_run.returncode == (0 if told is None else
                                            5 if "code 5" in told else
                                            128 + ascendcl.last_run.signal)


def test_a_library_named_in_the_flags_links(shell):
    """--flags '-lm': the cell's flags come after its source, so the library is linked even
    where the linker drops libraries named before the objects that need them."""
    acllab.reset()
    result, out, err = cell(shell, "--c --flags '-lm -O0' -- x x x", r"""
        #include <math.h>
        #include <stdio.h>
        int main(int argc, char **argv) {
            volatile double x = argc * 4.0;
            printf("%.1f %.1f\n", sqrt(x), cbrt(x * 4.0));
            return 0;
        }
        """)
    assert result.success, (out, err)
    assert out == "4.0 4.0\n"
