"""Host-callback tasks: the stream's marker and the report that runs the function.

``launch_callback`` puts a *HostCallback* task on the stream. When the stream reaches it, the
callback is due: the runtime runs it (on the report thread's timeline) and records a
*CallbackReport* task on the device's callback lane for the time the function took. A
blocking callback (ACL_CALLBACK_BLOCK) holds its stream: its task has an open duration and
ends when the report has run (:meth:`acllab.engine.Engine.finish`).

Differs from hardware: a report for a thread other than the main one runs as soon as its
stream reaches it, on the thread that drives the device, as if that thread looped on
process_report without pause (see :meth:`acllab.runtime.Runtime.poll_report`).
"""

from __future__ import annotations

from collections.abc import Callable

from .engine import Task
from .streams import Callback, Stream

__all__ = ["callback_task", "report_task"]


def callback_task(fn, user_data, block: bool, stream: Stream,
                  reached: Callable[[Callback], None]) -> Task:
    """The stream's HostCallback task; ``reached(cb)`` runs when the stream gets there."""
    task = Task("HostCallback", "callback", stream=stream, device=stream.device.id,
                duration_ns=(lambda t: None) if block else 0, info={},
                api="launch_callback")
    cb = Callback(fn, user_data, block, stream, task)
    task.info["callback"] = cb

    def on_start(t: Task) -> None:
        cb.reached_ns = t.start_ns
        reached(cb)

    task.on_start = on_start
    return task


def report_task(cb: Callback, start_ns: int, end_ns: int) -> Task:
    """The CallbackReport task: the callback ran on the host from ``start_ns`` to
    ``end_ns`` (the callback lane shows it beside its stream)."""
    dev = cb.stream.device
    return Task("CallbackReport", "callback", resource=dev.callback_lane,
                duration_ns=end_ns - start_ns, stream=cb.stream, device=dev.id,
                info={"for_task": cb.task.id}, api="process_report")
