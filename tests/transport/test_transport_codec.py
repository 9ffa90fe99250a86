"""The codec is byte-identical to openpi's msgpack_numpy and safer at the edges (V1-V5)."""

from __future__ import annotations

import math
import random
import time
from typing import Any

import msgpack
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from openpi_client import msgpack_numpy as openpi

from arena.errors import TransportError
from arena.transport import CodecError, Packer, packb, unpackb
from arena.transport.codec import object_budget

V1_HEX = (
    "84"
    "c40b5f5f6e6461727261795f5f" "c3"
    "c40464617461" "c4080000803f00000040"
    "c4056474797065" "a33c6634"
    "c40573686170659102"
)
V2_NPGENERIC_HEX = (
    "83"
    "c40d5f5f6e7067656e657269635f5f" "c3"
    "c40464617461" "cb3ff8000000000000"
    "c4056474797065" "a33c6634"
)


def test_v1_float32_array_is_the_measured_51_bytes() -> None:
    wire = packb(np.array([1.0, 2.0], np.float32))
    assert len(wire) == 51
    assert wire.hex() == V1_HEX


def test_v2_float64_scalar_is_a_plain_float_and_float32_an_npgeneric_map() -> None:
    assert packb(np.float64(1.5)).hex() == "cb3ff8000000000000"
    wire = packb(np.float32(1.5))
    assert len(wire) == 43
    assert wire.hex() == V2_NPGENERIC_HEX
    decoded = unpackb(wire)
    assert type(decoded) is np.float32 and decoded == 1.5
    assert type(unpackb(packb(np.float64(1.5)))) is float


@pytest.mark.parametrize(
    ("value", "dtype_name"),
    [
        (np.array([1 + 2j]), "complex128"),
        (np.array([1, "a"], dtype=object), "object"),
        (np.zeros(2, dtype=[("a", "<f4")]), "[('a', '<f4')]"),
        (np.complex64(1j), "complex64"),
    ],
)
def test_v3_refused_dtypes_raise_codec_error_naming_the_dtype(value: Any, dtype_name: str) -> None:
    with pytest.raises(CodecError) as info:
        packb({"x": value})
    assert str(info.value) == f"x: {dtype_name} is not supported"
    assert isinstance(info.value, ValueError)
    assert isinstance(info.value, TransportError)


def test_v3_bfloat16_numpy_arrays_are_refused() -> None:
    ml_dtypes = pytest.importorskip("ml_dtypes")
    with pytest.raises(CodecError, match="observation/state: bfloat16 is not supported"):
        packb({"observation/state": np.zeros(3, ml_dtypes.bfloat16)})


def test_v4_int_map_keys_fail_to_decode_with_codec_error() -> None:
    with pytest.raises(CodecError, match="int is not allowed for map key"):
        unpackb(packb({1: "a"}))


def test_v5_str_keyed_ndarray_marker_stays_a_plain_dict() -> None:
    fake = {"__ndarray__": True, "data": b"\x00\x00\x80\x3f", "dtype": "<f4", "shape": [1]}
    decoded = unpackb(msgpack.packb(fake, use_bin_type=True))
    assert decoded == fake


def test_refusal_names_the_key_path() -> None:
    with pytest.raises(CodecError) as info:
        packb({"observation/image": np.zeros((2, 2), np.complex128), "prompt": "x"})
    assert str(info.value) == "observation/image: complex128 is not supported"
    with pytest.raises(CodecError, match=r"^images/cam_high\[1\]: object is not supported"):
        packb({"images": {"cam_high": [np.zeros(1), np.array([None])]}})
    with pytest.raises(CodecError, match=r"^prompt: objects of type builtins.set"):
        packb({"prompt": {"a"}})


ARRAYS = [
    np.array([True, False]),
    *(np.arange(6, dtype=f"{k}{n}").reshape(2, 3) for k in "iu" for n in (1, 2, 4, 8)),
    np.linspace(0, 1, 5, dtype=np.float16),
    np.linspace(0, 1, 5, dtype=np.float32),
    np.linspace(0, 1, 5, dtype=np.float64),
    np.arange(4, dtype=">f4"),
    np.arange(4, dtype=">i2"),
    np.array(["ab", "c"]),
    np.array([b"ab", b"c"]),
    np.array(["2024-01-02"], dtype="M8[D]"),
    np.array([3, 4], dtype="m8[s]"),
    np.array(7.5, dtype=np.float32),  # 0-d
    np.zeros((0, 3), np.uint8),
    np.asfortranarray(np.arange(6, dtype=np.float32).reshape(2, 3)),
    np.arange(20, dtype=np.int32)[::3],
    np.zeros((224, 224, 3), np.uint8),
]
SCALARS = [
    np.float32(1.5), np.float16(0.25), np.int8(-3), np.int64(2**40), np.uint64(2**63),
    np.bool_(True), np.uint8(255), np.float64(2.5), np.str_("hi"), np.bytes_(b"x"),
]


@pytest.mark.parametrize(
    "value", ARRAYS + SCALARS, ids=lambda v: f"{type(v).__name__}-{v.dtype.str}"
)
def test_bytes_equal_openpi_packb(value: Any) -> None:
    ours = packb({"k": value, "nested": [value, {"deep": value}]})
    theirs = openpi.packb({"k": value, "nested": [value, {"deep": value}]})
    assert ours == theirs
    decoded = unpackb(ours)["k"]
    reference = openpi.unpackb(theirs)["k"]
    if isinstance(reference, np.ndarray):
        assert decoded.dtype == reference.dtype and decoded.shape == reference.shape
        np.testing.assert_array_equal(decoded, reference)
    else:
        assert type(decoded) is type(reference) and decoded == reference


def test_droid_request_is_301439_bytes_like_openpi() -> None:
    rng = np.random.default_rng(0)
    request = {
        "observation/exterior_image_1_left": rng.integers(0, 255, (224, 224, 3), np.uint8),
        "observation/wrist_image_left": rng.integers(0, 255, (224, 224, 3), np.uint8),
        "observation/joint_position": rng.random(7),
        "observation/gripper_position": rng.random(1),
        "prompt": "pick",  # the measured 301,439 bytes had a 4-character prompt
    }
    wire = packb(request)
    assert wire == openpi.packb(request)
    assert len(wire) == 301_439


def test_decoded_arrays_are_read_only_views_as_openpis_are() -> None:
    wire = packb({"a": np.arange(6, dtype=np.float32).reshape(2, 3), "e": np.zeros((0, 3)), "z": np.zeros((2, 0), np.int8)})
    decoded = unpackb(wire)
    ours, theirs = decoded["a"], openpi.unpackb(wire)["a"]
    assert not ours.flags.writeable and not theirs.flags.writeable and ours.flags.c_contiguous
    assert not ours.flags.owndata  # a view of the payload: nothing copied
    with pytest.raises(ValueError, match="read-only"):
        ours *= 2
    copy = np.array(ours)  # what a consumer that writes does
    copy *= 2
    assert copy[1, 2] == 10 and ours[1, 2] == 5
    assert not decoded["e"].flags.writeable and not decoded["z"].flags.writeable


def test_openpi_encoded_messages_decode() -> None:
    message = {"actions": np.ones((15, 8)), "server_timing": {"infer_ms": 1.0}, "t": (1, 2)}
    decoded = unpackb(openpi.packb(message))
    np.testing.assert_array_equal(decoded["actions"], np.ones((15, 8)))
    assert decoded["server_timing"] == {"infer_ms": 1.0}
    assert decoded["t"] == [1, 2]


class _FakeDtype:
    def __init__(self, name: str) -> None:
        self.name = name

    def __str__(self) -> str:
        return f"torch.{self.name}"


class _FakeTensor:
    """Quacks like a torch.Tensor without importing torch."""

    def __init__(self, array: np.ndarray, dtype: str) -> None:
        self.array, self.dtype = array, _FakeDtype(dtype)

    def detach(self) -> _FakeTensor:
        return self

    def cpu(self) -> _FakeTensor:
        return self

    def float(self) -> _FakeTensor:
        return _FakeTensor(self.array.astype(np.float32), "float32")

    def numpy(self) -> np.ndarray:
        if self.dtype.name == "bfloat16":
            raise TypeError("Got unsupported ScalarType BFloat16")
        return self.array


_FakeTensor.__module__ = "torch"


def test_torch_tensors_travel_as_numpy_and_bfloat16_as_float32() -> None:
    tensor = _FakeTensor(np.arange(3, dtype=np.float32), "float32")
    assert packb({"a": tensor}) == packb({"a": np.arange(3, dtype=np.float32)})
    decoded = unpackb(packb({"a": _FakeTensor(np.arange(3, dtype=np.float64), "bfloat16")}))["a"]
    assert decoded.dtype == np.float32


def test_a_bfloat16_tensor_vector_arrives_as_the_same_float32_values() -> None:
    ml_dtypes = pytest.importorskip("ml_dtypes")
    values = np.array([1.0, -2.5, 0.15625, 3e38], dtype=ml_dtypes.bfloat16)
    tensor = _FakeTensor(values, "bfloat16")  # .numpy() refuses bfloat16 like torch does
    wire = packb({"observation": {"state": tensor}})
    assert wire == openpi.packb({"observation": {"state": values.astype(np.float32)}})
    decoded = unpackb(wire)["observation"]["state"]
    assert decoded.dtype == np.float32
    np.testing.assert_array_equal(decoded, values.astype(np.float32))


class _FakeJaxArray:
    def __init__(self, array: np.ndarray) -> None:
        self.array = array

    def __array__(self, dtype: Any = None) -> np.ndarray:
        return self.array


_FakeJaxArray.__module__ = "jaxlib.xla_extension"


def test_jax_arrays_travel_as_numpy_and_bfloat16_as_float32() -> None:
    ml_dtypes = pytest.importorskip("ml_dtypes")
    decoded = unpackb(packb({"a": _FakeJaxArray(np.ones(2, ml_dtypes.bfloat16))}))["a"]
    assert decoded.dtype == np.float32 and decoded.tolist() == [1.0, 1.0]


def test_real_torch_tensors_if_torch_is_installed() -> None:
    torch = pytest.importorskip("torch")
    wire = packb({"a": torch.arange(3, dtype=torch.bfloat16), "b": torch.ones(2, 2)})
    decoded = unpackb(wire)
    assert decoded["a"].dtype == np.float32 and decoded["a"].tolist() == [0.0, 1.0, 2.0]
    assert decoded["b"].dtype == np.float32 and decoded["b"].shape == (2, 2)


@pytest.mark.parametrize(
    "value", ARRAYS + SCALARS, ids=lambda v: f"{type(v).__name__}-{v.dtype.str}"
)
def test_each_side_decodes_what_the_other_encodes(value: Any) -> None:
    message = {"observation": {"x": value}, "prompt": "p"}
    for decoded in (openpi.unpackb(packb(message)), unpackb(openpi.packb(message))):
        got = decoded["observation"]["x"]
        if isinstance(value, np.ndarray):
            assert got.dtype == value.dtype and got.shape == value.shape
            np.testing.assert_array_equal(got, value)
        else:
            assert got == value


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"\xc1",
        b"\x92\x01",
        b"\x81\xa1a\x01\x02",  # extra data
        packb(np.zeros(3))[:-4],
        msgpack.packb({b"__ndarray__": True, b"data": b"\x00" * 8, b"dtype": "O", b"shape": [1]}),
        msgpack.packb({b"__ndarray__": True, b"data": b"\x00" * 7, b"dtype": "<f8", b"shape": [1]}),
        msgpack.packb({b"__ndarray__": True, b"data": b"", b"dtype": "nonsense", b"shape": []}),
        msgpack.packb({b"__ndarray__": True, b"dtype": "<f4", b"shape": [1]}),
        msgpack.packb({b"__ndarray__": True, b"data": b"1234", b"dtype": "<f4", b"shape": [-1]}),
        msgpack.packb({b"__npgeneric__": True, b"data": "x", b"dtype": "<f4"}),
    ],
)
def test_malformed_input_raises_codec_error_only(data: bytes) -> None:
    with pytest.raises(CodecError):
        unpackb(data)


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=64))
def test_random_bytes_never_raise_anything_but_codec_error(data: bytes) -> None:
    try:
        unpackb(data)
    except CodecError:
        pass


_dtypes = st.one_of(
    hnp.boolean_dtypes(),
    hnp.integer_dtypes(),
    hnp.unsigned_integer_dtypes(),
    hnp.floating_dtypes(),
)
_arrays = hnp.arrays(_dtypes, hnp.array_shapes(min_dims=0, max_dims=3, max_side=4))
_scalars = _dtypes.flatmap(lambda dt: hnp.from_dtype(dt).map(dt.type))
_leaves = st.one_of(
    _arrays, _scalars, st.text(max_size=8), st.integers(-(2**63), 2**64 - 1),
    st.floats(allow_nan=False), st.booleans(), st.none(), st.binary(max_size=8),
)
_messages = st.recursive(
    _leaves,
    lambda children: st.one_of(
        st.lists(children, max_size=3), st.dictionaries(st.text(max_size=6), children, max_size=3)
    ),
    max_leaves=12,
)


def _assert_same(decoded: Any, original: Any) -> None:
    if isinstance(original, np.ndarray):
        assert isinstance(decoded, np.ndarray)
        assert decoded.dtype == original.dtype and decoded.shape == original.shape
        np.testing.assert_array_equal(decoded, original)
        assert not decoded.flags.writeable
    elif isinstance(original, dict):
        assert decoded.keys() == original.keys()
        for key in original:
            _assert_same(decoded[key], original[key])
    elif isinstance(original, list):
        assert len(decoded) == len(original)
        for a, b in zip(decoded, original):
            _assert_same(a, b)
    elif isinstance(original, np.generic) and not isinstance(original, float):
        assert type(decoded) is type(original)
        assert decoded == original or (math.isnan(decoded) and math.isnan(original))
    else:
        assert decoded == original or (decoded != decoded and original != original)


@settings(max_examples=150, deadline=None)
@given(_messages)
def test_round_trip_of_nested_messages_matches_openpi_bytes(message: Any) -> None:
    wire = packb(message)
    assert wire == openpi.packb(message)
    _assert_same(unpackb(wire), message)


def test_packer_is_reusable_after_a_refusal() -> None:
    packer = Packer()
    with pytest.raises(CodecError):
        packer.pack({"a": np.array([1j])})
    assert packer.pack({"a": 1}) == packb({"a": 1})


# ---- fuzzing: >= 10,000 random or mutated messages ------------------------------------------

_SEEDS = [
    packb({"a": np.arange(6, dtype=np.float32).reshape(2, 3), "p": "x", "s": np.int8(3),
           "n": [1, 2.5, None, b"z", True], "d": {"q": np.zeros((2, 2), "<u2")}}),
    packb(np.float32(1.5)),
    packb({"actions": np.ones((15, 8)), "server_timing": {"infer_ms": 1.0}}),
    packb([np.array(["ab"]), np.array([b"x"]), np.array(["2024-01-02"], "M8[D]")]),
]
_DTYPES = ["<f4", ">f8", "|u1", "<U2", "|S3", "<M8[D]", "<m8[s]", "|b1", "<c16", "|O", "|V8",
           "|V0", "<U0", "f4,f4", "[('a', '<f4')]", "nonsense", "", "<f99", "V999999999999", 5, None]
_SHAPES = [[], [0], [1], [2, 3], [-1], [2**62, 2**62], [2**64 - 1], [1.5], ["a"], None, 7, [0, 2**40]]


def _mutate(rng: random.Random, data: bytes) -> bytes:
    b = bytearray(data)
    for _ in range(rng.randint(1, 4)):
        op = rng.randrange(5)
        if op == 0 and b:
            b[rng.randrange(len(b))] = rng.randrange(256)
        elif op == 1:
            del b[rng.randrange(len(b) + 1):]
        elif op == 2:
            b.insert(rng.randrange(len(b) + 1), rng.randrange(256))
        elif op == 3 and b:
            del b[rng.randrange(len(b))]
        else:
            b = bytearray(rng.randbytes(rng.randrange(48)))
    return bytes(b)


def _random_marker(rng: random.Random) -> bytes:
    marker = b"__ndarray__" if rng.random() < 0.7 else b"__npgeneric__"
    obj: dict[Any, Any] = {marker: rng.choice([True, False, 1, "x"])}
    if rng.random() < 0.9:
        obj[b"dtype"] = rng.choice(_DTYPES)
    if rng.random() < 0.9:
        obj[b"shape"] = rng.choice(_SHAPES)
    if rng.random() < 0.9:
        obj[b"data"] = rng.choice(
            [rng.randbytes(rng.randrange(0, 33)), rng.randrange(-(2**63), 2**64), "text", 2.5, None, [1]]
        )
    return msgpack.packb({"k": [obj]}, use_bin_type=True)


def test_fuzz_10000_random_or_mutated_messages_decode_or_raise_codec_error() -> None:
    rng = random.Random(20240611)
    counts = {"decoded": 0, "refused": 0}
    for i in range(10_500):
        if i % 3 == 0:
            data = _random_marker(rng)
        elif i % 3 == 1:
            data = _mutate(rng, rng.choice(_SEEDS))
        else:
            data = _mutate(rng, _random_marker(rng))
        try:
            unpackb(data)
        except CodecError:
            counts["refused"] += 1
        else:
            counts["decoded"] += 1
    # Both outcomes must be well represented, or the fuzzer is not exploring.
    assert counts["decoded"] > 500 and counts["refused"] > 500, counts


# ---- decoding amplification: what a message may build is bounded by its size ---------------


def _empty_arrays(count: int) -> bytes:
    """One msgpack array of ``count`` empty arrays (``0xdd``, length, ``0x90`` x count)."""
    return b"\xdd" + count.to_bytes(4, "big") + b"\x90" * count


def test_a_64_mib_frame_of_67_million_empty_arrays_is_refused_at_once() -> None:
    frame = _empty_arrays(64 * 2**20 - 5)
    started = time.monotonic()
    with pytest.raises(CodecError, match=r"67,108,864 bytes that holds more than 1,048,576 msgpack objects"):
        unpackb(frame)
    assert time.monotonic() - started < 2.0  # openpi's decoder: ~4.8 GB of lists and ~30 s


@pytest.mark.parametrize(
    "frame",
    [
        b"\xdc\x00\x40" + _empty_arrays(2**20 - 16) * 64,  # nested under a small outer array
        b"\xdd" + (300_000).to_bytes(4, "big") + b"\x9f" + b"\x90" * 15 * 1 + b"\x9f" + b"\x90" * 15,
        b"\xdf" + (2**20).to_bytes(4, "big") + b"\xa1k\x80" * 2**20,  # a map of empty maps
    ],
    ids=["nested", "truncated-lists", "map-of-maps"],
)
def test_nested_or_truncated_amplification_is_a_codec_error(frame: bytes) -> None:
    with pytest.raises(CodecError):
        unpackb(frame)


def test_a_message_of_scalars_in_plain_lists_still_decodes() -> None:
    message = {"state": [float(i) for i in range(100_000)], "ids": list(range(3_000)), "prompt": "x"}
    assert unpackb(packb(message)) == message


@pytest.mark.parametrize(
    "message",
    [
        {f"observation/{k}": np.zeros((224, 224, 3), np.uint8) for k in ("a", "b", "c")},
        {f"observation/{k}": np.zeros((720, 1280, 3), np.uint8) for k in ("a", "b", "c")},
        {"a": np.ones(32 * 2**20, np.uint8), "b": np.ones(32 * 2**20 - 512, np.uint8), "prompt": "go"},
    ],
    ids=["droid-three-cameras", "720p-three-cameras", "64-mib-of-arrays"],
)
def test_large_legitimate_requests_decode(message: dict[str, Any]) -> None:
    back = unpackb(packb(message))
    assert back.keys() == message.keys()
    for key, value in message.items():
        if isinstance(value, np.ndarray):
            assert back[key].shape == value.shape and back[key].dtype == value.dtype


@settings(max_examples=50, deadline=None)
@given(st.integers(min_value=0, max_value=2**16), st.integers(min_value=1, max_value=2**22))
def test_the_object_budget_grows_with_the_frame_and_is_capped(nbytes: int, cap: int) -> None:
    budget = object_budget(nbytes, cap)
    assert budget <= cap and budget <= 4096 + nbytes // 8
    assert budget == cap or budget == 4096 + nbytes // 8
