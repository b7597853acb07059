"""Windows across ranks: per-rank sizes, numpy and memoryview views seeing
peers' writes after each kind of fence, a ring of peer fences, bad input on
one rank failing every rank, and use after free."""

import threading
import time

import numpy as np

import kpccl
from common import communicator, say

comm = communicator()
r, n = comm.rank, comm.size
left, right = (r - 1) % n, (r + 1) % n

# Per-rank sizes: rank r owns 8 * (r + 1) int64 values.
with comm.alloc(64 * (r + 1)) as win:
    assert [win.nbytes(q) for q in range(n)] == [64 * (q + 1) for q in range(n)]
    mine = win.numpy(dtype=np.int64)
    assert mine.shape == (8 * (r + 1),) and mine.flags.writeable

    # The group fence: everyone sees everyone's writes.
    mine[:] = 100 + r
    win.fence()
    for q in range(n):
        assert (win.numpy(q, dtype="int64") == 100 + q).all(), f"fence: rank {q}"
    win.fence()  # everyone has read before anyone writes again

    # A ring of peer fences: write into the right neighbour's segment, then
    # fence with both neighbours (even ranks first, so the ring cannot deadlock).
    win.numpy(right, dtype=np.int64)[0] = 1000 + r
    order = (right, left) if r % 2 == 0 else (left, right)
    if n == 2:
        order = (right,)
    for p in order:
        win.peer_fence(p)
    assert mine[0] == 1000 + left, f"peer_fence ring: {mine[0]}"

    # One-way: signal the right neighbour after writing into its segment,
    # wait for the left one's signal before reading.
    win.buffer(right)[8:16] = (2000 + r).to_bytes(8, "little")
    win.signal(right)
    win.wait(left)
    assert int(mine[1]) == 2000 + left, f"signal/wait: {mine[1]}"
    win.fence()

    # The same with tests: poll until the left neighbour's signal comes.
    win.buffer(right)[16:24] = (3000 + r).to_bytes(8, "little")
    win.signal(right)
    while not win.try_wait(left):
        pass
    assert int(mine[2]) == 3000 + left, f"signal/try_wait: {mine[2]}"
    win.fence()  # nobody signals any more: a test finds nothing
    assert win.try_wait(left) is False, "try_wait took a signal nobody sent"

    # While another thread of rank 0 waits on the window (for the last
    # rank's signal), calls that would queue behind that wait raise at once
    # (the wait may be for them), and queries answer. The go-ahead for the
    # signal travels through a second window, which the waiting thread does
    # not hold.
    with comm.alloc(8) as cue:
        if r == 0:
            waiter = threading.Thread(target=win.wait, args=(left,))
            waiter.start()
            for _ in range(500):
                try:
                    assert win.try_wait(right) is False  # no signal from right here
                except kpccl.Error as e:
                    assert "in use by another thread" in str(e), e
                    break
                time.sleep(0.01)
            else:
                raise AssertionError("try_wait never met the waiting thread")
            for call in (lambda: win.signal(right), win.fence, lambda: win.peer_fence(right), win.free):
                try:
                    call()
                except kpccl.Error as e:
                    assert "in use by another thread" in str(e), e
                else:
                    raise AssertionError("a call ran beside another thread's wait")
            assert not win.freed and win.nbytes(right) == win.buffer(right).nbytes > 0
            assert win.node_ranks == list(range(n))
            cue.signal(left)
            waiter.join()
        elif r == n - 1:
            cue.wait(right)
            win.signal(right)
    win.fence()
    kept = win.numpy(dtype=np.int64)

# Use after free: the window refuses, the views stay usable.
assert win.freed
for call in (win.fence, lambda: win.peer_fence(left), lambda: win.numpy(), lambda: win.buffer()):
    try:
        call()
    except ValueError as e:
        assert "freed" in str(e)
    else:
        raise AssertionError("a freed window was used")
kept[:] = 7
assert (kept == 7).all()
win.free()  # again: nothing

# Bad input on the last rank: it raises ValueError, the others kpccl.Error, nobody waits.
try:
    comm.alloc(-5 if r == n - 1 else 64)
except ValueError:
    assert r == n - 1
    say("bad", "ValueError")
except kpccl.Error as e:
    assert r != n - 1
    say("bad", f"Error:{e}")
else:
    raise AssertionError("a window was made with a rank's bad size")

# Bad option on rank 0 only.
try:
    comm.alloc(64, layout="bogus" if r == 0 else None)
except ValueError:
    assert r == 0
except kpccl.Error:
    assert r != 0
else:
    raise AssertionError("a window was made with a rank's bad layout")

# After failures, a good window still works.
with comm.alloc(8, layout="aligned") as w2:
    w2.numpy(dtype=np.int64)[0] = r
    w2.fence()
    assert w2.numpy(left, dtype=np.int64)[0] == left
comm.destroy()
say("done", r)
