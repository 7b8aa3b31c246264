"""cluster.* settings and held.replica_id = "auto" (config/settings.py)."""

from __future__ import annotations

import re

import pytest

from config import ConfigError, load_settings

KEYS = {"MRTR_BRIDGE_HELD_KEYS": "k1=" + "A" * 43}


def test_peers_from_the_environment_are_base_urls() -> None:
    settings = load_settings(
        None,
        {
            **KEYS,
            "MRTR_BRIDGE_CLUSTER_PEERS": "http://10.0.0.5:8080/, http://10.0.0.6:8080",
            "MRTR_BRIDGE_CLUSTER_ADVERTISE_URL": "http://10.0.0.5:8080",
        },
    )
    assert settings.cluster.peers == ("http://10.0.0.5:8080", "http://10.0.0.6:8080")
    assert settings.cluster.advertise_url == "http://10.0.0.5:8080"
    assert settings.cluster.enabled


def test_peers_dns_from_the_environment() -> None:
    settings = load_settings(
        None, {**KEYS, "MRTR_BRIDGE_CLUSTER_PEERS_DNS": "mcp-server-peers:8080"}
    )
    assert (settings.cluster.peers_dns, settings.cluster.enabled) == ("mcp-server-peers:8080", True)


def test_no_peers_no_cluster() -> None:
    assert not load_settings(None, {}).cluster.enabled


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("MRTR_BRIDGE_CLUSTER_PEERS", "http://10.0.0.5:8080/mcp"),
        ("MRTR_BRIDGE_CLUSTER_PEERS", "ftp://10.0.0.5"),
        ("MRTR_BRIDGE_CLUSTER_PEERS", "http://user:pw@10.0.0.5:8080"),
        ("MRTR_BRIDGE_CLUSTER_PEERS_DNS", "mcp-server-peers"),
        ("MRTR_BRIDGE_CLUSTER_ADVERTISE_URL", "10.0.0.5:8080"),
    ],
)
def test_bad_addresses_fail_fast(variable: str, value: str) -> None:
    dotted = variable.removeprefix("MRTR_BRIDGE_").lower().replace("cluster_", "cluster.")
    with pytest.raises(ConfigError, match=re.escape(dotted)):
        load_settings(None, {**KEYS, variable: value})


def test_a_cluster_without_shared_keys_is_refused() -> None:
    with pytest.raises(ConfigError, match=r"held\.keys shared by every replica"):
        load_settings(None, {"MRTR_BRIDGE_CLUSTER_PEERS": "http://10.0.0.5:8080"})


def test_auto_replica_ids_differ_per_start() -> None:
    first, second = (
        load_settings(None, {"MRTR_BRIDGE_HELD_REPLICA_ID": "auto"}).held.replica_id
        for _ in range(2)
    )
    assert first != second and first.startswith("r") and len(first) == 13
