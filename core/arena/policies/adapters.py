"""``EmbodimentAdapter``: what is sent for one robot and one server format.

The transport and the chunk replay do not change between robots; an adapter does. Adapters
are registered per protocol family (``register(family, name, adapter_cls)``).
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from arena.errors import TransportError


class ProtocolViolation(TransportError):
    """A server reply does not match the protocol: a missing key, a wrong shape or dtype, NaN."""


class EmbodimentAdapter:
    """Turn one env's observation into a request and a reply into an action chunk.

    Subclasses set ``action_dim`` and implement ``extract`` and ``pack_request``; those whose
    model convention differs from the environment's (sign, order, scale of action
    dimensions) override :meth:`unpack_actions` and :meth:`pack_actions` together, which
    :func:`arena.testing.conformance.check_adapter_conformance` holds to being inverses.
    """

    action_dim: ClassVar[int] = 0

    def extract(self, observation: dict[str, Any], env_id: int) -> Any:
        """Pull env ``env_id``'s cameras and state out of the batched Arena-layout observation."""
        raise NotImplementedError

    def pack_request(self, extracted: Any, instruction: str | None) -> dict[str, Any]:
        """Return the request dict the server reads (flat keys, numpy arrays, str prompt)."""
        raise NotImplementedError

    def unpack_actions(self, response: dict[str, Any], key: str) -> np.ndarray:
        """Return the action chunk ``float64 (H, action_dim)`` from ``response[key]``.

        Any float dtype is widened to float64, which is exact: openpi's clients hand the
        simulator ``action.tolist()`` (Python floats), so a float64 reply reaches it
        unrounded and a float32 one as its exact float64 value. Each environment casts to
        its simulator's dtype where that simulator's reference client does.

        Raises:
            ProtocolViolation: the key is missing, the value is not a 2-D float array with
                ``action_dim`` columns and at least one row, or it holds NaN or infinity.
        """
        if not isinstance(response, dict) or key not in response:
            got = sorted(response) if isinstance(response, dict) else type(response).__name__
            raise ProtocolViolation(f"reply has no '{key}' (got {got})")
        chunk = response[key]
        if not isinstance(chunk, np.ndarray):
            raise ProtocolViolation(f"'{key}' is {type(chunk).__name__}, expected an ndarray")
        if chunk.dtype.kind != "f":
            raise ProtocolViolation(
                f"'{key}' has dtype {chunk.dtype}, expected a float array of shape (H, {self.action_dim})"
            )
        if chunk.ndim != 2 or chunk.shape[1] != self.action_dim or chunk.shape[0] < 1:
            raise ProtocolViolation(
                f"'{key}' has shape {tuple(chunk.shape)}, expected (H, {self.action_dim}) with H >= 1"
            )
        if not np.all(np.isfinite(chunk)):
            raise ProtocolViolation(f"'{key}' holds NaN or infinite values")
        return np.array(chunk, dtype=np.float64, copy=True)

    def pack_actions(self, actions: np.ndarray, key: str = "actions") -> dict[str, Any]:
        """The inverse of :meth:`unpack_actions`: the model's reply for env actions.

        ``actions``: ``(H, action_dim)`` in the environment's convention; returns
        ``{key: float64 (H, action_dim)}`` in the model's, so that
        ``unpack_actions(pack_actions(a, key), key)`` gives back ``a``. The default is the
        identity convention (the model's actions are the environment's).

        Raises:
            ValueError: ``actions`` is not ``(H, action_dim)`` with ``H >= 1``.
        """
        chunk = np.asarray(actions, np.float64)
        if chunk.ndim != 2 or chunk.shape[1] != self.action_dim or chunk.shape[0] < 1:
            raise ValueError(f"actions must have shape (H, {self.action_dim}) with H >= 1, got {chunk.shape}")
        return {key: np.array(chunk, copy=True)}
