"""pyACL, simulated: ``from acllab import acl`` and write the same code as with ``import acl``.

``acl.init``/``acl.finalize``, data buffers and error messages live here; ``acl.rt`` holds
devices, memory, streams and events; ``acl.util`` converts between host data and addresses.
Constants are in ``acl.constants`` (also available as attributes of this module).
"""

from __future__ import annotations

import json
import os
import threading
import warnings

from ..analysis import sanitizer
from ..constants import *  # noqa: F403  (the real names, re-exported as pyACL users expect)
from ..errors import AclWarning, Fail
from ..streams import DataBuffer
from . import constants, mdl, media, op, rt, util
from ._api import api, as_int, leak_warning
from ._api import rt as _runtime
from .tensor import TensorDesc as _TensorDesc
from .tensor import (
    create_tensor_desc,
    data_type_size,
    destroy_tensor_desc,
    get_tensor_desc_dim,
    get_tensor_desc_dim_v2,
    get_tensor_desc_element_count,
    get_tensor_desc_format,
    get_tensor_desc_name,
    get_tensor_desc_num_dims,
    get_tensor_desc_size,
    get_tensor_desc_type,
    set_tensor_const,
    set_tensor_desc_name,
    set_tensor_format,
    set_tensor_origin_format,
    set_tensor_origin_shape,
    set_tensor_place_ment,
    set_tensor_shape,
)

#: aclLogLevel, for app_log (AscendCL's acl_base.h; not in acllab.constants).
ACL_DEBUG, ACL_INFO, ACL_WARNING, ACL_ERROR = 0, 1, 2, 3

# Everything finalize needs is imported here, at module level: a program whose object calls
# acl.finalize() from __del__ at interpreter exit cannot import any more then.
__all__ = ["init", "finalize", "app_log", "get_recent_err_msg", "create_data_buffer",
           "destroy_data_buffer", "update_data_buffer", "get_data_buffer_addr",
           "get_data_buffer_size", "get_data_buffer_size_v2", "get_soc_name", "get_version",
           "get_device_capability", "create_tensor_desc", "destroy_tensor_desc",
           "get_tensor_desc_type", "get_tensor_desc_format", "get_tensor_desc_size",
           "get_tensor_desc_element_count", "get_tensor_desc_num_dims", "get_tensor_desc_dim",
           "get_tensor_desc_dim_v2", "set_tensor_desc_name", "get_tensor_desc_name",
           "set_tensor_format", "set_tensor_shape", "set_tensor_origin_format",
           "set_tensor_origin_shape", "set_tensor_const", "set_tensor_place_ment",
           "data_type_size", "set_compile_opt", "get_compile_opt_size",
           "rt", "util", "mdl", "media", "op", "constants"]


@api("aclInit", needs_init=False)
def init(config_path=None):
    """Initialise pyACL. A second call returns 100002 (only the first configuration counts).

    ``config_path`` may name a JSON file (as aclInit's); it must exist and parse.
    """
    r = _runtime()
    if r.initialized:
        raise Fail(100002, "acl.init() was already called; the first configuration stays in "
                           "force", quiet=False)
    if config_path not in (None, ""):
        if not isinstance(config_path, str):
            raise TypeError("config_path must be a str")
        if not os.path.isfile(config_path):
            raise Fail(100003, f"config file {config_path!r} does not exist")
        try:
            with open(config_path, encoding="utf-8") as fh:
                json.load(fh)
        except (OSError, ValueError) as exc:
            raise Fail(100006, f"config file {config_path!r} is not valid JSON: {exc}") from None
    r.initialized = True
    r.finalized = False
    r.config_path = config_path or None
    r.main_thread = threading.get_ident()
    r.spend(r.profile.api_ns)


@api("aclFinalize", needs_init=False)
def finalize():
    """Release everything; what the program did not release itself is reported as a leak.

    Host-side objects (data buffers, datasets, model and tensor descriptions, op attributes)
    are reported but stay valid: as in CANN, destroying them after finalize succeeds."""
    r = _runtime()
    if not r.initialized:
        if r.finalized:
            raise Fail(100037, "acl.finalize() was already called")
        raise Fail(100001, "acl.init() was never called")
    leaked: list[str] = []
    for dev in r.devices:
        if dev.refcount:
            leaked.append(f"device {dev.id} still set ({dev.refcount}x): reset_device "
                          "was not called")
        leaked += r.release_device(dev)   # also devices opened only by explicit contexts
    leaked += [f"{reg.describe()} never freed" for reg in r.host.release_all()]
    kinds = {DataBuffer: "data buffer", mdl.Dataset: "dataset", mdl.ModelDesc: "model description",
             _TensorDesc: "tensor description", op.OpAttr: "op attribute",
             op.OpHandle: "op handle"}
    for h, obj in list(r.handles.items()):
        kind = kinds.get(type(obj))
        if kind is not None and obj.alive:
            leaked.append(f"{kind} 0x{h:x} never destroyed")
            if kind == "op handle":          # it holds the op's loaded model
                obj.alive = False
                r.drop_handle(h, kind)
            # the others are plain host objects: CANN's finalize leaves them, and their
            # destroy calls (which need no init) still free them afterwards and return 0
            # (hicann/ge, api/acl/acl_model/model/model_om2.cpp: aclmdlDestroyDesc and
            # aclmdlDestroyDataset only delete the object), as the samples' destructors
            # that run after aclFinalize do
    r.spend(r.profile.api_ns)
    r.initialized = False
    r.finalized = True
    leak_warning(r, "acl.finalize()", leaked)
    if r.sanitize and r.engine.record:
        _sanitizer_warning(r)


def _sanitizer_warning(r) -> None:
    """The sanitizer runs at finalize (on by default); leaks were reported already."""
    findings = [f for f in sanitizer.analyze(r) if f.kind != "leak"]
    if findings:
        shown = "\n".join(str(f) for f in findings[:5])
        more = f"\n... and {len(findings) - 5} more" if len(findings) > 5 else ""
        warnings.warn(f"acllab sanitizer: {len(findings)} problem"
                      f"{'s' if len(findings) > 1 else ''} in this program (see "
                      f"acllab.analysis.sanitizer.report(acllab.current_runtime())):\n{shown}{more}",
                      AclWarning, stacklevel=4)


def app_log(log_level, message):
    """Write an application message to acllab's log (aclAppLog); returns None.

    pyACL API reference, "acl.app_log": levels ACL_DEBUG 0, ACL_INFO 1, ACL_WARNING 2,
    ACL_ERROR 3 (AclLite's logger calls it with ACL_INFO and ACL_ERROR). Every message lands
    in the runtime's log (``acllab.acl.util.runtime_log(acllab.current_runtime())``) with the
    host's virtual time; WARNING and ERROR also go to stderr, as CANN prints them when
    ASCEND_SLOG_PRINT_TO_STDOUT is set. Nothing is printed for DEBUG or INFO.

    Differs from hardware: CANN writes plog files under ~/ascend/log and filters by the
    ASCEND_GLOBAL_LOG_LEVEL variable (default ERROR); acllab keeps every level in memory and
    writes no files. The C function returns void; pyACL's return value is taken to be None
    (uncertain).
    """
    level = as_int(log_level, "log_level")
    if not isinstance(message, str):
        raise TypeError(f"message must be a str, not {type(message).__name__}")
    if level not in util.LOG_LEVELS:
        # the C function returns void: a level it does not know is dropped, with a word here
        warnings.warn(f"acl.app_log: log_level {level} is not ACL_DEBUG 0, ACL_INFO 1, "
                      "ACL_WARNING 2 or ACL_ERROR 3: the message was not logged",
                      AclWarning, stacklevel=2)
        return None
    util.write_log(_runtime(), level, "APP", message)
    return None


def get_recent_err_msg() -> str:
    """The explanation of this thread's most recent failed call (then cleared)."""
    return _runtime().recent_error.pop(threading.get_ident(), "")


@api("aclCreateDataBuffer", bare=True, outs=(0,), needs_init=False)
def create_data_buffer(data, size):
    """An aclDataBuffer handle describing ``size`` bytes at ``data`` (0, 0 is allowed)."""
    data, size = as_int(data, "data"), as_int(size, "size")
    if size < 0:
        raise Fail(100000, f"size must not be negative (got {size}): a data buffer describes "
                           "0 or more bytes")
    if data < 0:
        raise Fail(100000, f"data {data} is not an address: addresses are 0 or more")
    if data == 0 and size > 0:
        raise Fail(100000, f"a data buffer of {size} B needs a non-null address (only a "
                           "0-byte buffer may have address 0)")
    return _runtime().create_data_buffer(data, size).handle


def _buffer(handle) -> DataBuffer:
    return _runtime().lookup(as_int(handle, "data_buffer"), DataBuffer, "data buffer")


@api("aclDestroyDataBuffer", needs_init=False)
def destroy_data_buffer(data_buffer):
    """Destroy the descriptor (the memory it points at is not freed)."""
    buf = _buffer(data_buffer)
    buf.alive = False
    _runtime().drop_handle(buf.handle, "data buffer")


@api("aclUpdateDataBuffer", needs_init=False)
def update_data_buffer(data_buffer, data, size):
    buf = _buffer(data_buffer)
    data, size = as_int(data, "data"), as_int(size, "size")
    if size < 0:
        raise Fail(100000, f"size must not be negative (got {size})")
    buf.addr, buf.size = data, size


@api("aclGetDataBufferAddr", bare=True, outs=(0,), needs_init=False)
def get_data_buffer_addr(data_buffer):
    return _buffer(data_buffer).addr


@api("aclGetDataBufferSize", bare=True, outs=(0,), needs_init=False)
def get_data_buffer_size(data_buffer):
    """Deprecated in CANN in favour of get_data_buffer_size_v2; same value here."""
    return _buffer(data_buffer).size


@api("aclGetDataBufferSizeV2", bare=True, outs=(0,), needs_init=False)
def get_data_buffer_size_v2(data_buffer):
    return _buffer(data_buffer).size


@api("aclrtGetSocName", bare=True, outs=("",), needs_init=False)
def get_soc_name():
    """The simulated chip's name, e.g. 'Ascend310'."""
    return _runtime().profile.soc_name


@api("aclrtGetVersion", outs=(0, 0, 0), needs_init=False)
def get_version():
    """(major, minor, patch, ret): the AscendCL interface version of the profile's CANN release.

    CANN's aclrtGetVersionImpl returns the ACL_MAJOR_VERSION, ACL_MINOR_VERSION and
    ACL_PATCH_VERSION macros of its headers, with no init check (hicann/runtime
    src/acl/aclrt_impl/acl.cpp); acllab reports ``profile.acl_version``, the version of
    ``profile.cann_release`` (docs/CANN_RELEASES.md gives the sources and says which numbers are
    uncertain). acllab's own version is ``acllab.__version__``.
    """
    major, minor, patch = (int(x) for x in _runtime().profile.acl_version)
    return major, minor, patch


@api("aclGetDeviceCapability", outs=(0,))
def get_device_capability(device_id, device_info):
    """(value, ret): a hardware figure of the device (pyACL ``acl.get_device_capability``).

    ``device_info`` is ACL_DEVICE_INFO_AI_CORE_NUM 0, ACL_DEVICE_INFO_VECTOR_CORE_NUM 1 or
    ACL_DEVICE_INFO_L2_SIZE 2 (bytes). CANN 8.0.0 pyACL reference, "get_device_capability":
    ``value, ret = acl.get_device_capability(device_id, device_info)``, device_id in
    [0, device count - 1]. hicann/runtime src/acl/aclrt_impl/acl.cpp, aclGetDeviceCapabilityImpl:
    a device id past the last device and an unknown type both return ACL_ERROR_INVALID_PARAM
    100000; the figures come from the SoCInfo section of the chip's platform file (ai_core_cnt,
    vector_core_cnt, l2_size), which it reads after aclInit, so acllab requires acl.init().
    The device need not be set.
    """
    r = _runtime()
    dev, info = as_int(device_id, "device_id"), as_int(device_info, "device_info")
    if not 0 <= dev < len(r.devices):
        raise Fail(100000, f"device_id {dev} is out of range: this card has {len(r.devices)} "
                           f"devices (0 to {len(r.devices) - 1})")
    p = r.profile
    values = {ACL_DEVICE_INFO_AI_CORE_NUM: p.ai_cores,              # noqa: F405
              ACL_DEVICE_INFO_VECTOR_CORE_NUM: p.vector_cores,      # noqa: F405
              ACL_DEVICE_INFO_L2_SIZE: p.l2_bytes}                  # noqa: F405
    if info not in values:
        raise Fail(100000, f"device_info {info} is not a hardware specification type: use "
                           "ACL_DEVICE_INFO_AI_CORE_NUM 0, ACL_DEVICE_INFO_VECTOR_CORE_NUM 1 or "
                           "ACL_DEVICE_INFO_L2_SIZE 2")
    r.spend(p.api_ns)
    return int(values[info])


#: aclCompileOpt (acl_op_compiler.h): the options acl.set_compile_opt takes, by value
COMPILE_OPTS = ("ACL_PRECISION_MODE", "ACL_AICORE_NUM", "ACL_AUTO_TUNE_MODE",
                "ACL_OP_SELECT_IMPL_MODE", "ACL_OPTYPELIST_FOR_IMPLMODE", "ACL_OP_DEBUG_LEVEL",
                "ACL_DEBUG_DIR", "ACL_OP_COMPILER_CACHE_MODE", "ACL_OP_COMPILER_CACHE_DIR",
                "ACL_OP_PERFORMANCE_MODE", "ACL_OP_JIT_COMPILE", "ACL_OP_DETERMINISTIC",
                "ACL_CUSTOMIZE_DTYPES", "ACL_OP_PRECISION_MODE", "ACL_ALLOW_HF32",
                "ACL_PRECISION_MODE_V2", "ACL_OP_DEBUG_OPTION")
_AUTO_TUNE, _JIT = 2, 10


@api("aclSetCompileopt")
def set_compile_opt(opt, value):
    """Set an option of later op compiles (acl.op.compile, compile_and_execute), for the
    whole process: ``opt`` an aclCompileOpt value (COMPILE_OPTS: ACL_PRECISION_MODE 0 ...
    ACL_OP_DEBUG_OPTION 16), ``value`` a string.

    aclSetCompileopt (hicann/ge, api/acl/acl_op_compiler/single_op/op_compiler.cpp): a null
    value is ACL_ERROR_INVALID_PARAM 100000, ACL_AUTO_TUNE_MODE (2, discarded in favour of
    AOE) ACL_ERROR_FEATURE_UNSUPPORTED 200006, a value outside the enum
    ACL_ERROR_INTERNAL_ERROR 500000; ACL_OP_JIT_COMPILE keeps "1" for "enable" and "0" for
    anything else. Differs from hardware: the options are kept (get_compile_opt_size reports
    them) but change nothing in how acllab's kernels compute; before acl.init() the call
    returns 100001, acllab's rule for every call that needs it, where CANN's compile
    processor returns ACL_ERROR_FAILURE 500001. The pyACL names of aclSetCompileopt and
    aclGetCompileoptSize are taken to be set_compile_opt and get_compile_opt_size
    (uncertain: no pyACL reference read lists them).
    """
    r = _runtime()
    key = as_int(opt, "opt")
    if value is None:
        raise Fail(100000, "value is null")
    if not isinstance(value, str):
        raise TypeError("value must be a str")
    if key == _AUTO_TUNE:
        raise Fail(200006, "ACL_AUTO_TUNE_MODE (2) has been discarded: tune ops with the AOE "
                           "tool")
    if not 0 <= key < len(COMPILE_OPTS):
        raise Fail(500000, f"opt {key} is no aclCompileOpt (0 ACL_PRECISION_MODE to 16 "
                           "ACL_OP_DEBUG_OPTION)")
    if key == _JIT:
        value = "1" if value == "enable" else "0"
    r.compile_opts[key] = value
    r.spend(r.profile.api_ns)


@api("aclGetCompileoptSize", bare=True, outs=(0,))
def get_compile_opt_size(opt):
    """The bytes (with the terminating NUL) an option's value takes, 0 when it is unset or
    ``opt`` is no option; ACL_OP_JIT_COMPILE always 256 (aclGetCompileoptSize,
    op_compiler.cpp)."""
    key = as_int(opt, "opt")
    if key == _JIT:
        return 256
    value = _runtime().compile_opts.get(key, "") if 0 <= key < len(COMPILE_OPTS) else ""
    return len(value.encode()) + 1 if value else 0
