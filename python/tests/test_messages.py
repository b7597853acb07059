"""Error messages say ranges as Python and C users read them:
"rank 3 is out of range: this window has ranks 0 to 2", never Rust's `0..3`."""

import pytest

import kpccl


def one_rank():
    """A communicator of this process alone, over Python callables."""
    return kpccl.Comm(1, 0, None, lambda data: data, lambda: None)


def test_window_rank_errors_name_the_last_valid_rank():
    with one_rank() as comm, comm.alloc(16) as win:
        for call, shown in ((lambda: win.peer_fence(1), "1"), (lambda: win.peer_fence(-1), "-1"),
                            (lambda: win.signal(3), "3"), (lambda: win.wait(2**40), str(2**40)),
                            (lambda: win.buffer(7), "7"), (lambda: win.nbytes(-5), "-5"),
                            (lambda: win.numpy(rank=1), "1")):
            with pytest.raises(ValueError) as e:
                call()
            assert str(e.value) == f"rank {shown} is out of range: this window has ranks 0 to 0"


def test_communicator_rank_errors_name_the_last_valid_rank():
    with pytest.raises(ValueError, match=r"^nranks 0 is out of range: a communicator has 1 to \d+ ranks$"):
        kpccl.Comm(0, 0, None, lambda d: d, lambda: None)
    with pytest.raises(ValueError, match=r"^local_rank 5 is out of range: the communicator has ranks 0 to 0 "):
        kpccl.Comm(1, 0, 5, lambda d: d, lambda: None)
    with pytest.raises(ValueError) as e:
        kpccl.Comm(1, 1, None, lambda d: d, lambda: None)
    assert "rank 1 is out of range: the communicator has ranks 0 to 0" in str(e.value)
    assert ".." not in str(e.value)


def test_from_mpi_refuses_what_is_not_a_communicator():
    with pytest.raises(ValueError, match=r"^`comm` must be an mpi4py communicator"):
        kpccl.Comm.from_mpi(42)


def test_exceptions_are_named_as_users_catch_them(in_process):
    # An uncaught one printed "kpccl._errors.Error: …" before.
    code = """
import traceback, kpccl
try:
    kpccl.Comm.from_env()
except kpccl.Error as e:
    print("".join(traceback.format_exception_only(e)))
"""
    out = in_process(code, {"KPCCL_RUN_SOCKET": ""}).stdout
    assert out.startswith("kpccl.Error: not started by kpccl-run"), out
    for cls in (kpccl.Error, kpccl.PeerDeadError, kpccl.TimeoutError):
        assert f"{cls.__module__}.{cls.__qualname__}" == f"kpccl.{cls.__name__}"
