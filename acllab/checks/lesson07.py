"""Checks for lesson 07, Offline models: run the tiny model end to end and release everything.

``07.infer``: ``infer(acl, model_path, images) -> list[int]``
    ``model_path`` is an .om file of the zoo's tiny classifier, compiled for a fixed batch B
    (read it from the model's description: the first dim of input 0); ``images`` is a float32
    numpy array of shape (N, 1, 16, 16) with N a multiple of B. Load the model, describe it,
    build the input and output datasets around device buffers, run the model on every image,
    read the probabilities back and return one label (the index of the largest probability)
    per image, in order. Before returning, release everything the function created: data
    buffers, datasets, device memory, the description, and the model itself. The caller has
    already called ``acl.init()`` and ``acl.rt.set_device(0)``, and tears down after.

Each case draws B, N and the images from the seed. The labels are compared with what the
model itself computes on those images (:func:`acllab.model.tiny_forward`, the numpy reference),
the trace shows whether the device really ran the model, the sanitizer reports hazards, and the
caller's teardown reports whatever was left behind.
"""

from __future__ import annotations

import os
import sys as _sys
import tempfile
from functools import lru_cache

import numpy as np

from .. import acl
from ..model import TINY_CLASSES, compile_model, save, tiny_dataset, tiny_forward
from . import Case, Item, _guard, call_learner, exercise, isolated, ran_item
from ._common import (
    hazards,
    is_int,
    leak_texts,
    new_case,
    released_item,
    sanitizer_item,
    teardown,
)

__all__ = ["grade_infer", "tiny_model"]

# (B, how many batches) per seed; seeds beyond these draw from the same ranges.
_CASES = ((1, 5), (4, 3), (2, 4))


@lru_cache(maxsize=8)
def tiny_model(batch: int):
    """The zoo's tiny classifier compiled for a fixed ``batch`` (cached per process)."""
    return compile_model("zoo:tiny", input_shape=f"data:{batch},1,16,16",
                         soc_version="Ascend310")


def _case(seed: int) -> tuple[int, np.ndarray, str]:
    rng = np.random.default_rng([7, 1, seed])
    if seed < len(_CASES):
        batch, batches = _CASES[seed]
    else:
        batch, batches = int(rng.choice([1, 2, 4, 8])), int(rng.integers(2, 5))
    images, _ = tiny_dataset(batch * batches, int(rng.integers(1 << 30)))
    images *= rng.uniform(0.8, 1.2)              # brighter or darker than the training set
    name = f"tiny_{rng.integers(1 << 20):05x}.om"
    return batch, np.ascontiguousarray(images, dtype=np.float32), name


@exercise("07.infer", "infer: run an offline model end to end", "infer")
def grade_infer(fn, seed: int) -> Case:
    """One case: a tiny model of batch 1, 2 or 4 (or 8), 2 to 5 batches of images."""
    batch, images, name = _case(seed)
    count = len(images)
    label = f"{count} images, a model compiled for batch {batch}"
    want = [int(k) for k in tiny_forward(images).argmax(axis=1)]
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, name)
        save(tiny_model(batch), path)
        with isolated() as runtime:
            acl.init()
            acl.rt.set_device(0)
            call = call_learner(fn, acl, path, images.copy())
            case = new_case(label, call, runtime)
            if case.not_done:
                return case
            census = _census(runtime)
            executions = sum(m.executions for m in runtime.models.values())
            failed = teardown(          # the caller owns no buffer here: device and pyACL only
                reset_failed="acl.rt.reset_device(0) failed: the device was reset already",
                finalize_failed="acl.finalize() failed: pyACL was finalised already")

            case.items.append(ran_item(call, "infer"))
            if call.error is not None:
                return case
            case.items.append(_labels_item(call.value, want, batch))
            case.items.append(_device_item(runtime, executions, count, batch))
            case.items.append(_sanitizer_item(runtime))
            case.items.append(_resources_item(census, runtime.leaks, failed))
            return case


# -- grading helpers ---------------------------------------------------------------------------

def _labels_item(value, want: list[int], batch: int) -> Item:
    problem, hint = _describe_labels(value, want, batch)
    if not problem:
        return Item("labels", True, f"all {len(want)} labels match what the model computes on "
                                    "those images")
    return Item("labels", False, problem, hint)


def _describe_labels(value, want: list[int], batch: int) -> tuple[str, str]:
    """Why ``value`` is not the list of labels (without showing them); ('', '') if it is."""
    n = len(want)
    argmax = ("the label of an image is the index of its largest probability: "
              "int(np.argmax(probs)) for each row of the output")
    if isinstance(value, np.ndarray):
        if value.ndim == 2 and value.shape[0] == n:
            return (f"infer returned a {value.shape[0]} x {value.shape[1]} array: these look "
                    "like the probabilities themselves, not labels", argmax)
        value = value.tolist()
    if not isinstance(value, (list, tuple)):
        return (f"infer returned a {type(value).__name__}, not a list of labels",
                "collect one int per image in a list and return it")
    if len(value) != n:
        text = f"infer returned {len(value)} labels for {n} images"
        hint = ("run the model once per batch of B images (B is dims[0] of input 0 in the "
                "description) and collect B labels from each run")
        if len(value) == batch and n > batch:
            text += ": only the first batch?"
        elif batch > 1 and len(value) * batch == n:
            text += f": one label per execute, but each execute classifies {batch} images"
        return text, hint
    bad = [v for v in value if not is_int(v)]
    if bad:
        return (f"the labels must be ints; infer returned {type(bad[0]).__name__} values such "
                f"as {bad[0]!r}", argmax)
    labels = [int(v) for v in value]
    classes = len(TINY_CLASSES)
    outside = [v for v in labels if not 0 <= v < classes]
    if outside:
        return (f"{outside[0]} is not a class index: the tiny model has {classes} classes, "
                f"0 to {classes - 1}", "read the output as float32 (get_output_data_type "
                "says ACL_FLOAT) and take the argmax of each image's row")
    wrong = [i for i, (a, b) in enumerate(zip(labels, want, strict=True)) if a != b]
    if not wrong:
        return "", ""
    shown = ", ".join(str(i) for i in wrong[:5]) + (" ..." if len(wrong) > 5 else "")
    text = (f"{len(wrong)} of {n} labels differ from the model's own answer (image "
            f"{shown})")
    if len(set(labels)) == 1 and len(set(want)) > 1:
        text += f"; every image got label {labels[0]}"
        return text, ("does each execute see its own images, and is each output read after "
                      "its execute has finished? Copy each batch into the input buffer before "
                      "its execute; read the output after execute returns (or after "
                      "synchronize_stream, with execute_async)")
    return text, ("copy batch k (images[k*B:(k+1)*B]) before execute k, read that execute's "
                  "output after it, and keep the labels in image order")


def _device_item(runtime, executions: int, count: int, batch: int) -> Item:
    need = -(-count // batch)
    if executions >= need:
        return Item("ran on the device", True,
                    f"the model ran {executions} time(s) on the simulated NPU, {batch} "
                    f"image(s) each")
    if executions == 0:
        return Item("ran on the device", False,
                    "the model never ran on the device: the trace has no execution of it",
                    "labels must come from the model's outputs: acl.mdl.execute (or "
                    "execute_async, then synchronize) with your input and output datasets")
    return Item("ran on the device", False,
                f"the model ran {executions} time(s), {batch} image(s) each: not enough for "
                f"{count} images", "execute once per batch of images")


def _sanitizer_item(runtime) -> Item:
    def fix(first) -> str:
        if first.kind == "uninitialised-read":
            return ("copy every input byte the model reads (a whole batch) into the input "
                    "buffer before execute; " + first.fix)
        return first.fix

    return sanitizer_item(hazards(runtime), "no hazards: every read came after the work that "
                                            "produced it", fix=fix)


_KINDS = (  # (what the census counts, one, several, why it is a leak, what releases it)
    ("dataset", "dataset", "datasets", "never destroyed", "acl.mdl.destroy_dataset"),
    ("data buffer", "data buffer", "data buffers", "never destroyed",
     "acl.destroy_data_buffer"),
    ("device memory", "device buffer", "device buffers", "never freed", "acl.rt.free"),
    ("pinned memory", "pinned host buffer", "pinned host buffers", "never freed",
     "acl.rt.free_host"),
    ("description", "model description", "model descriptions", "never destroyed",
     "acl.mdl.destroy_desc"),
    ("model", "the model", "models", "never unloaded", "acl.mdl.unload"),
)


def _census(runtime) -> dict[str, int]:
    """What is still alive right after the learner's function returned, by kind."""
    from ..acl.mdl import Dataset, ModelDesc
    from ..streams import DataBuffer

    kinds = {DataBuffer: "data buffer", Dataset: "dataset", ModelDesc: "description"}
    out = dict.fromkeys((k[0] for k in _KINDS), 0)
    out["model"] = sum(m.alive for m in runtime.models.values())
    for obj in runtime.handles.values():
        kind = kinds.get(type(obj))
        if kind is not None and obj.alive:
            out[kind] += 1
    model_regions = {id(r) for m in runtime.models.values() if m.alive for r in m.regions()}
    out["device memory"] = sum(1 for dev in runtime.devices for r in dev.heap.live.values()
                               if id(r) not in model_regions)
    out["pinned memory"] = len(runtime.host.pinned)
    return out


def _resources_item(census: dict[str, int], leaks: list[str], failed: list[str]) -> Item:
    if failed:
        return released_item("infer", failed, "leave acl.rt.reset_device and acl.finalize to "
                                              "the caller: a helper releases only what it "
                                              "created")
    left = []
    for kind, one, several, why, _ in _KINDS:
        n = census[kind]
        if n:
            left.append(f"{one} ({why})" if n == 1 and kind == "model" else
                        f"{n} {one if n == 1 else several} ({why})")
    accounted = ("never unloaded", "data buffer", "dataset", "block", "pinned host buffer",
                 "model description")
    other = leak_texts(leak for leak in leaks if not any(word in leak for word in accounted))
    left += other[:3]
    if not left:
        return Item("resources", True, "nothing leaked: the model was unloaded and every "
                                       "buffer, dataset and description released")
    release = [k[4] for k in _KINDS if census[k[0]]]
    hint = ("before returning, release what you created, last made first: "
            + ", ".join(release or ["everything you created"])
            + " (destroy_dataset does not destroy the data buffers in it: destroy them too)")
    return Item("resources", False, "infer left behind: " + "; ".join(left), hint)


_guard.seal(_sys.modules[__name__])        # the grader's own helpers refuse learner code
