/*
 * mpi_bench.c: Open MPI's counterparts of kpccl's fences and windows, timed
 * with the same protocol (bench.h), under mpirun.
 *
 *   mpi_bench fences BUDGET OUT LATE_MS      (BUDGET: see bench.h)
 *   mpi_bench create REPS_SMALL:REPS_MID:REPS_LARGE OUT SIZE...
 *
 * fences: MPI_Barrier (mpi/barrier/N); MPI_Win_fence on a window from
 * MPI_Win_allocate_shared (mpi/winfence/N); a PSCW epoch
 * (post/start/complete/wait) between ranks 2i and 2i+1 (mpi/pscw/N); the
 * CPU the other ranks use while rank 0 arrives LATE_MS late at a
 * MPI_Win_fence (mpi/idle/N, percent of the wait; skipped when LATE_MS is 0).
 * create: MPI_Win_allocate_shared of SIZE bytes in all (SIZE/N per rank)
 * followed by MPI_Win_free (mpi/create/N/SIZE, ns); and the same with every
 * rank writing one byte per page of its own segment before the free
 * (mpi/create-touch/N/SIZE): the cost of memory that is actually used.
 * Then the same two through kpccl's C API, with out-of-band callbacks over
 * MPI as KPCCL programs usually have them (kpccl-mpi/create…/N/SIZE; with
 * KPCCL_RESERVE=lazy, kpccl-mpi-lazy/create…/N/SIZE), so
 * both libraries' creations run over the same collectives.
 */
#include "bench.h"

#include "mpi_oob.h"

struct ctx {
    int rank, nranks, peer;
    MPI_Win win;
    MPI_Group pair;
};

static uint64_t agree(void *p, uint64_t mine)
{
    (void)p;
    MPI_Bcast(&mine, 1, MPI_UINT64_T, 0, MPI_COMM_WORLD);
    return mine;
}

static int barrier_op(void *p)
{
    (void)p;
    return MPI_Barrier(MPI_COMM_WORLD);
}

static int winfence_op(void *p)
{
    struct ctx *c = p;
    return MPI_Win_fence(0, c->win);
}

static int pscw_op(void *p)
{
    struct ctx *c = p;
    if (c->peer >= c->nranks)
        return 0;
    return MPI_Win_post(c->pair, 0, c->win) || MPI_Win_start(c->pair, 0, c->win) || MPI_Win_complete(c->win) ||
           MPI_Win_wait(c->win);
}

static int report(struct ctx *c, const char *out, const char *key, const char *unit, const double *mine,
                  uint64_t k)
{
    double *all = calloc((size_t)c->nranks * k, sizeof *all);
    if (!all)
        return -1;
    int rc = MPI_Allgather(mine, (int)k, MPI_DOUBLE, all, (int)k, MPI_DOUBLE, MPI_COMM_WORLD);
    if (!rc && c->rank == 0)
        rc = result_append(out, key, unit, all, c->nranks, k);
    free(all);
    return rc;
}

static int fences(struct ctx *c, const budget_t *b, const char *out, int late_ms)
{
    void *base;
    char key[128];
    double *s = calloc(b->samples, sizeof *s);
    if (!s || MPI_Win_allocate_shared(4096, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &base, &c->win))
        return -1;
    MPI_Group world;
    MPI_Comm_group(MPI_COMM_WORLD, &world);
    c->peer = c->rank ^ 1;
    int peer = c->peer < c->nranks ? c->peer : c->rank;
    MPI_Group_incl(world, 1, &peer, &c->pair);

    long n;
    if ((n = budget_sample(b, agree, barrier_op, c, s)) < 0)
        return -1;
    snprintf(key, sizeof key, "mpi/barrier/%d", c->nranks);
    if (report(c, out, key, "ns", s, (uint64_t)n))
        return -1;

    MPI_Win_fence(0, c->win);
    if ((n = budget_sample(b, agree, winfence_op, c, s)) < 0)
        return -1;
    snprintf(key, sizeof key, "mpi/winfence/%d", c->nranks);
    if (report(c, out, key, "ns", s, (uint64_t)n))
        return -1;

    /* Rank 0 late at a fence: how much CPU do the others burn waiting? */
    uint64_t reps = late_ms == 0 ? 0 : b->samples < 3 ? b->samples : 3;
    for (uint64_t i = 0; i < reps; i++) {
        MPI_Win_fence(0, c->win);
        if (c->rank == 0) {
            struct timespec ts = {late_ms / 1000, (long)(late_ms % 1000) * 1000000L};
            nanosleep(&ts, NULL);
        }
        uint64_t t = now_ns(), cpu = cpu_ns();
        MPI_Win_fence(0, c->win);
        s[i] = c->rank == 0 ? NAN : 100.0 * (double)(cpu_ns() - cpu) / (double)(now_ns() - t);
    }
    snprintf(key, sizeof key, "mpi/idle/%d", c->nranks);
    if (reps && report(c, out, key, "%", s, reps))
        return -1;
    MPI_Win_fence(MPI_MODE_NOSUCCEED, c->win);

    if (c->nranks >= 2) {
        if ((n = budget_sample(b, agree, pscw_op, c, s)) < 0)
            return -1;
        if (c->peer >= c->nranks)
            for (long i = 0; i < n; i++)
                s[i] = NAN;
        snprintf(key, sizeof key, "mpi/pscw/%d", c->nranks);
        if (report(c, out, key, "ns", s, (uint64_t)n))
            return -1;
    }
    MPI_Group_free(&c->pair);
    MPI_Group_free(&world);
    free(s);
    return MPI_Win_free(&c->win);
}

/* Writes one byte per page of [p, p + len). */
static void touch(char *p, size_t len)
{
    for (size_t i = 0; i < len; i += 4096)
        ((volatile char *)p)[i] = 1;
}

/* One creation (and teardown) of a window with `mine` bytes per rank, by MPI
 * (`comm` NULL) or by kpccl on `comm`; `use` also touches every page of our segment. */
static int create_once(kpccl_shm_comm_h comm, int use, size_t mine)
{
    void *base;
    if (!comm) {
        MPI_Win win;
        if (MPI_Win_allocate_shared((MPI_Aint)mine, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &base, &win))
            return -1;
        if (use) {
            touch(base, mine);
            MPI_Win_fence(0, win);
        }
        return MPI_Win_free(&win);
    }
    kpccl_shm_win_h win;
    if (kpccl_shm_win_alloc(mine, comm, &base, &win) != KPCCL_OK)
        return -1;
    if (use) {
        touch(base, mine);
        kpccl_shm_win_fence(win);
    }
    return kpccl_shm_win_free(win) == KPCCL_OK ? 0 : -1;
}

/* A kpccl communicator whose windows reserve their memory as `reserve` says
 * (KPCCL_RESERVE is read when a communicator is created). */
static kpccl_shm_comm_h comm_reserving(const char *reserve)
{
    setenv("KPCCL_RESERVE", reserve, 1);
    kpccl_shm_comm_h comm = world_comm();
    unsetenv("KPCCL_RESERVE");
    return comm;
}

enum { LIBS = 3 };

static int create(struct ctx *c, const char *reps_arg, const char *out, int nsizes, char **sizes)
{
    unsigned small, mid, large;
    if (sscanf(reps_arg, "%u:%u:%u", &small, &mid, &large) != 3)
        return -1;
    kpccl_shm_comm_h comms[LIBS] = {NULL, comm_reserving("eager"), comm_reserving("lazy")};
    if (!comms[1] || !comms[2])
        return -1;
    static const char *const names[LIBS][2] = {{"mpi/create", "mpi/create-touch"},
                                               {"kpccl-mpi/create", "kpccl-mpi/create-touch"},
                                               {"kpccl-mpi-lazy/create", "kpccl-mpi-lazy/create-touch"}};
    for (int i = 0; i < nsizes; i++) {
        unsigned long long size = strtoull(sizes[i], NULL, 10);
        unsigned reps = size >= (1ull << 30) ? large : size >= (64ull << 20) ? mid : small;
        size_t mine = (size_t)(size / (unsigned long long)c->nranks);
        double *s = calloc((size_t)reps * 2 * LIBS, sizeof *s);
        if (!s)
            return -1;
        /* Interleaved: MPI, kpccl, kpccl lazy, MPI… so that drift hits all alike. */
        for (unsigned r = 0; r < reps; r++)
            for (int k = 0; k < 2 * LIBS; k++) {
                MPI_Barrier(MPI_COMM_WORLD);
                uint64_t t = now_ns();
                if (create_once(comms[k % LIBS], k / LIBS, mine)) {
                    fprintf(stderr, "mpi_bench: creation failed: %s\n", k % LIBS ? kpccl_last_error() : "MPI");
                    return -1;
                }
                s[(size_t)k * reps + r] = (double)(now_ns() - t);
            }
        for (int k = 0; k < 2 * LIBS; k++) {
            char key[128];
            snprintf(key, sizeof key, "%s/%d/%llu", names[k % LIBS][k / LIBS], c->nranks, size);
            if (report(c, out, key, "ns", s + (size_t)k * reps, reps))
                return -1;
        }
        free(s);
    }
    int rc = 0;
    for (int k = 1; k < LIBS; k++)
        rc |= kpccl_shm_comm_destroy(comms[k]) != KPCCL_OK;
    return rc ? -1 : 0;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    struct ctx c = {0};
    MPI_Comm_rank(MPI_COMM_WORLD, &c.rank);
    MPI_Comm_size(MPI_COMM_WORLD, &c.nranks);
    budget_t b;
    int rc;
    if (argc == 5 && !strcmp(argv[1], "fences") && !budget_parse(argv[2], &b))
        rc = fences(&c, &b, argv[3], atoi(argv[4]));
    else if (argc >= 4 && !strcmp(argv[1], "create"))
        rc = create(&c, argv[2], argv[3], argc - 4, argv + 4);
    else {
        if (c.rank == 0)
            fprintf(stderr, "usage: mpi_bench fences W:WNS:S:SNS:MAXI:MAXNS OUT LATE_MS | create S:M:L OUT SIZE...\n");
        rc = 2;
    }
    if (rc)
        fprintf(stderr, "mpi_bench: rank %d failed\n", c.rank);
    MPI_Finalize();
    return rc ? 1 : 0;
}
