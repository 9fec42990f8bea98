"""The event heap, told as small stories: each test builds tasks, runs the engine and asserts
the exact log of ``(what happened, virtual time)`` it produced (SimPy's testing style)."""

from __future__ import annotations

import pytest

from acllab.engine import Deadlock, Engine, Resource, Task


class Story:
    """An engine plus a log: every task it makes appends ``(name + ' start'|' end', now)``."""

    def __init__(self, record: bool = True):
        self.engine = Engine(record=record)
        self.log: list[tuple[str, int]] = []

    def task(self, name: str, duration_ns=0, resource: Resource | None = None, *,
             units: int = 1, deps: tuple = ()) -> Task:
        eng, log = self.engine, self.log

        def on_start(t: Task) -> None:
            assert t.start_ns == eng.now_ns
            log.append((f"{name} start", eng.now_ns))

        def on_end(t: Task) -> None:
            assert t.end_ns == eng.now_ns
            log.append((f"{name} end", eng.now_ns))

        return Task(name, "test", duration_ns=duration_ns, resource=resource, units=units,
                    deps=tuple((d, "test") for d in deps), on_start=on_start, on_end=on_end)

    def submit(self, task: Task, at_ns: int = 0) -> Task:
        return self.engine.submit(task, at_ns)


# -- one resource: FIFO ------------------------------------------------------------------

def test_fifo_on_one_resource():
    s = Story()
    dma = Resource("DMA")
    s.submit(s.task("a", 10, dma))
    s.submit(s.task("b", 20, dma))
    s.submit(s.task("c", 5, dma))
    assert s.engine.run_all() == 35
    assert s.log == [
        ("a start", 0), ("a end", 10),
        ("b start", 10), ("b end", 30),
        ("c start", 30), ("c end", 35),
    ]
    assert dma.in_use == 0 and not dma.queue


def test_tasks_without_a_resource_run_concurrently():
    s = Story()
    s.submit(s.task("a", 10))
    s.submit(s.task("b", 4))
    s.engine.run_all()
    assert s.log == [("a start", 0), ("b start", 0), ("b end", 4), ("a end", 10)]


def test_later_submission_waits_only_if_resource_busy():
    s = Story()
    dma = Resource("DMA")
    s.submit(s.task("a", 10, dma), 0)
    s.submit(s.task("b", 10, dma), 3)   # arrives while a runs
    s.submit(s.task("c", 10, dma), 50)  # arrives to an idle engine
    s.engine.run_all()
    assert s.log == [("a start", 0), ("a end", 10), ("b start", 10), ("b end", 20),
                     ("c start", 50), ("c end", 60)]
    a, b, c = s.engine.tasks
    assert (b.submit_ns, b.ready_ns, b.start_ns) == (3, 3, 10)
    assert (c.submit_ns, c.ready_ns, c.start_ns) == (50, 50, 50)


# -- capacity > 1 -----------------------------------------------------------------------

def test_ai_core_with_two_units_runs_two_at_once():
    s = Story()
    aicore = Resource("AI Core", capacity=2)
    s.submit(s.task("k1", 10, aicore))
    s.submit(s.task("k2", 20, aicore))
    s.submit(s.task("k3", 5, aicore))
    s.submit(s.task("k4", 5, aicore))
    s.engine.run_all()
    assert s.log == [
        ("k1 start", 0), ("k2 start", 0),
        ("k1 end", 10), ("k3 start", 10),
        ("k3 end", 15), ("k4 start", 15),
        ("k2 end", 20), ("k4 end", 20),   # equal ends: the one scheduled first goes first
    ]


def test_multi_unit_task_blocks_the_queue_head_first_come_first_served():
    s = Story()
    aicore = Resource("AI Core", capacity=2)
    s.submit(s.task("small", 10, aicore, units=1))
    s.submit(s.task("wide", 5, aicore, units=2))   # needs both cores: waits for "small"
    s.submit(s.task("late", 3, aicore, units=1))   # one core is free, but FIFO: behind "wide"
    s.engine.run_all()
    assert s.log == [
        ("small start", 0), ("small end", 10),
        ("wide start", 10), ("wide end", 15),
        ("late start", 15), ("late end", 18),
    ]


def test_capacity_is_never_exceeded():
    s = Story()
    aicore = Resource("AI Core", capacity=2)
    peak = [0]

    def watch(t: Task) -> None:
        peak[0] = max(peak[0], aicore.in_use)

    for i in range(7):
        t = s.task(f"k{i}", 3 + i, aicore)
        t.on_start = watch
        s.submit(t)
    s.engine.run_all()
    assert peak[0] == 2
    assert aicore.in_use == 0


# -- deterministic ties -----------------------------------------------------------------

def test_ties_go_by_submission_order():
    s = Story()
    dma = Resource("DMA")
    for name in ("z", "y", "x"):           # names out of order on purpose
        s.submit(s.task(name, 0 if name == "y" else 7, dma), 5)
    s.engine.run_all()
    assert s.log == [("z start", 5), ("z end", 12), ("y start", 12), ("y end", 12),
                     ("x start", 12), ("x end", 19)]


def test_ties_ignore_submission_time_order_of_calls():
    # b is submitted (as a call) before a, but a's ready time is earlier: time decides first,
    # the submission sequence only breaks ties.
    s = Story()
    dma = Resource("DMA")
    s.submit(s.task("b", 4, dma), 2)
    s.submit(s.task("a", 4, dma), 1)
    s.engine.run_all()
    assert s.log == [("a start", 1), ("a end", 5), ("b start", 5), ("b end", 9)]


def test_simultaneous_ends_dispatch_in_order():
    s = Story()
    s.submit(s.task("long", 10))
    s.submit(s.task("short", 4), 6)
    s.engine.run_all()
    # both end at 10: the one scheduled first (long) ends first
    assert s.log == [("long start", 0), ("short start", 6), ("long end", 10), ("short end", 10)]


def test_same_story_twice_gives_the_same_log():
    def build() -> list[tuple[str, int]]:
        s = Story()
        aicore, dma = Resource("AI Core", 2), Resource("DMA")
        prev = None
        for i in range(12):
            res = aicore if i % 3 else dma
            t = s.task(f"t{i}", (i * 7) % 5 + 1, res, deps=(prev,) if prev and i % 4 == 0 else ())
            s.submit(t, i // 3)
            prev = t
        s.engine.run_all()
        return s.log

    assert build() == build()


# -- END before READY at equal times ----------------------------------------------------

def test_resource_freed_at_t_is_reused_at_t():
    s = Story()
    dma = Resource("DMA")
    # b is submitted first (lower sequence number) but becomes ready exactly when a ends:
    # the end is processed first, so b finds the engine free and starts at once.
    s.submit(s.task("b", 5, dma), 10)
    s.submit(s.task("a", 10, dma), 0)
    s.engine.run_all()
    assert s.log == [("a start", 0), ("a end", 10), ("b start", 10), ("b end", 15)]
    b = s.engine.tasks[0]
    assert (b.ready_ns, b.start_ns) == (10, 10)


def test_end_before_ready_on_a_full_pool():
    s = Story()
    aicore = Resource("AI Core", 2)
    s.submit(s.task("k1", 10, aicore))
    s.submit(s.task("k2", 10, aicore))
    s.submit(s.task("k3", 1, aicore), 10)   # ready at 10, when both cores free up
    s.engine.run_all()
    assert s.log == [("k1 start", 0), ("k2 start", 0), ("k1 end", 10), ("k2 end", 10),
                     ("k3 start", 10), ("k3 end", 11)]


# -- dependencies -----------------------------------------------------------------------

def test_dependency_waits_for_all_its_deps():
    s = Story()
    h2d, aicore = Resource("H2D"), Resource("AI Core", 2)
    a = s.submit(s.task("copy", 10, h2d))
    b = s.submit(s.task("other", 25, aicore))
    c = s.submit(s.task("kernel", 5, aicore, deps=(a, b)))
    s.engine.run_all()
    assert s.log == [("copy start", 0), ("other start", 0), ("copy end", 10),
                     ("other end", 25), ("kernel start", 25), ("kernel end", 30)]
    assert c.ready_ns == 25
    assert c.deps == ((a.id, "test"), (b.id, "test"))   # the trace keeps ids, not tasks


def test_dependency_on_a_finished_task_is_ready_at_submission():
    s = Story()
    a = s.submit(s.task("a", 10))
    s.engine.run_all()
    b = s.submit(s.task("b", 3, deps=(a,)), 40)
    s.engine.run_all()
    assert b.pending == 0
    assert (b.ready_ns, b.start_ns, b.end_ns) == (40, 40, 43)


def test_dependency_chain_with_resource_contention():
    s = Story()
    dma = Resource("DMA")
    a = s.submit(s.task("a", 10, dma))
    s.submit(s.task("x", 10, dma))          # queued behind a
    s.submit(s.task("b", 1, dma, deps=(a,)))  # ready at 10, but x got the engine first
    s.engine.run_all()
    assert s.log == [("a start", 0), ("a end", 10), ("x start", 10), ("x end", 20),
                     ("b start", 20), ("b end", 21)]


def test_dependency_ready_time_equals_dep_end_and_reuses_resource():
    s = Story()
    dma = Resource("DMA")
    a = s.submit(s.task("a", 10, dma))
    b = s.submit(s.task("b", 10, dma, deps=(a,)))
    s.engine.run_all()
    assert (b.ready_ns, b.start_ns, b.end_ns) == (10, 10, 20)



def test_a_dependency_that_is_also_the_stream_predecessor_is_waited_for_once():
    # a model's ops: each names the previous op as "model" and has it as its stream's last
    s = Story()
    core = Resource("AI Core", 2)
    first = s.submit(s.task("op0", 10, core, units=2))
    second = s.task("op1", 5, core, units=2, deps=(first,))
    s.engine.submit(second, 0, after=first)
    assert second.pending == 1 and first.dependents == [second]
    assert second.deps == ((first.id, "stream"), (first.id, "test"))   # the trace keeps both
    heap_before = s.engine._seq
    s.engine.run_all()
    assert s.log == [("op0 start", 0), ("op0 end", 10), ("op1 start", 10), ("op1 end", 15)]
    assert s.engine._seq - heap_before == 1   # op1's end only: no ready entry on the heap

# -- open durations ---------------------------------------------------------------------

def test_open_duration_task_ends_when_finished():
    s = Story()
    lane = Resource("callback lane")
    blocker = s.submit(s.task("blocking", lambda t: None, lane))
    after = s.submit(s.task("after", 2, lane))
    s.engine.run_until(100)
    assert s.log == [("blocking start", 0)]
    assert s.engine.now_ns == 100 and s.engine.idle
    assert not blocker.done and after.start_ns == -1
    s.engine.finish(blocker, 120)
    s.engine.run_all()
    assert s.log == [("blocking start", 0), ("blocking end", 120),
                     ("after start", 120), ("after end", 122)]
    assert blocker.duration_ns == 120


def test_callable_duration_is_resolved_at_start():
    s = Story()
    dma = Resource("DMA")
    s.submit(s.task("a", 10, dma))
    b = s.submit(s.task("b", lambda t: 100 - t.start_ns, dma))
    s.engine.run_all()
    assert s.log == [("a start", 0), ("a end", 10), ("b start", 10), ("b end", 100)]
    assert b.duration_ns == 90


# -- cancelled tasks ---------------------------------------------------------------------

def test_cancelled_task_takes_no_time_and_runs_no_effects():
    s = Story()
    dma = Resource("DMA")
    a = s.submit(s.task("a", 10, dma))
    ghost = s.submit(s.task("ghost", 1000, dma, deps=(a,)))
    after = s.submit(s.task("after", 5, dma, deps=(ghost,)))
    ghost.cancelled = True
    s.engine.run_all()
    assert s.log == [("a start", 0), ("a end", 10), ("after start", 10), ("after end", 15)]
    assert (ghost.start_ns, ghost.end_ns, ghost.duration_ns) == (10, 10, 0)
    assert after.start_ns == 10


def test_cancelled_open_duration_task_does_not_hang():
    # cancelled before it started (destroy_stream_force cancels only tasks not yet started)
    s = Story()
    a = s.submit(s.task("a", 5))
    ghost = s.submit(s.task("ghost", lambda t: None, deps=(a,)))
    ghost.cancelled = True
    assert s.engine.run_until_done(ghost) == 5
    assert s.log == [("a start", 0), ("a end", 5)]


# -- running and deadlock --------------------------------------------------------------

def test_run_until_stops_at_the_limit_and_sets_the_clock():
    s = Story()
    dma = Resource("DMA")
    s.submit(s.task("a", 10, dma))
    s.submit(s.task("b", 10, dma))
    s.engine.run_until(10)
    assert s.log == [("a start", 0), ("a end", 10), ("b start", 10)]
    assert s.engine.now_ns == 10 and s.engine.next_time() == 20
    s.engine.run_until(15)
    assert s.engine.now_ns == 15 and len(s.log) == 3
    s.engine.run_until(5)                 # never goes back
    assert s.engine.now_ns == 15


def test_run_stops_for_a_task_or_a_predicate_and_peek_shows_what_is_next():
    s = Story()
    a = s.submit(s.task("a", 10))
    b = s.submit(s.task("b", 30))
    assert s.engine.peek() == 0 or s.engine.peek() == 10
    assert s.engine.run(stop=a) is True and a.done and not b.done
    assert s.engine.now_ns == 10 and s.engine.peek() == 30
    assert s.engine.run(20, stop=b) is False      # the limit comes first: the clock stops there
    assert s.engine.now_ns == 20 and not b.done
    assert s.engine.run(stop=lambda: len(s.log) >= 4) is True
    assert s.log[-1] == ("b end", 30) and s.engine.peek() is None
    assert s.engine.run(stop=lambda: False) is False    # nothing left: the clock stays
    assert s.engine.now_ns == 30


def test_run_until_done_returns_the_end_time_and_stops_there():
    s = Story()
    a = s.submit(s.task("a", 10))
    b = s.submit(s.task("b", 30))
    assert s.engine.run_until_done(a) == 10
    assert not b.done
    assert s.engine.run_until_done(b) == 30
    assert s.engine.run_until_done(a) == 10   # already done: returns at once


def test_deadlock_when_the_heap_runs_dry():
    s = Story()
    blocker = s.submit(s.task("blocking callback", lambda t: None))
    waiter = s.submit(s.task("waiter", 1, deps=(blocker,)))
    with pytest.raises(Deadlock) as info:
        s.engine.run_until_done(waiter)
    assert info.value.args[0] is waiter
    assert s.log == [("blocking callback start", 0)]


def test_deadlock_on_a_dependency_never_submitted():
    s = Story()
    never = s.task("never", 1)
    waiter = s.submit(s.task("waiter", 1, deps=(never,)))
    assert s.engine.idle
    with pytest.raises(Deadlock):
        s.engine.run_until_done(waiter)


# -- the trace ---------------------------------------------------------------------------

def test_trace_records_every_task_with_ids_in_submission_order():
    s = Story()
    dma = Resource("DMA")
    a = s.submit(s.task("a", 3, dma), 1)
    b = s.submit(s.task("b", 4, dma), 2)
    s.engine.run_all()
    assert s.engine.tasks == [a, b] and (a.id, b.id) == (0, 1)
    assert [(t.submit_ns, t.ready_ns, t.start_ns, t.end_ns) for t in s.engine.tasks] == [
        (1, 1, 1, 4), (2, 2, 4, 8)]
    assert a.done and a.engine_name == "DMA"
    assert "a on DMA" in repr(a) and "0.001-0.004 us" in repr(a)
    # a finished task keeps only data: its closures are dropped
    assert a.on_start is None and a.on_end is None and not a.dependents


def test_record_false_keeps_no_trace_but_same_timing():
    s = Story(record=False)
    dma = Resource("DMA")
    a = s.submit(s.task("a", 3, dma))
    b = s.submit(s.task("b", 4, dma))
    s.engine.run_all()
    assert s.engine.tasks == []
    assert (a.end_ns, b.start_ns, b.end_ns) == (3, 3, 7)


# -- chains: a task that starts as its only dependency ends ends in the same step ---------

def _random_program(seed: int, observe: list, one_entry_a_step: bool = False):
    """A random mix of streams, shared resources, cross-stream dependencies and submission
    times; every effect is logged, with the engine's clock when it ran. ``one_entry_a_step``:
    submit_at's work done with a stop condition, so every loop takes one entry a step."""
    import random

    rng = random.Random(seed)
    eng = Engine()
    eng.observer = lambda t: observe.append(("observed", t.name, eng.now_ns))
    pools = [Resource("DMA"), Resource("Core", 4), Resource("Lane")]
    last: dict[int, Task | None] = {0: None, 1: None, 2: None}
    made: list[Task] = []
    at = 0
    for i in range(rng.randrange(20, 80)):
        stream = rng.randrange(3)
        res = rng.choice([*pools, None])
        units = rng.choice([1, 1, 2, 4]) if res is pools[1] else 1
        deps = ()
        if made and rng.random() < 0.3:
            deps = ((rng.choice(made), "event"),)
        dur = rng.choice([0, 0, 1, 5, 10, 40])

        def start(t, name=f"t{i}"):
            observe.append(("start", name, eng.now_ns))

        def end(t, name=f"t{i}"):
            observe.append(("end", name, eng.now_ns))

        task = Task(f"t{i}", "kernel", resource=res, units=units, duration_ns=dur, deps=deps,
                    on_start=start, on_end=end)
        at += rng.choice([0, 0, 1, 3, 20])
        if one_entry_a_step:
            eng.run(at, stop=lambda: False)
            eng.submit(task, at, last[stream])
            eng.run(at, stop=lambda: False)
            made.append(task)
        else:
            made.append(eng.submit_at(task, at, last[stream]))
        last[stream] = task
    return eng, made


@pytest.mark.parametrize("seed", range(40))
def test_chains_give_the_same_times_and_effect_order_as_one_entry_a_step(seed):
    chained: list = []
    eng, tasks = _random_program(seed, chained)
    eng.run()
    stepped: list = []
    eng2, tasks2 = _random_program(seed, stepped, one_entry_a_step=True)
    eng2.run(stop=lambda: False)     # a stop condition: the loop takes one entry a step
    assert [(t.ready_ns, t.start_ns, t.end_ns) for t in tasks] == \
        [(t.ready_ns, t.start_ns, t.end_ns) for t in tasks2]
    assert chained == stepped
    assert eng.now_ns == eng2.now_ns


def test_a_chain_stops_at_the_loops_limit_so_a_later_submission_still_contends():
    # A then B on one stream and one DMA engine, both queued at 0; at 12 the host submits C
    # for the same engine: B is running then (10-20), so C waits for it
    eng = Engine()
    dma = Resource("DMA")
    a = eng.submit_at(Task("A", "memcpy", resource=dma, duration_ns=10), 0)
    b = eng.submit_at(Task("B", "memcpy", resource=dma, duration_ns=10), 0, a)
    c = eng.submit_at(Task("C", "memcpy", resource=dma, duration_ns=1), 12)
    assert eng.now_ns == 12 and b.end_ns == -1       # nothing past the host's time ran
    eng.run()
    assert [(t.start_ns, t.end_ns) for t in (a, b, c)] == [(0, 10), (10, 20), (20, 21)]


def test_a_chain_stops_where_the_stop_condition_does():
    eng = Engine()
    core = Resource("Core")
    ops = []
    for i in range(5):
        ops.append(eng.submit_at(Task(f"op{i}", "model_op", resource=core, duration_ns=10), 0,
                                 ops[-1] if ops else None))
    eng.run_until_done(ops[1])
    assert eng.now_ns == 20 and ops[2].start_ns == 20 and ops[2].end_ns == -1
