"""Spins in `early` for a second, then in `late` for 50 ms, and exits at once: `late`'s code
object is first sampled in the process's last 50 ms. The second before lets the recorder be
past the process's first stacks, which read the unwind tables of everything it maps, so what
is measured is whether the stacks of a process about to exit are read in time, not how long a
first stack takes. (In a debug build on a loaded machine that took up to 430 ms while the
resolver also read each file's symbol table; 300 ms of `early` then lost `late` 3 runs in 4,
and none since.)"""
import time


def spin(seconds):
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        pass


def early():
    spin(1.0)  # MARK early


def late():
    spin(0.05)  # MARK late


early()
late()
