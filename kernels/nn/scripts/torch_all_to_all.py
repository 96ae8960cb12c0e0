#!/usr/bin/python3
"""PyTorch's all-to-all as the peer of chapter 05's (ch05/all_to_all's `pytorch_gloo` rows):
torch.distributed.all_to_all_single with equal splits on a float32 tensor of --bytes bytes a
rank, over the gloo backend, in --ranks processes on this machine (torch.multiprocessing spawn,
env:// rendezvous on MASTER_ADDR 127.0.0.1 and a free port, Gloo's TCP transport on loopback
unless CONCURDL_GLOO_IFACE names another interface), one compute thread each.

Rank r's block j holds the floats (131 r + 17 j + 7 i) mod 8191 for i = 0 .. block - 1 (the
values ch05/all_to_all's own rows send), so every float received names its sender, its receiver
and its place. Measured as the chapter measures its own rows: before each call the send buffer
is rewritten and the receive buffer poisoned (untimed), the ranks meet at a barrier, and the call
alone is timed; a sample is the mean over --iters calls, the slowest rank's. One untimed call is
checked before any timing, and every sample's last call after it. Prints one JSON line on stdout:

  {"seconds": [one per sample], "wrong": [wrong elements over all ranks, one per sample],
   "wrong_before": n, "ranks": N, "bytes": B, "iters": k, "torch": "2.x", "backend": "gloo",
   "transport": "lo"}

  VENV/bin/python kernels/nn/scripts/torch_all_to_all.py --ranks 4 --bytes 262144 --iters 20

Without torch it prints {"skipped": "why"} and exits 3, so that the caller can say why.
"""
import argparse
import json
import os
import socket
import sys
import time

MODULUS = 8191
POISON = -1e30


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Blocks:
    """One rank's buffers and the values its blocks must hold."""

    def __init__(self, torch, rank, ranks, floats):
        self.torch = torch
        self.rank = rank
        self.ranks = ranks
        self.block = floats // ranks
        self.send = torch.zeros(floats, dtype=torch.float32)
        self.recv = torch.full((floats,), POISON, dtype=torch.float32)
        # 7 i mod 8191 for each place i, and room for one block's values.
        self.place = torch.arange(self.block, dtype=torch.int64).mul_(7).remainder_(MODULUS)
        self.values = torch.empty(self.block, dtype=torch.int64)

    def expected(self, sender, receiver):
        """The block `sender` sends `receiver`, as integers (exact in float32: below 2^13)."""
        c = (sender * 131 + receiver * 17) % MODULUS
        return self.torch.add(self.place, c, out=self.values).remainder_(MODULUS)

    def fill(self):
        for j in range(self.ranks):
            b = self.send[j * self.block: (j + 1) * self.block]
            b.copy_(self.expected(self.rank, j))
        self.recv.fill_(POISON)

    def wrong(self):
        n = 0
        for j in range(self.ranks):
            b = self.recv[j * self.block: (j + 1) * self.block]
            n += int(b.ne(self.expected(j, self.rank)).sum())
        return n


def worker(rank, args, port, out_queue):
    import torch
    import torch.distributed as dist
    torch.set_num_threads(1)
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    dist.init_process_group("gloo", init_method="env://", rank=rank, world_size=args.ranks)
    bufs = Blocks(torch, rank, args.ranks, args.bytes // 4)

    def call():
        dist.all_to_all_single(bufs.recv, bufs.send)

    def total(value, op):
        t = torch.tensor([value], dtype=torch.float64)
        dist.all_reduce(t, op=op)
        return t.item()

    # Before timing: one call, every element checked on every rank.
    bufs.fill()
    dist.barrier()
    call()
    wrong_before = total(bufs.wrong(), dist.ReduceOp.SUM)
    seconds, wrong = [], []
    for _ in range(args.repeat):
        spent = 0.0
        for _ in range(args.iters):
            bufs.fill()
            dist.barrier()
            t0 = time.perf_counter()
            call()
            spent += time.perf_counter() - t0
        # The slowest rank's mean, and the wrong elements of the last call over all ranks.
        seconds.append(total(spent / args.iters, dist.ReduceOp.MAX))
        wrong.append(int(total(bufs.wrong(), dist.ReduceOp.SUM)))
    if rank == 0:
        out_queue.put({"seconds": seconds, "wrong": wrong, "wrong_before": int(wrong_before),
                       "torch": torch.__version__})
    dist.barrier()
    dist.destroy_process_group()


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--ranks", type=int, default=2, help="processes")
    p.add_argument("--bytes", type=int, default=1 << 20,
                   help="bytes each rank sends in all, its own block included")
    p.add_argument("--iters", type=int, default=1, help="all-to-alls per sample")
    p.add_argument("--repeat", type=int, default=6, help="samples")
    args = p.parse_args()
    if min(args.ranks, args.bytes, args.iters, args.repeat) < 1:
        print(json.dumps({"error": "ranks, bytes, iters and repeat must be >= 1"}))
        return 2
    if args.bytes % (4 * args.ranks) != 0:
        print(json.dumps({"error": f"{args.bytes} bytes do not split into {args.ranks} equal "
                                   "blocks of whole floats"}))
        return 2
    try:
        import torch  # noqa: F401
        import torch.distributed as dist
        import torch.multiprocessing as mp
    except ImportError as e:
        print(json.dumps({"skipped": f"{sys.executable} has no torch ({e}); "
                                     "apt-get install python3-torch"}))
        return 3
    if not dist.is_available() or not dist.is_gloo_available():
        print(json.dumps({"skipped": f"{sys.executable}: PyTorch {torch.__version__} was built "
                                     "without torch.distributed's gloo backend"}))
        return 3
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    iface = os.environ.get("CONCURDL_GLOO_IFACE") or "lo"
    os.environ["GLOO_SOCKET_IFNAME"] = iface
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    mp.spawn(worker, args=(args, free_port(), q), nprocs=args.ranks, join=True)
    r = q.get(timeout=60)
    print(json.dumps({**r, "ranks": args.ranks, "bytes": args.bytes, "iters": args.iters,
                      "backend": "gloo", "transport": iface}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
