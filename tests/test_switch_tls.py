"""P4Runtime over TLS and P4Runtime roles on a real `aggnet switch` process (no ports needed).

The switch serves mutual TLS with a throwaway CA (testbed.tls, what `aggnet run --tls` makes).
Clients without a certificate the CA signed are refused with one line, while the valid controller
keeps working (without --grpc-server-with-client-auth a client needs no certificate, but TLS); finsy
connects with its own TLS credentials; a client of a role configured with stratum.P4RoleConfig writes
what its role covers and gets PERMISSION_DENIED outside it, while the default role's primary writes
everything.
"""
from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

import pytest
from finsy.proto import p4i
from google.protobuf import text_format
from procs import free_port, stop_process, wait_for, wait_until

from controller.p4rt import P4RuntimeError, SwitchConnection
from p4target.runtime.roles import P4RoleConfig
from p4target.tls import TlsFiles
from testbed.counters_cli import parse_switch_command
from testbed.tls import RunPki, make_pki, pki_files

REPO = Path(__file__).resolve().parent.parent
PROGRAM = REPO / "tests" / "data" / "runtime" / "l2_learn.p4"
DEVICE_ID = 1


@pytest.fixture(scope="module")
def program(tmp_path_factory) -> tuple[Path, Path]:
    """(P4Info, device config) of the test program, as `aggnet p4 compile` writes them."""
    out = tmp_path_factory.mktemp("program")
    p4info, config = out / "l2_learn.p4info.txtpb", out / "l2_learn.device.p4"
    subprocess.run([sys.executable, "-m", "testbed.cli", "p4", "compile", str(PROGRAM), "--p4info", str(p4info),
                    "--device-config", str(config)], check=True, capture_output=True, timeout=120, cwd=REPO)
    return p4info, config


@pytest.fixture
def tls_switch(tmp_path):
    """(address, the run's PKI, switch log, switch stderr) of a switch that requires client certificates."""
    pki = make_pki(str(tmp_path / "tls"))
    grpc_port, log, stderr = free_port(), tmp_path / "s1.log", tmp_path / "s1.stderr"
    server = pki.server
    with open(stderr, "w") as err:
        proc = subprocess.Popen([sys.executable, "-m", "testbed.cli", "switch", "--device-id", str(DEVICE_ID),
                                 "--thrift-port", str(free_port()), "--log", str(log), "--no-p4", "--",
                                 "--grpc-server-addr", f"127.0.0.1:{grpc_port}", "--grpc-server-ssl",
                                 "--grpc-server-cert", str(server.cert), "--grpc-server-key", str(server.key),
                                 "--grpc-server-cacert", str(server.cacert), "--grpc-server-with-client-auth"],
                                cwd=REPO, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err)
    try:
        wait_for(grpc_port, proc, log)
        yield f"127.0.0.1:{grpc_port}", pki, log, stderr
        assert proc.poll() is None, "the switch died"
    finally:
        stop_process(proc)


def test_clients_without_a_valid_certificate_are_refused(tls_switch, program, tmp_path):
    address, pki, log, stderr = tls_switch
    p4info = text_format.Parse(program[0].read_text(), p4i.P4Info())
    other = make_pki(str(tmp_path / "other")).client  # a well-formed certificate from the wrong CA
    other_ca = TlsFiles(pki.client.cacert, other.cert, other.key)
    with SwitchConnection(address, DEVICE_ID, tls=pki.client) as controller:
        controller.set_pipeline(p4info, program[1].read_bytes(), cookie=0x5EC)
        assert "TLS, client certificates required" in log.read_text()
        for what, tls in [("insecure", None), ("no client certificate", TlsFiles(pki.client.cacert)),
                          ("another CA's certificate", other_ca)]:
            with pytest.raises(P4RuntimeError) as err:
                SwitchConnection(address, DEVICE_ID, tls=tls, arbitration_timeout=30).close()
            message = str(err.value)
            assert "\n" not in message and "UNAVAILABLE" in message and "refused this" in message, (what, message)
        assert controller.alive
        assert controller.pipeline_cookie() == 0x5EC  # still served
        controller.write([controller.insert(_entry("dmac", "dstAddr", 0xB, "fwd", eg_port=2))])  # still primary
    assert "Handshake failed" in stderr.read_text()  # the switch's gRPC says why it refused


def test_a_client_that_does_not_trust_the_switch_is_refused(tls_switch, tmp_path):
    address, pki, _, _ = tls_switch
    wrong = make_pki(str(tmp_path / "other")).client  # trusts another CA than the one that signed the switch
    with pytest.raises(P4RuntimeError, match="UNAVAILABLE"):
        SwitchConnection(address, DEVICE_ID, tls=TlsFiles(wrong.cacert, pki.client.cert, pki.client.key),
                         arbitration_timeout=30).close()


def test_without_client_auth_a_client_needs_no_certificate_but_tls(tmp_path):
    """--grpc-server-ssl with no --grpc-server-with-client-auth (nor --grpc-server-cacert): TLS, and a client
    that trusts the switch's CA becomes primary with no certificate of its own; an insecure one is refused."""
    pki = make_pki(str(tmp_path / "tls"))
    grpc_port, log = free_port(), tmp_path / "s1.log"
    proc = subprocess.Popen([sys.executable, "-m", "testbed.cli", "switch", "--device-id", str(DEVICE_ID),
                             "--thrift-port", str(free_port()), "--log", str(log), "--no-p4", "--",
                             "--grpc-server-addr", f"127.0.0.1:{grpc_port}", "--grpc-server-ssl",
                             "--grpc-server-cert", str(pki.server.cert), "--grpc-server-key", str(pki.server.key)],
                            cwd=REPO, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_for(grpc_port, proc, log)
        with SwitchConnection(f"127.0.0.1:{grpc_port}", DEVICE_ID, tls=TlsFiles(pki.client.cacert)) as client:
            assert client.pipeline_cookie() is None  # primary: served over TLS
        with pytest.raises(P4RuntimeError, match="UNAVAILABLE"):
            SwitchConnection(f"127.0.0.1:{grpc_port}", DEVICE_ID, arbitration_timeout=30).close()
        up = f"grpc 127.0.0.1:{grpc_port} (TLS),"  # the line may come after the port listens: wait for it
        wait_until(lambda: up in log.read_text(), proc, log.read_text)
    finally:
        stop_process(proc)


def _entry(table: str, field: str, value: int, action: str, **params):
    import finsy as fy

    return fy.P4TableEntry(table, match=fy.P4TableMatch({field: value}), action=fy.P4TableAction(action, **params))


def test_mutual_tls_and_roles_with_finsy(tls_switch, program):
    import finsy as fy

    address, pki, _, _ = tls_switch
    p4info, config = program
    schema = fy.P4Schema(p4info)
    smac_id = schema.tables["smac"].id

    def credentials(files: TlsFiles) -> fy.GRPCCredentialsTLS:
        return fy.GRPCCredentialsTLS(cacert=Path(files.cacert), cert=Path(files.cert), private_key=Path(files.key))

    learner_role = P4RoleConfig(shared_p4_ids=[smac_id], receives_packet_ins=True)
    default = fy.SwitchOptions(p4info=p4info, p4blob=config, device_id=DEVICE_ID,
                               channel_credentials=credentials(pki.client))
    learner = fy.SwitchOptions(p4info=p4info, device_id=DEVICE_ID, channel_credentials=credentials(pki.client),
                               role_name="learner", role_config=learner_role)

    async def denied(switch, entity) -> str:
        with pytest.raises(fy.P4ClientError) as err:
            await switch.insert([entity])
        assert err.value.code == fy.GRPCStatusCode.PERMISSION_DENIED, err.value
        return str(err.value)

    async def main():
        async with fy.Switch("s1", address, default) as primary, fy.Switch("s1-learner", address, learner) as role:
            assert primary.is_primary and role.is_primary and role.role_name == "learner"
            await role.insert([_entry("smac", "srcAddr", 0xA, "NoAction")])
            message = await denied(role, _entry("dmac", "dstAddr", 0xA, "fwd", eg_port=1))
            assert "role 'learner' may not write" in message and "outside the role's config" in message
            await denied(role, fy.P4MulticastGroupEntry(7, replicas=[1, 2]))
            await primary.insert([_entry("dmac", "dstAddr", 0xA, "fwd", eg_port=1), _entry("smac", "srcAddr", 0xB, "NoAction"),
                                  fy.P4MulticastGroupEntry(7, replicas=[1, 2])])
            seen_by_role = [e async for e in role.read(fy.P4TableEntry())]
            seen_by_primary = [e async for e in primary.read(fy.P4TableEntry())]
            assert {e.table_id for e in seen_by_role} == {"smac"} and len(seen_by_role) == 2
            assert {e.table_id for e in seen_by_primary} == {"smac", "dmac"}

    asyncio.run(main())


def test_pki_signs_the_switch_for_loopback(tmp_path):
    from cryptography import x509

    pki: RunPki = make_pki(str(tmp_path))
    cert = x509.load_pem_x509_certificate(Path(pki.server.cert).read_bytes())
    names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert "localhost" in names.get_values_for_type(x509.DNSName)
    assert {str(a) for a in names.get_values_for_type(x509.IPAddress)} == {"127.0.0.1", "::1"}
    assert (Path(pki.client.key).stat().st_mode & 0o777) == 0o600


def test_counters_reads_a_tls_switch_with_the_runs_controller_certificate(tmp_path):
    pki = pki_files(str(tmp_path))
    argv = ["python", "-m", "testbed.cli", "switch", "--device-id", "2", "--grpc-server-addr", "127.0.0.1:9561",
            "--grpc-server-ssl", "--grpc-server-cert", str(pki.server.cert), "--grpc-server-key",
            str(pki.server.key), "--grpc-server-cacert", str(pki.server.cacert), "--grpc-server-with-client-auth"]
    switch = parse_switch_command("s2", argv)
    assert switch is not None and switch.tls == pki.client
    plain = parse_switch_command("s2", argv[:8])
    assert plain is not None and plain.tls is None
