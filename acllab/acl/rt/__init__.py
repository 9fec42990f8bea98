"""``acl.rt``: devices, contexts, memory, copies, streams, events, callbacks and kernels.

Each function has pyACL's signature and return convention (ACL_REFERENCE.md section 1):
status-only calls return the aclError; calls with out-parameters return a tuple with the error
code last. Wrong values return the real code and leave the runtime unchanged.

One module per section of pyACL's runtime API (``device``, ``context``, ``memory``, ``copy``,
``stream``, ``event``, ``callback``, ``kernel``); each validates its arguments and calls the
core (:mod:`acllab.runtime`, :mod:`acllab.transfers`, :mod:`acllab.events`,
:mod:`acllab.callbacks`, :mod:`acllab.kernels`), which owns the simulation's rules.
"""

from __future__ import annotations

from .callback import (
    launch_callback,
    process_report,
    subscribe_report,
    unsubscribe_report,
)
from .context import (
    create_context,
    destroy_context,
    get_context,
    set_context,
)
from .copy import (
    memcpy,
    memcpy2d,
    memcpy2d_async,
    memcpy_async,
    memset,
    memset_async,
)
from .device import (
    get_device,
    get_device_count,
    get_run_mode,
    reset_device,
    reset_device_force,
    set_device,
    synchronize_device,
)
from .event import (
    create_event,
    create_event_ex_with_flag,
    create_event_with_flag,
    destroy_event,
    event_elapsed_time,
    query_event,
    query_event_status,
    record_event,
    reset_event,
    synchronize_event,
    synchronize_event_with_timeout,
)
from .kernel import (
    launch_kernel,
)
from .memory import (
    free,
    free_host,
    get_mem_info,
    malloc,
    malloc_align32,
    malloc_cached,
    malloc_host,
)
from .stream import (
    create_stream,
    create_stream_with_config,
    destroy_stream,
    destroy_stream_force,
    set_op_wait_timeout,
    set_stream_failure_mode,
    stream_query,
    stream_wait_event,
    synchronize_stream,
    synchronize_stream_with_timeout,
)

__all__ = [
    "set_device",
    "reset_device",
    "reset_device_force",
    "get_device",
    "get_device_count",
    "get_run_mode",
    "synchronize_device",
    "create_context",
    "destroy_context",
    "set_context",
    "get_context",
    "malloc",
    "malloc_align32",
    "malloc_cached",
    "free",
    "malloc_host",
    "free_host",
    "memset",
    "memset_async",
    "memcpy",
    "memcpy_async",
    "memcpy2d",
    "memcpy2d_async",
    "get_mem_info",
    "create_stream",
    "create_stream_with_config",
    "destroy_stream",
    "destroy_stream_force",
    "synchronize_stream",
    "synchronize_stream_with_timeout",
    "stream_query",
    "stream_wait_event",
    "set_stream_failure_mode",
    "set_op_wait_timeout",
    "create_event",
    "create_event_with_flag",
    "create_event_ex_with_flag",
    "destroy_event",
    "record_event",
    "reset_event",
    "query_event",
    "query_event_status",
    "synchronize_event",
    "synchronize_event_with_timeout",
    "event_elapsed_time",
    "launch_callback",
    "subscribe_report",
    "unsubscribe_report",
    "process_report",
    "launch_kernel",
]
