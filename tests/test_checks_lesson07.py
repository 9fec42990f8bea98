"""acllab.checks.lesson07: the reference passes, the placeholder is "not done", known bugs fail.

Each known-wrong answer is a small story of a mistake a learner makes with an offline model,
and the test asserts which graded items catch it.
"""

from __future__ import annotations

import numpy as np
import pytest
from checks_support import failed, item, load_solutions

import acllab
from acllab import session
from acllab.checks import check, exercises, summary
from acllab.checks.lesson07 import tiny_model, tiny_model_bytes
from acllab.constants import (
    ACL_MEM_MALLOC_HUGE_FIRST,
    ACL_MEMCPY_DEVICE_TO_HOST,
    ACL_MEMCPY_HOST_TO_DEVICE,
    ACL_MEMCPY_HOST_TO_HOST,
)
from acllab.model import tiny_forward

H2D, D2H, HUGE = ACL_MEMCPY_HOST_TO_DEVICE, ACL_MEMCPY_DEVICE_TO_HOST, ACL_MEM_MALLOC_HUGE_FIRST
H2H = ACL_MEMCPY_HOST_TO_HOST


SOLUTIONS = load_solutions("07")


# -- the learner's building blocks, reused by the wrong answers below --------------------------

class Session:
    """Load, describe and wire up a model as the lesson does; each step can be skipped."""

    def __init__(self, acl, model_path):
        self.acl = acl
        self.model_id, _ = acl.mdl.load_from_file(model_path)
        self.desc = acl.mdl.create_desc()
        acl.mdl.get_desc(self.desc, self.model_id)
        self.batch = acl.mdl.get_input_dims(self.desc, 0)[0]["dims"][0]
        self.in_size = acl.mdl.get_input_size_by_index(self.desc, 0)
        self.out_size = acl.mdl.get_output_size_by_index(self.desc, 0)
        self.in_dev, _ = acl.rt.malloc(self.in_size, HUGE)
        self.out_dev, _ = acl.rt.malloc(self.out_size, HUGE)
        self.bufs = [acl.create_data_buffer(self.in_dev, self.in_size),
                     acl.create_data_buffer(self.out_dev, self.out_size)]
        self.inputs = acl.mdl.create_dataset()
        acl.mdl.add_dataset_buffer(self.inputs, self.bufs[0])
        self.outputs = acl.mdl.create_dataset()
        acl.mdl.add_dataset_buffer(self.outputs, self.bufs[1])

    def copy_in(self, chunk):
        data = np.ascontiguousarray(chunk, dtype=np.float32).tobytes()
        self.acl.rt.memcpy(self.in_dev, self.in_size, self.acl.util.bytes_to_ptr(data),
                           len(data), H2D)

    def read_out(self, rows):
        out = bytearray(self.out_size)
        self.acl.rt.memcpy(self.acl.util.bytes_to_ptr(out), self.out_size, self.out_dev,
                           self.out_size, D2H)
        return np.frombuffer(bytes(out), np.float32).reshape(-1, 4)[:rows]

    def release(self, buffers=True, datasets=True, memory=True, desc=True, model=True):
        acl = self.acl
        if datasets:
            acl.mdl.destroy_dataset(self.inputs)
            acl.mdl.destroy_dataset(self.outputs)
        if buffers:
            for buf in self.bufs:
                acl.destroy_data_buffer(buf)
        if memory:
            acl.rt.free(self.in_dev)
            acl.rt.free(self.out_dev)
        if desc:
            acl.mdl.destroy_desc(self.desc)
        if model:
            acl.mdl.unload(self.model_id)


# -- registration and more seeds (the generic promises: test_checks_common.py) -----------------

def test_lesson07_registers_its_exercise():
    assert [(ex.id, ex.function) for ex in exercises("07")] == [("07.infer", "infer")]
    assert [len(ex.seeds) for ex in exercises("07")] == [3]       # cases per check


def test_reference_solution_reports_its_items():
    result = check("07.infer", SOLUTIONS.infer)
    assert result.status == "passed", str(result)
    assert [i.name for i in result.items] == ["runs", "labels", "ran on the device",
                                              "again", "sanitizer", "resources"]


def test_reference_solution_passes_on_more_seeds():
    result = check("07.infer", SOLUTIONS.infer, seeds=range(3, 9))
    assert result.status == "passed", str(result)


def test_cases_cover_several_batch_sizes():
    seen = set()

    def spy(acl, model_path, images):
        s = Session(acl, model_path)
        seen.add((s.batch, len(images)))
        s.release()
        return SOLUTIONS.infer(acl, model_path, images)

    assert check("07.infer", spy).passed
    assert {b for b, _ in seen} == {1, 2, 4}
    assert all(n % b == 0 and n > b for b, n in seen)


# -- known-wrong answers -----------------------------------------------------------------------

def infer_leaks_everything(acl, model_path, images):
    s = Session(acl, model_path)
    labels = []
    for k in range(0, len(images), s.batch):
        s.copy_in(images[k:k + s.batch])
        acl.mdl.execute(s.model_id, s.inputs, s.outputs)
        labels += [int(x) for x in s.read_out(s.batch).argmax(axis=1)]
    return labels


def infer_keeps_data_buffers(acl, model_path, images):
    s = Session(acl, model_path)
    labels = []
    for k in range(0, len(images), s.batch):
        s.copy_in(images[k:k + s.batch])
        acl.mdl.execute(s.model_id, s.inputs, s.outputs)
        labels += [int(x) for x in s.read_out(s.batch).argmax(axis=1)]
    s.release(buffers=False)               # destroy_dataset does not destroy them
    return labels


def infer_one_image_per_execute(acl, model_path, images):
    s = Session(acl, model_path)               # assumes batch 1 instead of reading dims
    labels = []
    for image in images:
        s.copy_in(image[None])
        acl.mdl.execute(s.model_id, s.inputs, s.outputs)
        labels.append(int(s.read_out(1).argmax()))
    s.release()
    return labels


def infer_in_numpy(acl, model_path, images):
    return [int(k) for k in tiny_forward(images).argmax(axis=1)]


def infer_returns_probabilities(acl, model_path, images):
    s = Session(acl, model_path)
    probs = []
    for k in range(0, len(images), s.batch):
        s.copy_in(images[k:k + s.batch])
        acl.mdl.execute(s.model_id, s.inputs, s.outputs)
        probs.append(s.read_out(s.batch))
    s.release()
    return np.vstack(probs)


def infer_async_without_sync(acl, model_path, images):
    s = Session(acl, model_path)
    stream, _ = acl.rt.create_stream()
    labels = []
    for k in range(0, len(images), s.batch):
        s.copy_in(images[k:k + s.batch])
        acl.mdl.execute_async(s.model_id, s.inputs, s.outputs, stream)
        host, _ = acl.rt.malloc_host(s.out_size)
        acl.rt.memcpy_async(host, s.out_size, s.out_dev, s.out_size, D2H, stream)
        probs = np.frombuffer(acl.util.ptr_to_bytes(host, s.out_size), np.float32)
        labels += [int(x) for x in np.nan_to_num(probs).reshape(-1, 4).argmax(axis=1)]
        acl.rt.synchronize_stream(stream)
        acl.rt.free_host(host)
    acl.rt.destroy_stream(stream)
    s.release()
    return labels


def infer_first_batch_only(acl, model_path, images):
    s = Session(acl, model_path)
    s.copy_in(images[:s.batch])
    acl.mdl.execute(s.model_id, s.inputs, s.outputs)
    labels = [int(x) for x in s.read_out(s.batch).argmax(axis=1)]
    s.release()
    return labels


def infer_reuses_the_first_batch(acl, model_path, images):
    s = Session(acl, model_path)
    s.copy_in(images[:s.batch])
    labels = []
    for _ in range(0, len(images), s.batch):           # forgets to copy the next batch in
        acl.mdl.execute(s.model_id, s.inputs, s.outputs)
        labels += [int(x) for x in s.read_out(s.batch).argmax(axis=1)]
    s.release()
    return labels


def test_leaking_everything_is_reported_kind_by_kind():
    result = check("07.infer", infer_leaks_everything)
    assert failed(result) == {"resources"}
    message = item(result, "resources").message
    for words in ("the model (never unloaded)", "2 data buffers (never destroyed)",
                  "2 datasets", "2 device buffers (never freed)",
                  "1 model description (never destroyed)"):
        assert words in message, message
    hint = item(result, "resources").hint
    assert "acl.mdl.unload" in hint and "destroy_dataset does not destroy" in hint


def test_destroying_datasets_does_not_destroy_their_data_buffers():
    result = check("07.infer", infer_keeps_data_buffers)
    assert failed(result) == {"resources"}
    message = item(result, "resources").message
    assert message == "infer left behind: 2 data buffers (never destroyed)"
    assert "acl.destroy_data_buffer" in item(result, "resources").hint


def test_assuming_batch_1_reads_uninitialised_input_on_a_batch_4_model():
    assert check("07.infer", infer_one_image_per_execute, seeds=(0,)).passed   # batch 1
    result = check("07.infer", infer_one_image_per_execute, seeds=(1,))          # batch 4
    assert failed(result) == {"sanitizer"}
    assert "uninitialised-read" in item(result, "sanitizer").message
    assert "whole batch" in item(result, "sanitizer").hint


def test_labels_computed_in_numpy_are_not_trusted():
    result = check("07.infer", infer_in_numpy)
    assert failed(result) == {"ran on the device"}
    assert result.score == 0
    assert "never ran on the device" in item(result, "ran on the device").message


def test_returning_probabilities_instead_of_labels_fails():
    result = check("07.infer", infer_returns_probabilities)
    assert failed(result) == {"labels"}
    assert "look like the probabilities" in item(result, "labels").message
    assert "argmax" in item(result, "labels").hint


def test_reading_outputs_before_synchronising_fails():
    result = check("07.infer", infer_async_without_sync)
    assert {"labels", "sanitizer"} <= failed(result)
    assert "host-read-before-sync" in item(result, "sanitizer").message


def test_returning_only_the_first_batch_fails_with_a_count():
    result = check("07.infer", infer_first_batch_only)
    assert failed(result) == {"labels", "ran on the device"}
    assert "only the first batch?" in item(result, "labels").message
    assert "not enough" in item(result, "ran on the device").message


def test_running_the_same_batch_again_and_again_fails_without_showing_answers():
    result = check("07.infer", infer_reuses_the_first_batch, seeds=(0,))
    assert failed(result) == {"labels", "ran on the device"}
    assert result.score == 0
    message = item(result, "labels").message
    assert "differ from the model's own answer" in message
    assert "copy" in item(result, "labels").hint.lower()


def test_a_helper_that_finalizes_fails_resources_not_the_check():
    def infer(acl, model_path, images):
        labels = SOLUTIONS.infer(acl, model_path, images)
        acl.rt.reset_device(0)
        acl.finalize()
        return labels

    result = check("07.infer", infer)
    assert failed(result) == {"resources", "again"}   # its caller cannot ask again
    assert "belong to its caller" in item(result, "resources").message


def test_an_exception_quotes_the_learners_line():
    def infer(acl, model_path, images):
        model_id, ret = acl.mdl.load_from_file(model_path + ".missing")
        return [model_id / 0]

    result = check("07.infer", infer)
    assert failed(result) == {"runs"}
    runs = item(result, "runs").message
    assert "ZeroDivisionError" in runs and "model_id / 0" in runs
    assert any("145002" in w or "100003" in w or "model" in w for w in result.warnings)


# -- grading never disturbs the learner --------------------------------------------------------

def test_settings_and_the_learners_runtime_are_restored(fresh):
    from acllab import acl

    acllab.configure("ascend910b", strict=True)
    runtime = acllab.current_runtime()
    acl.init()
    acl.rt.set_device(0)
    settings = dict(session._settings)
    tasks = len(runtime.tasks)
    assert check("07.infer", SOLUTIONS.infer).passed
    check("07.infer", infer_leaks_everything)
    assert session._settings == settings
    assert acllab.current_runtime() is runtime and len(runtime.tasks) == tasks


def test_the_check_compiles_each_batch_once_and_keeps_only_bytes():
    assert tiny_model_bytes(4) is tiny_model_bytes(4)
    assert isinstance(tiny_model_bytes(4), bytes)
    assert tiny_model(4) is not tiny_model(4)          # a fresh object each time
    assert tiny_model(4).inputs[0].dims == (4, 1, 16, 16)


def test_summary_counts_the_exercise():
    check("07.infer", SOLUTIONS.infer)
    assert summary("07").passed == 1


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_messages_never_show_the_expected_labels(seed):
    def constant(acl, model_path, images):
        s = Session(acl, model_path)
        s.release()
        return [0] * len(images)

    result = check("07.infer", constant, seeds=(seed,))
    labels = item(result, "labels")
    assert not labels.passed
    assert "[" not in labels.message and "expected" not in labels.message


# -- device work that is not the work graded ---------------------------------------------------

def _host_labels(images):
    return [int(k) for k in tiny_forward(images).argmax(axis=1)]


def infer_device_on_zeros(acl, model_path, images):
    """The model runs on the device, on zeros; the labels come from numpy on the host."""
    s = Session(acl, model_path)
    for k in range(0, len(images), s.batch):
        s.copy_in(np.zeros_like(images[k:k + s.batch]))
        acl.mdl.execute(s.model_id, s.inputs, s.outputs)
        s.read_out(s.batch)
    s.release()
    return _host_labels(images)


def infer_device_never_read_back(acl, model_path, images):
    """The model runs on the right images, but the labels never come from its outputs."""
    s = Session(acl, model_path)
    for k in range(0, len(images), s.batch):
        s.copy_in(images[k:k + s.batch])
        acl.mdl.execute(s.model_id, s.inputs, s.outputs)
    s.release()
    return _host_labels(images)


def infer_host_writes_the_output(acl, model_path, images):
    """Runs the model, then overwrites its output buffer with host-computed probabilities."""
    s = Session(acl, model_path)
    labels = []
    for k in range(0, len(images), s.batch):
        s.copy_in(np.zeros_like(images[k:k + s.batch]))
        acl.mdl.execute(s.model_id, s.inputs, s.outputs)
        probs = tiny_forward(images[k:k + s.batch]).astype(np.float32).tobytes()
        acl.rt.memcpy(s.out_dev, s.out_size, acl.util.bytes_to_ptr(probs), len(probs), H2D)
        labels += [int(x) for x in s.read_out(s.batch).argmax(axis=1)]
    s.release()
    return labels


def infer_with_a_model_of_its_own(acl, model_path, images):
    """Ignores model_path: compiles and runs its own batch-1 model."""
    from acllab.model import compile_model, dumps

    blob = dumps(compile_model("zoo:tiny", input_shape="data:1,1,16,16",
                               soc_version="Ascend310"))
    model_id, _ = acl.mdl.load_from_mem(acl.util.bytes_to_ptr(blob), len(blob))
    s = Session.__new__(Session)
    s.acl, s.model_id = acl, model_id
    s.desc = acl.mdl.create_desc()
    acl.mdl.get_desc(s.desc, model_id)
    s.batch, s.in_size = 1, acl.mdl.get_input_size_by_index(s.desc, 0)
    s.out_size = acl.mdl.get_output_size_by_index(s.desc, 0)
    s.in_dev, _ = acl.rt.malloc(s.in_size, HUGE)
    s.out_dev, _ = acl.rt.malloc(s.out_size, HUGE)
    s.bufs = [acl.create_data_buffer(s.in_dev, s.in_size),
              acl.create_data_buffer(s.out_dev, s.out_size)]
    s.inputs, s.outputs = acl.mdl.create_dataset(), acl.mdl.create_dataset()
    acl.mdl.add_dataset_buffer(s.inputs, s.bufs[0])
    acl.mdl.add_dataset_buffer(s.outputs, s.bufs[1])
    labels = []
    for image in images:
        s.copy_in(image[None])
        acl.mdl.execute(model_id, s.inputs, s.outputs)
        labels.append(int(s.read_out(1).argmax()))
    s.release()
    return labels


@pytest.mark.parametrize("fn, words", [
    (infer_device_on_zeros, "input buffer held other bytes"),
    (infer_device_never_read_back, "no copy brought"),
    (infer_host_writes_the_output, "host"),
    (infer_with_a_model_of_its_own, "another one"),
])
def test_device_work_that_did_not_produce_the_labels_scores_zero(fn, words):
    result = check("07.infer", fn, seeds=(1,))
    assert "ran on the device" in failed(result), str(result)
    assert words in item(result, "ran on the device").message, str(result)
    assert result.score == 0


# -- answers that are not the learner's own work, or that break the rules ----------------------

def test_an_empty_function_scores_zero():
    def infer(acl, model_path, images):
        pass

    for fn in (infer, lambda *a: None):
        result = check("07.infer", fn)
        assert result.status == "failed" and result.score == 0, str(result)
        assert "labels" in failed(result)


def test_calling_the_graders_helpers_fails_as_not_own_work():
    import acllab.checks.lesson07 as L

    def infer(acl, model_path, images):
        L.tiny_model(4)
        return SOLUTIONS.infer(acl, model_path, images)

    result = check("07.infer", infer)
    assert failed(result) == {"own work"} and result.score == 0, str(result)
    assert "lesson07.tiny_model" in item(result, "own work").message


@pytest.mark.parametrize("tamper", ["sanitizer", "item", "runtime"])
def test_tampering_fails_and_is_undone(tamper):
    import acllab.checks._common as common
    import acllab.checks.lesson07 as L

    analyze, labels_item = common.sanitizer.analyze, L._labels_item

    def infer(acl, model_path, images):
        if tamper == "sanitizer":
            common.sanitizer.analyze = lambda rt: []
        elif tamper == "item":
            L._labels_item = lambda *a: L.Item("labels", True, "fine")
        labels = infer_async_without_sync(acl, model_path, images)
        if tamper == "runtime":         # hide the race: take the work out of the trace
            del acllab.current_runtime().engine.tasks[:]
        return labels

    result = check("07.infer", infer)
    assert failed(result) == {"acllab unchanged"} and result.score == 0, str(result)
    assert common.sanitizer.analyze is analyze and L._labels_item is labels_item


@pytest.mark.parametrize("body", ["while True:\n        pass", "time.sleep(100)",
                                  "try:\n        time.sleep(100)\n"
                                  "    except BaseException:\n        return [0]"])
def test_a_hang_is_stopped_by_the_wall_clock_limit(body):
    import time

    namespace = {"time": time}
    exec(f"def infer(acl, model_path, images):\n    {body}\n", namespace)
    started = time.perf_counter()
    result = check("07.infer", namespace["infer"], limit_s=1)
    assert time.perf_counter() - started < 15
    assert failed(result) == {"runs"} and result.score == 0
    assert "wall-clock" in item(result, "runs").message


def test_system_exit_is_contained():
    def infer(acl, model_path, images):
        raise SystemExit(0)

    result = check("07.infer", infer)
    assert failed(result) == {"runs"} and result.score == 0
    assert "SystemExit" in item(result, "runs").message


def test_process_items_count_only_once_the_labels_are_right():
    result = check("07.infer", infer_leaks_everything)
    assert 0 < result.score < 1 and failed(result) == {"resources"}
    racy = check("07.infer", infer_async_without_sync)
    assert "labels" in failed(racy) and racy.score == 0


# -- right answers written differently from the reference --------------------------------------

def infer_async_pinned(acl, model_path, images):
    """execute_async on a stream of its own, outputs through a pinned buffer."""
    from acllab.constants import ACL_MEM_MALLOC_NORMAL_ONLY

    model_id, _ = acl.mdl.load_from_file(model_path)
    desc = acl.mdl.create_desc()
    acl.mdl.get_desc(desc, model_id)
    dims = acl.mdl.get_input_dims(desc, 0)[0]["dims"]
    batch = dims[0]
    sizes = (acl.mdl.get_input_size_by_index(desc, 0), acl.mdl.get_output_size_by_index(desc, 0))
    ptrs = [acl.rt.malloc(n, ACL_MEM_MALLOC_NORMAL_ONLY)[0] for n in sizes]
    bufs = [acl.create_data_buffer(p, n) for p, n in zip(ptrs, sizes, strict=True)]
    sets = [acl.mdl.create_dataset(), acl.mdl.create_dataset()]
    for ds, buf in zip(sets, bufs, strict=True):
        acl.mdl.add_dataset_buffer(ds, buf)
    stream, _ = acl.rt.create_stream()
    host_in, _ = acl.rt.malloc_host(sizes[0])
    host_out, _ = acl.rt.malloc_host(sizes[1])
    labels = []
    for k in range(len(images) // batch):
        chunk = np.ascontiguousarray(images[k * batch:(k + 1) * batch], np.float32).tobytes()
        acl.rt.memcpy(host_in, sizes[0], acl.util.bytes_to_ptr(chunk), len(chunk), H2H)
        acl.rt.memcpy_async(ptrs[0], sizes[0], host_in, sizes[0], H2D, stream)
        acl.mdl.execute_async(model_id, sets[0], sets[1], stream)
        acl.rt.memcpy_async(host_out, sizes[1], ptrs[1], sizes[1], D2H, stream)
        acl.rt.synchronize_stream(stream)
        out = np.frombuffer(acl.util.ptr_to_bytes(host_out, sizes[1]), np.float32)
        labels.extend(np.argmax(out.reshape(batch, -1), axis=1).tolist())
    acl.rt.destroy_stream(stream)
    acl.rt.free_host(host_in)
    acl.rt.free_host(host_out)
    for ds in sets:
        acl.mdl.destroy_dataset(ds)
    for buf in bufs:
        acl.destroy_data_buffer(buf)
    for p in ptrs:
        acl.rt.free(p)
    acl.mdl.destroy_desc(desc)
    acl.mdl.unload(model_id)
    return labels


def infer_all_on_device_then_row_by_row(acl, model_path, images):
    """Every image copied in at once; one output buffer per batch; rows read back one by one."""
    s = Session(acl, model_path)
    count, batches = len(images), len(images) // s.batch
    blob = np.ascontiguousarray(images, np.float32).tobytes()
    all_in, _ = acl.rt.malloc(len(blob), HUGE)
    all_out, _ = acl.rt.malloc(s.out_size * batches, HUGE)
    acl.rt.memcpy(all_in, len(blob), acl.util.bytes_to_ptr(blob), len(blob), H2D)
    row = s.out_size // s.batch
    for k in range(batches):
        ins, outs = acl.mdl.create_dataset(), acl.mdl.create_dataset()
        bi = acl.create_data_buffer(all_in + k * s.in_size, s.in_size)
        bo = acl.create_data_buffer(all_out + k * s.out_size, s.out_size)
        acl.mdl.add_dataset_buffer(ins, bi)
        acl.mdl.add_dataset_buffer(outs, bo)
        acl.mdl.execute(s.model_id, ins, outs)
        acl.mdl.destroy_dataset(ins)
        acl.mdl.destroy_dataset(outs)
        acl.destroy_data_buffer(bi)
        acl.destroy_data_buffer(bo)
    host = bytearray(row * count)
    base = acl.util.bytes_to_ptr(host)
    for i in range(count):
        acl.rt.memcpy(base + i * row, row, all_out + i * row, row, D2H)
    acl.rt.free(all_in)
    acl.rt.free(all_out)
    s.release()
    probs = np.frombuffer(bytes(host), np.float32).reshape(count, -1)
    return [int(np.argmax(p)) for p in probs]


@pytest.mark.parametrize("fn", [infer_async_pinned, infer_all_on_device_then_row_by_row])
def test_right_answers_written_differently_pass(fn):
    result = check("07.infer", fn, seeds=range(0, 5))
    assert result.status == "passed" and result.score == 1.0, str(result)


def test_an_infer_that_remembers_its_labels_by_count_fails_again():
    cache = {}

    def infer(acl, model_path, images):
        if len(images) not in cache:
            cache[len(images)] = SOLUTIONS.infer(acl, model_path, images)
        return cache[len(images)]

    result = check("07.infer", infer)
    assert result.score == 0 and failed(result) == {"again"}, str(result)
    assert "other images" in item(result, "again").message
