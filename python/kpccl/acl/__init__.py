"""pyACL's IPC calls, for code written against ``import acl``.

``import kpccl.acl as acl`` gives the names, argument order, types (pointers
as ``int``, keys as ``str``) and return conventions (``ret``, or
``(value, ret)``; ``ret == 0`` on success) of pyACL for the device-memory
IPC flow: ``acl.init``, ``acl.finalize``, ``acl.rt.*`` (``set_device``,
``malloc``, ``malloc_host``, ``memcpy``, ``memcpy_async``, streams, ``ipc_mem_get_export_key``, ``ipc_mem_set_import_pid``,
``device_get_bare_tgid``, ``ipc_mem_import_by_key``, ``ipc_mem_close``, …)
and ``acl.util.bytes_to_ptr`` / ``ptr_to_bytes``.

The runtime is the one ``KPCCL_ASCEND`` picks: ``acl`` (CANN's
``libascendcl.so``), ``sim`` (kpccl's host simulator: "device" memory is
shared memory, and keys, whitelists and return codes follow the hardware's
rules across processes), or ``auto`` (default: CANN's, else an error). A
call raises ``kpccl.Error`` when there is no runtime; ACL failures are
return codes, as in pyACL. The constants below are CANN's values.
"""

from .._kpccl import _acl as _impl
from . import rt, util

#: ``aclrtMemMallocPolicy``.
ACL_MEM_MALLOC_HUGE_FIRST = 0
ACL_MEM_MALLOC_HUGE_ONLY = 1
ACL_MEM_MALLOC_NORMAL_ONLY = 2
ACL_MEM_MALLOC_HUGE_FIRST_P2P = 3
ACL_MEM_MALLOC_HUGE_ONLY_P2P = 4
ACL_MEM_MALLOC_NORMAL_ONLY_P2P = 5
#: ``aclrtMemcpyKind``.
ACL_MEMCPY_HOST_TO_HOST = 0
ACL_MEMCPY_HOST_TO_DEVICE = 1
ACL_MEMCPY_DEVICE_TO_HOST = 2
ACL_MEMCPY_DEVICE_TO_DEVICE = 3
ACL_MEMCPY_DEFAULT = 4
#: ``flags`` of ``ipc_mem_get_export_key`` and ``ipc_mem_import_by_key``.
ACL_RT_IPC_MEM_EXPORT_FLAG_DEFAULT = 0
ACL_RT_IPC_MEM_EXPORT_FLAG_DISABLE_PID_VALIDATION = 1
ACL_RT_IPC_MEM_IMPORT_FLAG_DEFAULT = 0
ACL_RT_IPC_MEM_IMPORT_FLAG_ENABLE_PEER_ACCESS = 1
#: The ``len`` of an IPC key buffer.
ACL_IPC_KEY_LEN = 65
ACL_SUCCESS = 0

init = _impl.init
finalize = _impl.finalize

__all__ = ["rt", "util", "init", "finalize"]
