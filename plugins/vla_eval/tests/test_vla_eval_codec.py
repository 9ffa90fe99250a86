"""arena's vla-eval codec against vla-eval 0.8.0's own (``vla_eval.protocol``), both ways, for
any bool/int/uint/float array and any HWC uint8 image (hypothesis)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from arena.transport.codec import packb, unpackb
from arena.transport.errors import CodecError

from arena_vla_eval.codec import encode_observation, envelope, parse_envelope

pytest.importorskip("vla_eval")

DTYPES = st.sampled_from(["bool", "int8", "int32", "int64", "uint8", "uint16", "float16", "float32", "float64", ">f8", "<i2"])
ARRAYS = DTYPES.flatmap(lambda d: hnp.arrays(np.dtype(d), hnp.array_shapes(min_dims=0, max_dims=3, max_side=5)))
IMAGES = st.tuples(st.integers(1, 9), st.integers(1, 9), st.sampled_from([1, 3, 4])).flatmap(
    lambda s: hnp.arrays(np.uint8, s)
)


@given(array=ARRAYS, image=IMAGES, fmt=st.sampled_from(["png", "raw"]))
@settings(max_examples=60, deadline=None)
def test_what_arena_sends_is_what_vla_eval_decodes(array, image, fmt):
    from vla_eval.protocol.messages import unpack_message

    obs = {"images": {"cam": image}, "states": array, "task_description": "t"}
    msg = unpack_message(packb(envelope("observation", encode_observation(obs, fmt), 3)))
    states = msg.payload["states"]
    assert states.dtype == array.dtype and states.shape == array.shape
    assert np.array_equal(states, array, equal_nan=array.dtype.kind == "f")
    seen = msg.payload["images"]["cam"]
    # vla-eval's PNG decoder drops a single channel's axis; the pixels are the same
    assert np.array_equal(seen.reshape(image.shape), image)


@given(array=ARRAYS)
@settings(max_examples=60, deadline=None)
def test_what_vla_eval_sends_is_what_arena_decodes(array):
    from vla_eval.protocol.messages import Message, MessageType, pack_message

    # vla-eval's encoder sends any HWC uint8 array as a PNG image (and fails on one channel)
    assume(not (array.dtype == np.uint8 and array.ndim == 3 and array.shape[2] in (1, 3, 4)))
    raw = pack_message(Message(MessageType.ACTION, {"actions": array}, seq=9))
    message = parse_envelope(unpackb(raw))
    assert message.type == "action" and message.seq == 9
    got = message.payload["actions"]
    assert got.dtype == array.dtype and got.shape == array.shape
    assert np.array_equal(got, array, equal_nan=array.dtype.kind == "f")


def test_refused_dtypes_fail_before_sending_and_malformed_arrays_on_receipt():
    with pytest.raises(CodecError, match="states: dtype complex128"):
        encode_observation({"states": np.zeros(2, complex)})
    bad = {"type": "action", "payload": {"actions": {"__ndarray__": True, "data": b"\0" * 3, "dtype": "<f4", "shape": [1]}},
           "seq": 1, "timestamp": 0.0}
    with pytest.raises(CodecError, match="holds 3 bytes"):
        parse_envelope(bad)
    bad["payload"]["actions"] = {"__ndarray__": True, "data": b"", "dtype": "|O", "shape": [0]}
    with pytest.raises(CodecError, match="refused"):
        parse_envelope(bad)
