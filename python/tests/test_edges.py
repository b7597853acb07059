"""Edges of the arguments and of joining: ints too large for any rank or
size, a second ``Comm.from_env()`` in one process, two threads making
windows on one communicator, Ctrl-C while joining."""

import gc
import os
import socket
import subprocess
import sys
import threading
import weakref

import pytest

import kpccl


def one_rank():
    """A communicator of this process alone, over Python callables."""
    return kpccl.Comm(1, 0, None, lambda data: data, lambda: None)


HUGE = (2**127, 2**200, -(2**127) - 1, -(2**300))


def test_ints_past_128_bits_are_out_of_range_not_no_int():
    # An int too large for the binding's 128-bit reading is still an int:
    # before, the message said "must be an int, not int".
    with one_rank() as comm, comm.alloc(16) as win:
        for v in HUGE:
            for call in (lambda: win.peer_fence(v), lambda: win.buffer(v), lambda: win.nbytes(v)):
                with pytest.raises(ValueError) as e:
                    call()
                assert str(e.value) == f"rank {v} is out of range: this window has ranks 0 to 0"
            for kwargs, what in (({"nbytes": v}, "nbytes"), ({"nbytes": 8, "align": v}, "align")):
                with pytest.raises(ValueError) as e:
                    comm.alloc(**kwargs)
                assert str(e.value) == f"{what} = {v} is out of range"
    for v in HUGE:
        with pytest.raises(ValueError) as e:
            kpccl.Comm(v, 0, None, lambda d: d, lambda: None)
        assert str(e.value) == f"nranks = {v} is out of range"
        with pytest.raises(ValueError) as e:
            kpccl.Comm(1, v, None, lambda d: d, lambda: None)
        assert f"rank {v} is out of range: the communicator has ranks 0 to 0" in str(e.value)
    # What is no int is still said to be none.
    with one_rank() as comm, comm.alloc(16) as win:
        with pytest.raises(ValueError, match="^rank must be an int, not float$"):
            win.peer_fence(0.0)


def test_an_int_too_long_to_print_is_out_of_range():
    # Python refuses str() of an int past 4300 digits: the message still says why.
    with one_rank() as comm:
        with pytest.raises(ValueError, match=r"^nbytes = \(an int of 16610 bits\) is out of range$"):
            comm.alloc(10**5000)


def test_a_timeout_too_long_is_out_of_range():
    with one_rank() as comm:
        for v in (10**400, 1e20, 2**64):
            with pytest.raises(ValueError) as e:
                comm.alloc(8, timeout=v)
            assert "timeout" in str(e.value) and "is out of range" in str(e.value), e.value
            assert "not int" not in str(e.value)
        for v in (float("inf"), float("nan")):  # NaN read "must be > 0 seconds … not NaN"
            with pytest.raises(ValueError, match="finite"):
                comm.alloc(8, timeout=v)


def test_a_second_from_env_in_one_process_says_so(run):
    job = run(2, "edges.py", {"KPCCL_TEST_CASE": "from_env_twice"}).expect_ok()
    for message in job.values["second"]:
        assert message.startswith("Error: this process already joined kpccl-run as rank "), message
        assert "another process" not in message
    assert sorted(job.values["first_works"]) == ["0", "1"]


def test_a_second_thread_making_a_window_on_the_same_comm_is_refused():
    # The ranks' collectives pair up in call order: two threads of one rank
    # making windows at once would pair with the wrong calls of the others.
    # Before, the second thread's creation ran into the first one's.
    release = threading.Event()
    entered = threading.Event()

    def allgather(data):
        entered.set()
        release.wait(10)
        return data

    comm = kpccl.Comm(1, 0, None, allgather, lambda: None)
    made = []
    first = threading.Thread(target=lambda: made.append(comm.alloc(64)))
    first.start()
    try:
        assert entered.wait(10), "the first creation never reached its allgather"
        with pytest.raises(kpccl.Error, match="in use by another thread of this rank, making a window"):
            comm.alloc(64)
    finally:
        release.set()
        first.join(10)
    assert len(made) == 1
    made[0].free()
    # Once the first is made, the communicator takes the next one.
    with comm.alloc(16) as win:
        assert win.nbytes(0) == 16


def test_ctrl_c_ends_the_wait_for_a_launcher_that_never_welcomes(tmp_path):
    # A launcher that accepts the connection but never answers (stopped, or
    # busy): Comm.from_env() waited for its welcome with Ctrl-C held off until
    # the out-of-band timeout (here 20 s).
    path = str(tmp_path / "hub")
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(1)
    program = (
        "import os, signal, threading, time, kpccl\n"
        "threading.Timer(0.3, lambda: os.kill(os.getpid(), signal.SIGINT)).start()\n"
        "t = time.monotonic()\n"
        "try:\n"
        "    kpccl.Comm.from_env()\n"
        "    print('joined')\n"
        "except KeyboardInterrupt:\n"
        "    print('interrupted after', time.monotonic() - t)\n"
    )
    env = dict(os.environ, KPCCL_RUN_SOCKET=path, KPCCL_RANK="0", KPCCL_NRANKS="1", KPCCL_OOB_TIMEOUT_MS="20000")
    try:
        done = subprocess.run([sys.executable, "-c", program], env=env, capture_output=True, text=True, timeout=15)
    finally:
        listener.close()
    said = done.stdout.split()
    assert said[:2] == ["interrupted", "after"], done.stdout + done.stderr
    assert float(said[2]) < 2.0, done.stdout


def test_a_comm_whose_callables_hold_it_is_collected():
    # A job object whose bound methods are the communicator's collectives
    # holds it, and it holds them: a cycle through the Rust object, which
    # the cycle collector could not see. Before, the job (its windows, its
    # arrays) lived until the process ended.
    class Job:
        def __init__(self):
            self.comm = kpccl.Comm(1, 0, None, self.allgather, self.barrier)
            self.win = self.comm.alloc(16)

        def allgather(self, data):
            return data

        def barrier(self):
            pass

    job = Job()
    gone = weakref.ref(job)
    del job
    gc.collect()
    assert gone() is None, "the job and its communicator were never collected"
