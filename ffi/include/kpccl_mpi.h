/*
 * kpccl_mpi.h: a KPCCL communicator made from any MPI communicator, so that
 * an MPI program writes no out-of-band callbacks. Header-only: it needs
 * <mpi.h> and kpccl.h, and the program links libkpccl and MPI as usual.
 *
 *     kpccl_shm_comm_h comm;
 *     if (kpccl_shm_comm_create_mpi(MPI_COMM_WORLD, &comm) != KPCCL_OK)
 *         fprintf(stderr, "%s\n", kpccl_last_error());
 *     ... kpccl_shm_win_alloc(size, comm, &base, &win) ... kpccl_shm_win_free(win);
 *     kpccl_shm_comm_destroy(comm);        releases what the helper made
 *
 * Compiles warning-free as C11 and C++ (-Wall -Wextra) with Open MPI and
 * MPICH, which differ in what MPI_Comm is (a pointer or an int): the
 * callbacks reach the MPI communicator through a group of their own, never
 * through a cast of MPI_Comm to a pointer. libkpccl itself links no MPI:
 * build with the wrapper of the MPI you run with (MPICH on Debian, beside
 * Open MPI: mpicc.mpich, then mpiexec.mpich -np N ./prog).
 */
#ifndef KPCCL_MPI_H
#define KPCCL_MPI_H

/* MPI's C++ bindings (removed in MPI-3) are not needed here, and Open MPI's
 * warn under -Wextra with a recent g++: leave them out unless asked for
 * (define KPCCL_MPI_KEEP_MPICXX) or <mpi.h> came first. */
#ifndef KPCCL_MPI_KEEP_MPICXX
#ifndef OMPI_SKIP_MPICXX
#define OMPI_SKIP_MPICXX 1
#endif
#ifndef MPICH_SKIP_MPICXX
#define MPICH_SKIP_MPICXX 1
#endif
#endif
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

#include "kpccl.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Fails the helper's call as a failing library call fails: the text and
 * class become kpccl_last_error() and kpccl_last_error_code(). */
static inline int kpccl_mpi_fail(kpccl_error_code_t code, const char *msg)
{
    (void)kpccl_record_error((int)code, msg);
    return KPCCL_ERROR;
}

/* The callbacks' group: the MPI communicator of the caller's node. */
typedef struct kpccl_mpi_group_t {
    MPI_Comm node;
} kpccl_mpi_group_t;

/* The MPI datatype of a kpccl datatype; 0 if there is none. */
static inline int kpccl_mpi_datatype(kpccl_shm_datatype_t datatype, MPI_Datatype *type)
{
    switch (datatype) {
    case KPCCL_SHM_DATATYPE_CHAR:
        /* The library gathers raw bytes with it: never converted. */
        *type = MPI_BYTE;
        return 1;
    case KPCCL_SHM_DATATYPE_INT:
        *type = MPI_INT;
        return 1;
    case KPCCL_SHM_DATATYPE_LONG:
        *type = MPI_LONG;
        return 1;
    case KPCCL_SHM_DATATYPE_FLOAT:
        *type = MPI_FLOAT;
        return 1;
    case KPCCL_SHM_DATATYPE_DOUBLE:
        *type = MPI_DOUBLE;
        return 1;
    }
    return 0;
}

/* The allgather callback: MPI_Allgather over the node's communicator. */
static inline int kpccl_mpi_allgather(const void *sendbuf, void *recvbuf, int size, void *group,
                                      kpccl_shm_datatype_t datatype)
{
    MPI_Comm node = ((kpccl_mpi_group_t *)group)->node;
    MPI_Datatype type;
    if (!kpccl_mpi_datatype(datatype, &type)) {
        kpccl_error("kpccl_mpi_allgather: datatype %d has no MPI datatype", (int)datatype);
        return KPCCL_ERROR;
    }
    return MPI_Allgather(sendbuf, size, type, recvbuf, size, type, node);
}

/* The barrier callback: MPI_Barrier over the node's communicator. */
static inline int kpccl_mpi_barrier(void *group)
{
    return MPI_Barrier(((kpccl_mpi_group_t *)group)->node);
}

/* Called by kpccl_shm_comm_destroy: frees the node's communicator (unless
 * MPI is finalized already) and the group. */
static inline void kpccl_mpi_release(void *group)
{
    kpccl_mpi_group_t *g = (kpccl_mpi_group_t *)group;
    int finalized = 0;
    (void)MPI_Finalized(&finalized);
    if (!finalized) {
        (void)MPI_Comm_free(&g->node);
    }
    free(g);
}

/*
 * Creates the KPCCL communicator of the caller's node from `comm`
 * (collective over `comm`): splits `comm` by node with
 * MPI_Comm_split_type(MPI_COMM_TYPE_SHARED), then creates the communicator
 * of the node's ranks over that split, the local rank being the rank in it.
 * Windows allocated on `*out` span the caller's node; kpccl_shm_comm_query
 * tells the rank and size among the node's ranks.
 *
 * kpccl_shm_comm_destroy(*out) frees the node's MPI communicator and the
 * helper's memory; call it on every rank of the node before
 * MPI_Finalize (MPI_Comm_free is collective in MPI's terms). On failure
 * every rank of the node returns KPCCL_ERROR, `*out` is NULL, nothing is
 * left allocated, and kpccl_last_error() says why.
 */
static inline int kpccl_shm_comm_create_mpi(MPI_Comm comm, kpccl_shm_comm_h *out)
{
    kpccl_shm_oob_cb_t cbs;
    kpccl_mpi_group_t local;
    kpccl_mpi_group_t *group;
    kpccl_shm_comm_h made = NULL;
    int rank = 0, size = 0;

    if (out != NULL) {
        *out = NULL;
    }
    if (comm == MPI_COMM_NULL) {
        return kpccl_mpi_fail(KPCCL_ERR_INVALID_ARGUMENT, "kpccl_shm_comm_create_mpi: `comm` is MPI_COMM_NULL");
    }
    if (MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &local.node) != MPI_SUCCESS) {
        return kpccl_mpi_fail(KPCCL_ERR_OUT_OF_BAND, "kpccl_shm_comm_create_mpi: MPI_Comm_split_type failed");
    }
    (void)MPI_Comm_rank(local.node, &rank);
    (void)MPI_Comm_size(local.node, &size);
    cbs.oob_allgather = kpccl_mpi_allgather;
    cbs.oob_barrier = kpccl_mpi_barrier;
    group = (kpccl_mpi_group_t *)malloc(sizeof *group);
    if (group == NULL) {
        /* Take part all the same (with no place for the result), so that
         * every rank of the node fails instead of waiting for this one. */
        (void)kpccl_shm_comm_create(size, rank, KPCCL_LOCAL_RANK_AUTO, &cbs, &local, NULL);
        (void)MPI_Comm_free(&local.node);
        return kpccl_mpi_fail(KPCCL_ERR_NO_SPACE, "kpccl_shm_comm_create_mpi: out of memory");
    }
    *group = local;
    if (kpccl_shm_comm_create(size, rank, KPCCL_LOCAL_RANK_AUTO, &cbs, group, out == NULL ? NULL : &made) !=
        KPCCL_OK) {
        kpccl_mpi_release(group);
        if (out == NULL) /* the library named its own parameter: name ours */
            return kpccl_mpi_fail(KPCCL_ERR_INVALID_ARGUMENT, "kpccl_shm_comm_create_mpi: `out` is NULL");
        return KPCCL_ERROR;
    }
    if (kpccl_shm_comm_set_release(made, kpccl_mpi_release) != KPCCL_OK) {
        (void)kpccl_shm_comm_destroy(made);
        kpccl_mpi_release(group);
        return KPCCL_ERROR;
    }
    *out = made;
    return KPCCL_OK;
}

/* Ends the MPI job after a failed call: prints the caller's rank in
 * MPI_COMM_WORLD, the call and kpccl_last_error(), then MPI_Abort. */
static inline void kpccl_mpi_abort(const char *call)
{
    int rank = -1;
    (void)MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    fprintf(stderr, "rank %d: %s failed: %s\n", rank, call, kpccl_last_error());
    (void)MPI_Abort(MPI_COMM_WORLD, 1);
}

/* For programs to which every failure is fatal, as to the examples:
 * KPCCL_MPI_CHECK(kpccl_shm_win_fence(win)); */
#define KPCCL_MPI_CHECK(call)                                                                      \
    do {                                                                                           \
        if ((call) != KPCCL_OK)                                                                    \
            kpccl_mpi_abort(#call);                                                                \
    } while (0)

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* KPCCL_MPI_H */
