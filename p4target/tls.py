"""TLS for P4Runtime: the PEM files one side of a connection holds, as gRPC credentials.

Both sides use it (so it is not the server's, runtime/): the switch serves with `server_credentials`
(`aggnet switch --grpc-server-ssl ...`, as simple_switch_grpc); a client connects with
`channel_credentials` (controller.p4rt); the testbed hands each side its files. With
`require_client_auth` the server accepts only clients whose certificate the CA signed (mutual
TLS); without it, any client that trusts the server's certificate gets in.
"""
from __future__ import annotations

from dataclasses import dataclass

import grpc


class TlsError(Exception):
    """A certificate or key that cannot be used (one line naming the file; exit code 1)."""

    exit_code = 1


@dataclass(frozen=True)
class TlsFiles:
    """One side's PEM files: the CA that signs the other side's certificate, its own certificate and key."""

    cacert: str | None = None
    cert: str | None = None
    key: str | None = None


def read_pem(path: str, what: str) -> bytes:
    """The bytes of a PEM file; TlsError naming `what` and the file when it is unreadable or not PEM."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as exc:
        raise TlsError(f"error: {what} {path}: {exc.strerror}") from None
    if b"-----BEGIN " not in data:
        raise TlsError(f"error: {what} {path}: not a PEM file")
    return data


def server_credentials(files: TlsFiles, require_client_auth: bool = False) -> grpc.ServerCredentials:
    """Credentials for the P4Runtime server: its certificate and key; the client CA for mutual TLS."""
    if not (files.cert and files.key):
        raise TlsError("error: a TLS server needs a certificate and a key")
    if require_client_auth and not files.cacert:
        raise TlsError("error: client authentication needs the CA that signs client certificates")
    root = read_pem(files.cacert, "client CA certificate") if files.cacert else None
    pair = (read_pem(files.key, "server key"), read_pem(files.cert, "server certificate"))
    return grpc.ssl_server_credentials([pair], root_certificates=root, require_client_auth=require_client_auth)


def channel_credentials(files: TlsFiles) -> grpc.ChannelCredentials:
    """Credentials for a client: the CA that signed the server's certificate; its own pair for mutual TLS."""
    return grpc.ssl_channel_credentials(
        root_certificates=read_pem(files.cacert, "CA certificate") if files.cacert else None,
        private_key=read_pem(files.key, "client key") if files.key else None,
        certificate_chain=read_pem(files.cert, "client certificate") if files.cert else None)
