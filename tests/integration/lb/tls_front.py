"""A legacy server behind TLS: a private CA, a server certificate for `localhost` only and a
client certificate (made with `cryptography`), and HAProxy terminating TLS in front of the server,
as a TLS offload in front of a legacy server does in production, mutual TLS on request."""

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
    bind 127.0.0.1:{listen} ssl crt {pem}{client_auth}
    default_backend server
backend server
    server legacy 127.0.0.1:{port}
"""


def _name(common: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common)])


def _pem(certificate: x509.Certificate, key: ec.EllipticCurvePrivateKey | None = None) -> bytes:
    pem = certificate.public_bytes(serialization.Encoding.PEM)
    if key is None:
        return pem
    return pem + key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def write_certificates(directory: Path) -> tuple[Path, Path, Path]:
    """`ca.pem` (a private CA's certificate), `server.pem` (a server certificate for `localhost`
    and its key) and `client.pem` (a client certificate and its key), both signed by the CA and
    valid for two days."""
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
    written = [directory / "ca.pem"]
    written[0].write_bytes(_pem(ca))
    for name, usage in (("server", ExtendedKeyUsageOID.SERVER_AUTH), ("client", None)):
        key = ec.generate_private_key(ec.SECP256R1())
        builder = (
            x509.CertificateBuilder()
            .issuer_name(ca.subject)
            .subject_name(_name("localhost" if usage else "mrtr-bridge"))
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(since)
            .not_valid_after(until)
            .add_extension(
                x509.ExtendedKeyUsage([usage or ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False
            )
        )
        if usage is not None:
            names = x509.SubjectAlternativeName([x509.DNSName("localhost")])
            builder = builder.add_extension(names, critical=False)
        written.append(directory / f"{name}.pem")
        written[-1].write_bytes(_pem(builder.sign(ca_key, hashes.SHA256()), key))
    return written[0], written[1], written[2]


def start_tls_front(
    peers: Peers, directory: Path, server: PeerProcess, pem: Path, *, client_ca: Path | None = None
) -> int:
    """HAProxy terminating TLS with `pem` in front of `server`, requiring a client certificate
    signed by `client_ca` when given (mutual TLS); its port."""
    listen = free_port()
    config = directory / "haproxy-tls.cfg"
    client_auth = "" if client_ca is None else f" ca-file {client_ca} verify required"
    config.write_text(
        _HAPROXY_CFG.format(listen=listen, pem=pem, port=server.port, client_auth=client_auth)
    )
    haproxy = shutil.which("haproxy") or "/usr/sbin/haproxy"
    peers.start("haproxy-tls", [haproxy, "-db", "-f", str(config)], listen)
    return listen
