/*
 * hybrid_mpi.c: the few MPI calls the Rust hybrid example (kpccl-hybrid)
 * makes, as plain C functions. Compiled by build.rs with the host's
 * mpicc, so that Rust binds no MPI implementation's ABI (Open MPI's handles
 * are pointers, MPICH's are ints): mpicc knows them.
 */
#include <stddef.h> /* NULL: MPICH's mpi.h does not bring it, Open MPI's does */

#include <mpi.h>

static MPI_Comm leaders = MPI_COMM_NULL;

int hyb_init(int *rank, int *size)
{
    int rc = MPI_Init(NULL, NULL);
    if (rc == MPI_SUCCESS) {
        rc = MPI_Comm_rank(MPI_COMM_WORLD, rank);
    }
    if (rc == MPI_SUCCESS) {
        rc = MPI_Comm_size(MPI_COMM_WORLD, size);
    }
    return rc;
}

int hyb_allgather_bytes(const void *send, void *recv, int len)
{
    return MPI_Allgather(send, len, MPI_BYTE, recv, len, MPI_BYTE, MPI_COMM_WORLD);
}

int hyb_barrier(void)
{
    return MPI_Barrier(MPI_COMM_WORLD);
}

/* The communicator of node leaders: every rank calls it, leaders with 1. */
int hyb_split_leaders(int leader, int rank)
{
    return MPI_Comm_split(MPI_COMM_WORLD, leader ? 0 : MPI_UNDEFINED, rank, &leaders);
}

/* Sum over the leaders, in place (leaders only). */
int hyb_leaders_allreduce(double *buf, int count)
{
    return MPI_Allreduce(MPI_IN_PLACE, buf, count, MPI_DOUBLE, MPI_SUM, leaders);
}

/* Plain MPI_Allreduce (sum) over every rank. */
int hyb_allreduce(const double *in, double *out, int count)
{
    return MPI_Allreduce(in, out, count, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
}

/* The largest `v` of every rank. */
double hyb_max(double v)
{
    double max = v;
    MPI_Allreduce(&v, &max, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    return max;
}

double hyb_wtime(void)
{
    return MPI_Wtime();
}

int hyb_finalize(void)
{
    if (leaders != MPI_COMM_NULL) {
        MPI_Comm_free(&leaders);
    }
    return MPI_Finalize();
}
