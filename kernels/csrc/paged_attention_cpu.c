/*
 * Paged decode attention on a CPU, reading K and V in place through the block table.
 *
 * The "cpu" backend's decode op (pagedlab/kernels/native.py builds this file with the machine's C
 * compiler on first use and calls it through ctypes). It computes what pagedlab/kernels/reference.py
 * computes (tests/kernels/test_native.py checks them equal) without the reference's gather: every key
 * and value row is read where it lies in the paged cache, once per KV head for all the query heads
 * that share it (grouped-query attention). vLLM's CPU backend does the same job in C++
 * (paged_attention_v1 in csrc/cpu/attention.cpp, vLLM 0.6; later releases: csrc/cpu/cpu_attn.cpp).
 *
 * Layout, fp32 only (native.py checks dtypes, shapes and strides before the call):
 *   query        [num_seqs, num_q_heads, head_dim]; sequence stride q_stride, heads contiguous
 *   key_cache    [num_blocks, block_size, num_kv_heads, head_dim], contiguous (value_cache alike)
 *   block_tables int32 [num_seqs, table_width], rows table_stride apart: position p of sequence s
 *                lives in block block_tables[s * table_stride + p / block_size], row p % block_size
 *   seq_lens     int32 [num_seqs]: keys each sequence attends to (0: a zero output row)
 *   out          [num_seqs, num_q_heads, head_dim], contiguous
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* e^x for x <= 0 (a score minus its row's maximum) in a form the compiler vectorizes: libm's expf is
 * one scalar call per score. x = n ln2 + r with |r| <= ln2/2; e^r by its degree-6 Taylor polynomial
 * (relative error < 2e-7); 2^n written into the float's exponent bits; 0 below -87 (e^-87 = 1.6e-38).
 * The test against -87 compares the float's bits: a float compare-and-select keeps GCC 12 from
 * vectorizing the loop unless -ffast-math's -ffinite-math-only and -fno-signed-zeros are on. As unsigned
 * integers, negative floats order by magnitude and lie above every positive float. */
static inline __attribute__((always_inline)) float exp_nonpositive(float x) {
    const uint32_t minus_87 = 0xC2AE0000u; /* the bits of -87.0f */
    uint32_t bits_x;
    memcpy(&bits_x, &x, sizeof x);
    uint32_t below = bits_x > minus_87; /* x < -87 (or a negative NaN) */
    bits_x = below ? minus_87 : bits_x;   /* computed at -87, then zeroed */
    memcpy(&x, &bits_x, sizeof x);
    float n = (float)(int32_t)(x * 1.44269504f - 0.5f); /* round(x / ln2), x <= 0 */
    float r = x - n * 0.693145752f - n * 1.42860677e-6f; /* ln2 split in two: r is exact */
    float p = 1.0f + r * (1.0f + r * (0.5f + r * (1.0f / 6 + r * (1.0f / 24 + r * (1.0f / 120 + r * (1.0f / 720))))));
    int32_t bits = below ? 0 : ((int32_t)n + 127) << 23; /* 2^n, n in [-126, 0]; 0.0f below -87 */
    float two_n;
    memcpy(&two_n, &bits, sizeof two_n);
    return p * two_n;
}

#define MAX_GROUP 16     /* query heads per KV head (SmolLM2-135M: 3; Llama-3-8B: 4) */
#define MAX_HEAD_DIM 256
#define PREFETCH_AHEAD 16 /* rows: measured on 2 EPYC cores, 16 beat 4, 32 and 64 (1.3x vs none) */

/* Return codes (native.py turns each into an exception naming the sequence). */
enum { OK = 0, NO_MEMORY = -1, BAD_SHAPE = -2, BAD_BLOCK_ID = -3, SEQ_TOO_LONG = -4, ABOVE_MAX_LEN = -5, NEGATIVE_LEN = -6 };

static inline void prefetch_row(const float *row, int64_t head_dim) {
    for (int64_t d = 0; d < head_dim; d += 16) __builtin_prefetch(row + d); /* one 64-byte line */
}

/* rows[t] = where position t's row starts in a cache (in floats), for t < seq_len: position t lives in
 * block table[t / block_size], row t % block_size. Walked block by block: no division per position. */
static void row_offsets(int64_t *rows, const int32_t *table, int64_t seq_len, int64_t block_size,
                        int64_t row_stride) {
    for (int64_t t = 0, b = 0; t < seq_len; b++)
        for (int64_t r = 0; r < block_size && t < seq_len; r++, t++)
            rows[t] = ((int64_t)table[b] * block_size + r) * row_stride;
}

/* One (sequence, KV head) task: `group` query heads against the sequence's keys and values, the
 * exact softmax in three passes over `scores` ([group][seq_len] floats):
 *   1. scores[g][t] = scale * q_g . k_t          (each key row read once for the whole group)
 *   2. scores[g][t] = exp(score - max_g), summed per head
 *   3. out_g = sum_t scores[g][t] * v_t / sum_g  (each value row read once for the whole group)
 * `rows` holds row_offsets() of the sequence (shifted to this KV head). Rows PREFETCH_AHEAD positions
 * on are prefetched: blocks are scattered, so the hardware prefetcher loses the stream at every block
 * boundary. always_inline: the caller passes constant group and head_dim for the common shapes, and
 * the compiler unrolls and vectorizes the loops for them. */
static inline __attribute__((always_inline)) void attend_one(
    float *out, const float *q, const float *key_cache, const float *value_cache, const int64_t *rows,
    int64_t seq_len, int64_t group, int64_t head_dim, float scale, float *scores) {
    for (int64_t t = 0; t < seq_len; t++) { /* pass 1 */
        const float *k = key_cache + rows[t];
        if (t + PREFETCH_AHEAD < seq_len) prefetch_row(key_cache + rows[t + PREFETCH_AHEAD], head_dim);
        for (int64_t g = 0; g < group; g++) {
            const float *qg = q + g * head_dim;
            float dot = 0.0f;
#pragma omp simd reduction(+ : dot)
            for (int64_t d = 0; d < head_dim; d++) dot += qg[d] * k[d];
            scores[g * seq_len + t] = dot * scale;
        }
    }
    float denom[MAX_GROUP];
    for (int64_t g = 0; g < group; g++) { /* pass 2 */
        float *sg = scores + g * seq_len, max_score = sg[0], sum = 0.0f;
#pragma omp simd reduction(max : max_score)
        for (int64_t t = 1; t < seq_len; t++) max_score = sg[t] > max_score ? sg[t] : max_score;
#pragma omp simd reduction(+ : sum)
        for (int64_t t = 0; t < seq_len; t++) {
            sg[t] = exp_nonpositive(sg[t] - max_score);
            sum += sg[t];
        }
        denom[g] = sum;
    }
    float acc[MAX_GROUP * MAX_HEAD_DIM];
    memset(acc, 0, sizeof(float) * (size_t)(group * head_dim));
    for (int64_t t = 0; t < seq_len; t++) { /* pass 3 */
        const float *v = value_cache + rows[t];
        if (t + PREFETCH_AHEAD < seq_len) prefetch_row(value_cache + rows[t + PREFETCH_AHEAD], head_dim);
        for (int64_t g = 0; g < group; g++) {
            float p = scores[g * seq_len + t], *a = acc + g * head_dim;
#pragma omp simd
            for (int64_t d = 0; d < head_dim; d++) a[d] += p * v[d];
        }
    }
    for (int64_t g = 0; g < group; g++)
        for (int64_t d = 0; d < head_dim; d++) out[g * head_dim + d] = acc[g * head_dim + d] / denom[g];
}

/* The block ids sequence s reads: OK, or the first problem (its code; *bad_seq names the sequence). */
static int check_table(const int32_t *table, int64_t seq_len, int64_t table_width, int64_t block_size,
                       int64_t num_blocks) {
    int64_t used = (seq_len + block_size - 1) / block_size;
    if (used > table_width) return SEQ_TOO_LONG;
    for (int64_t i = 0; i < used; i++)
        if (table[i] < 0 || table[i] >= num_blocks) return BAD_BLOCK_ID;
    return OK;
}

/* Every (sequence, KV head) task, spread over num_threads OpenMP threads (one without OpenMP).
 * Returns OK or the first error code; *bad_seq is then the sequence it concerns (-1: none). Nothing
 * is read through a table that fails check_table: its output rows are zero. */
int paged_decode_attention_f32(float *out, const float *query, const float *key_cache, const float *value_cache,
                               const int32_t *block_tables, const int32_t *seq_lens, int64_t num_seqs,
                               int64_t num_q_heads, int64_t num_kv_heads, int64_t head_dim, int64_t block_size,
                               int64_t num_blocks, int64_t q_stride, int64_t table_stride, int64_t table_width,
                               int64_t max_seq_len,
                               float scale, int num_threads, int64_t *bad_seq) {
    const int64_t group = num_q_heads / num_kv_heads, tasks = num_seqs * num_kv_heads;
    if (group > MAX_GROUP || head_dim > MAX_HEAD_DIM || group * num_kv_heads != num_q_heads) return BAD_SHAPE;
    int status = OK;
    *bad_seq = -1;
#pragma omp parallel num_threads(num_threads) if (num_threads > 1 && tasks > 1)
    {
        /* Per thread: the scores of one task and the row offsets of its sequence. */
        size_t longest = (size_t)(max_seq_len > 0 ? max_seq_len : 1);
        float *scores = malloc(sizeof(float) * longest * (size_t)group);
        int64_t *rows = malloc(sizeof(int64_t) * longest);
#pragma omp for schedule(dynamic, 1)
        for (int64_t task = 0; task < tasks; task++) {
            int64_t s = task / num_kv_heads, h = task % num_kv_heads, len = seq_lens[s];
            float *o = out + (s * num_q_heads + h * group) * head_dim;
            const float *q = query + s * q_stride + h * group * head_dim;
            const float *k = key_cache + h * head_dim, *v = value_cache + h * head_dim; /* this head's rows */
            const int32_t *table = block_tables + s * table_stride;
            int problem = !scores || !rows       ? NO_MEMORY
                          : len > max_seq_len ? ABOVE_MAX_LEN
                          : len < 0           ? NEGATIVE_LEN
                                               : check_table(table, len, table_width, block_size, num_blocks);
            if (problem != OK || len <= 0) {
                memset(o, 0, sizeof(float) * (size_t)(group * head_dim));
                if (problem != OK) {
#pragma omp critical
                    if (status == OK) status = problem, *bad_seq = s;
                }
                continue;
            }
            row_offsets(rows, table, len, block_size, num_kv_heads * head_dim);
            if (group == 3 && head_dim == 64) /* SmolLM2-135M's shape, specialized */
                attend_one(o, q, k, v, rows, len, 3, 64, scale, scores);
            else if (group == 4 && head_dim == 64)
                attend_one(o, q, k, v, rows, len, 4, 64, scale, scores);
            else
                attend_one(o, q, k, v, rows, len, group, head_dim, scale, scores);
        }
        free(scores);
        free(rows);
    }
    return status;
}
