/*
 * check.h: counting checks in the C tests. Every rank counts its own; at the
 * end the counts are gathered and rank 0 prints the totals as the final
 * line, `N passed, N failed`. Every rank exits non-zero if any check failed
 * on any rank.
 */
#ifndef KPCCL_TEST_CHECK_H
#define KPCCL_TEST_CHECK_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mpi.h>

#include "kpccl.h"

static int check_passed;
static int check_failed;
static int check_rank;

/* CHECK(condition, printf-format, args...): one check; on failure says where and why. */
#define CHECK(cond, ...)                                                                      \
    do {                                                                                      \
        if (cond) {                                                                           \
            check_passed++;                                                                   \
        } else {                                                                              \
            check_failed++;                                                                   \
            fprintf(stderr, "rank %d: FAILED %s:%d: %s: ", check_rank, __FILE__, __LINE__, #cond); \
            fprintf(stderr, __VA_ARGS__);                                                     \
            fprintf(stderr, " [kpccl_last_error: %s]\n", kpccl_last_error());                 \
        }                                                                                     \
    } while (0)

/* The call failed, and said so: KPCCL_ERROR and a last error naming the function. */
#define CHECK_FAILS(call, fn)                                                                 \
    do {                                                                                      \
        int check_rc_ = (call);                                                               \
        CHECK(check_rc_ == KPCCL_ERROR && strstr(kpccl_last_error(), fn) != NULL,             \
              "%s returned %d", #call, check_rc_);                                            \
    } while (0)

#define CHECK_OK(call)                                                                        \
    do {                                                                                      \
        int check_rc_ = (call);                                                               \
        CHECK(check_rc_ == KPCCL_OK, "%s returned %d", #call, check_rc_);                     \
    } while (0)

/* Gathers the counts, prints the totals on rank 0, finalizes; the exit code. */
static inline int check_finish(MPI_Comm comm)
{
    int n = 0;
    int mine[2] = {check_passed, check_failed};
    int passed = 0, failed = 0;
    MPI_Comm_size(comm, &n);
    int *all = (int *)calloc((size_t)n * 2, sizeof(int));
    if (all == NULL || MPI_Allgather(mine, 2, MPI_INT, all, 2, MPI_INT, comm) != MPI_SUCCESS) {
        fprintf(stderr, "rank %d: cannot gather the results\n", check_rank);
        return 1;
    }
    for (int r = 0; r < n; r++) {
        passed += all[2 * r];
        failed += all[2 * r + 1];
    }
    free(all);
    if (check_rank == 0) {
        printf("%d passed, %d failed\n", passed, failed);
        fflush(stdout);
    }
    MPI_Finalize();
    return failed == 0 ? 0 : 1;
}

/* The MPI callbacks of the reference example, with one MPI_Allgather for
 * every kpccl datatype. */
static int check_allgather(const void *sendbuf, void *recvbuf, int size, void *group, kpccl_shm_datatype_t datatype)
{
    MPI_Datatype type;
    switch (datatype) {
    case KPCCL_SHM_DATATYPE_CHAR: type = MPI_CHAR; break;
    case KPCCL_SHM_DATATYPE_INT: type = MPI_INT; break;
    case KPCCL_SHM_DATATYPE_LONG: type = MPI_LONG; break;
    case KPCCL_SHM_DATATYPE_FLOAT: type = MPI_FLOAT; break;
    case KPCCL_SHM_DATATYPE_DOUBLE: type = MPI_DOUBLE; break;
    default:
        kpccl_error("not support datatype %d", (int)datatype);
        return KPCCL_ERROR;
    }
    return MPI_Allgather(sendbuf, size, type, recvbuf, size, type, *(MPI_Comm *)group);
}

static int check_barrier(void *group)
{
    return MPI_Barrier(*(MPI_Comm *)group);
}

/* MPI_Init; this rank's number and the job's size in MPI_COMM_WORLD (which
 * CHECK's messages name); the callbacks above as the out-of-band functions. */
static inline void check_init(int *argc, char ***argv, int *me, int *n, kpccl_shm_oob_cb_t *cbs)
{
    MPI_Init(argc, argv);
    MPI_Comm_rank(MPI_COMM_WORLD, me);
    MPI_Comm_size(MPI_COMM_WORLD, n);
    check_rank = *me;
    cbs->oob_allgather = check_allgather;
    cbs->oob_barrier = check_barrier;
}

#endif /* KPCCL_TEST_CHECK_H */
