"""Reference solutions for lesson 09 (Kernels): the functions the notebook's exercise asks for.

tests/test_checks_lesson09.py grades them with acllab.checks, and tests/test_lessons.py injects
them into the notebook after the exercise cell. Learners: try the exercise first.
"""

from __future__ import annotations

import numpy as np

import acllab
from acllab.constants import ACL_DEVICE_INFO_AI_CORE_NUM

__all__ = ["affine", "launch"]


@acllab.kernel(flops=lambda x, y, n: 10000 * n, bytes=lambda x, y, n: 8 * n)
def affine(ctx, x, y, n):
    """y = 2x + 1 on this block's tile of 0 .. n (float32)."""
    per = -(-n // ctx.block_dim)                   # ceil(n / block_dim): no element left over
    lo = min(ctx.block_idx * per, n)
    hi = min(lo + per, n)                          # the last tile may be shorter
    if hi > lo:
        v = ctx.load(x + 4 * lo, np.float32, hi - lo)
        ctx.store(y + 4 * lo, 2 * v + 1)


def launch(acl, x_ptr, y_ptr, n, stream):
    """One launch of ``affine`` on ``stream``, one block per AI core (one full wave)."""
    device, _ = acl.rt.get_device()
    cores, _ = acl.get_device_capability(device, ACL_DEVICE_INFO_AI_CORE_NUM)
    block_dim = max(1, min(cores, n))
    acl.rt.launch_kernel(affine, block_dim, (x_ptr, y_ptr, n), stream)
    return block_dim
