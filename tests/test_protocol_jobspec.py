"""JobSpec JSON round trip and one-line validation errors naming the field."""
import json

import pytest

from protocol.job import JobSpec, JobSpecError, WorkerSpec

SPEC = {
    "job_id": 3, "slot_base": 128, "slot_count": 64, "agg_ip": "10.0.255.1", "lanes": 64, "timeout_s": 0.02,
    "workers": [{"name": "h1", "ip": "10.0.0.1"}, {"name": "h2", "ip": "10.0.0.2", "port": 5000,
                                                     "mac": "02:00:00:00:00:02"}],
}


def test_roundtrip():
    spec = JobSpec.from_json(json.dumps(SPEC), "job.json")
    assert spec.workers[1] == WorkerSpec("h2", "10.0.0.2", 5000, "02:00:00:00:00:02")
    assert spec.workers[0].port == 48864 and spec.agg_port == 48864
    assert spec.world_size == 2 and spec.rank_of("h2") == 1
    assert JobSpec.from_json(spec.to_json()) == spec


@pytest.mark.parametrize("mutate, message", [
    (lambda d: d.pop("agg_ip"), "job.json: field 'agg_ip': missing"),
    (lambda d: d["workers"][1].update(ip="10.0.0.300"), "job.json: field 'workers[1].ip': '10.0.0.300' is not"),
    (lambda d: d.update(lanes=48), "job.json: field 'lanes': 48 is not one of (32, 64, 128, 256, 364)"),
    (lambda d: d.update(slot_count=0), "job.json: field 'slot_count': 0 is outside"),
    (lambda d: d.update(job_id=True), "job.json: field 'job_id': expected int, got bool"),
    (lambda d: d.update(job_id=5000), "job.json: field 'job_id': 5000 is outside [0, 1023]"),
    (lambda d: d["workers"].append({"name": "h1", "ip": "10.0.0.3"}), "field 'workers': worker names must be unique"),
    (lambda d: d.update(workers=[]), "field 'workers': needs at least one worker"),
])
def test_errors_name_the_field(mutate, message):
    data = json.loads(json.dumps(SPEC))
    mutate(data)
    with pytest.raises(JobSpecError) as exc:
        JobSpec.from_json(json.dumps(data), "job.json")
    assert message in str(exc.value) and "\n" not in str(exc.value)
    assert exc.value.exit_code == 2


def test_invalid_json_names_line():
    with pytest.raises(JobSpecError, match=r"^job.json:1:\d+: invalid JSON"):
        JobSpec.from_json("{oops", "job.json")
