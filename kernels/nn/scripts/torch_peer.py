#!/usr/bin/python3
"""PyTorch as the peer of the suite's training: the same MLP (784-256-128-10), batch, SGD
(lr 0.02, momentum 0.9, weight decay 5e-4) and Fashion-MNIST images, either

  --plain --threads T   a plain training loop in this process on T compute threads
                        (torch.set_num_threads): the peer of kernels/train_throughput, eager
                        or, with --compile (PyTorch 2.x), under torch.compile, or with
                        --autocast under torch.autocast("cpu", dtype=torch.bfloat16) (the
                        Linear layers' GEMMs in bfloat16, float32 weights: the peer of
                        ch05/precision's bf16 rows), or
  --ranks N             DistributedDataParallel over N processes with the gloo backend on this
                        machine (torch.multiprocessing spawn, file:// rendezvous), one compute
                        thread per process: the peer of ch05/dp_train; or, with --fsdp,
                        FSDP (fully_shard on each Linear and on the model: parameters,
                        gradients and momentum sharded, ZeRO stage 3) over the same processes,
                        the peer of ch05/zero (PyTorch 2.6 or later).

Times `--repeat` windows of `--steps` steps each after `--warmup` steps and prints one JSON line
on stdout:

  {"samples_per_s": ..., "ranks": N, "threads": T, "batch_per_rank": b, "global_batch": N*b,
   "steps": s, "seconds": [one per window], "torch": "2.x", "backend": "gloo" | "plain",
   "compiled": true | false (--plain), "fsdp": true | false}

  /usr/bin/python3 kernels/nn/scripts/torch_peer.py --ranks 2 --batch 64
  /usr/bin/python3 kernels/nn/scripts/torch_peer.py --plain --threads 1 --batch 64
  VENV/bin/python kernels/nn/scripts/torch_peer.py --plain --threads 2 --batch 256 --compile

Without torch it prints {"skipped": "why"} and exits 3, so that the caller can say why.
"""
import argparse
import gzip
import json
import os
import sys
import tempfile
import time


def fashion_mnist_dir():
    d = os.environ.get("CONCURDL_FASHION_MNIST")
    return d if d else "/usr/share/datasets/fashion-mnist"


def read_idx_images(path, limit):
    import numpy as np
    with gzip.open(path, "rb") as f:
        data = f.read()
    magic, n, rows, cols = (int.from_bytes(data[i:i + 4], "big") for i in range(0, 16, 4))
    if magic != 2051:
        raise ValueError(f"{path}: not an IDX image file (magic {magic})")
    n = min(n, limit) if limit else n
    x = np.frombuffer(data, dtype=np.uint8, count=n * rows * cols, offset=16)
    # The suite's normalisation: (pixel / 255 - mean) / std of the Fashion-MNIST training set.
    return ((x.reshape(n, rows * cols).astype(np.float32) / 255.0) - 0.2860) / 0.3530


def read_idx_labels(path, limit):
    import numpy as np
    with gzip.open(path, "rb") as f:
        data = f.read()
    magic, n = (int.from_bytes(data[i:i + 4], "big") for i in range(0, 8, 4))
    if magic != 2049:
        raise ValueError(f"{path}: not an IDX label file (magic {magic})")
    n = min(n, limit) if limit else n
    return np.frombuffer(data, dtype=np.uint8, count=n, offset=8).astype(np.int64)


def find_file(d, stem):
    for name in (stem + ".gz", stem):
        p = os.path.join(d, name)
        if os.path.exists(p):
            return p
    raise FileNotFoundError(f"{d}: no {stem}(.gz) (apt-get install dataset-fashion-mnist)")


def make_model(arch="784-256-128-10"):
    import torch.nn as nn
    widths = [int(w) for w in arch.split("-")]
    layers = []
    for i in range(len(widths) - 1):
        layers.append(nn.Linear(widths[i], widths[i + 1]))
        if i + 2 < len(widths):
            layers.append(nn.ReLU())
    return nn.Sequential(*layers)


def load(args):
    import torch
    d = args.data or fashion_mnist_dir()
    x = torch.from_numpy(read_idx_images(find_file(d, "train-images-idx3-ubyte"), args.images))
    y = torch.from_numpy(read_idx_labels(find_file(d, "train-labels-idx1-ubyte"), args.images))
    return x, y


def timed_windows(args, step, barrier=None):
    for _ in range(args.warmup):
        step()
    seconds = []
    for _ in range(args.repeat):
        if barrier:
            barrier()
        t0 = time.perf_counter()
        for _ in range(args.steps):
            step()
        if barrier:
            barrier()
        seconds.append(time.perf_counter() - t0)
    return seconds


def plain(args):
    """The plain loop: one process, args.threads compute threads, batches in a fixed order."""
    import torch
    import torch.nn as nn
    torch.set_num_threads(args.threads)
    x, y = load(args)
    torch.manual_seed(1)
    model = make_model(args.arch)
    opt = torch.optim.SGD(model.parameters(), lr=0.02, momentum=0.9, weight_decay=5e-4)
    loss_fn = nn.CrossEntropyLoss()
    # torch.compile (PyTorch 2.x): the forward and, through AOTAutograd, the backward as
    # generated kernels; compiled on the first warm-up steps, which are not timed.
    forward = torch.compile(model) if args.compile else model
    order = torch.randperm(x.shape[0], generator=torch.Generator().manual_seed(1))
    cursor = [0]

    def step():
        first = cursor[0]
        if first + args.batch > x.shape[0]:
            first = 0
        idx = order[first: first + args.batch]
        cursor[0] = first + args.batch
        opt.zero_grad(set_to_none=True)
        if args.autocast:
            with torch.autocast("cpu", dtype=torch.bfloat16):
                loss = loss_fn(forward(x[idx]), y[idx])
        else:
            loss = loss_fn(forward(x[idx]), y[idx])
        loss.backward()
        opt.step()
        return float(loss.detach())

    reset_peak_rss()
    seconds = timed_windows(args, step)
    return {"seconds": seconds, "torch": torch.__version__, "peak_rss_bytes": peak_rss_bytes(),
            "compiled": bool(args.compile), "autocast": bool(args.autocast)}


def reset_peak_rss():
    """VmHWM back to VmRSS (Linux >= 4.0), so the peak covers what follows; False if refused."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def peak_rss_bytes():
    """This process's peak resident memory (VmHWM), or None where /proc does not say."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def worker(rank, args, init_file, out_queue):
    import torch
    import torch.distributed as dist
    import torch.nn as nn
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method="file://" + init_file, rank=rank,
                            world_size=args.ranks)
    x, y = load(args)
    torch.manual_seed(1)
    model = make_model()
    if args.fsdp:
        # FSDP2: each Linear its own unit (all-gathered before its forward and its backward,
        # freed after, gradients reduce-scattered), then the root for what is left.
        from torch.distributed.fsdp import fully_shard
        for layer in model:
            if isinstance(layer, nn.Linear):
                fully_shard(layer)
        ddp = fully_shard(model)
    else:
        ddp = nn.parallel.DistributedDataParallel(model, bucket_cap_mb=args.bucket_mb)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.02, momentum=0.9, weight_decay=5e-4)
    loss_fn = nn.CrossEntropyLoss()
    g = torch.Generator().manual_seed(1)
    order = torch.randperm(x.shape[0], generator=g)
    gb = args.batch * args.ranks
    cursor = [0]

    def step():
        first = cursor[0]
        if first + gb > x.shape[0]:
            first = 0
        idx = order[first + rank * args.batch: first + (rank + 1) * args.batch]
        cursor[0] = first + gb
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(ddp(x[idx]), y[idx])
        loss.backward()  # DDP all-reduces the buckets during backward; FSDP reduce-scatters
        opt.step()
        return float(loss.detach())

    reset_peak_rss()
    seconds = timed_windows(args, step, dist.barrier)
    # Every rank's peak resident memory over the timed steps; rank 0's message has the times.
    out = {"rank": rank, "peak_rss_bytes": peak_rss_bytes()}
    if rank == 0:
        out.update({"seconds": seconds, "torch": torch.__version__})
    out_queue.put(out)
    dist.destroy_process_group()


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--plain", action="store_true", help="one process, no DDP")
    p.add_argument("--threads", type=int, default=1, help="compute threads (--plain)")
    p.add_argument("--compile", action="store_true",
                   help="the model under torch.compile (--plain; PyTorch 2.0 or later)")
    p.add_argument("--autocast", action="store_true",
                   help="under torch.autocast('cpu', dtype=torch.bfloat16) (--plain)")
    p.add_argument("--arch", default="784-256-128-10", help="layer widths (--plain)")
    p.add_argument("--ranks", type=int, default=2)
    p.add_argument("--batch", type=int, default=64, help="per-rank batch")
    p.add_argument("--steps", type=int, default=30, help="steps per timed window")
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--repeat", type=int, default=5, help="timed windows")
    p.add_argument("--images", type=int, default=6400, help="first N training images (0: all)")
    p.add_argument("--bucket-mb", type=float, default=25.0, help="DDP bucket_cap_mb")
    p.add_argument("--fsdp", action="store_true",
                   help="FSDP (fully_shard per Linear) instead of DDP (PyTorch 2.6 or later)")
    p.add_argument("--data", default="", help="Fashion-MNIST directory")
    args = p.parse_args()
    if min(args.ranks, args.threads, args.batch, args.steps, args.repeat) < 1:
        print(json.dumps({"error": "ranks, threads, batch, steps and repeat must be >= 1"}))
        return 2
    try:
        import torch  # noqa: F401
        import torch.multiprocessing as mp
    except ImportError as e:
        print(json.dumps({"skipped": f"{sys.executable} has no torch ({e}); "
                                     "apt-get install python3-torch"}))
        return 3
    if args.fsdp:
        try:
            from torch.distributed.fsdp import fully_shard  # noqa: F401
        except Exception as e:  # ImportError, or a torch that fails to import FSDP at all
            print(json.dumps({"skipped": f"{sys.executable}: PyTorch {torch.__version__} has no "
                                         f"FSDP2 fully_shard ({type(e).__name__}: {e}); PyTorch "
                                         "2.6 or later has it"}))
            return 3
    if args.plain:
        r = plain(args)
        best = sorted(r["seconds"])[len(r["seconds"]) // 2]
        print(json.dumps({"samples_per_s": args.batch * args.steps / best, "ranks": 1,
                          "threads": args.threads, "batch_per_rank": args.batch,
                          "global_batch": args.batch, "steps": args.steps,
                          "seconds": r["seconds"], "torch": r["torch"], "backend": "plain",
                          "autocast": r["autocast"], "arch": args.arch,
                          **({"peak_rss_bytes": r["peak_rss_bytes"]}
                             if r["peak_rss_bytes"] is not None else {})}))
        return 0
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    with tempfile.TemporaryDirectory(prefix="concurdl-ddp-") as tmp:
        init_file = os.path.join(tmp, "rendezvous")
        ctx = mp.get_context("spawn")
        q = ctx.Queue()
        mp.spawn(worker, args=(args, init_file, q), nprocs=args.ranks, join=True)
        msgs = [q.get(timeout=60) for _ in range(args.ranks)]
    r = next(m for m in msgs if m["rank"] == 0)
    rss = [m["peak_rss_bytes"] for m in sorted(msgs, key=lambda m: m["rank"])]
    seconds = r["seconds"]
    gb = args.batch * args.ranks
    best = sorted(seconds)[len(seconds) // 2]
    print(json.dumps({"samples_per_s": gb * args.steps / best, "ranks": args.ranks,
                      "threads": 1, "batch_per_rank": args.batch, "global_batch": gb, "steps": args.steps,
                      "seconds": seconds, "torch": r["torch"], "backend": "gloo",
                      "bucket_cap_mb": args.bucket_mb, "fsdp": bool(args.fsdp),
                      **({"peak_rss_bytes": rss} if all(b is not None for b in rss) else {})}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
