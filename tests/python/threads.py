"""Two Python threads, each spinning in a function of its own for the given seconds."""
import sys
import threading
import time


def spin(seconds):
    end = time.monotonic() + seconds
    n = 0
    while time.monotonic() < end:
        n += 1
    return n


def worker_a(seconds):
    return spin(seconds)  # MARK worker_a


def worker_b(seconds):
    return spin(seconds)  # MARK worker_b


seconds = float(sys.argv[1])
threads = [
    threading.Thread(target=worker_a, args=(seconds,), name="worker-a"),
    threading.Thread(target=worker_b, args=(seconds,), name="worker-b"),
]
for t in threads:
    t.start()
for t in threads:
    t.join()
