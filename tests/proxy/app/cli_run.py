"""Running the real `mrtr-bridge` command (`python -m proxy`) in the tests of the command line:
without the caller's `MRTR_BRIDGE_*` variables, stdin closed, bounded in time."""

from __future__ import annotations

import os
import subprocess
import sys

from config import ENV_PREFIX

BRIDGE = [sys.executable, "-m", "proxy"]
TIMEOUT_S = 30


def clean_env(env: dict[str, str] | None = None) -> dict[str, str]:
    """This process's environment without `MRTR_BRIDGE_*`, plus `env`."""
    base = {k: v for k, v in os.environ.items() if not k.startswith(ENV_PREFIX)}
    return {**base, **(env or {})}


def bridge(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*BRIDGE, *args],
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
        env=clean_env(env),
        stdin=subprocess.DEVNULL,
        check=False,
    )


def one_line(done: subprocess.CompletedProcess[str]) -> str:
    """The one stderr line of a refused start; nothing on stdout, no traceback."""
    assert done.stdout == ""
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr
    assert "Traceback" not in done.stderr and "Value error" not in done.stderr
    return lines[0]
