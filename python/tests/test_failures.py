"""What ends a wait: a dead peer, a timeout, Ctrl-C; the GIL released meanwhile."""

import pytest


def value(job, key):
    (v,) = job.values[key]
    return v


def test_dead_peer_raises_within_the_liveness_period(run):
    job = run(2, "failures.py", {"KPCCL_TEST_CASE": "dead"}).expect_ok()
    assert value(job, "raised") == "PeerDeadError", job.stdout + job.stderr
    assert value(job, "rank") == "1"
    assert float(value(job, "seconds")) < 2.0


@pytest.mark.parametrize(
    "case", ["left", "free_with_a_view", "drop_with_a_view", "drop_with_a_view_window_fence"]
)
def test_a_peer_that_left_the_window_ends_a_wait_on_it(run, case):
    # Rank 1 drops its window (`left`), or frees or drops it while a view of
    # it lives on (`free_with_a_view`, `drop_with_a_view*`: the mapping
    # stays), and lives on for 3 s: rank 0's wait for it (a peer fence; a
    # window fence for `*_window_fence`) fails at once, saying so, rather
    # than when its process ends.
    # A peer that left is a dead peer to its waiter, as the Rust API's
    # `kind()` and the C API's KPCCL_ERR_DEAD_PEER class it (before: Error).
    job = run(2, "failures.py", {"KPCCL_TEST_CASE": case}).expect_ok()
    assert value(job, "raised") == "PeerDeadError", job.stdout + job.stderr
    assert value(job, "rank") == "1"
    assert "rank 1 left the window" in value(job, "message")
    assert "while rank 0 still waited for it" in value(job, "message")
    assert float(value(job, "seconds")) < 1.0


def test_freeing_ends_a_peers_wait_for_a_signal_on_both_ranks(run):
    # Rank 0 frees while rank 1 waits (no timeout) for a signal rank 0 never
    # sends: rank 1's wait fails at once, naming rank 0, and so does rank
    # 0's teardown fence, which rank 1 never reaches. A short job timeout:
    # before, both waited for ever.
    job = run(2, "failures.py", {"KPCCL_TEST_CASE": "free_while_peer_waits"}, timeout=20).expect_ok()
    for r in (0, 1):
        assert value(job, f"raised{r}") == "PeerDeadError", job.stdout + job.stderr
        assert value(job, f"rank{r}") == "0"
        assert "rank 0 left the window" in value(job, f"message{r}")
        assert "while rank 1 still waited for it" in value(job, f"message{r}")
    assert float(value(job, "seconds0")) < 1.0
    assert float(value(job, "seconds1")) < 1.5  # rank 0 frees at 0.3 s


def test_timeout_is_a_builtin_timeout_error(run):
    job = run(2, "failures.py", {"KPCCL_TEST_CASE": "timeout"}).expect_ok()
    assert value(job, "raised") == "TimeoutError"
    assert value(job, "is_kpccl") == "True"
    assert 0.25 < float(value(job, "seconds")) < 1.0
    # The window was abandoned because rank 0 timed out waiting for rank 1:
    # rank 1's late fence fails as a timeout too, naming the rank waited for.
    assert value(job, "late") == "TimeoutError"
    assert value(job, "late_rank") == "1"


def test_ctrl_c_interrupts_a_wait(run):
    job = run(2, "failures.py", {"KPCCL_TEST_CASE": "interrupt"}).expect_ok()
    assert value(job, "raised") == "KeyboardInterrupt"
    assert float(value(job, "seconds")) < 0.8
    assert value(job, "poisoned") == "True"
    # Rank 0 abandoned the window: rank 1's late fence names it.
    assert value(job, "late") == "PeerDeadError", job.stdout + job.stderr
    assert value(job, "late_rank") == "0"


def test_the_gil_is_released_during_a_wait(run):
    job = run(2, "failures.py", {"KPCCL_TEST_CASE": "gil"}).expect_ok()
    # A Python thread counted while the main thread waited 0.45 s in a fence.
    assert int(value(job, "during")) > 10_000


def test_a_wait_off_the_main_thread_leaves_the_gil_alone(run):
    job = run(2, "failures.py", {"KPCCL_TEST_CASE": "wait_off_the_main_thread"}).expect_ok()
    assert value(job, "waiting") == "True", job.stdout + job.stderr
    # Taking the GIL every 5 ms would be about 160 switches in 0.8 s.
    assert int(value(job, "switches")) < 20


def test_leaving_a_with_block_abandons_even_while_another_thread_waits(run):
    job = run(2, "failures.py", {"KPCCL_TEST_CASE": "abandon_while_waiting"}).expect_ok()
    assert value(job, "raised") == "PeerDeadError", job.stdout + job.stderr
    assert value(job, "rank") == "0"
    assert float(value(job, "seconds")) < 2.0
    assert value(job, "thread_wait") == "PeerDeadError"
    assert value(job, "thread_wait_rank") == "0"


@pytest.mark.parametrize("memory", ["host", "ascend"])
def test_ctrl_c_interrupts_a_free(run, tmp_path, sim_env, memory):
    # Rank 0's free waits for rank 1, which comes 1.5 s late (no timeout):
    # Ctrl-C at 0.3 s ends it at once, releasing the window, and rank 1's
    # late free fails at once, told that rank 0 gave up on the window.
    env = {"KPCCL_TEST_CASE": "interrupt_free", "KPCCL_TEST_MARK": str(tmp_path / "late-rank-done"),
           "KPCCL_TEST_MEMORY": memory, **sim_env}
    job = run(2, "failures.py", env).expect_ok()
    assert value(job, "raised") == "KeyboardInterrupt", job.stdout + job.stderr
    assert 0.25 < float(value(job, "seconds")) < 0.8
    assert value(job, "freed") == "True"
    assert value(job, "late") == "PeerDeadError", job.stdout + job.stderr
    assert value(job, "late_rank") == "0"
    assert "rank 0 abandoned the window" in value(job, "late_message")
    assert float(value(job, "late_seconds")) < 1.0
    assert value(job, "late_freed") == "True"


def creation_interrupted(run, tmp_path, case, env=None):
    """Rank 0 gets Ctrl-C while it waits for rank 1 in a creation: it raises
    at once, and rank 1, coming late, fails rather than waits (its timeout
    is 20 s), told that rank 0 left."""
    mark = str(tmp_path / "late-rank-done")
    env = {"KPCCL_TEST_CASE": case, "KPCCL_TEST_MARK": mark, "KPCCL_OOB_TIMEOUT_MS": "20000", **(env or {})}
    job = run(2, "failures.py", env).expect_ok()
    assert value(job, "raised") == "KeyboardInterrupt", job.stdout + job.stderr
    # Interrupted after 0.3 s; rank 1 comes at 1.5 s.
    assert 0.25 < float(value(job, "seconds")) < 1.0
    # A kpccl.Error (PeerDeadError: rank 0 left the job) naming rank 0.
    assert value(job, "late") == "PeerDeadError", job.stdout + job.stderr
    assert value(job, "late_rank") == "0"
    assert "rank 0 left the job" in value(job, "late_message")
    assert float(value(job, "late_seconds")) < 2.0


def test_ctrl_c_interrupts_window_creation(run, tmp_path):
    creation_interrupted(run, tmp_path, "interrupt_alloc")


def test_ctrl_c_interrupts_device_window_creation(run, tmp_path, sim_env):
    creation_interrupted(run, tmp_path, "interrupt_alloc", {"KPCCL_TEST_MEMORY": "ascend", **sim_env})


def test_ctrl_c_interrupts_communicator_creation_under_the_launcher(run, tmp_path):
    creation_interrupted(run, tmp_path, "interrupt_comm")


def test_poisoned_answers_while_another_thread_waits(run):
    job = run(2, "failures.py", {"KPCCL_TEST_CASE": "poisoned_while_waiting"}).expect_ok()
    assert value(job, "during") == "None", job.stdout + job.stderr
    assert float(value(job, "seconds")) < 0.1
    assert value(job, "raised") == "PeerDeadError", job.stdout + job.stderr
    assert value(job, "rank") == "1"
    assert "rank 1" in value(job, "after")
