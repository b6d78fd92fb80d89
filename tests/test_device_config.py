"""The device config a P4Runtime client pushes to `aggnet switch`: the program's self-contained source.

`aggnet p4 compile PROG.p4 --p4info X --device-config Y` writes it, the controller pushes the
same text, and the switch (a real P4Runtime server here) accepts it, where the program's own
file fails because the switch cannot see the folder its local #includes live in.
"""
from __future__ import annotations

import os
import subprocess
from pathlib import Path

import grpc
import pytest
from finsy.proto import p4i, p4r
from google.protobuf import text_format
from p4rt_raw import RawClient

from controller.installer import load_program
from p4target.compiled import front_end_file
from p4target.device_config import device_config_source
from p4target.errors import P4Error
from p4target.frontend.preprocess import preprocess
from p4target.runtime import RuntimeServer

ROOT = Path(__file__).resolve().parent.parent
AGGNET_P4 = ROOT / "p4src" / "aggnet.p4"
COMMIT = p4r.SetForwardingPipelineConfigRequest.VERIFY_AND_COMMIT


def test_local_includes_are_inlined_and_standard_ones_kept(tmp_path, monkeypatch):
    (tmp_path / "inc").mkdir()
    (tmp_path / "inc" / "part.p4").write_text('#include "deeper.p4"\nconst bit<8> X = 1;\n')
    (tmp_path / "inc" / "deeper.p4").write_text("const bit<8> Y = 2;\n")  # relative to the including file
    (tmp_path / "main.p4").write_text('#include <core.p4>\n  #  include "inc/part.p4"  // parts\ncontrol C() { apply {} }\n')
    monkeypatch.chdir(tmp_path)
    config = device_config_source("main.p4")
    assert config == ('#line 1 "main.p4"\n#include <core.p4>\n#line 1 "inc/part.p4"\n#line 1 "inc/deeper.p4"\n'
                      'const bit<8> Y = 2;\n#line 2 "inc/part.p4"\nconst bit<8> X = 1;\n#line 3 "main.p4"\n'
                      'control C() { apply {} }\n')
    source = preprocess(config, "device_config.p4")  # what the switch makes of it: each line where it came from
    lines = source.text.split("\n")
    assert [source.line_map[lines.index(text)] for text in ("const bit<8> Y = 2;", "const bit<8> X = 1;",
                                                            "control C() { apply {} }")] == \
        [("inc/deeper.p4", 1), ("inc/part.p4", 2), ("main.p4", 3)]
    assert device_config_source("inc/deeper.p4") == "const bit<8> Y = 2;\n"  # nothing to inline: the file as it is


def test_include_loops_and_missing_files_are_one_line_errors(tmp_path):
    (tmp_path / "loop.p4").write_text('#include "loop.p4"\n')
    with pytest.raises(P4Error, match="nesting deeper than 16"):
        device_config_source(str(tmp_path / "loop.p4"))
    (tmp_path / "main.p4").write_text('\n#include "absent.p4"\n')
    with pytest.raises(P4Error) as err:
        device_config_source(str(tmp_path / "main.p4"))
    assert str(err.value).startswith(f"{tmp_path / 'main.p4'}:2: error: cannot read")


@pytest.fixture
def server():
    srv = RuntimeServer(device_id=1, address="127.0.0.1:0")
    port = srv.start()
    client = RawClient(port)
    client.arbitrate(10)
    yield srv, client
    client.close()
    srv.stop()


def test_compile_writes_the_device_config_the_switch_accepts(tmp_path, server):
    srv, client = server
    p4info_path, config_path = tmp_path / "aggnet.p4info.txtpb", tmp_path / "aggnet.device.p4"
    proc = subprocess.run([str(ROOT / ".venv" / "bin" / "aggnet"), "p4", "compile", str(AGGNET_P4),
                           "--p4info", str(p4info_path), "--device-config", str(config_path)],
                          capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert f"device config written to {config_path}" in proc.stdout
    p4info = text_format.Parse(p4info_path.read_text(), p4i.P4Info())
    with pytest.raises(grpc.RpcError) as err:  # the program's own file: its includes are not on the switch
        client.set_pipeline(COMMIT, p4r.ForwardingPipelineConfig(p4info=p4info, p4_device_config=AGGNET_P4.read_bytes()))
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert '#include "aggnet_lanes_header.p4": a program given as text' in err.value.details()
    client.set_pipeline(COMMIT, p4r.ForwardingPipelineConfig(p4info=p4info, p4_device_config=config_path.read_bytes()))
    assert srv.pipeline is not None
    assert '#include "' not in config_path.read_text()
    # the controller pushes exactly this text
    assert load_program(str(AGGNET_P4)).device_config == config_path.read_bytes()


def test_compile_reports_an_unwritable_output_in_one_line(tmp_path):
    proc = subprocess.run([str(ROOT / ".venv" / "bin" / "aggnet"), "p4", "compile", str(AGGNET_P4),
                           "--device-config", str(tmp_path / "no" / "such" / "dir.p4")],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [f"error: cannot write {tmp_path / 'no' / 'such' / 'dir.p4'}: "
                                                "No such file or directory"]
    assert os.listdir(tmp_path) == []


PART = "header h_t { bit<8> a; }\nstruct H { h_t h; }\nstruct M { }\n"
REST = """parser P(packet_in pk, out H h, inout M m, inout standard_metadata_t sm) {
    state start { pk.extract(h.h); transition accept; } }
control V(inout H h, inout M m) { apply {} }
control I(inout H h, inout M m, inout standard_metadata_t sm) { apply { sm.egress_spec = 1; } }
control E(inout H h, inout M m, inout standard_metadata_t sm) { apply {} }
control C(inout H h, inout M m) { apply {} }
control D(packet_out pk, in H h) { apply { pk.emit(h.h); } }
V1Switch(P(), V(), I(), E(), C(), D()) main;
"""


def test_a_switch_reads_no_file_a_pushed_program_names(tmp_path):
    """`aggnet switch PROG.p4` includes the files beside PROG.p4 (the user's own). A program pushed over gRPC names no
    file of the switch's host: its #include of one, by absolute path or relative to the switch's working directory,
    is refused in one line naming the include, and nothing the file holds comes back."""
    from procs import running_switch

    secret = tmp_path / "secret.p4"
    secret.write_text("secret_token_7 = 1;\n")
    (tmp_path / "part.p4").write_text(PART)
    program = tmp_path / "prog.p4"
    program.write_text('#include <core.p4>\n#include <v1model.p4>\n#include "part.p4"\n' + REST)
    p4info = front_end_file(str(program))[1]
    with running_switch(program, tmp_path / "switch.log") as (_, grpc_port):  # its working directory: the repo's
        client = RawClient(grpc_port)
        try:
            client.arbitrate(10)
            loaded = client.get_pipeline(p4r.GetForwardingPipelineConfigRequest.ALL)
            assert loaded.p4info == p4info and b"struct H { h_t h; }" in loaded.p4_device_config
            for name in (str(secret), os.path.relpath(secret, ROOT)):
                source = f'#include <core.p4>\n#include <v1model.p4>\n#include "{name}"\n{PART}{REST}'
                with pytest.raises(grpc.RpcError) as err:
                    client.set_pipeline(COMMIT, p4r.ForwardingPipelineConfig(p4info=p4info,
                                                                             p4_device_config=source.encode()))
                assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
                assert err.value.details().startswith(f'device_config.p4:3:1: error: #include "{name}": a program '
                                                      "given as text (a pushed device config) includes only")
                assert "secret_token" not in err.value.details()
            client.set_pipeline(COMMIT, p4r.ForwardingPipelineConfig(
                p4info=p4info, p4_device_config=device_config_source(str(program)).encode()))
        finally:
            client.close()
