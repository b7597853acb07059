"""Threads of one rank racing on a window (see workers/threads.py): a call
never reports what did not happen."""

import pytest


def value(job, key):
    values = job.values.get(key)
    assert values, f"no @{key}= line\n--- stdout\n{job.stdout}\n--- stderr\n{job.stderr}"
    return values[0]


@pytest.mark.parametrize("memory", ["host", "ascend"])
def test_a_free_racing_another_free_says_so(run, sim_env, memory):
    # Before, the second free() returned at once as if the window were
    # freed, while the first still waited for rank 1, and then failed; a
    # fence said "the window was freed" and `poisoned` could not be asked.
    env = {"KPCCL_TEST_CASE": "second_free", "KPCCL_TEST_MEMORY": memory, **sim_env}
    job = run(2, "threads.py", env).expect_ok()
    out = job.stdout + job.stderr
    for call in ("second", "fence", "exit"):
        assert value(job, call) == "Error", out
        assert "being freed by another thread of this rank" in value(job, f"{call}_message"), out
        assert float(value(job, f"{call}_seconds")) < 0.2, out
    assert value(job, "freed_during") == "False", out
    if memory == "host":
        assert value(job, "poisoned_during") == "None", out
    # The first free fails: rank 1 abandoned the window.
    assert value(job, "first") == "PeerDeadError", out
    assert "rank 1" in value(job, "first_message"), out
    assert value(job, "freed_after") == "True", out
    assert value(job, "again") == "nothing", out


@pytest.mark.parametrize("memory", ["host", "ascend"])
def test_leaving_a_with_block_abandons_a_window_another_thread_frees(run, sim_env, memory):
    # Before, the abandon was lost: the free waited for rank 1 (2 s late)
    # and both ranks' frees succeeded, rank 1 never told that rank 0 gave up.
    env = {"KPCCL_TEST_CASE": "abandon_during_free", "KPCCL_TEST_MEMORY": memory, **sim_env}
    job = run(2, "threads.py", env).expect_ok()
    out = job.stdout + job.stderr
    assert value(job, "first") == "PeerDeadError", out
    assert "rank 0 abandoned the window" in value(job, "first_message"), out
    assert float(value(job, "first_seconds")) < 1.0, out
    assert value(job, "freed_after") == "True", out
    assert value(job, "late") == "PeerDeadError", out
    assert "rank 0 abandoned the window" in value(job, "late_message"), out
    assert float(value(job, "late_seconds")) < 1.0, out
