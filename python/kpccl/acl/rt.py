"""``acl.rt``: the runtime calls (pyACL names and return conventions).

Each returns ``ret`` or ``(value, ret)``; ``ret == 0`` on success. As with
pyACL, addresses passed to ``memcpy`` and ``memcpy_async`` must be valid for the sizes given.
"""

from .._kpccl import _acl as _impl

set_device = _impl.set_device
reset_device = _impl.reset_device
synchronize_device = _impl.synchronize_device
device_can_access_peer = _impl.device_can_access_peer
device_enable_peer_access = _impl.device_enable_peer_access
malloc = _impl.malloc
free = _impl.free
memcpy = _impl.memcpy
malloc_host = _impl.malloc_host
free_host = _impl.free_host
create_stream = _impl.create_stream
destroy_stream = _impl.destroy_stream
synchronize_stream = _impl.synchronize_stream
memcpy_async = _impl.memcpy_async
ipc_mem_get_export_key = _impl.ipc_mem_get_export_key
ipc_mem_set_import_pid = _impl.ipc_mem_set_import_pid
ipc_mem_import_by_key = _impl.ipc_mem_import_by_key
ipc_mem_close = _impl.ipc_mem_close
device_get_bare_tgid = _impl.device_get_bare_tgid
