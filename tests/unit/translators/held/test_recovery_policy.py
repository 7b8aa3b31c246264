"""The re-execution policy of a lost held call (translators.held.recovery_policy)."""

from __future__ import annotations

from typing import Any

import pytest

from translators.held.recovery_policy import (
    NOT_ALLOWLISTED,
    NOT_ANNOTATED,
    NOT_LISTED_TOOL,
    OFF,
    REFUSAL_CODES,
    decide,
    needs_annotations,
    subject,
)
from translators.protocol.eras import PROMPTS_GET, RESOURCES_READ, TOOLS_CALL

TOOL = {"name": "search", "arguments": {"q": "x"}}
PROMPT = {"name": "greet"}
RESOURCE = {"uri": "file:///notes.txt"}


@pytest.mark.parametrize(
    ("annotations", "refusal"),
    [
        ({"readOnlyHint": True}, None),
        ({"idempotentHint": True}, None),
        ({"readOnlyHint": False, "idempotentHint": True, "destructiveHint": True}, None),
        ({}, NOT_ANNOTATED),
        ({"readOnlyHint": False, "idempotentHint": False}, NOT_ANNOTATED),
        ({"readOnlyHint": "true", "idempotentHint": 1}, NOT_ANNOTATED),  # only a JSON true counts
        ({"destructiveHint": False, "openWorldHint": False}, NOT_ANNOTATED),
        (None, NOT_LISTED_TOOL),
    ],
)
def test_annotated_trusts_only_a_true_read_only_or_idempotent_hint(
    annotations: Any, refusal: Any
) -> None:
    assert decide("annotated", (), TOOLS_CALL, TOOL, annotations) == refusal


def test_annotated_allows_prompts_and_resources_without_annotations() -> None:
    assert decide("annotated", (), PROMPTS_GET, PROMPT) is None
    assert decide("annotated", (), RESOURCES_READ, RESOURCE) is None
    methods = (TOOLS_CALL, PROMPTS_GET, RESOURCES_READ)
    assert [needs_annotations("annotated", m) for m in methods] == [True, False, False]
    assert not needs_annotations("allowlist", TOOLS_CALL) and not needs_annotations(
        "off", TOOLS_CALL
    )


@pytest.mark.parametrize(
    ("method", "params", "patterns", "refusal"),
    [
        (TOOLS_CALL, TOOL, ("search",), None),
        (TOOLS_CALL, TOOL, ("sea*",), None),
        (TOOLS_CALL, TOOL, ("Search",), NOT_ALLOWLISTED),  # case-sensitive
        (TOOLS_CALL, TOOL, (), NOT_ALLOWLISTED),
        (PROMPTS_GET, PROMPT, ("greet",), NOT_ALLOWLISTED),  # a bare name is a tool's
        (PROMPTS_GET, PROMPT, ("prompts/get:*",), None),
        (RESOURCES_READ, RESOURCE, ("resources/read:file:///*.txt",), None),
        (RESOURCES_READ, RESOURCE, ("prompts/get:*", "search"), NOT_ALLOWLISTED),
    ],
)
def test_allowlist_matches_globs_and_ignores_annotations(
    method: str, params: dict[str, Any], patterns: tuple[str, ...], refusal: Any
) -> None:
    assert decide("allowlist", patterns, method, params, {"readOnlyHint": True}) == refusal


def test_off_refuses_everything() -> None:
    for method, params in ((TOOLS_CALL, TOOL), (PROMPTS_GET, PROMPT), (RESOURCES_READ, RESOURCE)):
        assert decide("off", ("*", "prompts/get:*"), method, params, {"readOnlyHint": True}) is OFF


def test_subjects_and_refusals_name_the_policy() -> None:
    assert [
        subject(TOOLS_CALL, TOOL),
        subject(PROMPTS_GET, PROMPT),
        subject(RESOURCES_READ, RESOURCE),
    ] == ["search", "prompts/get:greet", "resources/read:file:///notes.txt"]
    assert NOT_ANNOTATED.text.startswith("not annotated idempotent")
    assert "recovery.tools" in NOT_ALLOWLISTED.text and "recovery.reexecute" in OFF.text
    assert REFUSAL_CODES == {
        "off",
        "not_annotated_idempotent",
        "tool_not_listed",
        "not_allowlisted",
        "answers_not_carried",
        "too_old",
        "already_used",
    }
