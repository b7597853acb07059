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


def outcome(call, suffix=""):
    """Runs ``call`` and says how it ended (``raised``: ``nothing`` or the
    kpccl error's class, with its ``message``) and after how long."""
    t = time.monotonic()
    try:
        call()
        say(f"raised{suffix}", "nothing")
    except kpccl.Error as e:
        say(f"raised{suffix}", type(e).__name__)
        say(f"message{suffix}", str(e))
        say(f"rank{suffix}", getattr(e, "rank", None))
    say(f"seconds{suffix}", time.monotonic() - t)


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


def interrupt_soon(after=0.3):
    """Sends this process's main thread SIGINT (Ctrl-C) after ``after`` s."""
    main = threading.main_thread().ident
    threading.Timer(after, lambda: signal.pthread_kill(main, signal.SIGINT)).start()


def interrupted_while_late(call, then=lambda prefix: None):
    """Rank 0 is interrupted while ``call()`` waits for rank 1, which comes
    late and must fail (not wait): rank 0 stays alive until it has.
    ``then(prefix)`` reports more, on either side (``late_`` on rank 1's)."""
    mark = os.environ["KPCCL_TEST_MARK"]
    if int(os.environ["KPCCL_RANK"]) == 0:
        interrupt_soon()
        t = time.monotonic()
        try:
            call()
            say("raised", "nothing")
        except KeyboardInterrupt:
            say("raised", "KeyboardInterrupt")
        say("seconds", time.monotonic() - t)
        then("")
        deadline = time.monotonic() + 20
        while not os.path.exists(mark) and time.monotonic() < deadline:
            time.sleep(0.05)
    else:
        time.sleep(1.5)
        t = time.monotonic()
        try:
            call()
            say("late", "nothing")
        except kpccl.Error as e:
            say("late", type(e).__name__)
            say("late_message", str(e).replace("\n", " "))
            say("late_rank", getattr(e, "rank", None))
        say("late_seconds", time.monotonic() - t)
        then("late_")
        open(mark, "w").close()


if case == "interrupt_comm":
    interrupted_while_late(communicator)
    raise SystemExit(0)

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

elif case == "left":
    win = comm.alloc(64)
    win.fence()
    if r == 1:
        del win  # leaves the window; the process lives on
        time.sleep(3.0)
        raise SystemExit(0)
    outcome(lambda: win.peer_fence(1))
    free_anyway(win)

elif case in ("drop_with_a_view", "drop_with_a_view_window_fence"):
    # Rank 1 drops its window object while a view of it lives on (the
    # mapping stays with the view), then lives on for 3 s: it has left the
    # window all the same, so rank 0's wait for it, pairwise or with every
    # rank, fails at once.
    win = comm.alloc(64, timeout=0)
    win.fence()
    if r == 1:
        view = win.buffer()
        del win
        view[0] = 7  # still mapped
        time.sleep(3.0)
        raise SystemExit(0)
    outcome(win.fence if case.endswith("window_fence") else lambda: win.peer_fence(1))
    free_anyway(win)

elif case == "free_while_peer_waits":
    # Rank 1 waits for a signal rank 0 never sends; rank 0 frees the window
    # meanwhile. No timeout: only the free can end the wait, and both fail.
    win = comm.alloc(64, timeout=0)
    win.fence()
    if r == 0:
        time.sleep(0.3)
        outcome(win.free, r)
    else:
        outcome(lambda: win.wait(0), r)
    free_anyway(win)

elif case == "free_with_a_view":
    # Rank 1 frees while a view of its window lives on (the mapping stays),
    # then lives on for 3 s: it has left the window all the same, so rank
    # 0's wait for it fails at once, saying so.
    win = comm.alloc(64, timeout=0)
    if r == 1:
        view = win.buffer()
        win.free()
        view[0] = 7  # still mapped
        time.sleep(3.0)
        raise SystemExit(0)
    win.fence()  # rank 1's teardown fence
    outcome(lambda: win.wait(1))
    free_anyway(win)

elif case == "interrupt_free":
    # Rank 0's free waits for rank 1 (1.5 s late) until Ctrl-C ends it; rank
    # 0 lives on until rank 1's free has failed, told that rank 0 gave up.
    win = comm.alloc(64, memory=os.environ.get("KPCCL_TEST_MEMORY"), timeout=0)
    win.fence()
    interrupted_while_late(win.free, lambda prefix: say(f"{prefix}freed", win.freed))

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
        interrupt_soon()

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
                waited.append(getattr(e, "rank", None))

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
        say("thread_wait_rank", waited[1] if waited else None)
    else:
        win = comm.alloc(64, timeout=8)
        t = time.monotonic()
        try:
            win.peer_fence(0)
        except kpccl.Error as e:
            say("raised", type(e).__name__)
            say("rank", getattr(e, "rank", None))
            say("seconds", time.monotonic() - t)
        free_anyway(win)

elif case == "interrupt_alloc":
    interrupted_while_late(lambda: comm.alloc(64, timeout=20, memory=os.environ.get("KPCCL_TEST_MEMORY")))

elif case == "poisoned_while_waiting":
    # Rank 0's main thread waits in a fence; another thread asks whether the
    # window is abandoned meanwhile, then rank 1 abandons it.
    if r == 0:
        win = comm.alloc(64, timeout=20)
        asked = []

        def ask():
            time.sleep(0.3)
            t = time.monotonic()
            asked.append(win.poisoned)
            asked.append(time.monotonic() - t)

        th = threading.Thread(target=ask)
        th.start()
        try:
            win.peer_fence(1)
        except kpccl.Error as e:
            say("raised", type(e).__name__)
            say("rank", getattr(e, "rank", None))
        th.join()
        say("during", asked[0])
        say("seconds", asked[1])
        say("after", win.poisoned)
        free_anyway(win)
    else:
        try:
            with comm.alloc(64, timeout=20):
                time.sleep(1.0)
                raise RuntimeError("abandon")
        except RuntimeError:
            pass

elif case == "wait_off_the_main_thread":
    # Rank 0's other thread waits 1.2 s for rank 1's signal while the main
    # thread runs Python: a wait that took the GIL now and then (to run
    # signal handlers, which run on the main thread only) would make the
    # main thread give it up, each time a switch of the main thread's.
    win = comm.alloc(64)
    win.fence()
    if r == 0:
        started = threading.Event()

        def wait_for_a_signal():
            started.set()
            win.wait(1)

        th = threading.Thread(target=wait_for_a_signal)
        th.start()
        started.wait()
        time.sleep(0.05)
        status = f"/proc/self/task/{threading.get_native_id()}/status"

        def switches():
            with open(status) as f:
                return int(next(line for line in f if line.startswith("voluntary_ctxt_switches")).split()[1])

        before, end = switches(), time.monotonic() + 0.8
        while time.monotonic() < end:
            pass
        say("switches", switches() - before)
        say("waiting", th.is_alive())
        th.join()
    else:
        time.sleep(1.2)
        win.signal(0)
    win.free()

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
