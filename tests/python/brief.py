"""Spins in `early` for a while, then in `late` for 50 ms, and exits at once: `late`'s code
object is first sampled in the process's last 50 ms."""
import time


def spin(seconds):
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        pass


def early():
    spin(0.3)  # MARK early


def late():
    spin(0.05)  # MARK late


early()
late()
