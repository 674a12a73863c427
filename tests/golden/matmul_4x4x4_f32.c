#define _GNU_SOURCE
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <immintrin.h>

/* (Matmul(1x4x4x4, (f32, GL, row_major), (f32, GL, row_major), (f32, GL, row_major), serial), [16, 16, 1024, 33554432]) */
__attribute__((noinline))
void kernel(const float *restrict lhs, const float *restrict rhs, float *restrict out)
{
    memset(out, 0, 64);
    for (int m0 = 0; m0 < 4; m0++) {
        for (int k0 = 0; k0 < 4; k0++) {
            for (int n0 = 0; n0 < 4; n0++) {
                out[n0 + 4 * m0] += lhs[k0 + 4 * m0] * rhs[n0 + 4 * k0];
            }
        }
    }
}

long kernel_bench(const float *restrict lhs, const float *restrict rhs, float *restrict out, int warmup, int reps, double min_time, double *times)
{
    char *arena = aligned_alloc(4096, 4096);
    if (!arena) return -1;
    float *b_lhs = (float *)(arena + 0);
    memcpy(b_lhs, lhs, 16 * sizeof(float));
    float *b_rhs = (float *)(arena + 256);
    memcpy(b_rhs, rhs, 16 * sizeof(float));
    float *b_out = (float *)(arena + 512);
    memcpy(b_out, out, 16 * sizeof(float));
    struct timespec t0, t1;
    for (int w = 0; w < warmup; w++) kernel(b_lhs, b_rhs, b_out);
    clock_gettime(CLOCK_MONOTONIC, &t0);
    kernel(b_lhs, b_rhs, b_out);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double once = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    double want = min_time / (once > 1e-9 ? once : 1e-9);
    long iters = want < 1 ? 1 : want > 1e7 ? 10000000 : (long)want;
    for (int r = 0; r < reps; r++) {
        clock_gettime(CLOCK_MONOTONIC, &t0);
        for (long i = 0; i < iters; i++) { kernel(b_lhs, b_rhs, b_out); __asm__ __volatile__("" : : "r"(b_lhs), "r"(b_rhs), "r"(b_out) : "memory"); }
        clock_gettime(CLOCK_MONOTONIC, &t1);
        double t = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
        times[r] = t / (double)iters;
    }
    free(arena);
    return iters;
}

