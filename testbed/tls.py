"""A throwaway certificate authority for one run (`aggnet run --tls DIR`).

`make_pki(DIR)` writes a CA, a server certificate every switch serves P4Runtime with (valid for
127.0.0.1, ::1 and localhost, where the testbed's switches listen) and a client certificate the
controller presents; both are signed by the CA, so each side checks the other (mutual TLS). The
keys are EC P-256, the certificates valid for a day: they live as long as the run's folder.
"""
from __future__ import annotations

import datetime
import ipaddress
import os
from dataclasses import dataclass

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from p4target.runtime.tls import TlsFiles

VALID_FOR = datetime.timedelta(days=1)
SERVER_NAMES = ("localhost",)
SERVER_ADDRESSES = ("127.0.0.1", "::1")


@dataclass(frozen=True)
class RunPki:
    """The files of a run's CA: what the switches serve with and what the controller connects with."""

    server: TlsFiles
    client: TlsFiles


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, "AggNet run"),
                      x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _write(path: str, data: bytes, private: bool = False) -> str:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600 if private else 0o644)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    return path


def _issue(directory: str, stem: str, subject: str, issuer: tuple[x509.Name, ec.EllipticCurvePrivateKey] | None,
           extensions: list[tuple[x509.ExtensionType, bool]]) -> tuple[str, str, ec.EllipticCurvePrivateKey]:
    """Write STEM.pem and STEM.key: a new key and its certificate, signed by `issuer` (self-signed if None)."""
    key = ec.generate_private_key(ec.SECP256R1())
    issuer_name, issuer_key = issuer or (_name(subject), key)
    now = datetime.datetime.now(datetime.UTC)
    builder = (x509.CertificateBuilder().subject_name(_name(subject)).issuer_name(issuer_name)
               .public_key(key.public_key()).serial_number(x509.random_serial_number())
               .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + VALID_FOR))
    for extension, critical in extensions:
        builder = builder.add_extension(extension, critical=critical)
    cert = builder.sign(issuer_key, hashes.SHA256())
    key_pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                serialization.NoEncryption())
    return (_write(os.path.join(directory, f"{stem}.pem"), cert.public_bytes(serialization.Encoding.PEM)),
            _write(os.path.join(directory, f"{stem}.key"), key_pem, private=True), key)


def make_pki(directory: str) -> RunPki:
    """Create `directory` (if needed) with ca.pem/.key, switch.pem/.key and controller.pem/.key."""
    os.makedirs(directory, exist_ok=True)
    ca_cert, _, ca_key = _issue(directory, "ca", "AggNet run CA", None,
                                [(x509.BasicConstraints(ca=True, path_length=0), True)])
    ca = (_name("AggNet run CA"), ca_key)
    leaf = (x509.BasicConstraints(ca=False, path_length=None), True)
    alt_names = [*map(x509.DNSName, SERVER_NAMES), *(x509.IPAddress(ipaddress.ip_address(a)) for a in SERVER_ADDRESSES)]
    server_cert, server_key, _ = _issue(directory, "switch", "aggnet switch", ca, [
        leaf, (x509.SubjectAlternativeName(alt_names), False),
        (x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), False)])
    client_cert, client_key, _ = _issue(directory, "controller", "aggnet controller", ca, [
        leaf, (x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]), False)])
    return RunPki(server=TlsFiles(ca_cert, server_cert, server_key), client=TlsFiles(ca_cert, client_cert, client_key))
