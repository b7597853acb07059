"""The reference page's A/B flow of pyACL's IPC calls, unchanged after
``import kpccl.acl as acl``: rank 0 is process A (exports), rank 1 is B
(whitelisted, imports), rank 2 is C (not whitelisted: refused). The pid and
the key travel through a kpccl host window, as any out-of-band channel would
carry them."""

import kpccl.acl as acl
from common import communicator, say

ACL_MEM_MALLOC_HUGE_FIRST = 0
ACL_MEMCPY_HOST_TO_HOST = 0
ACL_MEMCPY_HOST_TO_DEVICE = 1
ACL_MEMCPY_DEVICE_TO_HOST = 2
SIZE = 2 * 1024 * 1024
DATA = bytes(range(256)) * 16

comm = communicator()
r = comm.rank
box = comm.alloc(128)


def post(text):
    box.buffer()[: len(text) + 1] = text.encode() + b"\0"


def fetch(rank):
    return bytes(box.buffer(rank)).split(b"\0", 1)[0].decode()


assert acl.init() == 0
assert acl.rt.set_device(0) == 0

if r == 1:  # B: its pid, from the runtime
    pid, ret = acl.rt.device_get_bare_tgid()
    assert ret == 0 and pid > 0
    post(str(pid))
box.fence()

if r == 0:  # A: allocate, fill, export, whitelist B
    dev_ptr, ret = acl.rt.malloc(SIZE, ACL_MEM_MALLOC_HUGE_FIRST)
    assert ret == 0 and dev_ptr
    # Staged through page-locked host memory and an asynchronous copy.
    host, ret = acl.rt.malloc_host(len(DATA))
    assert ret == 0 and host
    assert acl.rt.memcpy(host, len(DATA), acl.util.bytes_to_ptr(DATA), len(DATA), ACL_MEMCPY_HOST_TO_HOST) == 0
    stream, ret = acl.rt.create_stream()
    assert ret == 0
    assert acl.rt.memcpy_async(dev_ptr, SIZE, host, len(DATA), ACL_MEMCPY_HOST_TO_DEVICE, stream) == 0
    assert acl.rt.synchronize_stream(stream) == 0
    assert acl.rt.destroy_stream(stream) == 0
    assert acl.rt.free_host(host) == 0
    key, ret = acl.rt.ipc_mem_get_export_key(dev_ptr, SIZE, 65, 0)
    assert ret == 0 and isinstance(key, str) and key, (key, ret)
    say("key", key)
    assert acl.rt.ipc_mem_set_import_pid(key, [int(fetch(1))]) == 0
    post(key)
box.fence()

key = fetch(0)
if r == 1:  # B: import, read A's bytes
    ptr, ret = acl.rt.ipc_mem_import_by_key(key, 0)
    assert ret == 0 and ptr, ret
    out = bytearray(len(DATA))
    assert acl.rt.memcpy(acl.util.bytes_to_ptr(out), len(out), ptr, len(DATA), ACL_MEMCPY_DEVICE_TO_HOST) == 0
    assert bytes(out) == DATA
    say("B_import", ret)
if r == 2:  # C: not on the whitelist
    ptr, ret = acl.rt.ipc_mem_import_by_key(key, 0)
    say("C_import", ret)
box.fence()

if r == 1:
    assert acl.rt.ipc_mem_close(key) == 0  # importers close first
box.fence()
if r == 0:
    assert acl.rt.ipc_mem_close(key) == 0
    assert acl.rt.free(dev_ptr) == 0
    # The key is gone: closing again fails as on the hardware.
    say("A_close_again", acl.rt.ipc_mem_close(key))

assert acl.rt.reset_device(0) == 0
assert acl.finalize() == 0
box.free()
say("done", r)
