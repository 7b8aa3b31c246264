"""HAProxy in front of two legacy server replicas `a` and `b`, pinning each session to its replica
with the cookie it inserts (`cookie SRV insert`), for the tests of upstream cookies."""

from __future__ import annotations

import shutil
from pathlib import Path

from ..harness import PeerProcess, Peers

_CONFIG = """\
global
    maxconn 256
defaults
    mode http
    timeout connect 5s
    timeout client 60s
    timeout server 60s
frontend mcp
    bind 127.0.0.1:{listen}
    default_backend replicas
backend replicas
    balance roundrobin
    cookie SRV insert indirect nocache
    server a 127.0.0.1:{a} cookie a weight {weight_a}
    server b 127.0.0.1:{b} cookie b weight {weight_b}
"""


def start_sticky_haproxy(
    peers: Peers,
    config: Path,
    listen: int,
    replicas: dict[str, int],
    *,
    weights: tuple[int, int] = (1, 1),
) -> PeerProcess:
    """HAProxy on `listen` in front of the replicas' ports (`a` and `b`), in round robin by
    `weights`: a weight of 0 takes no new session but still serves those its cookie pins."""
    config.write_text(
        _CONFIG.format(listen=listen, weight_a=weights[0], weight_b=weights[1], **replicas)
    )
    haproxy = shutil.which("haproxy") or "/usr/sbin/haproxy"
    return peers.start(config.stem, [haproxy, "-db", "-f", str(config)], listen)
