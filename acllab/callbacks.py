"""Host-callback tasks: the stream's marker and the report that runs the function.

``launch_callback`` puts a *HostCallback* task on the stream. When the stream reaches it, the
callback is due: the runtime runs it (on the report thread's timeline) and records a
*CallbackReport* task on the device's callback lane for the time the function took. A
blocking callback (ACL_CALLBACK_BLOCK) holds its stream: its task has an open duration and
ends when the report has run (:meth:`acllab.engine.Engine.finish`).

A report for a thread other than the main one is handed to that thread as soon as its
stream reaches it, and runs in that thread's process_report, as on a card; the thread whose
call brought the stream there waits for it, and meanwhile only the report thread's calls may
start, so the program's log is the same on every run (see
:meth:`acllab.runtime.Runtime._hand_over`, which also says what happens when a callback waits
for another thread, or a report thread does not poll).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from .engine import Task
from .streams import Callback, Stream

__all__ = ["CallbackInfo", "callback_task", "report_task"]


@dataclass(frozen=True)
class CallbackInfo:
    """What a HostCallback task keeps of its callback (``task.info["callback"]``): a
    description, never the function itself, so that a bound method does not keep its object
    (and its ``__del__`` teardown) alive once the callback has run. Not a scalar, so neither
    the records nor the Chrome trace export it."""

    name: str       # module and qualified name of the function ("app.Worker.on_done")
    block: bool

    def __str__(self) -> str:
        return self.name


def describe(fn) -> str:
    """``module.qualname`` of a callable (its repr when it has no name)."""
    qual = getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None)
    if qual is None:
        return repr(fn)
    module = getattr(fn, "__module__", None)
    return f"{module}.{qual}" if module else str(qual)


def callback_task(fn, user_data, block: bool, stream: Stream,
                  reached: Callable[[Callback], None]) -> Task:
    """The stream's HostCallback task; ``reached(cb)`` runs when the stream gets there."""
    task = Task("HostCallback", "callback", stream=stream, device=stream.device.id,
                duration_ns=(lambda t: None) if block else 0, info={},
                api="launch_callback")
    cb = Callback(fn, user_data, block, stream, task)
    # only a description: the Callback (with fn and user_data) lives in this closure, which
    # the engine drops when the task ends, and in the runtime's report lists until it runs
    task.info["callback"] = CallbackInfo(describe(fn), block)

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
