"""The pinned list of published servers (`servers.toml`) as `Server` records, and where each is
installed under the git-ignored `.tools/compat/`."""

from __future__ import annotations

import json
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

REPO_ROOT = Path(__file__).resolve().parents[2]
CATALOG = Path(__file__).with_name("servers.toml")
INSTALL_ROOT = REPO_ROOT / ".tools" / "compat"

Ecosystem = Literal["npm", "pypi"]
Transport = Literal["stdio", "http", "sse"]


@dataclass(frozen=True)
class Call:
    tool: str
    arguments: dict[str, Any]


@dataclass(frozen=True)
class Server:
    """One row: a package at an exact version, started one way."""

    name: str
    ecosystem: Ecosystem
    package: str
    version: str
    bin: str
    args: tuple[str, ...] = ()
    transport: Transport = "stdio"
    path: str = ""
    env: dict[str, str] = field(default_factory=dict)
    call: Call | None = None
    push: Call | None = None
    capabilities: Literal["all", "none"] = "all"
    resolved_at: str | None = None
    sdk: str | None = None
    with_: tuple[str, ...] = ()
    prefix: str | None = None
    fast: bool = False
    known: str | None = None

    @property
    def spec(self) -> str:
        """`package@version` (npm) or `package==version` (PyPI)."""
        return f"{self.package}{'@' if self.ecosystem == 'npm' else '=='}{self.version}"

    @property
    def install_dir(self) -> Path:
        """Its own prefix (npm) or virtualenv (PyPI); shared by rows of the same install."""
        if self.prefix is not None:
            return REPO_ROOT / self.prefix
        name = "+".join([f"{self.package}@{self.version}", *self.with_])
        if self.resolved_at is not None:
            name += f"~{self.resolved_at}"
        return INSTALL_ROOT / self.ecosystem / re.sub(r"[^A-Za-z0-9@.=+_-]", "_", name)

    @property
    def bin_dir(self) -> Path:
        if self.ecosystem == "npm":
            return self.install_dir / "node_modules" / ".bin"
        return self.install_dir / "bin"

    @property
    def url_path(self) -> str:
        return self.path or ("/sse" if self.transport == "sse" else "/mcp")

    def install_spec(self) -> str:
        """What the install is made of: its stamp's content (a change reinstalls)."""
        spec = {"spec": self.spec, "with": self.with_, "at": self.resolved_at, "sdk": self.sdk}
        return json.dumps(spec, sort_keys=True)


def _call(raw: dict[str, Any] | None) -> Call | None:
    return None if raw is None else Call(raw["tool"], dict(raw.get("arguments", {})))


def _server(raw: dict[str, Any]) -> Server:
    known = {f for f in Server.__dataclass_fields__} | {"with"}
    unknown = set(raw) - known
    if unknown:
        raise ValueError(f"{raw.get('name')}: unknown fields {sorted(unknown)}")
    fields = {k: v for k, v in raw.items() if k not in ("call", "push", "with", "args", "env")}
    return Server(
        **fields,
        args=tuple(raw.get("args", ())),
        env={str(k): str(v) for k, v in raw.get("env", {}).items()},
        call=_call(raw.get("call")),
        push=_call(raw.get("push")),
        with_=tuple(raw.get("with", ())),
    )


def load(path: Path = CATALOG) -> list[Server]:
    """Every server of the list, in its order; names are unique."""
    servers = [_server(raw) for raw in tomllib.loads(path.read_text("utf-8"))["server"]]
    names = [server.name for server in servers]
    duplicates = sorted({name for name in names if names.count(name) > 1})
    if duplicates:
        raise ValueError(f"duplicate server names: {duplicates}")
    return servers
