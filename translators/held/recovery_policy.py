"""Whether a lost held call may be run again upstream (docs/operations.md § Recovery).

Pure: the caller supplies the setting (`recovery.reexecute`, `recovery.tools`) and, for
`tools/call` under `annotated`, the tool's annotations as the upstream listed them. A refusal names
the policy that refused, as a metric label (`code`) and a sentence for the log (`text`).
"""

from __future__ import annotations

from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import Any, Final, Literal

from translators.protocol.eras import PROMPTS_GET, RESOURCES_READ, TOOLS_CALL

Mode = Literal["annotated", "allowlist", "off"]
SAFE_HINTS: Final = ("readOnlyHint", "idempotentHint")


@dataclass(frozen=True)
class Refusal:
    code: str  # a bounded metric label
    text: str  # for the log: names the policy


OFF: Final = Refusal("off", "recovery.reexecute is off")
NOT_ANNOTATED: Final = Refusal(
    "not_annotated_idempotent",
    "not annotated idempotent (neither readOnlyHint nor idempotentHint is true)",
)
NOT_LISTED_TOOL: Final = Refusal(
    "tool_not_listed", "not annotated idempotent (the upstream does not list the tool)"
)
NOT_ALLOWLISTED: Final = Refusal("not_allowlisted", "not in the recovery.tools allowlist")
NOT_CARRIED: Final = Refusal(
    "answers_not_carried",
    "the earlier answers were not sealed (over recovery.max_answers_bytes, or recovery off)",
)
TOO_OLD: Final = Refusal("too_old", "older than held.ttl_s + recovery.grace_s")
ALREADY_USED: Final = Refusal("already_used", "this requestState was already used")
REFUSAL_CODES: Final = frozenset(
    r.code
    for r in (
        OFF,
        NOT_ANNOTATED,
        NOT_LISTED_TOOL,
        NOT_ALLOWLISTED,
        NOT_CARRIED,
        TOO_OLD,
        ALREADY_USED,
    )
)


def subject(method: str, params: dict[str, Any]) -> str:
    """What `recovery.tools` patterns match: a tool's name, `prompts/get:<name>`,
    `resources/read:<uri>`."""
    if method == TOOLS_CALL:
        return str(params.get("name"))
    if method == PROMPTS_GET:
        return f"{PROMPTS_GET}:{params.get('name')}"
    return f"{RESOURCES_READ}:{params.get('uri')}"


def is_annotated_safe(annotations: dict[str, Any]) -> bool:
    """`readOnlyHint: true` or `idempotentHint: true` (a literal JSON true, nothing truthy)."""
    return any(annotations.get(hint) is True for hint in SAFE_HINTS)


def needs_annotations(mode: Mode, method: str) -> bool:
    """Whether `decide` needs the tool's annotations (the caller lists tools only then)."""
    return mode == "annotated" and method == TOOLS_CALL


def decide(
    mode: Mode,
    patterns: tuple[str, ...],
    method: str,
    params: dict[str, Any],
    annotations: dict[str, Any] | None = None,
) -> Refusal | None:
    """None when the call may run again; else the refusal. `annotations` is the tool's (None: the
    upstream does not list it); only read for `tools/call` under `annotated`."""
    if mode == "off":
        return OFF
    if mode == "allowlist":
        name = subject(method, params)
        return None if any(fnmatchcase(name, pattern) for pattern in patterns) else NOT_ALLOWLISTED
    if method != TOOLS_CALL:
        return None  # prompts/get and resources/read read
    if annotations is None:
        return NOT_LISTED_TOOL
    return None if is_annotated_safe(annotations) else NOT_ANNOTATED


__all__ = [
    "ALREADY_USED",
    "NOT_ALLOWLISTED",
    "NOT_ANNOTATED",
    "NOT_CARRIED",
    "NOT_LISTED_TOOL",
    "OFF",
    "REFUSAL_CODES",
    "SAFE_HINTS",
    "TOO_OLD",
    "Mode",
    "Refusal",
    "decide",
    "is_annotated_safe",
    "needs_annotations",
    "subject",
]
