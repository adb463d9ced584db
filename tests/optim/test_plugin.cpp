// A minimal optimizer plugin for the loader tests, built three times: TEST_ABI_VERSION 999 (an
// ABI mismatch the loader must reject naming both versions), TEST_SCORE 0 (cannot run here) and
// TEST_STRUCT_SIZE 16 (a table shorter than the ABI's).
#include "optim/sof_optim_abi.h"

namespace {

int32_t test_score() {
    return TEST_SCORE;
}
const char* test_variant() {
    return "test";
}
sof_status test_create(const sof_optim_init*, sof_optim_ctx** out) {
    *out = nullptr;
    return SOF_ERR_UNSUPPORTED;
}
void test_destroy(sof_optim_ctx*) {}
const char* test_last_error(sof_optim_ctx*) {
    return "test plugin does nothing";
}
sof_status test_step(sof_optim_ctx*, const sof_optim_slice*, const sof_optim_hparams*,
                     sof_optim_result*, void*) {
    return SOF_ERR_UNSUPPORTED;
}
sof_status test_step_multi(sof_optim_ctx*, const sof_optim_slice*, const sof_optim_hparams*,
                           int32_t, sof_optim_result*, void*) {
    return SOF_ERR_UNSUPPORTED;
}
sof_status test_rollback(sof_optim_ctx*, const sof_optim_slice*, const sof_optim_hparams*, void*) {
    return SOF_ERR_UNSUPPORTED;
}
sof_status test_stats(sof_optim_ctx*, const void*, int32_t, int64_t, float, sof_optim_result*,
                      void*) {
    return SOF_ERR_UNSUPPORTED;
}

#ifndef TEST_STRUCT_SIZE
#define TEST_STRUCT_SIZE sizeof(sof_optim_plugin)
#endif

const sof_slot_info kSlots[2] = {{"exp_avg", 1, 0}, {"exp_avg_sq", 0, 0}};

const sof_optim_plugin kTable = {
    TEST_ABI_VERSION,
    TEST_STRUCT_SIZE,
    TEST_NAME,
    "loader test plugin",
    SOF_TARGET_HOST,
    "adam",
    2,
    kSlots,
    1u << SOF_STATE_F32,
    1u << SOF_DTYPE_F32,
    test_score,
    test_variant,
    test_create,
    test_destroy,
    test_last_error,
    test_step,
    test_step_multi,
    test_rollback,
    test_stats,
};

} // namespace

extern "C" __attribute__((visibility("default"))) const sof_optim_plugin*
sof_optim_plugin_get(void) {
    return &kTable;
}
