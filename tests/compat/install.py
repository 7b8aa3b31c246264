"""Install the pinned servers into `.tools/compat/`: one npm prefix per package (exact version,
the SDK pinned by `overrides` where the row says so), one virtualenv per PyPI package (uv, with
dependencies resolved as of the release: `--exclude-newer`). Each install is stamped with what it
is made of, so a second run installs nothing."""

from __future__ import annotations

import json
import shutil
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from compat.catalog import REPO_ROOT, Server

UV = REPO_ROOT / ".tools" / "uv" / "bin" / "uv"
STAMP = ".compat-installed"
INSTALL_TIMEOUT_S = 600


def stamp_of(server: Server) -> Path:
    return server.install_dir / STAMP


def installed(server: Server) -> bool:
    """True when the install is there: a shared one (made by `make test`) by its executable, our
    own by its stamp."""
    if server.prefix is not None:
        return (server.bin_dir / server.bin).exists()
    stamp = stamp_of(server)
    return stamp.exists() and stamp.read_text("utf-8") == server.install_spec()


def _npm_manifest(server: Server) -> dict[str, object]:
    dependencies = {server.package: server.version}
    for extra in server.with_:
        name, _, version = extra.rpartition("@")
        dependencies[name] = version
    manifest: dict[str, object] = {"private": True, "dependencies": dependencies}
    if server.sdk is not None:
        dependencies["@modelcontextprotocol/sdk"] = server.sdk
        manifest["overrides"] = {"@modelcontextprotocol/sdk": server.sdk}
    return manifest


def _npm(server: Server, target: Path) -> list[list[str]]:
    (target / "package.json").write_text(json.dumps(_npm_manifest(server), indent=2), "utf-8")
    flags = ["--no-audit", "--no-fund", "--loglevel=error", "--ignore-scripts"]
    return [["npm", "install", "--prefix", str(target), *flags]]


def _pypi(server: Server, target: Path) -> list[list[str]]:
    python = str(target / "bin" / "python")
    at = [] if server.resolved_at is None else ["--exclude-newer", server.resolved_at]
    return [
        [str(UV), "venv", "--quiet", "--python", "python3", str(target)],
        [str(UV), "pip", "install", "--quiet", "--python", python, *at, server.spec,
         *server.with_],
    ]  # fmt: skip


def install(server: Server) -> str | None:
    """Install one server unless it is there; None when done, else why it failed."""
    if installed(server):
        return None
    if server.prefix is not None:
        return f"{server.install_dir} is missing: `make test-tools ts-peers` installs it"
    target = server.install_dir
    shutil.rmtree(target, ignore_errors=True)
    target.mkdir(parents=True)
    steps = _npm(server, target) if server.ecosystem == "npm" else _pypi(server, target)
    for argv in steps:
        done = subprocess.run(
            argv, capture_output=True, text=True, timeout=INSTALL_TIMEOUT_S, check=False
        )
        if done.returncode != 0:
            return f"{' '.join(argv[:3])} failed: {done.stderr.strip()[-600:]}"
    stamp_of(server).write_text(server.install_spec(), "utf-8")
    return None


def install_all(servers: list[Server], jobs: int = 3) -> dict[str, str]:
    """Install every distinct install of `servers`, `jobs` at a time: {name: failure}."""
    distinct: dict[Path, Server] = {}
    for server in servers:
        distinct.setdefault(server.install_dir, server)
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        outcomes = dict(zip(distinct, pool.map(install, distinct.values()), strict=True))
    return {
        server.name: failure
        for server in servers
        if (failure := outcomes[server.install_dir]) is not None
    }


def main() -> int:
    """`python -m compat.install [--fast]`: install the list (or the CI subset's rows)."""
    import sys

    from compat.catalog import load

    chosen = [server for server in load() if "--fast" not in sys.argv or server.fast]
    failures = install_all(chosen)
    for name, reason in failures.items():
        print(f"{name}: not installed: {reason}", file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
