"""A malformed ``KPCCL_*`` variable is this rank's own setting, whichever call
reads it: ``ValueError``, as ``kpccl_last_error_code()`` classes it
``KPCCL_ERR_INVALID_ARGUMENT`` in C, not a library failure (``kpccl.Error``)."""

# The launcher's variables, each malformed in turn; none reaches a launcher
# (the socket names none), so each is refused as it is read.
LAUNCHER = {"KPCCL_RUN_SOCKET": "/nonexistent/kpccl-run", "KPCCL_RANK": "0", "KPCCL_NRANKS": "2"}
MALFORMED = (
    ("KPCCL_RANK", "abc", 'KPCCL_RANK="abc" is invalid'),
    ("KPCCL_RANK", "5", "rank 5 is out of range: the launcher has ranks 0 to 1"),
    ("KPCCL_TIMEOUT_MS", "-1", 'KPCCL_TIMEOUT_MS="-1" is invalid'),
    ("KPCCL_OOB_TIMEOUT_MS", "0", 'KPCCL_OOB_TIMEOUT_MS="0" is invalid'),
)

FROM_ENV = """
import kpccl
try:
    kpccl.Comm.from_env()
except Exception as e:
    print(type(e).__name__ + ":", e)
"""


def test_a_malformed_launcher_variable_is_a_value_error(in_process):
    # Before, Comm.from_env() raised kpccl.Error for these, while Comm(...)
    # raised ValueError for the same KPCCL_TIMEOUT_MS=-1.
    for var, value, said in MALFORMED:
        out = in_process(FROM_ENV, {**LAUNCHER, var: value}).stdout
        assert out.startswith("ValueError: cannot join kpccl-run: ") and said in out, (var, value, out)


def test_a_launcher_that_cannot_be_reached_is_a_library_error(in_process):
    out = in_process(FROM_ENV, LAUNCHER).stdout
    assert out.startswith("Error: cannot join kpccl-run: launcher at /nonexistent/kpccl-run"), out


def test_an_unknown_device_runtime_is_a_value_error(sim_env, in_process):
    # As KPCCL_ASCEND_PID_VALIDATION=2 is (test_acl.py); before, KPCCL_ASCEND
    # raised kpccl.Error.
    out = in_process(
        """
import kpccl
comm = kpccl.Comm(1, 0, None, lambda d: d, lambda: None)
try:
    comm.alloc(64, memory="ascend", device=0)
except Exception as e:
    print(type(e).__name__ + ":", e)
with comm.alloc(64) as win:
    print("then a host window:", win.nbytes())
""",
        {**sim_env, "KPCCL_ASCEND": "bogus"},
    ).stdout
    assert 'ValueError: KPCCL_ASCEND="bogus" is invalid: expected acl, sim or auto' in out, out
    assert "then a host window: 64" in out, out
