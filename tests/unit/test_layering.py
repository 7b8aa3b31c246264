"""The dependency rules of docs/decisions.md § 1 and the folder map of docs/architecture.md,
checked on every module's imports (AST, no execution): what each folder may import, no import
cycles between modules (type-only imports included), and a small top level."""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Final

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
    "translators/protocol/pushes.py": {"translators", "pydantic", "typing_extensions"},
    "translators/held/request_state.py": {"translators", "cryptography"},
    "translators/tasks_ext/task_ids.py": {
        "translators",
        "cryptography",
    },  # sealed like requestState
    "translators/wire/fast_json.py": {"translators", "orjson"},
    "config": {"config", "pydantic"},
}
# What each folder of proxy/ and translators/ may import of the others (its own modules always):
# the architecture as data (docs/architecture.md, "The tree"). The fronts never reach the
# upstream, the calls or the engine's internals; only proxy/app wires concrete classes together.
MAY_IMPORT: dict[str, frozenset[str]] = {
    "translators.wire": frozenset(),
    "translators.protocol": frozenset({"translators.wire"}),
    "translators.auth": frozenset({"translators.wire"}),
    "translators.held": frozenset({"translators.protocol", "translators.wire"}),
    "translators.tasks_ext": frozenset(
        {"translators.held", "translators.protocol", "translators.wire"}
    ),
    "translators.reverse": frozenset({"translators.protocol", "translators.wire"}),
    "translators": frozenset({"translators.protocol", "translators.wire"}),  # check_report
    "proxy.common": frozenset(),
    "proxy.observe": frozenset({"proxy.common"}),
    "proxy.auth": frozenset(),
    "proxy.upstream": frozenset({"proxy.auth", "proxy.common"}),
    "proxy.calls": frozenset({"proxy.common", "proxy.observe", "proxy.upstream"}),
    "proxy.cluster": frozenset({"proxy.auth", "proxy.common", "proxy.observe"}),
    "proxy.engine": frozenset(
        {"proxy.auth", "proxy.calls", "proxy.common", "proxy.observe", "proxy.upstream"}
    ),
    "proxy.passthrough": frozenset({"proxy.auth", "proxy.common", "proxy.upstream"}),
    "proxy.reverse": frozenset({"proxy.common", "proxy.passthrough", "proxy.upstream"}),
    "proxy.http_front": frozenset(
        {"proxy.auth", "proxy.common", "proxy.observe", "proxy.passthrough", "proxy.reverse"}
    ),
    "proxy.stdio_front": frozenset(
        {"proxy.common", "proxy.observe", "proxy.passthrough", "proxy.reverse"}
    ),
    "proxy.app": frozenset(
        {
            "proxy.auth",
            "proxy.calls",
            "proxy.cluster",
            "proxy.common",
            "proxy.engine",
            "proxy.http_front",
            "proxy.observe",
            "proxy.passthrough",
            "proxy.reverse",
            "proxy.stdio_front",
            "proxy.upstream",
        }
    ),
    "proxy": frozenset({"proxy.app"}),  # __main__
}
MAX_TOP_LEVEL_MODULES = 8  # modules directly in proxy/ and in translators/ (__init__ included)


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
    """Why `relative` (a path like proxy/http_front.py) may not import `name`, or None."""
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
    if top in ("proxy", "translators") and top == relative.split("/")[0]:
        own, other = folder_of(relative.removesuffix(".py").split("/")), folder_of(name.split("."))
        if own != other and other not in MAY_IMPORT[own]:
            return f"{own} may import only {sorted(MAY_IMPORT[own])} (docs/architecture.md)"
    return None


def folder_of(parts: list[str]) -> str:
    """The folder that owns a module (as path parts or dotted parts): `proxy.upstream` for
    proxy/upstream/http/session.py, `proxy` for proxy/__main__.py."""
    if len(parts) > 2 or (len(parts) == 2 and (ROOT / parts[0] / parts[1]).is_dir()):
        return ".".join(parts[:2])
    return parts[0]


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
        ("translators/protocol/request_validation.py", "json", True),
        ("translators/protocol/request_validation.py", "asyncio", False),
        ("translators/protocol/request_validation.py", "time", False),
        ("translators/protocol/request_validation.py", "aiohttp", False),
        ("translators/protocol/request_validation.py", "structlog", False),
        ("translators/protocol/request_validation.py", "config.settings", False),
        ("translators/protocol/request_validation.py", "proxy.common.front_request", False),
        ("translators/protocol/request_validation.py", "pydantic", False),
        ("translators/protocol/request_validation.py", "cryptography.hazmat", False),
        ("translators/held/request_state.py", "cryptography.hazmat", True),
        ("config/loader.py", "pydantic", True),
        ("config/loader.py", "proxy", False),
        ("config/loader.py", "translators.protocol.eras", False),
        ("proxy/http_front/endpoint.py", "proxy.upstream.pool", False),
        ("proxy/http_front/endpoint.py", "proxy.engine.engine", False),
        ("proxy/http_front/endpoint.py", "proxy.common.http_replies", True),
        ("proxy/stdio_front/front.py", "proxy.upstream", False),
        ("proxy/upstream/http/session.py", "proxy.http_front", False),
        ("proxy/upstream/http/session.py", "proxy.upstream.base", True),
        ("proxy/upstream/pool.py", "proxy.calls.call", False),
        ("proxy/engine/engine.py", "proxy.upstream.pool", True),
        ("proxy/calls/call.py", "proxy.engine.routes.route_context", False),
        ("proxy/app/http_app.py", "proxy.engine.engine", True),
        ("proxy/app/http_app.py", "tests.proxy", False),
        ("proxy/__main__.py", "proxy.app.cli", True),
        ("translators/wire/errors.py", "translators.protocol.eras", False),
        ("translators/held/machine.py", "translators.protocol.pushes", True),
        ("proxy/reverse/rounds.py", "proxy.upstream.modern.caller", True),
        ("proxy/upstream/modern/http_caller.py", "proxy.reverse.sessions", False),
        ("proxy/upstream/http/relayed.py", "proxy.passthrough.legacy_stdio", False),
        ("proxy/passthrough/modern_upstream.py", "proxy.upstream.modern.stdio_caller", True),
        ("proxy/passthrough/modern_upstream.py", "proxy.reverse.front", False),
    ],
)
def test_the_rules_themselves(relative: str, name: str, allowed: bool) -> None:
    """The guard allows and forbids what docs/decisions.md § 1 says."""
    assert (violation(relative, name) is None) is allowed


# Where an aiohttp client may be made: the upstream's, in the one module that gives every upstream
# client its proxy, TLS, headers and redirect rule; and the replicas' own, which talk to peers.
CLIENT_MAKERS: Final = frozenset({"proxy/upstream/http/outbound.py", "proxy/app/http_app.py"})


def test_upstream_clients_are_made_in_one_place() -> None:
    """Every HTTP client to the upstream comes from `proxy.upstream.http.outbound.upstream_client`
    (docs/architecture.md): a module that built its own would bypass the redirect rule."""
    makers = {
        path.relative_to(ROOT).as_posix()
        for path in modules()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.Call) and _called_name(node.func) == "ClientSession"
    }
    assert makers == CLIENT_MAKERS


def _called_name(func: ast.expr) -> str | None:
    if isinstance(func, ast.Attribute):
        return func.attr
    return func.id if isinstance(func, ast.Name) else None


def test_every_folder_is_mapped() -> None:
    """A new folder gets its row in MAY_IMPORT (and its place in docs/architecture.md)."""
    folders = {folder_of(list(path.relative_to(ROOT).with_suffix("").parts)) for path in modules()}
    assert folders - {"config"} == set(MAY_IMPORT)


def test_no_import_cycles() -> None:
    """No module imports itself through others, type-only imports included (Tarjan's SCCs)."""
    names = {dotted(path) for path in modules()}
    graph = {
        dotted(path): (set(imported_modules(path, names)) & names) - {dotted(path)}
        for path in modules()
    }
    assert strongly_connected(graph) == []


def test_top_levels_stay_small() -> None:
    """proxy/ and translators/ hold folders, and at most a few modules directly."""
    for package in ("proxy", "translators"):
        direct = sorted(path.name for path in (ROOT / package).glob("*.py"))
        assert len(direct) <= MAX_TOP_LEVEL_MODULES, (package, direct)


def dotted(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported_modules(path: Path, names: set[str]) -> Iterator[str]:
    """Our modules `path` imports: `from package import module` reaches the module."""
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.ImportFrom) and node.module and not node.level:
            for alias in node.names:
                full = f"{node.module}.{alias.name}"
                yield full if full in names else node.module
        elif isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)


def strongly_connected(graph: dict[str, set[str]]) -> list[list[str]]:
    """The cycles of `graph`: its strongly connected components of more than one module."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    cycles: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in sorted(graph[node]):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return cycles


def test_the_cycle_finder_finds_cycles() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set()}
    assert strongly_connected(graph) == [["a", "b", "c"]]
