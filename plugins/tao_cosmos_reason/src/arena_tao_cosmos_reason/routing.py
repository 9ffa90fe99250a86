"""Backend routing: aliases, model tiers and the routing table (spec §2).

The per-backend action support is data (:data:`BACKEND_ACTIONS`), inferred from the routing
table (spec §2.4); a ``None`` reason means supported.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from arena_tao_cosmos_reason.errors import CosmosPlanError

FRAMEWORK = "cosmos-framework"
RL = "cosmos-rl"
ACTIONS = ("train", "export", "evaluate", "inference", "inference_microservice", "quantize")
BACKEND_ALIASES = {
    "framework": FRAMEWORK,
    "cosmos_framework": FRAMEWORK,
    "cosmos-framework": FRAMEWORK,
    "rl": RL,
    "cosmos_rl": RL,
    "cosmos-rl": RL,
    "auto": "auto",
}
NANO_MODEL = "nvidia/Cosmos3-Nano"
EDGE_MODEL = "nvidia/Cosmos3-Edge"

BACKEND_ACTIONS: dict[str, dict[str, str | None]] = {
    FRAMEWORK: {
        "train": None,
        "export": None,
        "evaluate": None,
        "inference": None,
        "inference_microservice": None,
        "quantize": "the Cosmos Framework action contract advertises no quantization action",
    },
    RL: {
        "train": None,
        "export": "Framework DCP export is not advertised by the Cosmos-RL action contract",
        "evaluate": None,
        "inference": None,
        "inference_microservice": None,
        "quantize": None,
    },
}

REASON_NANO_SFT = "plain Cosmos3-Nano SFT preserves the Cosmos-RL compatibility default"
REASON_RL_NATIVE = "the requested action/schema is native to Cosmos-RL"
REASON_FRAMEWORK_EXPORT = "Framework DCP export is owned by Cosmos Framework"
REASON_EDGE = "Cosmos3-Edge uses the Framework-native model and checkpoint action route"
#: The reason reported when the request names a supported backend: the reference implementation's
#: backend-selection routine returns exactly this string there (the rule itself, "an explicit
#: supported backend wins", is how the backend is chosen, not the reason reported).
REASON_EXPLICIT = "backend explicitly selected by the request"


@dataclass(frozen=True)
class BackendSelection:
    """Result of :func:`select_backend`; ``as_dict`` is the ``resolve`` verb's payload core."""

    model: str
    tier: str
    backend: str
    backend_selection_reason: str
    backend_contract: dict

    def as_dict(self) -> dict:
        return asdict(self)


def normalize_backend(name: str | None) -> str:
    """Case-fold a backend name and map aliases to ``cosmos-framework``/``cosmos-rl``/``auto``.

    Raises:
        CosmosPlanError: an unknown backend name.
    """
    key = (name or "auto").strip().casefold()
    if key not in BACKEND_ALIASES:
        raise CosmosPlanError(f"backend must be cosmos-framework, cosmos-rl, or auto (or an alias), got {name!r}")
    return BACKEND_ALIASES[key]


def normalize_action(action: str | None) -> str:
    """Case-fold an action and check it is one of :data:`ACTIONS`."""
    key = (action or "train").strip().casefold()
    if key not in ACTIONS:
        raise CosmosPlanError(f"unsupported Cosmos action: {action} (action must be one of {', '.join(ACTIONS)})")
    return key


def model_tier(name: str) -> str:
    """``nano`` or ``edge`` from a model name (case-folded, ``_`` read as ``-``); nano first.

    Raises:
        CosmosPlanError: the name names neither tier.
    """
    folded = (name or "").casefold().replace("_", "-")
    if "nano" in folded or folded in {"cosmos3", "cosmos-reason", "cosmos reason 3"}:
        return "nano"
    if "edge" in folded:
        return "edge"
    raise CosmosPlanError(f"unsupported Cosmos family: {name!r} (model must name Cosmos3-Nano or Cosmos3-Edge)")


def backend_contract(backend: str) -> dict:
    """The action-support table of one backend, as plain data for the plan."""
    actions = BACKEND_ACTIONS[backend]
    return {
        "backend": backend,
        "supported_actions": sorted(a for a, why in actions.items() if why is None),
        "unsupported_actions": {a: why for a, why in sorted(actions.items()) if why is not None},
        "supported_tiers": ["edge", "nano"] if backend == FRAMEWORK else ["nano"],
    }


def select_backend(
    model: str,
    action: str = "train",
    backend: str = "auto",
    workload: str = "training",
    comparative: bool = False,
) -> BackendSelection:
    """Pick the backend for ``model``/``action`` by the rules of spec §2.3, in their order.

    Raises:
        CosmosPlanError: unknown action or backend, an auto backend on a comparative run, an
            Edge model on Cosmos-RL, or an action the chosen backend does not support.
    """
    act = normalize_action(action)
    chosen = normalize_backend(backend)
    if comparative and chosen == "auto":
        raise CosmosPlanError("backend selection is required for every comparative run")
    tier = model_tier(model)
    if chosen != "auto":
        if chosen == RL and tier == "edge":
            raise CosmosPlanError("Cosmos-RL does not support Cosmos3-Edge")
        why = BACKEND_ACTIONS[chosen][act]
        if why is not None:
            raise CosmosPlanError(f"{chosen} does not support {act}: {why}")
        reason = REASON_EXPLICIT
    elif tier == "edge":
        why = BACKEND_ACTIONS[FRAMEWORK][act]
        if why is not None:
            raise CosmosPlanError(f"Cosmos3-Edge does not support {act}: {why}")
        chosen, reason = FRAMEWORK, REASON_EDGE
    elif act == "export":
        chosen, reason = FRAMEWORK, REASON_FRAMEWORK_EXPORT
    elif act == "train" and (workload or "training").casefold() == "training":
        chosen, reason = RL, REASON_NANO_SFT
    else:
        chosen, reason = RL, REASON_RL_NATIVE
    return BackendSelection(
        model=model,
        tier=tier,
        backend=chosen,
        backend_selection_reason=reason,
        backend_contract=backend_contract(chosen),
    )


def model_name_for_reference(reference: str, local_model_type: str | None = None) -> str | None:
    """The public model name implied by a base reference or its ``config.json`` model type.

    Returns ``None`` when neither names a tier (spec §3.4 steps 1-3).
    """
    folded = (reference or "").casefold().replace("_", "-")
    if "cosmos3-edge" in folded:
        return EDGE_MODEL
    if "cosmos3-nano" in folded:
        return NANO_MODEL
    if local_model_type == "cosmos3_edge":
        return EDGE_MODEL
    if local_model_type in {"qwen3_vl", "cosmos3_omni"}:
        return NANO_MODEL
    return None
