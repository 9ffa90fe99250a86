"""vla-eval's message envelope and its array and image encodings.

Wire form (vla-eval 0.8.0 ``vla_eval/protocol/``; ``reference/live-and-protocols.md`` C1-C2):

* every message is one binary msgpack frame, a map ``{"type", "payload", "seq",
  "timestamp"}``; ``type`` is one of :data:`MESSAGE_TYPES`; protocol version 1;
* an array is the **str-keyed** map ``{"__ndarray__": True, "data": bytes, "dtype":
  dtype.str, "shape": [...]}`` (openpi's codec uses bin keys: the two do not mix); decoding
  accepts dtype kinds b, i, u and f only;
* an HWC ``uint8`` image with 1, 3 or 4 channels may instead travel as ``{"__image__": True,
  "format": "png" | "jpeg" | "raw", "data": bytes, "shape": [...]}`` (``raw`` adds
  ``dtype``). vla-eval's own encoder turns *every* such array into an image; this one does so
  only for the values of the observation's ``images`` map, so a state vector that happens to
  be ``(N, 3)`` uint8 is never PNG-compressed.

Image format: arena sends ``png`` by default. It is lossless (the model sees the simulator's
pixels exactly, as an in-process evaluation would), it is what vla-eval's own benchmark clients
send unless told otherwise (the code's default; the RFC's ``raw`` is not), and it is about half
the bytes of ``raw``. ``jpeg`` (quality 95, vla-eval's setting) changes pixels and is only for
links where bandwidth matters more than fidelity; ``raw`` costs no encoding time.

Everything here is pure (no sockets); :mod:`arena_vla_eval.client` does the talking.
"""

from __future__ import annotations

import io
import time
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from arena.transport.errors import CodecError, ProtocolError

__all__ = [
    "IMAGE_FORMATS",
    "MESSAGE_TYPES",
    "PROTOCOL_VERSION",
    "ImageFormat",
    "Message",
    "decode_arrays",
    "decode_image",
    "encode_array",
    "encode_image",
    "encode_observation",
    "envelope",
    "parse_envelope",
]

PROTOCOL_VERSION = 1
MESSAGE_TYPES = frozenset({"hello", "observation", "action", "episode_start", "episode_end", "error"})
ImageFormat = Literal["png", "jpeg", "raw"]
IMAGE_FORMATS: tuple[str, ...] = ("png", "jpeg", "raw")
_ALLOWED_KINDS = frozenset("biuf")
_NDARRAY = "__ndarray__"
_IMAGE = "__image__"
_JPEG_QUALITY = 95  # vla-eval image_codec.encode_image


@dataclass(frozen=True)
class Message:
    """One decoded vla-eval message."""

    type: str
    payload: Any
    seq: int
    timestamp: float = field(default=0.0)


def envelope(kind: str, payload: dict[str, Any], seq: int) -> dict[str, Any]:
    """The map one message travels as (``timestamp``: this machine's wall clock, seconds)."""
    if kind not in MESSAGE_TYPES:
        raise ValueError(f"unknown vla-eval message type {kind!r}")
    return {"type": kind, "payload": payload, "seq": int(seq), "timestamp": time.time()}


def encode_array(array: np.ndarray, path: str = "") -> dict[str, Any]:
    """``array`` as vla-eval's ``__ndarray__`` map (C-order bytes).

    Raises:
        CodecError: a dtype vla-eval's decoder refuses (anything but bool, int, uint, float),
            naming ``path``.
    """
    if array.dtype.kind not in _ALLOWED_KINDS:
        raise CodecError(f"{path or 'array'}: dtype {array.dtype} cannot travel to a vla-eval server (bool/int/uint/float only)")
    # tobytes() is C order whatever the layout (np.ascontiguousarray would make a 0-d array 1-d)
    return {_NDARRAY: True, "data": array.tobytes(order="C"), "dtype": array.dtype.str, "shape": list(array.shape)}


def encode_image(image: np.ndarray, fmt: ImageFormat = "png", path: str = "") -> dict[str, Any]:
    """``image`` (``uint8 (H, W, C)``, C in 1/3/4) as vla-eval's ``__image__`` map.

    Raises:
        CodecError: not an HWC uint8 image, JPEG of a non-RGB image, or an unknown format.
    """
    if image.dtype != np.uint8 or image.ndim != 3 or image.shape[2] not in (1, 3, 4):
        raise CodecError(f"{path or 'image'}: expected uint8 (H, W, 1|3|4), got {image.dtype} {image.shape}")
    image = np.ascontiguousarray(image)
    if fmt == "raw":
        return {_IMAGE: True, "format": "raw", "data": image.tobytes(), "dtype": image.dtype.str, "shape": list(image.shape)}
    if fmt not in ("png", "jpeg"):
        raise CodecError(f"{path or 'image'}: unknown image format {fmt!r}; expected one of {IMAGE_FORMATS}")
    from PIL import Image

    pil = Image.fromarray(image[:, :, 0] if image.shape[2] == 1 else image)
    buf = io.BytesIO()
    if fmt == "jpeg":
        if pil.mode != "RGB":
            raise CodecError(f"{path or 'image'}: JPEG needs an RGB image (got {image.shape[2]} channels); use png or raw")
        pil.save(buf, format="JPEG", quality=_JPEG_QUALITY)
    else:
        pil.save(buf, format="PNG")
    return {_IMAGE: True, "format": fmt, "data": buf.getvalue(), "shape": list(image.shape)}


def encode_observation(observation: dict[str, Any], image_format: ImageFormat = "png") -> dict[str, Any]:
    """An OBSERVATION payload ready for msgpack: ``images`` values as ``__image__`` maps in
    ``image_format``, every other ndarray (at any depth) as ``__ndarray__``, numpy scalars as
    Python numbers. The caller's dict is not modified.

    Raises:
        CodecError: a value that cannot travel (names its key path).
    """
    out: dict[str, Any] = {}
    for key, value in observation.items():
        if key == "images" and isinstance(value, dict):
            out[key] = {cam: encode_image(np.asarray(img), image_format, f"images/{cam}") for cam, img in value.items()}
        else:
            out[key] = _encode_value(value, str(key))
    return out


def _encode_value(value: Any, path: str) -> Any:
    if isinstance(value, np.ndarray):
        return encode_array(value, path)
    if isinstance(value, np.bool_):
        return bool(value)
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, np.floating):
        return float(value)
    if isinstance(value, dict):
        return {k: _encode_value(v, f"{path}/{k}") for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_encode_value(v, f"{path}/{i}") for i, v in enumerate(value)]
    if value is None or isinstance(value, (str, bytes, bool, int, float)):
        return value
    raise CodecError(f"{path}: {type(value).__name__} cannot travel to a vla-eval server")


def decode_image(obj: dict[str, Any]) -> np.ndarray:
    """An ``__image__`` map back to ``uint8 (H, W, C)``.

    Raises:
        CodecError: malformed map, undecodable bytes, or a shape other than declared.
    """
    try:
        fmt, data, shape = obj["format"], obj["data"], [int(s) for s in obj["shape"]]
    except (KeyError, TypeError, ValueError) as exc:
        raise CodecError(f"malformed __image__ map: {exc!r}") from None
    if fmt == "raw":
        return _decode_ndarray({"dtype": obj.get("dtype", "|u1"), "data": data, "shape": shape})
    if fmt not in ("png", "jpeg"):
        raise CodecError(f"__image__ has unknown format {fmt!r}")
    from PIL import Image

    try:
        image = np.array(Image.open(io.BytesIO(data)))
    except Exception as exc:  # PIL raises many types for bad bytes
        raise CodecError(f"undecodable {fmt} image: {exc}") from None
    if image.ndim == 2:
        image = image[:, :, None]
    if list(image.shape) != shape:
        raise CodecError(f"{fmt} image decodes to shape {list(image.shape)}, the map says {shape}")
    return image


def _decode_ndarray(obj: dict[str, Any]) -> np.ndarray:
    try:
        dtype = np.dtype(obj["dtype"])
        shape = [int(s) for s in obj["shape"]]
        data = obj["data"]
    except (KeyError, TypeError, ValueError) as exc:
        raise CodecError(f"malformed __ndarray__ map: {exc!r}") from None
    if dtype.kind not in _ALLOWED_KINDS:
        raise CodecError(f"__ndarray__ dtype {dtype} refused (bool/int/uint/float only)")
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise CodecError(f"__ndarray__ data is {type(data).__name__}, not bytes")
    count = int(np.prod(shape)) if shape else 1
    if any(s < 0 for s in shape) or count * dtype.itemsize != len(data):
        raise CodecError(f"__ndarray__ holds {len(data)} bytes; shape {shape} of {dtype} needs {count * dtype.itemsize}")
    return np.frombuffer(data, dtype=dtype).reshape(shape).copy()


def decode_arrays(value: Any) -> Any:
    """``value`` (as msgpack decoded it) with every ``__ndarray__``/``__image__`` map turned
    back into an ndarray (writable copies).

    Raises:
        CodecError: a malformed or refused array map.
    """
    if isinstance(value, dict):
        if value.get(_IMAGE) is True:
            return decode_image(value)
        if value.get(_NDARRAY) is True:
            return _decode_ndarray(value)
        return {k: decode_arrays(v) for k, v in value.items()}
    if isinstance(value, list):
        return [decode_arrays(v) for v in value]
    return value


def parse_envelope(raw: Any) -> Message:
    """A decoded msgpack value as a :class:`Message` (arrays in its payload decoded).

    Raises:
        ProtocolError: not a map with ``type``, ``payload``, ``seq`` and ``timestamp``, or an
            unknown ``type``.
        CodecError: a malformed array in the payload.
    """
    if not isinstance(raw, dict):
        raise ProtocolError(f"vla-eval message is a {type(raw).__name__}, not a map")
    missing = [k for k in ("type", "payload", "seq", "timestamp") if k not in raw]
    if missing:
        raise ProtocolError(f"vla-eval message lacks {missing} (keys: {sorted(map(str, raw))})")
    kind = raw["type"]
    if kind not in MESSAGE_TYPES:
        raise ProtocolError(f"unknown vla-eval message type {kind!r}")
    if not isinstance(raw["seq"], int):
        raise ProtocolError(f"vla-eval message seq is {raw['seq']!r}, not an int")
    return Message(type=kind, payload=decode_arrays(raw["payload"]), seq=raw["seq"], timestamp=float(raw["timestamp"] or 0.0))
