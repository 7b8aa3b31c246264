"""The deploy files, checked by tools that run offline in `make test` (issue 44, item 11): the
Kubernetes manifest passes `kubernetes-validate --strict` (the schemas it ships) and sets
resources and a securityContext on every container; every image is pinned by version; HAProxy
checks `/readyz`; and the Dockerfile's HEALTHCHECK, run as Docker runs it, asks the address the
bridge listens on (`MRTR_BRIDGE_FRONT_LISTEN`), not a hard-coded port."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

from config import ENV_PREFIX

from .harness import REPO_ROOT, Peers, free_port

MANIFEST = REPO_ROOT / "deploy" / "kubernetes.yaml"
VALIDATOR = Path(sys.executable).parent / "kubernetes-validate"
TIMEOUT_S = 60


def test_the_kubernetes_manifest_passes_the_schemas_strictly() -> None:
    done = subprocess.run(
        [str(VALIDATOR), "--strict", "--kubernetes-version", "1.37.0", str(MANIFEST)],
        capture_output=True, text=True, timeout=TIMEOUT_S, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.count(" passed for resource ") == 3


def _containers() -> list[dict[str, Any]]:
    documents = list(yaml.safe_load_all(MANIFEST.read_text(encoding="utf-8")))
    (deployment,) = [doc for doc in documents if doc["kind"] == "Deployment"]
    pod = deployment["spec"]["template"]["spec"]
    assert pod["securityContext"] == {
        "runAsNonRoot": True,
        "seccompProfile": {"type": "RuntimeDefault"},
    }
    containers: list[dict[str, Any]] = pod["containers"]
    return containers


def test_every_container_has_resources_a_security_context_and_a_pinned_image() -> None:
    for container in _containers():
        assert {"requests", "limits"} <= set(container["resources"]), container["name"]
        assert container["securityContext"]["allowPrivilegeEscalation"] is False
        assert container["securityContext"]["capabilities"] == {"drop": ["ALL"]}
        assert re.fullmatch(r"[^:]+:\d+(\.\d+)+", container["image"]), container["image"]
    bridge = next(c for c in _containers() if c["name"] == "mrtr-bridge")
    assert bridge["securityContext"]["readOnlyRootFilesystem"] is True
    assert bridge["securityContext"]["runAsUser"] == 10001  # the Dockerfile's user


def test_the_images_of_docker_and_compose_are_pinned_by_version() -> None:
    dockerfile = (REPO_ROOT / "Dockerfile").read_text(encoding="utf-8")
    assert "ARG PYTHON_IMAGE=python:3.11.13-slim-bookworm\n" in dockerfile
    compose = yaml.safe_load((REPO_ROOT / "docker-compose.yml").read_text(encoding="utf-8"))
    images = [service["image"] for service in compose["services"].values() if "image" in service]
    assert images == ["haproxy:2.6.23"]


def test_haproxy_checks_readiness() -> None:
    config = (REPO_ROOT / "deploy" / "haproxy.cfg").read_text(encoding="utf-8")
    assert "    option httpchk GET /readyz\n    http-check expect status 200\n" in config
    assert "option httpchk GET /healthz" not in config


def _healthcheck() -> list[str]:
    """The bridge stage's HEALTHCHECK command, as Docker runs it (exec form)."""
    dockerfile = (REPO_ROOT / "Dockerfile").read_text(encoding="utf-8")
    bridge_stage = dockerfile.split("FROM base AS bridge", 1)[1].split("FROM base AS demo", 1)[0]
    found = re.search(r"HEALTHCHECK [^\n]*\\\n\s+CMD (\[.*\])\n", bridge_stage)
    assert found is not None
    command: list[str] = json.loads(found.group(1))
    return [sys.executable if command[0] == "python" else command[0], *command[1:]]


def _run(command: list[str], listen: str) -> int:
    env = {k: v for k, v in os.environ.items() if not k.startswith(ENV_PREFIX)}
    done = subprocess.run(
        command, env={**env, "MRTR_BRIDGE_FRONT_LISTEN": listen},
        capture_output=True, timeout=TIMEOUT_S, check=False,
    )  # fmt: skip
    return done.returncode


def test_the_healthcheck_asks_the_address_the_bridge_listens_on(peers: Peers) -> None:
    """A bridge on a port other than 8080, given as the image gives it (the environment): the
    HEALTHCHECK passes; pointed at a port nothing listens on, it fails."""
    port = free_port()
    listen = f"0.0.0.0:{port}"
    bridge = peers.start(
        "bridge-env-listen",
        [str(Path(sys.executable).parent / "mrtr-bridge"), "serve", "--upstream",
         "http://127.0.0.1:9/mcp"],
        port,
        {"MRTR_BRIDGE_FRONT_LISTEN": listen, "MRTR_BRIDGE_FRONT_ALLOWED_HOSTS": "*"},
    )  # fmt: skip
    assert bridge.popen.poll() is None
    command = _healthcheck()
    assert _run(command, listen) == 0
    assert _run(command, f"0.0.0.0:{free_port()}") != 0


def test_the_several_profile_fronts_two_named_servers() -> None:
    """Compose's `several` profile: its bridge's command and environment, read by the bridge's own
    parser and loader, serve `alpha` and `beta` at their paths, each a server of the profile."""
    from config import load_settings
    from proxy.app.cli_args import build_parser, overrides_from

    compose = yaml.safe_load((REPO_ROOT / "docker-compose.yml").read_text(encoding="utf-8"))
    services = compose["services"]
    bridge = services["bridge-several"]
    args = build_parser().parse_args(bridge["command"])
    settings = load_settings(None, bridge["environment"], overrides_from(args))
    served = [(name, own.front.path, own.upstream.url) for name, own in settings.units()]
    assert served == [
        ("alpha", "/servers/alpha/mcp", "http://demo:8931/mcp"),
        ("beta", "/servers/beta/mcp", "http://demo-2:8931/mcp"),
    ]
    assert {"demo", "demo-2"} <= set(bridge["depends_on"])
    assert services["demo-2"]["profiles"] == bridge["profiles"] == ["several"]
    assert bridge["ports"] == ["127.0.0.1:8081:8080"]
