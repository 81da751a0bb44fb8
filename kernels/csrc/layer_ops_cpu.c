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
 * fp32 only; "row" strides are in elements; the last dimension is contiguous.
 */
#include <math.h>
#include <stdint.h>
#include <string.h>

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

/* key_cache/value_cache rows [slot] = key/value [t] for every token with slot_mapping[t] >= 0
 * (-1 marks padding: skipped). Returns -1 - t for the first token whose slot is past the cache,
 * and then writes nothing; else 0. */
int64_t reshape_and_cache_f32(const float *key, const float *value, float *key_cache, float *value_cache,
                              const int64_t *slot_mapping, int64_t num_tokens, int64_t row, int64_t key_stride,
                              int64_t value_stride, int64_t num_slots) {
    if (num_tokens < 0 || row < 0 || num_slots < 0) return INT64_MIN; /* never -1 - t: native.py checks sizes */
    for (int64_t t = 0; t < num_tokens; t++)
        if (slot_mapping[t] >= num_slots || slot_mapping[t] < -1) return -1 - t;
    for (int64_t t = 0; t < num_tokens; t++) {
        int64_t slot = slot_mapping[t];
        if (slot < 0) continue;
        memcpy(key_cache + slot * row, key + t * key_stride, sizeof(float) * (size_t)row);
        memcpy(value_cache + slot * row, value + t * value_stride, sizeof(float) * (size_t)row);
    }
    return 0;
}
