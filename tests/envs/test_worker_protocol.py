"""The worker protocol: framed messages with file descriptors, arrays through shared memory."""

from __future__ import annotations

import socket
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from arena.envs.workers.protocol import SHARED_MIN_BYTES, Channel, SharedArraysIn, SharedArraysOut, WorkerGone

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="workers are tested on Linux")

_DTYPES = st.sampled_from([np.uint8, np.float32, np.float64, np.int64, np.bool_])
_ARRAYS = hnp.arrays(_DTYPES, hnp.array_shapes(min_dims=1, max_dims=4, max_side=12))
_LEAVES = st.one_of(_ARRAYS, st.integers(-(2**40), 2**40), st.text(max_size=8), st.lists(st.text(max_size=4), max_size=3))
_TREES = st.recursive(_LEAVES, lambda inner: st.dictionaries(st.text(min_size=1, max_size=6), inner, max_size=4), max_leaves=8)


def _equal(a, b):
    if isinstance(a, dict):
        assert isinstance(b, dict) and a.keys() == b.keys()
        for key in a:
            _equal(a[key], b[key])
    elif isinstance(a, np.ndarray):
        assert isinstance(b, np.ndarray) and a.dtype == b.dtype and a.shape == b.shape
        np.testing.assert_array_equal(a, b)
    else:
        assert a == b


@pytest.fixture
def pair():
    left, right = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    yield Channel(left), Channel(right)
    left.close()
    right.close()


@settings(max_examples=60, deadline=None)
@given(tree=_TREES, frames=_ARRAYS)
def test_any_observation_tree_arrives_equal_with_frames_through_shared_memory(tree, frames):
    left, right = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    sender, receiver = Channel(left), Channel(right)
    out, into = SharedArraysOut(), SharedArraysIn()
    try:
        for step in range(2):  # the second message reuses the buffers the first one created
            obs = {"camera_obs": {"cam": frames + step if frames.dtype != np.bool_ else frames}, "rest": tree}
            marked, created, fds = out.export(obs)
            assert len(created) == len(fds) == (0 if step else len(created))
            sender.send({"obs": marked, "shared": created}, fds)
            message, got = receiver.receive()
            into.add(message["shared"], got)
            _equal(into.resolve(message["obs"]), obs)
    finally:
        left.close()
        right.close()


def test_large_arrays_travel_through_shared_memory_small_ones_in_the_message(pair):
    sender, receiver = pair
    out, into = SharedArraysOut(), SharedArraysIn()
    big = np.arange(SHARED_MIN_BYTES // 8, dtype=np.float64)
    small = np.arange(10, dtype=np.float64)
    marked, created, fds = out.export({"policy": {"big": big, "small": small}})
    assert [c["key"] for c in created] == ["policy/big"] and isinstance(marked["policy"]["small"], np.ndarray)
    sender.send({"obs": marked, "shared": created}, fds)
    message, got = receiver.receive()
    into.add(message["shared"], got)
    resolved = into.resolve(message["obs"])
    assert not resolved["policy"]["big"].flags.writeable  # a view of the worker's buffer
    np.testing.assert_array_equal(resolved["policy"]["big"], big)


def test_a_closed_peer_is_worker_gone(pair):
    sender, receiver = pair
    sender.close()
    with pytest.raises(WorkerGone):
        receiver.receive()


def test_a_message_cut_short_is_worker_gone(pair):
    sender, receiver = pair
    sender.sock.sendall(b"\x00\x00\x01\x00\x00partial")
    sender.close()
    with pytest.raises(WorkerGone, match="mid-message"):
        receiver.receive()
