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
 * Layout (the query and out fp32; the caches fp32, or bf16 in the *_bf16kv entry points, each row converted to
 * fp32 as it is read; paged_decode_attention_bf16 takes a bf16 query and writes a bf16 out as well, converted
 * per task, so a bf16 model needs no conversion op around the call: every sum below is an fp32 sum either way; native.py checks devices, dtypes, ranks, shapes and strides before the call; here
 * every size argument is checked once per call, and every block id, lane slot and length a task reads
 * once per task, outside the loops over keys):
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
enum {
    OK = 0, NO_MEMORY = -1, BAD_SHAPE = -2, BAD_BLOCK_ID = -3, SEQ_TOO_LONG = -4, ABOVE_MAX_LEN = -5,
    NEGATIVE_LEN = -6, BAD_ARGUMENT = -7, /* a size or count below its minimum, or one whose products overflow */
    BAD_CU_SEQLENS = -8,                  /* prefill: cu_seqlens_q not 0 .. total_q, or decreasing */
    MORE_QUERIES_THAN_LEN = -9            /* prefill: a sequence's q_len above its seq_len */
};

static inline void prefetch_row(const void *row, int64_t bytes) {
    for (int64_t b = 0; b < bytes; b += 64) __builtin_prefetch((const char *)row + b); /* one 64-byte line */
}

/* A bf16 value as the fp32 it stands for: bf16 is the top half of an fp32 (exact, no rounding). */
static inline __attribute__((always_inline)) float bf16_to_f32(uint16_t h) {
    uint32_t bits = (uint32_t)h << 16;
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}
/* An fp32 value rounded to the nearest bf16, ties to even (torch's conversion: c10::round_to_nearest_even);
 * a NaN stays a (quiet) NaN. */
static inline __attribute__((always_inline)) uint16_t f32_to_bf16(float f) {
    uint32_t bits;
    memcpy(&bits, &f, sizeof bits);
    if ((bits & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((bits >> 16) | 0x0040u);
    bits += 0x7fffu + ((bits >> 16) & 1u);
    return (uint16_t)(bits >> 16);
}
#define LOAD_F32(x) (x)
#define LOAD_BF16(x) bf16_to_f32(x)

/* One (sequence, KV head) task: `group` query heads against the n keys and values whose rows are
 * krows[t] and vrows[t], the exact softmax in three passes over `scores` ([group][n] floats):
 *   1. scores[g][t] = scale * q_g . k_t          (each key row read once for the whole group)
 *   2. scores[g][t] = exp(score - max_g), summed per head
 *   3. out_g = sum_t scores[g][t] * v_t / sum_g  (each value row read once for the whole group)
 * Rows PREFETCH_AHEAD positions on are prefetched: blocks are scattered, so the hardware prefetcher
 * loses the stream at every block boundary. always_inline: the caller passes constant group and
 * head_dim for the common shapes, and the compiler unrolls and vectorizes the loops for them.
 * Defined once per cache element type T (float; uint16_t holding bf16), LOAD(x) giving x as fp32. */
#define DEFINE_ATTEND_ONE(NAME, T, LOAD) \
static inline __attribute__((always_inline)) void NAME(                                                     \
    float *out, const float *q, const void *const *krows, const void *const *vrows, int64_t n,              \
    int64_t group, int64_t head_dim, float scale, float *scores) {                                          \
    for (int64_t t = 0; t < n; t++) { /* pass 1 */                                                          \
        const T *k = krows[t];                                                                              \
        if (t + PREFETCH_AHEAD < n) prefetch_row(krows[t + PREFETCH_AHEAD], head_dim * (int64_t)sizeof(T)); \
        for (int64_t g = 0; g < group; g++) {                                                               \
            const float *qg = q + g * head_dim;                                                             \
            float dot = 0.0f;                                                                               \
_Pragma("omp simd reduction(+ : dot)")                                                                      \
            for (int64_t d = 0; d < head_dim; d++) dot += qg[d] * LOAD(k[d]);                               \
            scores[g * n + t] = dot * scale;                                                                \
        }                                                                                                   \
    }                                                                                                       \
    float denom[MAX_GROUP];                                                                                 \
    for (int64_t g = 0; g < group; g++) { /* pass 2 */                                                      \
        float *sg = scores + g * n, max_score = sg[0], sum = 0.0f;                                          \
_Pragma("omp simd reduction(max : max_score)")                                                              \
        for (int64_t t = 1; t < n; t++) max_score = sg[t] > max_score ? sg[t] : max_score;                  \
_Pragma("omp simd reduction(+ : sum)")                                                                      \
        for (int64_t t = 0; t < n; t++) {                                                                   \
            sg[t] = exp_nonpositive(sg[t] - max_score);                                                     \
            sum += sg[t];                                                                                   \
        }                                                                                                   \
        denom[g] = sum;                                                                                     \
    }                                                                                                       \
    float acc[MAX_GROUP * MAX_HEAD_DIM];                                                                    \
    memset(acc, 0, sizeof(float) * (size_t)(group * head_dim));                                             \
    for (int64_t t = 0; t < n; t++) { /* pass 3 */                                                          \
        const T *v = vrows[t];                                                                              \
        if (t + PREFETCH_AHEAD < n) prefetch_row(vrows[t + PREFETCH_AHEAD], head_dim * (int64_t)sizeof(T)); \
        for (int64_t g = 0; g < group; g++) {                                                               \
            float p = scores[g * n + t], *a = acc + g * head_dim;                                           \
_Pragma("omp simd")                                                                                         \
            for (int64_t d = 0; d < head_dim; d++) a[d] += p * LOAD(v[d]);                                  \
        }                                                                                                   \
    }                                                                                                       \
    for (int64_t g = 0; g < group; g++)                                                                     \
        for (int64_t d = 0; d < head_dim; d++) out[g * head_dim + d] = acc[g * head_dim + d] / denom[g];    \
}
DEFINE_ATTEND_ONE(attend_one_f32, float, LOAD_F32)
DEFINE_ATTEND_ONE(attend_one_bf16, uint16_t, LOAD_BF16)

/* Where a task's rows come from: fills krows/vrows (the rows of KV head h of sequence s that it
 * attends to, in order) and *n; returns OK or an error code (then nothing is read). */
typedef int (*find_rows_fn)(const void *how, int64_t s, int64_t h, const void **krows, const void **vrows,
                            int64_t *n);

/* Every (sequence, KV head) task, spread over num_threads OpenMP threads (one without OpenMP); a task
 * with no rows gets a zero output; bf16: the caches' rows are bf16 (uint16_t), else fp32; io_bf16: the query
 * and out are bf16 too (each task converts its query rows to fp32 and rounds its output once, as torch's
 * .float() and .to(torch.bfloat16) around the fp32 call would), else fp32. Returns OK or the first error code, with *bad_seq its sequence. */
static int run_tasks(void *out, const void *query, int64_t num_seqs, int64_t num_q_heads, int64_t num_kv_heads,
                     int64_t head_dim, int64_t q_stride, int64_t max_rows, float scale, int num_threads,
                     int bf16, int io_bf16, find_rows_fn find_rows, const void *how, int64_t *bad_seq) {
    *bad_seq = -1;
    if (num_seqs < 0 || num_kv_heads < 1 || num_q_heads < 1 || head_dim < 1 || max_rows < 0 || num_threads < 1)
        return BAD_ARGUMENT;
    const int64_t group = num_q_heads / num_kv_heads;
    if (group > MAX_GROUP || head_dim > MAX_HEAD_DIM || group * num_kv_heads != num_q_heads) return BAD_SHAPE;
    /* The per-thread buffers' sizes, checked: a max_rows near 2^62 must not wrap into a small buffer. */
    int64_t tasks;
    size_t longest = (size_t)(max_rows > 0 ? max_rows : 1), score_bytes, row_bytes;
    if (__builtin_mul_overflow(num_seqs, num_kv_heads, &tasks) ||
        __builtin_mul_overflow(longest, sizeof(float) * (size_t)group, &score_bytes) ||
        __builtin_mul_overflow(longest, sizeof(void *), &row_bytes))
        return BAD_ARGUMENT;
    int status = OK;
#pragma omp parallel num_threads(num_threads) if (num_threads > 1 && tasks > 1)
    {
        /* Per thread: one task's scores and row pointers (a task never has more than max_rows rows). */
        float *scores = malloc(score_bytes);
        const void **krows = malloc(row_bytes), **vrows = malloc(row_bytes);
#pragma omp for schedule(dynamic, 1)
        for (int64_t task = 0; task < tasks; task++) {
            int64_t s = task / num_kv_heads, h = task % num_kv_heads, n = 0;
            const int64_t out_at = (s * num_q_heads + h * group) * head_dim, q_at = s * q_stride + h * group * head_dim;
            float qbuf[MAX_GROUP * MAX_HEAD_DIM], obuf[MAX_GROUP * MAX_HEAD_DIM]; /* used when io_bf16 */
            float *o = io_bf16 ? obuf : (float *)out + out_at;
            const float *q = io_bf16 ? qbuf : (const float *)query + q_at;
            if (io_bf16)
                for (int64_t i = 0; i < group * head_dim; i++) qbuf[i] = bf16_to_f32(((const uint16_t *)query)[q_at + i]);
            int problem = !scores || !krows || !vrows ? NO_MEMORY : find_rows(how, s, h, krows, vrows, &n);
            if (problem != OK || n == 0) {
                memset(o, 0, sizeof(float) * (size_t)(group * head_dim));
                if (problem != OK) {
#pragma omp critical
                    if (status == OK) status = problem, *bad_seq = s;
                }
            } else if (bf16) {
                if (group == 3 && head_dim == 64) /* SmolLM2-135M's shape, specialized */
                    attend_one_bf16(o, q, krows, vrows, n, 3, 64, scale, scores);
                else
                    attend_one_bf16(o, q, krows, vrows, n, group, head_dim, scale, scores);
            } else if (group == 3 && head_dim == 64) { /* SmolLM2-135M's shape, specialized */
                attend_one_f32(o, q, krows, vrows, n, 3, 64, scale, scores);
            } else if (group == 4 && head_dim == 64) {
                attend_one_f32(o, q, krows, vrows, n, 4, 64, scale, scores);
            } else {
                attend_one_f32(o, q, krows, vrows, n, group, head_dim, scale, scores);
            }
            if (io_bf16)
                for (int64_t i = 0; i < group * head_dim; i++) ((uint16_t *)out)[out_at + i] = f32_to_bf16(obuf[i]);
        }
        free(scores);
        free(krows);
        free(vrows);
    }
    return status;
}

/* --- through the block table ------------------------------------------------------------------ */
typedef struct {
    const char *key_cache, *value_cache;
    const int32_t *block_tables, *seq_lens;
    int64_t num_kv_heads, head_dim, block_size, num_blocks, table_stride, table_width, max_seq_len, elem_bytes;
} TableRows;

/* Position t of sequence s lives in block table[t / block_size], row t % block_size: walked block by
 * block (no division per position), after checking its length (at most table_width blocks and
 * max_seq_len rows: the row buffers' size) and every block id it reads. */
static int rows_from_table(const void *how, int64_t s, int64_t h, const void **krows, const void **vrows,
                           int64_t *n) {
    const TableRows *c = how;
    const int32_t *table = c->block_tables + s * c->table_stride;
    const int64_t len = c->seq_lens[s];
    if (len < 0) return NEGATIVE_LEN;
    const int64_t used = len / c->block_size + (len % c->block_size != 0); /* no len + block_size overflow */
    if (used > c->table_width) return SEQ_TOO_LONG;
    if (len > c->max_seq_len) return ABOVE_MAX_LEN;
    for (int64_t i = 0; i < used; i++)
        if (table[i] < 0 || table[i] >= c->num_blocks) return BAD_BLOCK_ID;
    const int64_t row_stride = c->num_kv_heads * c->head_dim, head = h * c->head_dim;
    for (int64_t t = 0, b = 0; t < len; b++)
        for (int64_t r = 0; r < c->block_size && t < len; r++, t++) {
            int64_t row = (((int64_t)table[b] * c->block_size + r) * row_stride + head) * c->elem_bytes;
            krows[t] = c->key_cache + row, vrows[t] = c->value_cache + row;
        }
    *n = len;
    return OK;
}

static int paged_decode_attention(void *out, const void *query, const void *key_cache, const void *value_cache,
                                  const int32_t *block_tables, const int32_t *seq_lens, int64_t num_seqs,
                                  int64_t num_q_heads, int64_t num_kv_heads, int64_t head_dim, int64_t block_size,
                                  int64_t num_blocks, int64_t q_stride, int64_t table_stride, int64_t table_width,
                                  int64_t max_seq_len, float scale, int num_threads, int bf16, int io_bf16,
                                  int64_t *bad_seq) {
    if (block_size < 1 || num_blocks < 0 || table_width < 0 || table_stride < 0 || max_seq_len < 0) {
        *bad_seq = -1;
        return BAD_ARGUMENT;
    }
    TableRows how = {key_cache,  value_cache,  block_tables, seq_lens,    num_kv_heads,
                     head_dim,   block_size,   num_blocks,   table_stride, table_width,
                     max_seq_len, bf16 ? (int64_t)sizeof(uint16_t) : (int64_t)sizeof(float)};
    return run_tasks(out, query, num_seqs, num_q_heads, num_kv_heads, head_dim, q_stride, max_seq_len, scale,
                     num_threads, bf16, io_bf16, rows_from_table, &how, bad_seq);
}

int paged_decode_attention_f32(float *out, const float *query, const float *key_cache, const float *value_cache,
                               const int32_t *block_tables, const int32_t *seq_lens, int64_t num_seqs,
                               int64_t num_q_heads, int64_t num_kv_heads, int64_t head_dim, int64_t block_size,
                               int64_t num_blocks, int64_t q_stride, int64_t table_stride, int64_t table_width,
                               int64_t max_seq_len, float scale, int num_threads, int64_t *bad_seq) {
    return paged_decode_attention(out, query, key_cache, value_cache, block_tables, seq_lens, num_seqs, num_q_heads,
                                  num_kv_heads, head_dim, block_size, num_blocks, q_stride, table_stride, table_width,
                                  max_seq_len, scale, num_threads, 0, 0, bad_seq);
}

/* The same with bf16 caches (uint16_t bit patterns); query and out stay fp32. */
int paged_decode_attention_bf16kv(float *out, const float *query, const uint16_t *key_cache,
                                  const uint16_t *value_cache, const int32_t *block_tables, const int32_t *seq_lens,
                                  int64_t num_seqs, int64_t num_q_heads, int64_t num_kv_heads, int64_t head_dim,
                                  int64_t block_size, int64_t num_blocks, int64_t q_stride, int64_t table_stride,
                                  int64_t table_width, int64_t max_seq_len, float scale, int num_threads,
                                  int64_t *bad_seq) {
    return paged_decode_attention(out, query, key_cache, value_cache, block_tables, seq_lens, num_seqs, num_q_heads,
                                  num_kv_heads, head_dim, block_size, num_blocks, q_stride, table_stride, table_width,
                                  max_seq_len, scale, num_threads, 1, 0, bad_seq);
}

/* All bf16: the query, out and caches (uint16_t bit patterns); every sum fp32, the output rounded once. */
int paged_decode_attention_bf16(uint16_t *out, const uint16_t *query, const uint16_t *key_cache,
                                const uint16_t *value_cache, const int32_t *block_tables, const int32_t *seq_lens,
                                int64_t num_seqs, int64_t num_q_heads, int64_t num_kv_heads, int64_t head_dim,
                                int64_t block_size, int64_t num_blocks, int64_t q_stride, int64_t table_stride,
                                int64_t table_width, int64_t max_seq_len, float scale, int num_threads,
                                int64_t *bad_seq) {
    return paged_decode_attention(out, query, key_cache, value_cache, block_tables, seq_lens, num_seqs, num_q_heads,
                                  num_kv_heads, head_dim, block_size, num_blocks, q_stride, table_stride, table_width,
                                  max_seq_len, scale, num_threads, 1, 1, bad_seq);
}

/* --- through the lanes a tile-load plan chose (pagedlab.model.attention.TilePlan) --------------- */
typedef struct {
    const char *key_cache, *value_cache;
    const void *zero_row; /* MAX_HEAD_DIM zero floats: also a zero bf16 row */
    const int64_t *slots; /* [num_seqs, num_lanes]: flat slot + 1, or 0 for a zero row */
    const uint8_t *mask;  /* [num_seqs, num_lanes]: 1 = the lane attends */
    const int32_t *seq_lens;
    int64_t num_kv_heads, head_dim, num_lanes, num_slots, elem_bytes;
} LaneRows;

/* The attending lanes of sequence s, in order: a lane's row is its slot's, or zero_row for slot 0. */
static int rows_from_lanes(const void *how, int64_t s, int64_t h, const void **krows, const void **vrows,
                           int64_t *n) {
    const LaneRows *c = how;
    const int64_t *slots = c->slots + s * c->num_lanes;
    const uint8_t *mask = c->mask + s * c->num_lanes;
    const int64_t row_stride = c->num_kv_heads * c->head_dim, head = h * c->head_dim;
    if (c->seq_lens[s] <= 0) return c->seq_lens[s] < 0 ? NEGATIVE_LEN : OK; /* *n stays 0: a zero row */
    for (int64_t l = 0; l < c->num_lanes; l++)
        if (mask[l] && (slots[l] < 0 || slots[l] > c->num_slots)) return BAD_BLOCK_ID;
    int64_t m = 0;
    for (int64_t l = 0; l < c->num_lanes; l++) {
        if (!mask[l]) continue;
        int64_t row = ((slots[l] - 1) * row_stride + head) * c->elem_bytes;
        krows[m] = slots[l] ? c->key_cache + row : c->zero_row;
        vrows[m] = slots[l] ? c->value_cache + row : c->zero_row;
        m++;
    }
    *n = m;
    return OK;
}

static int lane_decode_attention(float *out, const float *query, const void *key_cache, const void *value_cache,
                                 const int64_t *slots, const uint8_t *mask, const int32_t *seq_lens, int64_t num_seqs,
                                 int64_t num_q_heads, int64_t num_kv_heads, int64_t head_dim, int64_t num_lanes,
                                 int64_t num_slots, int64_t q_stride, float scale, int num_threads, int bf16,
                                 int64_t *bad_seq) {
    static const float zero_row[MAX_HEAD_DIM] = {0};
    if (num_lanes < 0 || num_slots < 0) {
        *bad_seq = -1;
        return BAD_ARGUMENT;
    }
    LaneRows how = {key_cache, value_cache, zero_row,  slots,     mask,
                    seq_lens,  num_kv_heads, head_dim, num_lanes, num_slots,
                    bf16 ? (int64_t)sizeof(uint16_t) : (int64_t)sizeof(float)};
    return run_tasks(out, query, num_seqs, num_q_heads, num_kv_heads, head_dim, q_stride, num_lanes, scale,
                     num_threads, bf16, 0, rows_from_lanes, &how, bad_seq);
}

int lane_decode_attention_f32(float *out, const float *query, const float *key_cache, const float *value_cache,
                              const int64_t *slots, const uint8_t *mask, const int32_t *seq_lens, int64_t num_seqs,
                              int64_t num_q_heads, int64_t num_kv_heads, int64_t head_dim, int64_t num_lanes,
                              int64_t num_slots, int64_t q_stride, float scale, int num_threads, int64_t *bad_seq) {
    return lane_decode_attention(out, query, key_cache, value_cache, slots, mask, seq_lens, num_seqs, num_q_heads,
                                 num_kv_heads, head_dim, num_lanes, num_slots, q_stride, scale, num_threads, 0,
                                 bad_seq);
}

/* The same with bf16 caches (uint16_t bit patterns); query and out stay fp32. */
int lane_decode_attention_bf16kv(float *out, const float *query, const uint16_t *key_cache,
                                 const uint16_t *value_cache, const int64_t *slots, const uint8_t *mask,
                                 const int32_t *seq_lens, int64_t num_seqs, int64_t num_q_heads, int64_t num_kv_heads,
                                 int64_t head_dim, int64_t num_lanes, int64_t num_slots, int64_t q_stride, float scale,
                                 int num_threads, int64_t *bad_seq) {
    return lane_decode_attention(out, query, key_cache, value_cache, slots, mask, seq_lens, num_seqs, num_q_heads,
                                 num_kv_heads, head_dim, num_lanes, num_slots, q_stride, scale, num_threads, 1,
                                 bad_seq);
}


/* --- prefill / extend: many query tokens per sequence, causal ------------------------------------ */
/*
 * paged_prefill_attention: reference.paged_prefill_attention's contract. Sequence s's q_len =
 * cu_seqlens_q[s + 1] - cu_seqlens_q[s] queries are query rows cu_seqlens_q[s] .. (row stride q_stride,
 * heads contiguous) at positions ctx .. seq_lens[s] - 1, ctx = seq_lens[s] - q_len; query i sees keys
 * 0 .. ctx + i, read in place through the block table as in decode. out is [total_q, num_q_heads, head_dim],
 * contiguous. A sequence with q_len 0 writes nothing (it has no output rows).
 *
 * Work items: (sequence, KV head, tile of PREFILL_QT queries), spread over OpenMP threads, so one long
 * prompt still uses every core. An item's G * PREFILL_QT query rows (the G query heads sharing the KV head,
 * for each query of the tile) go over the keys they can see PREFILL_KC at a time; each chunk of keys is
 * staged as fp32 in the thread's scratch (K transposed [head_dim][KC], V [KC][head_dim]: bf16 rows converted
 * here, once per item and chunk) and folded into every row by the online softmax (a running max m and sum l
 * per row; the row's accumulator rescaled by e^(m_old - m_new) when the max grows): every sum fp32. The
 * thread's scratch is a few hundred KB at most, whatever the context length.
 */
/* The prefill kernel's products and sums may fuse into FMAs (one rounding instead of two: the sums stay fp32,
 * within the tests' fp32 tolerance of the reference); the library's -ffp-contract=off, which keeps RoPE's
 * roundings torch's, holds everywhere else. GCC's pragma; other compilers ignore it. */
#pragma GCC push_options
#pragma GCC optimize("fp-contract=fast")
#define PREFILL_QT 16 /* queries per work item: each staged chunk serves group x 16 rows */
#define PREFILL_KC 64 /* keys per chunk */

typedef struct {
    /* q, acc [rows][head_dim]; scores [rows][KC]; m, l [rows]; kt [head_dim][KC]; v [KC][head_dim] */
    float *q, *acc, *scores, *m, *l, *kt, *v;
} PrefillScratch;

/* VW floats in one vector register: 16 with AVX-512, else 8 (AVX, or two SSE halves, or scalars where the
 * machine has neither). The register-blocked loops below hold their sums in these, so every key and value
 * element loaded from the staged chunk serves 4 query rows. */
#if defined(__AVX512F__)
#define VW 16
#else
#define VW 8
#endif
typedef float vecf __attribute__((vector_size(VW * sizeof(float))));
static inline __attribute__((always_inline)) vecf loadv(const float *p) {
    vecf x;
    memcpy(&x, p, sizeof x);
    return x;
}
static inline __attribute__((always_inline)) void storev(float *p, vecf x) { memcpy(p, &x, sizeof x); }

/* scores[r][t0 .. t0 + 2 VW) = q_r . k_t for the 4 rows at q (head_dim apart), keys t0 .. from kt [head_dim][KC]. */
static inline __attribute__((always_inline)) void scores_4xw(float *scores, const float *q, const float *kt,
                                                             int64_t head_dim, int64_t t0) {
    vecf a00 = {0}, a01 = {0}, a10 = {0}, a11 = {0}, a20 = {0}, a21 = {0}, a30 = {0}, a31 = {0};
    for (int64_t d = 0; d < head_dim; d++) {
        const vecf k0 = loadv(kt + d * PREFILL_KC + t0), k1 = loadv(kt + d * PREFILL_KC + t0 + VW);
        const float q0 = q[d], q1 = q[head_dim + d], q2 = q[2 * head_dim + d], q3 = q[3 * head_dim + d];
        a00 += q0 * k0, a01 += q0 * k1, a10 += q1 * k0, a11 += q1 * k1;
        a20 += q2 * k0, a21 += q2 * k1, a30 += q3 * k0, a31 += q3 * k1;
    }
    storev(scores + t0, a00), storev(scores + t0 + VW, a01);
    storev(scores + PREFILL_KC + t0, a10), storev(scores + PREFILL_KC + t0 + VW, a11);
    storev(scores + 2 * PREFILL_KC + t0, a20), storev(scores + 2 * PREFILL_KC + t0 + VW, a21);
    storev(scores + 3 * PREFILL_KC + t0, a30), storev(scores + 3 * PREFILL_KC + t0 + VW, a31);
}

/* acc[r][d0 .. d0 + 2 VW) += sum_t p[r][t] v_t[d0 ..] for the 4 rows at acc (head_dim apart) and p (KC apart). */
static inline __attribute__((always_inline)) void values_4xw(float *acc, const float *p, const float *v,
                                                             int64_t head_dim, int64_t kc, int64_t d0) {
    float *a0 = acc + d0, *a1 = a0 + head_dim, *a2 = a1 + head_dim, *a3 = a2 + head_dim;
    vecf a00 = loadv(a0), a01 = loadv(a0 + VW), a10 = loadv(a1), a11 = loadv(a1 + VW);
    vecf a20 = loadv(a2), a21 = loadv(a2 + VW), a30 = loadv(a3), a31 = loadv(a3 + VW);
    for (int64_t t = 0; t < kc; t++) {
        const vecf v0 = loadv(v + t * head_dim + d0), v1 = loadv(v + t * head_dim + d0 + VW);
        const float p0 = p[t], p1 = p[PREFILL_KC + t], p2 = p[2 * PREFILL_KC + t], p3 = p[3 * PREFILL_KC + t];
        a00 += p0 * v0, a01 += p0 * v1, a10 += p1 * v0, a11 += p1 * v1;
        a20 += p2 * v0, a21 += p2 * v1, a30 += p3 * v0, a31 += p3 * v1;
    }
    storev(a0, a00), storev(a0 + VW, a01), storev(a1, a10), storev(a1 + VW, a11);
    storev(a2, a20), storev(a2 + VW, a21), storev(a3, a30), storev(a3 + VW, a31);
}

/* One work item: `rows` = group * nq query rows (query i0 + r / group of the sequence, head h * group + r % group),
 * in w->q (fp32, unscaled; rows up to a multiple of 4 padded with zeros), over the first ctx + i0 + nq keys.
 * Per chunk of KC keys: stage K and V as fp32; scores of 4 rows x 2 VW keys at a time (head_dim a multiple of
 * 2 VW; else one row and key at a time); per row, the online softmax update (probabilities past the keys a row
 * may see set to 0); then the weighted values, 4 rows x 2 VW dims at a time. */
#define DEFINE_PREFILL_ITEM(NAME, T, LOAD)                                                                        \
static inline __attribute__((always_inline)) void NAME(                                                        \
    const PrefillScratch *w, const char *key_cache, const char *value_cache, const int32_t *table,             \
    int64_t block_size, int64_t row_stride_bytes, int64_t head_bytes, int64_t rows, int64_t group,             \
    int64_t ctx, int64_t i0, int64_t head_dim, float scale) {                                                  \
    const int64_t n_keys = ctx + i0 + rows / group, rows4 = (rows + 3) & ~(int64_t)3;                          \
    const int blocked = head_dim % (2 * VW) == 0;                                                                    \
    for (int64_t r = 0; r < rows4; r++) w->m[r] = -__builtin_inff(), w->l[r] = 0.0f;                           \
    memset(w->acc, 0, sizeof(float) * (size_t)(rows4 * head_dim));                                            \
    for (int64_t t0 = 0; t0 < n_keys; t0 += PREFILL_KC) {                                                      \
        const int64_t kc = n_keys - t0 < PREFILL_KC ? n_keys - t0 : PREFILL_KC, kcw = (kc + 2 * VW - 1) / (2 * VW) * (2 * VW); \
        for (int64_t t = 0; t < kcw; t++) { /* stage the chunk as fp32; K zeros past its end */                \
            if (t < kc) {                                                                                      \
                const int64_t p = t0 + t, off = (int64_t)table[p / block_size] * block_size + p % block_size;  \
                const T *k = (const T *)(key_cache + off * row_stride_bytes + head_bytes);                     \
                const T *v = (const T *)(value_cache + off * row_stride_bytes + head_bytes);                   \
                for (int64_t d = 0; d < head_dim; d++) w->kt[d * PREFILL_KC + t] = LOAD(k[d]);                 \
                for (int64_t d = 0; d < head_dim; d++) w->v[t * head_dim + d] = LOAD(v[d]);                    \
            } else {                                                                                           \
                for (int64_t d = 0; d < head_dim; d++) w->kt[d * PREFILL_KC + t] = 0.0f;                       \
            }                                                                                                  \
        }                                                                                                      \
        if (blocked) {                                                                                         \
            for (int64_t r = 0; r < rows4; r += 4)                                                             \
                for (int64_t t = 0; t < kcw; t += 2 * VW)                                                      \
                    scores_4xw(w->scores + r * PREFILL_KC, w->q + r * head_dim, w->kt, head_dim, t);           \
        } else {                                                                                               \
            for (int64_t r = 0; r < rows4; r++)                                                                \
                for (int64_t t = 0; t < kc; t++) {                                                             \
                    float dot = 0.0f;                                                                          \
                    for (int64_t d = 0; d < head_dim; d++) dot += w->q[r * head_dim + d] * w->kt[d * PREFILL_KC + t]; \
                    w->scores[r * PREFILL_KC + t] = dot;                                                       \
                }                                                                                              \
        }                                                                                                      \
        for (int64_t r = 0; r < rows4; r++) {                                                                  \
            /* keys of this chunk row r sees: positions t0 .. ctx + i (causal), at most kc; padding rows: the last row's */ \
            const int64_t i = (r < rows ? r : rows - 1) / group;                                               \
            int64_t lim = ctx + i0 + i + 1 - t0;                                                               \
            float *s = w->scores + r * PREFILL_KC;                                                             \
            if (lim > kc) lim = kc;                                                                            \
            if (lim < 0) lim = 0;                                                                              \
            float mx = w->m[r];                                                                                \
            for (int64_t t = 0; t < lim; t++) {                                                                \
                s[t] *= scale;                                                                                 \
                mx = s[t] > mx ? s[t] : mx;                                                                    \
            }                                                                                                  \
            float sum = 0.0f;                                                                                  \
            if (lim > 0) {                                                                                     \
                const float alpha = exp_nonpositive(w->m[r] - mx); /* 0 on the first chunk (m = -inf) */     \
_Pragma("omp simd reduction(+ : sum)")                                                                         \
                for (int64_t t = 0; t < lim; t++) {                                                            \
                    s[t] = exp_nonpositive(s[t] - mx);                                                         \
                    sum += s[t];                                                                               \
                }                                                                                              \
                w->m[r] = mx, w->l[r] = w->l[r] * alpha + sum;                                                 \
                float *a = w->acc + r * head_dim;                                                              \
                if (alpha != 1.0f)                                                                             \
                    for (int64_t d = 0; d < head_dim; d++) a[d] *= alpha;                                      \
            }                                                                                                  \
            for (int64_t t = lim; t < kc; t++) s[t] = 0.0f; /* keys it may not see */                          \
        }                                                                                                      \
        if (blocked) {                                                                                         \
            for (int64_t r = 0; r < rows4; r += 4)                                                             \
                for (int64_t d0 = 0; d0 < head_dim; d0 += 2 * VW)                                              \
                    values_4xw(w->acc + r * head_dim, w->scores + r * PREFILL_KC, w->v, head_dim, kc, d0);     \
        } else {                                                                                               \
            for (int64_t r = 0; r < rows4; r++)                                                                \
                for (int64_t t = 0; t < kc; t++) {                                                             \
                    const float p = w->scores[r * PREFILL_KC + t], *v = w->v + t * head_dim;                   \
                    float *a = w->acc + r * head_dim;                                                          \
                    for (int64_t d = 0; d < head_dim; d++) a[d] += p * v[d];                                   \
                }                                                                                              \
        }                                                                                                      \
    }                                                                                                          \
}
DEFINE_PREFILL_ITEM(prefill_item_f32, float, LOAD_F32)
DEFINE_PREFILL_ITEM(prefill_item_bf16, uint16_t, LOAD_BF16)

/* Every input checked before any is read: cu_seqlens_q from 0 to total_q, never decreasing; each sequence's
 * 0 <= q_len <= seq_len, its blocks within its table row and every block id it reads in [0, num_blocks).
 * Returns OK or the first problem, with *bad_seq its sequence. */
static int check_prefill(const int32_t *cu, const int32_t *seq_lens, const int32_t *block_tables, int64_t num_seqs,
                         int64_t total_q, int64_t block_size, int64_t num_blocks, int64_t table_stride,
                         int64_t table_width, int64_t *bad_seq) {
    if (cu[0] != 0) return *bad_seq = 0, BAD_CU_SEQLENS;
    for (int64_t s = 0; s < num_seqs; s++) {
        *bad_seq = s;
        const int64_t q_len = (int64_t)cu[s + 1] - cu[s], len = seq_lens[s];
        if (q_len < 0 || cu[s + 1] > total_q) return BAD_CU_SEQLENS;
        if (len < 0) return NEGATIVE_LEN;
        if (q_len > len) return MORE_QUERIES_THAN_LEN;
        const int64_t used = len / block_size + (len % block_size != 0);
        if (used > table_width) return SEQ_TOO_LONG;
        const int32_t *table = block_tables + s * table_stride;
        for (int64_t i = 0; i < used; i++)
            if (table[i] < 0 || table[i] >= num_blocks) return BAD_BLOCK_ID;
    }
    if (cu[num_seqs] != total_q) return *bad_seq = num_seqs > 0 ? num_seqs - 1 : 0, BAD_CU_SEQLENS;
    *bad_seq = -1;
    return OK;
}

static int paged_prefill_attention(void *out, const void *query, const void *key_cache, const void *value_cache,
                                   const int32_t *block_tables, const int32_t *seq_lens, const int32_t *cu_seqlens_q,
                                   int64_t num_seqs, int64_t total_q, int64_t num_q_heads, int64_t num_kv_heads,
                                   int64_t head_dim, int64_t block_size, int64_t num_blocks, int64_t q_stride,
                                   int64_t table_stride, int64_t table_width, float scale, int num_threads, int bf16,
                                   int io_bf16, int64_t *bad_seq) {
    *bad_seq = -1;
    if (num_seqs < 0 || total_q < 0 || num_kv_heads < 1 || num_q_heads < 1 || head_dim < 1 || block_size < 1 ||
        num_blocks < 0 || q_stride < 0 || table_stride < 0 || table_width < 0 || num_threads < 1)
        return BAD_ARGUMENT;
    const int64_t group = num_q_heads / num_kv_heads;
    if (group > MAX_GROUP || head_dim > MAX_HEAD_DIM || group * num_kv_heads != num_q_heads) return BAD_SHAPE;
    int status = check_prefill(cu_seqlens_q, seq_lens, block_tables, num_seqs, total_q, block_size, num_blocks,
                               table_stride, table_width, bad_seq);
    if (status != OK) return status;
    /* first[s]: the first work item of sequence s (num_kv_heads * its tiles each); first[num_seqs]: all */
    int64_t *first = malloc(sizeof(int64_t) * (size_t)(num_seqs + 1));
    if (!first) return NO_MEMORY;
    first[0] = 0;
    for (int64_t s = 0; s < num_seqs; s++) {
        const int64_t q_len = (int64_t)cu_seqlens_q[s + 1] - cu_seqlens_q[s];
        first[s + 1] = first[s] + num_kv_heads * ((q_len + PREFILL_QT - 1) / PREFILL_QT);
    }
    const int64_t items = first[num_seqs], elem = bf16 ? (int64_t)sizeof(uint16_t) : (int64_t)sizeof(float);
    const int64_t row_stride_bytes = num_kv_heads * head_dim * elem;
#pragma omp parallel num_threads(num_threads) if (num_threads > 1 && items > 1)
    {
        /* an item's rows: group x PREFILL_QT (a multiple of 4); at most 16 x 16 x 256 floats each for q and acc */
        const size_t max_rows = (size_t)(group * PREFILL_QT), rows_d = max_rows * (size_t)head_dim;
        const size_t kc_d = (size_t)(PREFILL_KC * head_dim);
        const size_t floats = 2 * rows_d + max_rows * PREFILL_KC + 2 * max_rows + 2 * kc_d;
        float *buf = malloc(sizeof(float) * floats); /* <= 710 KB (group 16, head_dim 256); 70 KB for group 3, head_dim 64 */
        PrefillScratch w = {0};
        if (buf) {
            w.q = buf, w.acc = w.q + rows_d, w.scores = w.acc + rows_d, w.m = w.scores + max_rows * PREFILL_KC;
            w.l = w.m + max_rows, w.kt = w.l + max_rows, w.v = w.kt + kc_d;
        }
#pragma omp for schedule(dynamic, 1)
        for (int64_t item = 0; item < items; item++) {
            if (!buf) {
#pragma omp critical
                if (status == OK) status = NO_MEMORY;
                continue;
            }
            int64_t lo = 0, hi = num_seqs; /* the sequence s with first[s] <= item < first[s + 1] */
            while (hi - lo > 1) {
                const int64_t mid = (lo + hi) / 2;
                if (first[mid] <= item) lo = mid;
                else hi = mid;
            }
            const int64_t s = lo, k = item - first[s], h = k % num_kv_heads, i0 = (k / num_kv_heads) * PREFILL_QT;
            const int64_t q0 = cu_seqlens_q[s], q_len = (int64_t)cu_seqlens_q[s + 1] - q0, ctx = seq_lens[s] - q_len;
            const int64_t nq = q_len - i0 < PREFILL_QT ? q_len - i0 : PREFILL_QT, rows = nq * group;
            for (int64_t i = 0; i < nq; i++) { /* the tile's query rows, fp32, [nq][group][head_dim] */
                const int64_t at = (q0 + i0 + i) * q_stride + h * group * head_dim;
                float *dst = w.q + i * group * head_dim;
                if (io_bf16)
                    for (int64_t e = 0; e < group * head_dim; e++) dst[e] = bf16_to_f32(((const uint16_t *)query)[at + e]);
                else
                    memcpy(dst, (const float *)query + at, sizeof(float) * (size_t)(group * head_dim));
            }
            memset(w.q + rows * head_dim, 0, sizeof(float) * (size_t)((((rows + 3) & ~(int64_t)3) - rows) * head_dim));
            const int32_t *table = block_tables + s * table_stride;
            const int64_t head_bytes = h * head_dim * elem;
            if (bf16) {
                if (head_dim == 64)
                    prefill_item_bf16(&w, key_cache, value_cache, table, block_size, row_stride_bytes, head_bytes,
                                      rows, group, ctx, i0, 64, scale);
                else
                    prefill_item_bf16(&w, key_cache, value_cache, table, block_size, row_stride_bytes, head_bytes,
                                      rows, group, ctx, i0, head_dim, scale);
            } else if (head_dim == 64) {
                prefill_item_f32(&w, key_cache, value_cache, table, block_size, row_stride_bytes, head_bytes, rows,
                                 group, ctx, i0, 64, scale);
            } else {
                prefill_item_f32(&w, key_cache, value_cache, table, block_size, row_stride_bytes, head_bytes, rows,
                                 group, ctx, i0, head_dim, scale);
            }
            for (int64_t r = 0; r < rows; r++) { /* row r: query i0 + r / group, head h * group + r % group */
                const int64_t at = ((q0 + i0 + r / group) * num_q_heads + h * group + r % group) * head_dim;
                const float *a = w.acc + r * head_dim;
                if (io_bf16)
                    for (int64_t d = 0; d < head_dim; d++) ((uint16_t *)out)[at + d] = f32_to_bf16(a[d] / w.l[r]);
                else
                    for (int64_t d = 0; d < head_dim; d++) ((float *)out)[at + d] = a[d] / w.l[r];
            }
        }
        free(buf);
    }
    free(first);
    return status;
}

#pragma GCC pop_options

int paged_prefill_attention_f32(float *out, const float *query, const float *key_cache, const float *value_cache,
                                const int32_t *block_tables, const int32_t *seq_lens, const int32_t *cu_seqlens_q,
                                int64_t num_seqs, int64_t total_q, int64_t num_q_heads, int64_t num_kv_heads,
                                int64_t head_dim, int64_t block_size, int64_t num_blocks, int64_t q_stride,
                                int64_t table_stride, int64_t table_width, float scale, int num_threads,
                                int64_t *bad_seq) {
    return paged_prefill_attention(out, query, key_cache, value_cache, block_tables, seq_lens, cu_seqlens_q, num_seqs,
                                   total_q, num_q_heads, num_kv_heads, head_dim, block_size, num_blocks, q_stride,
                                   table_stride, table_width, scale, num_threads, 0, 0, bad_seq);
}

/* bf16 caches (uint16_t bit patterns); query and out fp32. */
int paged_prefill_attention_bf16kv(float *out, const float *query, const uint16_t *key_cache,
                                   const uint16_t *value_cache, const int32_t *block_tables, const int32_t *seq_lens,
                                   const int32_t *cu_seqlens_q, int64_t num_seqs, int64_t total_q,
                                   int64_t num_q_heads, int64_t num_kv_heads, int64_t head_dim, int64_t block_size,
                                   int64_t num_blocks, int64_t q_stride, int64_t table_stride, int64_t table_width,
                                   float scale, int num_threads, int64_t *bad_seq) {
    return paged_prefill_attention(out, query, key_cache, value_cache, block_tables, seq_lens, cu_seqlens_q, num_seqs,
                                   total_q, num_q_heads, num_kv_heads, head_dim, block_size, num_blocks, q_stride,
                                   table_stride, table_width, scale, num_threads, 1, 0, bad_seq);
}

/* All bf16: query, out and caches; every sum fp32, each output element rounded once (to nearest, ties even). */
int paged_prefill_attention_bf16(uint16_t *out, const uint16_t *query, const uint16_t *key_cache,
                                 const uint16_t *value_cache, const int32_t *block_tables, const int32_t *seq_lens,
                                 const int32_t *cu_seqlens_q, int64_t num_seqs, int64_t total_q, int64_t num_q_heads,
                                 int64_t num_kv_heads, int64_t head_dim, int64_t block_size, int64_t num_blocks,
                                 int64_t q_stride, int64_t table_stride, int64_t table_width, float scale,
                                 int num_threads, int64_t *bad_seq) {
    return paged_prefill_attention(out, query, key_cache, value_cache, block_tables, seq_lens, cu_seqlens_q, num_seqs,
                                   total_q, num_q_heads, num_kv_heads, head_dim, block_size, num_blocks, q_stride,
                                   table_stride, table_width, scale, num_threads, 1, 1, bad_seq);
}
