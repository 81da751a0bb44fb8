/*
 * The small per-layer ops of a decoder layer on a CPU, one pass over memory each.
 *
 * In torch each is several ops (RoPE five, RMSNorm four inside F.rms_norm, the cache write two
 * index_copy_ and a padding check), and on a decode step of a few dozen tokens every op costs more
 * in dispatch and thread wake-ups than in arithmetic (benchmarks/results/profile.md, "native").
 * vLLM's CPU backend has the same ops in C++ (csrc/cpu/layernorm.cpp rms_norm, pos_encoding.cpp
 * rotary_embedding, cache.cpp reshape_and_cache; vLLM 0.6). SiLU-times-up is not here:
 * measured, a C version was no faster than torch's two ops. pagedlab/kernels/native.py builds this
 * file with paged_attention_cpu.c and checks every argument before calling; each op runs on the
 * calling thread (the work is too small to wake another).
 *
 * Each op in fp32 and in bf16 (the *_bf16 functions, uint16_t bit patterns): a bf16 op computes in fp32
 * and rounds where torch's bf16 ops round (each op's comment says where), so the bf16 model's C path
 * gives what its torch path gives (RoPE and the cache write bit for bit; RMSNorm to the sum's order).
 * "row" strides are in elements; the last dimension is contiguous.
 */
#include <math.h>
#include <stdint.h>
#include <string.h>

/* bf16 <-> fp32: a bf16 is the top half of an fp32; fp32 -> bf16 rounds to nearest, ties to even, as
 * torch does (c10::round_to_nearest_even), a NaN staying a quiet NaN. */
static inline float bf16_to_f32(uint16_t h) {
    uint32_t bits = (uint32_t)h << 16;
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}
static inline uint16_t f32_to_bf16(float f) {
    uint32_t bits;
    memcpy(&bits, &f, sizeof bits);
    if ((bits & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((bits >> 16) | 0x0040u);
    bits += 0x7fffu + ((bits >> 16) & 1u);
    return (uint16_t)(bits >> 16);
}

/* out[t] = weight * x[t] / sqrt(mean(x[t]^2) + eps), HF LlamaRMSNorm's formula (the sum's order differs). */
void rms_norm_f32(float *out, const float *x, const float *weight, int64_t num_tokens, int64_t hidden,
                  int64_t x_stride, float eps) {
    for (int64_t t = 0; t < num_tokens; t++) {
        const float *xt = x + t * x_stride;
        float sq = 0.0f;
#pragma omp simd reduction(+ : sq)
        for (int64_t i = 0; i < hidden; i++) sq += xt[i] * xt[i];
        float inv = 1.0f / sqrtf(sq / (float)hidden + eps);
        float *ot = out + t * hidden;
#pragma omp simd
        for (int64_t i = 0; i < hidden; i++) ot[i] = weight[i] * (xt[i] * inv);
    }
}

/* bf16 x and weight, HF LlamaRMSNorm's bf16 arithmetic: the mean of squares and the scaling in fp32, the
 * scaled row rounded to bf16, then weight * row rounded again (HF: weight * (x.float() * rsqrt).to(bf16)). */
void rms_norm_bf16(uint16_t *out, const uint16_t *x, const uint16_t *weight, int64_t num_tokens, int64_t hidden,
                   int64_t x_stride, float eps) {
    for (int64_t t = 0; t < num_tokens; t++) {
        const uint16_t *xt = x + t * x_stride;
        float sq = 0.0f;
#pragma omp simd reduction(+ : sq)
        for (int64_t i = 0; i < hidden; i++) sq += bf16_to_f32(xt[i]) * bf16_to_f32(xt[i]);
        float inv = 1.0f / sqrtf(sq / (float)hidden + eps);
        uint16_t *ot = out + t * hidden;
#pragma omp simd
        for (int64_t i = 0; i < hidden; i++)
            ot[i] = f32_to_bf16(bf16_to_f32(weight[i]) * bf16_to_f32(f32_to_bf16(bf16_to_f32(xt[i]) * inv)));
    }
}

/* Rotate-half RoPE (HF Llama's convention) of `heads` heads per token, into a contiguous out:
 *   out[t][h][i]        = x[i] * cos[t][i]        - x[i + half] * sin[t][i]
 *   out[t][h][i + half] = x[i + half] * cos[t][i + half] + x[i] * sin[t][i + half]
 * Built without FMA contraction (native.py passes -ffp-contract=off): each product rounds on its own,
 * as torch's mul/add ops round them, so the result is bit for bit pagedlab.model.llama.apply_rope's. */
void rotary_embedding_f32(float *out, const float *x, const float *cos, const float *sin, int64_t num_tokens,
                          int64_t heads, int64_t head_dim, int64_t x_stride) {
    const int64_t half = head_dim / 2;
    for (int64_t t = 0; t < num_tokens; t++) {
        const float *c = cos + t * head_dim, *s = sin + t * head_dim;
        for (int64_t h = 0; h < heads; h++) {
            const float *xh = x + t * x_stride + h * head_dim;
            float *oh = out + (t * heads + h) * head_dim;
#pragma omp simd
            for (int64_t i = 0; i < half; i++) {
                oh[i] = xh[i] * c[i] + (-xh[i + half]) * s[i];
                oh[i + half] = xh[i + half] * c[i + half] + xh[i] * s[i + half];
            }
        }
    }
}

/* bf16 x, cos and sin: each product rounded to bf16, then their sum rounded again, as
 * pagedlab.model.cpu_linear.apply_rope_flipped's bf16 ops round (x * cos, flipped x * signed sin, add):
 * bit for bit its result. */
void rotary_embedding_bf16(uint16_t *out, const uint16_t *x, const uint16_t *cos, const uint16_t *sin,
                           int64_t num_tokens, int64_t heads, int64_t head_dim, int64_t x_stride) {
    const int64_t half = head_dim / 2;
    for (int64_t t = 0; t < num_tokens; t++) {
        const uint16_t *c = cos + t * head_dim, *s = sin + t * head_dim;
        for (int64_t h = 0; h < heads; h++) {
            const uint16_t *xh = x + t * x_stride + h * head_dim;
            uint16_t *oh = out + (t * heads + h) * head_dim;
#pragma omp simd
            for (int64_t i = 0; i < half; i++) {
                float lo = bf16_to_f32(xh[i]), hi = bf16_to_f32(xh[i + half]);
                float a = bf16_to_f32(f32_to_bf16(lo * bf16_to_f32(c[i])));
                float b = bf16_to_f32(f32_to_bf16(hi * -bf16_to_f32(s[i])));
                oh[i] = f32_to_bf16(a + b);
                float a2 = bf16_to_f32(f32_to_bf16(hi * bf16_to_f32(c[i + half])));
                float b2 = bf16_to_f32(f32_to_bf16(lo * bf16_to_f32(s[i + half])));
                oh[i + half] = f32_to_bf16(a2 + b2);
            }
        }
    }
}

/* key_cache/value_cache rows [slot] = key/value [t] for every token with slot_mapping[t] >= 0
 * (-1 marks padding: skipped). Returns -1 - t for the first token whose slot is past the cache,
 * and then writes nothing; else 0. */
static int64_t reshape_and_cache(const char *key, const char *value, char *key_cache, char *value_cache,
                                 const int64_t *slot_mapping, int64_t num_tokens, int64_t row, int64_t key_stride,
                                 int64_t value_stride, int64_t num_slots, size_t elem) {
    if (num_tokens < 0 || row < 0 || num_slots < 0) return INT64_MIN; /* never -1 - t: native.py checks sizes */
    for (int64_t t = 0; t < num_tokens; t++)
        if (slot_mapping[t] >= num_slots || slot_mapping[t] < -1) return -1 - t;
    for (int64_t t = 0; t < num_tokens; t++) {
        int64_t slot = slot_mapping[t];
        if (slot < 0) continue;
        memcpy(key_cache + slot * row * elem, key + t * key_stride * elem, elem * (size_t)row);
        memcpy(value_cache + slot * row * elem, value + t * value_stride * elem, elem * (size_t)row);
    }
    return 0;
}

int64_t reshape_and_cache_f32(const float *key, const float *value, float *key_cache, float *value_cache,
                              const int64_t *slot_mapping, int64_t num_tokens, int64_t row, int64_t key_stride,
                              int64_t value_stride, int64_t num_slots) {
    return reshape_and_cache((const char *)key, (const char *)value, (char *)key_cache, (char *)value_cache,
                             slot_mapping, num_tokens, row, key_stride, value_stride, num_slots, sizeof(float));
}

/* The same for bf16 K/V and caches (uint16_t bit patterns, copied as they are). */
int64_t reshape_and_cache_bf16(const uint16_t *key, const uint16_t *value, uint16_t *key_cache, uint16_t *value_cache,
                               const int64_t *slot_mapping, int64_t num_tokens, int64_t row, int64_t key_stride,
                               int64_t value_stride, int64_t num_slots) {
    return reshape_and_cache((const char *)key, (const char *)value, (char *)key_cache, (char *)value_cache,
                             slot_mapping, num_tokens, row, key_stride, value_stride, num_slots, sizeof(uint16_t));
}
