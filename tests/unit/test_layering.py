"""The dependency rules of docs/decisions.md § 1, checked on every module's imports (AST, no
execution)."""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("translators", "config", "proxy")
STDLIB = frozenset(sys.stdlib_module_names)
# Standard-library modules that would give pure code I/O, concurrency, clocks or randomness.
IMPURE_STDLIB = frozenset(
    {
        "asyncio",
        "socket",
        "selectors",
        "ssl",
        "subprocess",
        "threading",
        "multiprocessing",
        "concurrent",
        "logging",
        "time",
        "datetime",
        "random",
        "secrets",
        "uuid",
        "os",
        "signal",
        "http",
        "urllib",
    }
)
# translators/* may use the standard library (minus the impure part); request_state.py and
# tasks_ext/task_ids.py also cryptography, fast_json.py orjson, and pushes.py
# pydantic (the brief: pydantic models for the messages the bridge
# inspects: the client's input responses); config/* the standard library and pydantic.
EXTRA_ALLOWED = {
    "translators": {"translators"},
    "translators/pushes.py": {"translators", "pydantic", "typing_extensions"},
    "translators/request_state.py": {"translators", "cryptography"},
    "translators/tasks_ext/task_ids.py": {
        "translators",
        "cryptography",
    },  # sealed like requestState
    "translators/fast_json.py": {"translators", "orjson"},
    "config": {"config", "pydantic"},
}
# Inside proxy/: the fronts and the upstream transports never import each other.
SEPARATED = (("proxy/front_", "proxy.upstream"), ("proxy/upstream/", "proxy.front_"))


def modules() -> Iterator[Path]:
    for package in PACKAGES:
        yield from sorted((ROOT / package).rglob("*.py"))


def imported_names(path: Path) -> Iterator[tuple[int, str]]:
    """(line, absolute dotted name) of every import in `path`, relative imports resolved."""
    package = ".".join(path.relative_to(ROOT).with_suffix("").parts[:-1])
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            yield from ((node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                yield node.lineno, ".".join([*base, node.module] if node.module else base)
            elif node.module != "__future__":
                yield node.lineno, node.module or ""


def violation(relative: str, name: str) -> str | None:
    """Why `relative` (a path like proxy/front_http.py) may not import `name`, or None."""
    top = name.split(".")[0]
    if top == "tests":
        return "runtime code never imports tests"
    if relative.startswith("translators/"):
        allowed = EXTRA_ALLOWED.get(relative, EXTRA_ALLOWED["translators"])
        if top in IMPURE_STDLIB or not (top in STDLIB or top in allowed):
            return (
                "translators/ is pure: stdlib only (cryptography in request_state.py, "
                "pydantic in pushes.py)"
            )
    if relative.startswith("config/") and not (top in STDLIB or top in EXTRA_ALLOWED["config"]):
        return "config/ imports the standard library and pydantic only"
    for prefix, forbidden in SEPARATED:
        if relative.startswith(prefix) and (name == forbidden or name.startswith(forbidden)):
            return (
                "fronts and upstream transports meet only in dispatch.py, routes/ and held_calls.py"
            )
    return None


def test_every_package_is_scanned() -> None:
    """The walk finds the modules of all three packages, so the rules below are not vacuous."""
    found = {path.relative_to(ROOT).parts[0] for path in modules()}
    assert found == set(PACKAGES)


@pytest.mark.parametrize("path", list(modules()), ids=lambda path: str(path.relative_to(ROOT)))
def test_module_imports_follow_the_layering(path: Path) -> None:
    """No module imports across a layer boundary of docs/decisions.md § 1."""
    relative = path.relative_to(ROOT).as_posix()
    problems = [
        f"{relative}:{line} imports {name}: {reason}"
        for line, name in imported_names(path)
        if (reason := violation(relative, name)) is not None
    ]
    assert problems == []


@pytest.mark.parametrize("path", list(modules()), ids=lambda path: str(path.relative_to(ROOT)))
def test_no_module_prints(path: Path) -> None:
    """stdout carries protocol bytes only (stdio mode), so nothing calls print()."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    calls = [
        node.lineno
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == "print"
    ]
    assert calls == []


@pytest.mark.parametrize(
    ("relative", "name", "allowed"),
    [
        ("translators/inbound.py", "json", True),
        ("translators/inbound.py", "asyncio", False),
        ("translators/inbound.py", "time", False),
        ("translators/inbound.py", "aiohttp", False),
        ("translators/inbound.py", "structlog", False),
        ("translators/inbound.py", "config.settings", False),
        ("translators/inbound.py", "proxy.context", False),
        ("translators/inbound.py", "pydantic", False),
        ("translators/inbound.py", "cryptography.hazmat", False),
        ("translators/request_state.py", "cryptography.hazmat", True),
        ("config/loader.py", "pydantic", True),
        ("config/loader.py", "proxy", False),
        ("config/loader.py", "translators.eras", False),
        ("proxy/front_http.py", "proxy.upstream.pool", False),
        ("proxy/front_stdio.py", "proxy.upstream", False),
        ("proxy/upstream/http.py", "proxy.front_http", False),
        ("proxy/dispatch.py", "proxy.upstream.pool", True),
        ("proxy/app.py", "tests.proxy", False),
    ],
)
def test_the_rules_themselves(relative: str, name: str, allowed: bool) -> None:
    """The guard allows and forbids what docs/decisions.md § 1 says."""
    assert (violation(relative, name) is None) is allowed
