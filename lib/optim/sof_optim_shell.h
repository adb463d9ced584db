// sof_optim_shell.h: the one shell of every optimizer plugin (create, destroy, last_error, the
// argument checks, the multi-slice loop, the exported table). Header-only, C++17 (gpu_adam), no
// project library: a plugin writes only its kernels and a small policy class P.
#ifndef SOF_OPTIM_SHELL_H
#define SOF_OPTIM_SHELL_H

#include <exception>
#include <memory>
#include <mutex>
#include <new>
#include <string>

#include "optim/sof_optim_abi.h"
#include "optim/sof_optim_check.h"

namespace sof::optim::shell {

// What every plugin context holds. A policy's Ctx derives from it.
struct Base {
    int threads = 1; // host plugins: OpenMP threads per call (init.num_threads, 0 = default)
    int device = 0;  // CUDA plugins: device ordinal
    std::mutex mu;
    std::string error; // last failure on this context ("<plugin>: <what>"), guarded by mu
};

// The shell around policy P, which provides:
//   static constexpr const char* kName, kDescription;  sof_target kTarget;
//   static constexpr uint32_t kStateFormats, kParamDtypes;  (bit masks, see sof_optim_plugin)
//   static constexpr const char* kAlgorithm; int32_t kNumSlots; const sof_slot_info* slots();
//   struct Ctx : Base;
//   static int32_t score(); static const char* variant();
//   static sof_status init(Ctx&, const sof_optim_init&, std::string* why);
//   static sof_status step(Ctx&, const sof_optim_slice*, const sof_optim_hparams*, int32_t count,
//                          sof_optim_result* result_or_null, void* stream);   (checked slices)
//   static sof_status rollback(Ctx&, const sof_optim_slice&, const sof_optim_hparams&, void*);
//   static sof_status grad_stats(Ctx&, const void* g, int32_t gd, int64_t n, float scale,
//                                sof_optim_result* result, void* stream);
// One error convention: a status code, and the message in the context (read by last_error); no
// exception leaves an entry point (guarded).
template <class P> struct Shell {
    using Ctx = typename P::Ctx;

    static Ctx* ctx_of(sof_optim_ctx* c) { return reinterpret_cast<Ctx*>(c); }

    // Records "<plugin>: msg" as the context's last error and returns st.
    static sof_status fail(Ctx* ctx, sof_status st, const std::string& msg) {
        if (ctx) {
            std::lock_guard<std::mutex> lock(ctx->mu);
            ctx->error = std::string(P::kName) + ": " + msg;
        }
        return st;
    }

    // Runs an entry point's body; no exception crosses the C ABI: an allocation failure
    // (std::string, std::vector in the shell or a policy) is SOF_ERR_OUT_OF_MEMORY, anything else
    // SOF_ERR_INTERNAL, with the message recorded where that still can be.
    template <class F> static sof_status guarded(Ctx* ctx, const char* where, F&& body) noexcept {
        try {
            return body();
        } catch (const std::bad_alloc&) {
            return SOF_ERR_OUT_OF_MEMORY;
        } catch (const std::exception& e) {
            try {
                return fail(ctx, SOF_ERR_INTERNAL, std::string(where) + ": " + e.what());
            } catch (...) {
                return SOF_ERR_INTERNAL;
            }
        } catch (...) {
            return SOF_ERR_INTERNAL;
        }
    }

    static sof_status create(const sof_optim_init* init, sof_optim_ctx** out) noexcept {
        return guarded(nullptr, "create", [&] { return create_body(init, out); });
    }
    static sof_status create_body(const sof_optim_init* init, sof_optim_ctx** out) {
        if (!out) return SOF_ERR_INVALID_ARGUMENT;
        *out = nullptr;
        if (!init || init->struct_size < sizeof(sof_optim_init)) return SOF_ERR_INVALID_ARGUMENT;
        if (P::score() <= 0) return SOF_ERR_UNSUPPORTED;
        std::unique_ptr<Ctx> ctx(new (std::nothrow) Ctx); // freed on a refusal or a throw
        if (!ctx) return SOF_ERR_OUT_OF_MEMORY;
        ctx->threads = init->num_threads;
        ctx->device = init->device;
        std::string why;
        sof_status st = P::init(*ctx, *init, &why);
        if (st != SOF_OK) return st;
        *out = reinterpret_cast<sof_optim_ctx*>(ctx.release());
        return SOF_OK;
    }

    static void destroy(sof_optim_ctx* c) { delete ctx_of(c); }

    static const char* last_error(sof_optim_ctx* c) noexcept {
        thread_local std::string copy; // stable storage for the returned pointer, per thread
        Ctx* ctx = ctx_of(c);
        if (!ctx) return "null optimizer context";
        try {
            std::lock_guard<std::mutex> lock(ctx->mu);
            copy = ctx->error;
        } catch (...) {
            return "last error not available (out of memory)";
        }
        return copy.c_str();
    }

    // Every slice is checked before the first is stepped (nothing is written on a refusal).
    static sof_status step_multi(sof_optim_ctx* c, const sof_optim_slice* slices,
                                 const sof_optim_hparams* hp, int32_t count,
                                 sof_optim_result* result, void* stream) noexcept {
        Ctx* ctx = ctx_of(c);
        if (!ctx) return SOF_ERR_INVALID_ARGUMENT;
        return guarded(ctx, "step",
                       [&] { return step_body(ctx, slices, hp, count, result, stream); });
    }
    static sof_status step_body(Ctx* ctx, const sof_optim_slice* slices,
                                const sof_optim_hparams* hp, int32_t count,
                                sof_optim_result* result, void* stream) {
        if (count < 0 || (count > 0 && (!slices || !hp)))
            return fail(ctx, SOF_ERR_INVALID_ARGUMENT,
                        "step_multi: null slice list or negative count");
        for (int32_t i = 0; i < count; i++) {
            std::string why;
            sof_status st = check_slice(table(), &slices[i], &hp[i], i, &why);
            if (st != SOF_OK) return fail(ctx, st, why);
        }
        sof_status st = P::step(*ctx, slices, hp, count, result, stream);
        return st;
    }

    static sof_status step(sof_optim_ctx* c, const sof_optim_slice* s, const sof_optim_hparams* hp,
                           sof_optim_result* result, void* stream) noexcept {
        Ctx* ctx = ctx_of(c);
        if (!ctx) return SOF_ERR_INVALID_ARGUMENT;
        if (!s)
            return guarded(ctx, "step",
                           [&] { return fail(ctx, SOF_ERR_INVALID_ARGUMENT, "step: null slice"); });
        return step_multi(c, s, hp, 1, result, stream);
    }

    static sof_status rollback(sof_optim_ctx* c, const sof_optim_slice* s,
                               const sof_optim_hparams* hp, void* stream) noexcept {
        Ctx* ctx = ctx_of(c);
        if (!ctx) return SOF_ERR_INVALID_ARGUMENT;
        return guarded(ctx, "rollback", [&] {
            std::string why;
            if (sof_status st = check_rollback(table(), s, hp, &why); st != SOF_OK)
                return fail(ctx, st, why);
            return P::rollback(*ctx, *s, *hp, stream);
        });
    }

    static sof_status grad_stats(sof_optim_ctx* c, const void* grad, int32_t gd, int64_t n,
                                 float scale, sof_optim_result* result, void* stream) noexcept {
        Ctx* ctx = ctx_of(c);
        if (!ctx) return SOF_ERR_INVALID_ARGUMENT;
        return guarded(ctx, "grad_stats", [&] {
            std::string why;
            if (sof_status st = check_grad_stats(grad, gd, n, result, &why); st != SOF_OK)
                return fail(ctx, st, why);
            return P::grad_stats(*ctx, grad, gd, n, scale, result, stream);
        });
    }

    static const sof_optim_plugin& table() {
        static const sof_optim_plugin t = {
            SOF_OPTIM_ABI_VERSION,
            sizeof(sof_optim_plugin),
            P::kName,
            P::kDescription,
            P::kTarget,
            P::kAlgorithm,
            P::kNumSlots,
            P::slots(),
            P::kStateFormats,
            P::kParamDtypes,
            P::score,
            P::variant,
            create,
            destroy,
            last_error,
            step,
            step_multi,
            rollback,
            grad_stats,
        };
        return t;
    }
};

// Host plugins: steps slices one after the other through fn(slice, hp, &result) and aggregates
// the statistics (sum of sums in slice order, OR of the flags) into *result when it is not null.
template <class Fn>
sof_status for_each_slice(const sof_optim_slice* slices, const sof_optim_hparams* hp, int32_t count,
                          sof_optim_result* result, Fn&& fn) {
    sof_optim_result total{};
    for (int32_t i = 0; i < count; i++) {
        sof_optim_result r{};
        sof_status st = fn(slices[i], hp[i], &r);
        if (st != SOF_OK) return st;
        total.grad_sumsq += r.grad_sumsq;
        total.nonfinite |= r.nonfinite;
    }
    if (result) *result = total;
    return SOF_OK;
}

} // namespace sof::optim::shell

// The plugin's one exported symbol for policy P.
#define SOF_OPTIM_EXPORT_PLUGIN(P)                                                                 \
    extern "C" __attribute__((visibility("default"))) const sof_optim_plugin*                      \
    sof_optim_plugin_get(void) {                                                                   \
        return &sof::optim::shell::Shell<P>::table();                                              \
    }

#endif // SOF_OPTIM_SHELL_H
