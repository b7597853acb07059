/*
 * fork.c: a forked child of a rank touches nothing of its parent's. Every
 * call on the parent's communicator or window fails there, naming the
 * parent; under kpccl-run, the parent's connection to the launcher is
 * refused too (kpccl_run_oob, and the callbacks it gave), so that nothing
 * the child sends is taken for the parent rank's part in a collective; and
 * the parents' next collectives work.
 *
 * Rank 0 forks; its child reports its failed checks in its exit status.
 */
#define _POSIX_C_SOURCE 200809L

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <mpi.h>

#include "check.h"
#include "kpccl.h"

static kpccl_shm_oob_cb_t cbs;
static MPI_Comm world;
static int me, n;

/* In the child: the call was refused as a parent's handle. */
#define CHECK_PARENTS(call, fn)                                                                \
    do {                                                                                       \
        CHECK_FAILS(call, fn);                                                                 \
        CHECK(strstr(kpccl_last_error(), "was made by the parent process") != NULL, "%s", #call); \
    } while (0)

/* The child's checks; the number that failed. */
static int child(kpccl_shm_comm_h comm, kpccl_shm_win_h win)
{
    kpccl_shm_comm_info_t info;
    size_t size = 0;
    void *base = NULL;
    kpccl_shm_win_h other = NULL;
    int before = check_failed;
    CHECK_PARENTS(kpccl_shm_win_fence(win), "kpccl_shm_win_fence");
    CHECK_PARENTS(kpccl_shm_win_query(win, 0, &size, &base), "kpccl_shm_win_query");
    CHECK_PARENTS(kpccl_shm_win_free(win), "kpccl_shm_win_free");
    CHECK_PARENTS(kpccl_shm_comm_query(comm, &info), "kpccl_shm_comm_query");
    CHECK_PARENTS(kpccl_shm_win_alloc(64, comm, &base, &other), "kpccl_shm_win_alloc");
    CHECK_PARENTS(kpccl_shm_comm_destroy(comm), "kpccl_shm_comm_destroy");
#ifdef KPCCL_NO_MPI
    /* The shim's MPI_Init connected the parent: the child may not use it. */
    kpccl_shm_oob_cb_t run;
    void *group = NULL;
    int rank = -1, nranks = -1;
    CHECK_FAILS(kpccl_run_oob(&run, &group, &rank, &nranks), "kpccl_run_oob");
    CHECK(strstr(kpccl_last_error(), "forked child") != NULL, "the child is told why");
    CHECK(kpccl_last_error_code() == KPCCL_ERR_OUT_OF_BAND, "class %d", (int)kpccl_last_error_code());
    /* The callbacks it gave the parent fail at once, sending nothing. */
    int mine = 42, all[8] = {0};
    CHECK(MPI_Allgather(&mine, 1, MPI_INT, all, 1, MPI_INT, world) != MPI_SUCCESS, "the child's allgather");
    CHECK(all[0] == 0, "nothing gathered: %d", all[0]);
    CHECK(MPI_Barrier(world) != MPI_SUCCESS, "the child's barrier");
#endif
    return check_failed - before;
}

int main(int argc, char **argv)
{
    kpccl_shm_comm_h comm = NULL;
    kpccl_shm_win_h win = NULL;
    void *base = NULL;

    check_init(&argc, &argv, &me, &n, &cbs);
    world = MPI_COMM_WORLD;
    CHECK_OK(kpccl_shm_comm_create(n, me, KPCCL_LOCAL_RANK_AUTO, &cbs, &world, &comm));
    CHECK_OK(kpccl_shm_win_alloc(64, comm, &base, &win));
    if (comm == NULL || win == NULL) {
        return check_finish(world);
    }
    if (me == 0) {
        fflush(stdout);
        fflush(stderr);
        pid_t pid = fork();
        CHECK(pid >= 0, "fork");
        if (pid == 0) {
            _exit(child(comm, win) == 0 ? 0 : 1);
        }
        int status = 0;
        CHECK(pid > 0 && waitpid(pid, &status, 0) == pid, "waitpid");
        CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the child's checks (status %#x)", (unsigned)status);
    }

    /* The parents' collectives are in step (a collective first: before the
     * fix, the child's allgather was taken for rank 0's part in it), and
     * their window works. */
    kpccl_shm_win_h again = NULL;
    void *other = NULL;
    CHECK_OK(kpccl_shm_win_alloc(64, comm, &other, &again));
    CHECK_OK(kpccl_shm_win_free(again));
    memset(base, me + 1, 64);
    CHECK_OK(kpccl_shm_win_fence(win));
    int left = (me + n - 1) % n;
    size_t size = 0;
    void *peer = NULL;
    CHECK_OK(kpccl_shm_win_query(win, left, &size, &peer));
    CHECK(peer != NULL && ((unsigned char *)peer)[63] == left + 1, "rank %d's data", left);
    CHECK_OK(kpccl_shm_win_fence(win));
    CHECK_OK(kpccl_shm_win_free(win));
    CHECK_OK(kpccl_shm_comm_destroy(comm));
    return check_finish(world);
}
