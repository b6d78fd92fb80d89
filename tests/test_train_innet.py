"""Training with the in-network all-reduce: real UDP through aggnet.p4 on the embedded target.

4 workers (threads) stream quantized gradients through a star switch (tests/data/aggnet/
fabric.py relays the datagrams through the Pipeline). After 50 steps every worker holds
identical weights, and they match a single-process run fed the same global batches within

    1e-5 (float rounding, as for the TCP baselines)
    + sum over steps t of lr / (1 - momentum) * 2**-(f_t + 1)

where f_t is the step's agreed fractional bits: the averaged gradient errs by at most
2**-(f_t + 1) per element (hosts.quantize), and with momentum m an error moves the weights
by at most lr / (1 - m) times itself over all later steps (first order).
"""
import socket

import fabric as fb
import pytest
import torch
import workers as wk

from hosts import quantize
from hosts.agent_config import TrainConfig
from hosts.comm import InNetworkAllReduce
from hosts.data import load_dataset
from hosts.job import JobSpec, WorkerSpec
from hosts.model import flat_params
from hosts.train import train_reference, train_worker

W = 4
CONFIG = TrainConfig(steps=50, batch_size=16, hidden=16, eval_every=50, seed=1)


class ExponentRecorder(InNetworkAllReduce):
    """Remembers each call's local max exponent, from which the agreed f_t follows."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.exponents = []

    def allreduce(self, vec):
        self.exponents.append(quantize.max_exponent(vec))
        return super().allreduce(vec)


@pytest.mark.slow
def test_innet_training_matches_single_process_within_quantization_bound():
    torch.set_num_threads(1)
    data = load_dataset("digits", CONFIG.seed)
    ports = wk.free_ports(W, kind=socket.SOCK_DGRAM)
    fabric = fb.Fabric({"s1": fb.star(W, slot_count=16)})
    for i, port in enumerate(ports):
        fabric.attach("s1", i + 1, i + 1, ("127.0.0.1", port))
    job = JobSpec(job_id=1, workers=tuple(WorkerSpec(f"h{i + 1}", "127.0.0.1", p) for i, p in enumerate(ports)),
                  slot_base=0, slot_count=16, agg_ip=fabric.addr[0], agg_port=fabric.addr[1], timeout_s=0.2)
    records = [[] for _ in range(W)]

    def rank_main(rank):
        with ExponentRecorder(job, rank, stall_timeout_s=30) as comm:
            return train_worker(CONFIG, data, comm, records[rank].append), comm.exponents, comm.bytes_sent

    fabric.start()
    try:
        results, errors = wk.run_ranks(rank_main, W, timeout_s=600)
    finally:
        fabric.close()
    assert errors == [None] * W and fabric.errors == []

    params = [flat_params(model) for model, _, _ in results]
    for p in params[1:]:
        assert torch.equal(p, params[0]), "workers' weights diverged"
    e_max = [max(exps[t] for _, exps, _ in results) for t in range(CONFIG.steps)]
    per_step = [quantize.error_bound(W, quantize.frac_bits(e, W)) / W for e in e_max]
    quant = sum(CONFIG.lr / (1 - CONFIG.momentum) * b for b in per_step)
    bound = 1e-5 + quant
    reference = flat_params(train_reference(CONFIG, data, W))
    diff = (params[0] - reference).abs().max().item()
    print(f"innet vs reference: max abs weight difference {diff:.3g}, bound {bound:.3g} (quantization {quant:.3g})")
    assert diff <= bound, f"max abs weight difference {diff} exceeds the bound {bound}"
    assert 0 < diff  # quantization did happen: not an exact float path
    n_chunks = -(-reference.numel() // job.lanes) + quantize.E_BUCKETS // job.lanes
    assert all(sent >= CONFIG.steps * n_chunks * 144 for _, _, sent in results)
    assert records[0][-1]["test_accuracy"] > 0.6
