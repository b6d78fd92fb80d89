"""Agent config validation: every error names the source and the field."""
import pytest

from hosts.agent_config import (
    AgentConfig,
    ConfigError,
    TrainConfig,
    load_config,
    parse_config,
)

WORKERS = [{"name": "h1", "ip": "10.0.0.1"}, {"name": "h2", "ip": "10.0.0.2", "port": 47001}]
JOB = {"job_id": 1, "slot_base": 0, "slot_count": 8, "agg_ip": "10.0.255.254",
       "workers": [{"name": "h1", "ip": "10.0.0.1"}, {"name": "h2", "ip": "10.0.0.2"}]}


def test_round_trip_and_defaults(tmp_path):
    config = parse_config({"scheme": "innet", "workers": WORKERS, "job": JOB, "train": {"lr": 1, "steps": 7}})
    assert config.train == TrainConfig(lr=1.0, steps=7)
    assert [w.port for w in config.workers] == [47000, 47001] and config.rank_of("h2") == 1
    assert config.job.world_size == 2 and config.ps is None
    again = parse_config(config.to_dict())
    assert again == config and isinstance(again, AgentConfig)


@pytest.mark.parametrize("change, message", [
    ({"scheme": "mpi"}, "field 'scheme': 'mpi' is not one of innet, ps, ring"),
    ({"workers": []}, "field 'workers': expected a non-empty list"),
    ({"workers": [{"name": "h1", "ip": "10.0.0.300"}]}, "field 'workers[0].ip': '10.0.0.300' is not an IPv4 address"),
    ({"workers": [{"name": "h1", "ip": "10.0.0.1", "port": 0}]}, "field 'workers[0].port': 0 is not a port number"),
    ({"workers": WORKERS[:1] * 2}, "field 'workers': worker names must be unique"),
    ({"train": {"steps": 1.5}}, "field 'train.steps': expected int, got 1.5"),
    ({"train": {"batch_size": 0}}, "field 'train.batch_size': must be >= 1, got 0"),
    ({"train": {"epochs": 3}}, "field 'train.epochs': unknown (known: model, dataset"),
    ({"train": {"seed": True}}, "field 'train.seed': expected int, got True"),
    ({"timeout_s": -1}, "field 'timeout_s': expected a positive number"),
    ({"scheme": "ps"}, "field 'ps': missing (scheme ps needs the server's name and ip)"),
    ({"scheme": "innet"}, "field 'job': missing (scheme innet needs the job spec)"),
    ({"job": dict(JOB, slot_count=0)}, "job: field 'slot_count': 0 is outside [1, 65535]"),
    ({"job": dict(JOB, workers=JOB["workers"][::-1])}, "field 'job.workers': names must be h1, h2 in this order"),
    ({"extra": 1}, "field 'extra': unknown"),
])
def test_errors_name_the_field(change, message):
    data = {"scheme": "ring", "workers": WORKERS, **change}
    with pytest.raises(ConfigError) as info:
        parse_config(data, "job.json")
    assert str(info.value).startswith("job.json: ") and message in str(info.value)
    assert info.value.exit_code == 2


def test_unreadable_file(tmp_path):
    with pytest.raises(ConfigError, match=r"nothere.json: cannot read: No such file or directory"):
        load_config(tmp_path / "nothere.json")
