/*
 * bench.h: the sampling protocol shared by the C benchmark programs, the
 * same as kpccl-bench's Rust `Budget::sample` (bench/src/measure.rs):
 * warm-up in doubling chunks until WARMUP operations or WARMUP_NS, then
 * timed samples of k operations (k from the previous chunk's speed, for
 * about SAMPLE_NS each) until SAMPLES samples or MAX_NS of sampling. Every
 * decision is rank 0's, handed to all ranks by `agree` between chunks
 * (fences must match); 0 means stop.
 *
 * Results go to the file named on the command line, one line per
 * measurement: `key<TAB>unit<TAB>v1,v2,...` (bench/src/results.rs).
 */
#ifndef KPCCL_BENCH_H
#define KPCCL_BENCH_H

#ifndef _GNU_SOURCE /* a -D_GNU_SOURCE on the command line is no redefinition */
#define _GNU_SOURCE
#endif
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* The spin hint of the library's wait loops (Rust's `core::hint::spin_loop`). */
#if defined(__x86_64__) || defined(__i386__)
#define spin_hint() __builtin_ia32_pause()
#elif defined(__aarch64__)
#define spin_hint() __asm__ __volatile__("isb" ::: "memory")
#else
#define spin_hint() ((void)0)
#endif

typedef struct {
    uint64_t warmup, warmup_ns, samples, sample_ns, max_iters, max_ns;
} budget_t;

static inline int budget_parse(const char *s, budget_t *b)
{
    unsigned long long v[6];
    if (sscanf(s, "%llu:%llu:%llu:%llu:%llu:%llu", &v[0], &v[1], &v[2], &v[3], &v[4], &v[5]) != 6 || v[2] == 0 ||
        v[4] == 0)
        return -1;
    b->warmup = v[0];
    b->warmup_ns = v[1];
    b->samples = v[2];
    b->sample_ns = v[3];
    b->max_iters = v[4];
    b->max_ns = v[5];
    return 0;
}

static inline uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static inline uint64_t cpu_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static inline uint64_t budget_iters(const budget_t *b, double per_op)
{
    uint64_t k = per_op > 0.0 ? (uint64_t)((double)b->sample_ns / per_op) : b->max_iters;
    if (k < 1)
        k = 1;
    if (k > b->max_iters)
        k = b->max_iters;
    return k;
}

/* One operation; non-zero is a failure. */
typedef int (*op_fn)(void *ctx);
/* Every rank's proposal in, rank 0's out. */
typedef uint64_t (*agree_fn)(void *ctx, uint64_t mine);

/* Runs k operations; their time in ns, or 0 on failure (never 0 otherwise). */
static inline uint64_t timed(op_fn op, void *ctx, uint64_t k)
{
    uint64_t t = now_ns();
    for (uint64_t i = 0; i < k; i++)
        if (op(ctx))
            return 0;
    uint64_t d = now_ns() - t;
    return d ? d : 1;
}

/* Fills out[0..b->samples) with ns per operation of `op` and, when `ref`
 * is not NULL, out_ref[] with ns per operation of `ref` run k times right
 * after each sample's k operations (Rust: `Budget::sample_paired`); returns
 * how many samples it took (at least 1), or -1 on failure. */
static inline long budget_sample_paired(const budget_t *b, agree_fn agree, op_fn op, op_fn ref, void *ctx, double *out,
                                        double *out_ref)
{
    uint64_t k = b->warmup < 1 ? 1 : b->warmup > 16 ? 16 : b->warmup, done = 0, spent = 0, d, r = 0;
    double per;
    for (;;) {
        if (!(d = timed(op, ctx, k)) || (ref && !(r = timed(ref, ctx, k))))
            return -1;
        done += k;
        spent += d + r;
        per = (double)(d + r) / (double)k;
        int stop = done >= b->warmup || spent >= b->warmup_ns;
        uint64_t next = stop ? 0 : (2 * k < b->warmup - done ? 2 * k : b->warmup - done);
        k = agree(ctx, next);
        if (!k)
            break;
    }
    k = agree(ctx, budget_iters(b, per));
    if (!k)
        k = 1;
    uint64_t total = 0;
    long n = 0;
    for (;;) {
        if (!(d = timed(op, ctx, k)) || (ref && !(r = timed(ref, ctx, k))))
            return -1;
        total += d + r;
        if (ref)
            out_ref[n] = (double)r / (double)k;
        out[n++] = (double)d / (double)k;
        per = (double)(d + r) / (double)k;
        int stop = (uint64_t)n >= b->samples || total >= b->max_ns;
        k = agree(ctx, stop ? 0 : budget_iters(b, per));
        if (!k)
            return n;
    }
}

/* Fills out[0..b->samples) with ns per operation and returns how many
 * samples it took (at least 1), or -1 on failure. */
static inline long budget_sample(const budget_t *b, agree_fn agree, op_fn op, void *ctx, double *out)
{
    return budget_sample_paired(b, agree, op, NULL, ctx, out, NULL);
}

/* Appends one result line; all ranks' samples are in `all` (nranks rows of
 * `k`), NaN where a rank does not count; each sample is the mean over ranks. */
static inline int result_append(const char *path, const char *key, const char *unit, const double *all, int nranks, uint64_t k)
{
    FILE *f = fopen(path, "a");
    if (!f)
        return -1;
    char line[65536];
    int len = snprintf(line, sizeof line, "%s\t%s\t", key, unit);
    for (uint64_t s = 0; s < k && len < (int)sizeof line - 64; s++) {
        double sum = 0.0;
        int cnt = 0;
        for (int r = 0; r < nranks; r++) {
            double v = all[(uint64_t)r * k + s];
            if (v == v) {
                sum += v;
                cnt++;
            }
        }
        len += snprintf(line + len, sizeof line - (size_t)len, "%s%.3f", s ? "," : "", cnt ? sum / cnt : 0.0);
    }
    len += snprintf(line + len, sizeof line - (size_t)len, "\n");
    size_t wrote = fwrite(line, 1, (size_t)len, f);
    return fclose(f) || wrote != (size_t)len ? -1 : 0;
}

#endif
