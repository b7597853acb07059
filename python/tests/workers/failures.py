"""What ends a wait: a dead peer, a timeout, Ctrl-C; and the GIL is released
while a rank waits. ``KPCCL_TEST_CASE`` picks one; rank 0 reports."""

import os
import signal
import threading
import time

import kpccl
from common import communicator, say

case = os.environ["KPCCL_TEST_CASE"]


def come_late(win, peer):
    """Rank 1's part: arrive after rank 0 gave up; the window is abandoned."""
    time.sleep(1.0)
    try:
        win.peer_fence(peer)
    except kpccl.Error as e:
        say("late", type(e).__name__)
        say("late_rank", getattr(e, "rank", None))


def free_anyway(win):
    try:
        win.free()
    except kpccl.Error:
        pass  # abandoned: released anyway


def rank0_gives_up(win, caught, report):
    """Rank 0 waits for rank 1 until ``caught`` ends the wait, says how
    (``report(e)``) and after how long; rank 1 comes late. Both free."""
    if r == 0:
        t = time.monotonic()
        try:
            win.peer_fence(1)
        except caught as e:
            report(e)
            say("seconds", time.monotonic() - t)
    else:
        come_late(win, 0)
    free_anyway(win)


comm = communicator()
r = comm.rank

if case == "dead":
    win = comm.alloc(64)
    win.fence()
    if r == 1:
        os._exit(0)  # gone without freeing
    t = time.monotonic()
    try:
        win.peer_fence(1)
    except kpccl.PeerDeadError as e:
        say("raised", type(e).__name__)
        say("rank", e.rank)
        say("seconds", time.monotonic() - t)
    win.free() if win.poisoned is None else None

elif case == "timeout":
    win = comm.alloc(64, timeout=0.3)

    def timed_out(e):
        say("raised", type(e).__name__)
        say("is_kpccl", isinstance(e, kpccl.Error))

    # The built-in TimeoutError: kpccl.TimeoutError is one.
    rank0_gives_up(win, TimeoutError, timed_out)

elif case == "interrupt":
    win = comm.alloc(64)
    if r == 0:
        main = threading.main_thread().ident
        threading.Timer(0.3, lambda: signal.pthread_kill(main, signal.SIGINT)).start()

    def interrupted(_):
        say("raised", "KeyboardInterrupt")
        say("poisoned", win.poisoned is not None)

    rank0_gives_up(win, KeyboardInterrupt, interrupted)

elif case == "abandon_while_waiting":
    # Rank 0 leaves a `with` block by an exception while a thread of its own
    # waits on the window: the window is abandoned all the same, so rank 1's
    # fence fails at once (not at its 8 s timeout), and so does the thread's wait.
    if r == 0:
        waited = []

        def wait_for_a_signal(w):
            try:
                w.wait(1)
            except kpccl.Error as e:
                waited.append(type(e).__name__)

        try:
            with comm.alloc(64, timeout=8) as win:
                th = threading.Thread(target=wait_for_a_signal, args=(win,))
                th.start()
                time.sleep(0.2)
                raise RuntimeError("boom")
        except RuntimeError:
            pass
        th.join(5)
        say("thread_wait", waited[0] if waited else "still waiting")
    else:
        win = comm.alloc(64, timeout=8)
        t = time.monotonic()
        try:
            win.peer_fence(0)
        except kpccl.Error as e:
            say("raised", type(e).__name__)
            say("seconds", time.monotonic() - t)
        free_anyway(win)

elif case == "gil":
    win = comm.alloc(64)
    if r == 0:
        count = [0]
        stop = threading.Event()

        def spin():
            while not stop.is_set():
                count[0] += 1

        th = threading.Thread(target=spin)
        th.start()
        time.sleep(0.05)
        before = count[0]
        win.peer_fence(1)  # rank 1 comes after 0.5 s
        during = count[0] - before
        stop.set()
        th.join()
        say("during", during)
    else:
        time.sleep(0.5)
        win.peer_fence(0)
    win.free()

comm.destroy()
say("done", r)
