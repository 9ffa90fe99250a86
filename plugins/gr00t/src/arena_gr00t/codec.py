"""GR00T's msgpack codec: arrays as ``.npy`` bytes, ModalityConfig as JSON.

Wire form (``reference/protocols.md`` section 5.2, N1.5 and N1.6 alike):

* ``np.ndarray`` -> map with **str** keys ``{"__ndarray_class__": True, "as_npy": <bytes of
  np.save(arr, allow_pickle=False)>}``; decoded with ``np.load(..., allow_pickle=False)``, so
  nothing is ever unpickled. Object arrays are refused before sending.
* ``ModalityConfig`` -> ``{"__ModalityConfig_class__": True, "as_json": ...}`` where
  ``as_json`` is a JSON **string** (N1.5) or a **map** (N1.6); both decode to
  :class:`ModalityConfig`.
* numpy scalars are not supported by GR00T's server (``TypeError: can not serialize
  'numpy.float32'``), so :func:`packb` refuses them instead of sending something the real
  server never sees.
"""

from __future__ import annotations

import io
import json
from dataclasses import dataclass, field
from typing import Any

import msgpack
import numpy as np

from arena.transport.codec import unpackb_bounded
from arena.transport.errors import CodecError

__all__ = ["ModalityConfig", "packb", "unpackb"]

_NDARRAY = "__ndarray_class__"
_MODALITY = "__ModalityConfig_class__"


@dataclass(frozen=True)
class ModalityConfig:
    """One modality of a GR00T model: which keys it reads or writes and at which time offsets.

    ``delta_indices`` are step offsets (``[0]`` = the current frame; an action horizon of 32 is
    ``0..31``); ``modality_keys`` are the key names (``exterior_image_1_left``,
    ``joint_position``, ``annotation.language.language_instruction``, ...).
    """

    delta_indices: tuple[int, ...]
    modality_keys: tuple[str, ...]
    extra: dict[str, Any] = field(default_factory=dict, compare=False)

    @property
    def horizon(self) -> int:
        """Number of time steps (``len(delta_indices)``)."""
        return len(self.delta_indices)

    def to_json(self) -> dict[str, Any]:
        return {"delta_indices": list(self.delta_indices), "modality_keys": list(self.modality_keys), **self.extra}

    @classmethod
    def from_json(cls, data: Any) -> ModalityConfig:
        """Build from GR00T's ``as_json`` (a JSON string or a map).

        Raises:
            CodecError: not a map with ``delta_indices`` and ``modality_keys``.
        """
        if isinstance(data, (str, bytes)):
            try:
                data = json.loads(data)
            except ValueError as exc:
                raise CodecError(f"ModalityConfig as_json is not JSON: {exc}") from exc
        if not isinstance(data, dict) or "delta_indices" not in data or "modality_keys" not in data:
            raise CodecError(f"ModalityConfig needs delta_indices and modality_keys; got {data!r:.200}")
        extra = {k: v for k, v in data.items() if k not in ("delta_indices", "modality_keys")}
        return cls(
            delta_indices=tuple(int(i) for i in data["delta_indices"]),
            modality_keys=tuple(str(k) for k in data["modality_keys"]),
            extra=extra,
        )


def _default(obj: Any) -> Any:
    if isinstance(obj, np.ndarray):
        if obj.dtype.kind == "O":
            raise CodecError("object arrays cannot travel to a GR00T server (np.save with allow_pickle=False)")
        buffer = io.BytesIO()
        np.save(buffer, obj, allow_pickle=False)
        return {_NDARRAY: True, "as_npy": buffer.getvalue()}
    if isinstance(obj, ModalityConfig):
        return {_MODALITY: True, "as_json": obj.to_json()}
    if isinstance(obj, np.generic):
        raise CodecError(
            f"numpy scalar {type(obj).__name__} cannot travel to a GR00T server; send a Python "
            f"number or a 0-d/1-d array"
        )
    raise CodecError(f"objects of type {type(obj).__module__}.{type(obj).__qualname__} are not supported")


def _object_hook(obj: dict[Any, Any]) -> Any:
    if obj.get(_NDARRAY) is True:
        raw = obj.get("as_npy")
        if not isinstance(raw, (bytes, bytearray)):
            raise CodecError("__ndarray_class__ map without as_npy bytes")
        try:
            return np.load(io.BytesIO(raw), allow_pickle=False)
        except ValueError as exc:  # object arrays (pickles) are refused here
            raise CodecError(f"refused .npy payload: {exc}") from exc
    if obj.get(_MODALITY) is True:
        return ModalityConfig.from_json(obj.get("as_json"))
    return obj


def packb(obj: Any) -> bytes:
    """Encode ``obj`` as one GR00T msgpack document.

    Raises:
        CodecError: an object array, a numpy scalar or another unsupported object.
    """
    try:
        return msgpack.packb(obj, default=_default, use_bin_type=True)
    except CodecError:
        raise
    except (TypeError, ValueError, OverflowError) as exc:
        raise CodecError(f"cannot encode for GR00T: {exc}") from exc


def unpackb(data: bytes) -> Any:
    """Decode one GR00T msgpack document (arrays and ModalityConfigs restored).

    What a reply may build is bounded by its size, as in arena's own codec
    (:func:`arena.transport.codec.object_budget`).

    Raises:
        CodecError: malformed msgpack, more objects than the reply's budget, or a refused
            ``.npy`` payload.
    """
    try:
        return unpackb_bounded(data, _object_hook, raw=False, strict_map_key=False)
    except CodecError as exc:
        raise CodecError(f"undecodable GR00T message: {exc}") from exc
