"""Replicas behind a load balancer: the peer set, and forwarding a retry to the replica that owns
its held call (docs/architecture.md § Replicas)."""
