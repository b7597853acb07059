/*
 * mpi_oob.h: a kpccl communicator over MPI_COMM_WORLD for the benchmark
 * programs that run under mpirun (one node), made by kpccl_mpi.h as MPI
 * programs make theirs.
 */
#ifndef KPCCL_BENCH_MPI_OOB_H
#define KPCCL_BENCH_MPI_OOB_H

#include <stdio.h>

#include <mpi.h>

#include "kpccl.h"
#include "kpccl_mpi.h"

/* A kpccl communicator of this node's ranks of MPI_COMM_WORLD (all of them:
 * the benchmarks run on one node); NULL, with the error printed, when
 * creation fails. kpccl_shm_comm_destroy releases it before MPI_Finalize. */
static inline kpccl_shm_comm_h world_comm(void)
{
    kpccl_shm_comm_h comm = NULL;
    if (kpccl_shm_comm_create_mpi(MPI_COMM_WORLD, &comm) != KPCCL_OK) {
        int rank;
        MPI_Comm_rank(MPI_COMM_WORLD, &rank);
        fprintf(stderr, "rank %d: kpccl_shm_comm_create_mpi: %s\n", rank, kpccl_last_error());
    }
    return comm;
}

#endif
