"""Helpers of the kpccl test suite: start N ranks of a worker script under
``kpccl-run`` or ``mpirun``, bounded in time, and check that none of them
left a ``/dev/shm`` entry behind.

``KPCCL_RUN`` names the launcher (default: ``target/{debug,release}/kpccl-run``
of the repository, built by ``cargo build -p kpccl-run``)."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
WORKERS = HERE / "workers"
JOB_TIMEOUT = 60


def kpccl_run():
    given = os.environ.get("KPCCL_RUN")
    if given:
        return given
    for profile in ("debug", "release"):
        path = REPO / "target" / profile / "kpccl-run"
        if path.exists():
            return str(path)
    found = shutil.which("kpccl-run")
    if not found:
        pytest.fail("kpccl-run not found: build it (cargo build -p kpccl-run) or set KPCCL_RUN")
    return found


def mpirun():
    path = shutil.which("mpirun")
    if not path:
        pytest.fail("mpirun not found (apt-get install openmpi-bin libopenmpi-dev)")
    words = [path, "--oversubscribe"]
    if os.geteuid() == 0:
        words.append("--allow-run-as-root")
    return words


def leftovers(pids):
    """The /dev/shm entries named after one of ``pids`` (kpccl names its
    segments ``kpccl-<uid>-<pid>-…`` after their creator)."""
    try:
        names = os.listdir("/dev/shm")
    except FileNotFoundError:
        return []
    mine = {str(p) for p in pids}
    return [n for n in names if n.startswith("kpccl-") and n.split("-")[2:3] and n.split("-")[2] in mine]


class Job:
    """A finished job: its exit code, output, and each rank's ``KEY=value`` lines."""

    def __init__(self, proc):
        self.returncode = proc.returncode
        self.stdout = proc.stdout
        self.stderr = proc.stderr
        self.values = {}
        for line in proc.stdout.splitlines():
            if line.startswith("@") and "=" in line:
                key, value = line[1:].split("=", 1)
                self.values.setdefault(key, []).append(value)

    def expect_ok(self):
        assert self.returncode == 0, f"exit {self.returncode}\n--- stdout\n{self.stdout}\n--- stderr\n{self.stderr}"
        return self


def launch(words, script, env=None, timeout=JOB_TIMEOUT, wrapper=()):
    full_env = dict(os.environ)
    full_env.update(env or {})
    full_env.setdefault("PYTHONUNBUFFERED", "1")
    proc = subprocess.run(
        words + list(wrapper) + [sys.executable, str(WORKERS / script)],
        env=full_env,
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
    )
    job = Job(proc)
    pids = [int(p) for p in job.values.get("pid", [])]
    left = leftovers(pids)
    assert not left, f"/dev/shm entries left behind: {left}"
    return job


@pytest.fixture
def run():
    """``run(n, script, env=None)``: the script's ``n`` ranks under kpccl-run."""

    def start(n, script, env=None, timeout=JOB_TIMEOUT):
        return launch([kpccl_run(), "-n", str(n), "--"], script, env, timeout)

    return start


@pytest.fixture
def mpi():
    """``mpi(n, script, env=None, wrapper=())``: the script's ``n`` ranks
    under mpirun, each started through ``wrapper`` (a command prefix)."""
    try:
        import mpi4py  # noqa: F401
    except ImportError:
        pytest.fail("mpi4py is not installed in this venv (pip install mpi4py: it builds with mpicc)")

    def start(n, script, env=None, timeout=JOB_TIMEOUT, wrapper=()):
        return launch(mpirun() + ["-np", str(n)], script, env, timeout, wrapper)

    return start


@pytest.fixture
def sim_env(tmp_path):
    """The Ascend host simulator, with a registry of this test's own."""
    return {"KPCCL_ASCEND": "sim", "ASCEND_SIM_DIR": str(tmp_path / "ascend-sim")}


@pytest.fixture
def in_process():
    """``in_process(code, env=None)``: runs ``code`` in a Python process of
    its own (``env`` added to this one's); its finished process, which must
    have succeeded. For what a process chooses once (the Ascend runtime, the
    variables a window reads)."""

    def start(code, env=None, timeout=JOB_TIMEOUT):
        full = dict(os.environ, **(env or {}))
        out = subprocess.run([sys.executable, "-c", code], env=full, capture_output=True, text=True, timeout=timeout)
        assert out.returncode == 0, f"exit {out.returncode}\n--- stdout\n{out.stdout}\n--- stderr\n{out.stderr}"
        return out

    return start
