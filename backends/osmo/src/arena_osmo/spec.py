"""A pydantic model of the OSMO workflow spec (``version: 2``), written from OSMO's user guide.

Every workflow arena renders is validated against it before it is printed or submitted, so a
misspelt key, a group without exactly one lead or a ``{{host:...}}`` token naming a task of
another group fails here rather than in the OSMO service. Unknown keys are errors at every
level, as in the service's own models.

Facts (OSMO user guide, ``docs/user_guide/workflows/specification/*``, and the service's spec
models, NVIDIA/OSMO snapshot 2026-08):

- top level: ``version``, ``workflow`` and optional ``default-values`` (Jinja variables);
- the whole file is a Jinja template: at submit the service protects its own tokens (exactly
  ``{{output}}``, ``{{workflow_id}}``, ``{{uuid}}``, ``{{input:…}}``, ``{{host:…}}``, no
  spaces), renders the text in a sandboxed environment with undefined variables as errors
  (``src/utils/job/workflow.py``), then substitutes the tokens in every string of each task
  (``TaskSpec.parse``, spaces allowed); a file with ``base64: true`` carries its contents
  encoded, so neither step can change them (``File`` in ``src/utils/job/task.py``);
- ``workflow``: ``name``, ``pool``, ``labels`` (at most 16), ``timeout`` {``exec_timeout``,
  ``queue_timeout``}, ``resources`` (named resource specs), and either ``tasks`` or ``groups``;
- names start with a letter, hold letters, digits, ``-`` and ``_``, and end with a letter or
  digit; tasks and groups share one namespace where case and ``-``/``_`` do not count;
- a group's tasks start together; exactly one of them is the ``lead`` and when it ends the
  others are stopped; ``{{host:<task>}}`` works only between tasks of one group;
- ``inputs``: ``{task: NAME}`` (waits for that task to COMPLETE, downloads its output; the
  task must belong to an earlier group) or ``{url: URL}``, each with an optional ``regex``;
  ``outputs``: ``{url: URL}`` uploaded from ``{{output}}`` when the task ends;
- tokens: ``{{output}}``, ``{{workflow_id}}``, ``{{input:<index or task>}}``,
  ``{{host:<task>}}``; any other ``{{ name }}`` is a Jinja variable that needs a default;
- ``exitActions``: ``COMPLETE`` / ``FAIL`` / ``RESCHEDULE`` -> exit codes as ``"0,1-10,16"``,
  not overlapping; user exit codes are 0-255;
- resources: ``cpu``, ``gpu`` (integers), ``memory``, ``storage`` (quantities such as
  ``16Gi``), ``platform``, ``nodesExcluded``, ``topology``;
- ``checkpoint``: ``[{path, url, frequency, regex}]`` uploads ``path`` to ``url`` every
  ``frequency`` (``30m``, or seconds) and once more when the task completes or fails
  (``docs/user_guide/workflows/specification/checkpointing.rst``).
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

NAME_PATTERN = r"^[A-Za-z]([A-Za-z0-9_-]*[A-Za-z0-9])?$"
_QUANTITY = r"^[0-9]+(\.[0-9]+)?(Ki|Mi|Gi|Ti|Pi|K|M|G|T|P)?$"
_DURATION = r"^[0-9]+(\.[0-9]+)?[smhdw]$"
_CODES = re.compile(r"^\s*\d+(\s*-\s*\d+)?(\s*,\s*\d+(\s*-\s*\d+)?)*\s*$")
_TOKEN = re.compile(r"\{\{\s*([^}]*?)\s*\}\}")
MAX_LABELS = 16


def name_key(name: str) -> str:
    """How OSMO compares task and group names: case-insensitive, ``_`` equal to ``-``."""
    return name.lower().replace("_", "-")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


class Topology(_Strict):
    key: str
    group: str = "default"
    requirementType: Literal["required", "preferred"] = "required"  # noqa: N815 (OSMO's key)


class ResourceSpec(_Strict):
    """One named resource spec of ``workflow.resources``."""

    cpu: int | None = Field(None, ge=0)
    gpu: int | None = Field(None, ge=0)
    memory: str | None = Field(None, pattern=_QUANTITY)
    storage: str | None = Field(None, pattern=_QUANTITY)
    platform: str | None = None
    nodesExcluded: list[str] = Field(default_factory=list)  # noqa: N815
    topology: list[Topology] = Field(default_factory=list)


class TaskInput(_Strict):
    task: str = Field(pattern=NAME_PATTERN)
    regex: str | None = None


class UrlInput(_Strict):
    url: str = Field(min_length=1)
    regex: str | None = None


class UrlOutput(_Strict):
    url: str = Field(min_length=1)
    regex: str | None = None


class InlineFile(_Strict):
    path: str = Field(pattern=r"^/")
    contents: str
    base64: bool = False  # contents are base64 of the file's bytes


def _duration_or_seconds(value: Any, what: str, examples: str, *, named: bool = False) -> Any:
    """``value`` when it is an OSMO duration (``'30m'``) or positive seconds (or ``None``).

    Raises:
        ValueError: a string that is no duration (naming ``what`` when ``named``), or seconds <= 0.
    """
    if isinstance(value, str) and not re.match(_DURATION, value):
        raise ValueError(f"{what + ' ' if named else ''}{value!r} is not a duration such as {examples}")
    if isinstance(value, int) and value <= 0:
        raise ValueError(f"a {what} in seconds must be positive")
    return value


class Checkpoint(_Strict):
    path: str = Field(min_length=1)
    url: str = Field(min_length=1)
    frequency: str | int
    regex: str | None = None

    @field_validator("frequency")
    @classmethod
    def _frequency(cls, value: str | int) -> str | int:
        return _duration_or_seconds(value, "checkpoint frequency", "'30m'", named=True)


class LocalFile(_Strict):
    path: str = Field(pattern=r"^/")
    localpath: str


def _code_set(text: str) -> set[int]:
    codes: set[int] = set()
    for part in text.split(","):
        low, _, high = part.strip().partition("-")
        start, end = int(low), int(high or low)
        if start > end:
            raise ValueError(f"exit code range {part.strip()!r} runs backwards")
        codes.update(range(start, end + 1))
    return codes


class TaskSpec(_Strict):
    """One task: a container with its command, data and resources."""

    name: str = Field(pattern=NAME_PATTERN, max_length=63)
    image: str = Field(min_length=1)
    command: list[str] = Field(min_length=1)
    args: list[str] = Field(default_factory=list)
    lead: bool = False
    environment: dict[str, str] = Field(default_factory=dict)
    credentials: dict[str, str | dict[str, str]] = Field(default_factory=dict)
    inputs: list[TaskInput | UrlInput] = Field(default_factory=list)
    outputs: list[UrlOutput] = Field(default_factory=list)
    files: list[InlineFile | LocalFile] = Field(default_factory=list)
    resource: str = "default"
    volumeMounts: list[str] = Field(default_factory=list)  # noqa: N815
    exitActions: dict[Literal["COMPLETE", "FAIL", "RESCHEDULE"], str] = Field(default_factory=dict)  # noqa: N815
    downloadType: Literal["download", "mountpoint", "mountpoint-s3"] | None = None  # noqa: N815
    checkpoint: list[Checkpoint] = Field(default_factory=list)
    privileged: bool = False
    hostNetwork: bool = False  # noqa: N815

    @field_validator("exitActions")
    @classmethod
    def _exit_codes(cls, actions: dict[str, str]) -> dict[str, str]:
        seen: dict[int, str] = {}
        for action, codes in actions.items():
            if not _CODES.match(codes):
                raise ValueError(f"exitActions.{action}: {codes!r} is not a list of codes such as '0,1-10,16'")
            for code in _code_set(codes):
                if code > 255:
                    raise ValueError(f"exitActions.{action}: exit code {code} is reserved for OSMO (user codes are 0-255)")
                if code in seen:
                    raise ValueError(f"exit code {code} is mapped to both {seen[code]} and {action}")
                seen[code] = action
        return actions

    @model_validator(mode="after")
    def _unique_file_paths(self) -> TaskSpec:
        paths = [f.path for f in self.files]
        if len(paths) != len(set(paths)):
            raise ValueError(f"task {self.name}: two files share one path")
        return self


class GroupSpec(_Strict):
    """Tasks started together; exactly one is the lead."""

    name: str = Field(pattern=NAME_PATTERN, max_length=63)
    barrier: bool = True
    ignoreNonleadStatus: bool = True  # noqa: N815
    tasks: list[TaskSpec] = Field(min_length=1)

    @model_validator(mode="after")
    def _one_lead(self) -> GroupSpec:
        leads = [t.name for t in self.tasks if t.lead]
        if len(leads) != 1:
            raise ValueError(f"group {self.name} must have exactly one lead task, has {len(leads)} ({', '.join(leads) or 'none'})")
        return self


class Timeout(_Strict):
    exec_timeout: str | int | None = None
    queue_timeout: str | int | None = None

    @field_validator("exec_timeout", "queue_timeout")
    @classmethod
    def _duration(cls, value: str | int | None) -> str | int | None:
        return _duration_or_seconds(value, "timeout", "'30m', '12h' or '1d'")


class WorkflowSpec(_Strict):
    name: str = Field(pattern=NAME_PATTERN, max_length=63)
    pool: str | None = None
    labels: dict[str, str] = Field(default_factory=dict)
    timeout: Timeout | None = None
    resources: dict[str, ResourceSpec] = Field(default_factory=dict)
    tasks: list[TaskSpec] | None = None
    groups: list[GroupSpec] | None = None

    @field_validator("labels")
    @classmethod
    def _labels(cls, labels: dict[str, str]) -> dict[str, str]:
        if len(labels) > MAX_LABELS:
            raise ValueError(f"at most {MAX_LABELS} labels, got {len(labels)}")
        return labels

    @model_validator(mode="after")
    def _structure(self) -> WorkflowSpec:
        if bool(self.tasks) == bool(self.groups):
            raise ValueError("a workflow has either `tasks` or `groups` (exactly one of them, not empty)")
        if self.tasks:
            raise ValueError("arena renders groups; a bare `tasks` list is not expected here")
        seen: set[str] = set()
        for group in self.groups or []:
            for name in [group.name, *(t.name for t in group.tasks)]:
                if name_key(name) in seen:
                    raise ValueError(f"name {name!r} is used twice (OSMO ignores case and treats '_' as '-')")
                seen.add(name_key(name))
        earlier: set[str] = set()
        for group in self.groups or []:
            members = {t.name for t in group.tasks}
            for task in group.tasks:
                if task.resource not in self.resources:
                    raise ValueError(f"task {task.name} uses resource {task.resource!r}, which workflow.resources does not define")
                for item in task.inputs:
                    if isinstance(item, TaskInput) and item.task not in earlier:
                        raise ValueError(f"task {task.name} takes the output of {item.task!r}, which is not a task of an earlier group")
                _check_tokens(task, members)
            earlier |= members
        return self


class WorkflowFile(_Strict):
    """A whole workflow file."""

    version: Literal[2]
    workflow: WorkflowSpec
    default_values: dict[str, Any] | None = Field(None, alias="default-values")

    @model_validator(mode="after")
    def _jinja_defaults(self) -> WorkflowFile:
        defaults = self.default_values or {}
        for group in self.workflow.groups or []:
            for task in group.tasks:
                for token in _tokens(task):
                    if not _is_special(token) and token not in defaults:
                        raise ValueError(f"task {task.name}: template variable {{{{{token}}}}} has no default-values entry")
        return self


def _tokens(task: TaskSpec) -> list[str]:
    return _TOKEN.findall(task.model_dump_json())


def _is_special(token: str) -> bool:
    return token in ("output", "workflow_id") or token.startswith(("input:", "host:"))


def _check_tokens(task: TaskSpec, group_members: set[str]) -> None:
    inputs = {str(i) for i in range(len(task.inputs))} | {i.task for i in task.inputs if isinstance(i, TaskInput)}
    for token in _tokens(task):
        kind, _, target = token.partition(":")
        if kind == "host" and target not in group_members:
            raise ValueError(f"task {task.name}: {{{{host:{target}}}}} names no task of its group")
        if kind == "input" and target not in inputs:
            raise ValueError(f"task {task.name}: {{{{input:{target}}}}} names none of its inputs")


#: The tokens OSMO protects before it renders a submitted file (``src/utils/job/workflow.py``).
_PROTECTED = re.compile(r"{{(uuid|workflow_id|output|input:[^}]+|host:[^}]+)}}")


def check_template_text(text: str, default_values: dict[str, Any] | None = None) -> None:
    """Check that OSMO's submit-time templating leaves the workflow file ``text`` as written.

    The service replaces its own tokens by stand-ins, renders the text with Jinja (sandboxed,
    undefined variables are errors) and puts the tokens back; the file is fine when that
    changes nothing but, at most, the final line break (Jinja's default drops it).

    Raises:
        ValueError: naming the first line the rendering changes, or Jinja's error.
    """
    import jinja2
    import jinja2.sandbox

    stand_ins: dict[str, str] = {}

    def protect(match: re.Match[str]) -> str:
        name = f"arena_token_{len(stand_ins)}"
        stand_ins[name] = match.group(0)
        return "{{" + name + "}}"

    env = jinja2.sandbox.SandboxedEnvironment(undefined=jinja2.StrictUndefined)
    try:
        rendered = env.from_string(_PROTECTED.sub(protect, text)).render({**(default_values or {}), **stand_ins})
    except jinja2.TemplateError as exc:
        line = f" (line {exc.lineno})" if getattr(exc, "lineno", None) else ""
        raise ValueError(f"OSMO's Jinja rendering of the workflow file fails{line}: {exc}") from None
    if rendered.rstrip("\n") != text.rstrip("\n"):
        for number, (want, got) in enumerate(zip(text.splitlines(), rendered.splitlines()), start=1):
            if want != got:
                raise ValueError(f"OSMO's Jinja rendering would change line {number} of the workflow file: {want!r} -> {got!r}")
        raise ValueError("OSMO's Jinja rendering would change the workflow file (its line count)")


def validate_workflow(data: dict[str, Any]) -> WorkflowFile:
    """Validate a rendered workflow dict.

    Raises:
        pydantic.ValidationError: the dict is not a valid OSMO workflow.
    """
    return WorkflowFile.model_validate(data)
