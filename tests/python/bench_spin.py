"""The Python workload of `cargo xtask bench profile`: prints `pid=P`, waits for a line on
standard input, runs a fixed amount of pure-Python work (outer -> middle -> inner, BATCHES
times), and prints its CPU time as `stack_spin` does (`chain_cpu_ns=... direct_cpu_ns=0
process_cpu_ns=...`)."""
import os
import sys
import time


def inner(n):
    total = 0
    for i in range(n):
        total += i * i
    return total


def middle(n):
    return inner(n)


def outer(batches):
    for _ in range(batches):
        middle(10_000)


batches = int(sys.argv[1])
print(f"pid={os.getpid()}", flush=True)
sys.stdin.readline()
start = time.thread_time_ns()
outer(batches)
spent = time.thread_time_ns() - start
print(
    f"chain_cpu_ns={spent} direct_cpu_ns=0 process_cpu_ns={time.process_time_ns()}",
    flush=True,
)
