"""The README's install story, for real: `uv tool install .` from the checkout (uv pinned in
.tools/uv by the Makefile) gives a `mrtr-bridge` in an environment of its own, whose
`config example` prints the example file shipped as package data and whose `--help` names no file
it lacks; and the wheel's top-level import packages are the three the README warns about."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from config import ENV_PREFIX

from .harness import REPO_ROOT

UV = REPO_ROOT / ".tools" / "uv" / "bin" / "uv"
TIMEOUT_S = 300


def test_uv_tool_install_gives_an_isolated_command_with_its_example_config(tmp_path: Path) -> None:
    assert UV.exists(), f"{UV} is missing: run `make test`, which installs it"
    base = {k: v for k, v in os.environ.items() if not k.startswith(ENV_PREFIX)}
    env = {**base, "UV_TOOL_DIR": str(tmp_path / "tools"), "UV_TOOL_BIN_DIR": str(tmp_path / "bin")}
    build = REPO_ROOT / "build"  # setuptools builds the wheel there: left as it was found
    had_build = build.exists()
    try:
        done = subprocess.run(
            [str(UV), "tool", "install", "--quiet", str(REPO_ROOT)],
            env=env,
            capture_output=True,
            text=True,
            timeout=TIMEOUT_S,
            check=False,
        )
    finally:
        if not had_build:
            shutil.rmtree(build, ignore_errors=True)
    assert done.returncode == 0, done.stderr
    command = tmp_path / "bin" / "mrtr-bridge"

    def run(*args: str) -> str:
        result = subprocess.run(
            [str(command), *args],
            cwd=tmp_path,
            env=base,
            capture_output=True,
            text=True,
            check=True,
        )
        return result.stdout

    shipped = (REPO_ROOT / "config" / "bridge.example.toml").read_text(encoding="utf-8")
    assert run("config", "example") == shipped
    for args in (["--help"], ["serve", "--help"], ["check", "--help"]):
        assert "bridge.example.toml" not in run(*args)
    (site,) = (tmp_path / "tools" / "mrtr-bridge" / "lib").glob("python3*/site-packages")
    (record,) = site.glob("mrtr_bridge-*.dist-info/RECORD")
    top_level = {
        line.split("/", 1)[0]
        for line in record.read_text().splitlines()
        if "/" in line and not line.startswith(("mrtr_bridge-", "../"))
    }
    assert top_level == {"proxy", "translators", "config"}
    assert (site / "config" / "bridge.example.toml").is_file()
    assert str(REPO_ROOT) not in (site / "proxy" / "cli.py").resolve().as_posix()
