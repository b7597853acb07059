/*
 * kpccl_mpi.h under a real MPI (Open MPI or MPICH), compiled as C11 and as
 * C++17: the node's communicator from MPI_COMM_WORLD and from a split of
 * it, a window written by every rank and read by every other after peer
 * fences, and a refused call that fails on every rank instead of hanging.
 * Rank 0 prints `N passed, N failed`; the exit code is non-zero on failure.
 */
#include <stdio.h>
#include <string.h>

#include "kpccl_mpi.h"

static int passed, failed, me;

#define CHECK(cond, what)                                                                          \
    do {                                                                                           \
        if (cond) {                                                                                \
            passed++;                                                                              \
        } else {                                                                                   \
            failed++;                                                                              \
            fprintf(stderr, "rank %d: FAILED line %d: %s (%s) [kpccl_last_error: %s]\n", me,       \
                    __LINE__, #cond, what, kpccl_last_error());                                    \
        }                                                                                          \
    } while (0)

/* Node rank and size as MPI sees them. */
static void node_of(MPI_Comm comm, int *rank, int *size)
{
    MPI_Comm node;
    MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
    MPI_Comm_rank(node, rank);
    MPI_Comm_size(node, size);
    MPI_Comm_free(&node);
}

/* A window over `comm`'s node: each rank writes its words, fences with every
 * peer, and reads every peer's words. */
static void window_round(MPI_Comm comm, const char *name)
{
    enum { WORDS = 512 };
    kpccl_shm_comm_h kc = NULL;
    kpccl_shm_comm_info_t info;
    kpccl_shm_win_h win = NULL;
    void *base = NULL;
    int node_rank = -1, node_size = -1;

    node_of(comm, &node_rank, &node_size);
    CHECK(kpccl_shm_comm_create_mpi(comm, &kc) == KPCCL_OK && kc != NULL, name);
    if (kc == NULL) {
        return;
    }
    memset(&info, 0, sizeof info);
    CHECK(kpccl_shm_comm_query(kc, &info) == KPCCL_OK, name);
    CHECK(info.rank == node_rank && info.nranks == node_size, name);
    CHECK(info.local_rank == node_rank && info.local_size == node_size && info.nnodes == 1, name);
    CHECK(kpccl_shm_win_alloc(WORDS * sizeof(long), kc, &base, &win) == KPCCL_OK && base != NULL, name);
    if (win != NULL) {
        long *mine = (long *)base;
        for (int i = 0; i < WORDS; i++) {
            mine[i] = (long)info.rank * 100000 + i;
        }
        for (int peer = 0; peer < info.nranks; peer++) {
            if (peer != info.rank) {
                CHECK(kpccl_shm_peer_fence(win, peer) == KPCCL_OK, name);
            }
        }
        int wrong = 0;
        for (int peer = 0; peer < info.nranks; peer++) {
            size_t size = 0;
            void *theirs = NULL;
            CHECK(kpccl_shm_win_query(win, peer, &size, &theirs) == KPCCL_OK && size >= WORDS * sizeof(long), name);
            for (int i = 0; theirs != NULL && i < WORDS; i++) {
                wrong += ((const long *)theirs)[i] != (long)peer * 100000 + i;
            }
        }
        CHECK(wrong == 0, name);
        /* Nobody frees while a peer still reads. */
        CHECK(kpccl_shm_win_fence(win) == KPCCL_OK, name);
        CHECK(kpccl_shm_win_free(win) == KPCCL_OK, name);
    }
    CHECK(kpccl_shm_comm_destroy(kc) == KPCCL_OK, name);
}

int main(int argc, char **argv)
{
    MPI_Comm half;
    int n = 0, mine[2], all[2] = {0, 0};

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    MPI_Comm_size(MPI_COMM_WORLD, &n);

    window_round(MPI_COMM_WORLD, "MPI_COMM_WORLD");
    /* Any communicator: the even and the odd ranks each get their own. */
    MPI_Comm_split(MPI_COMM_WORLD, me % 2, me, &half);
    window_round(half, "even/odd split");
    MPI_Comm_free(&half);

    /* A refused call on every rank (no place for the result) fails
     * everywhere, leaves nothing behind, and hangs nobody. */
    CHECK(kpccl_shm_comm_create_mpi(MPI_COMM_WORLD, NULL) == KPCCL_ERROR, "NULL out");
    CHECK(strcmp(kpccl_last_error(), "kpccl_shm_comm_create_mpi: `out` is NULL") == 0,
          "NULL out names the helper's `out`");
    kpccl_shm_comm_h none = (kpccl_shm_comm_h)&n;
    CHECK(kpccl_shm_comm_create_mpi(MPI_COMM_NULL, &none) == KPCCL_ERROR && none == NULL, "MPI_COMM_NULL");
    /* The helper's own refusal reads like any failed call's. */
    CHECK(strcmp(kpccl_last_error(), "kpccl_shm_comm_create_mpi: `comm` is MPI_COMM_NULL") == 0,
          "MPI_COMM_NULL is kpccl_last_error()");
    CHECK(kpccl_last_error_code() == KPCCL_ERR_INVALID_ARGUMENT, "MPI_COMM_NULL is an invalid argument");

    mine[0] = passed;
    mine[1] = failed;
    MPI_Reduce(mine, all, 2, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD);
    if (me == 0) {
        printf("%d passed, %d failed\n", all[0], all[1]);
    }
    MPI_Finalize();
    return failed == 0 ? 0 : 1;
}
