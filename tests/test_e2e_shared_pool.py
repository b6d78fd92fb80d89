"""Root end-to-end: `aggnet experiment` with two jobs on a switch that holds one job's window (star8,
6 slots, windows of 4). Mode atp: both jobs aggregate in the shared slots, the chunks that found
their slot taken are summed by each job's spill server, every sum exact; mode relocate: the second
job has no other switch to go to and runs on its parameter server, exact too."""
import json
import os

import pytest
from e2e import REPO, aggnet_cmd, run_command

pytestmark = [pytest.mark.root, pytest.mark.slow,
              pytest.mark.skipif(os.geteuid() != 0, reason="needs root for Mininet")]


def test_jobs_share_a_switchs_slots_or_fall_back_to_their_servers(tmp_path):
    done = run_command(aggnet_cmd("experiment", "tests/data/scenario/shared_pool.yaml", "--out", str(tmp_path)),
                       600, cwd=REPO)
    assert done.returncode == 0, done.stderr[-2000:]
    folder, = tmp_path.iterdir()
    atp = json.loads((folder / "atp" / "results.json").read_text())
    assert [a["status"] for a in atp["admissions"]] == ["shared", "shared"]
    for name, ps in (("a", "h3"), ("b", "h6")):
        job = atp["jobs"][name]
        assert job["scheme"] == "innet" and job["allreduce_exact"] is True
        server = json.loads((folder / "atp" / "logs" / name / f"{ps}-spill.json").read_text())
        # every spilled chunk the workers heard of went to the server; the server summed no other
        assert server["chunks"] <= job["spilled_chunks"] and server["stray"] == 0
        assert job["counters"]["s1"]["spilled"] >= job["spilled_chunks"]
    relocate = json.loads((folder / "relocate" / "results.json").read_text())
    assert [a["status"] for a in relocate["admissions"]] == ["in-network", "host"]
    assert [j["scheme"] for j in relocate["jobs"].values()] == ["innet", "ps"]
    assert all(j["allreduce_exact"] for j in relocate["jobs"].values())
