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

Each case draws B, N and the images from the seed. The labels are compared with what the model
itself computes on those images (the compiled model run in numpy, batch by batch, as the
device runs it). The device work is verified, not assumed: a :class:`~._common.Provenance`
records what every task wrote, and every image's row of probabilities must have reached host
memory through copies from an execution of that model on the AI Core, on that image's batch.
Labels computed on the host (numpy inference, a device run on zeros or on other images) fail.
The sanitizer reports hazards, and the caller's teardown reports whatever was left behind.

Items: ``runs``, ``labels`` and ``ran on the device`` are results (any failure scores 0);
``sanitizer`` and ``resources`` are process items, counted once every result is right.
"""

from __future__ import annotations

import os
import sys as _sys
import tempfile
from functools import lru_cache

import numpy as np

from .. import acl
from ..model import TINY_CLASSES, compile_model, dumps, loads, tiny_dataset
from . import PROCESS, Case, Item, _guard, call_learner, exercise, isolated, ran_item
from ._common import (
    Provenance,
    hazards,
    is_int,
    leak_texts,
    new_case,
    released_item,
    sanitizer_item,
    teardown,
)

__all__ = ["grade_infer", "tiny_model", "tiny_model_bytes"]

# (B, how many batches) per seed; seeds beyond these draw from the same ranges.
_CASES = ((1, 5), (4, 3), (2, 4))


@lru_cache(maxsize=8)
def tiny_model_bytes(batch: int) -> bytes:
    """The .om bytes of the zoo's tiny classifier compiled for a fixed ``batch`` (cached per
    process as immutable bytes, so nothing a function under test does can alter them)."""
    return dumps(compile_model("zoo:tiny", input_shape=f"data:{batch},1,16,16",
                               soc_version="Ascend310"))


def tiny_model(batch: int):
    """A fresh :class:`~acllab.model.CompiledModel` of the tiny classifier for ``batch``."""
    return loads(tiny_model_bytes(batch))


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


def _expected_rows(blob: bytes, images: np.ndarray, batch: int) -> list[bytes]:
    """Each image's row of probabilities (float32 bytes) as the model computes it on the
    device: batch by batch, with the compiled model's own weights."""
    model = loads(blob)
    rows = []
    for start in range(0, len(images), batch):
        (probs,) = model.forward({"data": images[start:start + batch]}, batch)
        probs = np.ascontiguousarray(probs, dtype=np.float32)
        rows += [probs[r].tobytes() for r in range(batch)]
    return rows


@exercise("07.infer", "infer: run an offline model end to end", "infer", limit_s=20.0)
def grade_infer(fn, seed: int) -> Case:
    """One case: a tiny model of batch 1, 2 or 4 (or 8), 2 to 5 batches of images."""
    batch, images, name = _case(seed)
    count = len(images)
    label = f"{count} images, a model compiled for batch {batch}"
    blob = tiny_model_bytes(batch)
    rows = _expected_rows(blob, images, batch)
    want = [int(np.frombuffer(r, np.float32).argmax()) for r in rows]
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, name)
        with open(path, "wb") as f:
            f.write(blob)
        with isolated() as runtime:
            prov = Provenance(runtime)
            acl.init()
            acl.rt.set_device(0)
            call = call_learner(fn, acl, path, images.copy())
            case = new_case(label, call, runtime)
            if case.not_done:
                return case
            census = _census(runtime)       # what the first call left (the leaks it reports)
            ours = {m.id for m in runtime.models.values() if _is_the_model(m, blob)}
            executions = sum(m.executions for m in runtime.models.values() if m.id in ours)
            others = sum(m.executions for m in runtime.models.values() if m.id not in ours)
            graded = []
            if call.error is None:
                labels = _labels_item(call.value, want, batch)
                graded = [labels, _device_item(runtime, prov, executions, others, count,
                                               batch, rows, ours)]
                if labels.passed:       # asked again: other images, as many, the same file
                    fresh = np.ascontiguousarray(images[::-1] * np.float32(0.9))
                    fresh_want = [int(np.frombuffer(r, np.float32).argmax())
                                  for r in _expected_rows(blob, fresh, batch)]
                    graded.append(_again_item(call_learner(fn, acl, path, fresh.copy()),
                                              fresh_want, batch))
            failed = teardown(          # the caller owns no buffer here: device and pyACL only
                reset_failed="acl.rt.reset_device(0) failed: the device was reset already",
                finalize_failed="acl.finalize() failed: pyACL was finalised already")

            case.items.append(ran_item(call, "infer"))
            if call.error is not None:
                return case
            case.items += graded
            case.items.append(_sanitizer_item(runtime))
            case.items.append(_resources_item(census, runtime.leaks, failed))
            return case


# -- grading helpers ---------------------------------------------------------------------------

def _again_item(call, want: list[int], batch: int) -> Item:
    """'again': a second call with other images, as many, returned their labels."""
    hint = ("compute the labels from the images given on each call: a result kept from an "
            "earlier call is wrong once the images change")
    what = f"called again in the same runtime with {len(want)} other images"
    if call.error is not None:
        return Item("again", False, f"{what}, infer raised {call.error_text}", hint)
    problem, _ = _describe_labels(call.value, want, batch)
    if problem:
        return Item("again", False, f"{what}: {problem}", hint)
    return Item("again", True, f"{what}, infer returned their labels")


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


def _is_the_model(model, blob: bytes) -> bool:
    """Whether a loaded model is the one the check handed over (loaded from model_path)."""
    try:
        return dumps(model.compiled) == blob
    except Exception:           # noqa: BLE001 - anything else is simply not that model
        return False


_DEVICE = "ran on the device"
_HOST_COPIES = ("d2h", "h2h")


def _device_item(runtime, prov: Provenance, executions: int, others: int, count: int,
                 batch: int, rows: list[bytes], ours: set[int]) -> Item:
    """'ran on the device': the model from model_path ran once per batch, on the AI Core, on
    that batch's images, and every image's probabilities reached host memory by copies."""
    need = -(-count // batch)
    run_hint = ("labels must come from the model's outputs: acl.mdl.execute (or "
                "execute_async, then synchronize) with your input and output datasets, then "
                "a copy of the output to host memory")
    if executions == 0:
        text = "the model never ran on the device: the trace has no execution of it"
        if others:
            text = ("the trace has no execution of the model at model_path: the model that "
                    "ran was another one")
        return Item(_DEVICE, False, text, run_hint)
    if executions < need:
        return Item(_DEVICE, False,
                    f"the model ran {executions} time(s), {batch} image(s) each: not enough "
                    f"for {count} images", "execute once per batch of images")
    missing, reason = _rows_not_from_device(prov, rows, ours)
    if not missing:
        return Item(_DEVICE, True,
                    f"the model ran {executions} time(s) on the simulated NPU, {batch} "
                    f"image(s) each, and every image's probabilities came back from its run")
    shown = ", ".join(str(i) for i in missing[:5]) + (" ..." if len(missing) > 5 else "")
    text = (f"the probabilities of {len(missing)} of {count} images (image {shown}) never "
            "reached host memory from a run of the model on the AI Core on those images: "
            + reason)
    return Item(_DEVICE, False, text,
                "copy batch k into the input buffer before execute k, and copy that execute's "
                "output back to host memory (acl.rt.memcpy, device to host) before taking "
                "the argmax: labels come from the device's own outputs")


def _rows_not_from_device(prov: Provenance, rows: list[bytes], ours: set[int]
                          ) -> tuple[list[int], str]:
    """The images whose row of probabilities no host-bound copy carried from a model run on
    the AI Core, and why the first of them is missing ('' if none is)."""
    copies = [w for w in prov.writes if w.data is not None
              and w.task.kind in ("memcpy", "staging")
              and (w.task.info or {}).get("direction") in _HOST_COPIES]
    missing, reasons = [], []
    for i, row in enumerate(rows):
        found, why = False, ""
        for w in copies:
            at = w.data.find(row)
            while at >= 0 and not found:
                why = prov.computed_on(w.lo + at, row, w.task.end_ns, engines=("aicore",),
                                       what=f"image {i}'s probabilities")
                if not why:
                    pieces = prov.trace_back(w.lo + at, w.lo + at + len(row), w.task.end_ns)
                    if all(p.origin is not None and p.origin.task.kind == "model_op"
                           and (p.origin.task.info or {}).get("model") in ours
                           for p in pieces):
                        found = True
                        break
                    why = "they were computed on the AI Core, but not by the model's run"
                at = w.data.find(row, at + 1)
            if found:
                break
        if not found:
            missing.append(i)
            reasons.append(why)
    if not missing:
        return [], ""
    first = next((r for r in reasons if r), "")
    if first:
        return missing, first
    outputs = [w for w in prov.writes if w.data is not None and w.task.kind == "model_op"
               and (w.task.info or {}).get("model") in ours]
    row = rows[missing[0]]
    if not any(row in w.data for w in outputs):
        return missing, ("no execution of the model produced them: when it ran, its input "
                         "buffer held other bytes than those images (zeros, another batch, or "
                         "memory nothing wrote)")
    if not copies:
        return missing, "no copy brought any output back to host memory"
    return missing, ("the model computed them on the device, but no copy brought them back "
                     "to host memory")


def _sanitizer_item(runtime) -> Item:
    def fix(first) -> str:
        if first.kind == "uninitialised-read":
            return ("copy every input byte the model reads (a whole batch) into the input "
                    "buffer before execute; " + first.fix)
        return first.fix

    return sanitizer_item(hazards(runtime), "no hazards: every read came after the work that "
                                            "produced it", fix=fix, kind=PROCESS)


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
                                       "buffer, dataset and description released",
                    kind=PROCESS)
    release = [k[4] for k in _KINDS if census[k[0]]]
    hint = ("before returning, release what you created, last made first: "
            + ", ".join(release or ["everything you created"])
            + " (destroy_dataset does not destroy the data buffers in it: destroy them too)")
    return Item("resources", False, "infer left behind: " + "; ".join(left), hint, kind=PROCESS)


_guard.seal(_sys.modules[__name__])        # the grader's own helpers refuse learner code
