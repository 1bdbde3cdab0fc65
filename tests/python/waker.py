"""One thread blocks reading a pipe; the main thread wakes it from a Python function, `wake`,
after a pause, 10 times: the wake-ups' waker stacks are the main thread's, in `wake`."""
import os
import threading
import time

r, w = os.pipe()


def reader():
    for _ in range(10):
        os.read(r, 1)


def wake():
    os.write(w, b"x")  # MARK wake


t = threading.Thread(target=reader, name="reader")
t.start()
time.sleep(1.0)  # the recorder finds the interpreter meanwhile (longer under load)
for _ in range(10):
    time.sleep(0.02)
    wake()  # MARK module
t.join()
