"""The first thing `mrtr-bridge` does: start the legacy stdio process its command line will need.

`guess_launch` reads the command the way the settings will (command line > environment > config
file) with the standard library only, before `proxy.app.cli` and everything it imports
(docs/operations.md, "Start-up over stdio"). It validates nothing: a wrong guess costs one process,
stopped as soon as the real settings disagree (`EarlyProcess.claim`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

from proxy.upstream.stdio.early import EarlyProcess, Launch
from proxy.upstream.stdio.early import start_early as start_launch

ENV_PREFIX: Final = "MRTR_BRIDGE_"
CONFIG_ENV: Final = "MRTR_BRIDGE_CONFIG"
# flags that stop the command before it serves
_NOT_SERVING: Final = frozenset({"-h", "--help", "--version"})


def _flag_values(argv: Sequence[str]) -> dict[str, str] | None:
    """`--flag value` and `--flag=value` pairs of a `stdio` command line; None if it is not one
    that serves (another command, help, version)."""
    if not argv or argv[0] != "stdio":
        return None
    values: dict[str, str] = {}
    words = list(argv[1:])
    while words:
        word = words.pop(0)
        if word in _NOT_SERVING:
            return None
        if not word.startswith("--"):
            continue
        name, sep, value = word.partition("=")
        if not sep:
            if not words:
                break
            value = words.pop(0)
        values[name] = value
    return values


def _env_pairs(raw: str) -> dict[str, str]:
    """`MRTR_BRIDGE_UPSTREAM_ENV`: comma-separated name=value pairs, as `config.loader` reads
    it."""
    pairs: dict[str, str] = {}
    for item in filter(None, (part.strip() for part in raw.split(","))):
        name, _, value = item.partition("=")
        pairs[name.strip()] = value.strip()
    return pairs


def _file_upstream(path: str | None) -> dict[str, Any]:
    """The `[upstream]` table of the config file, or {} (a file that cannot be read is reported
    later, by the real settings)."""
    if not path:
        return {}
    import tomllib

    try:
        with open(path, "rb") as file:
            table = tomllib.load(file).get("upstream", {})
    except (OSError, ValueError):
        return {}
    return table if isinstance(table, dict) else {}


def guess_launch(argv: Sequence[str], environ: Mapping[str, str]) -> Launch | None:
    """The legacy process `mrtr-bridge <argv>` will start, read as the settings will read it
    (command line > environment > config file); None when it will start none (not `stdio`, an HTTP
    upstream, no command) or when the guess is unsure. A wrong guess costs one process, stopped at
    once (`EarlyProcess.claim`)."""
    flags = _flag_values(argv)
    if flags is None:
        return None
    upstream = _file_upstream(flags.get("--config", environ.get(CONFIG_ENV)))

    def setting(name: str) -> Any:
        flag = f"--upstream-{name}" if name != "url" else "--upstream"
        if flag in flags:
            return flags[flag]
        return environ.get(f"{ENV_PREFIX}UPSTREAM_{name.upper()}", upstream.get(name))

    command, cwd, url = setting("command"), setting("cwd"), setting("url")
    raw_env = environ.get(f"{ENV_PREFIX}UPSTREAM_ENV")
    env = _env_pairs(raw_env) if raw_env is not None else upstream.get("env", {})
    if url or not isinstance(command, str) or not isinstance(env, dict):
        return None
    if cwd is not None and not isinstance(cwd, str):
        return None
    return Launch.of(command, {str(k): str(v) for k, v in env.items()}, cwd)


def start_early(argv: Sequence[str], environ: Mapping[str, str]) -> EarlyProcess | None:
    """Start the legacy process `mrtr-bridge <argv>` would start, or None (nothing to start, or it
    would not start: the bridge then reports why, as without this)."""
    launch = guess_launch(argv, environ)
    return start_launch(launch, environ) if launch is not None else None


__all__ = ["guess_launch", "start_early"]
