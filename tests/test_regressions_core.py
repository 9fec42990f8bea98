"""Regression tests for defects of the runtime core (issue 9, point 6), one story each."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import setup_device

import acllab
from acllab import acl
from acllab.engine import Task
from acllab.model import compile_model, save

MiB = 1024 * 1024


@pytest.fixture(autouse=True)
def _fresh(fresh):
    yield fresh


def rt():
    return acllab.current_runtime()


def ok(result):
    ret = result[-1] if isinstance(result, tuple) else result
    assert ret == 0, acl.get_recent_err_msg()
    return result[0] if isinstance(result, tuple) and len(result) == 2 else None


# ---------------------------------------------------------------------------------------
# 1. a model's output lands in a pooled block that held a smaller buffer before
# ---------------------------------------------------------------------------------------

def _datasets(mid):
    """Device buffers for every input (zeroed) and output of a model; (desc, in, out, ptrs)."""
    desc = acl.mdl.create_desc()
    ok(acl.mdl.get_desc(desc, mid))
    ins, outs, ptrs = acl.mdl.create_dataset(), acl.mdl.create_dataset(), []
    for i in range(acl.mdl.get_num_inputs(desc)):
        n = acl.mdl.get_input_size_by_index(desc, i)
        p = ok(acl.rt.malloc(n, 0))
        ok(acl.rt.memset(p, n, 0, n))
        ok(acl.mdl.add_dataset_buffer(ins, acl.create_data_buffer(p, n)))
        ptrs.append(p)
    for i in range(acl.mdl.get_num_outputs(desc)):
        n = acl.mdl.get_output_size_by_index(desc, i)
        p = ok(acl.rt.malloc(n, 0))
        ok(acl.mdl.add_dataset_buffer(outs, acl.create_data_buffer(p, n)))
        ptrs.append(p)
    return desc, ins, outs, ptrs


def test_model_output_in_a_reused_pool_block_is_written_whole(tmp_path):
    """The dynamic-batch ResNet-50's 8-byte hidden input is freed; the fixed model's
    4,000-byte output reuses its block. The execution writes all 4,000 bytes (it used to
    raise ValueError out of write_outputs: the block kept its old, 64-byte store)."""
    dyn = compile_model("zoo:resnet50", input_shape="data:-1,3,224,224",
                        dynamic_batch_size=",".join(str(b) for b in range(1, 33)),
                        soc_version="Ascend310")
    fixed = compile_model("zoo:resnet50", input_shape="data:1,3,224,224",
                          soc_version="Ascend310")
    save(dyn, tmp_path / "dyn.om")
    save(fixed, tmp_path / "fixed.om")
    stream = setup_device()
    mid = ok(acl.mdl.load_from_file(str(tmp_path / "dyn.om")))
    desc, ins, outs, ptrs = _datasets(mid)
    hidden = ok(acl.mdl.get_input_index_by_name(desc, "ascend_mbatch_shape_data"))
    assert acl.mdl.get_input_size_by_index(desc, hidden) == 8
    ok(acl.mdl.set_dynamic_batch_size(mid, ins, hidden, 4))
    ok(acl.mdl.execute(mid, ins, outs))
    for p in ptrs:
        ok(acl.rt.free(p))
    ok(acl.mdl.unload(mid))

    mid2 = ok(acl.mdl.load_from_file(str(tmp_path / "fixed.om")))
    desc2, ins2, outs2, ptrs2 = _datasets(mid2)
    out = ptrs2[-1]
    assert acl.mdl.get_output_size_by_index(desc2, 0) == 4000
    assert out == ptrs[hidden], "the output should reuse the hidden input's block"
    ok(acl.mdl.execute_async(mid2, ins2, outs2, stream))
    assert acl.rt.synchronize_stream(stream) == 0
    host = ok(acl.rt.malloc_host(4000))
    ok(acl.rt.memcpy(host, 4000, out, 4000, 2))
    probs = np.frombuffer(acl.util.ptr_to_bytes(host, 4000), dtype=np.float32)
    assert np.allclose(probs, 1 / 1000)          # uniform: every byte was written


def test_a_failing_data_effect_is_a_fault_reported_at_sync_not_an_exception():
    """An exception inside a task's start or end never escapes an API call: the task records
    a fault and the next synchronisation of its stream returns the error code."""
    stream = setup_device()
    r = rt()
    s = r.stream_for(stream)

    def boom(task):
        raise ValueError("could not broadcast")

    r.launch(0)
    task = r.submit(Task("Broken", "memcpy", duration_ns=1000, device=0, on_end=boom), s)
    assert acl.rt.malloc(64, 0)[1] == 0          # the device passes the task's end here
    assert task.info["fault"] == "ValueError: could not broadcast"
    assert acl.rt.synchronize_stream(stream) == 507000
    assert "could not broadcast" in acl.get_recent_err_msg()
    assert acl.rt.synchronize_stream(stream) == 0   # reported once


def test_a_failing_model_execution_returns_507015(tmp_path, monkeypatch):
    """A blocking execute whose output write fails returns an AI Core exception; an
    asynchronous one returns it at synchronize_stream."""
    model = compile_model("zoo:tiny")
    save(model, tmp_path / "tiny.om")
    stream = setup_device()
    mid = ok(acl.mdl.load_from_file(str(tmp_path / "tiny.om")))
    _desc, ins, outs, _ptrs = _datasets(mid)
    loaded = rt().models[mid]

    def broken_forward(*args, **kwargs):
        raise RuntimeError("broken weights")

    monkeypatch.setattr(loaded.compiled, "forward", broken_forward)
    assert acl.mdl.execute(mid, ins, outs) == 507015
    assert "broken weights" in acl.get_recent_err_msg()
    assert acl.mdl.execute_async(mid, ins, outs, stream) == 0
    assert acl.rt.synchronize_stream(stream) == 507015


# ---------------------------------------------------------------------------------------
# 4. destroy_stream_force cancels the stream's own queued tasks, with or without a trace
# ---------------------------------------------------------------------------------------

class _NoScan(list):
    def __iter__(self):
        raise AssertionError("destroy_stream_force scanned every task of the runtime")


@pytest.mark.parametrize("record", [True, False])
def test_destroy_stream_force_discards_exactly_the_queued_tasks(record):
    """A copy queued behind a long one never runs once its stream is force-destroyed, also
    under configure(record=False) (which keeps no list of tasks); the stream's running task
    finishes; and the runtime does not scan all tasks to find the queued ones."""
    acllab.configure(record=record)
    assert acl.init() == 0 and acl.rt.set_device(0) == 0
    s = ok(acl.rt.create_stream())
    other = ok(acl.rt.create_stream())
    big = 16 * MiB
    dev_big, host_big = ok(acl.rt.malloc(big, 0)), ok(acl.rt.malloc_host(big))
    dev, host = ok(acl.rt.malloc(4096, 0)), ok(acl.rt.malloc_host(4096))
    data = bytes(range(256)) * 16
    ok(acl.rt.memcpy(host, 4096, acl.util.bytes_to_ptr(data), 4096, 0))
    for _ in range(50):                      # history on another stream
        ok(acl.rt.memcpy_async(dev_big, 4096, host, 4096, 1, other))
    ok(acl.rt.synchronize_stream(other))
    ok(acl.rt.memcpy_async(dev_big, big, host_big, big, 1, s))      # running
    ok(acl.rt.memcpy_async(dev, 4096, host, 4096, 1, s))            # queued behind it
    ok(acl.rt.memcpy_async(dev, 4096, host, 4096, 1, s))
    r = rt()
    assert len(r.queued_tasks(r.stream_for(s))) == 2
    saved, r.engine.tasks = r.engine.tasks, _NoScan(r.engine.tasks)
    try:
        assert acl.rt.destroy_stream_force(s) == 0
    finally:
        r.engine.tasks = saved
    acllab.host_work(1_000_000_000)          # long after both copies would have ended
    back = ok(acl.rt.malloc_host(4096))
    ok(acl.rt.memcpy(back, 4096, dev, 4096, 2))
    assert acl.util.ptr_to_bytes(back, 4096)[:4] == bytes([0xDE, 0xAD, 0xBE, 0xEF])
    if record:
        copies = [t for t in r.tasks if t.stream is not None and t.stream.handle == s]
        assert [t.cancelled for t in copies] == [False, True, True]
        assert copies[0].end_ns > copies[0].start_ns


# ---------------------------------------------------------------------------------------
# 3. a report thread of the program's own: the same log and trace on every run
# ---------------------------------------------------------------------------------------

def _program_with_a_report_thread():
    """Copies with a callback after each, reported to a Python thread that loops on
    process_report(5) until the main thread tells it to stop; (api_log, trace JSON, seen)."""
    import json
    import threading

    from acllab.analysis.trace import to_chrome_trace

    acllab.reset()
    assert acl.init() == 0 and acl.rt.set_device(0) == 0
    stream = ok(acl.rt.create_stream())
    stop, seen, codes = threading.Event(), [], set()

    def report_loop():
        while not stop.is_set():
            codes.add(acl.rt.process_report(5))

    thread = threading.Thread(target=report_loop)
    thread.start()
    ok(acl.rt.subscribe_report(thread.ident, stream))
    n = 1 << 20
    dev, host = ok(acl.rt.malloc(n, 0)), ok(acl.rt.malloc_host(n))
    for i in range(12):
        ok(acl.rt.memcpy_async(dev, n, host, n, 1, stream))
        ok(acl.rt.launch_callback(seen.append, i, 0, stream))
        acllab.host_work(40_000)
    ok(acl.rt.synchronize_stream(stream))
    stop.set()
    thread.join(10)
    assert not thread.is_alive()
    ok(acl.rt.unsubscribe_report(thread.ident, stream))
    ok(acl.rt.free(dev))
    ok(acl.rt.free_host(host))
    ok(acl.rt.destroy_stream(stream))
    ok(acl.rt.reset_device(0))
    ok(acl.finalize())
    r = rt()
    assert codes <= {0, 507012}          # ACL_ERROR_RT_REPORT_TIMEOUT when a poll times out
    return list(r.api_log), json.dumps(to_chrome_trace(r), sort_keys=True), seen, r.calls


def test_a_report_thread_gives_the_same_log_and_trace_on_every_run():
    """Three runs of one program with a report thread: byte-identical API log and trace
    (the thread's polls used to be logged and counted, as many as wall-clock time allowed)."""
    runs = [_program_with_a_report_thread() for _ in range(3)]
    log, trace, seen, calls = runs[0]
    assert seen == list(range(12))
    assert not [c for c in log if c[0] == "process_report"]
    for other in runs[1:]:
        assert repr(other[0]) == repr(log)
        assert other[1] == trace
        assert other[2:] == (seen, calls)


# ---------------------------------------------------------------------------------------
# 2. the host refills a pinned buffer through a view while a queued copy still reads it
# ---------------------------------------------------------------------------------------

NPY_UINT8 = 2
BATCH = 1 << 20          # a copy of about 0.1 ms: still queued when the host refills


def _double_buffering(slots: int, wait: bool):
    """Upload 6 batches through ``slots`` pinned buffers, each refilled through a view taken
    once at the start; ``wait``: before a refill, synchronise with the copy that last read
    the buffer (an event per slot). Returns (findings, the bytes that reached the device)."""
    import warnings

    from acllab.analysis import sanitizer

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        acllab.reset()
        assert acl.init() == 0 and acl.rt.set_device(0) == 0
        s = ok(acl.rt.create_stream())
        pinned = [ok(acl.rt.malloc_host(BATCH)) for _ in range(slots)]
        views = [acl.util.ptr_to_numpy(p, (BATCH,), NPY_UINT8) for p in pinned]
        events = [ok(acl.rt.create_event()) for _ in range(slots)]
        devs = [ok(acl.rt.malloc(BATCH, 0)) for _ in range(6)]
        for i in range(6):
            k = i % slots
            if wait and i >= slots:
                ok(acl.rt.synchronize_event(events[k]))
            views[k][:] = i + 1                       # refill: no API call
            ok(acl.rt.memcpy_async(devs[i], BATCH, pinned[k], BATCH, 1, s))
            ok(acl.rt.record_event(events[k], s))
        ok(acl.rt.synchronize_stream(s))
        back = ok(acl.rt.malloc_host(BATCH))
        got = []
        for d in devs:
            ok(acl.rt.memcpy(back, BATCH, d, BATCH, 2))
            got.append(acl.util.ptr_to_bytes(back, 1)[0])
        findings = sanitizer.analyze(rt())
        return findings, got, s, pinned


def test_refilling_a_buffer_a_queued_copy_reads_is_host_write_while_read():
    """One pinned buffer refilled through a view before the previous copy ran: the sanitizer
    reports host-write-while-read, naming the copy, its stream and the buffer."""
    findings, got, stream, pinned = _double_buffering(slots=1, wait=False)
    assert got != [1, 2, 3, 4, 5, 6]                 # the bug really sent wrong batches
    hits = [f for f in findings if f.kind == "host-write-while-read"]
    assert hits, "\n".join(map(str, findings))
    f = hits[0]
    assert f.buffers == [pinned[0]] and f.tasks
    assert f.streams == [rt().stream_for(stream).name]
    assert "zero-copy view" in f.message and f.times_ns[0] > 0


@pytest.mark.parametrize("slots", [1, 2])
def test_refilling_after_synchronising_with_the_copy_is_clean(slots):
    """The same uploads, each refill after synchronising with the copy that last read the
    buffer (one buffer or double buffering): correct data and no finding at all."""
    findings, got, _stream, _pinned = _double_buffering(slots=slots, wait=True)
    assert got == [1, 2, 3, 4, 5, 6]
    assert findings == [], "\n".join(map(str, findings))


def test_a_device_write_into_a_watched_host_buffer_is_not_the_hosts():
    """A download into the pinned buffer an earlier upload read (same stream, in order) is
    the device's write, not the host's: no finding."""
    from acllab.analysis import sanitizer

    stream = setup_device()
    host, dev, dev2 = ok(acl.rt.malloc_host(4096)), ok(acl.rt.malloc(4096, 0)), \
        ok(acl.rt.malloc(4096, 0))
    ok(acl.rt.memset(dev2, 4096, 7, 4096))
    ok(acl.rt.memcpy_async(dev, 4096, host, 4096, 1, stream))
    ok(acl.rt.memcpy_async(host, 4096, dev2, 4096, 2, stream))
    ok(acl.rt.synchronize_stream(stream))
    assert acl.util.ptr_to_bytes(host, 4) == b"\x07" * 4
    assert sanitizer.analyze(rt()) == []


def test_a_view_taken_after_a_copy_was_queued_is_watched_from_the_next_check():
    """A copy queued while no view of its pinned source existed is not fingerprinted; once
    the host holds a view (here a slice of Region.data, not through acl.util), a check
    fingerprints the range, and a later write through the view is the host's."""
    from acllab.analysis import sanitizer

    stream = setup_device()
    other = ok(acl.rt.create_stream())
    ev = ok(acl.rt.create_event())
    host, dev = ok(acl.rt.malloc_host(BATCH)), ok(acl.rt.malloc(BATCH, 0))
    ok(acl.rt.memcpy_async(dev, BATCH, host, BATCH, 1, stream))      # about 0.1 ms
    copy = rt().tasks[-1]
    assert rt()._quiet_views and not rt()._views                     # not fingerprinted
    view = rt().region(host).data                                    # a view, no API call
    ok(acl.rt.record_event(ev, other))
    ok(acl.rt.synchronize_event(ev))       # a check: the range gets its fingerprint now
    assert rt()._views and copy.end_ns < 0
    view[:16] = 7                          # the copy may still read it
    ok(acl.rt.synchronize_stream(stream))
    hits = [f for f in sanitizer.analyze(rt()) if f.kind == "host-write-while-read"]
    assert [f.tasks for f in hits] == [[copy.id]], hits


# -- a callback that has run does not keep the program's objects alive ------------------------

def test_a_run_callback_keeps_only_its_name():
    import gc
    import threading
    import weakref

    from acllab.callbacks import CallbackInfo

    class Worker:
        torn_down = []

        def __init__(self, tag):
            self.tag = tag
            self.seen = []

        def on_done(self, user_data):
            self.seen.append(user_data)

        def __del__(self):
            Worker.torn_down.append(self.tag)

    stream = setup_device()
    ok(acl.rt.subscribe_report(threading.get_ident(), stream))
    refs = []
    for tag, block in (("nb", 0), ("b", 1)):
        w = Worker(tag)
        refs.append(weakref.ref(w))
        ok(acl.rt.launch_callback(w.on_done, [tag], block, stream))
        del w
    ok(acl.rt.process_report(100))
    ok(acl.rt.process_report(100))
    ok(acl.rt.synchronize_stream(stream))
    gc.collect()
    assert [r() for r in refs] == [None, None]
    assert sorted(Worker.torn_down) == ["b", "nb"]
    infos = [t.info["callback"] for t in rt().engine.tasks if t.name == "HostCallback"]
    assert all(isinstance(i, CallbackInfo) for i in infos)
    assert [i.block for i in infos] == [False, True]
    assert all(str(i).endswith("Worker.on_done") for i in infos)
    ok(acl.rt.unsubscribe_report(threading.get_ident(), stream))


def test_a_new_runtime_has_an_empty_log_and_no_probes():
    r = acllab.reset()
    assert r.acl_log == [] and r.probe_calls == set()
