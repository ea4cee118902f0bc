#!/usr/bin/env python3
"""bench/gloo_allreduce.py — torch.distributed's gloo all_reduce between 2 processes on
loopback, the reference bench_allreduce compares its TCP ring against (same sizes, same
timing rule: per size, a warm-up call, then 3 samples of back-to-back calls filling
--seconds-per-size together; the best sample's time per call counts).

Usage: gloo_allreduce.py --port P --sizes BYTES[,BYTES...] [--seconds-per-size S]
Prints one line per size: "gloo bytes=<n> seconds=<mean time of one all_reduce>".
Exits 3 when torch (with gloo) cannot be imported, so the caller can report nan.
"""
import argparse
import os
import sys
import time

SAMPLES = 3


def rank_main(rank, port, sizes, seconds_per_size):
    import torch
    import torch.distributed as dist

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=2)
    for size in sizes:
        values = torch.ones(size // 4, dtype=torch.float32)
        dist.all_reduce(values)
        # Agree on the call count: rank 0 decides from a timed probe, everyone follows.
        start = time.perf_counter()
        dist.all_reduce(values)
        probe = torch.tensor([time.perf_counter() - start], dtype=torch.float64)
        dist.broadcast(probe, 0)
        calls = max(1, min(1000, int(seconds_per_size / SAMPLES / max(probe.item(), 1e-6))))
        best = float("inf")
        for _ in range(SAMPLES):
            dist.barrier()
            start = time.perf_counter()
            for _ in range(calls):
                dist.all_reduce(values)
            best = min(best, (time.perf_counter() - start) / calls)
        if rank == 0:
            print(f"gloo bytes={size} seconds={best:.9f}", flush=True)
    dist.destroy_process_group()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--sizes", required=True)
    parser.add_argument("--seconds-per-size", type=float, default=0.3)
    args = parser.parse_args()
    try:
        import torch.distributed as dist
        import torch.multiprocessing as mp
        if not dist.is_available() or not dist.is_gloo_available():
            raise ImportError("torch.distributed without gloo")
    except ImportError as error:
        print(f"gloo unavailable: {error}", file=sys.stderr)
        sys.exit(3)
    sizes = [int(size) for size in args.sizes.split(",")]
    mp.start_processes(rank_main, args=(args.port, sizes, args.seconds_per_size), nprocs=2,
                       start_method="fork")


if __name__ == "__main__":
    main()
