// driver runs GGML's own reference quantizers, dequantizers and generic
// vec_dot functions on files, for scripts/ggml-golden. It is compiled by
// gen.sh together with ggml's src/ggml-quants.c and src/ggml-cpu/quants.c
// (from a ggml checkout; nothing of ggml is kept in this repository), and
// it is driven by quant/internal/ggmlgolden, one operation per process.
//
//	driver sizes                      "type elements bytes" per line
//	driver quant TYPE IN OUT          IN: raw little-endian f32; OUT: blocks
//	driver dequant TYPE IN OUT        IN: blocks; OUT: raw f32
//	driver dot WTYPE WIN ATYPE AIN N  prints the f32 result's bits in hex
//	driver f16 IN OUT16 OUTBF16       f32 bits -> f16 / bf16 bits (u16 each)
//	driver f16to32 OUT                all 65536 f16 bit patterns -> f32 bits
//
// TYPE is the ggml_type number. quant runs what ggml_quantize_chunk runs
// with no importance matrix (quantize_<t>(src, dst, 1, n, NULL), which
// calls quantize_row_<t>_ref), or quantize_row_q8_1_ref /
// quantize_row_q8_K_ref for the activation formats; the f16/bf16 rows use
// ggml-impl.h's GGML_FP32_TO_FP16 and ggml_compute_fp32_to_bf16, as
// ggml_fp32_to_fp16_row and ggml_fp32_to_bf16_row_ref do.
#define GGML_COMMON_DECL_C
#include "ggml-common.h"
#include "ggml-quants.h"
#include "ggml-impl.h"
#include "quants.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// The few symbols of ggml.c and ggml-cpu.c that the two compiled files
// reference.
float ggml_table_f32_f16[1 << 16];

void ggml_abort(const char * file, int line, const char * fmt, ...) {
    fprintf(stderr, "ggml_abort at %s:%d (%s)\n", file, line, fmt);
    abort();
}

struct tinfo { int type; long blck, size; };
static const struct tinfo infos[] = {
    {GGML_TYPE_F32, 1, 4},
    {GGML_TYPE_F16, 1, 2},
    {GGML_TYPE_BF16, 1, 2},
    {GGML_TYPE_Q4_0, QK4_0, sizeof(block_q4_0)},
    {GGML_TYPE_Q4_1, QK4_1, sizeof(block_q4_1)},
    {GGML_TYPE_Q5_0, QK5_0, sizeof(block_q5_0)},
    {GGML_TYPE_Q5_1, QK5_1, sizeof(block_q5_1)},
    {GGML_TYPE_Q8_0, QK8_0, sizeof(block_q8_0)},
    {GGML_TYPE_Q8_1, QK8_1, sizeof(block_q8_1)},
    {GGML_TYPE_Q2_K, QK_K, sizeof(block_q2_K)},
    {GGML_TYPE_Q3_K, QK_K, sizeof(block_q3_K)},
    {GGML_TYPE_Q4_K, QK_K, sizeof(block_q4_K)},
    {GGML_TYPE_Q5_K, QK_K, sizeof(block_q5_K)},
    {GGML_TYPE_Q6_K, QK_K, sizeof(block_q6_K)},
    {GGML_TYPE_Q8_K, QK_K, sizeof(block_q8_K)},
    {GGML_TYPE_IQ2_XXS, QK_K, sizeof(block_iq2_xxs)},
    {GGML_TYPE_IQ2_XS, QK_K, sizeof(block_iq2_xs)},
    {GGML_TYPE_IQ3_XXS, QK_K, sizeof(block_iq3_xxs)},
    {GGML_TYPE_IQ1_S, QK_K, sizeof(block_iq1_s)},
    {GGML_TYPE_IQ4_NL, QK4_NL, sizeof(block_iq4_nl)},
    {GGML_TYPE_IQ3_S, QK_K, sizeof(block_iq3_s)},
    {GGML_TYPE_IQ2_S, QK_K, sizeof(block_iq2_s)},
    {GGML_TYPE_IQ4_XS, QK_K, sizeof(block_iq4_xs)},
    {GGML_TYPE_IQ1_M, QK_K, sizeof(block_iq1_m)},
    {GGML_TYPE_TQ1_0, QK_K, sizeof(block_tq1_0)},
    {GGML_TYPE_TQ2_0, QK_K, sizeof(block_tq2_0)},
    {GGML_TYPE_MXFP4, QK_MXFP4, sizeof(block_mxfp4)},
    {GGML_TYPE_NVFP4, QK_NVFP4, sizeof(block_nvfp4)},
    {GGML_TYPE_Q1_0, QK1_0, sizeof(block_q1_0)},
    {GGML_TYPE_Q2_0, QK2_0, sizeof(block_q2_0)},
};

static const struct tinfo * info(int type) {
    for (size_t i = 0; i < sizeof(infos)/sizeof(infos[0]); i++) {
        if (infos[i].type == type) return &infos[i];
    }
    fprintf(stderr, "unknown type %d\n", type);
    exit(2);
}

size_t ggml_type_size(enum ggml_type type) { return info(type)->size; }
size_t ggml_row_size(enum ggml_type type, int64_t ne) { return ne / info(type)->blck * info(type)->size; }
const char * ggml_type_name(enum ggml_type type) { (void) type; return "?"; }

static void * readall(const char * path, long * len) {
    FILE * f = fopen(path, "rb");
    if (!f) { perror(path); exit(2); }
    fseek(f, 0, SEEK_END);
    *len = ftell(f);
    fseek(f, 0, SEEK_SET);
    void * p = malloc(*len + 1);
    if (fread(p, 1, *len, f) != (size_t) *len) { perror(path); exit(2); }
    fclose(f);
    return p;
}

static void writeall(const char * path, const void * p, long len) {
    FILE * f = fopen(path, "wb");
    if (!f || fwrite(p, 1, len, f) != (size_t) len) { perror(path); exit(2); }
    fclose(f);
}

static void quant(int type, const float * x, void * y, long n) {
    switch (type) {
    case GGML_TYPE_F32:  memcpy(y, x, n * 4); break;
    case GGML_TYPE_F16:  for (long i = 0; i < n; i++) ((ggml_fp16_t *) y)[i] = GGML_FP32_TO_FP16(x[i]); break;
    case GGML_TYPE_BF16: for (long i = 0; i < n; i++) ((ggml_bf16_t *) y)[i] = ggml_compute_fp32_to_bf16(x[i]); break;
    case GGML_TYPE_Q4_0: quantize_q4_0(x, y, 1, n, NULL); break;
    case GGML_TYPE_Q4_1: quantize_q4_1(x, y, 1, n, NULL); break;
    case GGML_TYPE_Q5_0: quantize_q5_0(x, y, 1, n, NULL); break;
    case GGML_TYPE_Q5_1: quantize_q5_1(x, y, 1, n, NULL); break;
    case GGML_TYPE_Q8_0: quantize_q8_0(x, y, 1, n, NULL); break;
    case GGML_TYPE_Q8_1: quantize_row_q8_1_ref(x, y, n); break;
    case GGML_TYPE_Q2_K: quantize_q2_K(x, y, 1, n, NULL); break;
    case GGML_TYPE_Q3_K: quantize_q3_K(x, y, 1, n, NULL); break;
    case GGML_TYPE_Q4_K: quantize_q4_K(x, y, 1, n, NULL); break;
    case GGML_TYPE_Q5_K: quantize_q5_K(x, y, 1, n, NULL); break;
    case GGML_TYPE_Q6_K: quantize_q6_K(x, y, 1, n, NULL); break;
    case GGML_TYPE_Q8_K: quantize_row_q8_K_ref(x, y, n); break;
    default: fprintf(stderr, "quant: type %d\n", type); exit(2);
    }
}

static void dequant(int type, const void * x, float * y, long n) {
    switch (type) {
    case GGML_TYPE_F32:  memcpy(y, x, n * 4); break;
    case GGML_TYPE_F16:  for (long i = 0; i < n; i++) y[i] = GGML_FP16_TO_FP32(((const ggml_fp16_t *) x)[i]); break;
    case GGML_TYPE_BF16: for (long i = 0; i < n; i++) y[i] = GGML_BF16_TO_FP32(((const ggml_bf16_t *) x)[i]); break;
    case GGML_TYPE_Q4_0: dequantize_row_q4_0(x, y, n); break;
    case GGML_TYPE_Q4_1: dequantize_row_q4_1(x, y, n); break;
    case GGML_TYPE_Q5_0: dequantize_row_q5_0(x, y, n); break;
    case GGML_TYPE_Q5_1: dequantize_row_q5_1(x, y, n); break;
    case GGML_TYPE_Q8_0: dequantize_row_q8_0(x, y, n); break;
    case GGML_TYPE_Q2_K: dequantize_row_q2_K(x, y, n); break;
    case GGML_TYPE_Q3_K: dequantize_row_q3_K(x, y, n); break;
    case GGML_TYPE_Q4_K: dequantize_row_q4_K(x, y, n); break;
    case GGML_TYPE_Q5_K: dequantize_row_q5_K(x, y, n); break;
    case GGML_TYPE_Q6_K: dequantize_row_q6_K(x, y, n); break;
    case GGML_TYPE_Q8_K: dequantize_row_q8_K(x, y, n); break;
    default: fprintf(stderr, "dequant: type %d has no GGML dequantizer\n", type); exit(2);
    }
}

typedef void (*dotfn)(int, float *, size_t, const void *, size_t, const void *, size_t, int);

static dotfn dotfor(int w, int a) {
    struct { int w, a; dotfn f; } t[] = {
        {GGML_TYPE_Q4_0, GGML_TYPE_Q8_0, ggml_vec_dot_q4_0_q8_0_generic},
        {GGML_TYPE_Q4_1, GGML_TYPE_Q8_1, ggml_vec_dot_q4_1_q8_1_generic},
        {GGML_TYPE_Q5_0, GGML_TYPE_Q8_0, ggml_vec_dot_q5_0_q8_0_generic},
        {GGML_TYPE_Q5_1, GGML_TYPE_Q8_1, ggml_vec_dot_q5_1_q8_1_generic},
        {GGML_TYPE_Q8_0, GGML_TYPE_Q8_0, ggml_vec_dot_q8_0_q8_0_generic},
        {GGML_TYPE_Q2_K, GGML_TYPE_Q8_K, ggml_vec_dot_q2_K_q8_K_generic},
        {GGML_TYPE_Q3_K, GGML_TYPE_Q8_K, ggml_vec_dot_q3_K_q8_K_generic},
        {GGML_TYPE_Q4_K, GGML_TYPE_Q8_K, ggml_vec_dot_q4_K_q8_K_generic},
        {GGML_TYPE_Q5_K, GGML_TYPE_Q8_K, ggml_vec_dot_q5_K_q8_K_generic},
        {GGML_TYPE_Q6_K, GGML_TYPE_Q8_K, ggml_vec_dot_q6_K_q8_K_generic},
    };
    for (size_t i = 0; i < sizeof(t)/sizeof(t[0]); i++) {
        if (t[i].w == w && t[i].a == a) return t[i].f;
    }
    fprintf(stderr, "dot: no generic vec_dot for %d x %d\n", w, a);
    exit(2);
}

int main(int argc, char ** argv) {
    for (int i = 0; i < (1 << 16); i++) {
        ggml_table_f32_f16[i] = GGML_FP16_TO_FP32((ggml_fp16_t) i);
    }
    if (argc < 2) { fprintf(stderr, "usage: see driver.c\n"); return 2; }
    const char * cmd = argv[1];
    if (!strcmp(cmd, "sizes")) {
        for (size_t i = 0; i < sizeof(infos)/sizeof(infos[0]); i++) {
            printf("%d %ld %ld\n", infos[i].type, infos[i].blck, infos[i].size);
        }
    } else if (!strcmp(cmd, "quant") && argc == 5) {
        const struct tinfo * t = info(atoi(argv[2]));
        long len;
        float * x = readall(argv[3], &len);
        long n = len / 4;
        long out = n / t->blck * t->size;
        void * y = calloc(out, 1); // zeroed: quantize_row_q8_K_ref leaves an all-zero block's bsums unwritten
        quant(t->type, x, y, n);
        writeall(argv[4], y, out);
    } else if (!strcmp(cmd, "dequant") && argc == 5) {
        const struct tinfo * t = info(atoi(argv[2]));
        long len;
        void * x = readall(argv[3], &len);
        long n = len / t->size * t->blck;
        float * y = calloc(n, 4);
        dequant(t->type, x, y, n);
        writeall(argv[4], y, n * 4);
    } else if (!strcmp(cmd, "dot") && argc == 7) {
        int w = atoi(argv[2]), a = atoi(argv[4]);
        long wl, al;
        void * x = readall(argv[3], &wl);
        void * y = readall(argv[5], &al);
        int n = atoi(argv[6]);
        if (n / info(w)->blck * info(w)->size > wl || n / info(a)->blck * info(a)->size > al) {
            fprintf(stderr, "dot: rows too short\n");
            return 2;
        }
        float s = 0;
        dotfor(w, a)(n, &s, 0, x, 0, y, 0, 1);
        uint32_t bits;
        memcpy(&bits, &s, 4);
        printf("%08x\n", bits);
    } else if (!strcmp(cmd, "f16") && argc == 5) {
        long len;
        float * x = readall(argv[2], &len);
        long n = len / 4;
        uint16_t * h = malloc(n * 2), * b = malloc(n * 2);
        for (long i = 0; i < n; i++) {
            h[i] = GGML_FP32_TO_FP16(x[i]);
            b[i] = ggml_compute_fp32_to_bf16(x[i]).bits;
        }
        writeall(argv[3], h, n * 2);
        writeall(argv[4], b, n * 2);
    } else if (!strcmp(cmd, "f16to32") && argc == 3) {
        writeall(argv[2], ggml_table_f32_f16, sizeof(ggml_table_f32_f16));
    } else {
        fprintf(stderr, "bad command; see driver.c\n");
        return 2;
    }
    return 0;
}
