"""Spec §10 routing and intake: T01-T11."""

import pytest

from arena_tao_cosmos_reason.errors import CosmosPlanError
from arena_tao_cosmos_reason.planner import resolve_model_name
from arena_tao_cosmos_reason.request import PlanRequest
from arena_tao_cosmos_reason.routing import FRAMEWORK, RL, model_tier, normalize_backend, select_backend


def test_t01_nano_training_defaults_to_cosmos_rl_compatibility_route():
    sel = select_backend(model="Cosmos3-Nano", action="train")
    assert sel.backend == RL
    assert "compatibility default" in sel.backend_selection_reason


def test_t02_nano_export_goes_to_framework():
    assert select_backend("Cosmos3-Nano", action="export", backend="auto").backend == FRAMEWORK


@pytest.mark.parametrize("action", ["train", "export", "evaluate", "inference", "inference_microservice"])
def test_t04_edge_actions_route_to_framework(action):
    assert select_backend("nvidia/Cosmos3-Edge", action=action).backend == FRAMEWORK


def test_edge_quantize_is_unsupported_by_the_framework_contract():
    with pytest.raises(CosmosPlanError, match="Cosmos3-Edge does not support quantize"):
        select_backend("Cosmos3-Edge", action="quantize")


def test_t05_edge_on_rl_alias_is_rejected():
    with pytest.raises(CosmosPlanError, match="Cosmos-RL does not support Cosmos3-Edge"):
        select_backend("Cosmos3-Edge", backend="rl")


def test_t07_comparative_run_needs_an_explicit_backend():
    with pytest.raises(CosmosPlanError, match="backend selection is required for every comparative run"):
        select_backend("Cosmos3-Nano", backend="auto", comparative=True)


def test_t08_unknown_backend_name():
    with pytest.raises(CosmosPlanError, match="backend must be cosmos-framework, cosmos-rl, or auto"):
        select_backend("Cosmos3-Nano", backend="pytorch")


def test_aliases_are_stored_canonically():
    assert [normalize_backend(n) for n in ("Framework", "cosmos_rl", "RL", "AUTO")] == [FRAMEWORK, RL, RL, "auto"]
    assert PlanRequest(backend="cosmos_framework").backend == FRAMEWORK


def test_t10_model_tier_names():
    assert model_tier("cosmos reason 3") == "nano"
    assert model_tier("COSMOS3") == "nano"
    assert model_tier("nvidia/Cosmos3_Edge") == "edge"
    with pytest.raises(CosmosPlanError, match="unsupported Cosmos family"):
        model_tier("llama")


def test_t11_auto_model_from_hf_model_uri_routes_edge_to_framework():
    req = PlanRequest(model="auto", base_model_path_or_uri="hf_model://nvidia/Cosmos3-Edge")
    name = resolve_model_name(req)
    assert name == "nvidia/Cosmos3-Edge"
    assert select_backend(name).backend == FRAMEWORK


def test_unsupported_action_is_named():
    with pytest.raises(CosmosPlanError, match="unsupported Cosmos action: dance"):
        select_backend("Cosmos3-Nano", action="dance")
