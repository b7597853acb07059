"""Device windows from ``kpccl.Comm`` on the simulator: every rank writes
into its right neighbour's device segment, fences, and reads its own; the
segments' device addresses work with ``kpccl.acl`` copies."""

import kpccl.acl as acl
from common import communicator, say

comm = communicator()
r, n = comm.rank, comm.size
right, left = (r + 1) % n, (r - 1) % n

with comm.alloc(4096, memory="ascend", device=0) as win:
    assert win.device == 0
    win.write(right, 0, f"from {r}".encode())
    win.fence()
    assert win.read(r, 0, 6) == f"from {left}".encode()
    ptr, nbytes = win.segment()
    assert nbytes == 4096 and ptr
    out = bytearray(6)
    ret = acl.rt.memcpy(acl.util.bytes_to_ptr(out), 6, ptr, 6, acl.ACL_MEMCPY_DEVICE_TO_HOST)
    assert ret == 0 and bytes(out) == f"from {left}".encode(), (ret, out)
    win.fence()
say("done", r)
