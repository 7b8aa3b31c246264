"""End to end through a real load balancer (HAProxy from Debian, `make test-lb`): the shipped
deploy/haproxy.cfg, its servers pointed at three loopback replicas, round robin; and the deploy
files checked by their own tools (`docker-compose config`, `haproxy -c`)."""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import subprocess

import mcp_types as types
import pytest
import yaml

from ..cluster_helpers import Cluster, metric, scrape, start_cluster
from ..harness import REPO_ROOT, InputAnswers, PeerProcess, Peers, free_port, modern_client

HAPROXY_CFG = REPO_ROOT / "deploy" / "haproxy.cfg"
CALLS = 6


def haproxy_config(ports: list[int], listen: int) -> str:
    """deploy/haproxy.cfg with its bind and server lines pointed at loopback."""
    text = HAPROXY_CFG.read_text()
    text = text.replace("    bind :8080", f"    bind 127.0.0.1:{listen}")
    servers = [
        f"    server bridge-{index + 1} 127.0.0.1:{port} check" for index, port in enumerate(ports)
    ]
    text, count = re.subn(r"(?m)^    server bridge-\d .*\n", "", text)
    assert count == 3
    return text + "\n".join(servers) + "\n"


@pytest.fixture(scope="module")
def cluster(module_peers: Peers) -> Cluster:
    return start_cluster(module_peers)


@pytest.fixture(scope="module")
def balancer(
    module_peers: Peers, cluster: Cluster, tmp_path_factory: pytest.TempPathFactory
) -> PeerProcess:
    haproxy = shutil.which("haproxy") or "/usr/sbin/haproxy"
    config = tmp_path_factory.mktemp("haproxy") / "haproxy.cfg"
    port = free_port()
    config.write_text(haproxy_config(cluster.ports, port))
    return module_peers.start("haproxy", [haproxy, "-db", "-f", str(config)], port)


async def test_multi_round_calls_complete_through_haproxy(
    cluster: Cluster, balancer: PeerProcess
) -> None:
    """The real client completes three-round calls (elicitation, sampling, roots) through HAProxy's
    round robin; the replicas forwarded two retries of every call to its owner."""
    before = sum(
        [
            metric(await scrape(port), "mrtr_bridge_forwarded_retries_total")
            for port in cluster.ports
        ]
    )
    texts = []
    async with asyncio.timeout(120):
        for _ in range(CALLS):
            answers = InputAnswers(
                elicit_content={"name": "Ada"}, sample_text="by train", roots=["file:///trips"]
            )
            async with modern_client(balancer.url, **answers.client_kwargs()) as client:
                result = await client.call_tool("plan_trip", {"city": "Lisbon"})
            content = result.content[0]
            texts.append(content.text if isinstance(content, types.TextContent) else repr(content))
    assert texts == ["Ada goes to Lisbon: by train; saved in file:///trips"] * CALLS
    after = sum(
        [
            metric(await scrape(port), "mrtr_bridge_forwarded_retries_total")
            for port in cluster.ports
        ]
    )
    assert after - before == 2 * CALLS


def test_shipped_haproxy_config_is_valid() -> None:
    checked = subprocess.run(
        ["haproxy", "-c", "-f", str(HAPROXY_CFG)], capture_output=True, text=True, check=False
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_compose_replicas_profile_is_valid() -> None:
    """`docker-compose config` (Debian's docker-compose) accepts the file; the profile has three
    replicas sharing the peer alias, and the load balancer, beside the services every profile
    runs. (docker-compose 1.29 lists the services of every profile in `config --services`: the
    profiles are read from the resolved file.)"""
    env = {**os.environ, "MRTR_BRIDGE_HELD_KEYS": "k1=placeholder"}
    validate = ["docker-compose", "--profile", "replicas", "config"]
    done = subprocess.run(
        validate, cwd=REPO_ROOT, env=env, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    services = yaml.safe_load(done.stdout)["services"]
    profiles = {name: service.get("profiles", []) for name, service in services.items()}
    assert {name for name, listed in profiles.items() if not listed} == {"demo", "bridge"}
    assert {name for name, listed in profiles.items() if "replicas" in listed} == {
        "bridge-1",
        "bridge-2",
        "bridge-3",
        "lb",
    }


def test_kubernetes_manifest_has_the_three_parts() -> None:
    """deploy/kubernetes.yaml: a Deployment with the bridge as a sidecar, a headless Service named
    by cluster.peers_dns, and a plain Service (checked with the system's PyYAML)."""
    script = (
        "import sys, yaml, json; print(json.dumps(list(yaml.safe_load_all(open(sys.argv[1])))))"
    )
    done = subprocess.run(
        ["/usr/bin/python3", "-c", script, str(REPO_ROOT / "deploy" / "kubernetes.yaml")],
        capture_output=True,
        text=True,
        check=True,
    )
    docs = json.loads(done.stdout)
    kinds = {(doc["kind"], doc["metadata"]["name"]) for doc in docs}
    assert kinds == {
        ("Deployment", "mcp-server"),
        ("Service", "mcp-server"),
        ("Service", "mcp-server-peers"),
    }
    peers = next(doc for doc in docs if doc["metadata"]["name"] == "mcp-server-peers")
    assert peers["spec"]["clusterIP"] == "None"
    deployment = next(doc for doc in docs if doc["kind"] == "Deployment")
    containers = {c["name"]: c for c in deployment["spec"]["template"]["spec"]["containers"]}
    env = {item["name"]: item.get("value") for item in containers["mrtr-bridge"]["env"]}
    assert env["MRTR_BRIDGE_CLUSTER_PEERS_DNS"] == "mcp-server-peers:8080"
    assert set(containers) == {"legacy-server", "mrtr-bridge"}
    assert deployment["spec"]["replicas"] == 3
