"""msgpack with the openpi ndarray extension, byte-identical to ``openpi_client.msgpack_numpy``.

Wire form (``reference/protocols.md`` section 2.4):

* ``np.ndarray`` -> map with msgpack **bin** keys ``b"__ndarray__": True``,
  ``b"data"``: C-order bytes, ``b"dtype"``: ``dtype.str`` (e.g. ``"<f4"``), ``b"shape"``: ints.
* numpy scalars that do not subclass a Python builtin -> ``b"__npgeneric__": True``,
  ``b"data"``: ``value.item()``, ``b"dtype"``. ``np.float64`` subclasses ``float`` and goes out
  as a plain msgpack float64 (it decodes as ``float``).
* ``str`` -> str, ``bytes`` -> bin, tuples and lists -> arrays (they decode as lists).

Differences from openpi, all on the safe side:

* complex, object and void/structured dtypes (``ml_dtypes.bfloat16`` is void) are refused
  **before sending** with :class:`CodecError` naming the key path;
* torch tensors (and jax arrays) become numpy first; bfloat16 becomes float32;
* decoded arrays are read-only views of their payload, as openpi's are (nothing copied); a
  consumer that writes into one copies it first (``np.array(a)``);
* malformed input raises :class:`CodecError` only; object dtypes are never decoded and nothing
  is ever unpickled;
* what a message may make the decoder build is bounded by its size (:func:`object_budget`):
  openpi's decoder turns a 64 MiB frame of one array of 67 million empty arrays into ~4.8 GB of
  Python lists (half a minute of work); this one refuses it at once with :class:`CodecError`.
"""

from __future__ import annotations

import math
from typing import Any

import msgpack
import numpy as np

from arena.transport.errors import CodecError

__all__ = ["DEFAULT_MAX_OBJECTS", "Packer", "object_budget", "packb", "unpackb", "unpackb_bounded"]

DEFAULT_MAX_OBJECTS = 2**20
"""The most msgpack objects one message may hold, whatever its size (see :func:`object_budget`)."""
_BUDGET_BASE = 4096
_BYTES_PER_OBJECT = 8
_CONTAINER_COST = 16

_REFUSED_KINDS = frozenset("cOV")
# Kinds whose buffer msgpack can read directly (saves the tobytes() copy).
_BUFFER_KINDS = frozenset("biuf")
_KEEP_PACKER_BYTES = 4 * 2**20
_NDARRAY = b"__ndarray__"
_NPGENERIC = b"__npgeneric__"


class _Refused(Exception):
    """Internal: raised inside the msgpack ``default`` hook; turned into CodecError with a path."""


def _default(obj: Any) -> Any:
    """msgpack ``default`` hook: the ndarray/npgeneric maps; the hot path of every request."""
    if isinstance(obj, np.ndarray):
        dtype = obj.dtype
        if dtype.kind in _REFUSED_KINDS:
            raise _Refused(f"{dtype} is not supported")
        if dtype.kind in _BUFFER_KINDS and obj.flags.c_contiguous:
            data: Any = obj.data
        else:
            data = obj.tobytes()
        return {_NDARRAY: True, b"data": data, b"dtype": dtype.str, b"shape": obj.shape}
    if isinstance(obj, np.generic):
        dtype = obj.dtype
        if dtype.kind in _REFUSED_KINDS:
            raise _Refused(f"{dtype} is not supported")
        return {_NPGENERIC: True, b"data": obj.item(), b"dtype": dtype.str}
    module = type(obj).__module__
    if module.startswith("torch") and hasattr(obj, "detach"):
        return _default(_torch_to_numpy(obj))
    if module.startswith(("jax", "jaxlib")) and hasattr(obj, "__array__"):
        array = np.asarray(obj)
        if array.dtype.name == "bfloat16":
            array = array.astype(np.float32)
        return _default(array)
    kind = f"{type(obj).__module__}.{type(obj).__qualname__}"
    raise _Refused(f"objects of type {kind} are not supported")


def _torch_to_numpy(tensor: Any) -> np.ndarray:
    tensor = tensor.detach().cpu()
    if str(tensor.dtype) == "torch.bfloat16":
        tensor = tensor.float()
    return tensor.numpy()


class Packer:
    """A reusable encoder (not thread-safe): ``Packer().pack(obj) -> bytes``.

    Raises :class:`CodecError` naming the key path of the first value that cannot travel.
    """

    __slots__ = ("_packer",)

    def __init__(self) -> None:
        self._packer = msgpack.Packer(default=_default, use_bin_type=True)

    def pack(self, obj: Any) -> bytes:
        try:
            packed = self._packer.pack(obj)
        except Exception as exc:  # noqa: BLE001 - every failure becomes a CodecError
            self._packer.reset()
            raise _encode_error(obj, exc) from None
        if len(packed) > _KEEP_PACKER_BYTES:
            # msgpack's Packer keeps its buffer at the largest size it ever needed: start afresh
            # rather than hold twice the biggest message for the life of the connection.
            self._packer = msgpack.Packer(default=_default, use_bin_type=True)
        return packed


def packb(obj: Any) -> bytes:
    """Encode ``obj`` (dicts, lists, numbers, str, bytes, numpy arrays and scalars, tensors).

    Raises :class:`CodecError` before anything is sent, e.g.
    ``observation/image: complex128 is not supported``.
    """
    return Packer().pack(obj)


def object_budget(nbytes: int, max_objects: int = DEFAULT_MAX_OBJECTS) -> int:
    """How many msgpack objects a message of ``nbytes`` bytes may hold: ``4096 + nbytes // 8``,
    at most ``max_objects``.

    An array or a map counts 16 (a Python container costs ~60 bytes and work for the garbage
    collector) plus one per element (two per map entry), so what a message builds stays within a
    small multiple of its own size, in memory and in time. numpy arrays travel as ``bin``
    payloads and count as a handful of objects however large they are: a DROID request spends
    ~100 of its ~41,000; a message of float64 scalars in plain lists (9 bytes each) fits too.
    Send bulk numbers as numpy arrays, not lists.
    """
    return min(max_objects, _BUDGET_BASE + nbytes // _BYTES_PER_OBJECT)


def unpackb_bounded(
    data: bytes | bytearray | memoryview,
    object_hook: Any = None,
    *,
    max_objects: int = DEFAULT_MAX_OBJECTS,
    **options: Any,
) -> Any:
    """``msgpack.unpackb`` with the object budget of :func:`object_budget` enforced.

    ``object_hook`` and ``options`` (``raw``, ``strict_map_key``, ...) go to msgpack; no
    single array or map may declare more elements than the budget, and the arrays and maps
    built so far are counted as they complete, so decoding stops after at most twice the
    budget's worth of objects. Used by the openpi codec here and by the plugins' own codecs
    (GR00T's), so every decoder of untrusted bytes has the same bound.

    Raises:
        CodecError: the message holds more objects than its budget (the message says how
            many bytes and which limit), or msgpack rejected it.
    """
    nbytes = len(data)
    budget = object_budget(nbytes, max_objects)
    left = budget
    hook = object_hook if object_hook is not None else _identity

    def on_list(items: list[Any]) -> list[Any]:
        nonlocal left
        left -= _CONTAINER_COST + len(items)
        if left < 0:
            raise _OverBudget
        return items

    def on_map(obj: dict[Any, Any]) -> Any:
        nonlocal left
        left -= _CONTAINER_COST + 2 * len(obj)
        if left < 0:
            raise _OverBudget
        return hook(obj)

    try:
        return msgpack.unpackb(
            data,
            object_hook=on_map,
            list_hook=on_list,
            max_array_len=budget,
            max_map_len=budget,
            **options,
        )
    except _OverBudget:
        raise _too_many(nbytes, budget, max_objects) from None
    except CodecError:
        raise
    except ValueError as exc:
        if "exceeds max_array_len" in str(exc) or "exceeds max_map_len" in str(exc):
            raise _too_many(nbytes, budget, max_objects) from None
        raise CodecError(f"malformed message (ValueError: {exc})") from exc
    except Exception as exc:  # noqa: BLE001 - msgpack raises many types; callers see one
        raise CodecError(f"malformed message ({type(exc).__name__}: {exc})") from exc


def _identity(obj: Any) -> Any:
    return obj


class _OverBudget(Exception):
    """Internal: raised from the msgpack hooks once a message spent its object budget."""


def _too_many(nbytes: int, budget: int, max_objects: int) -> CodecError:
    return CodecError(
        f"refusing a message of {nbytes:,} bytes that holds more than {budget:,} msgpack objects "
        f"(the limit for its size: {_BUDGET_BASE} + bytes/{_BYTES_PER_OBJECT}, at most "
        f"{max_objects:,}); send bulk numbers as numpy arrays"
    )


def unpackb(data: bytes | bytearray | memoryview, *, max_objects: int = DEFAULT_MAX_OBJECTS) -> Any:
    """Decode one message. Arrays come back as read-only views of their ``bin`` payloads.

    As openpi's decoder does (``np.ndarray(buffer=...)`` on the payload), nothing is copied: a
    300 KB DROID request decodes in a fraction of the time a copy would take. Writing into a
    decoded array raises ``ValueError: assignment destination is read-only``; a consumer that
    writes (a model normalizing in place, an environment clipping its actions) copies first
    (``np.array(a)``). The views keep the payload alive, not the whole message.

    Only str and bytes map keys are accepted (msgpack ``strict_map_key``). A map with **str**
    keys ``"__ndarray__"`` is not an array and stays a dict. What the message may build is
    bounded by its size (:func:`object_budget`; ``max_objects`` caps it).

    Raises:
        CodecError: malformed input, or more objects than the message's budget.
    """
    return unpackb_bounded(data, _object_hook, max_objects=max_objects, raw=False, strict_map_key=True)


def _object_hook(obj: dict[Any, Any]) -> Any:
    if _NDARRAY in obj:
        return _decode_array(obj)
    if _NPGENERIC in obj:
        return _decode_scalar(obj)
    return obj


_DTYPES: dict[str, np.dtype] = {}
_DTYPES_KEPT = 64  # dtype names seen so far, parsed once each; a message cannot grow it further


def _decode_dtype(obj: dict[Any, Any]) -> np.dtype:
    name = obj.get(b"dtype")
    if type(name) is str:
        known = _DTYPES.get(name)
        if known is not None:
            return known
    if not isinstance(name, str):
        raise CodecError(f"malformed numpy marker: dtype is {type(name).__name__}, not str")
    try:
        dtype = np.dtype(name)
    except Exception as exc:  # noqa: BLE001
        raise CodecError(f"malformed numpy marker: unknown dtype {name!r}") from exc
    if dtype.hasobject:
        raise CodecError(f"refusing to decode object dtype {name!r}")
    if len(_DTYPES) < _DTYPES_KEPT:
        _DTYPES[name] = dtype
    return dtype


def _decode_array(obj: dict[Any, Any]) -> np.ndarray:
    dtype = _decode_dtype(obj)
    data = obj.get(b"data")
    shape = obj.get(b"shape")
    if not isinstance(data, bytes):
        raise CodecError("malformed ndarray: data is not bytes")
    if not isinstance(shape, list) or not all(type(n) is int and n >= 0 for n in shape):
        raise CodecError(f"malformed ndarray: bad shape {shape!r}")
    if math.prod(shape) * dtype.itemsize != len(data):
        raise CodecError(
            f"malformed ndarray: {len(data)} bytes do not fill shape {shape} of dtype {dtype.str}"
        )
    if dtype.itemsize == 0:
        array = np.empty(shape, dtype)
        array.flags.writeable = False
        return array
    # A read-only view of the payload (``bytes`` are immutable), as openpi's decoder builds it;
    # the checks above bound what it may claim.
    return np.ndarray(shape, dtype, data)


def _decode_scalar(obj: dict[Any, Any]) -> np.generic:
    dtype = _decode_dtype(obj)
    if dtype.kind == "V":  # np.void(n) would allocate n bytes; openpi never sends it
        raise CodecError(f"refusing to decode a numpy scalar of void dtype {dtype.str!r}")
    data = obj.get(b"data")
    if dtype.kind in "iu" and isinstance(data, int):
        info = np.iinfo(dtype)
        if not info.min <= data <= info.max:
            raise CodecError(f"numpy scalar {data} does not fit dtype {dtype.str}")
    try:
        with np.errstate(all="ignore"):  # a float beyond float16/32 range becomes inf
            return dtype.type(data)
    except Exception as exc:  # noqa: BLE001
        raise CodecError(f"malformed numpy scalar of dtype {dtype.str}: {exc}") from exc


# ---- error reporting (slow path, only after a failure) ----------------------------------------


def _encode_error(obj: Any, exc: Exception) -> CodecError:
    try:
        found = _find_unsupported(obj, "")
    except RecursionError:
        found = None
    if found is not None:
        path, reason = found
        return CodecError(f"{path or '(top level)'}: {reason}")
    return CodecError(f"cannot encode message: {type(exc).__name__}: {exc}")


def _find_unsupported(obj: Any, path: str) -> tuple[str, str] | None:
    """Walk ``obj`` like msgpack would and return (key path, reason) of the first bad value."""
    if isinstance(obj, dict):
        for key, value in obj.items():
            if not isinstance(key, (str, bytes, int, float, bool)) and key is not None:
                return path, f"map key of type {type(key).__name__} is not supported"
            key_text = key.decode(errors="replace") if isinstance(key, bytes) else str(key)
            found = _find_unsupported(value, f"{path}/{key_text}" if path else key_text)
            if found is not None:
                return found
        return None
    if isinstance(obj, (list, tuple)):
        for index, value in enumerate(obj):
            found = _find_unsupported(value, f"{path}[{index}]")
            if found is not None:
                return found
        return None
    if obj is None or isinstance(obj, (bool, float, bytes, bytearray, memoryview)):
        return None
    if isinstance(obj, int):
        if not -(2**63) <= obj < 2**64:
            return path, f"integer {obj} does not fit in 64 bits"
        return None
    if isinstance(obj, str):
        try:
            obj.encode()
        except UnicodeEncodeError as exc:
            return path, f"string is not valid UTF-8 ({exc.reason})"
        return None
    try:
        _default(obj)
    except _Refused as exc:
        return path, str(exc)
    except Exception as exc:  # noqa: BLE001 - e.g. a tensor that fails to convert
        return path, f"{type(exc).__name__}: {exc}"
    return None
