"""ACL error codes (ACL_REFERENCE.md section 4), readable explanations, and how they surface.

Every public facade call that fails returns the real aclError code. The explanation goes to
``acl.get_recent_err_msg()`` and, by default, to an :class:`AclWarning`; in strict mode the
runtime raises :class:`AclError` instead (``acllab.configure(strict=True)``).
"""

from __future__ import annotations

import re

__all__ = [
    "CODES", "NAMES", "AclError", "AclWarning", "BudgetExceeded", "Fail", "RerunNeeded",
    "code_name", "describe",
]

CODES: dict[str, int] = {
    "ACL_SUCCESS": 0,
    # general
    "ACL_ERROR_INVALID_PARAM": 100000,
    "ACL_ERROR_UNINITIALIZE": 100001,
    "ACL_ERROR_REPEAT_INITIALIZE": 100002,
    "ACL_ERROR_INVALID_FILE": 100003,
    "ACL_ERROR_INVALID_FILE_SIZE": 100005,
    "ACL_ERROR_PARSE_FILE": 100006,
    "ACL_ERROR_INVALID_MODEL_ID": 100011,
    "ACL_ERROR_DESERIALIZE_MODEL": 100012,
    "ACL_ERROR_PARSE_MODEL": 100013,
    "ACL_ERROR_READ_MODEL_FAILURE": 100014,
    "ACL_ERROR_MODEL_SIZE_INVALID": 100015,
    "ACL_ERROR_MODEL_INPUT_NOT_MATCH": 100017,
    "ACL_ERROR_MODEL_OUTPUT_NOT_MATCH": 100018,
    "ACL_ERROR_MODEL_NOT_DYNAMIC": 100019,
    # single ops (acl_base_rt.h, hicann/runtime include/external/acl)
    "ACL_ERROR_OP_TYPE_NOT_MATCH": 100020,
    "ACL_ERROR_OP_INPUT_NOT_MATCH": 100021,
    "ACL_ERROR_OP_OUTPUT_NOT_MATCH": 100022,
    "ACL_ERROR_OP_ATTR_NOT_MATCH": 100023,
    "ACL_ERROR_OP_NOT_FOUND": 100024,
    "ACL_ERROR_OP_LOAD_FAILED": 100025,
    "ACL_ERROR_UNSUPPORTED_DATA_TYPE": 100026,
    "ACL_ERROR_FORMAT_NOT_MATCH": 100027,
    "ACL_ERROR_REPEAT_SUBSCRIBE": 100033,
    "ACL_ERROR_STREAM_NOT_SUBSCRIBE": 100034,
    "ACL_ERROR_THREAD_NOT_SUBSCRIBE": 100035,
    "ACL_ERROR_WAIT_CALLBACK_TIMEOUT": 100036,
    "ACL_ERROR_REPEAT_FINALIZE": 100037,
    "ACL_ERROR_BAD_ALLOC": 200000,
    "ACL_ERROR_API_NOT_SUPPORT": 200001,
    "ACL_ERROR_INVALID_DEVICE": 200002,
    "ACL_ERROR_MEMORY_ADDRESS_UNALIGNED": 200003,
    "ACL_ERROR_INVALID_RESOURCE_HANDLE": 200005,
    "ACL_ERROR_FEATURE_UNSUPPORTED": 200006,
    "ACL_ERROR_INTERNAL_ERROR": 500000,
    "ACL_ERROR_FAILURE": 500001,
    "ACL_ERROR_GE_FAILURE": 500002,
    # runtime
    "ACL_ERROR_RT_PARAM_INVALID": 107000,
    "ACL_ERROR_RT_INVALID_DEVICEID": 107001,
    "ACL_ERROR_RT_CONTEXT_NULL": 107002,
    "ACL_ERROR_RT_STREAM_CONTEXT": 107003,
    "ACL_ERROR_RT_MODEL_CONTEXT": 107004,
    "ACL_ERROR_RT_EVENT_TIMESTAMP_INVALID": 107006,
    "ACL_ERROR_RT_ADDR_UNALIGNED": 107008,
    "ACL_ERROR_RT_STREAM_SUBSCRIBE": 107011,
    "ACL_ERROR_RT_THREAD_SUBSCRIBE": 107012,
    "ACL_ERROR_RT_STREAM_NO_CB_REG": 107015,
    "ACL_ERROR_RT_INVALID_MEMORY_TYPE": 107016,
    "ACL_ERROR_RT_INVALID_HANDLE": 107017,
    "ACL_ERROR_RT_WAIT_TIMEOUT": 107019,
    "ACL_ERROR_RT_TASK_TIMEOUT": 107020,
    "ACL_ERROR_RT_FEATURE_NOT_SUPPORT": 207000,
    "ACL_ERROR_RT_MEMORY_ALLOCATION": 207001,
    "ACL_ERROR_RT_MEMORY_FREE": 207002,
    "ACL_ERROR_RT_NO_EVENT_RESOURCE": 207007,
    "ACL_ERROR_RT_NO_STREAM_RESOURCE": 207008,
    "ACL_ERROR_RT_INTERNAL_ERROR": 507000,
    "ACL_ERROR_RT_STREAM_NOT_COMPLETE": 507004,
    "ACL_ERROR_RT_EVENT_NOT_COMPLETE": 507006,
    "ACL_ERROR_RT_REPORT_TIMEOUT": 507012,
    "ACL_ERROR_RT_AICORE_EXCEPTION": 507015,
    "ACL_ERROR_RT_STREAM_SYNC_TIMEOUT": 507046,
    "ACL_ERROR_RT_EVENT_SYNC_TIMEOUT": 507047,
    # model (GE)
    "ACL_ERROR_GE_PARAM_INVALID": 145000,
    "ACL_ERROR_GE_EXEC_MODEL_PATH_INVALID": 145002,
    "ACL_ERROR_GE_EXEC_MODEL_ID_INVALID": 145003,
    "ACL_ERROR_GE_EXEC_MODEL_DATA_SIZE_INVALID": 145006,
    "ACL_ERROR_GE_EXEC_MODEL_ADDR_INVALID": 145007,
    "ACL_ERROR_GE_DYNAMIC_INPUT_ADDR_INVALID": 145011,
    "ACL_ERROR_GE_DYNAMIC_INPUT_LENGTH_INVALID": 145012,
    "ACL_ERROR_GE_DYNAMIC_BATCH_SIZE_INVALID": 145013,
    "ACL_ERROR_GE_SHAPE_INVALID": 145021,
    "ACL_ERROR_GE_MEMORY_ALLOCATION": 245000,
    "ACL_ERROR_GE_INTERNAL_ERROR": 545000,
    "ACL_ERROR_GE_LOAD_MODEL": 545001,
}
NAMES: dict[int, str] = {v: k for k, v in CODES.items()}

# One generic sentence per code; call sites add the specifics.
_MEANING: dict[int, str] = {
    100000: "a parameter is invalid (null pointer, zero size or a value out of range)",
    100001: "acl.init() has not been called yet",
    100002: "acl.init() was already called; only the first configuration counts",
    100003: "the file is invalid",
    100005: "the file size is invalid",
    100006: "the file could not be parsed",
    100011: "the model id is invalid",
    100012: "the model could not be deserialised",
    100013: "the model could not be parsed",
    100014: "the model could not be read",
    100015: "the model size is invalid",
    100017: "the model inputs do not match its description",
    100018: "the model outputs do not match its description",
    100019: "the model is not a dynamic-shape model",
    100020: "the op type does not match the op model",
    100021: "the op's inputs do not match (their count, or their descriptions)",
    100022: "the op's outputs do not match (their count, or their descriptions)",
    100023: "the op's attributes do not match",
    100024: "no op model matches the op type, descriptions and attributes "
            "(acl.op.set_model_dir loads the models atc --singleop compiled)",
    100025: "the op model could not be loaded",
    100026: "the data type is not supported",
    100027: "the format does not match",
    100033: "the stream is already subscribed to a report thread (deprecated code: the "
            "current runtime returns 107011)",
    100034: "the stream is not subscribed to a report thread",
    100035: "the thread is not subscribed to any stream (deprecated code: the current "
            "runtime returns 107012)",
    100036: "no callback report arrived before the timeout (deprecated code: the current "
            "runtime returns 507012)",
    100037: "acl.finalize() was already called",
    200000: "memory allocation failed",
    200001: "this API is not supported",
    200002: "the device is invalid",
    200003: "the memory address is not aligned",
    200005: "the resource handle is invalid",
    200006: "the feature is not supported",
    500000: "internal error",
    500001: "the operation failed",
    500002: "the graph engine failed (an op that cannot be compiled, an engine type it does "
            "not know)",
    107000: "a runtime parameter is invalid",
    107001: "the device id is invalid",
    107002: "there is no current context: call acl.rt.set_device() or acl.rt.set_context() first",
    107003: "the stream belongs to another context",
    107004: "the model belongs to another context",
    107006: "the event timestamp is invalid (the event has not completed, or carries none)",
    107008: "the address is not aligned as the runtime requires",
    107011: "the stream is already subscribed to a report thread",
    107012: "the thread is not subscribed to any stream",
    107015: "the stream has no callback thread registered",
    107016: "the memory type is invalid for this operation",
    107017: "the handle is invalid (unknown, already destroyed or of another kind)",
    107019: "the wait timed out",
    107020: "a task timed out",
    207000: "the feature is not supported by the runtime",
    207001: "device memory allocation failed (out of memory)",
    207002: "freeing memory failed",
    207007: "no event resources are left",
    207008: "no stream resources are left",
    507000: "runtime internal error",
    507004: "the stream has not completed",
    507006: "the event has not completed",
    507012: "no callback report arrived before the timeout",
    507015: "an AI Core kernel raised an exception",
    507046: "stream synchronisation timed out",
    507047: "event synchronisation timed out",
    145000: "a graph-engine parameter is invalid",
    145002: "the model path is invalid",
    145003: "the model id is invalid",
    145006: "the model data size is invalid",
    145007: "the model address is invalid",
    145011: "the dynamic-shape input address is invalid",
    145012: "the dynamic-shape input length is invalid",
    145013: "the dynamic batch size is not one of the model's gears",
    145021: "the shape is invalid",
    245000: "graph-engine memory allocation failed",
    545000: "graph-engine internal error",
    545001: "the model could not be loaded",
}


def code_name(code: int) -> str:
    """The symbolic name of an ACL error code, e.g. 107000 -> 'ACL_ERROR_RT_PARAM_INVALID'."""
    return NAMES.get(code, f"UNKNOWN_{code}")


def describe(code: int) -> str:
    """One line that names a code and says what it generally means."""
    return f"{code} {code_name(code)}: {_MEANING.get(code, 'unknown error')}"


class AclWarning(UserWarning):
    """Emitted when a pyACL call returns a non-zero code (the default, non-strict mode)."""


class AclError(RuntimeError):
    """Raised for a non-zero code in strict mode; ``.code`` holds the aclError."""

    def __init__(self, code: int, api: str, message: str):
        self.code = code
        self.api = api
        self.message = message
        super().__init__(f"{api} returned {code} ({code_name(code)}): {message}")


class _OneLine:
    """An exception acllab raises to stop a notebook cell with a message of its own: IPython
    (Jupyter) shows it as the one line ``Name: message`` instead of a traceback through
    acllab's code, which would tell a learner nothing (IPython's ``_render_traceback_``
    protocol; plain Python still prints the usual traceback)."""

    def _render_traceback_(self) -> list[str]:
        return [f"{type(self).__name__}: {self}"]


class BudgetExceeded(_OneLine, RuntimeError):
    """A program ran past acllab's task, call or virtual-time budget (a runaway loop?).

    Raised even in non-strict mode, so that a ``while True:`` loop stops; the runtime stays
    usable for inspection, and ``acllab.reset()`` starts afresh. The budgets count tasks,
    calls and virtual time, never the wall clock, so the same program stops at the same call.
    """


class RerunNeeded(_OneLine, RuntimeError):
    """A notebook cell used a runtime that ``acl.finalize()`` had released (a cell re-run after
    the lesson's clean-up cell): raised instead of returning 100001, so that the cell stops at
    once with a message that says what to re-run, rather than going on with a null handle into
    a Python error. Only where ``acllab.configure(stop_after_finalize=True)`` asked for it (the
    lessons' setting, :data:`acllab.session.NOTEBOOK_SETTINGS`).

    Differs from hardware: pyACL returns ACL_ERROR_UNINITIALIZE (100001) for a call after
    aclFinalize; acllab does too unless that setting is on.
    """


_NEGATIVE_HEX = re.compile(r"\b0x-([0-9a-fA-F]+)")


class Fail(Exception):
    """Internal: a facade call failed with ``code``; the facade turns it into a return value."""

    def __init__(self, code: int, message: str, quiet: bool = False):
        self.code = code
        # a negative handle or address formatted as f"0x{value:x}" reads "0x-1": "-0x1"
        self.message = _NEGATIVE_HEX.sub(r"-0x\1", message) if "0x-" in message else message
        self.quiet = quiet      # an expected outcome (a poll that timed out): no warning
        super().__init__(code, self.message)
