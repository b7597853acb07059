"""kpccl.acl with pyACL's conventions, on the host simulator."""

import pytest


def test_ab_flow_with_a_process_off_the_whitelist(run, sim_env):
    job = run(3, "ab_flow.py", sim_env).expect_ok()
    assert sorted(job.values["done"]) == ["0", "1", "2"]
    assert job.values["B_import"] == ["0"]
    assert job.values["C_import"] == ["507899"]  # not whitelisted
    assert job.values["A_close_again"] == ["507899"]
    (key,) = job.values["key"]
    assert len(key) == 64


def test_device_window_from_comm(run, sim_env):
    job = run(2, "device_window.py", sim_env).expect_ok()
    assert sorted(job.values["done"]) == ["0", "1"]


def test_return_codes_and_bad_arguments(sim_env, in_process):
    out = in_process(
        """
import kpccl.acl as acl
assert acl.init() == 0
assert acl.rt.set_device(0) == 0
ptr, ret = acl.rt.malloc(0, 0); print("malloc0", ptr, ret)
ptr, ret = acl.rt.malloc(4096, 0); assert ret == 0
print("short_len", acl.rt.ipc_mem_get_export_key(ptr, 4096, 64, 0)[1])
print("bad_flags", acl.rt.ipc_mem_get_export_key(ptr, 4096, 65, 7)[1])
print("unknown_key", acl.rt.ipc_mem_import_by_key("0" * 64, 0)[1])
print("long_key", acl.rt.ipc_mem_close("0" * 80), acl.rt.ipc_mem_import_by_key("0" * 80, 0)[1])
try:
    acl.rt.malloc(-1, 0)
except ValueError:
    print("negative ValueError")
b = acl.util.ptr_to_bytes(acl.util.bytes_to_ptr(b"hello"), 5); print("roundtrip", b.decode())
stream, ret = acl.rt.create_stream(); assert ret == 0 and stream
out = bytearray(5)
assert acl.rt.memcpy(ptr, 4096, acl.util.bytes_to_ptr(b"async"), 5, 1) == 0
assert acl.rt.memcpy_async(acl.util.bytes_to_ptr(out), 5, ptr, 5, 2, stream) == 0
assert acl.rt.synchronize_stream(stream) == 0
print("async", bytes(out).decode())
assert acl.rt.destroy_stream(stream) == 0
print("destroyed_twice", acl.rt.destroy_stream(stream) != 0)
assert acl.rt.free(ptr) == 0
assert acl.finalize() == 0
""",
        sim_env,
    ).stdout
    assert "malloc0 0 100000" in out
    assert "short_len 107000" in out
    assert "bad_flags 107000" in out
    assert "unknown_key 507899" in out
    # As the runtime answers a C caller's string with no NUL within a key's 65 bytes.
    assert "long_key 507899 107000" in out
    assert "negative ValueError" in out
    assert "roundtrip hello" in out
    assert "async async" in out
    assert "destroyed_twice True" in out


def test_ptr_to_bytes_refuses_a_null_pointer():
    import kpccl.acl as acl

    # ctypes.string_at(0, n) makes n bytes of uninitialised memory.
    for size in (1, 5, 4096):
        with pytest.raises(ValueError, match="null pointer"):
            acl.util.ptr_to_bytes(0, size)
    assert acl.util.ptr_to_bytes(0, 0) == b""
    data = bytearray(b"abcdefgh")
    assert acl.util.ptr_to_bytes(acl.util.bytes_to_ptr(data) + 2, 3) == b"cde"


def test_no_runtime_is_an_error_that_says_what_to_do(in_process):
    out = in_process(
        """
import kpccl, kpccl.acl as acl
try:
    acl.init()
except kpccl.Error as e:
    print("error:", e)
""",
        {"KPCCL_ASCEND": "bogus"},
    ).stdout
    assert "error: KPCCL_ASCEND" in out


def test_device_copies_refuse_what_they_cannot_do(sim_env, in_process):
    out = in_process(
        """
import kpccl
comm = kpccl.Comm(1, 0, None, lambda d: d, lambda: None)
with comm.alloc(64, memory="ascend", device=0) as dev:
    dev.write(0, 0, b"abcdefgh")
    for nbytes in (2**40, 2**64 - 1):  # checked before a buffer is allocated
        try:
            dev.read(0, 0, nbytes)
        except ValueError as e:
            print("read", nbytes, "ValueError", "outside rank 0's device segment" in str(e))
    try:
        dev.write(0, 0, 5)  # an int is not bytes-like (bytes(5) is five zeros)
    except TypeError:
        print("write int TypeError")
    print("kept", dev.read(0, 0, 8).decode())
""",
        sim_env,
    ).stdout
    assert f"read {2**40} ValueError True" in out
    assert f"read {2**64 - 1} ValueError True" in out
    assert "write int TypeError" in out
    assert "kept abcdefgh" in out


def test_the_pid_validation_variable_is_read_unless_the_call_says(sim_env, in_process):
    out = in_process(
        """
import kpccl
comm = kpccl.Comm(1, 0, None, lambda d: d, lambda: None)
try:
    comm.alloc(64, memory="ascend", device=0)
except ValueError as e:
    print("refused:", e)
with comm.alloc(64, memory="ascend", device=0, pid_validation=True) as dev:
    print("explicit: made")
""",
        {**sim_env, "KPCCL_ASCEND_PID_VALIDATION": "2"},
    ).stdout
    assert 'refused: KPCCL_ASCEND_PID_VALIDATION="2" is invalid: expected 0 or 1' in out
    assert "explicit: made" in out


def test_a_callables_error_in_a_device_window_creation_is_told(sim_env, in_process):
    out = in_process(
        """
import kpccl
armed = []

def check():
    if armed:
        raise RuntimeError("the network is down")

def gather(data):
    check()
    return data

comm = kpccl.Comm(1, 0, None, gather, check)
armed.append(True)
try:
    comm.alloc(64, memory="ascend", device=0)
except kpccl.Error as e:
    print("error:", e)
    print("cause:", type(e.__cause__).__name__)
""",
        sim_env,
    ).stdout
    assert "the out-of-band collective raised: RuntimeError: the network is down" in out, out
    assert "cause: RuntimeError" in out


# Another thread inside a read of a large device segment (a quick call:
# tens of milliseconds in its turn, without the GIL) while the main thread
# uses the same window.
COPYING_THREAD = """
import threading, time
import kpccl
comm = kpccl.Comm(1, 0, None, lambda d: d, lambda: None)
N = 256 << 20

def copying(dev):
    started = threading.Event()

    def copy():
        started.set()
        dev.read(0, 0, N)

    th = threading.Thread(target=copy)
    th.start()
    started.wait()
    time.sleep(0.01)  # in the copy by now
    return th
"""


def test_free_waits_for_another_threads_copy(sim_env, in_process):
    out = in_process(
        COPYING_THREAD
        + """
for _ in range(3):
    dev = comm.alloc(N, memory="ascend", device=0)
    th = copying(dev)
    try:
        dev.free()
        print("freed", dev.freed)
    except kpccl.Error as e:
        print("refused:", e)
        th.join()
        dev.free()
    th.join(10)
""",
        sim_env,
    ).stdout
    assert out.count("freed True") == 3, out


def test_a_call_behind_another_threads_copy_sleeps(sim_env, in_process):
    # A one-byte read queued behind the thread's copy: its thread's CPU time
    # while queued (asleep, not spinning) is a small part of the time it
    # waited. Only reads that did queue count (one that waited 5 ms or
    # more): on a loaded machine the thread may not be in its copy yet.
    out = in_process(
        COPYING_THREAD
        + """
dev = comm.alloc(N, memory="ascend", device=0)
waited = cpu = 0.0
queued = 0
for _ in range(30):
    th = copying(dev)
    w0, c0 = time.monotonic(), time.thread_time()
    dev.read(0, 0, 1)
    w, c = time.monotonic() - w0, time.thread_time() - c0
    th.join()
    if w >= 0.005:
        waited, cpu, queued = waited + w, cpu + c, queued + 1
        if queued == 3:
            break
dev.free()
print("queued", queued)
print("waited", waited)
print("cpu", cpu)
""",
        sim_env,
    ).stdout
    values = dict(line.split() for line in out.splitlines())
    queued, waited, cpu = int(values["queued"]), float(values["waited"]), float(values["cpu"])
    assert queued == 3, out
    assert cpu < 0.25 * waited, out


def test_a_bad_device_or_pid_is_named():
    # Before: "device_id must be an int that fits 32 bits", whatever was passed.
    import kpccl.acl as acl

    for value, said in (
        (2**40, "device_id = 1099511627776 is out of range"),
        (1.5, "device_id must be an int, not float"),
    ):
        with pytest.raises(ValueError) as e:
            acl.rt.set_device(value)
        assert str(e.value).startswith(said), e.value
    with pytest.raises(ValueError) as e:
        acl.rt.ipc_mem_set_import_pid("0" * 64, [1, -(2**31) - 1])
    assert str(e.value).startswith("pid = -2147483649 is out of range"), e.value
    with pytest.raises(ValueError) as e:
        acl.rt.reset_device("1")
    assert str(e.value).startswith("device_id must be an int, not str"), e.value


def test_ptr_to_bytes_takes_numpy_ints_and_names_a_bad_value():
    # Before: numpy ints (a size from arr.nbytes * k, an address from an
    # array of them) were refused as "not ints", though acl.rt.memcpy takes
    # them; and a value past 64 bits raised OverflowError, naming neither.
    import numpy as np

    import kpccl.acl as acl

    data = bytearray(b"abcdefgh")
    ptr = acl.util.bytes_to_ptr(data)
    assert acl.util.ptr_to_bytes(np.uint64(ptr), np.int64(3)) == b"abc"
    for args, said in (
        ((ptr, 2**70), f"size = {2**70} is out of range"),
        ((2**70, 1), f"ptr = {2**70} is out of range"),
        ((ptr, -1), "size = -1 is out of range"),
        ((ptr, 1.0), "size must be an int, not float"),
    ):
        with pytest.raises(ValueError) as e:
            acl.util.ptr_to_bytes(*args)
        assert said in str(e.value), e.value


def test_bytes_to_ptr_refuses_a_strided_buffer_as_a_bad_value():
    # Before: TypeError "memoryview: casts are restricted to C-contiguous
    # views", where a read-only buffer is a ValueError saying what it needs.
    import numpy as np

    import kpccl.acl as acl

    grid = np.zeros((4, 4))
    for strided in (grid[::2], grid.T, memoryview(bytearray(8))[::2]):
        with pytest.raises(ValueError, match="C-contiguous"):
            acl.util.bytes_to_ptr(strided)
    assert acl.util.bytes_to_ptr(grid) == grid.ctypes.data


def test_ipc_calls_waiting_for_the_registry_let_other_threads_run(sim_env, in_process):
    # The simulator's registry lock is held (here by this process, as a
    # stopped peer would hold it): an IPC call waits for it, up to the lock
    # timeout. Before, it waited holding the GIL: the main thread's short
    # sleep lasted the whole timeout (the process's threads all stopped).
    out = in_process(
        """
import fcntl, os, threading, time
import kpccl.acl as acl
assert acl.init() == 0 and acl.rt.set_device(0) == 0
ptr, ret = acl.rt.malloc(4096, 0); assert ret == 0
key, ret = acl.rt.ipc_mem_get_export_key(ptr, 4096, 65, 1); assert ret == 0
calls = {
    "set_import_pid": lambda: acl.rt.ipc_mem_set_import_pid(key, [os.getpid()]),
    "import_by_key": lambda: acl.rt.ipc_mem_import_by_key(key, 0),
    "close": lambda: acl.rt.ipc_mem_close(key),
    "export": lambda: acl.rt.ipc_mem_get_export_key(ptr, 4096, 65, 1),
}
lock = open(os.path.join(os.environ["ASCEND_SIM_DIR"], "registry.lock"), "r+")
def on_device(call, ready, go):
    acl.rt.set_device(0)  # the current device is the thread's
    ready.set()
    go.wait()
    call()
for name, call in calls.items():
    ready, go = threading.Event(), threading.Event()
    th = threading.Thread(target=on_device, args=(call, ready, go))
    th.start()
    ready.wait()
    fcntl.flock(lock, fcntl.LOCK_EX)
    t0 = time.monotonic()
    go.set()
    time.sleep(0.1)  # the thread's call waits for the lock meanwhile
    print(name, time.monotonic() - t0)
    fcntl.flock(lock, fcntl.LOCK_UN)
    th.join(10)
""",
        dict(sim_env, ASCEND_SIM_LOCK_TIMEOUT_MS="3000"),
    ).stdout
    slept = {name: float(t) for name, t in (line.split() for line in out.splitlines())}
    assert len(slept) == 4, out
    for name, t in slept.items():
        assert t < 1.5, f"{name}: a 0.1 s sleep took {t:.2f} s (the call held the GIL)\n{out}"
