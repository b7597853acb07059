"""Multi-process windows under kpccl-run and mpirun, and single-process checks."""

import pytest

import kpccl


def test_package():
    assert isinstance(kpccl.__version__, str) and kpccl.__version__
    assert issubclass(kpccl.PeerDeadError, kpccl.Error)
    assert issubclass(kpccl.TimeoutError, kpccl.Error)
    assert issubclass(kpccl.TimeoutError, TimeoutError)
    for cls in (kpccl.Comm, kpccl.Window, kpccl.DeviceWindow, kpccl.Comm.alloc, kpccl.Window.peer_fence):
        assert cls.__doc__, cls


def test_windows_under_kpccl_run(run):
    job = run(3, "windows.py").expect_ok()
    assert sorted(job.values["done"]) == ["0", "1", "2"]
    bad = sorted(job.values["bad"])
    assert bad[-1] == "ValueError" and all(b.startswith("Error:") for b in bad[:-1]), bad


@pytest.mark.parametrize("oob", ["mpi", "callables"])
def test_windows_under_mpirun(mpi, oob):
    job = mpi(3, "windows.py", {"KPCCL_TEST_OOB": oob}).expect_ok()
    assert sorted(job.values["done"]) == ["0", "1", "2"]


def one_rank():
    """A communicator of this process alone, over Python callables."""
    return kpccl.Comm(1, 0, None, lambda data: data, lambda: None)


def test_bad_arguments():
    with pytest.raises(ValueError):
        kpccl.Comm(0, 0, None, lambda d: d, lambda: None)
    with pytest.raises(ValueError):
        kpccl.Comm(1, 0, None, "not callable", lambda: None)
    with pytest.raises(ValueError):
        kpccl.Comm(1, 0, 5, lambda d: d, lambda: None)
    with pytest.raises(kpccl.Error, match="not started by kpccl-run"):
        kpccl.Comm.from_env()
    comm = one_rank()
    for kwargs in ({"nbytes": -1}, {"nbytes": "x"}, {"nbytes": 2**70}, {"nbytes": 8, "layout": "bogus"},
                   {"nbytes": 8, "align": 3}, {"nbytes": 8, "timeout": -1}, {"nbytes": 8, "timeout": 1e20},
                   {"nbytes": 8, "timeout": float("inf")}, {"nbytes": 8, "memory": "gpu"},
                   {"nbytes": 8, "device": 1}, {"nbytes": 8, "memory": "ascend", "layout": "aligned"},
                   {"nbytes": 2**63 - 1}):
        with pytest.raises(ValueError):
            comm.alloc(**kwargs)
    with comm.alloc(16) as win:
        for call in (lambda: win.peer_fence(1), lambda: win.peer_fence(-1), lambda: win.signal("0"),
                     lambda: win.buffer(7), lambda: win.numpy(rank=2**40)):
            with pytest.raises(ValueError):
                call()
        win.peer_fence(0)  # oneself: returns at once
        win.signal(0)
        win.wait(0)
        assert win.try_wait(0) is True  # oneself: as a wait, at once
        with pytest.raises(ValueError):
            win.try_wait(1)
    with pytest.raises(kpccl.Error, match="allgather returned"):
        kpccl.Comm(1, 0, None, lambda data: data + b"x", lambda: None)
    # Ctrl-C and exit() inside a callable are raised as themselves, not as kpccl.Error.
    for exc in (KeyboardInterrupt, SystemExit):
        def interrupted(_data, exc=exc):
            raise exc()
        with pytest.raises(exc):
            kpccl.Comm(1, 0, None, interrupted, lambda: None)
    comm.destroy()
    with pytest.raises(ValueError, match="destroyed"):
        comm.alloc(8)


def interrupting_callables(exc, armed):
    """``allgather`` and ``barrier`` that raise ``exc`` once ``armed`` holds anything."""

    def barrier():
        if armed:
            raise exc()

    def allgather(data):
        barrier()
        return data

    return allgather, barrier


@pytest.mark.parametrize("exc", [KeyboardInterrupt, SystemExit])
def test_ctrl_c_in_a_callable_wins_over_a_refusal(exc):
    # A rank whose arguments are refused still takes part in the collective;
    # Ctrl-C or exit() inside a callable meanwhile is raised as itself, not
    # as the refusal's ValueError.
    for rank, local_rank in ((5, None), (0, 5)):
        with pytest.raises(exc):
            kpccl.Comm(1, rank, local_rank, *interrupting_callables(exc, [True]))
    armed = []
    with kpccl.Comm(1, 0, None, *interrupting_callables(exc, armed)) as comm:
        armed.append(True)
        for memory in ("host", "ascend"):
            with pytest.raises(exc):
                comm.alloc(-1, memory=memory)
    # Without an interruption, the refusal says why.
    with pytest.raises(ValueError, match="out of range"):
        kpccl.Comm(1, 5, None, lambda d: d, lambda: None)


def test_allgather_must_return_a_bytes_like_object():
    np = pytest.importorskip("numpy")
    # `bytes()` of an int n is n zero bytes: once taken for the right length.
    for allgather, shown in ((len, "not int"), (lambda d: [d], "not list"), (lambda d: d.decode("latin-1"), "not str")):
        with pytest.raises(kpccl.Error) as e:
            kpccl.Comm(1, 0, None, allgather, lambda: None)
        message = str(e.value)
        assert "allgather must return a bytes-like object (bytes, bytearray, memoryview, a numpy array)" in message
        assert shown in message
        assert isinstance(e.value.__cause__, TypeError)
        if shown == "not list":
            assert "b\"\".join" in message
    for allgather in (bytearray, memoryview, lambda d: np.frombuffer(d, dtype=np.uint8).copy()):
        kpccl.Comm(1, 0, None, allgather, lambda: None).destroy()


def test_free_prints_the_counters_with_kpccl_stats(in_process):
    # Also while a view keeps the mapping after free().
    err = in_process(
        """
import kpccl
comm = kpccl.Comm(1, 0, None, lambda d: d, lambda: None)
win = comm.alloc(64)
view = win.buffer()
win.fence()
win.free()
view[0] = 1
""",
        {"KPCCL_STATS": "1"},
    ).stderr
    assert "stats: rank 0, window of" in err, err


def test_a_forked_child_refuses_the_parents_window_and_drops_it_safely(in_process):
    # The window's memory is not mapped in a forked child: a fence there
    # raises instead of crashing it, and the child's exit (which drops the
    # window and a view of it) touches nothing; the parent's window works.
    out = in_process(
        """
import os, sys
import kpccl
comm = kpccl.Comm(1, 0, None, lambda d: d, lambda: None)
win = comm.alloc(64)
view = win.buffer()
pid = os.fork()
if pid == 0:
    try:
        win.fence()
        print("child: fenced")
    except kpccl.Error as e:
        print("child:", e)
    sys.stdout.flush()
    sys.exit(0)  # the interpreter's teardown drops the window and the view
_, status = os.waitpid(pid, 0)
print("status", status)
view[0] = 5
win.fence()
win.free()
print("parent: freed")
""",
        {},
    ).stdout
    assert "child: the window was made before this process was forked from it" in out, out
    assert "status 0" in out, out
    assert "parent: freed" in out, out


def test_a_forked_child_refuses_the_parents_communicator(in_process):
    # The child shares its parent's out-of-band connection: a creation there
    # would take the parent's place in the other ranks' collective. It is
    # refused (no window made), and the parent's communicator still works.
    out = in_process(
        """
import os, sys
import kpccl
comm = kpccl.Comm(1, 0, None, lambda d: d, lambda: None)
pid = os.fork()
if pid == 0:
    try:
        comm.alloc(64).free()
        print("child: made a window")
    except kpccl.Error as e:
        print("child:", e)
    sys.stdout.flush()
    os._exit(0)
_, status = os.waitpid(pid, 0)
print("status", status)
comm.alloc(64).free()
print("parent: made a window")
""",
        {},
        timeout=10,
    ).stdout
    assert "child: the communicator was made before this process was forked from it" in out, out
    assert "status 0" in out, out
    assert "parent: made a window" in out, out


def test_views_and_use_after_free():
    np = pytest.importorskip("numpy")
    with one_rank() as comm:
        win = comm.alloc(64)
        view = win.buffer()
        arr = win.numpy(dtype=np.float64)
        assert view.nbytes == 64 and not view.readonly and arr.shape == (8,)
        arr[:] = 1.5
        assert bytes(view[:8]) == np.float64(1.5).tobytes()  # the same memory
        assert win.numpy(dtype=np.int32).shape == (16,)
        assert comm.alloc(0).buffer().nbytes == 0
        win.free()
        assert win.freed
        with pytest.raises(ValueError, match="freed"):
            win.fence()
        with pytest.raises(ValueError, match="freed"):
            win.buffer()
        # Views outlive the window: the mapping stays while they do.
        arr[:] = 2.5
        assert bytes(view[:8]) == np.float64(2.5).tobytes()
        win.free()  # again: nothing
        del view, arr


def test_context_manager_abandons_on_error():
    with one_rank() as comm:
        with pytest.raises(RuntimeError):
            with comm.alloc(8) as win:
                raise RuntimeError("boom")
        assert win.freed


def test_two_simulated_nodes_under_mpirun(mpi):
    # Ranks 0-1 on one node, 2-3 on another (mpirun cannot give ranks different variables).
    words = ["sh", "-c", 'KPCCL_NODE_ID=node$((OMPI_COMM_WORLD_RANK / 2)) exec "$@"', "-"]
    job = mpi(4, "nodes.py", {"KPCCL_TEST_OOB": "mpi"}, wrapper=words).expect_ok()
    assert sorted(job.values["node"]) == ["0:0:0", "1:0:1", "2:1:0", "3:1:1"]
