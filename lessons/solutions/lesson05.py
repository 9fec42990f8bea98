"""Reference solutions for lesson 05 (Events): the functions the notebook's exercises ask for.

tests/test_checks_lesson05.py grades them with acllab.checks, and tests/test_lessons.py injects
them into the notebook after the exercise cells. Learners: try the exercises first.
"""

from __future__ import annotations

__all__ = ["time_kernel", "handoff"]


def time_kernel(acl, kernel, block_dim, args, stream):
    """Launch ``kernel`` once on ``stream``; return its duration in ms, measured by events."""
    start, _ = acl.rt.create_event()           # old-style events always carry timestamps
    end, _ = acl.rt.create_event()
    acl.rt.record_event(start, stream)         # stamped when the stream reaches it
    acl.rt.launch_kernel(kernel, block_dim, args, stream)
    acl.rt.record_event(end, stream)
    acl.rt.synchronize_event(end)              # elapsed time needs both records complete
    ms, ret = acl.rt.event_elapsed_time(start, end)
    acl.rt.destroy_event(start)
    acl.rt.destroy_event(end)
    return ms


def handoff(acl, producer_stream, consumer_stream, produce, consume, n):
    """Every round: produce on A, a fresh record, B waits on it, consume on B."""
    ready, _ = acl.rt.create_event()
    for i in range(n):
        produce(i)
        acl.rt.record_event(ready, producer_stream)       # captures round i's work, now
        acl.rt.stream_wait_event(consumer_stream, ready)  # B waits for that record only
        consume(i)
    acl.rt.synchronize_stream(consumer_stream)            # every result is in host memory
    acl.rt.destroy_event(ready)
