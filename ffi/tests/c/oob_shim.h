/*
 * oob_shim.h: the few MPI calls the C tests use, over the kpccl-run
 * launcher instead of MPI, so that the same sources run under
 * `kpccl-run -n N -- ./test` where no MPI is installed (or, as on aarch64
 * under qemu, none can run). Built with -DKPCCL_NO_MPI and -I nompi, whose
 * mpi.h includes this file.
 */
#ifndef KPCCL_OOB_SHIM_H
#define KPCCL_OOB_SHIM_H

#ifndef KPCCL_NO_MPI
#define KPCCL_NO_MPI 1
#endif

#include <stdio.h>
#include <stdlib.h>

#include "kpccl.h"

typedef void *MPI_Comm;
typedef kpccl_shm_datatype_t MPI_Datatype;

#define MPI_SUCCESS 0
#define MPI_CHAR KPCCL_SHM_DATATYPE_CHAR
#define MPI_INT KPCCL_SHM_DATATYPE_INT
#define MPI_LONG KPCCL_SHM_DATATYPE_LONG
#define MPI_FLOAT KPCCL_SHM_DATATYPE_FLOAT
#define MPI_DOUBLE KPCCL_SHM_DATATYPE_DOUBLE

static kpccl_shm_oob_cb_t kpccl_shim_cbs;
static void *kpccl_shim_group;
static int kpccl_shim_rank;
static int kpccl_shim_nranks;

/* The one communicator there is: the launcher's job. */
#define MPI_COMM_WORLD ((MPI_Comm)&kpccl_shim_group)

static inline int MPI_Init(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    if (kpccl_run_oob(&kpccl_shim_cbs, &kpccl_shim_group, &kpccl_shim_rank, &kpccl_shim_nranks) != KPCCL_OK) {
        fprintf(stderr, "MPI_Init (kpccl-run shim): %s\n", kpccl_last_error());
        exit(2);
    }
    return MPI_SUCCESS;
}

static inline int MPI_Comm_size(MPI_Comm comm, int *size)
{
    (void)comm;
    *size = kpccl_shim_nranks;
    return MPI_SUCCESS;
}

static inline int MPI_Comm_rank(MPI_Comm comm, int *rank)
{
    (void)comm;
    *rank = kpccl_shim_rank;
    return MPI_SUCCESS;
}

static inline int MPI_Barrier(MPI_Comm comm)
{
    (void)comm;
    return kpccl_shim_cbs.oob_barrier(kpccl_shim_group);
}

static inline int MPI_Allgather(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
                                int recvcount, MPI_Datatype recvtype, MPI_Comm comm)
{
    (void)comm;
    if (sendcount != recvcount || sendtype != recvtype) {
        return 1;
    }
    return kpccl_shim_cbs.oob_allgather(sendbuf, recvbuf, sendcount, kpccl_shim_group, sendtype);
}

static inline int MPI_Finalize(void)
{
    /* Like MPI's: nobody leaves while another rank still needs the launcher. */
    return MPI_Barrier(MPI_COMM_WORLD);
}

#endif /* KPCCL_OOB_SHIM_H */
