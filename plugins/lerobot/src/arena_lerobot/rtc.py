"""Real-Time Chunking inputs for ``arena serve lerobot``: ``inference_delay`` and the leftover.

LeRobot's RTC (``lerobot/policies/rtc``, in 0.4.4 and later) guides a flow policy's new chunk
towards the not-yet-executed rows of the previous one: ``policy.predict_action_chunk(batch,
inference_delay=d, prev_chunk_left_over=leftover)`` (pi0, pi0.5, SmolVLA), the leftover in the
policy's **normalized** action space (before the postprocessor), ``(B, rows, action_dim)``,
zero-padded by LeRobot to the chunk length; ``None`` turns guidance off. Guidance runs only when
the checkpoint's ``rtc_config`` is enabled.

A live client (:mod:`arena.live`, ``execution.rtc``) sends ``inference_delay`` (control steps)
and ``execute_horizon`` (``s``: rows of the previous chunk executed since it was returned) with
each request; it also sends ``prev_chunk_left_over`` in the environment's action space, which a
LeRobot policy cannot use. So the server keeps, per ``(session, env_id)`` (the keys the client
already sends), the last chunk it returned in normalized space, and hands the policy its rows
``s ..`` as the leftover (none on ``new_episode``). Policies whose ``predict_action_chunk``
takes neither argument get the plain call: the fields are ignored. The model's metadata says
which (``rtc``: ``{"accepts": bool, "enabled": bool}``).
"""

from __future__ import annotations

import inspect
from collections import OrderedDict
from typing import Any

#: Request keys a live client adds (arena.live.schedule.EnvSchedule.rtc_fields).
DELAY_KEY = "inference_delay"
HORIZON_KEY = "execute_horizon"


def accepts_rtc(policy: Any) -> bool:
    """Whether ``policy.predict_action_chunk`` takes ``inference_delay`` (by name or through
    ``**kwargs`` on a policy with LeRobot's ``_rtc_enabled``)."""
    try:
        parameters = inspect.signature(policy.predict_action_chunk).parameters
    except (TypeError, ValueError, AttributeError):
        return False
    if "inference_delay" in parameters and "prev_chunk_left_over" in parameters:
        return True
    var_kw = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values())
    return var_kw and callable(getattr(policy, "_rtc_enabled", None))


def rtc_enabled(policy: Any) -> bool:
    """Whether the policy's RTC guidance is on (its ``rtc_config.enabled``); a policy that takes
    the arguments by name without LeRobot's switch counts as on."""
    switch = getattr(policy, "_rtc_enabled", None)
    return bool(switch()) if callable(switch) else accepts_rtc(policy)


class Leftovers:
    """The last normalized chunk returned per ``(session, env_id)``, at most ``max_states`` kept."""

    def __init__(self, max_states: int) -> None:
        self.max_states = max_states
        self._chunks: OrderedDict[tuple[str, int], Any] = OrderedDict()

    def leftover(self, key: tuple[str, int], request: dict[str, Any], new_episode: bool) -> Any:
        """``(1, rows, action_dim)`` normalized rows not yet executed, or ``None``."""
        chunk = None if new_episode else self._chunks.get(key)
        if chunk is None:
            return None
        executed = int(request.get(HORIZON_KEY, 0) or 0)
        rest = chunk[executed:]
        return rest[None] if len(rest) else None

    def keep(self, key: tuple[str, int], chunk: Any) -> None:
        self._chunks[key] = chunk.detach().clone()
        self._chunks.move_to_end(key)
        while len(self._chunks) > self.max_states:
            self._chunks.popitem(last=False)


def predict(policy: Any, batch: dict[str, Any], requests: list[dict[str, Any]], leftovers: Leftovers,
            keys: list[tuple[str, int]], new_episode: list[bool], rows: Any) -> Any:
    """Normalized chunks ``(B, T, action_dim)``: one ``predict_action_chunk`` per env with its
    ``inference_delay`` and leftover when the requests carry RTC fields and the policy accepts
    them, else one plain call for the batch. ``rows(value, [i])`` slices env ``i``'s batch."""
    import torch

    if not accepts_rtc(policy) or not any(DELAY_KEY in r for r in requests):
        return policy.predict_action_chunk(batch)
    chunks = []
    for i, request in enumerate(requests):
        sub = {k: rows(v, [i]) for k, v in batch.items()}
        chunk = policy.predict_action_chunk(
            sub, inference_delay=int(request.get(DELAY_KEY, 0) or 0),
            prev_chunk_left_over=leftovers.leftover(keys[i], request, new_episode[i]),
        )
        leftovers.keep(keys[i], chunk[0])
        chunks.append(chunk)
    return torch.cat(chunks, dim=0)
