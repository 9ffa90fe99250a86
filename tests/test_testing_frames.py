"""arena.testing.frames: codec frames on streams (trace files, the raw-simulator servers' pipes)."""

from __future__ import annotations

import io
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from arena.testing.frames import TruncatedFrame, read_frame, read_frame_files, read_frames, write_frame
from arena.transport import CodecError

_DTYPES = st.sampled_from([np.float64, np.float32, np.int64, np.int32, np.uint8, np.bool_])
_ARRAYS = _DTYPES.flatmap(lambda d: hnp.arrays(d, hnp.array_shapes(min_dims=0, max_dims=3, max_side=5)))
_SCALARS = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**63), 2**63 - 1), st.floats(allow_nan=False),
    st.text(max_size=20), st.binary(max_size=20),
    st.builds(np.float32, st.floats(width=32, allow_nan=False)), st.builds(np.bool_, st.booleans()),
    st.builds(np.int64, st.integers(-(2**63), 2**63 - 1)),
)
_VALUES = st.recursive(
    st.one_of(_SCALARS, _ARRAYS),
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.tuples(inner, inner), st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=20,
)


def _same(got: Any, want: Any) -> bool:
    """Equal after the codec's documented changes: tuples become lists, dtypes and shapes kept."""
    if isinstance(want, np.ndarray):
        return (isinstance(got, np.ndarray) and got.dtype == want.dtype and got.shape == want.shape
                and np.array_equal(got, want, equal_nan=want.dtype.kind == "f"))
    if isinstance(want, (list, tuple)):
        return type(got) is list and len(got) == len(want) and all(map(_same, got, want))
    if isinstance(want, dict):
        return type(got) is dict and got.keys() == want.keys() and all(_same(got[k], want[k]) for k in want)
    return type(got) is type(want) and got == want


@settings(max_examples=150, deadline=None)
@given(st.lists(_VALUES, min_size=1, max_size=4))
def test_frames_round_trip_nested_dicts_lists_arrays_and_scalars(values: list[Any]) -> None:
    stream = io.BytesIO()
    for value in values:
        write_frame(stream, value)
    stream.seek(0)
    got = read_frames(stream)
    assert len(got) == len(values)
    assert all(map(_same, got, values)), (got, values)


@settings(max_examples=60, deadline=None)
@given(_VALUES, _VALUES, st.data())
def test_a_cut_anywhere_inside_a_frame_is_named_truncated_and_a_cut_between_frames_is_a_clean_end(
    first: Any, second: Any, data: st.DataObject
) -> None:
    stream = io.BytesIO()
    write_frame(stream, first)
    boundary = stream.tell()
    write_frame(stream, second)
    whole = stream.getvalue()
    cut = data.draw(st.integers(boundary + 1, len(whole) - 1))
    short = io.BytesIO(whole[:cut])
    assert _same(read_frame(short), first)
    with pytest.raises(TruncatedFrame, match="truncated frame: the stream ended after") as info:
        read_frame(short)
    assert not isinstance(info.value, EOFError)  # a loop that stops at EOFError does not swallow it
    clean = io.BytesIO(whole[:boundary])
    assert [_same(v, first) for v in read_frames(clean)] == [True]


def test_an_empty_stream_is_a_clean_end() -> None:
    with pytest.raises(EOFError):
        read_frame(io.BytesIO(b""))
    assert read_frames(io.BytesIO(b"")) == []


def test_a_body_that_is_not_a_codec_message_is_a_codec_error() -> None:
    with pytest.raises(CodecError, match="malformed"):
        read_frame(io.BytesIO(b"\x00\x00\x00\x01\xc1"))  # 0xc1 is never used in msgpack


def test_an_unencodable_value_writes_nothing() -> None:
    stream = io.BytesIO()
    with pytest.raises(CodecError, match=r"^state: objects of type builtins.set are not supported"):
        write_frame(stream, {"state": {1, 2}})
    assert stream.getvalue() == b""


def test_decoded_arrays_are_read_only_unless_writable_is_asked() -> None:
    stream = io.BytesIO()
    write_frame(stream, ["ok", {"quat": np.array([0.0, 0.0, 0.0, 1.5])}])
    write_frame(stream, ["ok", {"quat": np.array([0.0, 0.0, 0.0, 1.5])}])
    stream.seek(0)
    with pytest.raises(ValueError, match="read-only"):
        read_frame(stream)[1]["quat"][3] = 1.0
    status, result = read_frame(stream, writable=True)
    result["quat"][3] = 1.0  # what openpi's LIBERO example's _quat2axisangle does to an observation
    assert status == "ok" and result["quat"][3] == 1.0


class _Trickle(io.RawIOBase):
    """A pipe that hands out one byte per read, as a raw pipe may."""

    def __init__(self, data: bytes) -> None:
        self._data = data

    def readable(self) -> bool:
        return True

    def read(self, n: int = -1) -> bytes:
        out, self._data = self._data[:1], self._data[1:]
        return out


def test_short_reads_are_joined_into_whole_frames() -> None:
    stream = io.BytesIO()
    write_frame(stream, {"a": np.arange(300, dtype=np.float64)})
    got = read_frames(_Trickle(stream.getvalue()))
    assert len(got) == 1 and np.array_equal(got[0]["a"], np.arange(300.0))


def test_read_frame_files_reads_matching_files_sorted_by_name_and_names_a_cut_file(tmp_path: Path) -> None:
    for name, entries in (("9-1.frames", [{"op": "reset", "seed": 3}]), ("10-0.frames", [{"op": "step"}, {"x": 1}])):
        with (tmp_path / name).open("wb") as f:
            for entry in entries:
                write_frame(f, entry)
    (tmp_path / "other.bin").write_bytes(b"not a frame")
    assert read_frame_files(tmp_path) == [[{"op": "step"}, {"x": 1}], [{"op": "reset", "seed": 3}]]
    cut = tmp_path / "10-0.frames"
    cut.write_bytes(cut.read_bytes()[:-1])
    with pytest.raises(TruncatedFrame, match=r"10-0\.frames: truncated frame"):
        read_frame_files(tmp_path)


SERVER = textwrap.dedent(
    """
    import numpy as np
    from arena.testing.frames import serve_calls

    def handle(method, args):
        print("a simulator that prints")  # must not reach the frames on stdout
        if method == "step":
            return [{"image": np.zeros((2, 2, 3), np.uint8)}, np.float64(0.5), np.bool_(True), {}]
        if method == "boom":
            raise RuntimeError("no such task")
        if method == "unencodable":
            return {1, 2}
        return args

    serve_calls(handle)
    """
)


def test_serve_calls_answers_frames_over_a_pipe_and_reports_errors_without_dying() -> None:
    proc = subprocess.Popen([sys.executable, "-c", SERVER], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    try:
        def call(method: str, *args: Any) -> Any:
            write_frame(proc.stdin, [method, list(args)])
            return read_frame(proc.stdout)

        status, (obs, reward, done, info) = call("step", [0.1] * 7)
        assert status == "ok" and obs["image"].shape == (2, 2, 3) and reward == 0.5 and done == np.True_ and info == {}
        assert call("boom") == ["error", "RuntimeError('no such task')"]
        status, message = call("unencodable")
        assert status == "error" and "builtins.set" in message
        assert call("echo", (1, "a"), None) == ["ok", [[1, "a"], None]]
        assert call("close") == ["ok", []]
        assert proc.wait(timeout=30) == 0
        with pytest.raises(EOFError):
            read_frame(proc.stdout)
        assert b"a simulator that prints" in proc.stderr.read()
    finally:
        proc.kill()
        proc.wait()


def test_trace_files_append_one_file_per_env_that_read_frame_files_reads_back(tmp_path):
    import numpy as np

    from arena.testing.frames import TraceFiles, read_frame_files

    traces = TraceFiles(tmp_path / "trace")
    traces.write(1, {"op": "step", "action": np.arange(3.0)})
    traces.write(0, {"op": "reset", "seed": 7})
    traces.write(1, {"op": "step", "action": np.ones(3)})
    traces.close()
    traces.close()  # idempotent
    files = read_frame_files(tmp_path / "trace")
    assert [len(f) for f in files] == [1, 2]  # env 0's file sorts first
    assert files[0][0] == {"op": "reset", "seed": 7}
    assert files[1][1]["action"].tolist() == [1.0, 1.0, 1.0]
