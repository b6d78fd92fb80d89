"""Background traffic flows over loopback: paced rate, on/off pattern, TCP, argument errors."""
import json
import subprocess
import sys
import threading

import pytest

from hosts import traffic


def run_flow(proto, rate_mbps, duration, on=1.0, off=0.0):
    got, port = {}, []
    ready = threading.Event()

    def listening(p):
        port.append(p)
        ready.set()
    rx = threading.Thread(target=lambda: got.update(traffic.receive(proto, 0, duration + 1.0, "127.0.0.1",
                                                                    listening)))
    rx.start()
    ready.wait(5)
    sent = traffic.send(proto, "127.0.0.1", port[0], 1000, traffic.periodic(0.0, duration, on, off, rate_mbps))
    rx.join()
    return sent, got


def test_on_off_pattern_and_overlapping_intervals():
    on_off = traffic.periodic(0.5, 5.0, 2, 1, 3.0)
    assert on_off == ((0.5, 2.5, 3.0), (3.5, 5.5, 3.0))
    assert [traffic.rate_at(on_off, t) for t in (0, 0.5, 2.4, 2.5, 3.4, 3.5, 5.5)] == [0, 3, 3, 0, 0, 3, 0]
    assert traffic.periodic(0, 123.4, 1, 0, 2.0) == ((0, 123.4, 2.0),)
    assert traffic.rate_at([(0, 2, 1.0), (1, 3, 2.5)], 1.5) == 3.5  # two flows of one sender at once


def test_udp_flow_holds_its_rate_only_while_on():
    sent, got = run_flow("udp", rate_mbps=4, duration=1.6, on=0.4, off=0.4)
    expected = 4e6 / 8 * 0.8  # on for 0.8 s of 1.6 s
    assert 0.8 * expected <= sent["bytes"] <= 1.15 * expected
    assert got["bytes"] == sent["bytes"] and got["packets"] == sent["packets"]


def test_tcp_flow_is_paced_too():
    sent, got = run_flow("tcp", rate_mbps=8, duration=1.0)
    assert 0.8 * 1e6 <= sent["bytes"] <= 1.15 * 1e6
    assert got["bytes"] == sent["bytes"]


def test_bad_arguments_are_one_line_errors(tmp_path):
    done = subprocess.run([sys.executable, "-m", "hosts", "traffic", "send", "--dst", "127.0.0.1", "--port", "5001",
                           "--duration", "1", "--on", "0"], capture_output=True, text=True)
    assert done.returncode == 2 and done.stderr.strip().count("\n") == 0
    assert "--on > 0" in done.stderr
    out = tmp_path / "s.json"
    done = subprocess.run([sys.executable, "-m", "hosts", "traffic", "send", "--dst", "127.0.0.1", "--port", "47813",
                           "--duration", "0.3", "--rate-mbps", "1", "--out", str(out)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    summary = json.loads(out.read_text())
    assert summary["packets"] == pytest.approx(1e6 / 8 * 0.3 / 1000, abs=8)
    bad = tmp_path / "schedule.json"
    bad.write_text('{"start": 1, "intervals": [[2, 1, 5]]}')
    done = subprocess.run([sys.executable, "-m", "hosts", "traffic", "send", "--dst", "127.0.0.1", "--port", "47813",
                           "--schedule", str(bad)], capture_output=True, text=True)
    assert done.returncode == 2 and done.stderr.strip() == (
        f"traffic: --schedule: {bad}: every interval needs 0 <= start < end and a rate > 0")
