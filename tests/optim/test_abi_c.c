/* test_abi_c.c: an outside harness's view of the optimizer ABI, in plain C11 with no project code.
 * Loads a plugin by path with dlopen, checks its table, and runs AdamW steps against fp64 math.
 * Usage: test_abi_c PLUGIN.so [VARIANT]; with VARIANT the plugin must report that variant (the
 * caller forces it, e.g. SOF_CPU_ADAM_VARIANT), and a plugin scoring 0 exits 77 (ctest: skipped).
 */
#include <dlfcn.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "optim/sof_optim_abi.h"

static int g_failures = 0;

#define EXPECT(cond, ...)                                                                          \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "%s:%d: FAILED %s: ", __FILE__, __LINE__, #cond);                      \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fprintf(stderr, "\n");                                                                 \
            g_failures++;                                                                          \
        }                                                                                          \
    } while (0)

/* Round-to-nearest-even fp32 -> bf16, NaN kept (quiet), as the ABI specifies. */
static uint16_t bf16_of(float x) {
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x0040u);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

/* One AdamW step in fp64 (torch.optim.AdamW order of operations). */
static void adamw_ref(int64_t n, double* p, const float* g, double* m, double* v, double lr,
                      double b1, double b2, double eps, double wd, int64_t step, double scale) {
    double bc1 = 1.0 - pow(b1, (double)step), bc2 = 1.0 - pow(b2, (double)step);
    for (int64_t i = 0; i < n; i++) {
        double gi = scale * (double)g[i];
        p[i] *= 1.0 - lr * wd;
        m[i] = b1 * m[i] + (1.0 - b1) * gi;
        v[i] = b2 * v[i] + (1.0 - b2) * gi * gi;
        p[i] -= lr / bc1 * m[i] / (sqrt(v[i]) / sqrt(bc2) + eps);
    }
}

static double rel_err(double got, double want) {
    return fabs(got - want) / (fabs(want) > 1e-3 ? fabs(want) : 1e-3);
}

int main(int argc, char** argv) {
    if (argc != 2 && argc != 3) {
        fprintf(stderr, "usage: %s PATH/TO/libPLUGIN.so [EXPECTED_VARIANT]\n", argv[0]);
        return 2;
    }
    const char* want_variant = argc == 3 ? argv[2] : NULL;
    void* so = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (!so) {
        fprintf(stderr, "dlopen %s: %s\n", argv[1], dlerror());
        return 1;
    }
    sof_optim_entry_fn entry;
    void* sym = dlsym(so, SOF_OPTIM_ENTRY);
    memcpy(&entry, &sym, sizeof entry); /* object pointer -> function pointer, C-conformant */
    if (!sym) {
        fprintf(stderr, "%s has no symbol %s\n", argv[1], SOF_OPTIM_ENTRY);
        return 1;
    }
    const sof_optim_plugin* pl = entry();
    EXPECT(pl != NULL, "entry returned NULL");
    if (!pl) return 1;
    EXPECT(pl->abi_version == SOF_OPTIM_ABI_VERSION, "abi_version %u, header %d", pl->abi_version,
           SOF_OPTIM_ABI_VERSION);
    EXPECT(pl->struct_size >= sizeof(sof_optim_plugin), "struct_size %u", pl->struct_size);
    EXPECT(pl->target == SOF_TARGET_HOST, "target %d", pl->target);
    int32_t score = pl->score();
    printf("plugin %s variant %s score %d\n", pl->name, pl->variant(), score);
    if (score <= 0) {
        if (want_variant) {
            printf("variant %s: this CPU cannot run it (score 0): skipped\n", want_variant);
            return 77;
        }
        printf("score 0 on this CPU: nothing to run\n");
        return 0;
    }
    /* the variant is the first word; cpu_adam's vector variants add their Q8 path after it */
    size_t wlen = want_variant ? strlen(want_variant) : 0;
    if (want_variant && (strncmp(pl->variant(), want_variant, wlen) != 0 ||
                         (pl->variant()[wlen] != '\0' && pl->variant()[wlen] != ' '))) {
        fprintf(stderr, "plugin reports variant %s, expected %s (was the variant forced?)\n",
                pl->variant(), want_variant);
        return 1;
    }

    sof_optim_init init = {sizeof(sof_optim_init), 2, 0};
    sof_optim_ctx* ctx = NULL;
    EXPECT(pl->create(&init, &ctx) == SOF_OK, "create");
    if (!ctx) return 1;

    /* Bad input is a status code with a message, never a crash. */
    sof_optim_hparams bad = {0};
    sof_optim_result res;
    EXPECT(pl->step(ctx, NULL, &bad, &res, NULL) == SOF_ERR_INVALID_ARGUMENT, "NULL slice");
    EXPECT(strcmp(pl->algorithm, "adam") == 0 && pl->num_slots == 2, "algorithm %s, %d slots",
           pl->algorithm, pl->num_slots);
    EXPECT((pl->state_formats & (1u << SOF_STATE_F32)) != 0, "no fp32 state format");
    EXPECT(strlen(pl->last_error(ctx)) > 0, "empty last_error");

    const int64_t n = 4099; /* odd: vector body plus scalar tail */
    float *p = malloc(n * sizeof *p), *g = malloc(n * sizeof *g), *m = malloc(n * sizeof *m);
    float *v = malloc(n * sizeof *v), *p2 = malloc(n * sizeof *p2), *m2 = malloc(n * sizeof *m2);
    float* v2 = malloc(n * sizeof *v2);
    uint16_t* lowp = malloc(n * sizeof *lowp);
    double *rp = malloc(n * sizeof *rp), *rm = malloc(n * sizeof *rm), *rv = malloc(n * sizeof *rv);
    uint32_t seed = 12345u;
    for (int64_t i = 0; i < n; i++) {
        seed = seed * 1664525u + 1013904223u;
        p[i] = (float)((int32_t)(seed >> 8) - (1 << 23)) / (float)(1 << 23);
        m[i] = 0.0f;
        v[i] = 0.0f;
        rp[i] = p[i];
        rm[i] = 0.0;
        rv[i] = 0.0;
    }

    const float lr = 1e-3f, b1 = 0.9f, b2 = 0.999f, eps = 1e-8f, wd = 0.1f, scale = 0.5f;
    double worst = 0.0;
    for (int64_t step = 1; step <= 20; step++) {
        double want_sumsq = 0.0;
        for (int64_t i = 0; i < n; i++) {
            seed = seed * 1664525u + 1013904223u;
            g[i] = (float)((int32_t)(seed >> 8) - (1 << 23)) / (float)(1 << 20);
            want_sumsq += (double)(scale * g[i]) * (double)(scale * g[i]);
        }
        /* Separate outputs on odd steps (then copy back), in place on even ones. */
        int separate = (int)(step & 1);
        sof_optim_slice s;
        memset(&s, 0, sizeof s);
        s.struct_size = sizeof s;
        s.param_dtype = SOF_DTYPE_F32;
        s.n = n;
        s.param = p;
        s.param_out = separate ? p2 : p;
        s.grad = g;
        s.grad_dtype = SOF_DTYPE_F32;
        s.lowp_dtype = SOF_DTYPE_BF16;
        s.lowp_out = lowp;
        s.num_slots = 2;
        s.slot[0].format = SOF_STATE_F32;
        s.slot[0].data = m;
        s.slot[0].data_out = separate ? m2 : m;
        s.slot[1].format = SOF_STATE_F32;
        s.slot[1].data = v;
        s.slot[1].data_out = separate ? v2 : v;
        sof_optim_hparams hp = {
            sizeof(sof_optim_hparams), lr, b1, b2, eps, wd, step, SOF_ADAM_ADAMW, 1, scale, 0, 0};
        float p0 = p[0], m0 = m[0], v0 = v[0];
        EXPECT(pl->step(ctx, &s, &hp, &res, NULL) == SOF_OK, "step %lld: %s", (long long)step,
               pl->last_error(ctx));
        EXPECT(res.nonfinite == 0, "step %lld nonfinite", (long long)step);
        EXPECT(rel_err(res.grad_sumsq, want_sumsq) < 1e-6,
               /* fp32 lane partials: ~1e-7 */ "sumsq %.17g want %.17g", res.grad_sumsq,
               want_sumsq);
        if (separate) {
            EXPECT(p[0] == p0 && m[0] == m0 && v[0] == v0, "separate mode wrote its inputs");
            memcpy(p, p2, n * sizeof *p);
            memcpy(m, m2, n * sizeof *m);
            memcpy(v, v2, n * sizeof *v);
        }
        adamw_ref(n, rp, g, rm, rv, lr, b1, b2, eps, wd, step, scale);
        for (int64_t i = 0; i < n; i++) {
            double e = rel_err(p[i], rp[i]);
            if (e > worst) worst = e;
            if (lowp[i] != bf16_of(p[i])) {
                EXPECT(0, "step %lld i %lld: bf16 copy %04x, round(p) %04x", (long long)step,
                       (long long)i, lowp[i], bf16_of(p[i]));
                break;
            }
        }
    }
    printf("20 AdamW steps, n=%lld: worst param rel error vs fp64 %.3g\n", (long long)n, worst);
    EXPECT(worst < 1e-5, "worst rel error %.3g", worst);

    /* A NaN grad is reported, not hidden. */
    g[7] = NAN;
    EXPECT(pl->grad_stats(ctx, g, SOF_DTYPE_F32, n, 1.0f, &res, NULL) == SOF_OK, "grad_stats");
    EXPECT(res.nonfinite == 1, "NaN grad not flagged");

    pl->destroy(ctx);
    free(p), free(g), free(m), free(v), free(p2), free(m2), free(v2), free(lowp);
    free(rp), free(rm), free(rv);
    dlclose(so);
    if (g_failures) {
        fprintf(stderr, "%d failure(s)\n", g_failures);
        return 1;
    }
    printf("ok\n");
    return 0;
}
