"""Crashed, silent or misbehaving peers of the TCP baselines give one-line errors naming the peer."""
import socket
import threading

import numpy as np
import pytest
import workers as wk

from hosts.comm import CommError, Endpoint, connect
from hosts.ps import ParameterServer, ParameterServerClient
from hosts.ring import RingAllReduce

VEC = np.arange(1000, dtype=np.float32)


def one_line(exc):
    assert isinstance(exc, CommError) and exc.exit_code == 1
    assert "\n" not in str(exc)
    return str(exc)


def test_ring_peer_crash_is_named_quickly():
    peers = wk.endpoints(3)

    def rank_main(rank):
        comm = RingAllReduce(peers, rank, timeout_s=20)
        try:
            comm.allreduce(VEC)
            if rank == 2:
                return None  # h3 "crashes": its sockets close without another word
            comm.allreduce(VEC)
        finally:
            comm.close()

    _, errors = wk.run_ranks(rank_main, 3)
    assert errors[2] is None
    msg = one_line(errors[0])
    assert msg.startswith("ring h1: peer h3 (127.0.0.1:") and "closed the connection" in msg
    assert "peer h" in one_line(errors[1])


def test_ring_silent_peer_times_out_with_its_name():
    peers = wk.endpoints(2)
    release = threading.Event()

    def rank_main(rank):
        with RingAllReduce(peers, rank, timeout_s=0.5) as comm:
            if rank == 1:
                release.wait(10)  # alive but never takes part
                return None
            try:
                return comm.allreduce(VEC)
            finally:
                release.set()

    _, errors = wk.run_ranks(rank_main, 2)
    assert one_line(errors[0]) == f"ring h1: peer {peers[1]} sent nothing for 0.5 s"


def test_unreachable_peer_is_named():
    port = wk.free_ports(1)[0]
    with pytest.raises(CommError) as info:
        connect(Endpoint("h9", "127.0.0.1", port), "h1", 0, "ring h1", timeout_s=0.3)
    assert one_line(info.value).startswith(f"ring h1: cannot reach peer h9 (127.0.0.1:{port}) within 0.3 s")


def start_server(names, timeout_s=10):
    ep = Endpoint("ps", "127.0.0.1", wk.free_ports(1)[0])
    server = ParameterServer(ep, names, timeout_s=timeout_s)
    outcome = {}

    def serve():
        try:
            outcome["rounds"] = server.serve()
        except CommError as exc:
            outcome["error"] = exc
        finally:
            server.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    return ep, thread, outcome


def test_ps_names_a_worker_that_crashes_and_workers_see_the_server_go():
    names = ["h1", "h2", "h3"]
    ep, thread, outcome = start_server(names)

    def rank_main(rank):
        comm = ParameterServerClient(ep, names[rank], rank, 3, timeout_s=10)
        comm.allreduce(VEC)
        if rank == 1:
            comm.conn.close()  # h2 crashes: no goodbye
            return None
        try:
            return comm.allreduce(VEC)
        finally:
            comm.conn.close()

    _, errors = wk.run_ranks(rank_main, 3)
    thread.join(10)
    assert one_line(outcome["error"]).startswith("ps ps: peer h2 (127.0.0.1:")
    assert "closed the connection" in str(outcome["error"])
    for rank in (0, 2):
        assert one_line(errors[rank]).startswith(f"ps client {names[rank]}: peer {ep} ")


def test_ps_rejects_a_worker_it_does_not_know():
    ep, thread, outcome = start_server(["h1", "h2"])
    client = ParameterServerClient(ep, "h7", 1, 2, timeout_s=5)
    thread.join(10)
    client.conn.close()
    assert one_line(outcome["error"]) == "ps ps: unexpected worker 'h7' claiming rank 1 (expected ranks 0..1: h1, h2)"


def test_ps_rejects_garbage_on_the_wire():
    ep, thread, outcome = start_server(["h1"])
    with socket.create_connection((ep.host, ep.port)) as s:
        s.sendall(b"GET / HTTP/1.0\r\n\r\n")
        thread.join(10)
    assert "sent a malformed frame (magic b'GET '" in one_line(outcome["error"])


def test_ps_full_round_trip_and_goodbye():
    names = ["h1", "h2"]
    ep, thread, outcome = start_server(names)

    def rank_main(rank):
        with ParameterServerClient(ep, names[rank], rank, 2, timeout_s=10) as comm:
            return [comm.allreduce(VEC * (rank + 1)) for _ in range(3)]

    results, errors = wk.run_ranks(rank_main, 2)
    thread.join(10)
    assert errors == [None, None] and outcome == {"rounds": 3}
    for res in results:
        for r in res:
            np.testing.assert_array_equal(r, VEC * 3)


def test_ps_names_a_worker_that_stops_early():
    names = ["h1", "h2"]
    ep, thread, outcome = start_server(names)

    def rank_main(rank):
        with ParameterServerClient(ep, names[rank], rank, 2, timeout_s=10) as comm:
            comm.allreduce(VEC)
            if rank == 0:
                comm.allreduce(VEC)

    _, errors = wk.run_ranks(rank_main, 2)
    thread.join(10)
    assert one_line(outcome["error"]) == "ps ps: worker(s) h2 finished at round 1 while the others continue"
    assert "peer ps" in one_line(errors[0])
