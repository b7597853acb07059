"""Cases of test_edges.py that need ranks under kpccl-run;
``KPCCL_TEST_CASE`` picks one."""

import os

import kpccl
from common import communicator, say

case = os.environ["KPCCL_TEST_CASE"]

if case == "from_env_twice":
    comm = communicator()
    try:
        kpccl.Comm.from_env()
        say("second", "made")
    except kpccl.Error as e:
        say("second", f"{type(e).__name__}: {e}")
    with comm.alloc(8) as win:
        win.fence()
    say("first_works", comm.rank)
else:
    raise SystemExit(f"unknown KPCCL_TEST_CASE={case}")
