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

from p4target.tls import TlsFiles

VALID_FOR = datetime.timedelta(days=1)
SERVER_NAMES = ("localhost",)
SERVER_ADDRESSES = ("127.0.0.1", "::1")


@dataclass(frozen=True)
class RunPki:
    """The files of a run's CA: what the switches serve with and what the controller connects with."""

    server: TlsFiles
    client: TlsFiles


def _paths(directory: str) -> tuple[str, str, str]:
    """(CA certificate, switch's stem, controller's stem): STEM.pem is a certificate, STEM.key its key."""
    return (os.path.join(directory, "ca.pem"), os.path.join(directory, "switch"), os.path.join(directory, "controller"))


def pki_files(directory: str) -> RunPki:
    """The files make_pki writes in `directory` (a client finds its pair beside the switch's CA this way)."""
    ca, switch, controller = _paths(directory)
    return RunPki(server=TlsFiles(ca, f"{switch}.pem", f"{switch}.key"),
                  client=TlsFiles(ca, f"{controller}.pem", f"{controller}.key"))


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, "AggNet run"),
                      x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _write(path: str, data: bytes, private: bool = False) -> str:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600 if private else 0o644)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    return path


def _issue(cert_path: str, key_path: str, subject: str, issuer: tuple[x509.Name, ec.EllipticCurvePrivateKey] | None,
           extensions: list[tuple[x509.ExtensionType, bool]]) -> ec.EllipticCurvePrivateKey:
    """Write a new key and its certificate, signed by `issuer` (self-signed if None); returns the key."""
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
    _write(cert_path, cert.public_bytes(serialization.Encoding.PEM))
    _write(key_path, key_pem, private=True)
    return key


def make_pki(directory: str) -> RunPki:
    """Create `directory` (if needed) with ca.pem, switch.pem/.key and controller.pem/.key (and ca.key)."""
    os.makedirs(directory, exist_ok=True)
    ca_cert, switch, controller = _paths(directory)
    ca_key = _issue(ca_cert, os.path.join(directory, "ca.key"), "AggNet run CA", None,
                    [(x509.BasicConstraints(ca=True, path_length=0), True)])
    ca = (_name("AggNet run CA"), ca_key)
    leaf = (x509.BasicConstraints(ca=False, path_length=None), True)
    alt_names = [*map(x509.DNSName, SERVER_NAMES), *(x509.IPAddress(ipaddress.ip_address(a)) for a in SERVER_ADDRESSES)]
    _issue(f"{switch}.pem", f"{switch}.key", "aggnet switch", ca, [
        leaf, (x509.SubjectAlternativeName(alt_names), False),
        (x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), False)])
    _issue(f"{controller}.pem", f"{controller}.key", "aggnet controller", ca, [
        leaf, (x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]), False)])
    return pki_files(directory)
