"""Provenance (acllab.checks._common) on a card-sized buffer: what a write left behind is
fingerprinted without holding it, so grading a program that memsets gigabytes of the sparse
device memory costs a few pieces of RAM, not the buffer twice over."""

from __future__ import annotations

import tracemalloc
import zlib

from acllab import acl, session
from acllab.checks._common import Provenance, uninit_pattern
from acllab.constants import ACL_MEM_MALLOC_HUGE_FIRST

GiB = 1 << 30


def _crc_of(value: int, n: int, piece: int = 16 << 20) -> int:
    crc, block = 0, bytes([value]) * piece
    for at in range(0, n, piece):
        crc = zlib.crc32(block[:min(piece, n - at)], crc)
    return crc


def test_a_gigabyte_memset_is_fingerprinted_in_pieces_and_kept_only_within_budget():
    with session.override(profile="ascend910b"):
        acl.init()
        acl.rt.set_device(0)
        runtime = session.current_runtime()
        prov = Provenance(runtime, byte_budget=1 << 20)
        small, _ = acl.rt.malloc(4096, ACL_MEM_MALLOC_HUGE_FIRST)
        big, _ = acl.rt.malloc(GiB, ACL_MEM_MALLOC_HUGE_FIRST)
        tracemalloc.start()
        try:
            assert acl.rt.memset(small, 4096, 7, 4096) == 0
            assert acl.rt.memset(big, GiB, 0x5A, GiB) == 0
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        kept, huge = prov.writes[-2], prov.writes[-1]
        assert kept.data == bytes([7]) * 4096               # within the budget: kept
        assert huge.data is None and huge.hi - huge.lo == GiB
        assert huge.crc == _crc_of(0x5A, GiB)              # fingerprinted all the same
        assert huge.crc != zlib.crc32(uninit_pattern(0, 4096))
        assert peak < 128 << 20, f"grading a 1 GiB memset held {peak / 2**20:.0f} MiB"
        acl.rt.free(small)
        acl.rt.free(big)
        acl.rt.reset_device(0)
        acl.finalize()
