"""Reference solution for lesson 07 (Offline models): the function the notebook's exercise asks for.

tests/test_checks_lesson07.py grades it with acllab.checks, and tests/test_lessons.py injects it
into the notebook after the exercise cell. Learners: try the exercise first.
"""

from __future__ import annotations

import numpy as np

from acllab.constants import (
    ACL_MEM_MALLOC_HUGE_FIRST,
    ACL_MEMCPY_DEVICE_TO_HOST,
    ACL_MEMCPY_HOST_TO_DEVICE,
)

__all__ = ["infer"]


def infer(acl, model_path, images):
    """Classify ``images`` (N, 1, 16, 16) with the model at ``model_path``; return N labels."""
    model_id, ret = acl.mdl.load_from_file(model_path)
    assert ret == 0, ret
    desc = acl.mdl.create_desc()
    acl.mdl.get_desc(desc, model_id)
    batch = acl.mdl.get_input_dims(desc, 0)[0]["dims"][0]
    in_size = acl.mdl.get_input_size_by_index(desc, 0)
    out_size = acl.mdl.get_output_size_by_index(desc, 0)

    in_dev, _ = acl.rt.malloc(in_size, ACL_MEM_MALLOC_HUGE_FIRST)
    out_dev, _ = acl.rt.malloc(out_size, ACL_MEM_MALLOC_HUGE_FIRST)
    in_buf = acl.create_data_buffer(in_dev, in_size)
    out_buf = acl.create_data_buffer(out_dev, out_size)
    inputs = acl.mdl.create_dataset()
    acl.mdl.add_dataset_buffer(inputs, in_buf)
    outputs = acl.mdl.create_dataset()
    acl.mdl.add_dataset_buffer(outputs, out_buf)

    labels = []
    host_out = bytearray(out_size)            # a blocking memcpy may use pageable memory
    for start in range(0, len(images), batch):
        chunk = np.ascontiguousarray(images[start:start + batch], dtype=np.float32).tobytes()
        acl.rt.memcpy(in_dev, in_size, acl.util.bytes_to_ptr(chunk), len(chunk),
                      ACL_MEMCPY_HOST_TO_DEVICE)
        acl.mdl.execute(model_id, inputs, outputs)        # blocks until the model is done
        acl.rt.memcpy(acl.util.bytes_to_ptr(host_out), out_size, out_dev, out_size,
                      ACL_MEMCPY_DEVICE_TO_HOST)
        probs = np.frombuffer(bytes(host_out), dtype=np.float32).reshape(batch, -1)
        labels += [int(k) for k in probs.argmax(axis=1)]

    for dataset in (inputs, outputs):
        acl.mdl.destroy_dataset(dataset)
    for buf in (in_buf, out_buf):
        acl.destroy_data_buffer(buf)
    for ptr in (in_dev, out_dev):
        acl.rt.free(ptr)
    acl.mdl.destroy_desc(desc)
    acl.mdl.unload(model_id)
    return labels
