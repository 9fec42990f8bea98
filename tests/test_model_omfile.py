"""acllab.model.omfile: round trips, hostile headers and sections, and a fuzz test.

Hostile files are built here from the layout the module documents (not from its private
helpers), with correct checksums, so each test reaches the check it aims at.
"""

import json
import struct
import time
import zlib

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from acllab.model import zoo
from acllab.model.atc import compile_model
from acllab.model.omfile import ModelFileError, dumps, load, loads, query_size, save

HEADER = struct.Struct("<8sHHIIQI")     # magic, version, header size, flags, count, size, crc
ENTRY = struct.Struct("<4sIQQII")       # tag, 0, offset, size, crc, 0
HEAD = HEADER.size + 4


def build(sections, *, magic=b"ACLLABOM", version=1, flags=None, size=None, header_size=HEAD,
          entries=None):
    """Raw .om bytes with valid checksums; ``entries`` overrides (tag, offset, size)."""
    pos = HEAD + ENTRY.size * len(sections)
    table, offsets = b"", []
    for i, (tag, data) in enumerate(sections):
        off, length = pos, len(data)
        if entries and entries[i]:
            off, length = entries[i]
        table += ENTRY.pack(tag, 0, off, length, zlib.crc32(data), 0)
        offsets.append(off)
        pos += len(data)
    if flags is None:
        flags = 1 if any(tag == b"WGHT" for tag, _ in sections) else 0
    head = HEADER.pack(magic, version, header_size, flags, len(sections),
                       pos if size is None else size, zlib.crc32(table))
    head += struct.pack("<I", zlib.crc32(head))
    return head + table + b"".join(data for _, data in sections)


def parts(data: bytes):
    """(meta dict, weights bytes or None, flags) of a valid .om."""
    _, _, _, flags, count, _, _ = HEADER.unpack_from(data)
    found = {}
    for i in range(count):
        tag, _, off, length, _, _ = ENTRY.unpack_from(data, HEAD + i * ENTRY.size)
        found[tag] = data[off:off + length]
    return json.loads(found[b"META"]), found.get(b"WGHT"), flags


@pytest.fixture(scope="module")
def tiny_om():
    model = compile_model("zoo:tiny", input_shape="data:-1,1,16,16", dynamic_batch_size="1,4,16")
    return model, dumps(model)


def code_of(data) -> int:
    with pytest.raises(ModelFileError) as info:
        loads(data)
    return info.value.code


def test_round_trip_keeps_everything(tiny_om):
    model, data = tiny_om
    again = loads(data)
    assert again.to_dict() == model.to_dict()
    assert sorted(again.graph.weights) == sorted(model.graph.weights)
    for k, v in model.graph.weights.items():
        assert np.array_equal(again.graph.weights[k], v) and again.graph.weights[k].dtype == v.dtype
    images, _ = zoo.tiny_dataset(16, seed=4)
    assert np.array_equal(again.forward([images], batch=16)[0],
                          model.forward([images], batch=16)[0])
    assert dumps(again) == data                         # deterministic bytes
    assert data[:8] == b"ACLLABOM" and parts(data)[2] == 3   # weights + dynamic flags


def test_cost_only_model_has_no_weights_section(tmp_path):
    model = compile_model("zoo:resnet50", input_shape="data:32,3,224,224")
    path = tmp_path / "r50.om"
    n = save(model, path)
    meta, weights, flags = parts(path.read_bytes())
    assert weights is None and flags == 0 and n == path.stat().st_size < 200_000
    again = load(path)
    assert again.to_dict() == model.to_dict() and not again.has_weights
    assert again.execute_ns() == model.execute_ns()
    assert query_size(path) == (model.memory.workspace_bytes, model.memory.weight_bytes)
    assert meta["model"]["plans"]["static"][0]["gemm"] == [401408, 147, 64]


def test_bad_paths_are_145002(tmp_path):
    for path in (tmp_path / "missing.om", tmp_path):
        with pytest.raises(ModelFileError) as info:
            load(path)
        assert info.value.code == 145002 and "ACL_ERROR_GE_EXEC_MODEL_PATH_INVALID" in str(
            info.value)
    empty = tmp_path / "empty.om"
    empty.write_bytes(b"")
    with pytest.raises(ModelFileError) as info:
        load(empty)
    assert info.value.code == 100015


def test_hostile_sizes_fail_fast_without_allocating(tiny_om):
    _, data = tiny_om
    meta = json.dumps(parts(data)[0]).encode()
    start = time.perf_counter()
    assert code_of(build([(b"META", meta)], size=10**18)) == 100015
    assert code_of(build([(b"META", meta)], entries=[(HEAD + ENTRY.size, 10**18)])) == 100015
    assert code_of(build([(b"META", meta)], entries=[(2**64 - 8, 16)])) == 100015
    huge = parts(data)[0]
    huge["weights"][0].update(shape=[10**9, 10**9], nbytes=10**18)
    weights = parts(data)[1]
    assert code_of(build([(b"META", json.dumps(huge).encode()), (b"WGHT", weights)])) == 100015
    assert time.perf_counter() - start < 30   # guards against allocating 10**18 bytes


@pytest.mark.parametrize("case, code", [
    ("short", 100015), ("trailing", 100015), ("magic", 100013), ("version", 100013),
    ("header_crc", 100012), ("section_crc", 100012), ("not_json", 100013),
    ("not_a_model", 100013), ("deep_json", 100013), ("seeded_graph", 100013),
    ("unknown_tag", 100013), ("flags", 100013), ("weight_shape", 100012),
    ("weight_dtype", 100012), ("missing_weight", 100012), ("header_size", 100013),
])
def test_hostile_files_get_the_documented_codes(tiny_om, case, code):
    _, data = tiny_om
    meta, weights, _ = parts(data)
    raw = json.dumps(meta).encode()

    def with_meta(m):
        return build([(b"META", json.dumps(m).encode()), (b"WGHT", weights)], flags=3)

    bad = {
        "short": lambda: data[:20],
        "trailing": lambda: data + b"\0",
        "magic": lambda: build([(b"META", raw)], magic=b"NOTANOM!"),
        "version": lambda: build([(b"META", raw)], version=2),
        "header_crc": lambda: data[:21] + bytes([data[21] ^ 1]) + data[22:],  # file size
        "section_crc": lambda: data[:-1] + bytes([data[-1] ^ 0x40]),
        "not_json": lambda: build([(b"META", b"{oops")]),
        "not_a_model": lambda: build([(b"META", b'{"om_format": 1, "model": 3}')]),
        "deep_json": lambda: build([(b"META", b"[" * 100_000 + b"]" * 100_000)]),
        "seeded_graph": lambda: with_meta({**meta, "model": {**meta["model"], "graph": {
            **meta["model"]["graph"], "weights": {"init": "seeded"}}}}),
        "unknown_tag": lambda: build([(b"META", raw), (b"EVIL", b"x")]),
        "flags": lambda: build([(b"META", raw)], flags=1),
        "weight_shape": lambda: with_meta({**meta, "weights": [
            {**meta["weights"][0], "shape": [3]}] + meta["weights"][1:]}),
        "weight_dtype": lambda: with_meta({**meta, "weights": [
            {**meta["weights"][0], "dtype": "O"}] + meta["weights"][1:]}),
        "missing_weight": lambda: with_meta({**meta, "weights": meta["weights"][1:]}),
        "header_size": lambda: build([(b"META", raw)], header_size=99),
    }[case]()
    assert code_of(bad) == code


def test_loader_never_unpickles_or_evaluates(tiny_om):
    _, data = tiny_om
    meta, weights, _ = parts(data)
    meta["weights"][0]["dtype"] = "|O"          # an object array would need pickle
    assert code_of(build([(b"META", json.dumps(meta).encode()), (b"WGHT", weights)])) == 100012
    meta, _, _ = parts(data)
    meta["model"]["name"] = "__import__('os').system('true')"
    assert loads(build([(b"META", json.dumps(meta).encode()), (b"WGHT", weights)], flags=3)
                 ).name.startswith("__import__")     # a string stays a string


mutations = st.one_of(
    st.tuples(st.just("truncate"), st.integers(min_value=0, max_value=10**6)),
    st.tuples(st.just("flip"), st.lists(st.tuples(st.integers(min_value=0, max_value=10**6),
                                                  st.integers(min_value=1, max_value=255)),
                                        min_size=1, max_size=8)),
    st.tuples(st.just("insert"), st.tuples(st.integers(min_value=0, max_value=10**6),
                                           st.binary(min_size=1, max_size=16))),
)


@settings(max_examples=200, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(mutation=mutations)
def test_fuzzed_files_only_ever_raise_model_file_error(tiny_om, mutation):
    _, data = tiny_om
    kind, arg = mutation
    buf = bytearray(data)
    if kind == "truncate":
        buf = buf[:arg % len(data)]
    elif kind == "flip":
        for pos, xor in arg:
            buf[pos % len(buf)] ^= xor
    else:
        pos, extra = arg
        buf[pos % len(buf):pos % len(buf)] = extra
    if bytes(buf) == data:
        return
    try:
        loads(bytes(buf))
    except ModelFileError as exc:
        assert exc.code in (100012, 100013, 100015)
    else:
        pytest.fail(f"a damaged file loaded: {kind}")
