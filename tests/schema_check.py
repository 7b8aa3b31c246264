"""Validate wire messages against the vendored official MCP schemas (tests/schemas/).

`assert_valid(message, "CallToolRequest", "modern")` checks `message` against
`$defs/CallToolRequest` of `schema-2026-07-28.json` (era "legacy": `schema-2025-11-25.json`)
with the JSON Schema Draft 2020-12 validator, format checking on; every `$ref` resolves
inside the same vendored file, so nothing is fetched.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any, Literal

from jsonschema import Draft202012Validator  # type: ignore[import-untyped]

from translators.eras import LEGACY_VERSION, MODERN_VERSION

Era = Literal["modern", "legacy"]

SCHEMA_DIR = Path(__file__).resolve().parent / "schemas"
SCHEMA_FILES: dict[Era, Path] = {
    "modern": SCHEMA_DIR / f"schema-{MODERN_VERSION}.json",
    "legacy": SCHEMA_DIR / f"schema-{LEGACY_VERSION}.json",
}


@cache
def _schema(era: Era) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(SCHEMA_FILES[era].read_text(encoding="utf-8"))
    Draft202012Validator.check_schema(loaded)  # once per era: the metaschema check is the slow part
    return loaded


def definitions(era: Era) -> frozenset[str]:
    """Names of every `$defs` entry of the era's schema."""
    return frozenset(_schema(era)["$defs"])


@cache
def validator(def_name: str, era: Era) -> Draft202012Validator:
    """A validator whose root is `$defs/<def_name>` of the era's schema."""
    schema = _schema(era)
    if def_name not in schema["$defs"]:
        raise KeyError(f"{def_name!r} is not a $defs entry of {SCHEMA_FILES[era].name}")
    root = {"$schema": schema["$schema"], "$defs": schema["$defs"], "$ref": f"#/$defs/{def_name}"}
    return Draft202012Validator(root, format_checker=Draft202012Validator.FORMAT_CHECKER)


def errors(instance: Any, def_name: str, era: Era) -> list[str]:
    """Every violation as `path: message`, best match first; empty when valid."""
    found = sorted(validator(def_name, era).iter_errors(instance), key=lambda e: (len(e.path), e.message))
    return [f"{'/'.join(str(p) for p in error.absolute_path) or '<root>'}: {error.message}" for error in found]


def assert_valid(instance: Any, def_name: str, era: Era) -> None:
    """Fail with every violation listed unless `instance` is a valid `def_name` of `era`."""
    problems = errors(instance, def_name, era)
    if problems:
        listing = "\n  ".join(problems[:20])
        raise AssertionError(f"not a valid {era} {def_name} ({SCHEMA_FILES[era].name}):\n  {listing}")
