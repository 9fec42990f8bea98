"""``acl.rt.launch_kernel``: an acllab extension shaped like aclrtLaunchKernel.

The task (its roofline time and its data effect) is built in :mod:`acllab.kernels`."""

from __future__ import annotations

from ... import kernels
from ...errors import Fail
from .._api import api, as_int, rt

__all__ = ["launch_kernel"]



@api("aclrtLaunchKernel")
def launch_kernel(kernel, block_dim, args, stream):
    """Launch a ``@acllab.kernel`` function on ``block_dim`` blocks on a stream.

    acllab extension (pyACL has no stable binding): the shape of
    ``aclrtLaunchKernel(func, numBlocks, args, argsSize, stream)``, with ``args`` a tuple of
    Python values (device pointers are ints). See :mod:`acllab.kernels`.
    """
    if not isinstance(kernel, kernels.Kernel):
        raise TypeError("kernel must be a function decorated with @acllab.kernel(...)")
    if not isinstance(args, (tuple, list)):
        raise TypeError("args must be a tuple of the kernel's arguments")
    r = rt()
    block_dim = as_int(block_dim, "block_dim")
    if not 1 <= block_dim <= 65535:
        raise Fail(100000, f"block_dim {block_dim} must be between 1 and 65535")
    s = r.stream_for(as_int(stream, "stream"))
    args = tuple(args)
    flops, nbytes = kernel.cost(args)
    if flops < 0 or nbytes < 0:
        raise Fail(100000, f"kernel {kernel.name} declares a negative cost for these arguments "
                           f"({flops} flops, {nbytes} bytes)")
    task = kernels.kernel_task(r, kernel, block_dim, args, s, flops, nbytes)
    r.launch(r.profile.launch_ns)
    r.submit(task, s)
