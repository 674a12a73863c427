#define _GNU_SOURCE
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <immintrin.h>

/* (Matmul(1x8x8x8, (f32, GL, row_major), (f32, GL, row_major), (f32, GL, row_major), serial), [16, 16, 1024, 33554432]) */
__attribute__((noinline))
void kernel(const float *restrict lhs, const float *restrict rhs, float *restrict out)
{
    {
        /* vrhs: 1x8x8 (f32, VRF, row_major, v8) <- rhs */
        __m256 vrhs_0, vrhs_1, vrhs_2, vrhs_3, vrhs_4, vrhs_5, vrhs_6, vrhs_7;
        vrhs_0 = _mm256_loadu_ps(rhs);
        vrhs_1 = _mm256_loadu_ps((rhs + 8));
        vrhs_2 = _mm256_loadu_ps((rhs + 16));
        vrhs_3 = _mm256_loadu_ps((rhs + 24));
        vrhs_4 = _mm256_loadu_ps((rhs + 32));
        vrhs_5 = _mm256_loadu_ps((rhs + 40));
        vrhs_6 = _mm256_loadu_ps((rhs + 48));
        vrhs_7 = _mm256_loadu_ps((rhs + 56));
        {
            /* vout: 1x8x8 (f32, VRF, row_major, v8) <- out */
            __m256 vout_0, vout_1, vout_2, vout_3, vout_4, vout_5, vout_6, vout_7;
            vout_0 = _mm256_setzero_ps();
            {
              const __m256 bc = _mm256_broadcast_ss(lhs);
              vout_0 = _mm256_fmadd_ps(bc, vrhs_0, vout_0);
            }
            {
              const __m256 bc = _mm256_broadcast_ss((lhs + 1));
              vout_0 = _mm256_fmadd_ps(bc, vrhs_1, vout_0);
            }
            {
              const __m256 bc = _mm256_broadcast_ss((lhs + 2));
              vout_0 = _mm256_fmadd_ps(bc, vrhs_2, vout_0);
            }
            {
              const __m256 bc = _mm256_broadcast_ss((lhs + 3));
              vout_0 = _mm256_fmadd_ps(bc, vrhs_3, vout_0);
            }
            {
              const __m256 bc = _mm256_broadcast_ss((lhs + 4));
              vout_0 = _mm256_fmadd_ps(bc, vrhs_4, vout_0);
            }
            {
              const __m256 bc = _mm256_broadcast_ss((lhs + 5));
              vout_0 = _mm256_fmadd_ps(bc, vrhs_5, vout_0);
            }
            {
              const __m256 bc = _mm256_broadcast_ss((lhs + 6));
              vout_0 = _mm256_fmadd_ps(bc, vrhs_6, vout_0);
            }
            {
              const __m256 bc = _mm256_broadcast_ss((lhs + 7));
              vout_0 = _mm256_fmadd_ps(bc, vrhs_7, vout_0);
            }
            vout_1 = _mm256_setzero_ps();
            {
              const __m256 bc = _mm256_broadcast_ss((lhs + 8));
              vout_1 = _mm256_fmadd_ps(bc, vrhs_0, vout_1);
            }
            {
              const __m256 bc = _mm256_broadcast_ss((lhs + 9));
              vout_1 = _mm256_fmadd_ps(bc, vrhs_1, vout_1);
            }
            {
              const __m256 bc = _mm256_broadcast_ss((lhs + 10));
              vout_1 = _mm256_fmadd_ps(bc, vrhs_2, vout_1);
            }
            {
              const __m256 bc = _mm256_broadcast_ss((lhs + 11));
              vout_1 = _mm256_fmadd_ps(bc, vrhs_3, vout_1);
            }
            {
              const __m256 bc = _mm256_broadcast_ss((lhs + 12));
              vout_1 = _mm256_fmadd_ps(bc, vrhs_4, vout_1);
            }
            {
              const __m256 bc = _mm256_broadcast_ss((lhs + 13));
              vout_1 = _mm256_fmadd_ps(bc, vrhs_5, vout_1);
            }
            {
              const __m256 bc = _mm256_broadcast_ss((lhs + 14));
              vout_1 = _mm256_fmadd_ps(bc, vrhs_6, vout_1);
            }
            {
              const __m256 bc = _mm256_broadcast_ss((lhs + 15));
              vout_1 = _mm256_fmadd_ps(bc, vrhs_7, vout_1);
            }
            vout_2 = _mm256_setzero_ps();
            {
              const __m256 bc = _mm256_broadcast_ss((lhs + 16));
              vout_2 = _mm256_fmadd_ps(bc, vrhs_0, vout_2);
            }
            {
              const __m256 bc = _mm256_broadcast_ss((lhs + 17));
              vout_2 = _mm256_fmadd_ps(bc, vrhs_1, vout_2);
            }
            {
              const __m256 bc = _mm256_broadcast_ss((lhs + 18));
              vout_2 = _mm256_fmadd_ps(bc, vrhs_2, vout_2);
            }
            {
              const __m256 bc = _mm256_broadcast_ss((lhs + 19));
              vout_2 = _mm256_fmadd_ps(bc, vrhs_3, vout_2);
            }
            {
              const __m256 bc = _mm256_broadcast_ss((lhs + 20));
              vout_2 = _mm256_fmadd_ps(bc, vrhs_4, vout_2);
            }
            {
              const __m256 bc = _mm256_broadcast_ss((lhs + 21));
              vout_2 = _mm256_fmadd_ps(bc, vrhs_5, vout_2);
            }
            {
              const __m256 bc = _mm256_broadcast_ss((lhs + 22));
              vout_2 = _mm256_fmadd_ps(bc, vrhs_6, vout_2);
            }
            {
              const __m256 bc = _mm256_broadcast_ss((lhs + 23));
              vout_2 = _mm256_fmadd_ps(bc, vrhs_7, vout_2);
            }
            vout_3 = _mm256_setzero_ps();
            {
              const __m256 bc = _mm256_broadcast_ss((lhs + 24));
              vout_3 = _mm256_fmadd_ps(bc, vrhs_0, vout_3);
            }
            {
              const __m256 bc = _mm256_broadcast_ss((lhs + 25));
              vout_3 = _mm256_fmadd_ps(bc, vrhs_1, vout_3);
            }
            {
              const __m256 bc = _mm256_broadcast_ss((lhs + 26));
              vout_3 = _mm256_fmadd_ps(bc, vrhs_2, vout_3);
            }
            {
              const __m256 bc = _mm256_broadcast_ss((lhs + 27));
              vout_3 = _mm256_fmadd_ps(bc, vrhs_3, vout_3);
            }
            {
              const __m256 bc = _mm256_broadcast_ss((lhs + 28));
              vout_3 = _mm256_fmadd_ps(bc, vrhs_4, vout_3);
            }
            {
              const __m256 bc = _mm256_broadcast_ss((lhs + 29));
              vout_3 = _mm256_fmadd_ps(bc, vrhs_5, vout_3);
            }
            {
              const __m256 bc = _mm256_broadcast_ss((lhs + 30));
              vout_3 = _mm256_fmadd_ps(bc, vrhs_6, vout_3);
            }
            {
              const __m256 bc = _mm256_broadcast_ss((lhs + 31));
              vout_3 = _mm256_fmadd_ps(bc, vrhs_7, vout_3);
            }
            vout_4 = _mm256_setzero_ps();
            {
              const __m256 bc = _mm256_broadcast_ss((lhs + 32));
              vout_4 = _mm256_fmadd_ps(bc, vrhs_0, vout_4);
            }
            {
              const __m256 bc = _mm256_broadcast_ss((lhs + 33));
              vout_4 = _mm256_fmadd_ps(bc, vrhs_1, vout_4);
            }
            {
              const __m256 bc = _mm256_broadcast_ss((lhs + 34));
              vout_4 = _mm256_fmadd_ps(bc, vrhs_2, vout_4);
            }
            {
              const __m256 bc = _mm256_broadcast_ss((lhs + 35));
              vout_4 = _mm256_fmadd_ps(bc, vrhs_3, vout_4);
            }
            {
              const __m256 bc = _mm256_broadcast_ss((lhs + 36));
              vout_4 = _mm256_fmadd_ps(bc, vrhs_4, vout_4);
            }
            {
              const __m256 bc = _mm256_broadcast_ss((lhs + 37));
              vout_4 = _mm256_fmadd_ps(bc, vrhs_5, vout_4);
            }
            {
              const __m256 bc = _mm256_broadcast_ss((lhs + 38));
              vout_4 = _mm256_fmadd_ps(bc, vrhs_6, vout_4);
            }
            {
              const __m256 bc = _mm256_broadcast_ss((lhs + 39));
              vout_4 = _mm256_fmadd_ps(bc, vrhs_7, vout_4);
            }
            vout_5 = _mm256_setzero_ps();
            {
              const __m256 bc = _mm256_broadcast_ss((lhs + 40));
              vout_5 = _mm256_fmadd_ps(bc, vrhs_0, vout_5);
            }
            {
              const __m256 bc = _mm256_broadcast_ss((lhs + 41));
              vout_5 = _mm256_fmadd_ps(bc, vrhs_1, vout_5);
            }
            {
              const __m256 bc = _mm256_broadcast_ss((lhs + 42));
              vout_5 = _mm256_fmadd_ps(bc, vrhs_2, vout_5);
            }
            {
              const __m256 bc = _mm256_broadcast_ss((lhs + 43));
              vout_5 = _mm256_fmadd_ps(bc, vrhs_3, vout_5);
            }
            {
              const __m256 bc = _mm256_broadcast_ss((lhs + 44));
              vout_5 = _mm256_fmadd_ps(bc, vrhs_4, vout_5);
            }
            {
              const __m256 bc = _mm256_broadcast_ss((lhs + 45));
              vout_5 = _mm256_fmadd_ps(bc, vrhs_5, vout_5);
            }
            {
              const __m256 bc = _mm256_broadcast_ss((lhs + 46));
              vout_5 = _mm256_fmadd_ps(bc, vrhs_6, vout_5);
            }
            {
              const __m256 bc = _mm256_broadcast_ss((lhs + 47));
              vout_5 = _mm256_fmadd_ps(bc, vrhs_7, vout_5);
            }
            vout_6 = _mm256_setzero_ps();
            {
              const __m256 bc = _mm256_broadcast_ss((lhs + 48));
              vout_6 = _mm256_fmadd_ps(bc, vrhs_0, vout_6);
            }
            {
              const __m256 bc = _mm256_broadcast_ss((lhs + 49));
              vout_6 = _mm256_fmadd_ps(bc, vrhs_1, vout_6);
            }
            {
              const __m256 bc = _mm256_broadcast_ss((lhs + 50));
              vout_6 = _mm256_fmadd_ps(bc, vrhs_2, vout_6);
            }
            {
              const __m256 bc = _mm256_broadcast_ss((lhs + 51));
              vout_6 = _mm256_fmadd_ps(bc, vrhs_3, vout_6);
            }
            {
              const __m256 bc = _mm256_broadcast_ss((lhs + 52));
              vout_6 = _mm256_fmadd_ps(bc, vrhs_4, vout_6);
            }
            {
              const __m256 bc = _mm256_broadcast_ss((lhs + 53));
              vout_6 = _mm256_fmadd_ps(bc, vrhs_5, vout_6);
            }
            {
              const __m256 bc = _mm256_broadcast_ss((lhs + 54));
              vout_6 = _mm256_fmadd_ps(bc, vrhs_6, vout_6);
            }
            {
              const __m256 bc = _mm256_broadcast_ss((lhs + 55));
              vout_6 = _mm256_fmadd_ps(bc, vrhs_7, vout_6);
            }
            vout_7 = _mm256_setzero_ps();
            {
              const __m256 bc = _mm256_broadcast_ss((lhs + 56));
              vout_7 = _mm256_fmadd_ps(bc, vrhs_0, vout_7);
            }
            {
              const __m256 bc = _mm256_broadcast_ss((lhs + 57));
              vout_7 = _mm256_fmadd_ps(bc, vrhs_1, vout_7);
            }
            {
              const __m256 bc = _mm256_broadcast_ss((lhs + 58));
              vout_7 = _mm256_fmadd_ps(bc, vrhs_2, vout_7);
            }
            {
              const __m256 bc = _mm256_broadcast_ss((lhs + 59));
              vout_7 = _mm256_fmadd_ps(bc, vrhs_3, vout_7);
            }
            {
              const __m256 bc = _mm256_broadcast_ss((lhs + 60));
              vout_7 = _mm256_fmadd_ps(bc, vrhs_4, vout_7);
            }
            {
              const __m256 bc = _mm256_broadcast_ss((lhs + 61));
              vout_7 = _mm256_fmadd_ps(bc, vrhs_5, vout_7);
            }
            {
              const __m256 bc = _mm256_broadcast_ss((lhs + 62));
              vout_7 = _mm256_fmadd_ps(bc, vrhs_6, vout_7);
            }
            {
              const __m256 bc = _mm256_broadcast_ss((lhs + 63));
              vout_7 = _mm256_fmadd_ps(bc, vrhs_7, vout_7);
            }
            _mm256_storeu_ps(out, vout_0);
            _mm256_storeu_ps((out + 8), vout_1);
            _mm256_storeu_ps((out + 16), vout_2);
            _mm256_storeu_ps((out + 24), vout_3);
            _mm256_storeu_ps((out + 32), vout_4);
            _mm256_storeu_ps((out + 40), vout_5);
            _mm256_storeu_ps((out + 48), vout_6);
            _mm256_storeu_ps((out + 56), vout_7);
        }
    }
}

int kernel_call(void **p)
{
    const uintptr_t a0 = (uintptr_t)p[0], e0 = a0 + 256u;
    const uintptr_t a1 = (uintptr_t)p[1], e1 = a1 + 256u;
    const uintptr_t a2 = (uintptr_t)p[2], e2 = a2 + 256u;
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
    memcpy(b_lhs, lhs, 64 * sizeof(float));
    float *b_rhs = (float *)(arena + 448 + shift);
    memcpy(b_rhs, rhs, 64 * sizeof(float));
    float *b_out = (float *)(arena + 896 + shift);
    memcpy(b_out, out, 64 * sizeof(float));
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

