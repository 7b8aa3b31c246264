"""Canonical JSON and short digests: the one way the bridge hashes message content."""

from __future__ import annotations

import hashlib
import json
from typing import Any


def canonical_json(value: Any) -> bytes:
    """Deterministic UTF-8 JSON: sorted keys, no whitespace. Lone surrogates (valid in parsed JSON,
    not in UTF-8) are kept as their code units, so any parsed value hashes."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode(
        "utf-8", "surrogatepass"
    )


def digest(value: Any, size: int = 16) -> bytes:
    """The first `size` bytes of SHA-256 over the canonical JSON of `value`."""
    return hashlib.sha256(canonical_json(value)).digest()[:size]


def as_object(value: Any) -> dict[str, Any]:
    """`value` if it is a JSON object, else an empty one (for optional `params` / `_meta`)."""
    return value if isinstance(value, dict) else {}


__all__ = ["as_object", "canonical_json", "digest"]
