"""Parameter-server baseline: every worker pushes its gradient to one host, which sums
them (in rank order, so the result is deterministic) and sends the sum back to all.

The server sums a round CHUNK_BYTES at a time as the workers' frames arrive and sends each
piece of the sum on at once, as BytePS partitions tensors: its link then carries contributions
in and sums out at the same time. Waiting for whole frames would leave one direction idle
while the other works, twice the link time a round (hosts.models.analytic). A worker sends
on a helper thread while it receives, so a frame larger than the socket buffers cannot
deadlock against the sums already coming back.

Run the server as its own process on the PS host:

    python -m hosts ps --config job.json --out DIR

A round is one frame from every worker; a worker that is done sends an empty frame
("bye"). The server returns when every worker has said bye; a worker that disconnects
without it is a crash, reported by name.
"""
from __future__ import annotations

import logging
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

from .agent_config import AgentConfig, ConfigError
from .comm import WIRE_DTYPE, AllReduce, CommError, Connection, Endpoint, accept, connect, listen
from .process import setup_logging

log = logging.getLogger("aggnet.ps")
CHUNK_BYTES = 8192  # 2,048 float32 values: small against a bucket, large against a Python loop turn


class ParameterServer:
    """The summing host: accepts the job's workers, then serves rounds until all say bye."""

    def __init__(self, endpoint: Endpoint, workers: list[str], timeout_s: float = 30.0):
        self.endpoint = endpoint
        self.workers = list(workers)
        self.timeout_s = timeout_s
        self.rounds = 0
        self._server = listen(endpoint, backlog=len(workers))

    def serve(self) -> int:
        """Accept every worker, sum rounds until they all finish; returns the number of rounds."""
        conns = self._accept_all()
        try:
            while True:
                lengths = [conn.recv_header() for conn in conns]
                if set(lengths) == {0}:
                    return self.rounds
                gone = [self.workers[r] for r, n in enumerate(lengths) if not n]
                if gone:
                    raise CommError(f"ps {self.endpoint.name}: worker(s) {', '.join(gone)} finished at round "
                                    f"{self.rounds} while the others continue")
                if len(set(lengths)) != 1 or lengths[0] % WIRE_DTYPE.itemsize:
                    detail = ", ".join(f"{self.workers[r]}={n}" for r, n in enumerate(lengths))
                    raise CommError(f"ps {self.endpoint.name}: workers sent different sizes or partial values "
                                    f"in round {self.rounds} (bytes: {detail})")
                self._relay_sum(conns, lengths[0])
                self.rounds += 1
        finally:
            for conn in conns:
                conn.close()

    def close(self) -> None:
        self._server.close()

    @staticmethod
    def _relay_sum(conns: list[Connection], nbytes: int) -> None:
        """Sum one round's frames piece by piece as they arrive, each piece's sum sent to all at once."""
        for conn in conns:
            conn.send_header(nbytes)
        for start in range(0, nbytes, CHUNK_BYTES):
            n = min(CHUNK_BYTES, nbytes - start)
            total = np.frombuffer(conns[0].recv_part(n), dtype=WIRE_DTYPE).astype(np.float32)
            for conn in conns[1:]:
                total += np.frombuffer(conn.recv_part(n), dtype=WIRE_DTYPE)
            piece = total.astype(WIRE_DTYPE).data.cast("B")
            for conn in conns:
                conn.send_part(piece)

    def _accept_all(self) -> list[Connection]:
        context = f"ps {self.endpoint.name}"
        by_rank: dict[int, Connection] = {}
        while len(by_rank) < len(self.workers):
            rank, name, conn = accept(self._server, context, self.timeout_s)
            if not 0 <= rank < len(self.workers) or self.workers[rank] != name or rank in by_rank:
                conn.close()
                raise CommError(f"{context}: unexpected worker {name!r} claiming rank {rank} "
                                f"(expected ranks 0..{len(self.workers) - 1}: {', '.join(self.workers)})")
            log.info("worker %s (rank %d) connected", name, rank)
            by_rank[rank] = conn
        return [by_rank[r] for r in range(len(self.workers))]


class ParameterServerClient(AllReduce):
    """A worker's side: push the vector, wait for the sum."""

    def __init__(self, server: Endpoint, name: str, rank: int, world_size: int, timeout_s: float = 30.0):
        self.rank = rank
        self.world_size = world_size
        self.conn = connect(server, name, rank, f"ps client {name}", timeout_s)
        self._sender = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"ps client {name}")

    @property
    def bytes_sent(self) -> int:
        return self.conn.bytes_sent

    def allreduce(self, vec: np.ndarray) -> np.ndarray:
        flat = np.asarray(vec, dtype=np.float32).reshape(-1)
        if flat.size == 0:
            return np.asarray(vec, dtype=np.float32).copy()  # an empty frame would mean "bye"
        pending = self._sender.submit(self.conn.send_array, flat)
        out = self.conn.recv_array(flat.size)  # on failure close() abandons the send
        pending.result()
        return out.reshape(np.shape(vec))

    def close(self) -> None:
        self._sender.shutdown(wait=False, cancel_futures=True)
        try:
            self.conn.send(b"")
        except CommError:
            pass  # the server is gone already; closing is all that is left to do
        self.conn.close()


def run_ps(config: AgentConfig, out_dir: Path, source: str = "<agent config>") -> None:
    """The PS host process: serve the job in `config`, log to OUT/NAME.log."""
    if config.ps is None:
        raise ConfigError(f"{source}: field 'ps': missing (needed to run a parameter server)")
    setup_logging(out_dir, config.ps.name)
    server = ParameterServer(config.ps, [w.name for w in config.workers], config.timeout_s)
    try:
        rounds = server.serve()
    finally:
        server.close()
    log.info("done after %d rounds", rounds)
