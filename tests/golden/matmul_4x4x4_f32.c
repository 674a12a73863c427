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

void kernel_bench(const float *restrict lhs, const float *restrict rhs, float *restrict out, int warmup, int iters, int reps, double *times)
{
    struct timespec t0, t1;
    for (int w = 0; w < warmup; w++) kernel(lhs, rhs, out);
    for (int r = 0; r < reps; r++) {
        clock_gettime(CLOCK_MONOTONIC, &t0);
        for (int i = 0; i < iters; i++) kernel(lhs, rhs, out);
        clock_gettime(CLOCK_MONOTONIC, &t1);
        times[r] = ((double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec)) / iters;
    }
}

