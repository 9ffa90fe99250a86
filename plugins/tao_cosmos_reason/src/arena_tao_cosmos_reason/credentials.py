"""Finding credentials in plans and job metadata (spec §5.1, §9: "no credentials anywhere").

Only the *names* ``HF_TOKEN`` and ``NGC_KEY`` may appear, as pass-throughs. A value is a leak
when it sits under a secret-looking key (``HF_TOKEN``, ``api_key``, ``password``, …) and is
anything but empty, a boolean or an environment-variable name, or when the value itself is
token-shaped wherever it sits (``hf_…``, ``nvapi-…``, ``Bearer …``, ``NAME=value`` for a secret
name, and the common provider prefixes). Findings name the JSON path, never the value.
"""

from __future__ import annotations

import re

SECRET_WORDS = frozenset({"token", "secret", "password", "passwd", "passphrase", "credential", "credentials",
                          "apikey", "authorization"})
"""A key with one of these words (split on ``_``, ``-``, ``.`` and case changes) is secret-looking."""
KEY_QUALIFIERS = frozenset({"api", "access", "private", "secret", "ngc", "auth", "signing", "encryption"})
"""``<qualifier>_key`` (e.g. ``NGC_KEY``, ``api_key``) is secret-looking; a bare ``key`` is not."""
ENV_NAME = re.compile(r"^[A-Z][A-Z0-9_]*$")
TOKEN_SHAPES = (
    ("Hugging Face token", re.compile(r"\bhf_[A-Za-z0-9]{20,}")),
    ("NGC/NVIDIA API key", re.compile(r"\bnvapi-[A-Za-z0-9_-]{20,}")),
    ("bearer credential", re.compile(r"\bBearer\s+[A-Za-z0-9._~+/=-]{8,}")),
    ("GitHub token", re.compile(r"\b(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{30,})")),
    ("AWS access key id", re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b")),
    ("API secret key", re.compile(r"\bsk-[A-Za-z0-9_-]{20,}")),
    ("Slack token", re.compile(r"\bxox[abposr]-[A-Za-z0-9-]{10,}")),
    ("JSON web token", re.compile(r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]+")),
    ("private key block", re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----")),
)
ASSIGNMENT = re.compile(r"\b([A-Za-z_][A-Za-z0-9_]*)=([^\s'\";,]+)")


def _words(key: str) -> list[str]:
    spaced = re.sub(r"([a-z0-9])([A-Z])", r"\1 \2", key)
    return [w for w in re.split(r"[^A-Za-z0-9]+", spaced.casefold()) if w]


def secret_looking(key: str) -> bool:
    """Whether a mapping key or variable name names a credential (``HF_TOKEN``, ``ngc_key``, …)."""
    words = _words(key)
    if any(w in SECRET_WORDS for w in words):
        return True
    return any(w == "key" and i > 0 and words[i - 1] in KEY_QUALIFIERS for i, w in enumerate(words))


def _harmless(value) -> bool:
    """Values allowed under a secret-looking key: nothing, a flag, or a variable *name*."""
    return value is None or isinstance(value, bool) or value == "" or (isinstance(value, str) and bool(ENV_NAME.match(value)))


def _text_findings(text: str, where: str) -> list[str]:
    found = [f"{where}: looks like a {label}" for label, pattern in TOKEN_SHAPES if pattern.search(text)]
    for name, value in ASSIGNMENT.findall(text):
        if secret_looking(name) and not ENV_NAME.match(value) and not value.startswith("$"):
            found.append(f"{where}: assigns a value to {name}")
    return found


def find_credentials(value, path: str = "$") -> list[str]:
    """Every place in a JSON-like ``value`` that holds a credential, as ``"<path>: <why>"``.

    Paths read like ``$.environment.HF_TOKEN`` or ``$.items[3]``; values are never echoed.
    """
    found: list[str] = []
    if isinstance(value, dict):
        for key, item in value.items():
            where = f"{path}.{key}"
            if secret_looking(str(key)) and not isinstance(item, (dict, list)) and not _harmless(item):
                found.append(f"{where}: a value under a secret-looking key")
            found.extend(find_credentials(item, where))
            if isinstance(key, str):
                found.extend(_text_findings(key, f"{where} (key)"))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found.extend(find_credentials(item, f"{path}[{index}]"))
    elif isinstance(value, str):
        found.extend(_text_findings(value, path))
    return found
