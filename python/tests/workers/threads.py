"""Threads of one rank racing on a window: a second ``free()``, a fence or a
query while another thread frees it, a ``with`` block left by an exception
while another thread frees it. ``KPCCL_TEST_CASE`` picks one; rank 0 races,
rank 1 comes late."""

import os
import threading
import time

import kpccl
from common import communicator, say

case = os.environ["KPCCL_TEST_CASE"]
memory = os.environ.get("KPCCL_TEST_MEMORY")


def outcome(call, key):
    """Runs ``call`` and says how it ended: ``key`` is ``nothing`` or the
    exception's class, ``key_message`` its message, ``key_seconds`` how long."""
    t = time.monotonic()
    try:
        call()
        say(key, "nothing")
    except (kpccl.Error, ValueError) as e:
        say(key, type(e).__name__)
        say(f"{key}_message", str(e).replace("\n", " "))
    say(f"{key}_seconds", time.monotonic() - t)


def free_in_a_thread(win):
    """Starts ``win.free()`` in a thread of its own, reporting as ``first``."""
    th = threading.Thread(target=outcome, args=(win.free, "first"))
    th.start()
    return th


def abandon_late(win, after):
    """Rank 1's part: after ``after`` s, leaves a ``with`` block of the
    window by an exception (abandons it)."""
    time.sleep(after)
    try:
        with win:
            raise RuntimeError("abandon")
    except RuntimeError:
        pass


comm = communicator()
r = comm.rank

if case == "second_free":
    # Rank 0's first free waits for rank 1, which abandons the window after
    # 1 s: that free fails. Meanwhile rank 0's main thread frees the window
    # again, fences on it and asks whether it is abandoned.
    win = comm.alloc(64, memory=memory, timeout=0)
    win.fence()
    if r == 0:
        th = free_in_a_thread(win)
        time.sleep(0.3)
        outcome(win.free, "second")
        outcome(win.fence, "fence")
        outcome(lambda: win.__exit__(None, None, None), "exit")
        try:
            say("poisoned_during", win.poisoned)
        except (kpccl.Error, ValueError) as e:
            say("poisoned_during", type(e).__name__)
        say("freed_during", win.freed)
        th.join(10)
        say("freed_after", win.freed)
        outcome(win.free, "again")
    else:
        abandon_late(win, 1.0)

elif case == "abandon_during_free":
    # Rank 0 leaves a `with` block by an exception while another thread of
    # its own frees the window, waiting for rank 1 (2 s late): the window is
    # abandoned all the same, so that free fails at once, and so does rank
    # 1's late one, told that rank 0 abandoned the window.
    win = comm.alloc(64, memory=memory, timeout=0)
    win.fence()
    if r == 0:
        th = None
        try:
            with win:
                th = free_in_a_thread(win)
                time.sleep(0.3)
                raise RuntimeError("boom")
        except RuntimeError:
            pass
        th.join(10)
        say("freed_after", win.freed)
    else:
        time.sleep(2.0)
        outcome(win.free, "late")

comm.destroy()
say("done", r)
