"""The Model protocol arena's policy server hosts.

``arena_register_servers`` registers ``model_factory(**options) -> Model`` (``arena serve NAME``
also takes ``package.module:factory``). The server calls ``load()`` before ``/readyz`` turns
ready, sends ``metadata()`` to every new connection, and answers each request with
``infer(obs)``.

Optional, for accelerators:

* ``infer_batch(list_of_obs) -> list_of_replies`` (same length, same order): the server then
  groups concurrent requests, by default up to 64 per call with a 2 ms window
  (:mod:`arena.transport.policy_server`);
* ``concurrent_batches: int`` (class attribute, default 1): how many ``infer_batch`` calls may
  run at once. 2 lets the server hand the model the next batch (stacking, host-to-device
  copies) while the current one computes; it requires a thread-safe model (a torch module in
  inference mode is).

Threads: ``load()`` and the first inference run on an inference thread; later short
inferences may run on the server's event-loop thread instead (as in openpi's server, which
calls ``infer`` on its loop). Calls never overlap unless ``concurrent_batches`` > 1, but they
may come from different threads: keep per-thread state (``torch.cuda.set_device``, grad mode)
inside each call (``torch.inference_mode()``), or serve with ``--inline-below-ms 0``.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable


@runtime_checkable
class Model(Protocol):
    def metadata(self) -> dict[str, Any]:
        """The dict sent once to every new connection (openpi: ``policy.metadata``)."""
        ...

    def load(self) -> None:
        """Load weights; runs before ``/readyz`` reports ready. May take minutes."""
        ...

    def infer(self, obs: dict[str, Any]) -> dict[str, Any]:
        """Answer one request: a dict of numpy arrays, strings and numbers.

        The arrays are read-only views of the decoded message (as in openpi's server): copy
        one before writing into it (``np.array(obs[key])``).
        """
        ...
