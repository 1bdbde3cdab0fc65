"""A pure-Python hot path, outer -> middle -> inner; a branch where a Python function calls a C
function (zlib.compress) that calls back nothing; and one where C (list.sort) calls back into
Python (the key function). Lines marked `MARK name` are where the test expects each frame."""
import sys
import time
import zlib


def inner(n):  # MARK inner
    total = 0  # MARK inner
    for i in range(n):  # MARK inner
        total += i * i  # MARK inner
    return total  # MARK inner


def middle(n):
    return inner(n)  # MARK middle


def compress(data):
    return zlib.compress(data, 9)  # MARK compress


def weight(x):
    return sum(range(x % 200))  # MARK weight


def resort(items):
    return sorted(items, key=weight)  # MARK resort


def outer(seconds):
    data = bytes(range(256)) * 400
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        middle(100_000)  # MARK outer-middle
        compress(data)  # MARK outer-compress
        resort(list(range(1000)))  # MARK outer-resort


outer(float(sys.argv[1]))  # MARK module
