"""Blocks in time.sleep inside a Python function, `nap`, 20 times, after a first sleep at the
module's level (by the end of which the recorder has found the interpreter)."""
import time


def nap():
    time.sleep(0.03)  # MARK nap


def main():
    for _ in range(20):
        nap()  # MARK main


time.sleep(0.3)  # MARK warmup
main()  # MARK module
