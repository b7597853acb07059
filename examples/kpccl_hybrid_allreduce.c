/*
 * kpccl_hybrid_allreduce.c: the hybrid model. Shared memory inside each
 * node, MPI between nodes: an allreduce (sum) of a large vector of doubles.
 *
 * 1. Every rank puts its vector in its segment of a node-level window.
 * 2. Window fence. Then each rank of a node sums one slice of the vector
 *    over all of the node's segments and writes the slice into the node
 *    leader's segment (local rank 0). Only that rank touches that slice.
 * 3. Window fence. The node leaders allreduce the node sums with MPI over
 *    a communicator of leaders only.
 * 4. Window fence. Every rank copies the result from its leader's segment,
 *    then one more fence, so that the next round cannot overwrite it early.
 *
 * The result is compared with MPI_Allreduce over all ranks (the inputs are
 * small integers, so every order of summing gives exactly the same
 * doubles), and both are timed.
 *
 *   mpicc -std=c11 -O2 -I ffi/include examples/kpccl_hybrid_allreduce.c -o hybrid \
 *       -L target/release -lkpccl -Wl,-rpath,$PWD/target/release
 *   mpirun -np 8 ./hybrid [count] [iterations]
 *
 * Nodes are found by kpccl (boot id, hostname and pid namespace); to simulate
 * nodes on one machine, give each rank a KPCCL_NODE_ID. Exit status 0 when verified.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mpi.h>

#include "kpccl.h"
#include "kpccl_mpi.h"

/* The hybrid allreduce of `in` (count doubles) into `out`. */
static void hybrid(const double *in, double *out, size_t count, kpccl_shm_win_h win, double *mine,
                   double *leader, double **node_segs, int local_rank, int local_size, MPI_Comm leaders)
{
    memcpy(mine, in, count * sizeof(double));
    KPCCL_MPI_CHECK(kpccl_shm_win_fence(win));
    size_t lo = count * (size_t)local_rank / (size_t)local_size;
    size_t hi = count * (size_t)(local_rank + 1) / (size_t)local_size;
    for (size_t i = lo; i < hi; i++) {
        double sum = 0;
        for (int l = 0; l < local_size; l++) {
            sum += node_segs[l][i];
        }
        leader[i] = sum;
    }
    KPCCL_MPI_CHECK(kpccl_shm_win_fence(win));
    if (leaders != MPI_COMM_NULL) {
        MPI_Allreduce(MPI_IN_PLACE, leader, (int)count, MPI_DOUBLE, MPI_SUM, leaders);
    }
    KPCCL_MPI_CHECK(kpccl_shm_win_fence(win));
    memcpy(out, leader, count * sizeof(double));
    KPCCL_MPI_CHECK(kpccl_shm_win_fence(win));
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int me, n;
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    size_t count = argc > 1 ? (size_t)strtoul(argv[1], NULL, 10) : (size_t)1 << 20;
    int iters = argc > 2 ? atoi(argv[2]) : 10;
    if (argc > 3 || count == 0 || count > (size_t)1 << 28 || iters < 1) {
        /* Every rank sees the same arguments: all leave, no abort needed. */
        if (me == 0) {
            fprintf(stderr, "usage: %s [count (1..2^28)] [iterations (>= 1)]\n", argv[0]);
        }
        MPI_Finalize();
        return 2;
    }

    /* A communicator over every rank, with kpccl_mpi.h's callbacks over
     * MPI_COMM_WORLD (kpccl_shm_comm_create_mpi would split it by node
     * first); the library groups the ranks by node. */
    kpccl_mpi_group_t world = {MPI_COMM_WORLD};
    kpccl_shm_oob_cb_t cbs = {0};
    cbs.oob_allgather = kpccl_mpi_allgather;
    cbs.oob_barrier = kpccl_mpi_barrier;
    kpccl_shm_comm_h comm;
    KPCCL_MPI_CHECK(kpccl_shm_comm_create(n, me, KPCCL_LOCAL_RANK_AUTO, &cbs, &world, &comm));
    kpccl_shm_comm_info_t info;
    KPCCL_MPI_CHECK(kpccl_shm_comm_query(comm, &info));
    int *node_ranks = malloc((size_t)info.local_size * sizeof(int));
    double **node_segs = malloc((size_t)info.local_size * sizeof(double *));
    double *in = malloc(count * sizeof(double));
    double *out = malloc(count * sizeof(double));
    double *ref = malloc(count * sizeof(double));
    if (node_ranks == NULL || node_segs == NULL || in == NULL || out == NULL || ref == NULL) {
        fprintf(stderr, "rank %d: out of memory\n", me);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    KPCCL_MPI_CHECK(kpccl_shm_comm_node_ranks(comm, node_ranks, info.local_size));

    /* MPI between node leaders only. */
    MPI_Comm leaders;
    MPI_Comm_split(MPI_COMM_WORLD, info.local_rank == 0 ? 0 : MPI_UNDEFINED, me, &leaders);

    /* The node-level window: every rank owns one vector. */
    kpccl_shm_win_h win;
    void *base;
    KPCCL_MPI_CHECK(kpccl_shm_win_alloc(count * sizeof(double), comm, &base, &win));
    for (int l = 0; l < info.local_size; l++) {
        size_t bytes;
        void *p;
        KPCCL_MPI_CHECK(kpccl_shm_win_query(win, node_ranks[l], &bytes, &p));
        node_segs[l] = (double *)p;
    }

    for (size_t i = 0; i < count; i++) {
        in[i] = (double)((me * 7919 + (int)(i % 100003)) % 1000);
    }

    /* Verify once, then time both. */
    hybrid(in, out, count, win, node_segs[info.local_rank], node_segs[0], node_segs, info.local_rank,
           info.local_size, leaders);
    MPI_Allreduce(in, ref, (int)count, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    long wrong = 0;
    for (size_t i = 0; i < count; i++) {
        wrong += out[i] != ref[i];
    }
    long wrong_all = 0;
    MPI_Allreduce(&wrong, &wrong_all, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);

    double t_hybrid = 0, t_mpi = 0;
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    for (int k = 0; k < iters; k++) {
        hybrid(in, out, count, win, node_segs[info.local_rank], node_segs[0], node_segs, info.local_rank,
               info.local_size, leaders);
    }
    double mine = (MPI_Wtime() - t0) / iters;
    MPI_Reduce(&mine, &t_hybrid, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    MPI_Barrier(MPI_COMM_WORLD);
    t0 = MPI_Wtime();
    for (int k = 0; k < iters; k++) {
        MPI_Allreduce(in, ref, (int)count, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    }
    mine = (MPI_Wtime() - t0) / iters;
    MPI_Reduce(&mine, &t_mpi, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);

    if (me == 0) {
        printf("hybrid allreduce: %d ranks on %d node%s, %zu doubles (%.1f MiB), %d iterations\n", n, info.nnodes,
               info.nnodes == 1 ? "" : "s", count, (double)(count * sizeof(double)) / (1 << 20), iters);
        printf("hybrid (window in each node + MPI between %d leaders): %.3f ms\n", info.nnodes, t_hybrid * 1e3);
        printf("plain MPI_Allreduce:                                 %.3f ms\n", t_mpi * 1e3);
        printf("time ratio hybrid / MPI_Allreduce: %.2f\n", t_hybrid / t_mpi);
        printf("%s: %ld wrong elements against MPI_Allreduce\n", wrong_all == 0 ? "verified" : "FAILED", wrong_all);
    }

    KPCCL_MPI_CHECK(kpccl_shm_win_free(win));
    KPCCL_MPI_CHECK(kpccl_shm_comm_destroy(comm));
    if (leaders != MPI_COMM_NULL) {
        MPI_Comm_free(&leaders);
    }
    free(node_ranks);
    free(node_segs);
    free(in);
    free(out);
    free(ref);
    MPI_Finalize();
    return wrong_all == 0 ? 0 : 1;
}
