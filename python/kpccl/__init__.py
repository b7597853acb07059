"""kpccl: shared-memory windows and fences for the processes of one node.

Ranks build a :class:`Comm` (under ``kpccl-run``, over mpi4py, or over your
own collectives), allocate a :class:`Window` in which every rank owns a
segment, read and write each other's segments through zero-copy
``memoryview`` / numpy views, and order those accesses with fences:
``peer_fence(j)``, ``fence()``, and the one-way ``signal(j)`` / ``wait(i)``
(or ``try_wait(i)``, which never waits).

Bad arguments raise ``ValueError``; library failures raise :class:`Error`,
:class:`PeerDeadError` (a peer died, left or abandoned the window) or
:class:`TimeoutError` (also a built-in ``TimeoutError``). Every wait releases
the GIL and ends on Ctrl-C. ``kpccl.acl`` has the pyACL IPC calls over Ascend or its simulator.
"""

from ._errors import Error, PeerDeadError, TimeoutError
from ._kpccl import Comm, DeviceWindow, Window, __version__

__all__ = ["Comm", "Window", "DeviceWindow", "Error", "PeerDeadError", "TimeoutError", "__version__"]
