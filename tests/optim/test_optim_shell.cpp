// The plugin shell (optim/sof_optim_shell.h) keeps exceptions inside the plugin: a policy that
// throws from init, step, rollback or grad_stats gives a status code across the C ABI, never an
// unwinding (std::bad_alloc -> SOF_ERR_OUT_OF_MEMORY, other exceptions -> SOF_ERR_INTERNAL).
#include <doctest/doctest.h>

#include <new>
#include <stdexcept>
#include <string>

#include "optim/sof_optim_shell.h"

namespace {

// init throws when init.num_threads is 1 (bad_alloc) or 2 (runtime_error); the calls throw
// bad_alloc when the context's device is 1, else runtime_error.
struct Thrower {
    static constexpr const char* kName = "thrower";
    static constexpr const char* kDescription = "test policy whose every entry throws";
    static constexpr sof_target kTarget = SOF_TARGET_HOST;
    static constexpr const char* kAlgorithm = "adam";
    static constexpr int32_t kNumSlots = 2;
    static constexpr uint32_t kStateFormats = 1u << SOF_STATE_F32;
    static constexpr uint32_t kParamDtypes = 1u << SOF_DTYPE_F32;
    static const sof_slot_info* slots() {
        static const sof_slot_info s[2] = {{"exp_avg", 1, 0}, {"exp_avg_sq", 0, 0}};
        return s;
    }
    struct Ctx : sof::optim::shell::Base {};
    static int32_t score() { return 1; }
    static const char* variant() { return "throw"; }
    [[noreturn]] static void raise(const Ctx& c, const char* what) {
        if (c.device == 1) throw std::bad_alloc();
        throw std::runtime_error(what);
    }
    static sof_status init(Ctx&, const sof_optim_init& in, std::string*) {
        if (in.num_threads == 1) throw std::bad_alloc();
        if (in.num_threads == 2) throw std::runtime_error("init failed");
        return SOF_OK;
    }
    static sof_status step(Ctx& c, const sof_optim_slice*, const sof_optim_hparams*, int32_t,
                           sof_optim_result*, void*) {
        raise(c, "step failed");
    }
    static sof_status rollback(Ctx& c, const sof_optim_slice&, const sof_optim_hparams&, void*) {
        raise(c, "rollback failed");
    }
    static sof_status grad_stats(Ctx& c, const void*, int32_t, int64_t, float, sof_optim_result*,
                                 void*) {
        raise(c, "grad_stats failed");
    }
};

using Sh = sof::optim::shell::Shell<Thrower>;

sof_optim_ctx* make(const sof_optim_plugin& t, int32_t threads, int32_t device, sof_status* st) {
    sof_optim_init in{sizeof(sof_optim_init), threads, device};
    sof_optim_ctx* ctx = nullptr;
    *st = t.create(&in, &ctx);
    return ctx;
}

} // namespace

TEST_CASE("shell: an exception from init is a status code, and no context is returned") {
    const sof_optim_plugin& t = Sh::table();
    sof_status st = SOF_OK;
    CHECK(make(t, 1, 0, &st) == nullptr);
    CHECK(st == SOF_ERR_OUT_OF_MEMORY);
    CHECK(make(t, 2, 0, &st) == nullptr);
    CHECK(st == SOF_ERR_INTERNAL);
}

TEST_CASE("shell: exceptions from the calls are status codes, the message kept") {
    const sof_optim_plugin& t = Sh::table();
    for (int32_t device : {0, 1}) {
        CAPTURE(device);
        sof_status st = SOF_ERR_INTERNAL;
        sof_optim_ctx* ctx = make(t, 4, device, &st);
        REQUIRE(st == SOF_OK);
        REQUIRE(ctx != nullptr);
        const sof_status want = device == 1 ? SOF_ERR_OUT_OF_MEMORY : SOF_ERR_INTERNAL;
        float g[4] = {1, 2, 3, 4};
        sof_optim_result r{};
        CHECK(t.grad_stats(ctx, g, SOF_DTYPE_F32, 4, 1.0f, &r, nullptr) == want);
        if (device == 0)
            CHECK(std::string(t.last_error(ctx)) == "thrower: grad_stats: grad_stats failed");
        // the argument checks still come first and keep their own code and message
        CHECK(t.grad_stats(ctx, nullptr, SOF_DTYPE_F32, 4, 1.0f, &r, nullptr) ==
              SOF_ERR_INVALID_ARGUMENT);
        CHECK(std::string(t.last_error(ctx)).find("grad_stats: null grad") != std::string::npos);
        CHECK(t.step(ctx, nullptr, nullptr, &r, nullptr) == SOF_ERR_INVALID_ARGUMENT);
        t.destroy(ctx);
    }
}
