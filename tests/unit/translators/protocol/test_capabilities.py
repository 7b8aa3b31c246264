"""Capability shapes in both eras (translators.protocol.capabilities; docs/decisions.md § 8)."""

from __future__ import annotations

import pytest
from schema_check import assert_valid

from translators.protocol import capabilities
from translators.protocol.capabilities import (
    capability_fingerprint,
    elicitation_modes,
    legacy_server_capabilities_to_modern,
    modern_client_capabilities_to_legacy,
)
from translators.protocol.eras import META_PREFIX
from translators.wire.fast_json import digest
from translators.wire.jsonrpc import JsonObject

# (modern client capabilities declared on a request, legacy `initialize` capabilities)
CLIENT_CAPABILITIES: list[tuple[JsonObject, JsonObject]] = [
    ({}, {}),
    ({"elicitation": {}}, {"elicitation": {"form": {}}}),
    ({"elicitation": {"form": {}}}, {"elicitation": {"form": {}}}),
    ({"elicitation": {"url": {}}}, {"elicitation": {"url": {}}}),
    ({"elicitation": {"url": {}, "form": {}}}, {"elicitation": {"form": {}, "url": {}}}),
    ({"sampling": {}}, {"sampling": {}}),
    ({"sampling": {"tools": {}}}, {"sampling": {"tools": {}}}),
    ({"sampling": {"context": {}, "tools": {}}}, {"sampling": {"context": {}, "tools": {}}}),
    ({"roots": {}}, {"roots": {}}),
    (
        {"experimental": {"com.example/beta": {"on": True}}},
        {"experimental": {"com.example/beta": {"on": True}}},
    ),
    ({"experimental": {}}, {}),
    ({"extensions": {f"{META_PREFIX}tasks": {}}}, {}),
    (
        {"elicitation": {"form": {}}, "sampling": {"tools": {}}, "roots": {}},
        {"elicitation": {"form": {}}, "sampling": {"tools": {}}, "roots": {}},
    ),
]

# (declared elicitation capability object, modes the bridge may forward)
ELICITATION_MODES: list[tuple[JsonObject, frozenset[str]]] = [
    ({}, frozenset()),
    ({"elicitation": {}}, frozenset({"form"})),
    ({"elicitation": {"form": {}}}, frozenset({"form"})),
    ({"elicitation": {"url": {}}}, frozenset({"url"})),
    ({"elicitation": {"form": {}, "url": {}}}, frozenset({"form", "url"})),
    ({"elicitation": {"form": True}}, frozenset({"form"})),
    ({"elicitation": "yes"}, frozenset()),
    ({"elicitation": None}, frozenset()),
]

# (legacy InitializeResult.capabilities, listen_supported, DiscoverResult.capabilities)
SERVER_CAPABILITIES: list[tuple[JsonObject, bool, JsonObject]] = [
    ({}, True, {}),
    ({"tools": {"listChanged": True}}, True, {"tools": {"listChanged": True}}),
    ({"tools": {"listChanged": True}}, False, {"tools": {}}),
    ({"prompts": {"listChanged": False}}, False, {"prompts": {}}),
    (
        {"resources": {"subscribe": True, "listChanged": True}},
        True,
        {"resources": {"subscribe": True, "listChanged": True}},
    ),
    ({"resources": {"subscribe": True, "listChanged": True}}, False, {"resources": {}}),
    ({"logging": {}, "completions": {}}, False, {"logging": {}, "completions": {}}),
    ({"tasks": {"list": {}, "cancel": {}}, "tools": {}}, True, {"tools": {}}),
    ({"experimental": {"com.example/x": {}}}, True, {"experimental": {"com.example/x": {}}}),
]


@pytest.mark.parametrize(("modern", "legacy"), CLIENT_CAPABILITIES)
def test_modern_client_capabilities_map_to_legacy(modern: JsonObject, legacy: JsonObject) -> None:
    """Each modern declaration maps to exactly the legacy `initialize` capabilities that declare the
    same."""
    assert_valid(modern, "ClientCapabilities", "modern")
    translated = modern_client_capabilities_to_legacy(modern)
    assert translated == legacy
    assert_valid(translated, "ClientCapabilities", "legacy")


def test_client_capability_mapping_never_declares_tasks_or_root_changes() -> None:
    """Legacy `tasks` and `roots.listChanged` are never declared upstream, whatever the request
    carries."""
    translated = modern_client_capabilities_to_legacy(
        {"roots": {"listChanged": True}, "tasks": {"list": {}}}
    )
    assert translated == {"roots": {}}


def test_client_capability_mapping_ignores_non_object_values() -> None:
    """Capabilities that are not JSON objects declare nothing."""
    assert (
        modern_client_capabilities_to_legacy({"sampling": True, "roots": [], "experimental": "x"})
        == {}
    )


@pytest.mark.parametrize(("declared", "modes"), ELICITATION_MODES)
def test_elicitation_modes(declared: JsonObject, modes: frozenset[str]) -> None:
    """An empty elicitation object means form only; non-object declarations mean none."""
    assert elicitation_modes(declared) == modes


def test_client_capability_mapping_does_not_mutate_its_input() -> None:
    """The request's own capability object is left untouched."""
    declared: JsonObject = {"elicitation": {}, "sampling": {"tools": {}}, "experimental": {"a": {}}}
    snapshot = repr(declared)
    modern_client_capabilities_to_legacy(declared)
    assert repr(declared) == snapshot


def test_fingerprint_is_stable_across_key_order() -> None:
    """The pool key does not depend on the order in which a client wrote its capabilities."""
    forward: JsonObject = {
        "elicitation": {"form": {}, "url": {}},
        "sampling": {"tools": {}, "context": {}},
        "roots": {},
    }
    backward: JsonObject = {
        "roots": {},
        "sampling": {"context": {}, "tools": {}},
        "elicitation": {"url": {}, "form": {}},
    }
    assert capability_fingerprint(forward) == capability_fingerprint(backward)
    assert capability_fingerprint(forward) == capability_fingerprint(dict(forward))


def test_fingerprint_is_equal_for_equivalent_declarations() -> None:
    """`elicitation: {}` and `elicitation: {form: {}}` declare the same upstream session."""
    implicit = modern_client_capabilities_to_legacy({"elicitation": {}})
    explicit = modern_client_capabilities_to_legacy({"elicitation": {"form": {}}})
    assert capability_fingerprint(implicit) == capability_fingerprint(explicit)


def test_fingerprint_separates_different_capability_sets() -> None:
    """Every distinct legacy capability set in the table gets its own pool key."""
    distinct = {repr(sorted(legacy.items())): legacy for _, legacy in CLIENT_CAPABILITIES}
    fingerprints = {capability_fingerprint(legacy) for legacy in distinct.values()}
    assert len(fingerprints) == len(distinct)


def test_fingerprint_is_a_short_hex_name() -> None:
    """A fingerprint is twelve lowercase hex characters (six digest bytes)."""
    fingerprint = capability_fingerprint({"roots": {}})
    assert len(fingerprint) == 12
    assert int(fingerprint, 16) >= 0
    assert fingerprint == fingerprint.lower()


@pytest.mark.parametrize(("legacy", "listen_supported", "modern"), SERVER_CAPABILITIES)
def test_legacy_server_capabilities_map_to_modern(
    legacy: JsonObject, listen_supported: bool, modern: JsonObject
) -> None:
    """`tasks` is dropped; `listChanged`/`subscribe` survive only when listen streams can deliver
    them."""
    assert_valid(legacy, "ServerCapabilities", "legacy")
    translated = legacy_server_capabilities_to_modern(legacy, listen_supported=listen_supported)
    assert translated == modern
    assert_valid(translated, "ServerCapabilities", "modern")


def test_server_capability_mapping_does_not_mutate_its_input() -> None:
    """Stripping `listChanged` works on copies, never on the cached InitializeResult."""
    legacy: JsonObject = {"tools": {"listChanged": True}, "resources": {"subscribe": True}}
    legacy_server_capabilities_to_modern(legacy, listen_supported=False)
    assert legacy == {"tools": {"listChanged": True}, "resources": {"subscribe": True}}


def test_server_capability_mapping_drops_non_object_values() -> None:
    """A capability whose value is not an object is not advertised."""
    assert (
        legacy_server_capabilities_to_modern(
            {"tools": True, "logging": None}, listen_supported=True
        )
        == {}
    )


@pytest.mark.parametrize(
    "legacy",
    [
        {},
        {"roots": {}},
        {"experimental": {"x": [1, 2.5, "é", None, True]}},
        {"experimental": {"big": 2**70}},  # beyond orjson: hashed directly
        {"experimental": {"lone": "\ud800"}},  # likewise
        {"experimental": {"one": 1}},
        {"experimental": {"one": 1.0}},  # written apart from 1, as canonical JSON does
    ],
)
def test_fingerprint_memo_gives_the_canonical_digest(legacy: JsonObject) -> None:
    """Looked up or computed, the fingerprint is the digest of the canonical JSON, the first time
    and every later time."""
    expected = digest(legacy, 6).hex()
    assert [capability_fingerprint(legacy) for _ in range(3)] == [expected] * 3


def test_fingerprint_memo_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    """Past its limit the memo keeps nothing new, and every set still gets its digest."""
    monkeypatch.setattr(capabilities, "_FINGERPRINTS", {})
    monkeypatch.setattr(capabilities, "_MAX_FINGERPRINTS", 2)
    sets: list[JsonObject] = [{"experimental": {"n": n}} for n in range(5)]
    assert [capability_fingerprint(s) for s in sets] == [digest(s, 6).hex() for s in sets]
    assert len(capabilities._FINGERPRINTS) == 2
