"""What the workers share: the communicator the test asked for, and output."""

import os
import sys

import kpccl


def say(key, value):
    """A ``@key=value`` line the test reads."""
    # One write: lines of ranks sharing the pipe must not interleave.
    sys.stdout.flush()
    os.write(1, f"@{key}={value}\n".encode())


def communicator():
    """``KPCCL_TEST_OOB``: ``run`` (kpccl-run, default), ``mpi`` (mpi4py's
    communicator) or ``callables`` (Python callables over mpi4py)."""
    how = os.environ.get("KPCCL_TEST_OOB", "run")
    say("pid", os.getpid())
    if how == "run":
        return kpccl.Comm.from_env()
    from mpi4py import MPI

    world = MPI.COMM_WORLD
    if how == "mpi":
        return kpccl.Comm.from_mpi(world)
    if how == "callables":
        return kpccl.Comm(
            world.Get_size(),
            world.Get_rank(),
            None,
            lambda data: b"".join(world.allgather(data)),
            world.Barrier,
        )
    sys.exit(f"unknown KPCCL_TEST_OOB={how}")
