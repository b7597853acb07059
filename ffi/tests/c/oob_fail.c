/*
 * oob_fail.c: an out-of-band callback that fails (returns non-zero) makes
 * the collective fail on every rank, whichever rank's callback fails, at
 * whichever call, whether it failed before taking part in the allgather or
 * after; and the ranks stay in step: the next collective works.
 *
 * Creating a communicator is one allgather, a window three. A callback that
 * took part and then failed in a communicator's only allgather cannot be
 * told to the others by that call (they finished it): the library reports it
 * in their next collective, so that case is left out here.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mpi.h>

#include "check.h"
#include "kpccl.h"

#define FAIL_CODE 17
#define EVERY_RANK (-2)

enum mode { BEFORE, AFTER };

static struct {
    int rank;  /* which rank's callback fails: a rank, EVERY_RANK, or -1 for none */
    int call;  /* at which allgather of the collective, from 1 */
    enum mode mode;
    int calls; /* allgathers so far */
} plan = {-1, 0, BEFORE, 0};

static int me, n;

static int flaky_allgather(const void *sendbuf, void *recvbuf, int size, void *group, kpccl_shm_datatype_t datatype)
{
    plan.calls++;
    if ((plan.rank == me || plan.rank == EVERY_RANK) && plan.calls == plan.call) {
        if (plan.mode == AFTER) {
            (void)check_allgather(sendbuf, recvbuf, size, group, datatype);
        }
        return FAIL_CODE;
    }
    return check_allgather(sendbuf, recvbuf, size, group, datatype);
}

static void arm(int rank, int call, enum mode mode)
{
    plan.rank = rank;
    plan.call = call;
    plan.mode = mode;
    plan.calls = 0;
}

/* The error says who and why: the failing rank its callback's code, the
 * others the failing rank and its code. */
static int names_the_culprit(int rank)
{
    char who[32], code[32];
    snprintf(who, sizeof who, "rank %d", rank);
    snprintf(code, sizeof code, "returned %d", FAIL_CODE);
    int mine = rank == me || rank == EVERY_RANK;
    return strstr(kpccl_last_error(), code) != NULL && (mine || strstr(kpccl_last_error(), who) != NULL);
}

static void a_good_window(kpccl_shm_comm_h comm)
{
    void *base = NULL;
    kpccl_shm_win_h win = NULL;
    arm(-1, 0, BEFORE);
    CHECK_OK(kpccl_shm_win_alloc(4096, comm, &base, &win));
    if (win != NULL) {
        ((volatile char *)base)[0] = (char)me;
        CHECK_OK(kpccl_shm_win_fence(win));
        CHECK_OK(kpccl_shm_win_free(win));
    }
}

int main(int argc, char **argv)
{
    kpccl_shm_oob_cb_t cbs;
    check_init(&argc, &argv, &me, &n, &cbs);
    MPI_Comm world = MPI_COMM_WORLD;
    cbs.oob_allgather = flaky_allgather;
    int culprits[3] = {n - 1, 0, EVERY_RANK};

    /* Communicator creation. */
    for (int c = 0; c < 3; c++) {
        kpccl_shm_comm_h comm = NULL;
        arm(culprits[c], 1, BEFORE);
        int rc = kpccl_shm_comm_create(n, me, me, &cbs, &world, &comm);
        CHECK(rc == KPCCL_ERROR && comm == NULL, "comm_create, rank %d's callback fails: rc %d", culprits[c], rc);
        CHECK(names_the_culprit(culprits[c]), "comm_create, rank %d's callback fails", culprits[c]);
    }
    kpccl_shm_comm_h comm = NULL;
    arm(-1, 0, BEFORE);
    CHECK_OK(kpccl_shm_comm_create(n, me, me, &cbs, &world, &comm));
    if (comm == NULL) {
        return check_finish(world);
    }

    /* Window creation: each of its three allgathers, before and after taking part. */
    for (int mode = BEFORE; mode <= AFTER; mode++) {
        for (int call = 1; call <= 3; call++) {
            for (int c = 0; c < 3; c++) {
                void *base = &base;
                kpccl_shm_win_h win = (kpccl_shm_win_h)&win;
                arm(culprits[c], call, (enum mode)mode);
                int rc = kpccl_shm_win_alloc(4096, comm, &base, &win);
                CHECK(rc == KPCCL_ERROR && win == NULL && base == NULL,
                      "win_alloc, rank %d's callback fails %s its allgather %d: rc %d", culprits[c],
                      mode == BEFORE ? "before" : "after", call, rc);
                CHECK(names_the_culprit(culprits[c]), "win_alloc, rank %d's callback fails %s its allgather %d",
                      culprits[c], mode == BEFORE ? "before" : "after", call);
                a_good_window(comm);
            }
        }
    }
    CHECK_OK(kpccl_shm_comm_destroy(comm));
    return check_finish(world);
}
