/* e^x for x <= 0 in a form the compiler vectorizes, shared by paged_attention_cpu.c (softmax) and
 * layer_ops_cpu.c (SiLU): libm's expf is one scalar call per element. */
#ifndef PAGEDLAB_EXP_NONPOSITIVE_H
#define PAGEDLAB_EXP_NONPOSITIVE_H
#include <stdint.h>
#include <string.h>

/* x = n ln2 + r with |r| <= ln2/2; e^r by its degree-6 Taylor polynomial (relative error < 2e-7);
 * 2^n written into the float's exponent bits. Below -87 (e^x < 1.7e-38) it returns 0. */
static inline float exp_nonpositive(float x) {
    if (x < -87.0f) return 0.0f;
    float n = (float)(int32_t)(x * 1.44269504f - 0.5f); /* round(x / ln2), x <= 0 */
    float r = x - n * 0.693145752f - n * 1.42860677e-6f; /* ln2 split in two: r is exact */
    float p = 1.0f + r * (1.0f + r * (0.5f + r * (1.0f / 6 + r * (1.0f / 24 + r * (1.0f / 120 + r * (1.0f / 720))))));
    int32_t bits = ((int32_t)n + 127) << 23; /* 2^n, n in [-126, 0] */
    float two_n;
    memcpy(&two_n, &bits, sizeof two_n);
    return p * two_n;
}

#endif
