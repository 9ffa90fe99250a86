"""``arena serve lerobot -o policy_path=DIR``: a LeRobot checkpoint behind arena's policy server.

Loading is what ``lerobot-eval`` does (``lerobot/scripts/lerobot_eval.py``, ``eval_main``,
LeRobot 0.6.1; the same sequence as 0.4.4, whose checkpoints load unchanged): the checkpoint's
config (ImageNet backbone weights it names are not fetched: the trained weights replace them),
the policy class of its type, ``from_pretrained(DIR, config=cfg)``, and its saved processor
pipelines, ``make_pre_post_processors(cfg, pretrained_path=DIR)`` with the device and
``rename_map`` overrides. A checkpoint whose normalizer lacks statistics for features it
normalizes is refused (:func:`check_normalization_stats`; ``allow_missing_stats`` serves it
with a warning in the metadata). Each request is one env's observation with
LeRobot's feature names (``observation.images.<cam>`` ``uint8 (H, W, 3)``, ``observation.state``
``float32 (D,)``, optionally ``observation.environment_state``, ``task``: what the
``lerobot/*`` embodiment adapters send), stacked by :func:`arena_lerobot.features.to_policy_batch`
exactly as ``lerobot.envs.utils.preprocess_observation`` stacks a vector env's observations,
then run through the preprocessor, the policy and the postprocessor.

Two ways of serving, chosen from the checkpoint (``metadata()["serving"]``):

- ``chunk``: the policy's ``select_action`` is "take ``predict_action_chunk(batch)[:, :n_action_steps]``
  when the action queue is empty, then pop it", with no observation history: ACT without
  temporal ensembling. Every request is answered with the whole ``(n_action_steps, action_dim)``
  chunk, which the client replays open-loop; the server keeps no state.
- ``step``: every other policy (Diffusion's ``n_obs_steps`` observation queue, ACT's temporal
  ensembling, VQ-BeT, TD-MPC, ...). The client sends every step's observation and gets one
  action ``(1, action_dim)``; the server keeps LeRobot's own per-episode state (the attributes
  ``policy.reset()`` sets: ``_queues``, ``_action_queue``, ``temporal_ensembler``) once per
  ``(session, env_id)`` of the request, makes it fresh when the request says ``new_episode``
  (or names a state it does not hold), and calls ``policy.select_action`` with that state swapped
  in. A batch groups envs whose queues are at the same fill level and calls ``select_action``
  once per group on the stacked queues (then splits them back), so batching does not change
  which observations an env's actions are computed from; policies whose state is not made of
  queues (temporal ensembling) are called one env at a time.

Diffusion's noise: with ``seed`` set, each env's state holds a ``torch.Generator`` seeded with
``seed`` at the start of its episode, and the initial noise of every fresh chunk, ``(1, horizon,
action_dim)`` per env, is drawn from it and handed to ``select_action(batch, noise=...)``: an
env's actions then do not depend on which other envs share its batch. DDIM sampling
(``noise_scheduler_type="DDIM"``, eta 0) is deterministic given that noise; DDPM (LeRobot's
default) draws fresh noise at every denoising step from torch's global generator
(``DDPMScheduler.step``), so its actions stay samples even when seeded.

Options (``-o KEY=VALUE``): ``policy_path`` (a ``pretrained_model`` directory, or a Hub id where
the machine has network), ``device`` (``auto``: CUDA when present, else CPU), ``n_action_steps``
(override the checkpoint's), ``seed``, ``max_states`` (per-env states kept, least recently used
dropped first, :data:`DEFAULT_MAX_STATES`; an env whose state was dropped mid-episode restarts
it, and that request's reply carries ``state_restarted: true``), ``rename_map`` (lerobot-eval's
``--rename_map``), ``allow_missing_stats``, ``torch_threads`` (``torch.set_num_threads`` before
loading: CPU results are bit-reproducible only at one thread count, and equal ``lerobot-eval``'s
only at its count; ``metadata()["torch_threads"]`` reports the count in force).
"""

from __future__ import annotations

import copy
import hashlib
import logging
import threading
from collections import OrderedDict, deque
from pathlib import Path
from typing import Any

import numpy as np

from arena.errors import ConfigError
from arena_lerobot.venv import LEROBOT_VENV

log = logging.getLogger(__name__)

#: Request keys the client adds for the per-env state (not LeRobot features).
SESSION_KEY = "session"
ENV_ID_KEY = "env_id"
NEW_EPISODE_KEY = "new_episode"
#: The reply's key: ``float32 (rows, action_dim)``.
ACTIONS_KEY = "actions"
#: The reply's key saying the env's per-episode state was dropped (``max_states``) before
#: this request, which therefore started that state afresh in the middle of an episode.
STATE_RESTARTED_KEY = "state_restarted"
#: Attributes ``policy.reset()`` (re)sets on LeRobot 0.4.4-0.6 policies (ACT, Diffusion,
#: VQ-BeT, TD-MPC): their per-episode state.
STATE_ATTRIBUTES = ("_queues", "_action_queue", "temporal_ensembler", "_prev_mean")
#: Per-env states a server keeps by default: 64 envs (``num_envs``) x 8 sessions (runs or
#: suites sharing one server), the most a server is documented for (README, "Which policy
#: types chunk").
DEFAULT_MAX_STATES = 512


def checkpoint_sha256(path: Path) -> str:
    """SHA-256 over the relative names and bytes of every file under ``path`` (sorted), hex."""
    digest = hashlib.sha256()
    for file in sorted(p for p in path.rglob("*") if p.is_file() and not p.name.startswith(".")):
        digest.update(str(file.relative_to(path)).encode() + b"\0")
        with open(file, "rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
    return digest.hexdigest()


def _torch_threads() -> int:
    """torch's intra-op thread count in this process (what a CPU forward pass splits its sums over)."""
    import torch

    return int(torch.get_num_threads())


def serving_mode(config: Any) -> str:
    """``"chunk"`` or ``"step"`` for a LeRobot policy config (module docstring)."""
    if config.type == "act" and getattr(config, "temporal_ensemble_coeff", None) is None:
        return "chunk"
    return "step"


class _EnvState:
    """One env's LeRobot state: the policy attributes ``reset()`` sets, and its noise generator."""

    __slots__ = ("attributes", "generator")

    def __init__(self, attributes: dict[str, Any], generator: Any) -> None:
        self.attributes = attributes
        self.generator = generator


class LeRobotModel:
    """A LeRobot checkpoint served by ``arena serve lerobot`` (module docstring).

    Raises (from :meth:`load`):
        ConfigError: ``policy_path`` is not a directory with a ``config.json`` nor a Hub id,
            LeRobot is not installed in this interpreter (run the server from the ``lerobot``
            venv), or ``n_action_steps`` does not fit the policy.
    """

    #: The venv ``arena venv setup lerobot`` makes, whose interpreter runs this model.
    default_venv = LEROBOT_VENV

    def __init__(
        self,
        policy_path: str | None = None,
        device: str = "auto",
        n_action_steps: int | None = None,
        seed: int | None = None,
        max_states: int = DEFAULT_MAX_STATES,
        rename_map: dict[str, str] | None = None,
        allow_missing_stats: bool = False,
        torch_threads: int | None = None,
    ) -> None:
        if not policy_path:
            raise ConfigError("arena serve lerobot needs -o policy_path=DIR (a LeRobot pretrained_model directory or Hub id)")
        if max_states < 1:
            raise ConfigError(f"max_states must be >= 1, got {max_states}")
        self.policy_path = str(policy_path)
        self.device_option = str(device)
        self.n_action_steps = None if n_action_steps is None else int(n_action_steps)
        self.seed = None if seed is None else int(seed)
        self.max_states = int(max_states)
        if rename_map is not None and not (
            isinstance(rename_map, dict) and all(isinstance(k, str) and isinstance(v, str) for k, v in rename_map.items())
        ):
            raise ConfigError(f"rename_map must map feature names to feature names, e.g. {{observation.images.top: observation.images.cam_high}}; got {rename_map!r}")
        self.rename_map: dict[str, str] = dict(rename_map or {})
        self.allow_missing_stats = bool(allow_missing_stats)
        self.torch_threads = None if torch_threads is None else int(torch_threads)
        if self.torch_threads is not None and self.torch_threads < 1:
            raise ConfigError(f"torch_threads must be >= 1, got {torch_threads}")
        #: What the server's log, every connection's metadata and the run's warnings carry.
        self.warnings: list[str] = []
        self.stats_report: dict[str, list[str]] = {"missing": [], "found": []}
        #: Per-env states dropped for max_states (session, env_id), kept to tell their next request.
        self._evicted: OrderedDict[tuple[str, int], None] = OrderedDict()
        self.policy: Any = None
        self.preprocessor: Any = None
        self.postprocessor: Any = None
        self.mode = ""
        self.device = ""
        self.checkpoint_hash = ""
        self._states: OrderedDict[tuple[str, int], _EnvState] = OrderedDict()
        self._lock = threading.Lock()
        self._attributes: tuple[str, ...] = ()
        self._fresh: dict[str, Any] = {}
        self._stackable = False
        self._leftovers: Any = None  # RTC: the last normalized chunk per env (arena_lerobot.rtc)

    # -- loading -----------------------------------------------------------------------------
    def load(self) -> None:
        try:
            import torch
            from lerobot.configs.policies import PreTrainedConfig
            from lerobot.policies.factory import get_policy_class, make_pre_post_processors
        except ImportError as exc:
            raise ConfigError(
                f"LeRobot is not installed in this interpreter ({exc}): serve from the lerobot venv "
                f"(`{LEROBOT_VENV.setup_command}`, then its bin/arena serve lerobot ...), as `arena run` does"
            ) from None
        path = Path(self.policy_path).expanduser()
        if path.is_dir():
            if not (path / "config.json").is_file():
                raise ConfigError(f"policy_path {path} has no config.json: not a LeRobot pretrained_model directory")
        else:
            try:
                from huggingface_hub import snapshot_download

                path = Path(snapshot_download(self.policy_path))
            except Exception as exc:  # noqa: BLE001 - any failure means: not a usable checkpoint
                raise ConfigError(f"policy_path {self.policy_path!r} is not a directory and not a reachable Hub id: {exc}") from None
        if self.torch_threads is not None:  # before any kernel runs: a GEMM's sums depend on how many threads split it
            torch.set_num_threads(self.torch_threads)
        self.device = ("cuda" if torch.cuda.is_available() else "cpu") if self.device_option == "auto" else self.device_option
        # lerobot-eval 0.6 (scripts/lerobot_eval.py, eval_main): the config from the checkpoint,
        # make_policy -> policy_cls.from_pretrained(path, config=cfg), then the saved processor
        # pipelines with the device and rename_map overrides. make_policy also needs an env
        # config (only to fill output features the checkpoint's config.json already holds), which
        # a server does not have: from_pretrained with the same config is what it calls.
        config = PreTrainedConfig.from_pretrained(path)
        config.pretrained_path = path
        config.device = self.device
        if getattr(config, "pretrained_backbone_weights", None):
            # ACT / Diffusion / VQ-BeT checkpoints name torchvision's ImageNet weights, which
            # building the model downloads before from_pretrained overwrites them with the
            # trained ones: building without them gives identical outputs, offline
            log.info("not fetching %s: the checkpoint's own backbone weights replace them", config.pretrained_backbone_weights)
            config.pretrained_backbone_weights = None
        if self.n_action_steps is not None:
            _check_action_steps(config, self.n_action_steps)
            config.n_action_steps = self.n_action_steps
        policy = get_policy_class(config.type).from_pretrained(path, config=config)
        policy.to(self.device)
        policy.eval()
        self.preprocessor, self.postprocessor = make_pre_post_processors(
            policy.config,
            pretrained_path=str(path),
            preprocessor_overrides={
                "device_processor": {"device": self.device},
                "rename_observations_processor": {"rename_map": dict(self.rename_map)},
            },
        )
        self.stats_report = check_normalization_stats(self.preprocessor, self.postprocessor)
        if self.stats_report["missing"]:
            message = (
                f"the checkpoint {self.policy_path} normalizes {self.stats_report['missing']} but its processors hold "
                f"statistics only for {self.stats_report['found']}: LeRobot would skip those features silently (raw "
                "inputs in, normalized actions out). Re-save its processors with stats under the policy's feature "
                "names (a multi-dataset checkpoint keys them per dataset), or serve anyway with -o allow_missing_stats=true"
            )
            if not self.allow_missing_stats:
                raise ConfigError(message)
            log.warning("%s", message)
            self.warnings.append(message)
        self.policy = policy
        self.mode = serving_mode(policy.config)
        policy.reset()
        self._attributes = tuple(a for a in STATE_ATTRIBUTES if hasattr(policy, a))
        # a fresh episode's state, as reset() leaves it (copied per env: reset() itself would clear
        # in place whichever env's ensembler is swapped in at the time)
        self._fresh = {a: copy.deepcopy(getattr(policy, a)) for a in self._attributes}
        self._stackable = all(_is_queues(getattr(policy, a)) for a in self._attributes)
        self.checkpoint_hash = checkpoint_sha256(path)
        self._resolved_path = str(path)

    def metadata(self) -> dict[str, Any]:
        """Policy type, features, serving mode, rows per reply and the checkpoint's SHA-256."""
        config = self.policy.config

        def features(table: dict[str, Any]) -> dict[str, Any]:
            return {k: {"type": str(getattr(f.type, "value", f.type)), "shape": list(f.shape)} for k, f in table.items()}

        return {
            "server": "arena-lerobot",
            "policy_type": config.type,
            "policy_path": self.policy_path,
            "checkpoint_sha256": self.checkpoint_hash,
            "device": self.device,
            "torch_threads": _torch_threads(),
            "input_features": features(config.input_features),
            "output_features": features(config.output_features),
            "serving": self.mode,
            "actions_per_request": self.actions_per_request,
            # VQ-BeT names its chunk action_chunk_size
            "n_action_steps": int(getattr(config, "n_action_steps", None) or getattr(config, "action_chunk_size", 1)),
            "n_obs_steps": int(getattr(config, "n_obs_steps", 1)),
            "seed": self.seed,
            "state_keys": [SESSION_KEY, ENV_ID_KEY, NEW_EPISODE_KEY],
            "max_states": self.max_states,
            "rename_map": dict(self.rename_map),
            "normalization_stats": dict(self.stats_report),
            "warnings": list(self.warnings),
            "rtc": self._rtc_metadata(),
        }

    def _rtc_metadata(self) -> dict[str, bool]:
        """Whether requests' ``inference_delay`` / leftover reach the policy (:mod:`arena_lerobot.rtc`)."""
        from arena_lerobot.rtc import accepts_rtc, rtc_enabled

        accepts = self.mode == "chunk" and accepts_rtc(self.policy)
        return {"accepts": accepts, "enabled": accepts and rtc_enabled(self.policy)}

    @property
    def actions_per_request(self) -> int:
        """Rows of every reply: ``n_action_steps`` in ``chunk`` mode, 1 in ``step`` mode."""
        return int(self.policy.config.n_action_steps) if self.mode == "chunk" else 1

    # -- inference ---------------------------------------------------------------------------
    def infer(self, obs: dict[str, Any]) -> dict[str, Any]:
        return self.infer_batch([obs])[0]

    def infer_batch(self, observations: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Answer each request with ``{"actions": float32 (rows, action_dim), "batch_size": int}`` (same order).

        Raises:
            ValueError: the requests' features differ within the batch or do not match the
                policy's input features.
        """
        import torch

        from arena_lerobot.features import to_policy_batch

        missing = [k for k in self.policy.config.input_features if k not in observations[0]]
        if missing:
            raise ValueError(
                f"requests lack the policy's input features {missing} (they carry {sorted(observations[0])}); "
                "choose the embodiment adapter that matches this checkpoint"
            )
        restarted = [False] * len(observations)
        with self._lock, torch.inference_mode():
            batch = self.preprocessor(to_policy_batch(observations))
            if self.mode == "chunk":
                chunk = self._predict_chunk(batch, observations)[:, : self.policy.config.n_action_steps]
                actions = self._postprocess(chunk)  # (B, n_action_steps, action_dim)
            else:
                selected, restarted = self._select_actions(observations, batch)
                actions = self._postprocess(selected)[:, None]  # (B, 1, action_dim)
        # arena's server adds server_timing (infer_ms) to each reply; batch_size says how many envs shared the call
        replies: list[dict[str, Any]] = []
        for i in range(len(observations)):
            reply: dict[str, Any] = {ACTIONS_KEY: actions[i], "batch_size": len(observations)}
            if restarted[i]:
                reply[STATE_RESTARTED_KEY] = True
            replies.append(reply)
        return replies

    def _predict_chunk(self, batch: dict[str, Any], observations: list[dict[str, Any]]) -> Any:
        """``predict_action_chunk``, with each request's RTC inputs where it carries them (:mod:`arena_lerobot.rtc`)."""
        from arena_lerobot.rtc import Leftovers, predict

        if self._leftovers is None:
            self._leftovers = Leftovers(self.max_states)
        keys = [(str(r.get(SESSION_KEY, "")), int(r.get(ENV_ID_KEY, 0))) for r in observations]
        new = [bool(r.get(NEW_EPISODE_KEY, False)) for r in observations]
        return predict(self.policy, batch, observations, self._leftovers, keys, new, _rows)

    def _postprocess(self, actions: Any) -> np.ndarray:
        """The postprocessor (unnormalize, to CPU) on ``(B, action_dim)`` or ``(B, T, action_dim)``."""
        out = self.postprocessor(actions)
        return np.ascontiguousarray(out.detach().to("cpu").numpy(), dtype=np.float32)

    def _state(self, request: dict[str, Any]) -> tuple[_EnvState, bool]:
        """The request's env state: fresh for ``new_episode`` or an unknown key; and whether
        it was made fresh in the middle of an episode because ``max_states`` had dropped it."""
        import torch

        key = (str(request.get(SESSION_KEY, "")), int(request.get(ENV_ID_KEY, 0)))
        state = self._states.get(key)
        new_episode = bool(request.get(NEW_EPISODE_KEY, False))
        restarted = False
        if state is None or new_episode:
            restarted = state is None and not new_episode and key in self._evicted
            self._evicted.pop(key, None)
            attributes = copy.deepcopy(self._fresh)
            generator = torch.Generator().manual_seed(self.seed) if self.seed is not None else None
            state = _EnvState(attributes, generator)
            self._states[key] = state
            while len(self._states) > self.max_states:
                dropped, _ = self._states.popitem(last=False)
                self._evicted[dropped] = None
                while len(self._evicted) > 16 * self.max_states:
                    self._evicted.popitem(last=False)
                log.warning(
                    "dropping the LeRobot state of session %s env %d (max_states %d): if its episode is still "
                    "running, its next request starts the policy's state afresh (the client is told)",
                    *dropped, self.max_states,
                )
        if restarted:
            log.warning("session %s env %d: its state was dropped (max_states %d); started afresh mid-episode", *key, self.max_states)
        self._states.move_to_end(key)
        return state, restarted

    def _select_actions(self, observations: list[dict[str, Any]], batch: dict[str, Any]) -> tuple[Any, list[bool]]:
        """``policy.select_action`` per env with its own state: normalized actions ``(B,
        action_dim)``, and per env whether its state was restarted mid-episode (:meth:`_state`)."""
        import torch

        found = [self._state(r) for r in observations]
        states = [state for state, _ in found]
        groups: dict[tuple, list[int]] = {}
        for i, state in enumerate(states):
            key = _fill_levels(state.attributes) if self._stackable else (i,)
            groups.setdefault(key, []).append(i)
        out: list[Any] = [None] * len(states)
        for members in groups.values():
            for name in self._attributes:
                value = [states[i].attributes[name] for i in members]
                setattr(self.policy, name, _stack(value) if self._stackable else value[0])
            sub = {k: _rows(v, members) for k, v in batch.items()}
            kwargs = {}
            if self.seed is not None and self._needs_noise():
                kwargs["noise"] = self._noise([states[i] for i in members])
            actions = self.policy.select_action(sub, **kwargs)
            for j, i in enumerate(members):
                for name in self._attributes:
                    value = getattr(self.policy, name)
                    states[i].attributes[name] = _split(value, j) if self._stackable else value
                out[i] = actions[j : j + 1]
        return torch.cat(out), [restarted for _, restarted in found]

    def _needs_noise(self) -> bool:
        """Whether the next ``select_action`` draws a fresh Diffusion chunk (its action queue is empty)."""
        queues = getattr(self.policy, "_queues", None)
        return self.policy.config.type == "diffusion" and isinstance(queues, dict) and len(queues.get("action", ())) == 0

    def _noise(self, states: list[_EnvState]) -> Any:
        """Initial Diffusion noise ``(B, horizon, action_dim)``, each row from its env's generator."""
        import torch

        config = self.policy.config
        shape = (1, config.horizon, config.action_feature.shape[0])
        dtype = next(self.policy.parameters()).dtype
        rows = [torch.randn(shape, generator=s.generator, dtype=dtype) for s in states]
        return torch.cat(rows).to(self.device)


def check_normalization_stats(*pipelines: Any) -> dict[str, list[str]]:
    """Which features the pipelines' (un)normalizer steps would normalize but hold no statistics
    for: ``{"missing": [...], "found": [...]}`` (sorted feature names).

    LeRobot's ``_NormalizationMixin._apply_transform`` (0.4.4 and 0.6) passes a feature through
    unchanged when its key is not in the step's statistics (``key not in self._tensor_stats``),
    so a checkpoint whose stats are keyed otherwise (per dataset, ``so100.observation.state``)
    feeds raw inputs and returns normalized actions without a word. A feature counts when its
    type's mode in the step's ``norm_map`` is not ``IDENTITY`` (and it is among
    ``normalize_observation_keys`` when the step names them).
    """
    missing: set[str] = set()
    found: set[str] = set()
    for pipeline in pipelines:
        for step in getattr(pipeline, "steps", ()):
            features = getattr(step, "features", None)
            norm_map = getattr(step, "norm_map", None)
            stats = getattr(step, "_tensor_stats", None)
            if not isinstance(features, dict) or not isinstance(norm_map, dict) or stats is None:
                continue
            found.update(stats)
            only = getattr(step, "normalize_observation_keys", None)
            for key, feature in features.items():
                if only is not None and key not in only and str(getattr(feature.type, "value", feature.type)) != "ACTION":
                    continue
                mode = norm_map.get(feature.type)
                if mode is None or str(getattr(mode, "value", mode)).upper() == "IDENTITY":
                    continue
                if key not in stats:
                    missing.add(key)
    return {"missing": sorted(missing), "found": sorted(found)}


def _check_action_steps(config: Any, n: int) -> None:
    """Refuse an ``n_action_steps`` the policy's own config would refuse (its ``__post_init__``)."""
    if n < 1:
        raise ConfigError(f"n_action_steps must be >= 1, got {n}")
    if config.type == "act":
        if n > config.chunk_size:
            raise ConfigError(f"n_action_steps {n} exceeds the ACT checkpoint's chunk_size {config.chunk_size}")
        if config.temporal_ensemble_coeff is not None and n != 1:
            raise ConfigError("an ACT checkpoint with temporal ensembling needs n_action_steps 1")
    if config.type == "diffusion" and n > config.horizon - config.n_obs_steps + 1:
        raise ConfigError(
            f"n_action_steps {n} exceeds the Diffusion checkpoint's horizon - n_obs_steps + 1 = "
            f"{config.horizon - config.n_obs_steps + 1}"
        )


def _rows(value: Any, members: list[int]) -> Any:
    """The ``members`` rows of one batch entry: a tensor's rows, a list's items, else the value."""
    import torch

    if torch.is_tensor(value):
        return value[members]
    if isinstance(value, (list, tuple)):
        return [value[i] for i in members]
    return value


def _is_queues(value: Any) -> bool:
    """A deque of tensors, or a dict of them: state that stacks along the batch dimension."""
    if isinstance(value, deque):
        return True
    return isinstance(value, dict) and all(isinstance(v, deque) for v in value.values())


def _fill_levels(attributes: dict[str, Any]) -> tuple:
    """How full each queue is: envs at equal levels take the same branches of ``select_action``."""
    levels: list[Any] = []
    for name in sorted(attributes):
        value = attributes[name]
        if isinstance(value, deque):
            levels.append((name, len(value)))
        else:
            levels.extend((name, k, len(q)) for k, q in sorted(value.items()))
    return tuple(levels)


def _stack(values: list[Any]) -> Any:
    """One queue (or dict of queues) whose entries are the envs' entries concatenated on dim 0."""
    import torch

    first = values[0]
    if isinstance(first, dict):
        return {k: _stack([v[k] for v in values]) for k in first}
    return deque((torch.cat(items) for items in zip(*values, strict=True)), maxlen=first.maxlen)


def _split(value: Any, index: int) -> Any:
    """Env ``index``'s rows of a stacked queue (or dict of queues), cloned."""
    if isinstance(value, dict):
        return {k: _split(v, index) for k, v in value.items()}
    return deque((item[index : index + 1].clone() for item in value), maxlen=value.maxlen)
