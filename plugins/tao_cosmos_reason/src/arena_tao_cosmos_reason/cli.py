"""``arena cosmos-reason``: argument parsing and printing only; each verb lives in :mod:`verbs`.

Exit codes (spec §0.3): 0 ok; 1 a result with ``ok: false``; 2 any validation, I/O, JSON,
TOML or type error (message on stderr prefixed ``ERROR:``).
"""

from __future__ import annotations

import functools
import json
import sys
from pathlib import Path
from typing import Annotated, Optional

import typer
import yaml
from pydantic import ValidationError

from arena_tao_cosmos_reason import verbs
from arena_tao_cosmos_reason.errors import CosmosPlanError
from arena_tao_cosmos_reason.request import PlanRequest

app = typer.Typer(name="cosmos-reason", no_args_is_help=True,
                  help="Plan, seal and render Cosmos3 Reason fine-tune/evaluation jobs (SLURM, Docker).")

Format = Annotated[str, typer.Option("--format", help="json (default) or text")]
Artifact = Annotated[str, typer.Option("--plan-artifact", help="local path of the sealed plan")]
JobId = Annotated[Optional[str], typer.Option("--tao-job-id", help="job record id (names job, folder, container)")]


TEXT_SCALARS = ("ok", "ready", "launch_allowed", "backend", "model", "model_name", "experiment_id", "job_id", "kind",
                "backend_selection_reason", "terminal_tao_status", "terminal_status", "output", "metadata", "sha256")
TEXT_LISTS = {"errors": "error", "warnings": "warning", "invalid_mismatches": "invalid_mismatch",
              "required_user_inputs": "required_user_input", "missing": "missing"}


def _fmt(value) -> str:
    return f"{value:.6g}" if isinstance(value, float) else str(value)


def text_summary(result: dict) -> list[str]:
    """The short ``--format text`` form of a verb's result: one ``key: value`` line per fact.

    Known shapes get a sentence each (losses, accuracy, the written spec, completion); anything
    else falls back to its top-level scalars, so no verb ever prints nothing.
    """
    lines = [f"{k}: {_fmt(result[k])}" for k in TEXT_SCALARS
             if result.get(k) is not None and not isinstance(result[k], (dict, list))]
    for key, unit in (("train_loss", "valid label tokens"), ("validation_loss", "valid label tokens")):
        loss = result.get(key)
        if isinstance(loss, dict):
            lines.append(f"{key}: {_fmt(loss['average'])} = {_fmt(loss['numerator'])} / {_fmt(loss['denominator'])} "
                         f"{unit} ({loss['source_phase']}, status record {loss['record_index']})")
    accuracy = result.get("accuracy")
    if isinstance(accuracy, dict):
        lines.append(f"accuracy: {_fmt(accuracy['average_validation_accuracy'])} = {_fmt(accuracy['numerator'])} / "
                     f"{_fmt(accuracy['denominator'])} examples ({accuracy['aggregation']})")
    if "checkpoint_saved" in result:
        lines.append(f"checkpoint_saved: {result['checkpoint_saved']}")
    config = result.get("config")
    if isinstance(config, dict) and config.get("sha256"):
        lines.append(f"config: {config.get('original')} -> {config.get('container')} sha256={config['sha256']}")
    for item in result.get("generated_artifacts") or []:
        lines.append(f"generated: {item.get('output')} ({item.get('record_count')} records)")
    completion = result.get("completion")
    if isinstance(completion, dict):
        strict = "" if completion.get("strict", True) else " (the terminal status does not require it without --strict-completion)"
        lines.append(f"complete: {completion.get('complete')}{strict if not completion.get('complete') else ''}")
        lines += [f"unmet: {item}" for item in completion.get("unmet") or []]
    for key, label in TEXT_LISTS.items():
        lines += [f"{label}: {item}" for item in result.get(key) or []]
    if isinstance(result.get("plan_artifact"), dict):
        envelope = result["plan_artifact"]
        lines.append(f"plan_artifact: {envelope['path']} sha256={envelope['sha256']}")
    if isinstance(result.get("node_exclusions"), dict) and result["node_exclusions"].get("validated"):
        lines.append(f"exclude: {','.join(result['node_exclusions']['validated'])}")
    if not lines:
        lines = [f"{k}: {_fmt(v)}" for k, v in sorted(result.items()) if not isinstance(v, (dict, list))]
    return lines or [json.dumps(result, sort_keys=True, default=str)]


def _emit(result, fmt: str) -> None:
    if isinstance(result, str):
        sys.stdout.write(result)
    elif fmt == "text":
        print("\n".join(text_summary(result)) if isinstance(result, dict) else result)
    else:
        print(json.dumps(result, indent=2, sort_keys=True, default=str))


def _validation_message(exc: ValidationError) -> str:
    parts = []
    for error in exc.errors():
        loc = ".".join(str(p) for p in error["loc"]) or "request"
        parts.append(f"{loc}: {error['msg']}")
    return "invalid planner request: " + "; ".join(parts)


def verb(fn):
    """Map errors to exit 2 (``ERROR: …`` on stderr, never a traceback) and ``ok: false`` to exit 1."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        fmt = kwargs.get("fmt", "json")
        try:
            if fmt not in ("json", "text"):
                raise CosmosPlanError(f"--format must be json or text, got {fmt!r}")
            result = fn(*args, **kwargs)
        except ValidationError as exc:
            typer.echo(f"ERROR: {_validation_message(exc)}", err=True)
            raise typer.Exit(2) from None
        except (ValueError, TypeError, OSError, KeyError, yaml.YAMLError) as exc:
            typer.echo(f"ERROR: {exc}", err=True)
            raise typer.Exit(2) from None
        except Exception as exc:  # noqa: BLE001 - spec §0.3: an error message, never a traceback
            typer.echo(f"ERROR: unexpected {type(exc).__name__} in {fn.__name__.replace('_', '-')}: {exc} "
                       "(this is a bug in arena-plugin-tao-cosmos-reason; please report it with the command line)",
                       err=True)
            raise typer.Exit(2) from None
        _emit(result, fmt)
        if isinstance(result, dict) and result.get("ok") is False:
            raise typer.Exit(1)

    return wrapper


def _coerce(name: str, raw: str):
    field = PlanRequest.model_fields.get(name)
    if field is None:
        raise CosmosPlanError(f"unknown planner field: {name} (--set {name}=...)")
    try:
        value = json.loads(raw)
    except ValueError:
        value = raw
    if field.annotation is str or (isinstance(value, (int, float)) and "str" in str(field.annotation) and "int" not in str(field.annotation)):
        value = raw
    return value


def request_fields(request: Optional[Path], sets: list[str]) -> dict:
    """Merge a JSON/YAML request file with ``--set KEY=VALUE`` (lists: repeat the key)."""
    fields: dict = {}
    if request:
        try:
            loaded = yaml.safe_load(request.read_text(encoding="utf-8"))
        except OSError as exc:
            raise CosmosPlanError(f"cannot read request file {request}: {exc.strerror or exc}") from None
        except yaml.YAMLError as exc:
            raise CosmosPlanError(f"request file {request} is not valid JSON or YAML: {exc}") from None
        if not isinstance(loaded, dict):
            raise CosmosPlanError(f"request file {request} must hold a mapping of planner fields, "
                                  f"got {type(loaded).__name__}")
        fields.update(loaded)
    for item in sets:
        key, sep, raw = item.partition("=")
        if not sep:
            raise CosmosPlanError(f"--set expects KEY=VALUE, got {item!r}")
        key = key.strip().replace("-", "_")
        value = _coerce(key, raw)
        if "list" in str(PlanRequest.model_fields[key].annotation):
            fields.setdefault(key, [])
            fields[key] = list(fields[key]) + (value if isinstance(value, list) else [value])
        else:
            fields[key] = value
    return fields


RequestOpt = Annotated[Optional[Path], typer.Option("--request", help="JSON or YAML file of planner fields")]
SetOpt = Annotated[list[str], typer.Option("--set", help="KEY=VALUE planner field (repeat; lists append)")]


@app.command()
@verb
def resolve(request: RequestOpt = None, set_: SetOpt = None, model: Annotated[str, typer.Option()] = "auto",
            base_model_path_or_uri: Annotated[str, typer.Option()] = "", action: Annotated[str, typer.Option()] = "train",
            backend: Annotated[str, typer.Option()] = "auto", workload: Annotated[str, typer.Option()] = "training",
            comparative: Annotated[bool, typer.Option()] = False, fmt: Format = "json"):
    """Pick the model tier and backend (cheap; reads no data)."""
    if set_ is None:
        set_ = []
    fields = {"model": model, "base_model_path_or_uri": base_model_path_or_uri, "action": action, "backend": backend,
              "workload": workload, "comparative": comparative}
    fields.update(request_fields(request, set_))
    return verbs.resolve(fields)


@app.command()
@verb
def plan(plan_artifact: Artifact, request: RequestOpt = None, set_: SetOpt = None,
         write_spec: Annotated[Optional[str], typer.Option("--write-spec")] = None, fmt: Format = "json"):
    """Inspect model and data once, build everything and seal the plan artifact."""
    if set_ is None:
        set_ = []
    fields = request_fields(request, set_)
    if write_spec:
        fields["write_spec"] = write_spec
    return verbs.plan(fields, plan_artifact)


@app.command()
@verb
def preflight(plan_artifact: Artifact, fmt: Format = "json"):
    """Read-only launch readiness checks (exit 1 when not ok)."""
    return verbs.preflight(plan_artifact)


@app.command()
@verb
def materialize(plan_artifact: Artifact, fmt: Format = "json"):
    """Write the spec and generated manifests atomically and record their checksums."""
    return verbs.materialize_verb(plan_artifact)


RenderOutput = Annotated[Optional[str], typer.Option("--render-output", help="write the script here (else stdout)")]
MetadataOutput = Annotated[Optional[str], typer.Option(
    "--metadata-output", help="write the job's PENDING metadata record here (training plans; for finalize-metadata)")]


@app.command("render-slurm")
@verb
def render_slurm(plan_artifact: Artifact, tao_job_id: JobId = None, render_output: RenderOutput = None,
                 metadata_output: MetadataOutput = None, fmt: Format = "json"):
    """Render the sbatch script of a training or evaluation plan (verifies the materialized spec first)."""
    return verbs.render_slurm_verb(plan_artifact, tao_job_id, render_output, metadata_output)


@app.command("render-docker")
@verb
def render_docker(plan_artifact: Artifact, tao_job_id: JobId = None, render_output: RenderOutput = None,
                  metadata_output: MetadataOutput = None, fmt: Format = "json"):
    """Render the single-node Docker submit script of a training or evaluation plan."""
    return verbs.render_docker_verb(plan_artifact, tao_job_id, render_output, metadata_output)


@app.command("retry-plan")
@verb
def retry_plan(prior_plan: Annotated[str, typer.Option("--prior-plan")], job_id: Annotated[str, typer.Option("--job-id")],
               write_spec: Annotated[str, typer.Option("--write-spec")],
               container_spec_path: Annotated[str, typer.Option("--container-spec-path")],
               output: Annotated[str, typer.Option("--output")],
               exclude_node: Annotated[list[str], typer.Option("--exclude-node")] = None,
               replace_node_exclusions: Annotated[bool, typer.Option("--replace-node-exclusions")] = False,
               slurm_node_inventory: Annotated[str, typer.Option("--slurm-node-inventory")] = "", fmt: Format = "json"):
    """Reseal a prior SLURM plan under a new job identity and action root."""
    if exclude_node is None:
        exclude_node = []
    return verbs.retry_plan(prior_plan, job_id, write_spec, container_spec_path, exclude_node, replace_node_exclusions,
                            slurm_node_inventory, output)


@app.command()
@verb
def parity(first: Annotated[str, typer.Argument()], second: Annotated[str, typer.Argument()], fmt: Format = "json"):
    """Compare a Framework plan with an RL plan; error when launch is blocked."""
    return verbs.parity_verb(first, second)


@app.command("validate-metadata")
@verb
def validate_metadata(metadata: Annotated[Path, typer.Argument()], fmt: Format = "json"):
    """Validate a job-metadata record."""
    return verbs.validate_metadata_verb(metadata)


@app.command("finalize-metadata")
@verb
def finalize_metadata(metadata: Annotated[str, typer.Argument()],
                      child_exit_file: Annotated[str, typer.Option("--child-exit-file")],
                      status_file: Annotated[str, typer.Option("--status-file")],
                      scheduler_state: Annotated[str, typer.Option("--scheduler-state")],
                      scheduler_reason: Annotated[Optional[str], typer.Option("--scheduler-reason")] = None,
                      scheduler_exit_code: Annotated[Optional[str], typer.Option("--scheduler-exit-code")] = None,
                      allocated_node: Annotated[list[str], typer.Option("--allocated-node")] = None,
                      job_id: Annotated[Optional[str], typer.Option("--job-id")] = None,
                      evaluator: Annotated[Optional[Path], typer.Option("--evaluator")] = None,
                      strict_completion: Annotated[bool, typer.Option("--strict-completion")] = False,
                      fmt: Format = "json"):
    """Decide the terminal state and rewrite the metadata file in place."""
    return verbs.finalize_metadata_verb(metadata, child_exit_file, status_file, scheduler_state, scheduler_reason,
                                        scheduler_exit_code, allocated_node or [], job_id, evaluator, strict_completion)


@app.command("verify-provenance")
@verb
def verify_provenance(plan: Annotated[str, typer.Option("--plan")], provenance: Annotated[str, typer.Option("--provenance")],
                      fmt: Format = "json"):
    """Compare a source-build image's provenance JSON with the sealed commits and trees."""
    return verbs.verify_provenance(plan, provenance)


@app.command("extract-metrics")
@verb
def extract_metrics(status_file: Annotated[str, typer.Option("--status-file")],
                    evaluator: Annotated[Optional[str], typer.Option("--evaluator")] = None,
                    plan_artifact: Annotated[Optional[str], typer.Option("--plan-artifact")] = None,
                    require_complete: Annotated[bool, typer.Option("--require-complete/--allow-partial")] = True,
                    fmt: Format = "json"):
    """Token-weighted train/validation losses and the evaluator metric."""
    return verbs.extract_metrics_verb(status_file, evaluator, plan_artifact, require_complete)


@app.command()
@verb
def evaluate(plan_artifact: Artifact, input_: Annotated[list[str], typer.Option("--input", help="KEY=VALUE of the "
             "required evaluation intake (results_dir, checkpoint_selection, generation.max_tokens, ...)")] = None,
             output: Annotated[Optional[str], typer.Option("--output", help="seal the evaluation plan here; render it "
                                                           "with render-slurm/render-docker and a new --tao-job-id")] = None,
             fmt: Format = "json"):
    """Build the evaluation plan inherited from a sealed training plan (exit 1 while inputs are missing)."""
    inputs = {}
    for item in input_ or []:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise CosmosPlanError(f"--input expects KEY=VALUE, got {item!r}")
        inputs[key.strip()] = value
    return verbs.evaluate(plan_artifact, inputs, output)
