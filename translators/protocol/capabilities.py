"""Capability shapes in both eras (docs/decisions.md §§ 8, 10)."""

from __future__ import annotations

from typing import Final

from translators.protocol.revisions import Revision
from translators.wire.fast_json import digest, sorted_dumps
from translators.wire.jsonrpc import JsonObject

_ELICITATION_MODES = ("form", "url")
# Fingerprints by the value's sorted orjson bytes (`sorted_dumps`): a request's capability set is
# one of the few a deployment's clients send, and hashing its canonical JSON on every request cost
# more than looking it up. Bounded: past the limit a new set is hashed each time, as before.
_FINGERPRINTS: dict[bytes, str] = {}
_MAX_FINGERPRINTS: Final = 1024


def elicitation_modes(client_capabilities: JsonObject) -> frozenset[str]:
    """Elicitation modes a client declared; `{}` means form only (both eras)."""
    declared = client_capabilities.get("elicitation")
    if not isinstance(declared, dict):
        return frozenset()
    modes = frozenset(mode for mode in _ELICITATION_MODES if isinstance(declared.get(mode), dict))
    return modes or frozenset({"form"})


def modern_client_capabilities_to_legacy(client_capabilities: JsonObject) -> JsonObject:
    """The legacy `initialize` capabilities that declare exactly what this modern request declared.

    Roots never carry `listChanged` (modern clients cannot report root changes); tasks and
    extensions are never declared upstream (docs/decisions.md § 13)."""
    legacy: JsonObject = {}
    modes = elicitation_modes(client_capabilities)
    if modes:
        legacy["elicitation"] = {mode: {} for mode in sorted(modes)}
    sampling = client_capabilities.get("sampling")
    if isinstance(sampling, dict):
        legacy["sampling"] = {
            k: {} for k in ("context", "tools") if isinstance(sampling.get(k), dict)
        }
    if isinstance(client_capabilities.get("roots"), dict):
        legacy["roots"] = {}
    experimental = client_capabilities.get("experimental")
    if isinstance(experimental, dict) and experimental:
        legacy["experimental"] = experimental
    return legacy


def capabilities_for_revision(revision: Revision, legacy: JsonObject) -> JsonObject:
    """`legacy` (the newest revision's shape) as the capabilities a `revision` client declares.

    Elicitation is `{}` (form) where the revision has no modes, and absent where it has no
    elicitation or where the client allowed only URL mode; sampling keeps `tools` and `context`
    only where the revision defines them."""
    shaped = dict(legacy)
    elicitation = shaped.pop("elicitation", None)
    if isinstance(elicitation, dict) and revision.elicitation:
        if revision.elicitation_modes:
            shaped["elicitation"] = elicitation
        elif "form" in elicitation:
            shaped["elicitation"] = {}
    sampling = shaped.get("sampling")
    if isinstance(sampling, dict) and not revision.sampling_tools:
        shaped["sampling"] = {}
    return shaped


def capability_fingerprint(legacy_capabilities: JsonObject) -> str:
    """A short stable name for a capability set: upstream sessions are pooled per fingerprint.

    The memo's key is exact: orjson writes equal bytes only for equal values (what it cannot write
    is hashed directly; parsed requests hold no NaN, which it would write as null)."""
    key = sorted_dumps(legacy_capabilities)
    if key is None:
        return digest(legacy_capabilities, 6).hex()
    fingerprint = _FINGERPRINTS.get(key)
    if fingerprint is None:
        fingerprint = digest(legacy_capabilities, 6).hex()
        if len(_FINGERPRINTS) < _MAX_FINGERPRINTS:
            _FINGERPRINTS[key] = fingerprint
    return fingerprint


def legacy_server_capabilities_to_modern(
    capabilities: JsonObject, *, listen_supported: bool
) -> JsonObject:
    """Translate upstream server capabilities for `server/discover`
    (2026-07-28/server/discover.mdx).

    `tasks` is dropped (not core any more); `listChanged`/`subscribe` are kept only when the
    bridge can deliver them on `subscriptions/listen` streams."""
    modern: JsonObject = {}
    for name, value in capabilities.items():
        if name == "tasks" or not isinstance(value, dict):
            continue
        value = dict(value)
        if not listen_supported:
            value.pop("listChanged", None)
            value.pop("subscribe", None)
        modern[name] = value
    return modern


__all__ = [
    "capabilities_for_revision",
    "capability_fingerprint",
    "elicitation_modes",
    "legacy_server_capabilities_to_modern",
    "modern_client_capabilities_to_legacy",
]
