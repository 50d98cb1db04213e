"""Ring attention: one causal sequence spread over the ranks of a torch.distributed group.

    python3 examples/python/ring_attention.py                   # starts 2 CPU ranks itself
    torchrun --nproc-per-node 3 examples/python/ring_attention.py           # CPU ranks, gloo
    torchrun --nproc-per-node 2 examples/python/ring_attention.py --cuda    # GPUs, NCCL

Every rank makes the same whole q, k, v (a fixed seed), keeps its zigzag shard, and runs
tessel.distributed.ring_attention on it, forward and backward. Rank 0 gathers the shards, puts
the sequence back together (zigzag_unshard) and compares the output and dq with tessel.attention
on the whole sequence in one process. docs/ring.md explains the API.
"""
import datetime
import os
import socket
import sys

from _common import report  # noqa: F401  (finds tessel: the installed one or the build tree)

import torch
import torch.distributed as dist

import tessel
from tessel.distributed import ring_attention, zigzag_shard, zigzag_unshard


def main(cuda):
    backend = "nccl" if cuda else "gloo"
    dist.init_process_group(backend, timeout=datetime.timedelta(seconds=120))
    rank, world = dist.get_rank(), dist.get_world_size()
    if cuda:
        device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", rank)))
        torch.cuda.set_device(device)
        B, H, Hkv, N, D, dtype = 1, 8, 2, 8191, 64, torch.float16
    else:
        device = torch.device("cpu")
        B, H, Hkv, N, D, dtype = 1, 2, 1, 45, 16, torch.float32      # 45: no world divides it

    g = torch.Generator().manual_seed(0)
    q = torch.randn(B, H, N, D, generator=g).to(device, dtype)
    k = torch.randn(B, Hkv, N, D, generator=g).to(device, dtype)
    v = torch.randn(B, Hkv, N, D, generator=g).to(device, dtype)
    do = torch.randn(B, H, N, D, generator=g).to(device, dtype)

    # This rank's shard: chunks rank and 2W - 1 - rank of 2W, for causal load balance.
    q_r, k_r, v_r = (zigzag_shard(x, rank, world).requires_grad_() for x in (q, k, v))
    o_r = ring_attention(q_r, k_r, v_r, causal=True, layout="zigzag", enable_gqa=True)
    o_r.backward(zigzag_shard(do, rank, world))

    # Back together on rank 0 (all_gather_object: the shards' lengths differ by a row).
    shards = [None] * world
    dist.all_gather_object(shards, (o_r.detach().cpu(), q_r.grad.cpu()))
    if rank == 0:
        o = zigzag_unshard([s[0] for s in shards])
        dq = zigzag_unshard([s[1] for s in shards])
        if cuda:
            qg = q.clone().requires_grad_()
            ref = tessel.attention(qg, k, v, causal=True, enable_gqa=True)
            ref.backward(do)
            ref_o, ref_dq = ref.detach().cpu(), qg.grad.cpu()
        else:
            arrays = [x.numpy() for x in (q, k, v)]
            ref_o, lse = tessel.attention(*arrays, causal=True, enable_gqa=True,
                                          return_lse=True)
            ref_dq = tessel.attention_backward(*arrays, ref_o, lse, do.numpy(), causal=True,
                                               enable_gqa=True)[0]
            ref_o, ref_dq = torch.from_numpy(ref_o), torch.from_numpy(ref_dq)
        e_o = (o.float() - ref_o.float()).abs().max().item()
        e_dq = (dq.float() - ref_dq.float()).abs().max().item()
        print(f"ring attention over {world} {backend} ranks, N = {N}: max |o - o_1| = {e_o:.2e}, "
              f"max |dq - dq_1| = {e_dq:.2e} (tessel.attention in one process)")
    dist.destroy_process_group()


def _spawned(rank, world, port):
    os.environ.update(RANK=str(rank), WORLD_SIZE=str(world), LOCAL_RANK=str(rank),
                      MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    main(cuda=False)


if __name__ == "__main__":
    if "RANK" in os.environ:                          # under torchrun
        main(cuda="--cuda" in sys.argv)
    else:                                             # alone: two CPU ranks of our own
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            free_port = s.getsockname()[1]
        torch.multiprocessing.spawn(_spawned, args=(2, free_port), nprocs=2)
