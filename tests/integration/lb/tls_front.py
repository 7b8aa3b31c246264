"""A legacy server behind TLS: a private CA and a certificate for `localhost` only (made with
`cryptography`), and HAProxy terminating TLS in front of the server, as a TLS offload in front of
a legacy server does in production."""

from __future__ import annotations

import datetime
import shutil
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from ..harness import PeerProcess, Peers, free_port

_HAPROXY_CFG = """\
global
    maxconn 256
defaults
    mode http
    timeout connect 5s
    timeout client 600s
    timeout server 600s
frontend tls
    bind 127.0.0.1:{listen} ssl crt {pem}
    default_backend server
backend server
    server legacy 127.0.0.1:{port}
"""


def _name(common: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common)])


def write_ca_and_certificate(directory: Path) -> tuple[Path, Path]:
    """`ca.pem` (the CA's certificate) and `server.pem` (a certificate for `localhost`, signed
    by the CA, and its key), valid for two days."""
    now = datetime.datetime.now(datetime.UTC)
    since, until = now - datetime.timedelta(days=1), now + datetime.timedelta(days=2)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = (
        x509.CertificateBuilder()
        .issuer_name(_name("mrtr-bridge test CA"))
        .subject_name(_name("mrtr-bridge test CA"))
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(since)
        .not_valid_after(until)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    leaf = (
        x509.CertificateBuilder()
        .issuer_name(ca.subject)
        .subject_name(_name("localhost"))
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(since)
        .not_valid_after(until)
        .add_extension(x509.SubjectAlternativeName([x509.DNSName("localhost")]), critical=False)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    ca_pem, server_pem = directory / "ca.pem", directory / "server.pem"
    ca_pem.write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    private = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    server_pem.write_bytes(leaf.public_bytes(serialization.Encoding.PEM) + private)
    return ca_pem, server_pem


def start_tls_front(peers: Peers, directory: Path, server: PeerProcess, pem: Path) -> int:
    """HAProxy terminating TLS with `pem` in front of `server`; its port."""
    listen = free_port()
    config = directory / "haproxy-tls.cfg"
    config.write_text(_HAPROXY_CFG.format(listen=listen, pem=pem, port=server.port))
    haproxy = shutil.which("haproxy") or "/usr/sbin/haproxy"
    peers.start("haproxy-tls", [haproxy, "-db", "-f", str(config)], listen)
    return listen
