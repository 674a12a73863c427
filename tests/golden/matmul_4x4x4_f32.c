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
    {
        /* vrhs: 1x4x4 (f32, VRF, row_major, v4) <- rhs */
        __m128 vrhs_0, vrhs_1, vrhs_2, vrhs_3;
        vrhs_0 = _mm_loadu_ps(rhs);
        vrhs_1 = _mm_loadu_ps((rhs + 4));
        vrhs_2 = _mm_loadu_ps((rhs + 8));
        vrhs_3 = _mm_loadu_ps((rhs + 12));
        {
            /* vout: 1x4x4 (f32, VRF, row_major, v4) <- out */
            __m128 vout_0, vout_1, vout_2, vout_3;
            vout_0 = _mm_setzero_ps();
            {
              const __m128 bc = _mm_broadcast_ss(lhs);
              vout_0 = _mm_fmadd_ps(bc, vrhs_0, vout_0);
            }
            {
              const __m128 bc = _mm_broadcast_ss((lhs + 1));
              vout_0 = _mm_fmadd_ps(bc, vrhs_1, vout_0);
            }
            {
              const __m128 bc = _mm_broadcast_ss((lhs + 2));
              vout_0 = _mm_fmadd_ps(bc, vrhs_2, vout_0);
            }
            {
              const __m128 bc = _mm_broadcast_ss((lhs + 3));
              vout_0 = _mm_fmadd_ps(bc, vrhs_3, vout_0);
            }
            vout_1 = _mm_setzero_ps();
            {
              const __m128 bc = _mm_broadcast_ss((lhs + 4));
              vout_1 = _mm_fmadd_ps(bc, vrhs_0, vout_1);
            }
            {
              const __m128 bc = _mm_broadcast_ss((lhs + 5));
              vout_1 = _mm_fmadd_ps(bc, vrhs_1, vout_1);
            }
            {
              const __m128 bc = _mm_broadcast_ss((lhs + 6));
              vout_1 = _mm_fmadd_ps(bc, vrhs_2, vout_1);
            }
            {
              const __m128 bc = _mm_broadcast_ss((lhs + 7));
              vout_1 = _mm_fmadd_ps(bc, vrhs_3, vout_1);
            }
            vout_2 = _mm_setzero_ps();
            {
              const __m128 bc = _mm_broadcast_ss((lhs + 8));
              vout_2 = _mm_fmadd_ps(bc, vrhs_0, vout_2);
            }
            {
              const __m128 bc = _mm_broadcast_ss((lhs + 9));
              vout_2 = _mm_fmadd_ps(bc, vrhs_1, vout_2);
            }
            {
              const __m128 bc = _mm_broadcast_ss((lhs + 10));
              vout_2 = _mm_fmadd_ps(bc, vrhs_2, vout_2);
            }
            {
              const __m128 bc = _mm_broadcast_ss((lhs + 11));
              vout_2 = _mm_fmadd_ps(bc, vrhs_3, vout_2);
            }
            vout_3 = _mm_setzero_ps();
            {
              const __m128 bc = _mm_broadcast_ss((lhs + 12));
              vout_3 = _mm_fmadd_ps(bc, vrhs_0, vout_3);
            }
            {
              const __m128 bc = _mm_broadcast_ss((lhs + 13));
              vout_3 = _mm_fmadd_ps(bc, vrhs_1, vout_3);
            }
            {
              const __m128 bc = _mm_broadcast_ss((lhs + 14));
              vout_3 = _mm_fmadd_ps(bc, vrhs_2, vout_3);
            }
            {
              const __m128 bc = _mm_broadcast_ss((lhs + 15));
              vout_3 = _mm_fmadd_ps(bc, vrhs_3, vout_3);
            }
            _mm_storeu_ps(out, vout_0);
            _mm_storeu_ps((out + 4), vout_1);
            _mm_storeu_ps((out + 8), vout_2);
            _mm_storeu_ps((out + 12), vout_3);
        }
    }
}

int kernel_call(void **p)
{
    const uintptr_t a0 = (uintptr_t)p[0], e0 = a0 + 64u;
    const uintptr_t a1 = (uintptr_t)p[1], e1 = a1 + 64u;
    const uintptr_t a2 = (uintptr_t)p[2], e2 = a2 + 64u;
    if (a2 < e0 && a0 < e2) return 1;
    if (a2 < e1 && a1 < e2) return 1;
    kernel((const float *)p[0], (const float *)p[1], (float *)p[2]);
    return 0;
}

long kernel_bench(const float *restrict lhs, const float *restrict rhs, float *restrict out, int warmup, int reps, double min_time, double *times, int shift)
{
    char *arena = aligned_alloc(4096, 4096);
    if (!arena) return -1;
    shift = shift < 0 || shift > 64 ? 0 : shift;
    float *b_lhs = (float *)(arena + 0 + shift);
    memcpy(b_lhs, lhs, 16 * sizeof(float));
    float *b_rhs = (float *)(arena + 256 + shift);
    memcpy(b_rhs, rhs, 16 * sizeof(float));
    float *b_out = (float *)(arena + 512 + shift);
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

