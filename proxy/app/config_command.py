"""`mrtr-bridge config`: `example` prints the commented example settings file, `validate FILE`
checks one as `serve` loads it, without starting (like `nginx -t` and `haproxy -c`).

`validate` reads defaults < FILE < the `MRTR_BRIDGE_*` environment with `config.load_settings`
(the one loader: the same checks, the same one-line errors) and the upstream checks `serve` makes
(`cli_hints.settings_problem`: for each upstream a url or a command, not both; a stdio program
that exists). Valid: the
effective settings as TOML on stdout, every secret masked (`config.effective`), exit 0. Not: one
line on stderr, exit 2.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from typing import Final, TextIO

from config import CONFIG_ENV, ENV_PREFIX, ConfigError, load_settings
from config.effective import MASK, effective_toml
from proxy.app.cli_hints import example_config, fail, settings_problem

EXIT_OK: Final = 0


def _header(args: argparse.Namespace, env: Mapping[str, str]) -> str:
    used = sorted(name for name in env if name.startswith(ENV_PREFIX) and name != CONFIG_ENV)
    layers = f"environment ({', '.join(used)})" if used else "environment (no MRTR_BRIDGE_*)"
    return (
        f"# mrtr-bridge config validate: {args.file} is valid.\n"
        f"# Effective settings: defaults < {args.file} < {layers}.\n"
        f'# Flags given to serve or stdio still override them. Secrets are shown as "{MASK}".\n'
    )


def _validate(args: argparse.Namespace, env: Mapping[str, str], out: TextIO) -> int:
    try:
        settings = load_settings(args.file, env)
    except ConfigError as exc:
        fail(str(exc))
    problem = settings_problem(settings, required=False, check_program=True)
    if problem is not None:
        fail(problem)
    note = ""
    if not (settings.upstream.url or settings.upstream.command or settings.upstreams):
        note = "# No upstream set: serve and stdio need --upstream URL or --upstream-command CMD.\n"
    out.write(_header(args, env) + note + "\n" + effective_toml(settings))
    return EXIT_OK


def run_config(args: argparse.Namespace, env: Mapping[str, str], out: TextIO) -> int:
    """`config example` or `config validate FILE`; returns the exit status."""
    if args.action == "validate":
        return _validate(args, env, out)
    out.write(example_config())
    return EXIT_OK


__all__ = ["run_config"]
