/*
 * ascend_window.c: Ascend device windows through the C API, on the host
 * simulator (KPCCL_ASCEND=sim), each rank on its own simulated device.
 *
 * - kpccl_shm_win_alloc_ex with memory_kind KPCCL_SHM_MEMORY_ASCEND gives
 *   every rank a device address for its own segment and, through
 *   kpccl_shm_win_query, for every peer's (its import);
 * - data written by a rank is seen by its peers after a fence (the
 *   simulator's device memory is host-mapped, so this test reads and writes
 *   it with plain loads and stores; on NPUs use aclrtMemcpy or kernels);
 * - an ACL failure on one rank fails every rank, with the ACL code in the
 *   failing rank's kpccl_last_error;
 * - ranks asking for host and device memory fail together;
 * - attr.pid_validation (or KPCCL_ASCEND_PID_VALIDATION=0) exports without
 *   a whitelist, and ranks that disagree on it fail together, as do ranks
 *   where one has another value in KPCCL_ASCEND_PID_VALIDATION;
 * - kpccl_shm_win_put / kpccl_shm_win_get reach any rank's segment of a
 *   device window (under the inference chip model too) and of a host window
 *   alike, refuse ranges outside it, and kpccl_shm_win_fence_stream orders
 *   them (a host window refuses a device stream);
 * - nothing is left in the simulator's registry afterwards.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <mpi.h>

#include "check.h"
#include "kpccl.h"

#define SEG 8192
#define SIM_DEVICES 8

static int me, n;
static MPI_Comm world;
static kpccl_shm_oob_cb_t cbs;
static char sim_dir[128];

static unsigned char pattern(int writer, size_t i)
{
    return (unsigned char)(writer * 29 + (int)(i % 251));
}

static void device_attr(kpccl_shm_win_attr_t *attr, int device)
{
    CHECK_OK(kpccl_shm_win_attr_init(attr));
    attr->memory_kind = KPCCL_SHM_MEMORY_ASCEND;
    attr->device = device;
}

static void handoff(kpccl_shm_comm_h comm, kpccl_shm_pid_validation_t validation)
{
    kpccl_shm_win_attr_t attr;
    void *base = NULL;
    kpccl_shm_win_h win = NULL;
    device_attr(&attr, me % SIM_DEVICES);
    attr.pid_validation = (int)validation;
    CHECK_OK(kpccl_shm_win_alloc_ex(SEG, comm, &attr, &base, &win));
    if (win == NULL) {
        return;
    }
    CHECK(base != NULL, "no device address for a %d-byte segment", SEG);
    for (size_t i = 0; i < SEG; i++) {
        ((unsigned char *)base)[i] = pattern(me, i);
    }
    CHECK_OK(kpccl_shm_win_fence(win));
    for (int r = 0; r < n; r++) {
        size_t size = 0;
        void *ptr = NULL;
        CHECK_OK(kpccl_shm_win_query(win, r, &size, &ptr));
        CHECK(size == SEG && ptr != NULL, "rank %d: size %zu, address %p", r, size, ptr);
        CHECK(r == me ? ptr == base : ptr != base, "rank %d's address %p (own %p)", r, ptr, base);
        if (ptr == NULL) {
            continue;
        }
        size_t wrong = 0;
        for (size_t i = 0; i < SEG; i++) {
            wrong += ((volatile unsigned char *)ptr)[i] != pattern(r, i);
        }
        CHECK(wrong == 0, "%zu bytes of rank %d's device segment differ", wrong, r);
    }
    /* Pairwise with the right neighbour, then the left (even ranks first). */
    int right = (me + 1) % n, left = (me + n - 1) % n;
    CHECK_OK(kpccl_shm_peer_fence(win, me % 2 == 0 ? right : left));
    CHECK_OK(kpccl_shm_peer_fence(win, me % 2 == 0 ? left : right));
    CHECK_OK(kpccl_shm_win_free(win));
}

/* Each rank puts its pattern into its right neighbour's segment, fences, and
 * gets its own segment (the left neighbour's pattern) and the right one's
 * back: on a device window (`device` >= 0) or a host window (`device` < 0). */
static void put_get(kpccl_shm_comm_h comm, int device)
{
    kpccl_shm_win_attr_t attr;
    void *base = NULL;
    kpccl_shm_win_h win = NULL;
    if (device >= 0) {
        device_attr(&attr, device);
    } else {
        CHECK_OK(kpccl_shm_win_attr_init(&attr));
    }
    CHECK_OK(kpccl_shm_win_alloc_ex(SEG, comm, &attr, &base, &win));
    if (win == NULL) {
        return;
    }
    int right = (me + 1) % n, left = (me + n - 1) % n;
    static unsigned char out[SEG], in[SEG];
    for (size_t i = 0; i < SEG; i++) {
        out[i] = pattern(me + 3, i);
    }
    CHECK_OK(kpccl_shm_win_put(win, right, 0, out, SEG));
    CHECK_OK(kpccl_shm_win_fence_stream(win, NULL));
    CHECK_OK(kpccl_shm_win_get(win, me, 0, in, SEG));
    size_t wrong = 0;
    for (size_t i = 0; i < SEG; i++) {
        wrong += in[i] != pattern(left + 3, i);
    }
    CHECK(wrong == 0, "%zu bytes put by rank %d differ (device %d)", wrong, left, device);
    CHECK_OK(kpccl_shm_win_get(win, right, 1, in, SEG - 1));
    CHECK(memcmp(in, out + 1, SEG - 1) == 0, "the bytes got back from rank %d differ", right);
    CHECK_FAILS(kpccl_shm_win_put(win, right, 1, out, SEG), "kpccl_shm_win_put");
    CHECK_FAILS(kpccl_shm_win_get(win, me, 0, NULL, 1), "kpccl_shm_win_get");
    CHECK_OK(kpccl_shm_win_put(win, me, SEG, NULL, 0));
    if (device < 0) {
        CHECK_FAILS(kpccl_shm_win_fence_stream(win, (void *)&attr), "kpccl_shm_win_fence_stream");
    }
    CHECK_OK(kpccl_shm_peer_fence_stream(win, me % 2 == 0 ? right : left, NULL));
    CHECK_OK(kpccl_shm_peer_fence_stream(win, me % 2 == 0 ? left : right, NULL));
    CHECK_OK(kpccl_shm_win_free(win));
}

/* Every rank fails to allocate with `attr`, and the error names `what`. */
static void fails_together(kpccl_shm_comm_h comm, const kpccl_shm_win_attr_t *attr, const char *what)
{
    void *base = (void *)&base;
    kpccl_shm_win_h win = (kpccl_shm_win_h)&base;
    CHECK_FAILS(kpccl_shm_win_alloc_ex(SEG, comm, attr, &base, &win), "kpccl_shm_win_alloc_ex");
    CHECK(base == NULL && win == NULL, "outputs not cleared");
    CHECK(strstr(kpccl_last_error(), what) != NULL, "the error does not say \"%s\"", what);
}

/* Creation fails on every rank: rank `bad` says `own`, every other rank
 * names rank `bad`, then says `others`. */
static void fails_blaming(kpccl_shm_comm_h comm, const kpccl_shm_win_attr_t *attr, int bad, const char *own,
                          const char *others)
{
    char want[128];
    if (me == bad) {
        snprintf(want, sizeof want, "%s", own);
    } else {
        snprintf(want, sizeof want, "rank %d %s", bad, others);
    }
    fails_together(comm, attr, want);
}

static void bad_device(kpccl_shm_comm_h comm)
{
    kpccl_shm_win_attr_t attr;
    int bad = n - 1;
    device_attr(&attr, me == bad ? 99 : me % SIM_DEVICES);
    fails_blaming(comm, &attr, bad, "aclrtSetDevice failed: ACL error 107001", "failed: aclrtSetDevice");
}

static void mixed_kinds(kpccl_shm_comm_h comm)
{
    kpccl_shm_win_attr_t attr;
    if (n < 2) {
        return;
    }
    device_attr(&attr, me % SIM_DEVICES);
    if (me == 0) {
        attr.memory_kind = KPCCL_SHM_MEMORY_HOST;
        attr.device = 0;
    }
    fails_together(comm, &attr, "memory kind");
}

static void mixed_validation(kpccl_shm_comm_h comm)
{
    kpccl_shm_win_attr_t attr;
    if (n < 2) {
        return;
    }
    device_attr(&attr, me % SIM_DEVICES);
    attr.pid_validation = me == n - 1 ? KPCCL_SHM_PID_VALIDATION_OFF : KPCCL_SHM_PID_VALIDATION_ON;
    fails_together(comm, &attr, "PID validation");
}

/* A value of KPCCL_ASCEND_PID_VALIDATION other than 0 or 1 is refused, on every rank. */
static void bad_validation_variable(kpccl_shm_comm_h comm)
{
    kpccl_shm_win_attr_t attr;
    int bad = n - 1;
    device_attr(&attr, me % SIM_DEVICES);
    if (me == bad) {
        setenv("KPCCL_ASCEND_PID_VALIDATION", "off", 1);
    }
    fails_blaming(comm, &attr, bad, "KPCCL_ASCEND_PID_VALIDATION=\"off\" is invalid", "refused its part");
    unsetenv("KPCCL_ASCEND_PID_VALIDATION");
}

/* The setting is for device memory only: a host window refuses it on every rank. */
static void host_memory_refuses_pid_validation(kpccl_shm_comm_h comm)
{
    kpccl_shm_win_attr_t attr;
    CHECK_OK(kpccl_shm_win_attr_init(&attr));
    attr.pid_validation = KPCCL_SHM_PID_VALIDATION_OFF;
    fails_together(comm, &attr, "pid_validation");
}

int main(int argc, char **argv)
{
    check_init(&argc, &argv, &me, &n, &cbs);
    world = MPI_COMM_WORLD;

    /* The simulator, with a registry of this job's own, named after rank 0's pid. */
    long mine = (long)getpid();
    long *pids = (long *)calloc((size_t)n, sizeof(long));
    if (pids == NULL || MPI_Allgather(&mine, 1, MPI_LONG, pids, 1, MPI_LONG, world) != MPI_SUCCESS) {
        fprintf(stderr, "rank %d: cannot gather the pids\n", me);
        return 1;
    }
    snprintf(sim_dir, sizeof sim_dir, "/dev/shm/ascend-sim-ctest-%ld", pids[0]);
    free(pids);
    setenv("KPCCL_ASCEND", "sim", 1);
    setenv("ASCEND_SIM_DIR", sim_dir, 1);

    kpccl_shm_comm_h comm = NULL;
    CHECK_OK(kpccl_shm_comm_create(n, me, me, &cbs, &world, &comm));
    if (comm != NULL) {
        handoff(comm, KPCCL_SHM_PID_VALIDATION_DEFAULT);
        bad_device(comm);
        mixed_kinds(comm);
        handoff(comm, KPCCL_SHM_PID_VALIDATION_ON);
        /* Keys without a PID whitelist, by attribute and by environment. */
        handoff(comm, KPCCL_SHM_PID_VALIDATION_OFF);
        setenv("KPCCL_ASCEND_PID_VALIDATION", "0", 1);
        handoff(comm, KPCCL_SHM_PID_VALIDATION_DEFAULT);
        mixed_validation(comm);
        unsetenv("KPCCL_ASCEND_PID_VALIDATION");
        bad_validation_variable(comm);
        host_memory_refuses_pid_validation(comm);
        put_get(comm, me % SIM_DEVICES);
        put_get(comm, -1);
        setenv("ASCEND_SIM_CHIP", "inference", 1);
        put_get(comm, me % SIM_DEVICES);
        unsetenv("ASCEND_SIM_CHIP");
        CHECK_OK(kpccl_shm_comm_destroy(comm));
    }
    MPI_Barrier(world);
    struct stat st;
    CHECK(stat(sim_dir, &st) != 0, "simulator state left in %s", sim_dir);
    return check_finish(world);
}
