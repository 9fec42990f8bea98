"""One address space for device memory, pinned host memory and registered pageable buffers.

Pointers are plain ints, as in pyACL. Every access is resolved to a :class:`Region` and
bounds-checked, so a wrong or dangling address becomes an ACL error code, never a segfault.

Device memory follows ACL's rules (ACL_REFERENCE.md section 5, Memory):

* a request rounds up to a multiple of 32 bytes plus 32 (``malloc_align32``: no extra 32);
  starts are page aligned, hence 64-byte aligned;
* HUGE_FIRST takes 2 MB huge pages for requests over 1 MB (falling back to normal pages when
  the huge-page pool is used up), normal 4 KB pages otherwise; HUGE_ONLY always takes 2 MB
  granules and fails with 207001 when they run out; NORMAL_ONLY takes normal pages;
* every allocation holds whole pages from the driver; ``free`` returns the block to the
  runtime's caching pool, not to the driver, so the driver's view (what npu-smi shows) does not
  drop after free, and a new request of the same size reuses the block cheaply. Cached blocks go
  back to the driver when a request would otherwise fail, and at reset_device;
* contents are not zeroed: fresh memory holds the bytes DE AD BE EF repeated
  (float32 -1.18e29, int32 -272716322), so "forgot to memset" is visible.

A device block's bytes cost host RAM only where they were written (:class:`SparseBytes`: a
memset of gigabytes costs a few hundred KB, reads of unwritten bytes give the pattern), so a
program may allocate all of a card's memory on a laptop and memset it; host memory is real
memory, one array.

A copy moves its bytes once at most: the source gives a read-only snapshot that never changes
(:meth:`Region.snapshot`) and the destination keeps it (:meth:`Region.write_owned`). Device
stores share such arrays and copy on write; a pinned buffer gives the same snapshot again while
it cannot have changed; pageable memory is read at every snapshot, and a range of zeros gives
a shared zero array. :data:`COPIES` counts the copies the byte API makes.

Differs from hardware: the huge-page pool is a fixed partition of device memory (configurable
per profile); real drivers size it at boot. Device addresses are deterministic, not real.
"""

from __future__ import annotations

import bisect
import ctypes
import sys
import weakref
from collections.abc import Iterator

import numpy as np

from .constants import (
    ACL_MEM_MALLOC_HUGE_FIRST,
    ACL_MEM_MALLOC_HUGE_FIRST_P2P,
    ACL_MEM_MALLOC_HUGE_ONLY,
    MALLOC_POLICY_NAMES,
)
from .errors import Fail
from .hardware import HUGE_PAGE, NORMAL_PAGE, DeviceProfile, MiB, ceil_div

__all__ = [
    "Region", "AddressSpace", "DeviceHeap", "HostMemory", "UNINIT_PATTERN", "round_device_size",
    "page_choices", "page_bytes", "reserved_bytes",
    "DEVICE_BASE", "PINNED_BASE", "PAGEABLE_BASE", "COPIES", "CopyCounter",
]

UNINIT_PATTERN = bytes([0xDE, 0xAD, 0xBE, 0xEF])
_PATTERN_U32 = int.from_bytes(UNINIT_PATTERN, "little")

DEVICE_BASE = 0x12C0_0000_0000
DEVICE_SPAN = 0x100_0000_0000       # 1 TiB of addresses per device
PINNED_BASE = 0x7F00_0000_0000
PAGEABLE_BASE = 0x5500_0000_0000
_GUARD = 64 * 1024                  # unmapped gap between host regions


def round_device_size(size: int, align32: bool = False) -> int:
    """ACL's size rounding: up to a multiple of 32, plus 32 (malloc_align32: no extra)."""
    rounded = ceil_div(size, 32) * 32
    return rounded if align32 else rounded + 32


def page_choices(size: int, policy: int) -> list[str]:
    """The page kinds a malloc of ``size`` with ``policy`` tries, in order: HUGE_ONLY takes
    huge pages only; HUGE_FIRST takes huge pages above 1 MiB (else normal ones) and falls
    back to normal pages; NORMAL_ONLY takes normal pages (the P2P variants alike)."""
    base = policy % 3 if policy >= ACL_MEM_MALLOC_HUGE_FIRST_P2P else policy
    if base == ACL_MEM_MALLOC_HUGE_ONLY:
        return ["huge"]
    if base == ACL_MEM_MALLOC_HUGE_FIRST and size > 1 * MiB:
        return ["huge", "normal"]
    return ["normal"]


def page_bytes(usable: int, page: str) -> int:
    """What a block of ``usable`` bytes reserves: whole 2 MB huge or 4 KB normal pages."""
    granule = HUGE_PAGE if page == "huge" else NORMAL_PAGE
    return ceil_div(usable, granule) * granule


def reserved_bytes(size: int, policy: int = ACL_MEM_MALLOC_HUGE_FIRST, align32: bool = False,
                   huge_pages: bool = True) -> int:
    """Device bytes one malloc of ``size`` takes from the driver (:meth:`DeviceHeap.malloc`'s
    rule), on a device whose huge-page pool has room (``huge_pages=False``: has none, so
    HUGE_FIRST falls back to normal pages)."""
    choices = page_choices(size, policy)
    page = "normal" if not huge_pages and "normal" in choices else choices[0]
    return page_bytes(round_device_size(size, align32), page)


def _fill_pattern(arr: np.ndarray) -> None:
    n4 = arr.size // 4
    if n4:
        arr[: n4 * 4].view(np.uint32)[:] = _PATTERN_U32
    for i in range(n4 * 4, arr.size):
        arr[i] = UNINIT_PATTERN[i % 4]


# The sparse store's granule and the size up to which a block is one chunk: measured with
# benchmarks/bench_memory.py (smaller chunks cost time per copy, larger ones RAM per write).
CHUNK_BYTES = 256 * 1024
WHOLE_MAX_BYTES = 64 * MiB
_CHUNK_SHIFT = CHUNK_BYTES.bit_length() - 1
_PATTERN = np.empty(CHUNK_BYTES + 4, dtype=np.uint8)   # the pattern from offset 0, one chunk
_fill_pattern(_PATTERN)                                 # and 4 more, to start at any phase


def _pattern_into(dst: np.ndarray, off: int) -> None:
    """Fill ``dst`` with the uninitialised pattern as it lies at offset ``off`` of a block."""
    p, n = off & 3, dst.size
    if n <= CHUNK_BYTES:
        dst[:] = _PATTERN[p:p + n]
        return
    for s in range(0, n, CHUNK_BYTES):                 # CHUNK_BYTES keeps the phase
        k = min(CHUNK_BYTES, n - s)
        dst[s:s + k] = _PATTERN[p:p + k]


# see _pattern_view: a larger array is appended, never put in place of one (so the checks,
# which let a private cache grow but not change, accept a first use during a learner's call)
_PATTERN_SHARED = [np.empty(0, dtype=np.uint8)]


def _pattern_view(off: int, n: int) -> np.ndarray:
    """The uninitialised pattern as it lies at ``[off, off + n)`` of a block, as a read-only
    array shared by every caller (one array, grown to the largest range asked for, never
    written), so a snapshot of untouched memory copies nothing."""
    arr = _PATTERN_SHARED[-1]
    if arr.size < n + 4:
        arr = np.empty(max(n + 4, 2 * arr.size), dtype=np.uint8)
        _pattern_into(arr, 0)
        arr.flags.writeable = False
        _PATTERN_SHARED.append(arr)
    p = off & 3
    return arr[p:p + n]


# A snapshot of pageable memory whose bytes are all zero (a fresh bytearray or np.zeros buffer,
# as many programs copy) is a read-only view of one shared zero array: checking the source
# reads it once, where a copy reads it and writes as many bytes (measured, 2 MiB staging
# chunks: about 27 us against 40-140 us). Grown by appending, as _PATTERN_SHARED; np.zeros
# takes untouched (zero) pages, so it costs little RAM; ranges above the cap are copied.
_ZEROS_SHARED = [np.zeros(0, dtype=np.uint8)]
_ZEROS_SHARED[0].flags.writeable = False
_ZEROS_MAX = 64 * MiB


def _zeros_view(n: int) -> np.ndarray:
    """``n`` zero bytes as a read-only array shared by every caller (never written)."""
    arr = _ZEROS_SHARED[-1]
    if arr.size < n:
        arr = np.zeros(max(n, min(2 * arr.size, _ZEROS_MAX)), dtype=np.uint8)
        arr.flags.writeable = False
        _ZEROS_SHARED.append(arr)
    return arr[:n]


def _libc_memcmp():
    """libc's memcmp, called with the GIL held (PyDLL: no Python thread runs meanwhile), or
    None where the C library cannot be opened this way (then numpy compares)."""
    try:
        fn = ctypes.PyDLL(None).memcmp
    except (OSError, TypeError, AttributeError):
        return None
    fn.restype = ctypes.c_int
    fn.argtypes = (ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t)
    return fn


_MEMCMP = _libc_memcmp()


def _all_zero(a: np.ndarray) -> bool:
    """Whether every byte of ``a`` (a contiguous, non-empty uint8 array) is 0: the first byte
    is 0 and each byte equals the next (memcmp of the array with itself one byte on, which
    reads it once and stops at the first difference)."""
    if a[0]:
        return False
    n = a.size
    if _MEMCMP is not None:
        p = a.ctypes.data
        return _MEMCMP(p, p + 1, n - 1) == 0
    k = n & ~7
    return not a[:k].view(np.uint64).any() and not a[k:].any()


class CopyCounter:
    """How many times, and how many bytes, the byte API copied (an instrument for tests and
    benchmarks: :meth:`Region.snapshot`, :meth:`Region.write_owned`, :meth:`Region.read`,
    :meth:`Region.write` and a store turning shared pieces into one array count here)."""

    __slots__ = ("copies", "bytes")

    def __init__(self):
        self.copies = 0
        self.bytes = 0

    def add(self, n: int) -> None:
        self.copies += 1
        self.bytes += n

    def reset(self) -> tuple[int, int]:
        """Zero the counts; return what they were (copies, bytes)."""
        was = (self.copies, self.bytes)
        self.copies = self.bytes = 0
        return was


#: every copy of real bytes the byte API makes (see :class:`CopyCounter`)
COPIES = CopyCounter()

_MAX_PIECES = 16     # a chunk of more shared pieces becomes one array of its own


def _frozen(arr: np.ndarray) -> np.ndarray:
    arr.flags.writeable = False
    return arr


class _Pieces:
    """A chunk made of immutable parts: ``base`` (None: the pattern, an int: a memset value,
    or a read-only array of the whole chunk) under sorted, disjoint pieces ``[lo, hi)``, each
    a read-only array or an int. Every array in it is shared as it is (never written): a write
    replaces pieces, so a snapshot that holds one keeps the bytes it was given."""

    __slots__ = ("base", "los", "his", "parts")

    def __init__(self, base):
        self.base = base
        self.los: list[int] = []
        self.his: list[int] = []
        self.parts: list = []

    def find(self, a: int, b: int):
        """The part holding all of ``[a, b)`` and its start, or (None, 0)."""
        k = bisect.bisect_right(self.los, a) - 1
        if k >= 0 and b <= self.his[k]:
            return self.parts[k], self.los[k]
        return None, 0

    def put(self, a: int, b: int, part) -> int:
        """Lay ``part`` over ``[a, b)`` (trimming what it covers); return the piece count."""
        los = self.los
        k = bisect.bisect_left(los, a)
        if k < len(los) and los[k] == a and self.his[k] == b:   # the same range: replace it
            self.parts[k] = part
            return len(los)
        los, his, parts = [], [], []
        placed = False
        for lo, hi, x in zip(self.los, self.his, self.parts, strict=True):
            if hi <= a or lo >= b:
                if lo >= b and not placed:
                    los.append(a), his.append(b), parts.append(part)
                    placed = True
                los.append(lo), his.append(hi), parts.append(x)
                continue
            if lo < a:                                   # the part left of the new one
                los.append(lo), his.append(a)
                parts.append(x if type(x) is int else x[:a - lo])
            if not placed:
                los.append(a), his.append(b), parts.append(part)
                placed = True
            if hi > b:                                   # and right of it
                los.append(b), his.append(hi)
                parts.append(x if type(x) is int else x[b - lo:])
        if not placed:
            los.append(a), his.append(b), parts.append(part)
        self.los, self.his, self.parts = los, his, parts
        return len(los)

    @property
    def nbytes(self) -> int:
        base = self.base
        held = base.nbytes if type(base) is np.ndarray else 0
        return held + sum(x.nbytes for x in self.parts if type(x) is not int)


def _chunk_into(dst: np.ndarray, c, base: int, a: int, b: int) -> None:
    """Put bytes ``[a, b)`` of chunk ``c`` (starting at ``base`` in its block) into ``dst``."""
    t = type(c)
    if t is np.ndarray:
        dst[:] = c[a:b]
    elif c is None:
        _pattern_into(dst, base + a)
    elif t is int:
        dst.fill(c)
    else:
        _chunk_into(dst, c.base, base, a, b)
        for lo, hi, x in zip(c.los, c.his, c.parts, strict=True):
            if hi <= a or lo >= b:
                continue
            s, e = max(lo, a), min(hi, b)
            if type(x) is int:
                dst[s - a:e - a] = x
            else:
                dst[s - a:e - a] = x[s - lo:e - lo]


class SparseBytes:
    """The bytes of one device block, stored sparsely: host RAM only where bytes were written.

    The block is cut into chunks of ``CHUNK_BYTES`` (the last one may be shorter); a block of
    at most ``WHOLE_MAX_BYTES`` is one chunk, so copying an ordinary buffer costs what a dense
    array's copy costs (and writing part of one takes RAM for all of it). A chunk nobody wrote
    is absent and reads as the uninitialised pattern, byte ``i`` of the block being
    ``UNINIT_PATTERN[i % 4]`` as if the whole block had been filled with it; a chunk a memset
    covered entirely is one int (its value); a chunk partly written is a uint8 array. A write
    that covers a chunk entirely stores a copy of the source without filling the pattern
    first.

    Copy on write: a chunk may also be a read-only array, or :class:`_Pieces` (read-only
    parts, or memset values, over a base: a partial memset of an absent or memset chunk is
    such a piece, no array), which snapshots share (:meth:`view`) and :meth:`write_owned`
    adopts without a copy. Such arrays are never written: a write into a shared chunk lays a
    new piece over it (and a chunk of too many pieces becomes one array of its own), so every
    snapshot keeps the bytes it was given.

    Every read is exact: the bytes are those a dense array filled with the pattern and then
    given the same writes and memsets would hold. Nothing observable differs from hardware
    (or from a dense store): only the host RAM the simulation takes does.
    """

    __slots__ = ("size", "_shift", "_chunks")

    def __init__(self, size: int):
        self.size = size
        # a chunk is 1 << _shift bytes: CHUNK_BYTES, or at least the whole block
        self._shift = _CHUNK_SHIFT if size > WHOLE_MAX_BYTES else max(size - 1, 1).bit_length()
        self._chunks: dict = {}

    @property
    def written(self) -> bool:
        """True once any byte was written or memset."""
        return bool(self._chunks)

    @property
    def held_bytes(self) -> int:
        """Host RAM the chunk arrays hold (memset-only chunks and absent ones hold none;
        an array shared with snapshots or other stores counts in each)."""
        held = 0
        for c in self._chunks.values():
            t = type(c)
            if t is np.ndarray:
                held += c.nbytes
            elif t is _Pieces:
                held += c.nbytes
        return held

    def _check(self, off: int, n: int) -> None:
        if off < 0 or n < 0 or off + n > self.size:
            raise IndexError(f"bytes [{off}, {off + n}) are outside a store of {self.size} B")

    def _chunk(self, i: int) -> np.ndarray:
        """Chunk ``i`` as a writable array of its own (made from the pattern, its fill value or
        its shared parts if it is not one)."""
        c = self._chunks.get(i)
        if type(c) is np.ndarray and c.flags.writeable:
            return c
        base = i << self._shift
        arr = np.empty(min(1 << self._shift, self.size - base), dtype=np.uint8)
        _chunk_into(arr, c, base, 0, arr.size)
        if c is not None and type(c) is not int:
            COPIES.add(arr.size)
        self._chunks[i] = arr
        return arr

    def read(self, off: int, n: int) -> np.ndarray:
        """A copy of bytes ``[off, off + n)``."""
        self._check(off, n)
        chunks, shift = self._chunks, self._shift
        step = 1 << shift
        i = off >> shift
        a = off - (i << shift)
        if a + n <= step:                              # within one chunk: the common case
            c = chunks.get(i)
            t = type(c)
            if t is np.ndarray:
                return c[a:a + n].copy()
            if t is _Pieces:
                x, lo = c.find(a, a + n)
                if type(x) is np.ndarray:
                    return x[a - lo:a - lo + n].copy()
            out = np.empty(n, dtype=np.uint8)
            _chunk_into(out, c, i << shift, a, a + n)
            return out
        out = np.empty(n, dtype=np.uint8)
        pos, end = off, off + n
        while pos < end:
            base = i << shift
            a, b = pos - base, min(end - base, step)
            _chunk_into(out[pos - off:pos - off + b - a], chunks.get(i), base, a, b)
            pos = base + b
            i += 1
        return out

    def view(self, off: int, n: int) -> np.ndarray:
        """Bytes ``[off, off + n)`` as a read-only array that never changes: shared with the
        store where one chunk's array holds them all (no copy), else a copy. A chunk array of
        its own that the range covers at least half of becomes shared (read-only) for it."""
        if off < 0 or n < 0 or off + n > self.size:
            self._check(off, n)
        shift = self._shift
        i = off >> shift
        a = off - (i << shift)
        if a + n <= 1 << shift:
            c = self._chunks.get(i)
            t = type(c)
            if t is np.ndarray:
                if c.flags.writeable:
                    if 2 * n < c.size:                 # a small part of a large chunk: copy
                        COPIES.add(n)
                        return _frozen(c[a:a + n].copy())
                    c.flags.writeable = False          # shared from now on (copy on write)
                return c if n == c.size else c[a:a + n]
            if t is _Pieces:
                x, lo = c.find(a, a + n)
                if type(x) is np.ndarray:
                    return x if a == lo and n == x.size else x[a - lo:a - lo + n]
            elif c is None:                            # never written: the shared pattern
                return _pattern_view(off, n)
        out = self.read(off, n)
        COPIES.add(n)
        return _frozen(out)

    def write(self, off: int, raw: np.ndarray) -> None:
        """Store (a copy of) the uint8 array ``raw`` at offset ``off``."""
        self._put(off, raw, False)

    def write_owned(self, off: int, raw: np.ndarray) -> None:
        """Store the read-only uint8 array ``raw``, which nobody writes (a snapshot), at offset
        ``off``: kept as it is (shared, no copy) where the chunk is not an array of its own."""
        self._put(off, raw, True)

    def _put(self, off: int, raw: np.ndarray, owned: bool) -> None:
        n = raw.size
        owned = owned and not raw.flags.writeable      # a writable array is never adopted
        if off < 0 or off + n > self.size:
            self._check(off, n)
        chunks, shift = self._chunks, self._shift
        step = 1 << shift
        i = off >> shift
        a = off - (i << shift)
        if owned and n and a + n <= step:              # a snapshot into one chunk's pieces
            c = chunks.get(i)
            if type(c) is _Pieces and (a or n != min(step, self.size - (i << shift))):
                if c.put(a, a + n, raw) > _MAX_PIECES:
                    self._chunk(i)
                return
        pos, end = off, off + n
        i = off >> shift
        while pos < end:
            base = i << shift
            a, b = pos - base, min(end - base, step)
            src = raw if b - a == n else raw[pos - off:pos - off + b - a]
            c = chunks.get(i)
            t = type(c)
            own = t is np.ndarray and c.flags.writeable
            if a == 0 and b == min(step, self.size - base):
                if owned:                              # covered whole: adopt the array
                    chunks[i] = src
                elif own:
                    c[:] = src
                    COPIES.add(b - a)
                else:                                  # no pattern to fill
                    chunks[i] = src.copy()
                    COPIES.add(b - a)
            elif own and not (owned and 2 * (b - a) >= c.size):
                c[a:b] = src                           # an array of its own: write into it
                COPIES.add(b - a)
            elif not owned and (c is None or t is int):
                self._chunk(i)[a:b] = src
                COPIES.add(b - a)
            else:                                      # shared or adopted: a piece over it
                if not owned:
                    src = _frozen(src.copy())
                    COPIES.add(b - a)
                elif own:                              # most of it adopted: the rest is shared
                    c.flags.writeable = False
                if t is not _Pieces:
                    c = chunks[i] = _Pieces(c)
                if c.put(a, b, src) > _MAX_PIECES:
                    self._chunk(i)
            pos = base + b
            i += 1

    def fill(self, off: int, n: int, value: int) -> None:
        """Set bytes ``[off, off + n)`` to ``value`` (0..255)."""
        self._check(off, n)
        if not 0 <= value <= 255:
            raise OverflowError(f"memset value {value} is not a byte (0..255)")
        chunks, shift = self._chunks, self._shift
        step = 1 << shift
        pos, end = off, off + n
        i = off >> shift
        while pos < end:
            base = i << shift
            a, b = pos - base, min(end - base, step)
            if a == 0 and b == min(step, self.size - base):
                chunks[i] = value                      # covered whole: one value, no array
            else:
                c = chunks.get(i)
                t = type(c)
                if t is np.ndarray and c.flags.writeable:
                    c[a:b] = value
                elif t is not int or c != value:       # a chunk of that value stays so
                    if t is not _Pieces:               # a value over the rest: no array
                        c = chunks[i] = _Pieces(c)
                    if c.put(a, b, value) > _MAX_PIECES:
                        self._chunk(i)
            pos = base + b
            i += 1

    def to_dense(self) -> np.ndarray:
        """All the bytes as one new array."""
        return self.read(0, self.size)


_SPARSE = SparseBytes    # the class itself (benchmarks swap the name for a stand-in store)


class Region:
    """A contiguous range of addresses with one owner: a device block or a host buffer."""

    __slots__ = (
        "start", "size", "requested", "kind", "device", "page", "reserved", "policy", "live",
        "generation", "label", "_data", "_store", "_obj", "_real_addr", "dangling",
        "_version", "_snap",
    )

    def __init__(self, start: int, size: int, kind: str, *, device: int = -1, page: str = "",
                 reserved: int = 0, policy: int = -1, requested: int = 0, label: str = ""):
        self.start = start
        self.size = size
        self.requested = requested or size
        self.kind = kind              # "device", "pinned" or "pageable"
        self.device = device
        self.page = page              # "huge" or "normal" for device blocks
        self.reserved = reserved
        self.policy = policy
        self.live = True
        self.generation = 0
        self.label = label
        self._data: np.ndarray | None = None     # host memory; device memory made dense
        self._store: SparseBytes | None = None   # device memory (see SparseBytes)
        self._obj = None              # pageable: the Python object that owns the buffer
        self._real_addr = 0
        self.dangling = False
        self._version = 0             # bumped by every write, memset and handing out of data
        # pinned: (off, n, version, weak ref to the copy); pageable bytes: {(off, n): weak ref}
        self._snap = None

    @property
    def end(self) -> int:
        return self.start + self.size

    @property
    def data(self) -> np.ndarray:
        """The bytes behind the region as a writable uint8 array (allocated on first touch).

        Host memory is one array (for a registered buffer: a view of its object's bytes).
        Device memory lives in a :class:`SparseBytes` store and is read and written through
        the byte API below; asking for ``data`` of a device block makes its store one dense
        array for good (every byte of it in host RAM: fine for small blocks, meant for tests
        and for code that reaches past the API), so the view stays the block's memory.

        A device block keeps one store for all its pages (``reserved`` bytes), so a block the
        caching pool hands out again with another size is still the same memory; this property
        shows its first ``size`` bytes.

        Whoever holds the array may write through it, so handing it out counts as a write
        (:meth:`snapshot` does not give an older copy again).
        """
        self._version += 1
        return self._dense()

    def _dense(self) -> np.ndarray:
        """:attr:`data` without counting as a write (for this module's readers)."""
        d = self._data
        if d is not None:
            return d if d.size == self.size else d[:self.size]
        if self.kind == "pageable":
            if self.dangling or not self.buffer_unchanged():
                raise Fail(100000, f"host address 0x{self.start:x} is dangling: its object is "
                                   "gone or its buffer moved (a bytearray that was resized)")
            buf = (ctypes.c_ubyte * self.size).from_address(self._real_addr)
            return np.ctypeslib.as_array(buf)
        if self.kind == "device":
            arr = self._sparse().to_dense()
            self._store = None
        else:
            arr = np.empty(self.size, dtype=np.uint8)
            _fill_pattern(arr)
        self._data = arr
        return arr if arr.size == self.size else arr[:self.size]

    def _sparse(self) -> SparseBytes:
        """A device block's store (made on first use: all of it reads as the pattern)."""
        store = self._store
        if store is None:
            store = self._store = SparseBytes(max(self.size, self.reserved))
        return store

    def _span(self, off: int, n: int) -> np.ndarray:
        """:meth:`span` without counting as a write (for this module's readers)."""
        data = self._dense()
        if off + n > data.size and self._data is not None:
            data = self._data
        return data[off:off + n]

    def span(self, off: int, n: int) -> np.ndarray:
        """Bytes ``[off, off + n)`` of the region's memory as a writable view (of a device
        block: after making its store dense, see :attr:`data`).

        A task resolves its buffers when it runs, by address: a device block that the caching
        pool has handed out again with a smaller size still holds the bytes an older task
        (of an earlier generation) was given, so that task reads or writes the same memory.
        """
        self._version += 1
        return self._span(off, n)

    # The byte API. Every reader and writer of a region's memory outside this module goes
    # through these (never through ``data`` for device memory), so a device block's bytes
    # stay in its sparse store. Offsets may reach past ``size`` into the block's ``reserved``
    # bytes (see span).

    def read(self, off: int, n: int) -> np.ndarray:
        """A copy of bytes ``[off, off + n)`` as a uint8 array (unwritten bytes read as the
        uninitialised pattern)."""
        COPIES.add(n)
        if self.kind == "device" and self._data is None:
            return self._sparse().read(off, n)
        return self._span(off, n).copy()

    def read_bytes(self, off: int, n: int) -> bytes:
        """Bytes ``[off, off + n)`` as ``bytes``."""
        COPIES.add(n)
        if self.kind == "device" and self._data is None:
            return self._sparse().read(off, n).tobytes()
        return self._span(off, n).tobytes()

    def snapshot(self, off: int, n: int) -> np.ndarray:
        """Bytes ``[off, off + n)`` as they are now, as a read-only uint8 array that never
        changes (what a copy task reads when it starts; give it to :meth:`write_owned`).

        Device memory: shared with the block's store where one array holds the range (no
        copy; the store copies on write). Pinned host memory: a copy, which is given again
        while the buffer cannot have changed: no write or memset into it since, and no view
        of it held when the copy was made (each view comes from :attr:`data`, which counts as
        a write); the region holds it weakly, so it is given again while a device block (or a
        copy in flight) still keeps it, and costs no RAM once nothing does. Pageable host
        memory, which its Python object may change at any time: read every time; a range whose
        bytes are all zero gives a view of one shared zero array (no copy, see
        :func:`_zeros_view`), any other a copy. Except a ``bytes`` object, which nothing can
        change (Python's promise): while acllab has neither written it (a copy into it) nor
        handed out a view of it (``data``), each range is read once and its snapshot given
        again, as pinned memory's is (a change made to a bytes object behind Python's back,
        through ctypes, is not seen: Python itself assumes there is none).
        """
        if self.kind == "device" and self._data is None:
            store = self._store or self._sparse()
            if type(store) is _SPARSE:
                return store.view(off, n)
            COPIES.add(n)                      # a store with the byte API only (a stand-in)
            return _frozen(store.read(off, n))
        if self.kind == "pinned":
            snap = self._snap
            version = self._version            # read first: a later write makes it stale
            if snap is not None and snap[2] == version and snap[0] == off and snap[1] == n:
                arr = snap[3]()                # alive while a store or a copy holds it
                if arr is not None:
                    return arr
            if self._data is None:             # untouched memory: the pattern, no bytes yet
                return _pattern_view(off, n)
            quiet = _host_quiet(self)
            arr = self._data[off:off + n].copy()
            arr.flags.writeable = False
            COPIES.add(n)
            if quiet and self.live and arr.size == n:
                self._snap = (off, n, version, weakref.ref(arr))
            return arr
        # a bytes object cannot change (Python's promise), so while acllab has neither written
        # it nor handed out a view of it (version 0), a range read once holds the same bytes
        # at every later snapshot: that one is given again while something still keeps it
        immutable = self._version == 0 and type(self._obj) is bytes
        if immutable:
            snaps = self._snap
            if snaps is not None:
                ref = snaps.get((off, n))
                if ref is not None:
                    arr = ref()
                    if arr is not None:
                        return arr
        span = self._span(off, n)
        k = span.size
        if k < n:
            # a copy that reads past the object's end (acl.rt.copy._source_span): the bytes
            # that exist, then the uninitialised pattern, as if the region ran on
            arr = np.concatenate([span, _pattern_view(off + k, n - k)])
            arr.flags.writeable = False
            COPIES.add(k)
        elif 0 < k <= _ZEROS_MAX and _all_zero(span):
            arr = _zeros_view(k)               # the bytes as they are now, and always
        else:
            arr = span.copy()
            arr.flags.writeable = False
            COPIES.add(n)
        if immutable and arr.size == n:
            snaps = self._snap
            if snaps is None or len(snaps) >= 256:
                snaps = self._snap = {}
            snaps[(off, n)] = weakref.ref(arr)
        return arr

    def write_owned(self, off: int, snap: np.ndarray) -> None:
        """Store ``snap``, a uint8 array from :meth:`snapshot` (read-only, never written by
        anyone), at offset ``off``: a device block's store keeps the array itself where it
        can (no copy); host memory copies it in."""
        d = self._data
        if d is not None:                  # host memory (or a dense device block): dense
            n = snap.size
            self._version += 1
            d[off:off + n] = snap          # as span's view (past size: into reserved bytes)
            COPIES.add(n)
        elif self.kind == "device":
            store = self._store or self._sparse()
            if type(store) is _SPARSE:
                store._put(off, snap, True)
            else:                              # a store with the byte API only (a stand-in)
                store.write(off, snap)
                COPIES.add(snap.size)
        else:
            self.span(off, snap.size)[:] = snap
            COPIES.add(snap.size)

    def write(self, off: int, src) -> None:
        """Store ``src`` (bytes-like, or any array, by its raw bytes) at offset ``off``."""
        if isinstance(src, np.ndarray):
            raw = np.ascontiguousarray(src).reshape(-1).view(np.uint8)
        else:
            raw = np.frombuffer(src, dtype=np.uint8)
        if self.kind == "device" and self._data is None:
            self._sparse().write(off, raw)
        else:
            self.span(off, raw.size)[:] = raw
            COPIES.add(raw.size)

    def fill(self, off: int, n: int, value: int) -> None:
        """Set bytes ``[off, off + n)`` to ``value`` (a memset: 0..255)."""
        if self.kind == "device" and self._data is None:
            self._sparse().fill(off, n, int(value))
        else:
            self.span(off, n)[:] = value

    def buffer_unchanged(self) -> bool:
        """For a registered bytearray: is its buffer still where and as large as it was?"""
        obj = self._obj
        if type(obj) is not bytearray:
            return True              # bytes never change; numpy refuses to resize a held array
        if len(obj) < self.size:
            return False
        if not obj:
            return True
        probe = (ctypes.c_char * len(obj)).from_buffer(obj)
        addr = ctypes.addressof(probe)
        del probe
        return addr == self._real_addr

    @property
    def materialised(self) -> bool:
        """True when the region's bytes may differ from the uninitialised pattern: host
        memory once touched (a registered buffer always), device memory once written."""
        if self.kind == "device" and self._data is None:
            return self._store is not None and self._store.written
        return self._data is not None or self.kind == "pageable"

    def describe(self) -> str:
        if self.kind == "device":
            what = "DVPP buffer" if self.label == "dvpp" else "block"
            return (f"device {self.device} {what} 0x{self.start:x} ({self.requested} B "
                    f"requested, {self.size} B usable, {self.page} pages)")
        if self.kind == "pinned":
            return f"pinned host buffer 0x{self.start:x} ({self.size} B)"
        return f"pageable host buffer 0x{self.start:x} ({self.size} B, {self.label})"

    def __repr__(self) -> str:
        state = "live" if self.live else ("dangling" if self.dangling else "freed")
        return f"<Region {self.describe()}, {state}>"


def _host_quiet(region: Region) -> bool:
    """True when nothing but ``region`` holds its host array (no view of it exists)."""
    return sys.getrefcount(region._data) <= _QUIET_HOST


def _calibrate_quiet() -> int:
    probe = Region(0, 1, "pinned")
    probe._dense()
    return sys.getrefcount(probe._data)   # same depth as in _host_quiet


_QUIET_HOST = _calibrate_quiet()


class AddressSpace:
    """Sorted map from address ranges to regions (live ones and remembered dead ones)."""

    MAX_TOMBSTONES = 4096

    def __init__(self):
        self._starts: list[int] = []
        self._regions: list[Region] = []
        self._dead: list[Region] = []

    def add(self, region: Region) -> None:
        i = bisect.bisect_left(self._starts, region.start)
        self._starts.insert(i, region.start)
        self._regions.insert(i, region)

    def remove(self, region: Region, keep_tombstone: bool = True) -> None:
        i = bisect.bisect_left(self._starts, region.start)
        if i < len(self._regions) and self._regions[i] is region:
            del self._starts[i]
            del self._regions[i]
        if keep_tombstone:
            self._dead.append(region)
            if len(self._dead) > self.MAX_TOMBSTONES:
                del self._dead[: len(self._dead) - self.MAX_TOMBSTONES]

    def find(self, addr: int) -> Region | None:
        """The region whose range holds ``addr`` (live or cached in the pool), or None."""
        i = bisect.bisect_right(self._starts, addr) - 1
        if i >= 0:
            r = self._regions[i]
            if addr < r.start + r.size:
                return r
        return None

    def find_dead(self, addr: int) -> Region | None:
        for r in reversed(self._dead):
            if r.start <= addr < r.start + r.size:
                return r
        return None

    def __iter__(self) -> Iterator[Region]:
        return iter(list(self._regions))

    def __len__(self) -> int:
        return len(self._regions)


class DeviceHeap:
    """Device memory of one device: driver pages, huge-page pool, the runtime's caching pool."""

    def __init__(self, device: int, profile: DeviceProfile, space: AddressSpace,
                 hugepage_pool_bytes: int | None = None):
        self.device = device
        self.profile = profile
        self.space = space
        self.huge_total = profile.hugepage_pool_bytes if hugepage_pool_bytes is None \
            else int(hugepage_pool_bytes)
        self.huge_total = min(self.huge_total, profile.memory_bytes) // HUGE_PAGE * HUGE_PAGE
        self.normal_total = profile.memory_bytes - self.huge_total
        self.huge_held = 0            # bytes of huge pages the driver has handed out
        self.normal_held = 0
        self.pool: dict[tuple[str, int], list[Region]] = {}
        self.live: dict[int, Region] = {}
        self._next = DEVICE_BASE + device * DEVICE_SPAN
        self.reserved_bytes = 0       # held outside malloc (e.g. by loaded models)

    def __repr__(self) -> str:
        huge_pages = self.huge_total // HUGE_PAGE
        return (f"<DeviceHeap device {self.device}: runtime-allocated {self.runtime_used_bytes} B "
                f"in {len(self.live)} blocks, cached {self.cached_bytes} B, driver-held "
                f"{self.driver_held_bytes} B, huge pages {self.huge_held // HUGE_PAGE}/"
                f"{huge_pages}>")

    # -- views ---------------------------------------------------------------------------
    @property
    def total_bytes(self) -> int:
        return self.huge_total + self.normal_total

    @property
    def driver_held_bytes(self) -> int:
        """What the driver has handed out (npu-smi's view): live + cached + reserved."""
        return self.huge_held + self.normal_held + self.reserved_bytes

    @property
    def runtime_used_bytes(self) -> int:
        """What live allocations use, counted as malloc rounds them."""
        return sum(r.size for r in self.live.values())

    @property
    def cached_bytes(self) -> int:
        return sum(r.reserved for blocks in self.pool.values() for r in blocks)

    def mem_info(self, which: str) -> tuple[int, int]:
        """(free, total) bytes for 'all', 'huge' or 'normal' pages (driver's view)."""
        if which == "huge":
            return self.huge_total - self.huge_held, self.huge_total
        if which == "normal":
            return self.normal_total - self.normal_held - self.reserved_bytes, self.normal_total
        return self.total_bytes - self.driver_held_bytes, self.total_bytes

    # -- allocation ----------------------------------------------------------------------
    def malloc(self, size: int, policy: int, align32: bool = False) -> tuple[Region, int, bool]:
        """Allocate; return (region, host cost in ns, pool hit). Raises Fail on error."""
        if policy not in MALLOC_POLICY_NAMES:
            raise Fail(100000, f"policy {policy} is not an aclrtMemMallocPolicy "
                               "(0 HUGE_FIRST, 1 HUGE_ONLY, 2 NORMAL_ONLY, 3-5 the P2P variants)")
        usable = round_device_size(size, align32)
        for page in page_choices(size, policy):
            reserved = page_bytes(usable, page)
            blocks = self.pool.get((page, reserved))
            if blocks:
                region = blocks.pop()
                region.live = True
                region.generation += 1
                region.size = usable
                region.requested = size
                region.policy = policy
                self.live[region.start] = region
                return region, self.profile.malloc_pool_ns, True
            if not self._fits(page, reserved) and self._fits(page, reserved - self._cached(page)):
                self.release_cache(page)   # only when giving the cache back makes it fit
            if self._fits(page, reserved):
                region = self._carve(page, reserved, usable, size, policy)
                cost = self.profile.malloc_driver_ns + \
                    self.profile.malloc_driver_ns_per_mib * ceil_div(reserved, MiB)
                return region, cost, False
        free_h, _ = self.mem_info("huge")
        free_n, _ = self.mem_info("normal")
        raise Fail(207001, f"cannot allocate {size} B with {MALLOC_POLICY_NAMES[policy]} on device "
                           f"{self.device}: {free_h // MiB} MB of huge pages and "
                           f"{free_n // MiB} MB of normal pages are free")

    def _cached(self, page: str) -> int:
        return sum(r.reserved for (p, _), blocks in self.pool.items() if p == page
                   for r in blocks)

    def _fits(self, page: str, reserved: int) -> bool:
        if page == "huge":
            return self.huge_held + reserved <= self.huge_total
        return self.normal_held + self.reserved_bytes + reserved <= self.normal_total

    def _carve(self, page: str, reserved: int, usable: int, size: int, policy: int) -> Region:
        align = HUGE_PAGE if page == "huge" else NORMAL_PAGE
        start = ceil_div(self._next, align) * align
        self._next = start + reserved + NORMAL_PAGE  # a guard page between blocks
        if page == "huge":
            self.huge_held += reserved
        else:
            self.normal_held += reserved
        region = Region(start, usable, "device", device=self.device, page=page,
                        reserved=reserved, policy=policy, requested=size)
        self.space.add(region)
        self.live[start] = region
        return region

    def free(self, region: Region) -> None:
        """Return a live block to the caching pool (the driver keeps its pages)."""
        del self.live[region.start]
        region.live = False
        self.pool.setdefault((region.page, region.reserved), []).append(region)

    def release_cache(self, page: str | None = None) -> int:
        """Give cached blocks back to the driver; return the bytes released."""
        released = 0
        for key in list(self.pool):
            if page is not None and key[0] != page:
                continue
            for region in self.pool.pop(key):
                released += region.reserved
                self._return_pages(region)
        return released

    def _return_pages(self, region: Region) -> None:
        if region.page == "huge":
            self.huge_held -= region.reserved
        else:
            self.normal_held -= region.reserved
        region.live = False
        region._data = None           # the block's bytes go with its pages
        region._store = None
        self.space.remove(region)

    def release_all(self) -> list[Region]:
        """reset_device: every block goes back to the driver; return the live ones (leaks)."""
        leaked = list(self.live.values())
        for region in leaked:
            self._return_pages(region)
        self.live.clear()
        self.release_cache()
        self.reserved_bytes = 0
        return leaked


class HostMemory:
    """Pinned host buffers (malloc_host) and registered pageable Python buffers.

    ``arena`` (None by default) is where pinned buffers' bytes come from when another
    process must see them too: an object with ``alloc(n) -> (offset, uint8 array) | None``
    and ``free(offset)`` (the device server's shared memory, :mod:`acllab.device.server`).
    A runtime's buffers come from it once it is set, filled with the
    uninitialised pattern at once, and gives them back when they are freed or the runtime
    goes away.
    """

    arena = None

    def __init__(self, space: AddressSpace, pinned_limit_bytes: int):
        self._arena = None                     # the arena this memory took buffers from
        self._blocks: dict[int, int] = {}      # pinned start -> offset in the arena
        self.space = space
        self.pinned_limit = pinned_limit_bytes
        self.pinned: dict[int, Region] = {}
        self.pinned_bytes = 0
        self._next_pinned = PINNED_BASE
        self._next_pageable = PAGEABLE_BASE
        self._registered: dict[int, Region] = {}   # id(obj) -> region
        self._by_real: list[tuple[int, int, Region]] = []

    def malloc_host(self, size: int) -> Region:
        if self.pinned_bytes + size > self.pinned_limit:
            raise Fail(207001, f"cannot page-lock {size} B: {self.pinned_bytes} of "
                               f"{self.pinned_limit} B of host memory are already pinned")
        start = ceil_div(self._next_pinned, NORMAL_PAGE) * NORMAL_PAGE
        self._next_pinned = start + ceil_div(size, NORMAL_PAGE) * NORMAL_PAGE + _GUARD
        region = Region(start, size, "pinned")
        if self._arena is None and HostMemory.arena is not None:
            self._arena = HostMemory.arena
            weakref.finalize(self, _free_blocks, self._arena, self._blocks)
        if self._arena is not None:
            got = self._arena.alloc(size)
            if got is None:
                raise Fail(207001, f"cannot page-lock {size} B: the shared host memory the "
                                   "device and this program both map is full")
            self._blocks[start], region._data = got
            _fill_pattern(region._data)
        self.space.add(region)
        self.pinned[start] = region
        self.pinned_bytes += size
        return region

    def free_host(self, region: Region) -> None:
        del self.pinned[region.start]
        self.pinned_bytes -= region.size
        region.live = False
        region.dangling = True
        region._snap = None           # a tombstone holds no copy of the bytes
        self.space.remove(region)
        off = self._blocks.pop(region.start, None)
        if off is not None:
            region._data = None
            self._arena.free(off)

    def release_all(self) -> list[Region]:
        leaked = list(self.pinned.values())
        for r in leaked:
            self.free_host(r)
        return leaked

    # -- pageable buffers ---------------------------------------------------------------
    def register(self, owner, owner_addr: int, owner_nbytes: int, view_addr: int,
                 label: str) -> int:
        """Give a Python buffer a host address, without copying; return the view's address.

        ``owner`` is the object that owns the memory (a bytes object or the base ndarray);
        ``view_addr`` is the real address of the part the caller asked about. A view of an
        already registered buffer gets an address inside that buffer's region.
        """
        self.sweep()
        for lo, hi, region in self._by_real:
            if lo <= view_addr < hi or (lo == hi == view_addr):
                return region.start + (view_addr - lo)
        start = self._next_pageable
        self._next_pageable = start + ceil_div(max(owner_nbytes, 1), NORMAL_PAGE) * NORMAL_PAGE \
            + _GUARD
        region = Region(start, owner_nbytes, "pageable", label=label)
        region._obj = owner
        region._real_addr = owner_addr
        self.space.add(region)
        self._registered[id(region)] = region
        self._by_real.append((owner_addr, owner_addr + owner_nbytes, region))
        return start + (view_addr - owner_addr)

    def sweep(self) -> None:
        """Forget buffers whose object nobody but acllab still holds (they would be freed)."""
        dead = [r for r in self._registered.values() if _only_ours(r._obj)]
        for r in dead:
            self._drop(r)

    def check_alive(self, region: Region) -> bool:
        if region.dangling:
            return False
        if _only_ours(region._obj) or not region.buffer_unchanged():
            self._drop(region)
            return False
        return True

    def _drop(self, region: Region) -> None:
        del self._registered[id(region)]
        self._by_real = [e for e in self._by_real if e[2] is not region]
        region._obj = None
        region.live = False
        region.dangling = True
        self.space.remove(region)

    @property
    def registered_count(self) -> int:
        return len(self._registered)


def _free_blocks(arena, blocks: dict) -> None:
    """Give a dead runtime's pinned buffers back to the arena."""
    for off in list(blocks.values()):
        arena.free(off)
    blocks.clear()


def _probe(obj) -> int:
    return sys.getrefcount(obj)


def _calibrate() -> int:
    holder = Region(0, 1, "pageable")
    holder._obj = bytes(bytearray(16))   # a fresh object only the holder references
    return _probe(holder._obj)            # same call depth as the check in _only_ours


_BASELINE_REFS = _calibrate()


def _only_ours(obj) -> bool:
    """True when nothing but acllab's region holds ``obj`` (so Python would have freed it)."""
    return obj is None or sys.getrefcount(obj) <= _BASELINE_REFS
