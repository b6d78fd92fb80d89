"""`aggnet run --tls DIR` on real Mininet: every switch serves P4Runtime over mutual TLS with the
run's throwaway CA, the controller connects with its certificate, and the all-reduce is exact; on
the embedded target, and on BMv2 where it is installed (simple_switch_grpc takes the same flags)."""
from __future__ import annotations

import os
import shutil

import e2e
import pytest

from testbed.nodes import Bmv2Switch

pytestmark = [pytest.mark.root, pytest.mark.skipif(os.geteuid() != 0, reason="needs root for Mininet")]


@pytest.mark.parametrize("target", ["embedded", "bmv2"])
def test_run_with_tls_is_exact(tmp_path, target):
    if target == "bmv2" and any(shutil.which(p) is None for p in Bmv2Switch.programs):
        pytest.skip("BMv2 is not on PATH")
    tls = tmp_path / "tls"
    done, results = e2e.aggnet_run(tmp_path / "runs", "--workload", "allreduce", "--topo", "star4",
                                   "--elements", "20000", "--target", target, "--tls", str(tls), timeout=300)
    assert done.returncode == 0, done.stderr
    assert results is not None and results["allreduce_exact"] is True
    assert f"P4Runtime over mutual TLS, certificates in {tls}" in done.stdout
    assert {p.name for p in tls.iterdir()} == {"ca.pem", "ca.key", "switch.pem", "switch.key", "controller.pem",
                                               "controller.key"}
    if target == "embedded":
        log = (e2e.run_dir(tmp_path / "runs") / "logs" / "s1.log").read_text()
        assert "(TLS, client certificates required)" in log

