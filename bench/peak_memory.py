#!/usr/bin/env python3
"""bench/peak_memory.py — the peak memory of a command and every process it starts.

    python3 bench/peak_memory.py [--interval S] -- COMMAND [ARGS...]

Samples the process tree every --interval seconds (psutil) and prints, at the end, the peak
of the tree's summed PSS (proportional set size: a page shared by k processes counts 1/k in
each, so forked ranks and loader workers are not counted twice for the pages they share) and
the largest single process's RSS. Used to put bareyolo's main job beside PyTorch YOLOv5 on the
same data (#20 item 5). Last line:
    RESULT peak_pss_mb=<tree, summed> peak_rss_mb=<largest process> seconds=<wall time>
The command's exit status is this script's.
"""
import argparse
import subprocess
import sys
import time

import psutil


def tree(root):
    try:
        return [root] + root.children(recursive=True)
    except psutil.NoSuchProcess:
        return []


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--interval", type=float, default=0.25)
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("give the command after --")
    start = time.monotonic()
    child = subprocess.Popen(command)
    root = psutil.Process(child.pid)
    peak_pss = peak_rss = 0
    while child.poll() is None:
        pss = 0
        for process in tree(root):
            try:
                info = process.memory_full_info()
            except (psutil.NoSuchProcess, psutil.AccessDenied):
                continue  # ended between listing and reading
            pss += info.pss
            peak_rss = max(peak_rss, info.rss)
        peak_pss = max(peak_pss, pss)
        time.sleep(args.interval)
    mb = 1 << 20
    print(f"RESULT peak_pss_mb={peak_pss / mb:.0f} peak_rss_mb={peak_rss / mb:.0f} "
          f"seconds={time.monotonic() - start:.0f}", flush=True)
    return child.returncode


if __name__ == "__main__":
    sys.exit(main())
