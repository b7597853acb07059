/*
 * kpccl_allreduce.c: an allreduce (sum of doubles) over the ranks of one
 * node, built on a kpccl shared-memory window: ranks read each other's
 * segments in place, and window fences order the steps. No message is sent.
 *
 * Two algorithms, chosen by size (both give every rank bit-identical sums,
 * added in rank order 0, 1, ..., N-1):
 *
 * - Large vectors: reduce-scatter, then allgather, through the window,
 *   one chunk (1 MiB by default) at a time.
 *   1. Each rank copies its input into its own segment (all but its own
 *      share, which only it reads).                                fence
 *   2. Each rank sums its share (1/N of the chunk) over all N inputs,
 *      reading its peers' in place, into its segment and its output.  fence
 *   3. Each rank copies every other rank's reduced share into its output.
 *   Every rank reads and adds 1/N of each input instead of all of it: N
 *   times less arithmetic and memory traffic than the small path. Chunks
 *   keep the segments in cache between a rank's write and its peers' reads
 *   (main memory sees the input once and the output once), and a window of
 *   a chunk's size serves vectors of any size.
 *
 * - Small vectors (by default up to 256 bytes while every rank has a CPU of
 *   its own, up to 1 KiB when ranks outnumber CPUs): every rank reduces the
 *   whole vector.
 *   1. Each rank copies its input into its own segment.        fence
 *   2. Each rank sums all N inputs into its output.
 *   One fence instead of two: for small vectors the fence (a hand-off
 *   between processes, microseconds when ranks outnumber cores) costs more
 *   than adding N short vectors. Measured on 2 cores, × MPI_Allreduce: at 2
 *   ranks, 4 KiB took 1.02-1.10 whole and 0.61-0.69 in shares, 1 KiB
 *   0.83-0.91 whole (1.15 with the vCPUs placed far apart) and 0.74-0.79 in
 *   shares, 256 bytes 0.58-0.69 whole and 1.15-1.31 in shares; at 4 and 8
 *   ranks, 1 KiB 0.32-0.33 whole and 0.47-0.54 in shares, 4 KiB the same
 *   either way.
 *
 * Where the shared copies go: a peer reads a rank's copy of its input, and
 * its reduced share, right after the rank wrote them. Ranks that share a
 * last-level cache read them from there; ranks far apart (other dies or
 * sockets, or vCPUs a hypervisor put far apart) pull every line out of the
 * writer's cache one by one, and are faster when the copies are written with
 * non-temporal stores, to memory. Which is faster depends on where the ranks
 * run (measured on 2 vCPUs placed far apart, 2 ranks, × MPI_Allreduce's
 * time: 256 KiB 2.1 cached, 0.7 streamed; 1 MiB 1.35 and 0.6; placed close:
 * 256 KiB 0.53 cached, 0.84 with the inputs streamed), and a hypervisor moves
 * vCPUs while a program runs: a choice timed once, at set-up, was the slower
 * one minutes later (1 MiB: 1.27x MPI_Allreduce streamed where cached took
 * 0.70x). So each rank learns the way while it runs, for each chunk size
 * from 32 KiB: it times its chunks, and now and then one chunk tries the
 * other way (see struct copy_way). Streaming needs SSE2 (x86-64); elsewhere,
 * and below 32 KiB, the copies are cached.
 *
 * The output only its rank reads, but a large one cannot stay in the caches
 * until the call returns: the call reads as much input, and the ranks that
 * share a CPU write their outputs too. A cached store then first reads each
 * line from memory and later writes it back; a non-temporal store writes it
 * once. So vectors above four times a CPU's L2 cache, divided among the ranks
 * that share the CPU, are written out streamed (--stream-output changes the
 * size). Measured on 2 cores with 1 MiB of L2 each, alternating jobs, the
 * time over that with cached output: 2 ranks, 16 MiB 0.91-0.95; 4 ranks,
 * 4 MiB 0.74-1.11 and 16 MiB 0.84-0.88; 8 ranks, 4 MiB 0.76-1.03 and 16 MiB
 * 0.68-1.02. Smaller outputs stay in cache for the caller: at 2 ranks,
 * streamed output made 1 MiB 1.5-1.6 times slower, and 4 MiB 0.8-1.7
 * depending on where the vCPUs ran.
 *
 * Reuse without an extra fence: a call (or chunk) writes its input into the
 * segment before its first fence, while a peer may still be reading the
 * previous one's data. The large path's input buffer was last read (step 2)
 * before the previous second fence, which this rank has passed; its reduced
 * share is rewritten only after the next first fence, which no rank passes
 * before finishing the previous gather. The small path alternates between
 * two buffers, so the buffer it writes was last read two small calls ago,
 * before a fence this rank has since passed.
 *
 *   mpicc -std=c11 -O2 -I ffi/include examples/kpccl_allreduce.c -o allreduce \
 *       -L target/release -lkpccl -Wl,-rpath,$PWD/target/release
 *   mpirun -np 4 ./allreduce [--max BYTES] [--small BYTES] [--chunk BYTES] [--rounds R] [--results FILE]
 *                            [--copies cached|streamed|auto] [--stream-output BYTES]
 *
 * main() checks the result exactly (the inputs are small integers, so every
 * order of summing gives the same doubles) against the expected sums and
 * against MPI_Allreduce, for every size it times (8 bytes, then powers of 4
 * up to --max, default 16 MiB) and each of them less a double, then times
 * both, interleaved, and prints their ratio (and records in --results only
 * what verified). --small is the largest vector (bytes) reduced by every
 * rank whole (default or 0: 256 bytes, or 1 KiB when ranks outnumber the
 * CPUs), --chunk the large path's chunk (default 1 MiB), --copies how the
 * large path writes what peers read
 * (default auto: learnt while running, see above), --stream-output the
 * largest vector (bytes) whose output is written cached (default or 0: see
 * above); --results appends each measurement to FILE as `key<TAB>ns<TAB>t1,t2,...`
 * (for the project's benchmark suite). Exit status 0 when verified.
 */
#define _POSIX_C_SOURCE 199309L /* clock_gettime */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mpi.h>
#include <time.h>
#include <unistd.h>
#if defined(__x86_64__) && defined(__SSE2__)
#include <emmintrin.h>
#define HAVE_STREAMING 1
#else
#define HAVE_STREAMING 0
#endif

#include "kpccl.h"
#include "kpccl_mpi.h"

/* ---------------------------------------------------------------- the allreduce */

/* Segment offsets are rounded up to this many doubles (64 bytes: a cache line). */
#define LINE_DOUBLES 8
/* Step 2 of the large path sums this many doubles (8 KiB) at a time: they
 * stay in L1 while every rank's input is added to them. */
#define BLOCK_DOUBLES 1024
/* Chunk sizes learn their copy way apart: one class per power of two. */
#define SIZE_CLASSES 32
/* Chunks below this many doubles (32 KiB) are copied cached, untimed: two
 * clock reads (about 45 ns here) would cost 5-12 % of such a chunk. */
#define LEARNT_DOUBLES 4096

enum { COPIES_CACHED, COPIES_STREAMED, COPIES_AUTO };

/* The copy way of one chunk size class, learnt by this rank. Every `backoff`
 * chunks a trial copies two chunks the other way. Only the second is timed:
 * the first meets the caches as the other way left them (streamed stores
 * leave the segments out of cache, cached copies leave them dirty in it), and
 * neither is the chunk after a trial. The timed trial chunk is compared with
 * the cheapest timed chunk of the way in use since the previous trial (same
 * placement, nearly the same load, and one slow chunk on a busy machine does
 * not make the way in use look slow). The other way takes over once it has
 * been clearly (10 %) cheaper in two trials in a row, the second soon after
 * the first. A trial that loses doubles the gap to the next, up to 256
 * chunks, so a way that stays the faster costs at most 2 chunks in 256; after
 * a switch, trials come every 4 chunks again. Ranks make the same calls, so
 * their trials fall on the same chunks; their choices may still differ, which
 * is harmless: a fence orders cached and streamed stores alike. */
struct copy_way {
    double best;        /* seconds per double: the way in use's cheapest timed chunk since the last trial */
    unsigned chunks;    /* chunks of this size class so far */
    unsigned trial_at;  /* the first chunk of the next trial */
    unsigned settle_at; /* the chunk after the last trial (not timed) */
    unsigned backoff;   /* chunks from one trial to the next */
    int wins;           /* trials in a row that the other way won */
    int stream;         /* the way in use: non-temporal stores */
};

struct win_allreduce {
    kpccl_shm_win_h win;
    int rank, nranks;
    size_t chunk;      /* the large path reduces vectors this many doubles at a time */
    size_t small;      /* vectors of at most this many doubles: every rank reduces all */
    size_t stream_out; /* vectors of more than this many doubles: the output is streamed to memory */
    double **input;    /* input[r]: rank r's copy of its input, in its segment */
    double **share;    /* share[r]: rank r's reduced share */
    double **buffer[2];/* buffer[p][r]: rank r's small-path buffer p */
    const double **sources; /* scratch: the inputs step 2 adds */
    unsigned parity;   /* the small-path buffer the next small call uses */
    int copies;        /* COPIES_CACHED, COPIES_STREAMED or COPIES_AUTO */
    struct copy_way ways[SIZE_CLASSES]; /* for COPIES_AUTO, by log2 of the chunk length */
};

static size_t round_up(size_t doubles)
{
    return (doubles + LINE_DOUBLES - 1) / LINE_DOUBLES * LINE_DOUBLES;
}

/* Rank r's share of [0, count): [lo, hi). */
static void share_of(size_t count, int r, int nranks, size_t *lo, size_t *hi)
{
    *lo = count * (size_t)r / (size_t)nranks;
    *hi = count * (size_t)(r + 1) / (size_t)nranks;
}

/* Frees the process-local tables of the segments' buffers. */
static void free_tables(struct win_allreduce *a)
{
    free(a->input);
    free(a->share);
    free(a->buffer[0]);
    free(a->buffer[1]);
    free(a->sources);
}

/* Collective: an allreduce context that reduces vectors of up to `small`
 * doubles whole on every rank, and larger ones `chunk` doubles at a time;
 * `copies`: COPIES_CACHED, COPIES_STREAMED or COPIES_AUTO (learnt); vectors
 * of more than `stream_out` doubles write their output with non-temporal
 * stores. */
static int win_allreduce_init(struct win_allreduce *a, kpccl_shm_comm_h comm, int rank, int nranks, size_t small,
                              size_t chunk, int copies, size_t stream_out)
{
    memset(a, 0, sizeof *a);
    a->rank = rank;
    a->nranks = nranks;
    a->chunk = chunk > (size_t)nranks ? chunk : (size_t)nranks;
    a->small = small;
    a->stream_out = HAVE_STREAMING ? stream_out : SIZE_MAX;
    a->copies = HAVE_STREAMING ? copies : COPIES_CACHED;
    for (int c = 0; c < SIZE_CLASSES; c++)
        a->ways[c] = (struct copy_way){.trial_at = 3, .backoff = 4}; /* chunk 0 (cold) is not timed */
    size_t in_len = round_up(a->chunk), share_len = round_up(a->chunk / (size_t)nranks + 1);
    size_t small_len = round_up(a->small);
    size_t bytes = (in_len + share_len + 2 * small_len) * sizeof(double);
    a->input = calloc((size_t)nranks, sizeof(double *));
    a->share = calloc((size_t)nranks, sizeof(double *));
    a->buffer[0] = calloc((size_t)nranks, sizeof(double *));
    a->buffer[1] = calloc((size_t)nranks, sizeof(double *));
    a->sources = calloc((size_t)nranks, sizeof(double *));
    void *base;
    int tables = a->input && a->share && a->buffer[0] && a->buffer[1] && a->sources;
    /* A rank without its tables still takes part, refused (no handle to
     * fill), so that every rank fails instead of waiting for it. */
    if (kpccl_shm_win_alloc(bytes, comm, &base, tables ? &a->win : NULL) != KPCCL_OK || !tables) {
        free_tables(a);
        return KPCCL_ERROR;
    }
    /* Every rank's segment, as mapped in this process: read in place. */
    for (int r = 0; r < nranks; r++) {
        size_t size;
        void *seg;
        if (kpccl_shm_win_query(a->win, r, &size, &seg) != KPCCL_OK) {
            /* As on every rank (a rank of another node): the free is collective. */
            kpccl_shm_win_free(a->win);
            free_tables(a);
            return KPCCL_ERROR;
        }
        a->input[r] = seg;
        a->share[r] = a->input[r] + in_len;
        a->buffer[0][r] = a->share[r] + share_len;
        a->buffer[1][r] = a->buffer[0][r] + small_len;
    }
    return KPCCL_OK;
}

static void copy_doubles(double *dst, const double *src, size_t n, int stream);

/* How the large path writes: what peers read (`shared`) and the output. */
struct ways {
    int shared, output; /* non-temporal stores (see copy_doubles) */
};

/* dst[0..n) = src[0][at..at+n) + src[1][at..at+n) + ... + src[nranks-1][at..at+n),
 * added in rank order, so that every rank gets the same bits; also copied to
 * `copy` (when not NULL) while each block is still in L1; `way.shared` is how
 * dst is written, `way.output` how `copy` is. */
static void sum_ranks(double *restrict dst, double *copy, const double *const *src, int nranks, size_t at, size_t n,
                      struct ways way)
{
    double block[BLOCK_DOUBLES];
    for (size_t b = 0; b < n; b += BLOCK_DOUBLES) {
        size_t len = n - b < BLOCK_DOUBLES ? n - b : BLOCK_DOUBLES;
        /* Streamed, the sum is made in `block` and then written out. */
        double *restrict d = way.shared ? block : dst + b;
        for (int r = 0; r < nranks; r++) {
            /* `copy` may be an input (in place): it is written after the last read of this block. */
            const double *restrict s = src[r] + at + b;
            if (r == 0)
                for (size_t i = 0; i < len; i++)
                    d[i] = s[i];
            else
                for (size_t i = 0; i < len; i++)
                    d[i] += s[i];
        }
        if (way.shared)
            copy_doubles(dst + b, block, len, 1);
        if (copy)
            copy_doubles(copy + b, d, len, way.output);
    }
}

/* dst[0..n) = src[0..n); with `stream`, by non-temporal stores, which go to
 * memory instead of this core's cache (the fence after the copy orders them:
 * the sfence makes them visible before its release store). */
static void copy_doubles(double *dst, const double *src, size_t n, int stream)
{
#if HAVE_STREAMING
    if (stream) {
        size_t i = 0;
        for (; i < n && ((uintptr_t)(dst + i) & 15); i++)
            dst[i] = src[i];
        for (; i + 2 <= n; i += 2)
            _mm_stream_pd(dst + i, _mm_loadu_pd(src + i));
        for (; i < n; i++)
            dst[i] = src[i];
        _mm_sfence();
        return;
    }
#endif
    (void)stream;
    memcpy(dst, src, n * sizeof(double));
}

static double seconds(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* The class of chunks of `len` doubles: floor(log2(len)). */
static int size_class(size_t len)
{
    int c = 0;
    while (len > 1 && c < SIZE_CLASSES - 1) {
        len >>= 1;
        c++;
    }
    return c;
}

/* Whether the next chunk of `w`'s class is streamed: the way in use, or the
 * other during a trial (unsigned arithmetic: chunks wrap as trial_at does). */
static int next_way(const struct copy_way *w)
{
    return w->chunks - w->trial_at < 2 ? !w->stream : w->stream;
}

/* Records that the chunk of `w`'s class copied as next_way() said cost
 * `cost` seconds per double, and sets the next trial (see struct copy_way). */
static void learn(struct copy_way *w, double cost)
{
    unsigned chunk = w->chunks++;
    if (chunk == w->trial_at || chunk == w->settle_at)
        return; /* the caches as the other way left them */
    if (chunk != w->trial_at + 1) {
        if (w->best == 0 || cost < w->best)
            w->best = cost;
        return;
    }
    w->settle_at = w->chunks;
    if (cost < 0.9 * w->best && ++w->wins < 2) {
        w->trial_at = w->chunks + 3; /* confirm after two timed chunks the way in use */
    } else {
        if (w->wins == 2) {
            w->stream = !w->stream;
            w->backoff = 4;
        } else if (w->backoff < 256) {
            w->backoff *= 2;
        }
        w->wins = 0;
        w->trial_at = w->chunks + w->backoff;
    }
    w->best = 0;
}

/* Reduce-scatter then allgather of one chunk (count <= a->chunk), written
 * the ways `way` says. */
static int large_step(struct win_allreduce *a, const double *in, double *out, size_t count, struct ways way)
{
    /* Peers read only their own shares of this rank's input: this rank's
     * share stays in `in`, where step 2 reads it. */
    size_t lo, hi;
    share_of(count, a->rank, a->nranks, &lo, &hi);
    double *mine = a->input[a->rank];
    copy_doubles(mine, in, lo, way.shared);
    copy_doubles(mine + hi, in + hi, count - hi, way.shared);
    if (kpccl_shm_win_fence(a->win) != KPCCL_OK)
        return KPCCL_ERROR;
    for (int r = 0; r < a->nranks; r++)
        a->sources[r] = r == a->rank ? in : a->input[r];
    /* The share goes to the segment (for the peers) and to `out` at once. */
    sum_ranks(a->share[a->rank], out + lo, a->sources, a->nranks, lo, hi - lo, way);
    if (kpccl_shm_win_fence(a->win) != KPCCL_OK)
        return KPCCL_ERROR;
    for (int r = 0; r < a->nranks; r++) {
        if (r == a->rank)
            continue;
        share_of(count, r, a->nranks, &lo, &hi);
        copy_doubles(out + lo, a->share[r], hi - lo, way.output);
    }
    return KPCCL_OK;
}

/* Collective: out[i] = the sum over ranks of their in[i], for i < count
 * (`in` may equal `out`, like MPI_IN_PLACE). */
static int win_allreduce(struct win_allreduce *a, const double *in, double *out, size_t count)
{
    if (a->nranks == 1) {
        memmove(out, in, count * sizeof(double));
        return KPCCL_OK;
    }
    if (count <= a->small) {
        double **buf = a->buffer[a->parity];
        a->parity ^= 1;
        memcpy(buf[a->rank], in, count * sizeof(double));
        if (kpccl_shm_win_fence(a->win) != KPCCL_OK)
            return KPCCL_ERROR;
        sum_ranks(out, NULL, (const double *const *)buf, a->nranks, 0, count, (struct ways){0, 0});
        return KPCCL_OK;
    }
    /* Chunk by chunk: the segments stay in cache between a rank's copy and
     * its peers' reads, and the window's size does not grow with the vector.
     * A chunk reuses the buffers of the one before as a call does a call's. */
    for (size_t at = 0; at < count; at += a->chunk) {
        size_t len = count - at < a->chunk ? count - at : a->chunk;
        /* The way learnt for chunks of this size, if it is learnt. */
        struct copy_way *w = a->copies == COPIES_AUTO && len >= LEARNT_DOUBLES ? &a->ways[size_class(len)] : NULL;
        double t = w ? seconds() : 0;
        struct ways way = {w ? next_way(w) : a->copies == COPIES_STREAMED, count > a->stream_out};
        if (large_step(a, in + at, out + at, len, way) != KPCCL_OK)
            return KPCCL_ERROR;
        if (w)
            learn(w, (seconds() - t) / (double)len);
    }
    return KPCCL_OK;
}

/* Collective: frees the window. */
static int win_allreduce_free(struct win_allreduce *a)
{
    int rc = kpccl_shm_win_free(a->win);
    free_tables(a);
    return rc;
}

/* ------------------------------------------------ the demonstration: check, then time */

static int me;

/* Rank r's input of call c: small integers, so that sums are exact. */
static double input(int r, size_t i, int c)
{
    return (double)(((size_t)(r + 1) * (i + 1) + 31u * (size_t)c) % 1024u);
}

/* Runs three calls of `count` doubles with different inputs and checks each
 * result against the exact sums, and the last against MPI_Allreduce.
 * Returns the number of wrong elements on this rank. */
static long check(struct win_allreduce *a, size_t count, double *in, double *out, double *ref)
{
    long wrong = 0;
    for (int c = 0; c < 3; c++) {
        for (size_t i = 0; i < count; i++)
            in[i] = input(me, i, c);
        KPCCL_MPI_CHECK(win_allreduce(a, in, c == 1 ? in : out, count)); /* once in place */
        const double *got = c == 1 ? in : out;
        for (size_t i = 0; i < count; i++) {
            double want = 0;
            for (int r = 0; r < a->nranks; r++)
                want += input(r, i, c);
            wrong += got[i] != want;
        }
    }
    for (size_t i = 0; i < count; i++)
        in[i] = input(me, i, 2);
    MPI_Allreduce(in, ref, (int)count, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    for (size_t i = 0; i < count; i++)
        wrong += out[i] != ref[i];
    return wrong;
}

/* Seconds per call of k calls, the slowest rank's: kpccl's (mpi = 0) or MPI_Allreduce's. */
static double timed(struct win_allreduce *a, int mpi, int k, const double *in, double *out, size_t count)
{
    MPI_Barrier(MPI_COMM_WORLD);
    double t = MPI_Wtime();
    for (int i = 0; i < k; i++) {
        if (mpi)
            MPI_Allreduce(in, out, (int)count, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
        else
            KPCCL_MPI_CHECK(win_allreduce(a, in, out, count));
    }
    t = (MPI_Wtime() - t) / k;
    double slowest;
    MPI_Allreduce(&t, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    return slowest;
}

static int by_value(const void *x, const void *y)
{
    double a = *(const double *)x, b = *(const double *)y;
    return (a > b) - (a < b);
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, by_value);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* Appends `key<TAB>ns<TAB>v1,v2,...` (nanoseconds) to `path`. */
static void append(const char *path, const char *key, const double *secs, int n)
{
    FILE *f = fopen(path, "a");
    if (!f) {
        perror(path);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    fprintf(f, "%s\tns\t", key);
    for (int i = 0; i < n; i++)
        fprintf(f, "%s%.3f", i ? "," : "", secs[i] * 1e9);
    fprintf(f, "\n");
    fclose(f);
}

/* The default of --stream-output: four times a CPU's L2 cache, shared by the
 * ranks on it (see the header). */
static size_t default_stream_output(int nranks, long cpus)
{
    long l2 = 0;
#ifdef _SC_LEVEL2_CACHE_SIZE
    l2 = sysconf(_SC_LEVEL2_CACHE_SIZE);
#endif
    if (l2 <= 0)
        l2 = 1 << 20;
    if (cpus < 1)
        cpus = 1;
    size_t per_cpu = ((size_t)nranks + (size_t)cpus - 1) / (size_t)cpus;
    return 4 * (size_t)l2 / per_cpu;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int n;
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    size_t max_bytes = 16u << 20, small_bytes = 0, chunk_bytes = 1u << 20, stream_bytes = 0;
    int rounds = 5, copies = COPIES_AUTO;
    const char *results = NULL;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--max"))
            max_bytes = strtoull(argv[i + 1], NULL, 10);
        else if (!strcmp(argv[i], "--small"))
            small_bytes = strtoull(argv[i + 1], NULL, 10);
        else if (!strcmp(argv[i], "--chunk"))
            chunk_bytes = strtoull(argv[i + 1], NULL, 10);
        else if (!strcmp(argv[i], "--stream-output"))
            stream_bytes = strtoull(argv[i + 1], NULL, 10);
        else if (!strcmp(argv[i], "--rounds"))
            rounds = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--results"))
            results = argv[i + 1];
        else if (!strcmp(argv[i], "--copies"))
            copies = !strcmp(argv[i + 1], "cached")     ? COPIES_CACHED
                     : !strcmp(argv[i + 1], "streamed") ? COPIES_STREAMED
                     : !strcmp(argv[i + 1], "auto")     ? COPIES_AUTO
                                                        : (rounds = 0);
        else
            rounds = 0;
    }
    if (argc % 2 == 0 || rounds < 1 || max_bytes < 8 || max_bytes > (1u << 30) || small_bytes > (1u << 30) ||
        chunk_bytes > (1u << 30)) {
        if (me == 0)
            fprintf(stderr,
                    "usage: %s [--max BYTES (8..1 GiB)] [--small BYTES] [--chunk BYTES] [--rounds R] [--results FILE] "
                    "[--copies cached|streamed|auto] [--stream-output BYTES]\n",
                    argv[0]);
        MPI_Finalize();
        return 2;
    }

    /* The communicator of this node's ranks (all of them: one node), with MPI
     * as the out-of-band channel (kpccl_mpi.h writes the callbacks). */
    kpccl_shm_comm_h comm;
    KPCCL_MPI_CHECK(kpccl_shm_comm_create_mpi(MPI_COMM_WORLD, &comm));
    struct win_allreduce a;
    size_t capacity = max_bytes / sizeof(double);
    /* Two fences cost little while every rank has a CPU; a hand-off when ranks
     * share them. The node's CPUs as the library counted them (affinities,
     * quota), not the machine's. */
    int cpus = 1;
    KPCCL_MPI_CHECK(kpccl_shm_comm_node_cpus(comm, &cpus));
    if (small_bytes == 0)
        small_bytes = n <= cpus ? 256 : 1024;
    if (stream_bytes == 0)
        stream_bytes = default_stream_output(n, cpus);
    KPCCL_MPI_CHECK(win_allreduce_init(&a, comm, me, n, small_bytes / sizeof(double), chunk_bytes / sizeof(double), copies,
                           stream_bytes / sizeof(double)));
    double *in = malloc(capacity * sizeof(double));
    double *out = malloc(capacity * sizeof(double));
    double *ref = malloc(capacity * sizeof(double));
    double *samples = malloc(2 * (size_t)rounds * sizeof(double));
    if (!in || !out || !ref || !samples) {
        fprintf(stderr, "rank %d: out of memory\n", me);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }

    const char *way = a.copies == COPIES_AUTO ? "cached or streamed, as learnt"
                      : a.copies == COPIES_STREAMED ? "streamed to memory"
                                                    : "cached";
    char output[64] = "output cached";
    if (a.stream_out != SIZE_MAX)
        snprintf(output, sizeof output, "output streamed above %zu bytes", a.stream_out * sizeof(double));
    if (me == 0)
        printf("allreduce of doubles, %d ranks (vectors up to %zu bytes: every rank reduces all; larger: "
               "copies for peers %s, %s)\n"
               "%10s %14s %14s %8s\n",
               n, a.small * sizeof(double), way, output, "bytes", "kpccl", "MPI", "ratio");
    long wrong_all = 0;
    /* 8 bytes, then 16, 64, 256, ... (powers of 4) up to --max. */
    for (size_t bytes = 8; bytes <= max_bytes; bytes = bytes == 8 ? 16 : bytes * 4) {
        size_t count = bytes / sizeof(double);
        /* And a double less: an odd count, a partial last chunk. */
        long wrong = check(&a, count, in, out, ref) + (count > 1 ? check(&a, count - 1, in, out, ref) : 0), sum = 0;
        MPI_Allreduce(&wrong, &sum, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
        wrong_all += sum;
        /* Calls per sample: about 5 ms of kpccl calls, as rank 0 finds. */
        double once = timed(&a, 0, 1, in, out, count);
        int k = once > 5e-3 ? 1 : once < 5e-3 / 1000 ? 1000 : (int)(5e-3 / once);
        MPI_Bcast(&k, 1, MPI_INT, 0, MPI_COMM_WORLD);
        /* Interleaved, so that drift of the machine hits both alike. */
        for (int r = 0; r < rounds; r++) {
            samples[r] = timed(&a, 0, k, in, out, count);
            samples[rounds + r] = timed(&a, 1, k, in, ref, count);
        }
        if (me == 0) {
            char key[64];
            /* Only what verified becomes a measurement. */
            for (int m = 0; results && !sum && m < 2; m++) {
                snprintf(key, sizeof key, "allreduce/%s/%d/%zu", m ? "mpi" : "kpccl", n, bytes);
                append(results, key, samples + m * rounds, rounds);
            }
            double t = median(samples, rounds), t_mpi = median(samples + rounds, rounds);
            printf("%10zu %11.2f us %11.2f us %8.2f%s\n", bytes, t * 1e6, t_mpi * 1e6, t / t_mpi,
                   sum ? "  WRONG" : "");
        }
    }
    if (me == 0)
        printf("%s: %ld wrong elements\n", wrong_all == 0 ? "verified" : "FAILED", wrong_all);

    KPCCL_MPI_CHECK(win_allreduce_free(&a));
    KPCCL_MPI_CHECK(kpccl_shm_comm_destroy(comm));
    free(in);
    free(out);
    free(ref);
    free(samples);
    MPI_Finalize();
    return wrong_all == 0 ? 0 : 1;
}
