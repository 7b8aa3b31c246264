"""Validate wire messages against the vendored official MCP schemas (tests/schemas/).

`assert_valid(message, "CallToolRequest", "modern")` checks `message` against the definition
`CallToolRequest` of `schema-2026-07-28.json` (era "legacy": `schema-2025-11-25.json`; any revision
string, e.g. "2025-03-26", picks `schema-<revision>.json`) with the JSON Schema draft the file
declares (2020-12 from 2025-11-25 on, draft-07 before; definitions under `$defs` or `definitions`),
format checking on; every `$ref` resolves inside the same vendored file, so nothing is fetched.

`closed=True` also refuses members the revision does not define: every object schema that says
nothing about `additionalProperties` gets `additionalProperties: false` (with `_meta`, reserved on
every object, still allowed). Use it for what the bridge sends to an older server ("nothing a
revision does not have"); the official schemas leave most objects open.
"""

from __future__ import annotations

import copy
import json
from functools import cache
from pathlib import Path
from typing import Any, Literal

from jsonschema import Draft202012Validator  # type: ignore[import-untyped]
from jsonschema.validators import validator_for  # type: ignore[import-untyped]

from translators.protocol.eras import LEGACY_VERSION, MODERN_VERSION

Era = Literal["modern", "legacy"] | str

SCHEMA_DIR = Path(__file__).resolve().parent / "schemas"
OLDER_REVISIONS = ("2025-06-18", "2025-03-26", "2024-11-05")
ERA_VERSIONS = {"modern": MODERN_VERSION, "legacy": LEGACY_VERSION}
SCHEMA_FILES: dict[str, Path] = {
    "modern": SCHEMA_DIR / f"schema-{MODERN_VERSION}.json",
    "legacy": SCHEMA_DIR / f"schema-{LEGACY_VERSION}.json",
    **{revision: SCHEMA_DIR / f"schema-{revision}.json" for revision in OLDER_REVISIONS},
}


def _file(era: Era) -> Path:
    version = ERA_VERSIONS.get(era, era)
    path = SCHEMA_DIR / f"schema-{version}.json"
    if not path.exists():
        raise KeyError(f"no vendored schema for {era!r} ({path.name})")
    return path


def _defs_key(schema: dict[str, Any]) -> str:
    return "$defs" if "$defs" in schema else "definitions"


@cache
def _schema(era: Era) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(_file(era).read_text(encoding="utf-8"))
    # once per file: the metaschema check is the slow part
    validator_for(loaded).check_schema(loaded)
    return loaded


@cache
def _closed_schema(era: Era) -> dict[str, Any]:
    closed = copy.deepcopy(_schema(era))
    _close(closed)
    return closed


def _close(node: Any) -> None:
    if isinstance(node, list):
        for item in node:
            _close(item)
        return
    if not isinstance(node, dict):
        return
    properties = node.get("properties")
    if isinstance(properties, dict) and "additionalProperties" not in node:
        node["additionalProperties"] = False
        properties.setdefault("_meta", {"type": "object"})
    for value in node.values():
        _close(value)


def definition(def_name: str, era: Era) -> dict[str, Any]:
    """The definition `def_name` of the era's schema, as written."""
    schema = _schema(era)
    found: dict[str, Any] = schema[_defs_key(schema)][def_name]
    return found


def definitions(era: Era) -> frozenset[str]:
    """Names of every definition of the era's schema."""
    schema = _schema(era)
    return frozenset(schema[_defs_key(schema)])


@cache
def validator(def_name: str, era: Era, closed: bool = False) -> Any:
    """A validator whose root is the definition `def_name` of the era's schema."""
    schema = _closed_schema(era) if closed else _schema(era)
    key = _defs_key(schema)
    if def_name not in schema[key]:
        raise KeyError(f"{def_name!r} is not a definition of {_file(era).name}")
    root = {"$schema": schema["$schema"], key: schema[key], "$ref": f"#/{key}/{def_name}"}
    cls = validator_for(schema, default=Draft202012Validator)
    return cls(root, format_checker=cls.FORMAT_CHECKER)


def errors(instance: Any, def_name: str, era: Era, *, closed: bool = False) -> list[str]:
    """Every violation as `path: message`, best match first; empty when valid."""
    found = sorted(
        validator(def_name, era, closed).iter_errors(instance),
        key=lambda e: (len(e.path), e.message),
    )
    return [
        f"{'/'.join(str(p) for p in error.absolute_path) or '<root>'}: {error.message}"
        for error in found
    ]


def assert_valid(instance: Any, def_name: str, era: Era, *, closed: bool = False) -> None:
    """Fail with every violation listed unless `instance` is a valid `def_name` of `era`."""
    problems = errors(instance, def_name, era, closed=closed)
    if problems:
        listing = "\n  ".join(problems[:20])
        kind = "closed " if closed else ""
        raise AssertionError(
            f"not a valid {kind}{era} {def_name} ({_file(era).name}):\n  {listing}"
        )


def method_definitions(union: str, era: Era) -> dict[str, str]:
    """`{method: definition name}` for the members of a union such as `ClientRequest` or
    `ServerNotification`."""
    schema = _schema(era)
    defs = schema[_defs_key(schema)]
    found: dict[str, str] = {}
    members = (
        [m["$ref"].rsplit("/", 1)[-1] for m in defs[union]["anyOf"]]
        if "anyOf" in defs[union]
        else [union]
    )
    for name in members:
        method = defs[name].get("properties", {}).get("method", {}).get("const")
        if isinstance(method, str):
            found[method] = name
    return found
