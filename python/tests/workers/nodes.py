"""Two simulated nodes under mpirun (KPCCL_NODE_ID): a window spans its
node's ranks; a rank of the other node is a ValueError."""

import os

import numpy as np

from common import communicator, say

comm = communicator()
r = comm.rank
assert comm.nnodes == 2 and comm.local_size == comm.size // 2
assert 1 <= comm.node_cpus <= (os.cpu_count() or comm.node_cpus)
with comm.alloc(64) as win:
    win.numpy(dtype=np.int64)[:] = r
    win.fence()
    mates = win.node_ranks
    assert mates == comm.node_ranks and r in mates
    assert all(win.numpy(q, dtype=np.int64)[0] == q for q in mates)
    other = next(q for q in range(comm.size) if q not in mates)
    try:
        win.peer_fence(other)
    except ValueError as e:
        assert "not on this node" in str(e), e
    else:
        raise AssertionError("a fence crossed nodes")
say("node", f"{r}:{comm.node}:{comm.local_rank}")
