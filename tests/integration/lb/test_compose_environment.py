"""`docker compose up --build` needs no environment: Compose interpolates every service, profiles
or not, so the file checked by Debian's real `docker-compose` with an empty environment must pass,
and the replicas profile must leave the missing requestState key to the bridge, which refuses to
start a replica with one clear line (run here with the command and environment Compose produced).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from ..harness import REPO_ROOT

EMPTY_ENV = {"PATH": "/usr/local/bin:/usr/bin:/bin"}
BRIDGE = Path(sys.executable).parent / "mrtr-bridge"
TO_JSON = "import sys, yaml, json; print(json.dumps(yaml.safe_load(sys.stdin)))"


def compose(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["docker-compose", *args],
        cwd=REPO_ROOT,
        env=env or EMPTY_ENV,
        capture_output=True,
        text=True,
        check=False,
    )


def resolved(*args: str, env: dict[str, str] | None = None) -> dict[str, Any]:
    """The file as Compose resolves it, parsed with the system's PyYAML."""
    done = compose(*args, "config", env=env)
    assert done.returncode == 0, done.stderr
    parsed = subprocess.run(
        ["/usr/bin/python3", "-c", TO_JSON], input=done.stdout, capture_output=True, text=True
    )
    assert parsed.returncode == 0, parsed.stderr
    config: dict[str, Any] = json.loads(parsed.stdout)
    return config


@pytest.mark.parametrize("profile", [[], ["--profile", "replicas"]], ids=["default", "replicas"])
def test_compose_config_passes_with_an_empty_environment(profile: list[str]) -> None:
    done = compose(*profile, "config", "--quiet")
    assert (done.returncode, done.stderr) == (0, "")


def test_default_services_need_no_key() -> None:
    services = resolved()["services"]
    assert services["bridge"]["command"][:1] == ["serve"]
    assert services["bridge"]["environment"]["MRTR_BRIDGE_FRONT_LISTEN"] == "0.0.0.0:8080"
    assert "MRTR_BRIDGE_HELD_KEYS" not in services["bridge"]["environment"]


def test_replicas_pass_a_key_from_the_environment_through() -> None:
    env = {**EMPTY_ENV, "MRTR_BRIDGE_HELD_KEYS": "k1=from-the-host"}
    services = resolved("--profile", "replicas", env=env)["services"]
    for name in ("bridge-1", "bridge-2", "bridge-3"):
        assert services[name]["environment"]["MRTR_BRIDGE_HELD_KEYS"] == "k1=from-the-host"


def test_a_replica_without_keys_is_refused_by_the_bridge_in_one_line() -> None:
    replica = resolved("--profile", "replicas")["services"]["bridge-1"]
    environment = {k: str(v) for k, v in replica["environment"].items()}
    assert environment["MRTR_BRIDGE_HELD_KEYS"] == ""
    done = subprocess.run(
        [str(BRIDGE), *replica["command"]],
        env={**EMPTY_ENV, **environment},
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert done.returncode == 2
    assert done.stdout == ""
    assert done.stderr == (
        "mrtr-bridge: error: missing setting held.keys: required when cluster.peers_dns is set "
        "(from environment MRTR_BRIDGE_CLUSTER_PEERS_DNS): replicas need held.keys shared by "
        "every replica (an ephemeral key cannot open another replica's requestState); make one "
        "with `mrtr-bridge keygen` and set MRTR_BRIDGE_HELD_KEYS on every replica\n"
    )
