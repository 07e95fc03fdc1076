"""Certificates made in the test: a CA, a server certificate for 127.0.0.1/localhost, client certificates."""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID


@dataclass(frozen=True)
class Pem:
    """A certificate and its key, as PEM files."""

    cert: Path
    key: Path


@dataclass(frozen=True)
class Pki:
    """A CA with a server and a client certificate, plus a client certificate from another CA."""

    ca: Pem
    server: Pem
    client: Pem
    #: Another CA, and a client certificate it issued.
    other_ca: Pem
    stranger: Pem


def _name(cn: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])


def _issue(
    out: Path,
    stem: str,
    cn: str,
    *,
    issuer: tuple[x509.Certificate, ec.EllipticCurvePrivateKey] | None,
    server: bool = False,
    client: bool = False,
) -> tuple[Pem, x509.Certificate, ec.EllipticCurvePrivateKey]:
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.UTC)
    builder = (
        x509.CertificateBuilder()
        .subject_name(_name(cn))
        .issuer_name(issuer[0].subject if issuer else _name(cn))
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=issuer is None, path_length=None), critical=True)
    )
    if server:
        builder = builder.add_extension(
            x509.SubjectAlternativeName(
                [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
            ),
            critical=False,
        ).add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
    if client:
        builder = builder.add_extension(
            x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False
        )
    signer = issuer[1] if issuer else key
    cert = builder.sign(signer, hashes.SHA256())
    pem = Pem(out / f"{stem}.crt", out / f"{stem}.key")
    pem.cert.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    pem.key.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    return pem, cert, key


def make_pki(out: Path) -> Pki:
    """Write a fresh PKI into `out`."""
    ca_pem, ca_cert, ca_key = _issue(out, "ca", "test-ca", issuer=None)
    server, _, _ = _issue(out, "server", "localhost", issuer=(ca_cert, ca_key), server=True)
    client, _, _ = _issue(out, "client", "router", issuer=(ca_cert, ca_key), client=True)
    other_ca, other_cert, other_key = _issue(out, "other-ca", "other-ca", issuer=None)
    stranger, _, _ = _issue(out, "stranger", "stranger", issuer=(other_cert, other_key), client=True)
    return Pki(ca=ca_pem, server=server, client=client, other_ca=other_ca, stranger=stranger)
