"""engine.count_submissions: the tasks any engine ran while a block ran (lesson 03's
"from the formula" item counts a prediction's device work with it)."""

from __future__ import annotations

import gc

from checks_support import failed, item

import acllab
from acllab import acl
from acllab.checks import check
from acllab.engine import Engine, Resource, Task, count_submissions
from acllab.hardware import transfer_ns


def _run(engine: Engine, n: int) -> None:
    dma = Resource("DMA")
    last = None
    for i in range(n):
        last = engine.submit_at(Task(f"t{i}", "memcpy", resource=dma, duration_ns=10), i, last)
    engine.run()


def test_counts_an_existing_engine_from_the_start_of_the_block():
    eng = Engine()
    _run(eng, 3)
    with count_submissions() as counted:
        assert counted.count == 0
        _run(eng, 5)
        assert counted.count == 5
    _run(eng, 2)
    assert counted.count == 7          # read after the block: the engines it saw, now


def test_counts_an_engine_made_and_dropped_inside_the_block():
    with count_submissions() as counted:
        eng = Engine(record=False)
        _run(eng, 4)
        del eng
        gc.collect()
    assert counted.count == 4


def test_nested_blocks_and_engines_made_after_the_block():
    with count_submissions() as outer:
        _run(Engine(), 2)
        with count_submissions() as inner:
            _run(Engine(), 3)
        _run(Engine(), 1)
    _run(Engine(), 10)
    assert (outer.count, inner.count) == (6, 3)


def test_counts_the_tasks_of_pyacl_calls():
    acllab.reset()
    acl.init()
    acl.rt.set_device(0)
    stream, _ = acl.rt.create_stream()
    dev, _ = acl.rt.malloc(4096, 0)
    host, _ = acl.rt.malloc_host(4096)
    with count_submissions() as counted:
        for _ in range(3):
            acl.rt.memcpy_async(dev, 4096, host, 4096, acl.ACL_MEMCPY_HOST_TO_DEVICE, stream)
    acl.rt.synchronize_stream(stream)
    assert counted.count == 3
    acl.rt.free(dev)
    acl.rt.free_host(host)
    acl.rt.destroy_stream(stream)
    acl.rt.reset_device(0)
    acl.finalize()
    acllab.session.restore_defaults()


def predict_with_an_engine_of_its_own(profile, nbytes, pinned):
    # times a copy on a private engine: a measurement, however it is dressed up
    eng = Engine(record=False)
    dma = Resource("H2D")
    ns = profile.copy_latency_ns + transfer_ns(nbytes, profile.h2d_bandwidth_bps)
    task = eng.submit_at(Task("copy", "memcpy", resource=dma, duration_ns=ns), 0)
    eng.run()
    return task.end_ns


def test_a_prediction_timed_on_a_private_engine_is_not_from_the_formula():
    result = check("03.predict", predict_with_an_engine_of_its_own, seeds=(0,))
    assert result.score == 0
    assert "from the formula" in failed(result)
    assert "ran 1 device task" in item(result, "from the formula").message
