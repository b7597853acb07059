/*
 * mpi_oob.h: kpccl's out-of-band callbacks over MPI, as KPCCL programs
 * usually have them (the group is a pointer to an MPI_Comm), and a
 * communicator over MPI_COMM_WORLD built with them. For the benchmark
 * programs that run under mpirun.
 */
#ifndef KPCCL_BENCH_MPI_OOB_H
#define KPCCL_BENCH_MPI_OOB_H

#include <stdio.h>

#include <mpi.h>

#include "kpccl.h"

static inline int oob_allgather(const void *sendbuf, void *recvbuf, int size, void *group, kpccl_shm_datatype_t type)
{
    static const MPI_Datatype types[] = {MPI_CHAR, MPI_INT, MPI_LONG, MPI_FLOAT, MPI_DOUBLE};
    if ((unsigned)type >= sizeof types / sizeof *types)
        return -1;
    return MPI_Allgather(sendbuf, size, types[type], recvbuf, size, types[type], *(MPI_Comm *)group);
}

static inline int oob_barrier(void *group)
{
    return MPI_Barrier(*(MPI_Comm *)group);
}

/* A kpccl communicator over MPI_COMM_WORLD (rank = local rank: one node);
 * NULL, with the error printed, when creation fails. */
static inline kpccl_shm_comm_h world_comm(void)
{
    static kpccl_shm_oob_cb_t cbs = {oob_allgather, oob_barrier};
    static MPI_Comm world;
    world = MPI_COMM_WORLD;
    int rank, nranks;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    kpccl_shm_comm_h comm = NULL;
    if (kpccl_shm_comm_create(nranks, rank, rank, &cbs, &world, &comm) != KPCCL_OK)
        fprintf(stderr, "rank %d: kpccl_shm_comm_create: %s\n", rank, kpccl_last_error());
    return comm;
}

#endif
