/*
 * pipeline.c: the pipeline kernel of the Parallel Research Kernels
 * ("Synch_p2p", as in PRK's MPI+SHM version), with the hand-off between
 * neighbouring ranks made four ways on the same strips, run back to back in
 * one job under mpirun:
 *
 *   pipeline M N SWEEPS REPS OUT [VARIANT,...]
 *
 * The M x N grid is split into strips of rows, one per rank (rank r owns
 * rows start..start+width-1, stored column by column, so that its part of a
 * column is contiguous). Sweep after sweep, for every column j = 1..N-1,
 * rank r waits until rank r-1 has finished column j, computes its rows of
 * column j,
 *     a[i][j] = a[i-1][j] + a[i][j-1] - a[i-1][j-1],
 * reading row i-1 of its first row from r-1's strip in place, and tells
 * rank r+1. After each sweep the last rank hands the corner back to rank 0:
 * a[0][0] = -a[M-1][N-1]. Boundaries: a[i][0] = i, a[0][j] = j. The first
 * sweep is a warm-up (as in PRK), then SWEEPS timed sweeps; PRK's check:
 * the corner is then (SWEEPS+1)*(M+N-2) (compared exactly: every value is
 * an integer).
 *
 * The variants (how "r-1 finished column j" and the corner travel):
 *   mpi           strips from MPI_Win_allocate_shared; zero-byte MPI_Send /
 *                 MPI_Recv; the corner sent with MPI_Send (PRK's MPI+SHM code)
 *   mpi-flag      the same strips; each rank counts its finished columns in
 *                 a word of its own segment, which r+1 polls; MPI_Win_sync
 *                 orders the grid around the count (the corner: written into
 *                 rank 0's strip, published by a count of sweeps)
 *   kpccl-fence   strips from kpccl_shm_win_alloc; kpccl_shm_peer_fence with
 *                 the left neighbour before a column and with the right one
 *                 after it (the corner: written into rank 0's strip, then a
 *                 peer fence between the last rank and rank 0)
 *   kpccl-signal  the same strips; kpccl_shm_peer_wait(left) before a column,
 *                 kpccl_shm_peer_signal(right) after it (the corner: written,
 *                 then signalled to rank 0)
 *   unsynced      the same strips and sweeps with no hand-off at all (and no
 *                 corner): the results are wrong and not checked; its time is
 *                 the floor, what the arithmetic costs when nothing waits
 *
 * Each repetition runs every variant once, in turn (A B C D A B C D ...), so
 * that drift of the machine hits all alike. Rank 0 appends one result line
 * per variant to OUT (bench/src/results.rs): `pipeline/VARIANT/NRANKS`, ns per
 * timed sweep of the slowest rank (PRK reports the maximum over ranks), one
 * sample per repetition; and prints them. Exit status 0 when every run
 * validated.
 */
#include "bench.h"

#include <sched.h>

#include "mpi_oob.h"

/* Each segment starts with two 128-byte lines of counters (mpi-flag's):
 * finished columns, then finished sweeps; the grid follows. */
enum { HEADER_BYTES = 256, DONE_WORD = 0, SWEEP_WORD = 16 };

/* The most rows and columns (see main). */
#define MAX_SIDE (1L << 20)

enum { MPI_SEND, MPI_FLAG, KPCCL_FENCE, KPCCL_SIGNAL, UNSYNCED, VARIANTS };
static const char *const NAMES[VARIANTS] = {"mpi", "mpi-flag", "kpccl-fence", "kpccl-signal", "unsynced"};

/* The grid and counters of a rank, in one window. */
struct view {
    double *grid;
    uint64_t *hdr;
};

struct job {
    int rank, nranks, last;
    long m, n, sweeps;
    long width, start;   /* this rank's rows */
    long left_width;     /* rank-1's rows */
    unsigned spins;      /* mpi-flag: polls with a spin hint before yielding */
    /* the MPI window and the kpccl window, each seen as: me, left, rank 0, last */
    MPI_Win mpi_win;
    kpccl_shm_win_h kwin;
    struct view mpi[4], kpccl[4];
    /* mpi-flag: counts published and seen so far (never reset) */
    uint64_t cols_done, cols_seen, sweeps_done, sweeps_seen;
};

enum { ME, LEFT, FIRST, LAST };

/* One run's state: the variant and the views it uses. */
struct run {
    struct job *job;
    int variant;
    struct view *v;
};

static int failed(const struct job *j, const char *what, int variant)
{
    fprintf(stderr, "pipeline: rank %d, %s: %s failed%s%s\n", j->rank, NAMES[variant], what,
            variant == KPCCL_FENCE || variant == KPCCL_SIGNAL ? ": " : "",
            variant == KPCCL_FENCE || variant == KPCCL_SIGNAL ? kpccl_last_error() : "");
    return -1;
}

/* mpi-flag: waits until *word reaches want (spinning, then yielding the
 * core, as kpccl's waits do before they sleep, so that a poller does not
 * burn the core its descheduled neighbour needs; unlike kpccl's it never
 * sleeps, and polls 1000 times while every rank has a CPU), then a memory
 * barrier. */
static void poll_until(const struct job *j, const uint64_t *word, uint64_t want)
{
    for (unsigned k = 0; __atomic_load_n(word, __ATOMIC_RELAXED) < want; k++) {
        if (k < j->spins)
            spin_hint();
        else
            sched_yield();
    }
    MPI_Win_sync(j->mpi_win);
}

/* mpi-flag: a barrier before the store, which publishes what came before. */
static void publish(const struct job *j, uint64_t *word, uint64_t value)
{
    MPI_Win_sync(j->mpi_win);
    __atomic_store_n(word, value, __ATOMIC_RELAXED);
}

/* Waits until rank-1 has finished the next column. */
static int wait_left(struct run *x)
{
    struct job *j = x->job;
    int p2pbuf;
    switch (x->variant) {
    case MPI_SEND:
        return MPI_Recv(&p2pbuf, 0, MPI_INT, j->rank - 1, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    case MPI_FLAG:
        poll_until(j, &x->v[LEFT].hdr[DONE_WORD], ++j->cols_seen);
        return 0;
    case KPCCL_FENCE:
        return kpccl_shm_peer_fence(j->kwin, j->rank - 1) != KPCCL_OK;
    case KPCCL_SIGNAL:
        return kpccl_shm_peer_wait(j->kwin, j->rank - 1) != KPCCL_OK;
    default:
        return 0;
    }
}

/* Tells rank+1 that this rank has finished a column. */
static int tell_right(struct run *x)
{
    struct job *j = x->job;
    int p2pbuf = 0;
    switch (x->variant) {
    case MPI_SEND:
        return MPI_Send(&p2pbuf, 0, MPI_INT, j->rank + 1, 1, MPI_COMM_WORLD);
    case MPI_FLAG:
        publish(j, &x->v[ME].hdr[DONE_WORD], ++j->cols_done);
        return 0;
    case KPCCL_FENCE:
        return kpccl_shm_peer_fence(j->kwin, j->rank + 1) != KPCCL_OK;
    case KPCCL_SIGNAL:
        return kpccl_shm_peer_signal(j->kwin, j->rank + 1) != KPCCL_OK;
    default:
        return 0;
    }
}

/* The last rank: a[0][0] = value on rank 0. */
static int send_corner(struct run *x, double value)
{
    struct job *j = x->job;
    if (x->variant == MPI_SEND)
        return MPI_Send(&value, 1, MPI_DOUBLE, 0, 888, MPI_COMM_WORLD);
    x->v[FIRST].grid[0] = value;
    switch (x->variant) {
    case MPI_FLAG:
        publish(j, &x->v[ME].hdr[SWEEP_WORD], ++j->sweeps_done);
        return 0;
    case KPCCL_FENCE:
        return kpccl_shm_peer_fence(j->kwin, 0) != KPCCL_OK;
    default:
        return kpccl_shm_peer_signal(j->kwin, 0) != KPCCL_OK;
    }
}

/* Rank 0: waits for the corner from the last rank. */
static int take_corner(struct run *x)
{
    struct job *j = x->job;
    switch (x->variant) {
    case MPI_SEND:
        return MPI_Recv(&x->v[ME].grid[0], 1, MPI_DOUBLE, j->last, 888, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    case MPI_FLAG:
        poll_until(j, &x->v[LAST].hdr[SWEEP_WORD], ++j->sweeps_seen);
        return 0;
    case KPCCL_FENCE:
        return kpccl_shm_peer_fence(j->kwin, j->last) != KPCCL_OK;
    default:
        return kpccl_shm_peer_wait(j->kwin, j->last) != KPCCL_OK;
    }
}

/* One sweep over this rank's strip. */
static int sweep(struct run *x)
{
    const struct job *j = x->job;
    const long w = j->width, lw = j->left_width;
    double *restrict a = x->v[ME].grid;
    const double *restrict left = x->v[LEFT].grid;
    for (long col = 1; col < j->n; col++) {
        if (j->rank > 0 && wait_left(x))
            return failed(j, "waiting for the left neighbour", x->variant);
        double *restrict c = a + col * w;
        const double *restrict p = a + (col - 1) * w;
        /* Rank 0's first row is the grid's left boundary: it stays. */
        if (j->rank > 0)
            c[0] = left[col * lw + lw - 1] + p[0] - left[(col - 1) * lw + lw - 1];
        for (long i = 1; i < w; i++)
            c[i] = c[i - 1] + p[i] - p[i - 1];
        if (j->rank < j->last && tell_right(x))
            return failed(j, "telling the right neighbour", x->variant);
    }
    double corner = -a[(j->n - 1) * w + w - 1];
    if (x->variant == UNSYNCED)
        return 0;
    if (j->nranks == 1)
        a[0] = corner;
    else if (j->rank == j->last && send_corner(x, corner))
        return failed(j, "handing the corner to rank 0", x->variant);
    else if (j->rank == 0 && take_corner(x))
        return failed(j, "taking the corner", x->variant);
    return 0;
}

/* The grid's initial values in this rank's strip. */
static void init(const struct job *j, double *a)
{
    for (long col = 0; col < j->n; col++)
        for (long i = 0; i < j->width; i++)
            a[col * j->width + i] = col == 0 ? (double)(j->start + i) : j->rank == 0 && i == 0 ? (double)col : 0.0;
}

/* One validated run of `variant`; its time per timed sweep (slowest rank's)
 * lands in *ns on rank 0. Returns non-zero on failure, on every rank. */
static int run_once(struct job *j, int variant, double *ns)
{
    struct run x = {j, variant, variant <= MPI_FLAG ? j->mpi : j->kpccl};
    /* Nobody still reads a strip of the last run (the barrier), the new
     * values are seen by the neighbours (each window's own ordering). */
    MPI_Barrier(MPI_COMM_WORLD);
    init(j, x.v[ME].grid);
    int err = 0;
    if (variant <= MPI_FLAG) {
        MPI_Win_sync(j->mpi_win);
        MPI_Barrier(MPI_COMM_WORLD);
        MPI_Win_sync(j->mpi_win);
    } else if (kpccl_shm_win_fence(j->kwin) != KPCCL_OK) {
        err = failed(j, "kpccl_shm_win_fence", variant);
    }
    double t0 = 0;
    for (long s = 0; !err && s <= j->sweeps; s++) {
        if (s == 1) {
            MPI_Barrier(MPI_COMM_WORLD);
            t0 = MPI_Wtime();
        }
        err = sweep(&x);
    }
    double mine = (MPI_Wtime() - t0) / (double)j->sweeps * 1e9, slowest = 0;
    MPI_Reduce(&mine, &slowest, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    *ns = slowest;
    if (!err && j->rank == j->last && variant != UNSYNCED) {
        double got = x.v[ME].grid[(j->n - 1) * j->width + j->width - 1];
        double want = (double)((j->sweeps + 1) * (j->m + j->n - 2));
        if (got != want) {
            fprintf(stderr, "pipeline: %s: corner %.1f, expected (sweeps+1)*(m+n-2) = %.1f\n", NAMES[variant], got,
                    want);
            err = 1;
        }
    }
    int any = 0;
    MPI_Allreduce(&err, &any, 1, MPI_INT, MPI_LOR, MPI_COMM_WORLD);
    return any;
}

/* Each window's views: this rank, rank-1 (or this rank), rank 0, the last rank. */
static int views(struct job *j, int kpccl, struct view *v)
{
    int ranks[4] = {j->rank, j->rank > 0 ? j->rank - 1 : j->rank, 0, j->last};
    for (int k = 0; k < 4; k++) {
        void *base = NULL;
        if (kpccl) {
            size_t size;
            if (kpccl_shm_win_query(j->kwin, ranks[k], &size, &base) != KPCCL_OK)
                return failed(j, "kpccl_shm_win_query", KPCCL_FENCE);
        } else {
            MPI_Aint size;
            int disp;
            if (MPI_Win_shared_query(j->mpi_win, ranks[k], &size, &disp, &base))
                return failed(j, "MPI_Win_shared_query", MPI_SEND);
        }
        v[k].hdr = base;
        v[k].grid = (double *)((char *)base + HEADER_BYTES);
    }
    return 0;
}

/* Parses "a,b,..." into use[]; non-zero for an unknown name or none. */
static int pick(const char *list, int use[VARIANTS])
{
    char buf[256];
    snprintf(buf, sizeof buf, "%s", list);
    for (char *save, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        int k = 0;
        while (k < VARIANTS && strcmp(t, NAMES[k]))
            k++;
        if (k == VARIANTS)
            return -1;
        use[k] = 1;
    }
    for (int k = 0; k < VARIANTS; k++)
        if (use[k])
            return 0;
    return -1; /* nothing to run: nothing would be validated */
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    struct job j = {0};
    MPI_Comm_rank(MPI_COMM_WORLD, &j.rank);
    MPI_Comm_size(MPI_COMM_WORLD, &j.nranks);
    j.last = j.nranks - 1;
    int use[VARIANTS] = {0};
    long reps = 0;
    if (argc >= 6) {
        j.m = atol(argv[1]);
        j.n = atol(argv[2]);
        j.sweeps = atol(argv[3]);
        reps = atol(argv[4]);
    }
    /* M >= 2: with one row the corner is a boundary value and PRK's check
     * cannot hold; M, N <= 2^20 keep the strips' size from overflowing. */
    if (argc < 6 || argc > 7 || j.m < 2 || j.m < j.nranks || j.m > MAX_SIDE || j.n < 2 || j.n > MAX_SIDE ||
        j.sweeps < 1 || reps < 1 || pick(argc == 7 ? argv[6] : "mpi,mpi-flag,kpccl-fence,kpccl-signal", use)) {
        if (j.rank == 0)
            fprintf(stderr, "usage: pipeline M N SWEEPS REPS OUT [mpi,mpi-flag,kpccl-fence,kpccl-signal,unsynced] "
                            "(2 <= M <= 2^20, M >= ranks, 2 <= N <= 2^20, SWEEPS >= 1, REPS >= 1)\n");
        MPI_Finalize();
        return 2;
    }
    const char *out = argv[5];
    /* PRK's split: the first m % N ranks get one row more. */
    for (int r = 0; r <= j.rank; r++) {
        long rows = j.m / j.nranks + (r < j.m % j.nranks);
        if (r == j.rank - 1)
            j.left_width = rows;
        if (r == j.rank)
            j.width = rows;
        else
            j.start += rows;
    }
    size_t bytes = HEADER_BYTES + (size_t)j.width * (size_t)j.n * sizeof(double);

    void *base;
    kpccl_shm_comm_h comm = world_comm();
    /* The node's CPUs as the library counted them (affinities, quota). */
    int cpus = 1;
    int err = MPI_Win_allocate_shared((MPI_Aint)bytes, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &base, &j.mpi_win) ||
              MPI_Win_lock_all(MPI_MODE_NOCHECK, j.mpi_win) || !comm;
    if (!err && kpccl_shm_comm_node_cpus(comm, &cpus) != KPCCL_OK)
        err = failed(&j, "kpccl_shm_comm_node_cpus", KPCCL_FENCE);
    if (!err && kpccl_shm_win_alloc(bytes, comm, &base, &j.kwin) != KPCCL_OK)
        err = failed(&j, "kpccl_shm_win_alloc", KPCCL_FENCE);
    if (!err)
        err = views(&j, 0, j.mpi) || views(&j, 1, j.kpccl);
    if (err) {
        fprintf(stderr, "pipeline: rank %d: set-up failed\n", j.rank);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    j.spins = j.nranks > cpus ? 64 : 1000;
    /* MPI does not promise zeroed memory; the first run's barrier publishes it. */
    memset(j.mpi[ME].hdr, 0, HEADER_BYTES);

    double *times = calloc((size_t)(VARIANTS * reps), sizeof *times);
    if (!times)
        MPI_Abort(MPI_COMM_WORLD, 1);
    for (long rep = 0; rep < reps && !err; rep++)
        for (int k = 0; k < VARIANTS && !err; k++)
            if (use[k])
                err = run_once(&j, k, &times[k * reps + rep]);

    if (!err && j.rank == 0) {
        printf("pipeline: %d ranks, %ld x %ld grid, %ld timed sweeps, %ld repetitions: every synchronised run validated "
               "(corner = %ld)\n",
               j.nranks, j.m, j.n, j.sweeps, reps, (j.sweeps + 1) * (j.m + j.n - 2));
        for (int k = 0; k < VARIANTS; k++) {
            if (!use[k])
                continue;
            char key[64];
            snprintf(key, sizeof key, "pipeline/%s/%d", NAMES[k], j.nranks);
            err |= result_append(out, key, "ns", &times[k * reps], 1, (uint64_t)reps);
            printf("  %-13s ms per sweep:", NAMES[k]);
            for (long rep = 0; rep < reps; rep++)
                printf(" %.3f", times[k * reps + rep] / 1e6);
            printf("\n");
        }
    }
    MPI_Bcast(&err, 1, MPI_INT, 0, MPI_COMM_WORLD);
    free(times);
    MPI_Win_unlock_all(j.mpi_win);
    MPI_Win_free(&j.mpi_win);
    if (kpccl_shm_win_free(j.kwin) != KPCCL_OK || kpccl_shm_comm_destroy(comm) != KPCCL_OK)
        err = failed(&j, "teardown", KPCCL_FENCE);
    MPI_Finalize();
    return err ? 1 : 0;
}
