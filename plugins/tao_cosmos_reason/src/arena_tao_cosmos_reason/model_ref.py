"""Model references and immutable Hub revision resolution (spec §3.3).

A reference is a local folder, an absolute path meant for the compute frame, or a Hugging Face
model ID/URL. A Hub branch or tag is resolved read-only to its 40-hex commit through
``GET {endpoint}/api/models/{repo}/revision/{ref}`` using ``huggingface_hub``'s HTTP session;
the endpoint comes from ``HF_ENDPOINT`` (passed explicitly, never read implicitly by the
library) and a token from ``HF_TOKEN``/``HUGGING_FACE_HUB_TOKEN`` is sent but never returned.
The headers are exactly the ones spec §3.3 lists (``Accept: application/json``, a fixed
User-Agent, ``Authorization`` only with a token): the library's own header builder is not used,
because newer releases (2.x) fetch an agent registry from the endpoint and cache it under
``HF_HOME`` while building their User-Agent, which a read-only resolution must not do.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path
from urllib.parse import quote, urlparse

from arena_tao_cosmos_reason.errors import CosmosPlanError

HEX40 = re.compile(r"^[0-9a-fA-F]{40}$")
LOWER_HEX40 = re.compile(r"^[0-9a-f]{40}$")
REPO_ID = re.compile(r"^[^/\s]+/[^/\s]+$")
DEFAULT_ENDPOINT = "https://huggingface.co"
HUB_TIMEOUT_S = 30.0
USER_AGENT = "arena-tao-cosmos-reason/0.1"
TOKEN_ENV_NAMES = ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN")


def parse_repo_id(value: str) -> str:
    """``org/name`` from a URL, ``hf_model://``, ``hf://[models/]`` or bare ID.

    A ``/tree/<ref>`` URL suffix is ignored (never read as a revision).

    Raises:
        CosmosPlanError: the value is not a supported Hugging Face model ID or URL.
    """
    raw = (value or "").strip()
    candidate = raw
    if raw.startswith(("https://", "http://")):
        parsed = urlparse(raw)
        segments = [s for s in parsed.path.split("/") if s]
        candidate = "/".join(segments[:2]) if parsed.netloc == "huggingface.co" and len(segments) >= 2 else ""
    elif raw.startswith("hf_model://"):
        candidate = raw[len("hf_model://") :].strip("/")
    elif raw.startswith("hf://"):
        candidate = raw[len("hf://") :].strip("/")
        if candidate.startswith("models/"):
            candidate = candidate[len("models/") :]
    if not REPO_ID.match(candidate):
        raise CosmosPlanError(f"model URI is not a supported Hugging Face model ID or URL: {value!r}")
    return candidate


def hub_token(env: Mapping[str, str]) -> str | None:
    """The Hub token from the environment, or ``None``; callers must never persist it."""
    for name in TOKEN_ENV_NAMES:
        if env.get(name):
            return env[name]
    return None


class HubRevisionResolver:
    """Resolve ``repo@ref`` to its immutable commit through the Hub API.

    Args:
        endpoint: Hub base URL; default ``env["HF_ENDPOINT"]`` or ``https://huggingface.co``.
        env: where ``HF_ENDPOINT`` and the token are looked up (default ``os.environ``).
        timeout_s: request timeout in seconds (30, spec §3.3).
    """

    def __init__(
        self,
        endpoint: str | None = None,
        env: Mapping[str, str] | None = None,
        timeout_s: float = HUB_TIMEOUT_S,
    ) -> None:
        self.env = os.environ if env is None else env
        self.endpoint = (endpoint or self.env.get("HF_ENDPOINT") or DEFAULT_ENDPOINT).rstrip("/")
        self.timeout_s = timeout_s

    def url(self, repo: str, ref: str) -> str:
        return f"{self.endpoint}/api/models/{repo}/revision/{quote(ref, safe='')}"

    def resolve(self, repo: str, ref: str) -> dict:
        """Return ``{sha, url, timeout_s, token_sent}`` for ``repo@ref``.

        Raises:
            CosmosPlanError: access denied (401/403), not found (404), other HTTP errors,
                network errors/timeouts/bad JSON, or a reply without a 40-hex commit.
        """
        from huggingface_hub.errors import HfHubHTTPError
        from huggingface_hub.utils import get_session, hf_raise_for_status

        token = hub_token(self.env)
        headers = {"Accept": "application/json", "User-Agent": USER_AGENT}
        if token:
            headers["Authorization"] = f"Bearer {token}"
        url = self.url(repo, ref)
        try:
            response = get_session().get(url, headers=headers, timeout=self.timeout_s, follow_redirects=True)
            hf_raise_for_status(response)
            payload = response.json()
        except HfHubHTTPError as exc:
            code = exc.response.status_code if exc.response is not None else None
            if code in (401, 403):
                raise CosmosPlanError(
                    f"Hugging Face access denied while resolving {repo!r}; set HF_TOKEN in the session "
                    "environment and retry—the user does not need to provide a commit SHA"
                ) from None
            if code == 404:
                raise CosmosPlanError(f"Hugging Face model or revision was not found: {repo}@{ref}") from None
            raise CosmosPlanError(f"Hugging Face revision resolution failed for {repo}@{ref}: HTTP {code}") from None
        except ImportError:  # a broken installation is not a Hub outage
            raise
        except Exception as exc:  # network error, timeout, bad JSON
            raise CosmosPlanError(
                f"Hugging Face revision resolution failed for {repo}@{ref}; retry when Hub access is available "
                f"({type(exc).__name__})"
            ) from None
        sha = payload.get("sha") if isinstance(payload, dict) else None
        if not isinstance(sha, str) or not LOWER_HEX40.match(sha):
            raise CosmosPlanError(f"Hugging Face returned no immutable commit for {repo}@{ref}")
        return {"sha": sha, "url": url, "timeout_s": self.timeout_s, "token_sent": token is not None}


def resolve_model_reference(
    value: str,
    revision: str | None = None,
    resolver: HubRevisionResolver | None = None,
    field: str = "base_model_path_or_uri",
) -> dict:
    """Classify ``value`` and resolve its revision (the table of spec §3.3).

    Returns ``{kind, reference, repo_id, requested_revision, resolved_revision,
    resolution_source}`` (plus ``url``/``timeout_s``/``token_sent`` after a Hub call).
    ``field`` names the request field in a reference error.
    """
    ref = (revision or "").strip() or None
    if value and "://" not in value and Path(value).expanduser().exists():
        return _record("local_snapshot", value, None, ref, None, "content_fingerprint")
    if value and "://" not in value and os.path.isabs(value):
        return _record("target_compute_local_snapshot", value, None, ref, None, "target_compute_content_fingerprint")
    try:
        repo = parse_repo_id(value)
    except CosmosPlanError as exc:
        raise CosmosPlanError(f"{exc} ({field})") from None
    if ref and HEX40.match(ref):
        return _record("huggingface_model", value, repo, ref, ref.lower(), "user_supplied_commit")
    ref = ref or "main"
    reply = (resolver or HubRevisionResolver()).resolve(repo, ref)
    record = _record("huggingface_model", value, repo, ref, reply["sha"], "huggingface_model_info")
    record.update(url=reply["url"], timeout_s=reply["timeout_s"], token_sent=reply["token_sent"])
    return record


def _record(kind, reference, repo, requested, resolved, source) -> dict:
    return {
        "kind": kind,
        "reference": reference,
        "repo_id": repo,
        "requested_revision": requested,
        "resolved_revision": resolved,
        "resolution_source": source,
    }
