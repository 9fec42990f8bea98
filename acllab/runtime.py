"""The runtime: devices, contexts, handle tables, the host clock and the engine.

The facade (``acllab.acl``) validates arguments and calls the methods here. A method that
fails raises :class:`~acllab.errors.Fail` with the real ACL code before it changes anything, so
a failed call leaves the runtime consistent.

The host is a single virtual timeline (``host_ns``). Each API call costs host time; an
asynchronous call submits tasks at the current host time; a blocking call advances the host
until the simulated completion. After every call the engine has processed everything up to the
host's time, so data visible to the host is exactly what the device has finished writing.
"""

from __future__ import annotations

import os
import sys
import threading
import time
import traceback
import warnings
import weakref
import zlib
from collections import deque
from threading import get_ident

from .callbacks import callback_task, describe, report_task
from .constants import ACL_CALLBACK_BLOCK
from .dvpp.tasks import DvppDevice
from .engine import Deadlock, Engine, Resource, Task
from .errors import AclWarning, BudgetExceeded, Fail, RerunNeeded
from .hardware import DeviceProfile, get_profile
from .memory import (
    DEVICE_BASE,
    PAGEABLE_BASE,
    PINNED_BASE,
    AddressSpace,
    DeviceHeap,
    HostMemory,
    Region,
)
from .streams import Callback, Context, DataBuffer, Event, Stream

__all__ = ["Runtime", "Device", "API_LOCK", "unlocked"]

#: The one process-wide lock every ``acl.*`` call holds while it runs (the facade's ``api``
#: wrapper takes it), so the calls of several threads never interleave inside the runtime: each
#: is atomic, in the order the threads happen to get the lock. Re-entrant: a callback or a
#: signal handler that makes acl calls on the thread that holds it goes on. Every wall-clock wait
#: inside a call (a report thread's poll, start_thread, stop_thread, a process_report's sleep)
#: releases it while it waits (:func:`unlocked`, or a Condition built on it), so that the
#: threads it waits for can make their own calls meanwhile.
API_LOCK = threading.RLock()

#: The acllab package's folder (a frame whose file is under it is acllab's, not the program's).
_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep


def _user_stacklevel() -> int:
    """The ``stacklevel`` that makes a warning raised by the caller of this function name
    the program's line (the first frame outside the acllab package) rather than acllab's,
    however deep in the runtime the warning comes (a callback's report reached from a
    blocking call, a report thread's process_report); 2 when no frame is the program's."""
    frame, level = sys._getframe(1), 1
    while frame is not None and os.path.abspath(frame.f_code.co_filename).startswith(
            _PACKAGE_DIR):
        frame, level = frame.f_back, level + 1
    return level if frame is not None else 2


class unlocked:
    """``with unlocked():`` releases :data:`API_LOCK` entirely (whatever the calling thread's
    recursion depth) for the block, if this thread holds it, and takes it back after, at the
    same depth, however the block ends (as ``threading.Condition.wait`` does)."""

    __slots__ = ("_state",)

    def __enter__(self):
        self._state = None
        if API_LOCK._is_owned():
            self._state = API_LOCK._release_save()
        return self

    def __exit__(self, *exc):
        state, self._state = self._state, None
        if state is not None:
            API_LOCK._acquire_restore(state)
        return False

_HANDLE_BASE = {
    "context": 0x0C00_0000_1000,
    "stream": 0x0500_0000_1000,
    "event": 0x0E00_0000_1000,
    "buffer": 0x0D00_0000_1000,
    "dataset": 0x0D50_0000_1000,
    "desc": 0x0DE0_0000_1000,
    "tensor_desc": 0x0DF0_0000_1000,
    "op_attr": 0x0A70_0000_1000,
    "op_handle": 0x0A80_0000_1000,
    "aipp": 0x0A10_0000_1000,
}
_HANDLE_STEP = 0x40
# device addresses lie below every host address (acllab.memory's layout)
_DEVICE_END = min(PAGEABLE_BASE, PINNED_BASE)
_getrefcount = sys.getrefcount

# report threads (Python threads) -> the runtime that subscribed each last, weakly: a thread
# of a runtime that acllab.reset() replaced keeps polling (see Runtime.foreign_poll)
_REPORT_OWNERS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


class Device:
    """One simulated NPU: its profile, memory and hardware resources."""

    def __init__(self, index: int, profile: DeviceProfile, space: AddressSpace,
                 hugepage_pool_bytes: int | None):
        self.id = index
        self.profile = profile
        self.heap = DeviceHeap(index, profile, space, hugepage_pool_bytes)
        self.aicore = Resource(f"AI Core (device {index})", profile.ai_cores)
        self.h2d = Resource(f"H2D DMA (device {index})")
        self.d2h = Resource(f"D2H DMA (device {index})")
        self.d2d = Resource(f"D2D DMA (device {index})")
        # the host thread that stages pageable copies (and runs host-to-host copies): a lane
        # of work on the host for this device, not host memory (that is Runtime.host)
        self.host_lane = Resource(f"Host staging (device {index})")
        self.callback_lane = Resource(f"Host callbacks (device {index})")
        # the media engines (JPEGD, VPC, JPEGE) and DVPP memory: an acllab.dvpp.DvppDevice,
        # created when acl.media first uses this device (see the dvpp property)
        self._dvpp = None
        self.refcount = 0
        self.default_context: Context | None = None
        self.contexts: dict[int, Context] = {}
        self.events: dict[int, Event] = {}
        self.stream_count = 0           # live streams, default streams included
        self.next_stream_index = 0

    @property
    def resources(self) -> tuple[Resource, ...]:
        """The device's engines; the DVPP ones too once its media side exists."""
        base = (self.aicore, self.h2d, self.d2h, self.d2d, self.host_lane, self.callback_lane)
        return base if self._dvpp is None else base + self._dvpp.resources

    @property
    def has_dvpp(self) -> bool:
        """True once the media side (:attr:`dvpp`) was created."""
        return self._dvpp is not None

    @property
    def dvpp(self):
        """The media side (:class:`acllab.dvpp.DvppDevice`), created on first use."""
        if self._dvpp is None:
            self._dvpp = DvppDevice(self)
        return self._dvpp

    @property
    def jpegd(self) -> Resource:
        return self.dvpp.jpegd

    @property
    def vpc(self) -> Resource:
        return self.dvpp.vpc

    @property
    def jpege(self) -> Resource:
        return self.dvpp.jpege

    @property
    def vdec(self) -> Resource:
        return self.dvpp.vdec

    @property
    def pngd(self) -> Resource:
        return self.dvpp.pngd

    @property
    def venc(self) -> Resource:
        return self.dvpp.venc

    @property
    def open(self) -> bool:
        return self.default_context is not None or bool(self.contexts)

    def __repr__(self) -> str:
        state = f"set {self.refcount}x" if self.refcount else "not set"
        return (f"<Device {self.id} ({self.profile.soc_name}): {state}, "
                f"{self.heap.runtime_used_bytes} B allocated, {self.stream_count} streams, "
                f"{len(self.events)} events>")


class _ReportThread:
    """What the runtime knows about one report thread (a thread id given to subscribe_report
    other than the main thread's)."""

    __slots__ = ("thread", "streams", "delivered", "taken", "inbox", "running", "started",
                 "free")

    def __init__(self, thread: threading.Thread | None):
        self.thread = thread      # the Python thread with that id when it was subscribed
        self.streams = 0          # streams subscribed to it now
        self.delivered = 0        # reports run for it so far by other threads (see _hand_over)
        self.taken = 0            # of those, how many its polls have returned
        self.inbox: deque[Callback] = deque()   # reports handed to it, to run in its poll
        self.running: Callback | None = None    # the report its poll is running now
        self.started = 0.0        # when (wall clock) it began running that report
        self.free = False         # a callback of its waited on another thread: it runs its
        # reports alongside the other threads from then on (see Runtime._detach)


#: A runtime's budgets unless configured otherwise (a script's: generous; the lessons set
#: smaller ones, :data:`acllab.session.NOTEBOOK_SETTINGS`). They stop a runaway program with
#: BudgetExceeded; they count tasks, calls and virtual time, never the wall clock.
DEFAULT_BUDGETS = {"task_budget": 5_000_000, "call_budget": 20_000_000,
                   "time_budget_ns": 24 * 3600 * 1_000_000_000}

#: RerunNeeded's message: what a learner re-runs after the lesson's clean-up cell.
RERUN_AFTER_FINALIZE = (
    "this cell uses the card, but acl.finalize() (the lesson's clean-up cell) has released it. "
    "Set it up again: run the cells above this one (Run > Run All Above Selected Cell), then "
    "this one; or run the whole lesson (Run > Run All Cells).")


class Runtime:
    """Everything a pyACL program can touch, in one deterministic object."""

    def __init__(self, profile: str | DeviceProfile = "ascend310", *,
                 device_count: int | None = None, hugepage_pool_bytes: int | None = None,
                 strict: bool = False, record: bool = True, sanitize: bool = True,
                 task_budget: int = DEFAULT_BUDGETS["task_budget"],
                 call_budget: int = DEFAULT_BUDGETS["call_budget"],
                 time_budget_ns: int = DEFAULT_BUDGETS["time_budget_ns"],
                 stop_after_finalize: bool = False):
        self.profile = get_profile(profile)
        self.strict = strict
        # a call after acl.finalize() raises RerunNeeded instead of returning 100001 (the
        # lessons' setting: see acllab.session.NOTEBOOK_SETTINGS)
        self.stop_after_finalize = stop_after_finalize
        self.sanitize = sanitize
        self.task_budget = task_budget
        self.call_budget = call_budget
        self.time_budget_ns = time_budget_ns
        self.calls = 0
        self.engine = Engine(record=record)
        # a task's effect that fails becomes a fault of the task (see task_fault) instead of
        # escaping whatever API call happened to advance the device; a fault the effect
        # recorded itself (info['fault'], as copies do) is reported the same way
        self.engine.fault = self.task_fault
        self.engine.wrote = self._wrote
        self.space = AddressSpace()
        n = self.profile.device_count if device_count is None else int(device_count)
        self.devices = [Device(i, self.profile, self.space, hugepage_pool_bytes)
                        for i in range(n)]
        self.host = HostMemory(self.space, self.profile.host_pinned_limit_bytes)
        self.host_ns = 0
        self.initialized = False
        self.finalized = False
        self.config_path: str | None = None
        self.handles: dict[int, object] = {}
        self.dead_handles: dict[int, str] = {}
        self._handle_counts = dict.fromkeys(_HANDLE_BASE, 0)
        self._current: dict[int, Context] = {}
        self.main_thread = threading.get_ident()
        self.leaks: list[str] = []
        self.api_log: list[tuple[str, int, int, int]] = []  # (api, start_ns, end_ns, ret)
        self.recent_error: dict[int, str] = {}
        self._due_reports: list[Callback] = []     # auto-delivered, to run now
        self._manual_reports: list[Callback] = []  # waiting for process_report
        self._callbacks_ahead = 0     # HostCallback tasks submitted that no stream reached yet
        self.callback_errors: list[str] = []
        self.op_wait_timeout_s = 0    # acl.rt.set_op_wait_timeout (kept; waits never time out)
        self.acl_log: list[tuple[int, str, str, str]] = []   # acl.app_log and the runtime's
        # own entries: (host_ns, level, module, message), see acllab.acl.util.runtime_log
        self.probe_calls: set[int] = set()   # api_log indexes of probes: quiet, expected
        # failures (AclLite's get_input_index_by_name 'ascend_mbatch_shape_data' on a static
        # model) that trace.summary counts apart from errors
        # what the host did besides submitting tasks, for the sanitizer:
        # (kind, host_ns, tasks submitted so far, *payload)
        self.host_ops: list[tuple] = []
        self.models: dict[int, object] = {}        # model id -> LoadedModel
        self.fault_codes: dict[int, int] = {}      # id(stream) -> the code of its fault
        self._queued: dict[Stream, deque[Task]] = {}   # per stream: tasks not yet started
        # host ranges that queued tasks read or write, fingerprinted, so the sanitizer also
        # sees host writes made through zero-copy views (no API call): see watch_host_views
        self._views: deque[list] = deque()
        # ranges of quiet pinned memory (see _quiet): (task, region, generation, lo, n, mode)
        self._quiet_views: deque[tuple] = deque(maxlen=self.MAX_VIEWS)
        # per stream: its quiet ranges that a join of another stream passed over (in
        # submission order), released when that stream is joined (see _release_views)
        self._parked: dict[Stream, deque[tuple]] = {}
        self._view_groups: dict = {}      # region -> {(lo, n): [crc, rebased, count]}
        self._view_epoch = 0              # counts rebaselines (see _watch_host_ranges)
        self._lazy_regions: set = set()   # regions with CRCs of None (see expose_host)
        self._views_checked_ns = 0
        self._report_cv = threading.Condition(API_LOCK)   # its waits release the lock
        self._report_threads: dict[int, _ReportThread] = {}   # thread id -> its reports
        self.blocking_fault: tuple[int, str] | None = None
        # (callback name, thread name) while a host callback runs: a call of another thread
        # that waits long for the API lock says why (acllab.acl._api._acquire_slow)
        self.running_callback: tuple[str, str] | None = None
        # while a report thread runs a report handed to it (Runtime._hand_over), the only
        # thread whose calls may start (the others wait in Runtime.wait_turn), so that the
        # callback's calls come where they would have come had it run inline: same log
        self.turn: threading.Thread | None = None
        self.turn_active = 0.0            # when (wall clock) the turn's thread last made a call
        self._turn_waiters = 0            # threads waiting in wait_turn
        self.free_report_threads: list[str] = []   # names of report threads set free
        self.model_count = 0
        # acl.op.set_model_dir's op models: OpSpec.key() -> (spec, file name); None until set
        self.op_models: dict | None = None
        # acl.op.compile's op models (OpSpec.key() -> (spec, "compiled")), and the options
        # of acl.set_compile_opt (aclCompileOpt value -> string) and set_compile_flag
        self.op_compiled: dict = {}
        self.compile_opts: dict[int, str] = {}
        self.compile_flag = 0

    # -- handles ---------------------------------------------------------------------------
    def new_handle(self, kind: str, obj) -> int:
        self._handle_counts[kind] += 1
        h = _HANDLE_BASE[kind] + _HANDLE_STEP * self._handle_counts[kind]
        self.handles[h] = obj
        return h

    def drop_handle(self, handle: int, kind: str) -> None:
        self.handles.pop(handle, None)
        self.dead_handles[handle] = kind

    def lookup(self, handle: int, cls: type, what: str):
        """The live object behind ``handle`` or Fail(107017) with a reason."""
        obj = self.handles.get(handle)
        if isinstance(obj, cls) and obj.alive:
            return obj
        if handle == 0:
            raise Fail(100000, f"the {what} handle is null (0)")
        if handle in self.dead_handles:
            raise Fail(107017, f"{what} handle 0x{handle:x} was already destroyed "
                               f"(it was a {self.dead_handles[handle]})")
        if obj is not None:
            raise Fail(107017, f"handle 0x{handle:x} is a {type(obj).__name__}, not a {what}")
        raise Fail(107017, f"0x{handle:x} is not a {what} handle this runtime created")

    # -- init / threads / contexts ---------------------------------------------------------
    def require_init(self) -> None:
        if not self.initialized:
            if self.finalized:
                self.stop_if_finalized()
                raise Fail(100001, "acl.finalize() was called; call acl.init() again first")
            raise Fail(100001, "call acl.init() before any other pyACL call")

    def stop_if_finalized(self) -> None:
        """With ``stop_after_finalize`` (the lessons' setting), raise RerunNeeded if
        acl.finalize() released this runtime and acl.init() has not run since."""
        if self.stop_after_finalize and self.finalized and not self.initialized:
            raise RerunNeeded(RERUN_AFTER_FINALIZE)

    def current_context(self, required: bool = True) -> Context | None:
        ctx = self._current.get(get_ident())
        if ctx is not None and ctx.alive:
            return ctx
        ctx = None
        if required:
            self.stop_if_finalized()      # a lesson cell that reads it after the clean-up
            raise Fail(107002, "this thread has no current context: call "
                               "acl.rt.set_device(device_id) (or set_context) first")
        return ctx

    def set_current(self, ctx: Context | None) -> None:
        tid = threading.get_ident()
        if ctx is None:
            self._current.pop(tid, None)
        else:
            self._current[tid] = ctx

    def device(self, device_id: int) -> Device:
        if not 0 <= device_id < len(self.devices):
            raise Fail(107001, f"device id {device_id} is invalid: this host has "
                               f"{len(self.devices)} devices (0 to {len(self.devices) - 1})")
        return self.devices[device_id]

    def create_context(self, dev: Device, is_default: bool) -> Context:
        if dev.stream_count >= dev.profile.max_streams:
            raise Fail(207008, f"device {dev.id} already has {dev.stream_count} streams, the "
                               f"limit of {dev.profile.name}; a new context needs one for its "
                               "default stream")
        ctx = Context(0, dev, is_default)
        ctx.handle = self.new_handle("context", ctx)
        ctx.default_stream = self.create_stream(ctx, is_default=True)
        if is_default:
            dev.default_context = ctx
        else:
            dev.contexts[ctx.handle] = ctx
        return ctx

    def destroy_context(self, ctx: Context) -> list[str]:
        """Destroy a context and everything in it; return the names of leaked objects."""
        leaked = []
        self.sync_context(ctx)           # what it finds can never finish, destroy_stream drops
        for s in list(ctx.streams.values()):
            leaked.append(f"stream 0x{s.handle:x} ({s.name}) of context 0x{ctx.handle:x}")
            self.destroy_stream(s)
        self.destroy_stream(ctx.default_stream)
        for ev in list(ctx.device.events.values()):
            if ev.context is ctx:
                leaked.append(f"event 0x{ev.handle:x} of context 0x{ctx.handle:x}")
                self.destroy_event(ev)
        ctx.alive = False
        self.drop_handle(ctx.handle, "context")
        if ctx.is_default:
            ctx.device.default_context = None
        else:
            ctx.device.contexts.pop(ctx.handle, None)
        for tid, cur in list(self._current.items()):
            if cur is ctx:
                del self._current[tid]
        return leaked

    def unload_model(self, m) -> None:
        """Wait for a loaded model's executions, then give its memory back to the pool."""
        if m.last_task is not None and m.last_task.end_ns < 0:
            try:
                self.wait_for(m.last_task)
            except Deadlock:
                pass
        for region in m.regions():
            if region.live:
                m.device.heap.free(region)
                self.log("free", region.start, region.generation, region.size)
        m.alive = False

    def release_device(self, dev: Device) -> list[str]:
        """Tear a device down completely (refcount reached zero, or forced)."""
        leaked = []
        for m in list(self.models.values()):
            if m.alive and m.device is dev:
                leaked.append(f"model {m.id} ({m.compiled.name}) never unloaded")
                self.unload_model(m)
        for ctx in list(dev.contexts.values()):
            leaked.append(f"context 0x{ctx.handle:x} on device {dev.id}")
            leaked += self.destroy_context(ctx)
        if dev.default_context is not None:
            leaked += self.destroy_context(dev.default_context)
        for region in dev.heap.release_all():
            leaked.append(f"{region.describe()} never freed")
        dev.refcount = 0
        return leaked

    # -- streams and events ----------------------------------------------------------------
    def create_stream(self, ctx: Context, is_default: bool = False) -> Stream:
        dev = ctx.device
        if dev.stream_count >= dev.profile.max_streams:
            raise Fail(207008, f"device {dev.id} already has {dev.stream_count} streams, the "
                               f"limit of {dev.profile.name} is {dev.profile.max_streams}")
        stream = Stream(0, ctx, dev.next_stream_index, is_default)
        stream.handle = self.new_handle("stream", stream)
        dev.next_stream_index += 1
        dev.stream_count += 1
        if not is_default:
            ctx.streams[stream.handle] = stream
        return stream

    def queued_tasks(self, stream: Stream) -> deque[Task]:
        """The stream's tasks that have not started yet, in submission order.

        A stream runs its tasks in order (each depends on the one before), so the tasks that
        have started are a prefix of what it was given: dropping that prefix leaves exactly
        the queued ones, in time proportional to what is dropped.
        """
        queue = self._queued.get(stream)
        if queue is None:
            return deque()
        while queue and (queue[0].start_ns >= 0 or queue[0].cancelled):
            queue.popleft()
        return queue

    def cancel_queued(self, stream: Stream) -> int:
        """Discard the stream's tasks that have not started (destroy_stream_force); return
        how many. They still pass through the engine as zero-length tasks without effects,
        so whatever waits for them (an event wait on another stream) is released."""
        queue = self.queued_tasks(stream)
        n = len(queue)
        for task in queue:
            if task.api == "launch_callback" and not task.cancelled:
                self._callbacks_ahead -= 1   # a HostCallback no stream will reach now
            task.cancelled = True
        queue.clear()
        return n

    def abandon_stream(self, stream: Stream) -> None:
        """Drop what ``stream`` still holds that can never run now: it goes away with its
        device or context (reset_device, finalize, destroy_context) after a synchronisation
        that found it could never finish (a blocking callback that no thread processed), or
        at once (destroy_stream_force).

        As CANN does when a device is reset under pending work, nothing of it runs later:
        its tasks that have not started are cancelled (they pass through the engine as
        zero-length tasks without effects, so whatever waits for them is released); its
        callback reports that no thread processed are dropped (no later process_report, on
        any stream, runs them); a blocking callback that holds it ends now, cancelled.
        """
        cancelled = self.cancel_queued(stream)
        held = []
        for reports in (self._manual_reports, self._due_reports):
            if any(cb.stream is stream for cb in reports):
                held += [cb for cb in reports if cb.stream is stream]
                reports[:] = [cb for cb in reports if cb.stream is not stream]
        now = max(self.host_ns, self.engine.now_ns)
        for cb in held:
            cb.done = True
            task = cb.task
            if cb.block and task.end_ns < 0 and task.duration_ns.__class__ is not int:
                task.cancelled = True
                self.engine.finish(task, max(now, task.start_ns))
        if held or cancelled:
            self.process(self.host_ns)        # the cancelled tasks pass through now

    def destroy_stream(self, stream: Stream) -> None:
        """Destroy ``stream``; whatever it still holds is dropped (see abandon_stream)."""
        if not stream.alive:
            return                       # destroyed already (a teardown that was interrupted)
        self.abandon_stream(stream)
        self._queued.pop(stream, None)
        if stream.report_thread is not None:
            self.unsubscribe(stream)
        stream.alive = False
        stream.context.streams.pop(stream.handle, None)
        stream.device.stream_count -= 1
        self.drop_handle(stream.handle, "stream")

    def create_event(self, ctx: Context, flags: int, style: str) -> Event:
        dev = ctx.device
        if len(dev.events) >= dev.profile.max_events:
            raise Fail(207007, f"device {dev.id} already has {len(dev.events)} events, the "
                               f"limit of {dev.profile.name} is {dev.profile.max_events}")
        ev = Event(0, ctx, flags, style)
        ev.handle = self.new_handle("event", ev)
        dev.events[ev.handle] = ev
        return ev

    def destroy_event(self, ev: Event) -> None:
        ev.alive = False
        ev.device.events.pop(ev.handle, None)
        self.drop_handle(ev.handle, "event")

    def stream_for(self, handle: int, ctx: Context | None = None) -> Stream:
        """Resolve a stream argument (0 = the current context's default stream)."""
        if ctx is None:
            ctx = self._current.get(get_ident())
            if ctx is None or not ctx.alive:
                ctx = self.current_context()
        if handle == 0:
            return ctx.default_stream
        stream = self.handles.get(handle)
        if type(stream) is not Stream or not stream.alive:
            stream = self.lookup(handle, Stream, "stream")
        if stream.context is not ctx:
            raise Fail(107003, f"{stream.name} (0x{handle:x}) belongs to context "
                               f"0x{stream.context.handle:x}, but the current context is "
                               f"0x{ctx.handle:x}")
        return stream

    def log(self, kind: str, *payload) -> None:
        """Note a host-side action (a join, a free, a host access) for the sanitizer."""
        if self.engine.record:
            if kind == "join" and (self._views or self._quiet_views or self._parked):
                self.check_host_views()      # what the host wrote before it learnt this
                self.host_ops.append((kind, self.host_ns, len(self.engine.tasks), *payload))
                self._release_views(payload[0])
                return
            self.host_ops.append((kind, self.host_ns, len(self.engine.tasks), *payload))

    # -- host writes through zero-copy views ------------------------------------------------
    MAX_VIEWS = 1024

    # A watched range ("view") is a list [task, region, generation, lo, n, crc, mode, epoch,
    # group], in submission order in _views.
    #
    # Views of the same bytes (one region, one lo and n) share a group [crc, rebased, count]
    # in _view_groups[region][(lo, n)]: a task that writes host memory fingerprints each
    # group it covers once and stores the CRC in the group (rebased = the epoch of that,
    # count = the views in it), so what a view was last fingerprinted as is group[0] if
    # epoch < group[1] (the rebaseline came after the view) and its own crc otherwise. A
    # check fingerprints each range once, however many views watch it.
    #
    # Pinned memory of which no view exists ("quiet", see _quiet) can change only through
    # tasks, so its ranges are not fingerprinted: they wait in _quiet_views as tuples
    # (task, region, generation, lo, n, mode), "the bytes as they are now", and a group
    # rebaselined while quiet has crc None. They become views with a real CRC when the host
    # takes a view of the region through acl.util (expose_host, before the host can write),
    # or at a check that finds the region no longer quiet; _lazy_regions holds the regions
    # that may have such ranges. So a program that never takes a view of its pinned buffers
    # pays one tuple per watched range and no fingerprint.

    @staticmethod
    def _data_refs(region: Region) -> int:
        return sys.getrefcount(region._data)

    # what _data_refs gives for pinned memory nothing but its region holds (no view of it)
    _probe = Region(0, 1, "pinned")
    _probe.data  # noqa: B018 (allocates the bytes)
    _QUIET_REFS = _data_refs(_probe)
    del _probe

    def _quiet(self, region: Region) -> bool:
        """True when only tasks can change ``region``'s bytes: pinned memory of which no
        view exists (no ``ptr_to_numpy`` array, no slice of ``Region.data`` held anywhere;
        memory nothing touched yet has no bytes at all, so no view either)."""
        return (region.kind == "pinned"
                and (region._data is None or self._data_refs(region) <= self._QUIET_REFS))

    def _attach_view(self, view: list, crc: int) -> None:
        """Give a view that had no fingerprint (crc None) one, and its group."""
        region = view[1]
        groups = self._view_groups.get(region)
        if groups is None:
            groups = self._view_groups[region] = {}
        key = (view[3], view[4])
        group = groups.get(key)
        if group is None:
            group = groups[key] = [crc, -1, 0]
        group[2] += 1
        view[5] = crc
        view[7] = self._view_epoch
        view[8] = group

    def _drop_view(self, view: list) -> None:
        """Forget one view in its group's count (the caller removes it from ``_views``)."""
        group = view[8]
        if group is None:
            return
        group[2] -= 1
        if group[2] == 0:
            groups = self._view_groups.get(view[1])
            if groups is not None and groups.get((view[3], view[4])) is group:
                del groups[(view[3], view[4])]
                if not groups:
                    del self._view_groups[view[1]]

    def _watch_host_ranges(self, task: Task) -> None:
        """Fingerprint the host bytes a stream task will read or write, as they are now."""
        views = self._views
        for mode in "rw":                # the reads, then the writes (no tuples built)
            for addr, n in task.reads if mode == "r" else task.writes:
                if DEVICE_BASE <= addr < _DEVICE_END:
                    continue             # device memory: the host has no view of it
                region = self.space.find(addr)
                if region is None or n <= 0:
                    continue
                kind = region.kind
                if kind == "device":
                    continue
                lo = addr - region.start
                if kind == "pinned" and (region._data is None     # as _quiet
                                         or _getrefcount(region._data) <= self._QUIET_REFS):
                    self._lazy_regions.add(region)
                    self._quiet_views.append((task, region, region.generation, lo, n, mode))
                    continue
                try:
                    crc = zlib.crc32(region.data[lo:lo + n])
                except Fail:
                    continue
                view = [task, region, region.generation, lo, n, None, mode, 0, None]
                self._attach_view(view, crc)
                views.append(view)
        if len(views) > self.MAX_VIEWS:
            for _ in range(len(views) - self.MAX_VIEWS):
                view = views.popleft()
                if view[8] is not None:
                    self._drop_view(view)

    def _forget_views(self, task: Task) -> None:
        """Drop the watched ranges of ``task``, a submission that did not happen (they are
        the newest)."""
        views = self._views
        while views and views[-1][0] is task:
            view = views.pop()
            if view[8] is not None:
                self._drop_view(view)
        quiet = self._quiet_views
        while quiet and quiet[-1][0] is task:
            quiet.pop()

    def _materialise(self, region: Region) -> None:
        """Turn the quiet ranges of ``region`` into views fingerprinted as the bytes are now
        (the region stops being quiet: the host may write it from now on)."""
        mine = [q for q in self._quiet_views if q[1] is region]
        for stream, parked in list(self._parked.items()):
            if any(q[1] is region for q in parked):
                mine += [q for q in parked if q[1] is region]
                rest = deque((q for q in parked if q[1] is not region), maxlen=self.MAX_VIEWS)
                if rest:
                    self._parked[stream] = rest
                else:
                    del self._parked[stream]
        if not mine:
            return
        self._quiet_views = deque((q for q in self._quiet_views if q[1] is not region),
                                  maxlen=self.MAX_VIEWS)
        crcs: dict[tuple[int, int], int | None] = {}
        for task, _region, gen, lo, n, mode in mine:
            if task.cancelled or region.dangling:
                continue
            crc = crcs.get((lo, n), -1)
            if crc == -1:
                try:
                    crc = crcs[(lo, n)] = zlib.crc32(region.data[lo:lo + n])
                except Fail:
                    crc = crcs[(lo, n)] = None
            if crc is None:
                continue
            view = [task, region, gen, lo, n, None, mode, 0, None]
            self._attach_view(view, crc)
            self._views.append(view)
        # in submission order, as if they had been views from the start
        self._views = deque(sorted(self._views, key=lambda v: v[0].id))
        while len(self._views) > self.MAX_VIEWS:
            self._drop_view(self._views.popleft())

    def check_host_views(self) -> None:
        """Note, for the sanitizer, every watched host range whose bytes the host changed.

        Host code writes pinned or registered pageable memory through views
        (``acl.util.ptr_to_numpy``, the array behind ``numpy_to_ptr``, a bytearray behind
        ``bytes_to_ptr``) without an API call. Each stream task that reads or writes host
        memory has the bytes fingerprinted (CRC32) when it is submitted; the runtime compares
        them before each synchronisation (a "join") and when the sanitizer runs. A change
        that no task made is the host's: it is logged as ``host_view_write`` with the task,
        and the sanitizer reports it unless a synchronisation ordered the host after it.

        Differs from hardware (and from real tools): the write is seen at the next check, not
        when it happens, so a write that a task's own output covers again is missed; at most
        ``MAX_VIEWS`` fingerprinted ranges and ``MAX_VIEWS`` ranges of quiet pinned memory
        are watched (the oldest are dropped). Pinned memory is
        fingerprinted only once a view of it exists (one from ``acl.util`` is seen when it
        is taken, any other when a check finds it still held).
        """
        quiet: dict[Region, bool] = {}
        lazy = set()
        for region in self._lazy_regions:
            if region.dangling:
                continue
            q = quiet[region] = self._quiet(region)
            if q:
                lazy.add(region)
            else:                       # a view of it exists now: fingerprint its ranges
                self._materialise(region)
        if not self._views:             # nothing fingerprinted: nothing to compare
            self._lazy_regions = lazy
            self._views_checked_ns = self.host_ns
            return
        keep = []
        now_of: dict[tuple, int | None] = {}    # the bytes of one range, fingerprinted once
        epoch = self._view_epoch
        for view in self._views:
            task, region, gen, lo, n, crc, mode, vepoch, group = view
            if task.cancelled or region.dangling:
                self._drop_view(view)
                continue
            if group is not None and vepoch < group[1]:
                crc = group[0]
            if crc is None:             # "the bytes as they are now"
                q = quiet.get(region)
                if q is None:
                    q = quiet[region] = self._quiet(region)
                if q:                   # still so: only tasks changed them
                    lazy.add(region)
                    keep.append(view)
                    continue
            key = (region, lo, n)
            if key in now_of:
                now = now_of[key]
            else:
                try:
                    now = now_of[key] = zlib.crc32(region.data[lo:lo + n])
                except Fail:
                    now = now_of[key] = None
            if now is None:
                self._drop_view(view)
                continue
            if crc is None:             # a view not taken through acl.util: from now on
                if group is None:
                    self._attach_view(view, now)
                else:
                    view[5] = now
                    view[7] = epoch
            elif now != crc:
                view[5] = now
                view[7] = epoch
                self.host_ops.append(("host_view_write", self.host_ns, len(self.engine.tasks),
                                      region.start, gen, region.start + lo, n, task.id, mode,
                                      self._views_checked_ns))
            keep.append(view)
        self._views = deque(keep)
        self._lazy_regions = lazy
        self._views_checked_ns = self.host_ns

    def _release_views(self, task_id: int) -> None:
        """The host joined task ``task_id``: it is ordered after every earlier task of that
        stream, so their ranges need no more watching."""
        joined = self.engine.tasks[task_id] if task_id < len(self.engine.tasks) else None
        if joined is None or joined.stream is None or joined.end_ns < 0:
            return
        s = joined.stream
        if self._views:
            keep = []
            for v in self._views:
                if v[0].stream is s and v[0].id <= task_id:
                    self._drop_view(v)
                else:
                    keep.append(v)
            self._views = deque(keep)
        parked = self._parked.pop(s, None)
        if parked is not None:           # this stream's ranges an earlier join passed over
            while parked and parked[0][0].id <= task_id:
                parked.popleft()
            if parked:
                self._parked[s] = parked
        quiet = self._quiet_views
        if quiet and quiet[0][0].id <= task_id:
            # in submission order: only the entries up to task_id can go; another stream's
            # wait, parked under that stream, until a join of it (so no join scans them again)
            park = self._parked
            while quiet and quiet[0][0].id <= task_id:
                q = quiet.popleft()
                other = q[0].stream
                if other is not s:
                    mine = park.get(other)
                    if mine is None:
                        mine = park[other] = deque(maxlen=self.MAX_VIEWS)
                    mine.append(q)

    def _rebaseline_views(self, task: Task) -> None:
        """A task wrote host memory: fingerprint again what it covers (not the host's doing)."""
        view_groups = self._view_groups
        if not view_groups:
            return                      # no range with a CRC (see _quiet)
        find = self.space.find
        for addr, n in task.writes:
            region = find(addr)
            if region is None or region.kind == "device":
                continue
            groups = view_groups.get(region)
            if not groups:
                continue                # no range there, or only ones without a CRC
            lo, hi = addr - region.start, addr - region.start + n
            quiet = self._quiet(region)
            if quiet:
                self._lazy_regions.add(region)
            for (vlo, vn), group in groups.items():
                if vlo < hi and lo < vlo + vn:
                    if quiet:
                        crc = None
                    else:
                        try:
                            crc = zlib.crc32(region.data[vlo:vlo + vn])
                        except Fail:
                            continue
                    self._view_epoch += 1
                    group[0] = crc
                    group[1] = self._view_epoch

    def expose_host(self, region: Region) -> None:
        """The host is about to get a view of ``region`` (acl.util): fingerprint its watched
        ranges that have no CRC (see :meth:`_quiet`) while they still hold what they were."""
        if region not in self._lazy_regions:
            return
        self._lazy_regions.discard(region)
        crcs: dict[tuple[int, int], int] = {}

        def crc_of(lo: int, n: int) -> int:
            crc = crcs.get((lo, n))
            if crc is None:
                crc = crcs[(lo, n)] = zlib.crc32(region.data[lo:lo + n])
            return crc

        for (lo, n), group in self._view_groups.get(region, {}).items():
            if group[0] is None and group[1] >= 0:
                group[0] = crc_of(lo, n)
        self._materialise(region)

    # -- the host clock --------------------------------------------------------------------
    def spend(self, ns: int) -> None:
        """The host spends ``ns``; the device catches up to the host's new time."""
        self.host_ns += ns
        if self.host_ns > self.time_budget_ns:
            self.over_budget("virtual time", f"{self.time_budget_ns / 3.6e12:g} hours",
                       "time_budget_ns")
        self.process(self.host_ns)

    def over_budget(self, what: str, limit: str, setting: str) -> None:
        """Stop the program: it went past one of its budgets (raises BudgetExceeded)."""
        raise BudgetExceeded(
            f"acllab stopped this program at its {what} budget ({limit}): a loop that never "
            f"ends? Start afresh with acllab.reset() (in a lesson: re-run its setup cell); if "
            f"the program really needs more, raise the budget with "
            f"acllab.configure({setting}=...).")

    def launch(self, ns: int) -> None:
        """The host spends ``ns`` on a call that submits work next (submit() catches up)."""
        self.host_ns += ns

    def submit(self, task: Task, stream: Stream | None) -> Task:
        """Submit a task at the current host time, after the stream's previous task.

        Call ``launch(ns)`` (not ``spend``) for the host cost just before: the engine catches
        up once, here, after the submission.
        """
        eng = self.engine
        if eng.submitted >= self.task_budget:
            self.over_budget("task", f"{self.task_budget:,} tasks", "task_budget")
        after = None
        if stream is not None and stream.stopped:
            task.cancelled = True            # ACL_STOP_ON_FAILURE (see _stop_stream)
        try:
            if stream is not None:
                after = self._enqueue(task, stream)
                if eng.record and (task.reads or task.writes):
                    self._watch_host_ranges(task)
            host = self.host_ns
            if self._due_reports or self._callbacks_ahead:
                self.process(host)            # the device catches up to the host first ...
                eng.submit(task, host, after)
                nxt = eng.peek()
                if nxt is not None and nxt <= host:
                    self.process(host)        # ... then runs what ends at once (zero-length)
                return task
            # as above, in one engine call, when no report can fall due
            eng.submit_at(task, host, after)
            return task
        except BaseException:
            # an interrupt (or any exception) on the way: if the engine never got the task,
            # the submission did not happen (the stream forgets it); if it did, it happened
            # (the engine keeps itself consistent, see acllab.engine)
            self._unsubmit(task, stream, after)
            raise

    def submit_chain(self, tasks: list[Task], stream: Stream | None) -> None:
        """``submit`` each of ``tasks`` in order, at the current host time (a model
        execution's ops): the same submissions, with the per-call checks done once."""
        eng = self.engine
        last = None if stream is None else stream.last
        if stream is not None and stream.stopped:
            for task in tasks:
                task.cancelled = True        # ACL_STOP_ON_FAILURE (see _stop_stream)
        try:
            if (stream is None or self._due_reports or self._callbacks_ahead
                    or eng.submitted + len(tasks) > self.task_budget
                    or any(t.reads or t.writes for t in tasks)):
                for task in tasks:
                    self.submit(task, stream)
                return
            submit_at = eng.submit_at
            enqueue = self._enqueue
            host = self.host_ns
            for task in tasks:
                submit_at(task, host, enqueue(task, stream))
        except BaseException:
            self._abandon_chain(tasks, stream, last)
            raise

    def _unsubmit(self, task: Task, stream: Stream | None, after: Task | None) -> None:
        """``submit`` was interrupted: undo its part if the engine never got ``task``."""
        if task.id < 0 and stream is not None and stream.last is task:
            stream.last = after
            stream.submitted -= 1
            queue = self._queued.get(stream)
            if queue and queue[-1] is task:
                queue.pop()
            self._forget_views(task)
        self._callbacks_ahead = self._count_callbacks_ahead()

    def _abandon_chain(self, tasks: list[Task], stream: Stream | None,
                       last: Task | None) -> None:
        """``submit_chain`` was interrupted: the rest of the chain is not submitted, and what
        was submitted and has not started is cancelled (it passes through the engine without
        effects, as destroy_stream_force's tasks do), so the call did not happen, as far as
        it can be undone."""
        for i, task in enumerate(tasks):
            if task.id < 0:
                self._unsubmit(task, stream, tasks[i - 1] if i else last)
                break
            if task.start_ns < 0:
                task.cancelled = True
        self._callbacks_ahead = self._count_callbacks_ahead()

    def _count_callbacks_ahead(self) -> int:
        """HostCallback tasks submitted that no stream reached yet (``_callbacks_ahead`` as
        the streams' queues say, after an interrupt)."""
        return sum(1 for queue in self._queued.values() for t in queue
                   if t.api == "launch_callback" and t.start_ns < 0 and not t.cancelled)

    def _enqueue(self, task: Task, stream: Stream) -> Task | None:
        """Make ``task`` the last of ``stream``'s queue; return the task it follows there (the
        engine puts it first in deps, as "stream")."""
        after = stream.last
        try:
            stream.last = task
            stream.submitted += 1
            task.stream = stream
            queue = self._queued.get(stream)
            if queue is None:
                queue = self._queued[stream] = deque()
            elif len(queue) >= 32:   # drop the started prefix now and then (queued_tasks does)
                while queue and (queue[0].start_ns >= 0 or queue[0].cancelled):
                    queue.popleft()
            queue.append(task)
            return after
        except BaseException:        # an interrupt: the stream never had it
            if stream.last is task:
                stream.last = after
                stream.submitted -= 1
            queue = self._queued.get(stream)
            if queue and queue[-1] is task:
                queue.pop()
            raise

    def _wrote(self, task: Task) -> None:
        """A task's on_end wrote memory: rebaseline the watched host ranges it covers."""
        if self._views:
            self._rebaseline_views(task)

    def task_fault(self, task: Task, message: str) -> None:
        """Record that ``task``'s data effect failed; the next synchronisation reports it.

        The task keeps ``info['fault']``; its stream reports the first fault at its next
        synchronize_stream / synchronize_device (507015 for work on the AI Core, 507000
        otherwise), as a kernel's AI Core exception is; a blocking call (no stream) returns
        the error itself when it has waited for its tasks.
        """
        # the task's own dict: a copy's info may be shared with identical copies
        info = task.info = dict(task.info) if task.info else {}
        info.setdefault("fault", message)
        info["fault_reported"] = True
        code = 507015 if task.kind in ("model_op", "kernel", "single_op") else 507000
        text = f"{task.name} (task {task.id}) failed: {message}"
        s = task.stream
        if s is not None:
            if s.fault is None:
                s.fault = text
                self.fault_codes[id(s)] = code
            if s.failure_mode == 1:          # ACL_STOP_ON_FAILURE: the stream stops
                self._stop_stream(s, task)
        elif self.blocking_fault is None:
            self.blocking_fault = (code, text)

    def _stop_stream(self, stream: Stream, failed: Task) -> None:
        """ACL_STOP_ON_FAILURE: the stream's tasks after ``failed`` that have not started, and
        every task submitted to it later, do nothing (cancelled: they pass in order with no
        effect and no time), as CANN stops a stream in that mode at its first failure; its
        synchronisations report the fault once, as in the other mode.

        Differs from hardware: the card reports each later task as failed as well; acllab
        reports the first failure only."""
        stream.stopped = True
        for t in reversed(self.engine.tasks):
            if t is failed:
                break
            if t.stream is stream and t.start_ns < 0 and not t.cancelled:
                t.cancelled = True

    def raise_fault(self, stream: Stream | None) -> None:
        """Raise (once) the fault recorded for ``stream`` (None: for the blocking calls)."""
        if stream is None:
            if self.blocking_fault is not None:
                (code, text), self.blocking_fault = self.blocking_fault, None
                raise Fail(code, text)
            return
        if stream.fault is not None:
            text, stream.fault = stream.fault, None
            raise Fail(self.fault_codes.pop(id(stream), 507015), text)

    def process(self, limit_ns: int | None, target: Task | None = None) -> bool:
        """Advance the device to ``limit_ns`` (None: no limit), or until ``target`` ends.

        Auto-delivered callback reports run in time order in between; the engine's
        :meth:`~acllab.engine.Engine.run` does the rest. Returns True when ``target`` is done
        (or None was given).
        """
        eng = self.engine
        due = self._due_reports
        try:
            if target is None:
                if not due and not self._callbacks_ahead:
                    eng.run(limit_ns)        # no report can fall due on the way
                    return True
                while eng.run(limit_ns, due.__len__):   # stops when a report falls due
                    self._run_due(due)
                return True
            while True:
                if due:
                    self._run_due(due)
                    continue
                if target.end_ns >= 0:
                    return True
                if not eng.run(limit_ns, lambda: due or target.end_ns >= 0):
                    return target.end_ns >= 0
        except BaseException:
            # the engine finished its interrupted step (acllab.engine); a HostCallback it
            # cancelled on the way was never reached: count again what is ahead
            self._callbacks_ahead = self._count_callbacks_ahead()
            raise

    def _run_due(self, due: list[Callback]) -> None:
        """Run the first due report; an interrupt before it ran leaves it due."""
        cb = due[0]
        try:
            due.pop(0)
            self._run_report(cb)
        except BaseException:
            if not cb.done and not cb.handed and cb not in due:
                due.insert(0, cb)
            raise

    def wait_for(self, task: Task, timeout_ns: int | None = None) -> bool:
        """Block the host until ``task`` ends (plus the wake-up), or until the timeout.

        Returns False on timeout. Raises Deadlock when nothing could ever finish it.
        """
        if task.end_ns >= 0:
            self.log("join", task.id)
            return True
        limit = self.host_ns + timeout_ns if timeout_ns is not None else None
        while not self.process(limit, task):
            if limit is not None:    # the device ran to the timeout (or ran dry before it)
                self.host_ns = limit
                self.process(self.host_ns)
                return False
            if not self._await_reports():
                self.host_ns = max(self.host_ns, self.engine.now_ns)   # the host saw it all
                raise Deadlock(task)
        self.host_ns = max(self.host_ns, task.end_ns + self.profile.sync_wakeup_ns)
        self.process(self.host_ns)
        self.log("join", task.id)
        return True

    def _await_reports(self) -> bool:
        """When reports that another thread runs are still to come (a free report thread's,
        see :meth:`_detach`), wait a little for them in wall-clock time (the API lock
        released) and return True: the device may go on. Else False (reports left to a
        report thread that ended never run, as on a card: the wait is a deadlock, 507046)."""
        if not self._report_threads or not self.waiting_reports():
            return False
        with self._report_cv:
            self._report_cv.wait(0.05)
        return True

    def sync_context(self, ctx: Context) -> None:
        for s in [ctx.default_stream, *ctx.streams.values()]:
            if s is not None and s.last is not None:
                try:
                    self.wait_for(s.last)
                except Deadlock:
                    pass

    # -- callbacks -------------------------------------------------------------------------
    def launch_callback(self, fn, user_data, block_type: int, stream: Stream) -> None:
        """Put a HostCallback task on ``stream`` (see :mod:`acllab.callbacks`)."""

        def reached(cb: Callback) -> None:
            self._callbacks_ahead -= 1
            manual = stream.report_thread == self.main_thread
            (self._manual_reports if manual else self._due_reports).append(cb)

        task = callback_task(fn, user_data, block_type == ACL_CALLBACK_BLOCK, stream, reached)
        try:
            self._callbacks_ahead += 1
            self.submit(task, stream)
        except BaseException:
            self._callbacks_ahead = self._count_callbacks_ahead()
            raise

    def subscribe(self, stream: Stream, tid: int) -> None:
        """Deliver ``stream``'s callback reports to thread ``tid`` (subscribe_report)."""
        stream.report_thread = tid
        if tid == self.main_thread:
            return
        with self._report_cv:
            state = self._report_threads.get(tid)
            thread = next((t for t in threading.enumerate() if t.ident == tid), None)
            if state is None or (thread is not None and state.thread is not thread and (
                    state.thread is None or not state.thread.is_alive())):
                # a new thread, or a new thread under the id of one that has ended (the
                # system reuses thread ids): its own state, with the streams still counted
                streams = state.streams if state is not None else 0
                state = self._report_threads[tid] = _ReportThread(thread)
                state.streams = streams
            if state.thread is not None:
                _REPORT_OWNERS[state.thread] = weakref.ref(self)
            state.streams += 1
            self._report_cv.notify_all()

    def unsubscribe(self, stream: Stream) -> None:
        tid, stream.report_thread = stream.report_thread, None
        with self._report_cv:
            state = self._report_threads.get(tid)
            if state is not None and state.streams > 0:
                state.streams -= 1
            self._report_cv.notify_all()

    def report_thread(self, tid: int, wait_s: float = 0.0) -> _ReportThread | None:
        """The state of report thread ``tid`` when the caller is that thread (the Python
        thread that was running under that id when it was subscribed), else None.

        A thread that is not subscribed yet waits up to ``wait_s`` seconds of wall-clock time
        for it: a program starts its report thread and only then subscribes it (it needs the
        thread's id), so the thread's first polls usually come first.
        """
        if tid == self.main_thread:
            return None
        me = threading.current_thread()
        deadline = time.monotonic() + wait_s
        with self._report_cv:
            while True:
                state = self._report_threads.get(tid)
                if state is not None and state.thread is me:
                    return state
                # the state of an ended thread whose id this one reuses is not this thread's:
                # wait for this one's own subscription, as for a thread not subscribed yet
                stale = state is not None and state.thread is not None and \
                    not state.thread.is_alive()
                if (state is not None and not stale) or not self.initialized:
                    return None
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return None
                self._report_cv.wait(remaining)

    def foreign_poll(self) -> bool:
        """True when the calling thread (not the main thread) cannot get reports from this
        runtime and must not touch it: a report thread of an earlier runtime (one that
        acllab.reset() replaced: the thread of a setup cell that was run again), or any
        thread that is none of this runtime's report threads while it is not initialised.
        Its process_report waits and returns an error without changing this runtime (see
        acllab.acl.rt.callback.process_report)."""
        me = threading.current_thread()
        owner = _REPORT_OWNERS.get(me)
        if owner is not None and owner() is not self:
            return True
        if not self.initialized:
            state = self._report_threads.get(threading.get_ident())
            return state is None or state.thread is not me
        return False

    def poll_report(self, state: _ReportThread, timeout_ms: int) -> int:
        """One process_report call of a report thread (not the main thread); its code.

        It runs the reports handed to the thread (:meth:`_hand_over`, :meth:`run_handed`)
        and returns 0; else 0 when a report another thread ran for it (one it did not take
        in time) came since its previous poll, 100035 once it is no longer subscribed,
        100036 when nothing came. It waits for that in wall-clock time (at most
        ``min(timeout_ms, 10)`` ms, woken when a report is handed over or a subscription
        ends), so the thread does not spin, and the poll itself touches neither the virtual
        clock nor the API log nor the call count (the callbacks it runs do, at their reports'
        virtual times): the same program gives the same log and trace however often the
        thread happened to poll.

        Differs from hardware: a report reaches the thread when its stream reaches it in
        virtual time, whatever the wall-clock time; the polls wait at most 10 ms of
        wall-clock time each, take no virtual time, and are not in the API log (the trace
        shows each report as a CallbackReport task on the device's callback lane).
        """
        wait_s = (min(timeout_ms, 10) if timeout_ms >= 0 else 10) / 1000
        deadline = time.monotonic() + wait_s
        me = threading.current_thread()
        with self._report_cv:
            while True:
                if state.inbox and (self.turn is None or self.turn is me) \
                        and self.run_handed(state):
                    return 0
                if state.taken < state.delivered:
                    state.taken += 1
                    return 0
                if state.streams == 0:
                    return 100035
                if not self.initialized:
                    return 100001
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return 100036
                self._report_cv.wait(remaining)

    # -- reports handed to their report threads --------------------------------------------
    #: Wall-clock seconds a report waits for its report thread to take it before the thread
    #: whose call reached it runs it itself (a report thread that does not poll).
    PICK_S = 1.0
    #: Wall-clock seconds a handed-over callback may go without a pyACL call, while another
    #: thread waits for its turn, before its report thread is set free (:meth:`_detach`).
    STALL_S = 0.5
    #: ... and while no other thread waits for its turn (it may wait for the thread whose
    #: call reached it, which a card would not hold up).
    STALL_ALONE_S = 2.0

    def wait_turn(self) -> None:
        """Wait (the API lock released meanwhile) until no report thread holds the turn, or
        the calling thread does; the facade calls this when :attr:`turn` is set. The turn's
        own thread only records that it is active (see :meth:`_hand_over`)."""
        me = threading.current_thread()
        if self.turn is me:
            self.turn_active = time.monotonic()
            return
        with self._report_cv:
            self._turn_waiters += 1
            try:
                while self.turn is not None and self.turn is not me:
                    self._report_cv.wait(0.25)
            finally:
                self._turn_waiters -= 1

    def _hand_over(self, cb: Callback) -> bool:
        """Hand a report to its report thread, which runs it in its process_report (as a
        card's driver delivers it); True when it ran there (or runs there now), False when
        the caller must run it itself.

        The calling thread (whose call brought the stream to the report) waits until the
        callback has run, and meanwhile only the report thread's calls may start
        (:attr:`turn`): the callback's calls come where they would have come had it run
        inline, so a program gives the same log and trace on every run. Two things end the
        wait early. A report thread that does not take the report within :attr:`PICK_S`
        seconds (it does not poll, or no longer exists) leaves it to the caller, which runs
        it inline as acllab always did. A callback that makes no call for :attr:`STALL_S`
        seconds while another thread waits for its turn (or :attr:`STALL_ALONE_S` seconds
        while none does: it may wait for the caller) is waiting for something (a full queue
        that thread would empty, say): its report thread is set free (:meth:`_detach`) and
        the caller goes on without it.

        A report for the thread that reached it runs inline (the thread is in a call, not
        in a poll), unless that thread is running a handed-over callback or is free: then it
        queues for the thread's poll, as on a card, where a report thread runs one callback
        at a time, between its polls.
        """
        state = self._report_threads.get(cb.stream.report_thread)
        if state is None:
            return False
        thread = state.thread
        me = threading.current_thread()
        if thread is None or not thread.is_alive():
            return False
        if thread is me:
            if state.running is None and not state.free:
                return False
            cb.detached = state.free
            state.inbox.append(cb)
            return True
        cv = self._report_cv
        with cv:
            state.inbox.append(cb)
            if state.free:
                cb.detached = True
                cv.notify_all()
                return True
            before, outer = self.host_ns, self.turn
            self.turn = thread
            self.turn_active = time.monotonic()
            cv.notify_all()
            pick_by = time.monotonic() + self.PICK_S
            try:
                return self._await_handed(cb, state, thread, before, pick_by)
            except BaseException:
                # an interrupt while waiting: a report not taken yet is the caller's again
                # (still due); one taken runs to its end on its thread
                if cb in state.inbox:
                    state.inbox.remove(cb)
                elif not cb.done:
                    cb.detached = True
                    self.host_ns = max(self.host_ns, before)
                raise
            finally:
                self.turn = outer
                cv.notify_all()

    def _await_handed(self, cb: Callback, state: _ReportThread, thread: threading.Thread,
                      before: int, pick_by: float) -> bool:
        """The wait of :meth:`_hand_over` (the report condition held)."""
        cv = self._report_cv
        while not cb.done:
            now = time.monotonic()
            if cb in state.inbox:                    # not taken yet
                if now >= pick_by or not thread.is_alive():
                    state.inbox.remove(cb)
                    return False
                cv.wait(min(pick_by - now, 0.05))
                continue
            if state.running is None and not cb.done:   # taken, and interrupted there
                return True
            quiet = now - max(self.turn_active, state.started)
            if quiet >= (self.STALL_S if self._turn_waiters else self.STALL_ALONE_S):
                self._detach(state, cb, before)
                return True
            cv.wait(0.05)
        return True

    def _detach(self, state: _ReportThread, cb: Callback, before: int) -> None:
        """Set a report thread free: its callback (``cb``, running now) waits for another
        thread, which waits for its turn. From now on its reports are queued for it and
        the threads that reach them go on; it runs them when it polls, alongside the other
        threads, as on a card. The order of the threads' calls in the log then depends on
        their timing (said once, in a warning)."""
        state.free = True
        cb.detached = True
        self.host_ns = max(self.host_ns, before)
        for queued in state.inbox:
            queued.detached = True
        name = state.thread.name if state.thread is not None else "?"
        self.free_report_threads.append(name)
        self.acl_log.append((self.host_ns, "WARNING", "acllab",
                             f"report thread {name!r} set free: its callback "
                             f"{describe(cb.fn)} waits for another thread"))
        warnings.warn(
            f"acllab: the host callback {describe(cb.fn)}, running on report thread "
            f"{name!r}, has made no pyACL call for {self.STALL_S:g} s while another thread "
            "waits to make one: it waits for that thread (a full queue it empties, say). "
            "acllab now runs that report thread's callbacks alongside the other threads, as a "
            "card does; the order of the threads' calls in the log and trace may then differ "
            "from run to run.", AclWarning, stacklevel=_user_stacklevel())

    def run_handed(self, state: _ReportThread) -> int:
        """Run, on the calling report thread, the reports handed to it (see
        :meth:`_hand_over`), in order, while it may (it holds the turn, or nobody does);
        how many ran. Called from its process_report with the API lock held."""
        me = threading.current_thread()
        ran = 0
        while state.inbox and (self.turn is None or self.turn is me):
            cb = state.inbox.popleft()
            cb.handed = True
            state.running, state.started = cb, time.monotonic()
            try:
                self._run_report(cb, on_thread=True)
                if cb.detached:              # nobody waits for it: the device goes on from
                    self.process(self.host_ns)   # its end (reports reached queue here)
            finally:
                state.running = None
                ran += 1
                self._report_cv.notify_all()
        return ran

    def waiting_reports(self) -> bool:
        """True when a report another thread will run (handed to a live report thread that
        is not the caller) is still to come: a wait for its stream may end."""
        me = threading.current_thread()
        return any((state.inbox or state.running is not None) and state.thread is not me
                   and state.thread is not None and state.thread.is_alive()
                   for state in self._report_threads.values())

    def _run_report(self, cb: Callback, manual: bool = False, on_thread: bool = False) -> None:
        """Run one callback report at its virtual time (on the report thread's timeline).

        A report for a report thread (not the main thread's ``manual`` ones) is handed to
        that thread, which runs it in its process_report (:meth:`_hand_over`); this method
        runs it itself only when the report thread cannot (it has ended, or does not poll),
        or when it is that thread (``on_thread``: the callback runs with the API lock
        released, so that it may wait for another thread's calls, as on a card).

        Whatever happens in the callback, the report is accounted for: a callback that
        raises an Exception is a warning (a learner's bug must not break the runtime); one
        that is interrupted (KeyboardInterrupt, any BaseException) is a fault of its
        HostCallback task, which the stream reports at its next synchronisation (507000), and
        the interrupt goes on, after the report was recorded and a blocking callback's
        stream released, as for a report that returned.
        """
        if not manual and not on_thread and self._hand_over(cb):
            return
        if cb.detached:                      # alongside the other threads: the shared clock
            start = max(cb.reached_ns, self.host_ns, self.engine.now_ns)
        else:
            start = max(cb.reached_ns, self.host_ns) if manual else cb.reached_ns
        saved = self.host_ns
        self.host_ns = start
        try:
            self.log("join", cb.task.id)     # the callback runs after the stream reached it
            if cb.block:                     # what it submits comes before the stream's next
                self.log("callback_begin", cb.task.id)    # tasks (the sanitizer's order)
            outer, self.running_callback = self.running_callback, (
                describe(cb.fn), threading.current_thread().name)
            try:
                if on_thread:
                    with unlocked():         # its calls take the lock one by one
                        cb.fn(cb.user_data)
                else:
                    cb.fn(cb.user_data)
            except Exception:   # a learner's bug must not break the runtime
                msg = traceback.format_exc(limit=3)
                self.callback_errors.append(msg)
                warnings.warn(f"a host callback raised an exception:\n{msg}", AclWarning,
                              stacklevel=_user_stacklevel())
            finally:
                self.running_callback = outer
                if cb.block:
                    self.log("callback_end", cb.task.id)
            self._report_ran(cb, start, saved, manual, None, on_thread)
        except BaseException as exc:
            if not cb.done:                  # (else _report_ran finished it, then raised)
                self._report_ran(cb, start, saved, manual, exc, on_thread)
            raise

    def _report_ran(self, cb: Callback, start: int, saved: int, manual: bool,
                    exc: BaseException | None, on_thread: bool = False) -> None:
        """Account for a report whose callback returned (``exc`` None) or was interrupted:
        the host clock, its CallbackReport task, the end of a blocking callback's task, the
        report thread's count. Finished even when an interrupt lands in it (each part is done
        once; the interrupt is raised again after)."""
        interrupt = end = report = None
        counted = manual or on_thread        # (a poll that ran it returns 0 itself)
        for _attempt in range(3):            # the later ones only finish what is left
            try:
                if end is None:
                    if cb.detached:          # the device went on meanwhile
                        start = max(start, self.engine.now_ns)
                    end = max(self.host_ns, start) + self.profile.callback_ns
                self.host_ns = end if manual or cb.detached else saved
                cb.done = True
                if exc is not None and "fault_reported" not in (cb.task.info or {}):
                    name = type(exc).__name__
                    self.callback_errors.append(f"{name}: the callback was interrupted")
                    self.task_fault(cb.task, f"{name}: {exc}" if str(exc)
                                    else f"{name} (the callback was interrupted)")
                if report is None:
                    report = report_task(cb, start, end)
                if report.id < 0:
                    self.engine.submit(report, start)
                task = cb.task
                if cb.block and task.end_ns < 0 and (task.duration_ns.__class__ is not int or (
                        _attempt and not self.engine._due(task))):
                    self.engine.finish(task, end)
                if not counted:              # the report thread's poll learns of it
                    counted = True
                    state = self._report_threads.get(cb.stream.report_thread)
                    if state is not None:
                        with self._report_cv:
                            state.delivered += 1
                            self._report_cv.notify_all()
                break
            except BaseException as again:
                interrupt = interrupt or again
        if interrupt is not None:
            raise interrupt

    def reports_possible(self) -> bool:
        """True when a report for the main thread is waiting, or the device still has work
        that could reach one (so a process_report that waits forever could return)."""
        return bool(self._manual_reports) or not self.engine.idle

    def process_report(self, timeout_ns: int) -> bool:
        """Run one report for this thread's streams, waiting up to ``timeout_ns``."""
        limit = self.host_ns + timeout_ns if timeout_ns >= 0 else None
        manual, due = self._manual_reports, self._due_reports
        while not manual:
            if due:
                self.process(self.host_ns)
                continue
            try:
                ran_dry = not self.engine.run(limit, lambda: manual or due)
            except BaseException:
                self._callbacks_ahead = self._count_callbacks_ahead()   # as in process
                raise
            if ran_dry:
                self.host_ns = max(self.host_ns if limit is None else limit,
                                   self.engine.now_ns)
                self.process(self.host_ns)
                return False
        cb = manual[0]
        try:
            manual.pop(0)
            self._run_report(cb, manual=True)
        except BaseException:
            if not cb.done and cb not in manual:   # interrupted before it ran: still pending
                manual.insert(0, cb)
            raise
        self.process(self.host_ns)
        return True

    # -- data buffers ----------------------------------------------------------------------
    def create_data_buffer(self, addr: int, size: int) -> DataBuffer:
        buf = DataBuffer(0, addr, size)
        buf.handle = self.new_handle("buffer", buf)
        return buf

    # -- whole-runtime views ---------------------------------------------------------------
    @property
    def tasks(self) -> list[Task]:
        return self.engine.tasks

    def region(self, addr: int) -> Region | None:
        return self.space.find(addr)

    def __repr__(self) -> str:
        state = "initialised" if self.initialized else ("finalized" if self.finalized else
                                                        "not initialised")
        return (f"<Runtime {self.profile.name}: {state}, host at {self.host_ns / 1000:.1f} us, "
                f"{len(self.devices)} devices, {len(self.engine.tasks)} tasks>")

