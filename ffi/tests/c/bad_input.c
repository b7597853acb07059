/*
 * bad_input.c: every entry point refuses what it must (NULL pointers, ranks
 * out of range, freed handles — even once new ones were made — and foreign
 * ones, bad attributes) with KPCCL_ERROR and a kpccl_last_error naming it,
 * leaves NULL in its outputs and nothing allocated, and, in a collective, one rank's bad argument fails the call
 * on every rank (none waits). Good calls still work afterwards.
 *
 * The rank that misbehaves in the collective cases is the last one.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mpi.h>

#include "check.h"
#include "kpccl.h"

static kpccl_shm_oob_cb_t cbs;
static MPI_Comm world;
static int me, n, bad;

static kpccl_shm_comm_h good_comm(void)
{
    /* The callbacks are only read: a const table is taken as it is (C++
     * refuses to drop the qualifier; C warns, an error under -Werror). */
    const kpccl_shm_oob_cb_t *read_only = &cbs;
    kpccl_shm_comm_h comm = NULL;
    CHECK_OK(kpccl_shm_comm_create(n, me, me, read_only, &world, &comm));
    return comm;
}

static void library(void)
{
    CHECK(kpccl_version() == KPCCL_VERSION, "library %d, header %d", kpccl_version(), KPCCL_VERSION);
    CHECK(kpccl_last_error() != NULL, "kpccl_last_error is never NULL");
    CHECK_FAILS(kpccl_log_error(NULL), "kpccl_log_error");
    CHECK_OK(kpccl_log_error("bad_input: a test message, not an error"));
    kpccl_error("bad_input: kpccl_error formats %s %d", "like printf", 42);
    CHECK_FAILS(kpccl_shm_win_attr_init(NULL), "kpccl_shm_win_attr_init");

    kpccl_shm_oob_cb_t run;
    void *group = NULL;
    int rank = -1, nranks = -1;
    CHECK_FAILS(kpccl_run_oob(NULL, &group, &rank, &nranks), "kpccl_run_oob");
    CHECK_FAILS(kpccl_run_oob(&run, NULL, &rank, &nranks), "kpccl_run_oob");
    CHECK_FAILS(kpccl_run_oob(&run, &group, NULL, &nranks), "kpccl_run_oob");
    CHECK_FAILS(kpccl_run_oob(&run, &group, &rank, NULL), "kpccl_run_oob");
#ifdef KPCCL_NO_MPI
    CHECK_OK(kpccl_run_oob(&run, &group, &rank, &nranks));
    CHECK(rank == me && nranks == n, "kpccl_run_oob says rank %d of %d", rank, nranks);
    /* A C enum holds any int: one that is no datatype fails the call (every
     * rank makes it, so none waits), not the process. */
    {
        long mine = me, all[8] = {0};
        CHECK(run.oob_allgather(&mine, all, 1, group, (kpccl_shm_datatype_t)-1) != 0, "datatype -1");
        CHECK(run.oob_allgather(&mine, all, 1, group, (kpccl_shm_datatype_t)7) != 0, "datatype 7");
        CHECK(all[0] == 0, "nothing gathered: %ld", all[0]);
        CHECK(run.oob_allgather(&mine, all, 1, group, KPCCL_SHM_DATATYPE_LONG) == 0 && all[n - 1] == n - 1,
              "a good datatype still gathers");
    }
#else
    if (getenv("KPCCL_RUN_SOCKET") == NULL) {
        CHECK_FAILS(kpccl_run_oob(&run, &group, &rank, &nranks), "kpccl_run_oob"); /* not under kpccl-run */
    }
#endif
}

/* Local refusals: every rank makes the same bad call, so none joins a collective. */
static void comm_create_local(void)
{
    kpccl_shm_comm_h comm = (kpccl_shm_comm_h)&comm;
    CHECK_FAILS(kpccl_shm_comm_create(n, me, me, NULL, &world, &comm), "kpccl_shm_comm_create");
    CHECK(comm == NULL, "a failed create leaves NULL");

    kpccl_shm_oob_cb_t half = cbs;
    half.oob_allgather = NULL;
    CHECK_FAILS(kpccl_shm_comm_create(n, me, me, &half, &world, &comm), "kpccl_shm_comm_create");
    half = cbs;
    half.oob_barrier = NULL;
    CHECK_FAILS(kpccl_shm_comm_create(n, me, me, &half, &world, &comm), "kpccl_shm_comm_create");
    CHECK_FAILS(kpccl_shm_comm_create(0, me, me, &cbs, &world, &comm), "kpccl_shm_comm_create");
    CHECK_FAILS(kpccl_shm_comm_create(-1, me, me, &cbs, &world, &comm), "kpccl_shm_comm_create");
    CHECK_FAILS(kpccl_shm_comm_create(1 << 20, me, me, &cbs, &world, &comm), "kpccl_shm_comm_create");
    CHECK(comm == NULL, "a failed create leaves NULL");
}

/* Collective refusals: the last rank alone is wrong; every rank fails. */
static void comm_create_collective(void)
{
    kpccl_shm_comm_h comm = NULL;
    int rc;

    rc = kpccl_shm_comm_create(n, me == bad ? n : me, me, &cbs, &world, &comm);
    CHECK(rc == KPCCL_ERROR && comm == NULL, "rank %d out of range on rank %d: rc %d", n, bad, rc);
    if (me == bad) {
        CHECK(strstr(kpccl_last_error(), "is out of range: the communicator has ranks 0 to") != NULL,
              "the culprit says what");
    } else {
        CHECK(strstr(kpccl_last_error(), "passed an invalid argument") != NULL, "the peers say who");
    }
    CHECK(kpccl_last_error_code() == KPCCL_ERR_INVALID_ARGUMENT, "every rank: class %d",
          (int)kpccl_last_error_code());
    rc = kpccl_shm_comm_create(n, me == bad ? -1 : me, me, &cbs, &world, &comm);
    CHECK(rc == KPCCL_ERROR && comm == NULL, "rank -1 on rank %d: rc %d", bad, rc);
    rc = kpccl_shm_comm_create(n, me, me == bad ? n + 5 : me, &cbs, &world, &comm);
    CHECK(rc == KPCCL_ERROR && comm == NULL, "local_rank out of range on rank %d: rc %d", bad, rc);
    rc = kpccl_shm_comm_create(n, me, me, &cbs, &world, me == bad ? NULL : &comm);
    CHECK(rc == KPCCL_ERROR && comm == NULL, "NULL comm on rank %d: rc %d", bad, rc);
    {
        /* A NULL barrier on one rank: it still has its allgather, so it takes
         * part refused rather than leave the others inside theirs. */
        kpccl_shm_oob_cb_t half = cbs;
        half.oob_barrier = NULL;
        rc = kpccl_shm_comm_create(n, me, me, me == bad ? &half : &cbs, &world, &comm);
        CHECK(rc == KPCCL_ERROR && comm == NULL, "NULL barrier on rank %d: rc %d", bad, rc);
        CHECK(strstr(kpccl_last_error(), me == bad ? "`oob->oob_barrier` is NULL" : "passed an invalid argument") != NULL,
              "each rank says why: %s", kpccl_last_error());
    }
    if (n > 1) {
        rc = kpccl_shm_comm_create(n, me == bad ? 0 : me, me, &cbs, &world, &comm);
        CHECK(rc == KPCCL_ERROR && comm == NULL, "two ranks 0: rc %d", rc);
        /* An invalid nranks on one rank: it still takes part, refused. */
        rc = kpccl_shm_comm_create(me == bad ? 0 : n, me, me, &cbs, &world, &comm);
        CHECK(rc == KPCCL_ERROR && comm == NULL, "nranks 0 on rank %d: rc %d", bad, rc);
        CHECK(strstr(kpccl_last_error(), me == bad ? "nranks 0 is out of range" : "passed an invalid argument") != NULL,
              "each rank says why: %s", kpccl_last_error());
        rc = kpccl_shm_comm_create(me == bad ? 1 << 20 : n, me, me, &cbs, &world, &comm);
        CHECK(rc == KPCCL_ERROR && comm == NULL, "nranks 2^20 on rank %d: rc %d", bad, rc);
        /* A larger nranks on one rank. */
        rc = kpccl_shm_comm_create(me == bad ? n + 1 : n, me, me, &cbs, &world, &comm);
        CHECK(rc == KPCCL_ERROR && comm == NULL, "nranks %d on rank %d: rc %d", n + 1, bad, rc);
        /* A smaller one on rank 0: the callback gathers more records than that
         * rank's count (the library gives the first allgather room for them). */
        rc = kpccl_shm_comm_create(me == 0 ? n - 1 : n, me, KPCCL_LOCAL_RANK_AUTO, &cbs, &world, &comm);
        CHECK(rc == KPCCL_ERROR && comm == NULL, "nranks %d on rank 0: rc %d", n - 1, rc);
        /* Rank 0 finds a peer's count among its records, or (with 2 ranks)
         * only its own, and then the records past them. */
        if (me == 0) {
            CHECK(strstr(kpccl_last_error(), "on the rank count") != NULL ||
                      strstr(kpccl_last_error(), "ranks answered the out-of-band allgather") != NULL,
                  "rank 0 says its count is wrong: %s", kpccl_last_error());
        }
        /* A smaller one on every rank: the last is then out of range. */
        rc = kpccl_shm_comm_create(n - 1, me, KPCCL_LOCAL_RANK_AUTO, &cbs, &world, &comm);
        CHECK(rc == KPCCL_ERROR && comm == NULL, "nranks %d on every rank: rc %d", n - 1, rc);
        CHECK(strstr(kpccl_last_error(), me == n - 1 ? "is out of range" : "ranks answered the out-of-band allgather") !=
                  NULL,
              "each rank says why: %s", kpccl_last_error());
        CHECK(kpccl_last_error_code() == KPCCL_ERR_INVALID_ARGUMENT, "an argument error: class %d",
              (int)kpccl_last_error_code());
    }
    /* A larger one on every rank (a job's count given with a node's group):
     * records are missing, and every rank says so, not that a library
     * version differs. */
    {
        char answered[96];
        snprintf(answered, sizeof answered, "nranks is %d, but only %d rank%s answered the out-of-band allgather",
                 n + 1, n, n == 1 ? "" : "s");
        rc = kpccl_shm_comm_create(n + 1, me, KPCCL_LOCAL_RANK_AUTO, &cbs, &world, &comm);
        CHECK(rc == KPCCL_ERROR && comm == NULL, "nranks %d on every rank: rc %d", n + 1, rc);
        CHECK(strstr(kpccl_last_error(), answered) != NULL, "every rank says why: %s", kpccl_last_error());
        CHECK(kpccl_last_error_code() == KPCCL_ERR_INVALID_ARGUMENT, "an argument error: class %d",
              (int)kpccl_last_error_code());
    }
    if (me != bad) {
        CHECK(strstr(kpccl_last_error(), "kpccl_shm_comm_create") != NULL, "peers say why too");
    }
    {
        /* Callbacks at an odd address on one rank (a member of a packed
         * struct) are read where they are: refused, that rank stayed out of
         * the allgather and the others waited in it for ever. */
        union {
            kpccl_shm_oob_cb_t align;
            unsigned char bytes[sizeof(kpccl_shm_oob_cb_t) + 1];
        } room;
        const kpccl_shm_oob_cb_t *odd = (const kpccl_shm_oob_cb_t *)(void *)(room.bytes + 1);
        memcpy(room.bytes + 1, &cbs, sizeof cbs);
        rc = kpccl_shm_comm_create(n, me, me, me == bad ? odd : &cbs, &world, &comm);
        CHECK(rc == KPCCL_OK && comm != NULL, "callbacks at an odd address on rank %d: rc %d", bad, rc);
        if (comm != NULL) {
            CHECK_OK(kpccl_shm_comm_destroy(comm));
        }
    }
    /* The collectives still line up: a good one works. */
    comm = good_comm();
    CHECK_OK(kpccl_shm_comm_destroy(comm));
}

static void comm_destroy(void)
{
    int local = 0;
    CHECK_FAILS(kpccl_shm_comm_destroy(NULL), "kpccl_shm_comm_destroy");
    CHECK_FAILS(kpccl_shm_comm_destroy((kpccl_shm_comm_h)&local), "kpccl_shm_comm_destroy");
    kpccl_shm_comm_h comm = good_comm();
    CHECK_OK(kpccl_shm_comm_destroy(comm));
    CHECK_FAILS(kpccl_shm_comm_destroy(comm), "kpccl_shm_comm_destroy"); /* twice */
}

static void win_alloc(void)
{
    kpccl_shm_comm_h comm = good_comm();
    void *base = &base;
    kpccl_shm_win_h win = (kpccl_shm_win_h)&win;
    int rc, local = 0;

    /* Local: a bad communicator on every rank. */
    CHECK_FAILS(kpccl_shm_win_alloc(64, NULL, &base, &win), "kpccl_shm_win_alloc");
    CHECK(base == NULL && win == NULL, "a failed alloc leaves NULL");
    CHECK_FAILS(kpccl_shm_win_alloc(64, (kpccl_shm_comm_h)&local, &base, &win), "kpccl_shm_win_alloc");

    /* Collective: one rank wrong, all fail. */
    rc = kpccl_shm_win_alloc(64, comm, me == bad ? NULL : &base, &win);
    CHECK(rc == KPCCL_ERROR && win == NULL, "NULL baseptr on rank %d: rc %d", bad, rc);
    if (me == bad) {
        CHECK(strstr(kpccl_last_error(), "`baseptr` is NULL") != NULL, "the culprit says what");
    } else {
        CHECK(strstr(kpccl_last_error(), "passed an invalid argument") != NULL, "the peers say who");
    }
    rc = kpccl_shm_win_alloc(64, comm, &base, me == bad ? NULL : &win);
    CHECK(rc == KPCCL_ERROR && base == NULL, "NULL win on rank %d: rc %d", bad, rc);
    rc = kpccl_shm_win_alloc(me == bad ? SIZE_MAX : 64, comm, &base, &win);
    CHECK(rc == KPCCL_ERROR && win == NULL && base == NULL, "SIZE_MAX on rank %d: rc %d", bad, rc);
    /* SIZE_MAX/2 fits an address space but no segment file (an off_t):
       every rank names the rank that asked, not the creator. */
    rc = kpccl_shm_win_alloc(me == bad ? SIZE_MAX / 2 : 64, comm, &base, &win);
    CHECK(rc == KPCCL_ERROR && win == NULL, "SIZE_MAX/2 on rank %d: rc %d", bad, rc);
    CHECK(kpccl_last_error_code() == KPCCL_ERR_INVALID_ARGUMENT, "SIZE_MAX/2: class %d", (int)kpccl_last_error_code());
    CHECK(strstr(kpccl_last_error(), "kpccl_shm_win_alloc") != NULL, "every rank says why");
    {
        char asked[64];
        snprintf(asked, sizeof asked, "rank %d asked for %zu bytes", bad, SIZE_MAX / 2);
        CHECK(strstr(kpccl_last_error(), asked) != NULL, "every rank names rank %d: %s", bad, kpccl_last_error());
        CHECK(strstr(kpccl_last_error(), "more than a window can span on this system") != NULL, "and why: %s",
              kpccl_last_error());
    }

    /* Still in step: size 0 is legal, and gives no base. */
    base = &base;
    CHECK_OK(kpccl_shm_win_alloc(me == bad ? 0 : 64, comm, &base, &win));
    CHECK(me == bad ? base == NULL : base != NULL, "base %p", base);
    CHECK_OK(kpccl_shm_win_free(win));

    /* A window outlives its communicator; a destroyed communicator is refused. */
    kpccl_shm_win_h survivor = NULL;
    CHECK_OK(kpccl_shm_win_alloc(64, comm, &base, &survivor));
    CHECK_OK(kpccl_shm_comm_destroy(comm));
    CHECK_FAILS(kpccl_shm_win_alloc(64, comm, &base, &win), "kpccl_shm_win_alloc");
    CHECK(win == NULL, "a failed alloc leaves NULL");
    CHECK_OK(kpccl_shm_win_fence(survivor));
    CHECK_OK(kpccl_shm_win_free(survivor));
}

static int attr_fails(kpccl_shm_comm_h comm, const kpccl_shm_win_attr_t *attr, const kpccl_shm_win_attr_t *others)
{
    void *base = NULL;
    kpccl_shm_win_h win = NULL;
    int rc = kpccl_shm_win_alloc_ex(4096, comm, me == bad ? attr : others, &base, &win);
    if (rc == KPCCL_OK) {
        kpccl_shm_win_free(win);
        return 0;
    }
    return win == NULL && base == NULL;
}

/* `good` with one field changed on the bad rank: every rank's allocation fails. */
#define BAD_FIELD(field, value, what)              \
    do {                                           \
        a = good;                                  \
        a.field = (value);                         \
        CHECK(attr_fails(comm, &a, &good), what);  \
    } while (0)

static void win_alloc_ex(void)
{
    kpccl_shm_comm_h comm = good_comm();
    kpccl_shm_win_attr_t good, a;
    CHECK_OK(kpccl_shm_win_attr_init(&good));

    memset(&a, 0, sizeof a);
    CHECK(attr_fails(comm, &a, &good), "an attribute never initialized");
    BAD_FIELD(layout, 7, "layout 7");
    BAD_FIELD(memory_kind, KPCCL_SHM_MEMORY_ASCEND, "Ascend memory in a host-only build");
    BAD_FIELD(memory_kind, 99, "memory kind 99");
    BAD_FIELD(timeout_ms, -5, "timeout -5");
    BAD_FIELD(spin_count, -7, "spin count -7");
    BAD_FIELD(device, 3, "device 3");
    BAD_FIELD(reserve, 3, "reserve 3");
    BAD_FIELD(barrier, -1, "barrier -1");
    a = good;
    a.alignment = 3;
    CHECK(attr_fails(comm, &a, &a), "alignment 3 everywhere");
    BAD_FIELD(alignment, (size_t)1 << 40, "alignment beyond the page size");
    if (n > 1) {
        BAD_FIELD(alignment, 4096, "alignments differ");
        BAD_FIELD(layout, KPCCL_SHM_LAYOUT_ALIGNED, "layouts differ");
    }

    /* Good attributes work, and do what they say. */
    void *base = NULL;
    kpccl_shm_win_h win = NULL;
    a = good;
    a.layout = KPCCL_SHM_LAYOUT_ALIGNED;
    a.timeout_ms = 30000;
    a.spin_count = 100;
    CHECK_OK(kpccl_shm_win_alloc_ex(100, comm, &a, &base, &win));
    CHECK(base != NULL && (uintptr_t)base % 4096 == 0, "aligned layout: base %p on a page", base);
    CHECK_OK(kpccl_shm_win_free(win));
    a = good;
    a.alignment = 1024;
    CHECK_OK(kpccl_shm_win_alloc_ex(100, comm, &a, &base, &win));
    CHECK(base != NULL && (uintptr_t)base % 1024 == 0, "alignment 1024: base %p", base);
    CHECK_OK(kpccl_shm_win_free(win));
    a = good; /* per rank: one rank's flat barrier makes the window's */
    a.barrier = me == 0 ? KPCCL_SHM_BARRIER_FLAT : KPCCL_SHM_BARRIER_DISSEMINATION;
    a.reserve = me % 2 ? KPCCL_SHM_RESERVE_LAZY : KPCCL_SHM_RESERVE_EAGER;
    CHECK_OK(kpccl_shm_win_alloc_ex(100, comm, &a, &base, &win));
    CHECK_OK(kpccl_shm_win_fence(win));
    CHECK_OK(kpccl_shm_win_free(win));
    CHECK_OK(kpccl_shm_win_alloc_ex(100, comm, NULL, &base, &win)); /* NULL: the defaults */
    CHECK_OK(kpccl_shm_win_free(win));
    CHECK_OK(kpccl_shm_comm_destroy(comm));
}

static void win_calls(void)
{
    kpccl_shm_comm_h comm = good_comm();
    void *base = NULL;
    kpccl_shm_win_h win = NULL;
    size_t size = 0;
    int local[4] = {0};
    kpccl_shm_win_h foreign = (kpccl_shm_win_h)local;
    CHECK_OK(kpccl_shm_win_alloc(256, comm, &base, &win));
    if (win == NULL) {
        return;
    }

    CHECK_FAILS(kpccl_shm_peer_fence(NULL, 0), "kpccl_shm_peer_fence");
    CHECK_FAILS(kpccl_shm_peer_fence(foreign, 0), "kpccl_shm_peer_fence");
    CHECK_FAILS(kpccl_shm_peer_fence((kpccl_shm_win_h)comm, 0), "kpccl_shm_peer_fence");
    CHECK_FAILS(kpccl_shm_peer_fence(win, -1), "kpccl_shm_peer_fence");
    CHECK_FAILS(kpccl_shm_peer_fence(win, n), "kpccl_shm_peer_fence");
    CHECK(strstr(kpccl_last_error(), "remote_rank") != NULL, "the message names the argument");
    CHECK_OK(kpccl_shm_peer_fence(win, me)); /* with oneself: at once */

    CHECK_FAILS(kpccl_shm_peer_signal(NULL, 0), "kpccl_shm_peer_signal");
    CHECK_FAILS(kpccl_shm_peer_signal(foreign, 0), "kpccl_shm_peer_signal");
    CHECK_FAILS(kpccl_shm_peer_signal(win, n), "kpccl_shm_peer_signal");
    CHECK(strstr(kpccl_last_error(), "out of range") != NULL, "the message says why: %s", kpccl_last_error());
    CHECK_FAILS(kpccl_shm_peer_wait(NULL, 0), "kpccl_shm_peer_wait");
    CHECK_FAILS(kpccl_shm_peer_wait(foreign, 0), "kpccl_shm_peer_wait");
    CHECK_FAILS(kpccl_shm_peer_wait(win, -1), "kpccl_shm_peer_wait");
    CHECK_OK(kpccl_shm_peer_signal(win, me)); /* with oneself: nothing to do */
    CHECK_OK(kpccl_shm_peer_wait(win, me));
    int flag = 7;
    CHECK_FAILS(kpccl_shm_peer_test(NULL, 0, &flag), "kpccl_shm_peer_test");
    CHECK(flag == 0, "a failed test clears its flag: %d", flag);
    CHECK_FAILS(kpccl_shm_peer_test(foreign, 0, &flag), "kpccl_shm_peer_test");
    CHECK_FAILS(kpccl_shm_peer_test(win, n, &flag), "kpccl_shm_peer_test");
    CHECK(strstr(kpccl_last_error(), "out of range") != NULL, "the message says why: %s", kpccl_last_error());
    CHECK_FAILS(kpccl_shm_peer_test(win, 0, NULL), "kpccl_shm_peer_test");
    CHECK(strstr(kpccl_last_error(), "flag") != NULL, "the message names the argument: %s", kpccl_last_error());
    flag = 7;
    CHECK_OK(kpccl_shm_peer_test(win, me, &flag)); /* with oneself: as a wait, at once */
    CHECK(flag == 1, "testing oneself sets 1: %d", flag);

    CHECK_FAILS(kpccl_shm_win_fence(NULL), "kpccl_shm_win_fence");
    CHECK_FAILS(kpccl_shm_win_fence(foreign), "kpccl_shm_win_fence");

    CHECK_FAILS(kpccl_shm_win_query(NULL, 0, &size, &base), "kpccl_shm_win_query");
    CHECK_FAILS(kpccl_shm_win_query(foreign, 0, &size, &base), "kpccl_shm_win_query");
    CHECK_FAILS(kpccl_shm_win_query(win, -1, &size, &base), "kpccl_shm_win_query");
    CHECK_FAILS(kpccl_shm_win_query(win, n, &size, &base), "kpccl_shm_win_query");
    CHECK_FAILS(kpccl_shm_win_query(win, 0, NULL, &base), "kpccl_shm_win_query");
    CHECK_FAILS(kpccl_shm_win_query(win, 0, &size, NULL), "kpccl_shm_win_query");
    CHECK_OK(kpccl_shm_win_query(win, n - 1, &size, &base));
    CHECK(size == 256, "rank %d's size %zu", n - 1, size);

    CHECK_FAILS(kpccl_shm_win_free(NULL), "kpccl_shm_win_free");
    CHECK_FAILS(kpccl_shm_win_free(foreign), "kpccl_shm_win_free");
    CHECK_FAILS(kpccl_shm_win_free((kpccl_shm_win_h)comm), "kpccl_shm_win_free");
    CHECK_FAILS(kpccl_shm_comm_destroy((kpccl_shm_comm_h)win), "kpccl_shm_comm_destroy");
    CHECK_OK(kpccl_shm_win_fence(win));
    CHECK_OK(kpccl_shm_win_free(win));

    /* A freed window is refused everywhere. */
    CHECK_FAILS(kpccl_shm_win_free(win), "kpccl_shm_win_free");
    CHECK_FAILS(kpccl_shm_peer_fence(win, 0), "kpccl_shm_peer_fence");
    CHECK_FAILS(kpccl_shm_peer_signal(win, 0), "kpccl_shm_peer_signal");
    CHECK_FAILS(kpccl_shm_peer_wait(win, 0), "kpccl_shm_peer_wait");
    CHECK_FAILS(kpccl_shm_peer_test(win, 0, &flag), "kpccl_shm_peer_test");
    CHECK_FAILS(kpccl_shm_win_fence(win), "kpccl_shm_win_fence");
    CHECK_FAILS(kpccl_shm_win_query(win, 0, &size, &base), "kpccl_shm_win_query");
    CHECK(strstr(kpccl_last_error(), "was freed (stale handle)") != NULL, "the message says why");
    CHECK_OK(kpccl_shm_comm_destroy(comm));
}

/*
 * The last rank frees while rank 0 still waits for it in a peer fence (a
 * fence count that does not match; no timeout is set): nobody hangs. Rank
 * 0's fence fails naming the rank that left, so does every free (the window
 * was abandoned), and the memory is released all the same.
 */
static void unmatched_free(void)
{
    if (n < 2) {
        return;
    }
    kpccl_shm_comm_h comm = good_comm();
    void *base = NULL;
    kpccl_shm_win_h win = NULL;
    CHECK_OK(kpccl_shm_win_alloc(64, comm, &base, &win));
    if (win == NULL) {
        return;
    }
    char left[64];
    snprintf(left, sizeof left, "rank %d left the window", bad);
    if (me == 0) {
        CHECK_FAILS(kpccl_shm_peer_fence(win, bad), "kpccl_shm_peer_fence");
        CHECK(strstr(kpccl_last_error(), left) != NULL, "the fence names the rank that left");
        CHECK(kpccl_last_error_code() == KPCCL_ERR_DEAD_PEER, "class %d", (int)kpccl_last_error_code());
    }
    CHECK_FAILS(kpccl_shm_win_free(win), "kpccl_shm_win_free");
    CHECK(strstr(kpccl_last_error(), left) != NULL, "every free names the rank that left");
    CHECK_OK(kpccl_shm_comm_destroy(comm));
}

/* The call failed as a freed handle's call must: naming the function and the staleness. */
#define CHECK_STALE(call, fn)                                                                 \
    do {                                                                                      \
        CHECK_FAILS(call, fn);                                                                \
        CHECK(strstr(kpccl_last_error(), "was freed (stale handle)") != NULL, "%s", #call);   \
    } while (0)

/*
 * A freed handle stays refused after new objects are made (where a heap
 * allocator would hand its address to the next one), and its successor is
 * untouched: its data survives and its fences work.
 */
static void stale_handles(void)
{
    kpccl_shm_comm_h comm = good_comm(), old_comm = good_comm(), again = NULL;
    kpccl_shm_win_h old = NULL, win = NULL, none = NULL;
    unsigned char *base = NULL;
    void *peer = NULL, *other = NULL;
    size_t size = 0;
    kpccl_shm_comm_info_t info;
    int ranks[1] = {-1};

    CHECK_OK(kpccl_shm_comm_destroy(old_comm));
    CHECK_OK(kpccl_shm_win_alloc(64, comm, (void **)&base, &old));
    CHECK_OK(kpccl_shm_win_free(old));
    CHECK_OK(kpccl_shm_win_alloc(64, comm, (void **)&base, &win));
    again = good_comm();
    CHECK(win != old && again != old_comm, "new handles %p %p, freed %p %p", (void *)win, (void *)again,
          (void *)old, (void *)old_comm);
    if (win == NULL || base == NULL) {
        return;
    }
    memset(base, me + 1, 64);

    CHECK_STALE(kpccl_shm_peer_fence(old, me), "kpccl_shm_peer_fence");
    CHECK_STALE(kpccl_shm_win_fence(old), "kpccl_shm_win_fence");
    CHECK_STALE(kpccl_shm_peer_signal(old, me), "kpccl_shm_peer_signal");
    CHECK_STALE(kpccl_shm_peer_wait(old, me), "kpccl_shm_peer_wait");
    CHECK_STALE(kpccl_shm_win_query(old, me, &size, &other), "kpccl_shm_win_query");
    CHECK_STALE(kpccl_shm_win_free(old), "kpccl_shm_win_free");
    CHECK_STALE(kpccl_shm_comm_query(old_comm, &info), "kpccl_shm_comm_query");
    CHECK_STALE(kpccl_shm_comm_node_ranks(old_comm, ranks, 1), "kpccl_shm_comm_node_ranks");
    int cpus = -1;
    CHECK_STALE(kpccl_shm_comm_node_cpus(old_comm, &cpus), "kpccl_shm_comm_node_cpus");
    CHECK_STALE(kpccl_shm_win_alloc(64, old_comm, &other, &none), "kpccl_shm_win_alloc"); /* every rank: no collective */
    CHECK_STALE(kpccl_shm_comm_destroy(old_comm), "kpccl_shm_comm_destroy");
    CHECK(size == 0 && ranks[0] == -1 && cpus == -1 && none == NULL, "refused calls write nothing");

    /* The successor: every rank's data crosses the fence intact. */
    CHECK_OK(kpccl_shm_peer_fence(win, me));
    CHECK_OK(kpccl_shm_win_fence(win));
    int left = (me + n - 1) % n;
    CHECK_OK(kpccl_shm_win_query(win, left, &size, &peer));
    CHECK(size == 64 && peer != NULL && ((unsigned char *)peer)[0] == left + 1 && ((unsigned char *)peer)[63] == left + 1,
          "rank %d's data after the stale calls", left);
    CHECK_OK(kpccl_shm_win_fence(win));
    CHECK_OK(kpccl_shm_win_free(win));
    CHECK_OK(kpccl_shm_comm_query(again, &info));
    CHECK(info.rank == me && info.nranks == n, "the new communicator answers: rank %d of %d", info.rank, info.nranks);
    CHECK_OK(kpccl_shm_comm_destroy(again));
    CHECK_OK(kpccl_shm_comm_destroy(comm));
}

int main(int argc, char **argv)
{
    check_init(&argc, &argv, &me, &n, &cbs);
    world = MPI_COMM_WORLD;
    bad = n - 1;

    library();
    comm_create_local();
    comm_create_collective();
    comm_destroy();
    win_alloc();
    win_alloc_ex();
    win_calls();
    unmatched_free();
    stale_handles();
    return check_finish(world);
}
