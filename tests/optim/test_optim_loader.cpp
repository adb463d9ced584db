// Plugin loader: directory resolution, listing, selection by name/score, and the errors for a
// missing plugin, an empty directory, an ABI mismatch (test plugin built with version 999) and
// a plugin that scores 0.
#include <doctest/doctest.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include "core/error.h"
#include "optim/optimizer.h"

using namespace sof;
namespace fs = std::filesystem;

namespace {

// The message of the core::Error (Config) that `fn` throws; fails the test otherwise.
template <typename F> std::string config_error(F fn) {
    try {
        fn();
    } catch (const core::Error& e) {
        CHECK(e.kind() == core::ErrorKind::Config);
        return e.what();
    }
    FAIL("no error thrown");
    return "";
}

bool has(const std::string& s, const std::string& what) {
    return s.find(what) != std::string::npos;
}

} // namespace

TEST_CASE("plugin_dir: explicit, then $SOF_PLUGIN_DIR, then <exe>/../plugins") {
    CHECK(optim::plugin_dir("/x/y") == "/x/y");
    setenv("SOF_PLUGIN_DIR", "/from/env", 1);
    CHECK(optim::plugin_dir("") == "/from/env");
    unsetenv("SOF_PLUGIN_DIR");
    fs::path exe = fs::read_symlink("/proc/self/exe");
    CHECK(optim::plugin_dir("") ==
          (exe.parent_path().parent_path() / "plugins").lexically_normal().string());
}

// SOF_HOST_PLUGIN: the host plugin this build makes (cpu_adam on x86-64, grace_adam on aarch64)
TEST_CASE("list_plugins finds the host plugin with a positive score") {
    auto all = optim::list_plugins(SOF_PLUGIN_DIR);
    bool found = false;
    for (const auto& p : all) {
        MESSAGE(p.name << " variant=" << p.variant << " score=" << p.score << " path=" << p.path);
        if (p.name == SOF_HOST_PLUGIN) {
            found = true;
            CHECK(p.score > 0);
            CHECK(p.target == SOF_TARGET_HOST);
            CHECK_FALSE(p.variant.empty());
            CHECK(fs::path(p.path).is_absolute());
        }
    }
    CHECK(found);
}

TEST_CASE("load by name and by score") {
    auto a = optim::Optimizer::load(SOF_PLUGIN_DIR, SOF_HOST_PLUGIN, SOF_TARGET_HOST, 1);
    CHECK(a->info().name == SOF_HOST_PLUGIN);
    auto b = optim::Optimizer::load(SOF_PLUGIN_DIR, "auto", SOF_TARGET_HOST, 1);
    int best = 0;
    for (const auto& p : optim::list_plugins(SOF_PLUGIN_DIR))
        if (p.target == SOF_TARGET_HOST) best = std::max(best, p.score);
    CHECK(b->info().score == best);
}

TEST_CASE("a missing named plugin: error names it, the directory and what was found") {
    std::string msg = config_error(
        [] { optim::Optimizer::load(SOF_PLUGIN_DIR, "warp_adam", SOF_TARGET_HOST, 1); });
    CHECK(has(msg, "'warp_adam' not found"));
    CHECK(has(msg, SOF_PLUGIN_DIR));
    CHECK(has(msg, SOF_HOST_PLUGIN " ("));
    CHECK(has(msg, "score"));
}

TEST_CASE("an empty or missing plugin directory") {
    fs::path empty = fs::temp_directory_path() / "sof_empty_plugins";
    fs::create_directories(empty);
    std::string msg =
        config_error([&] { optim::Optimizer::load(empty.string(), "auto", SOF_TARGET_HOST, 1); });
    CHECK(has(msg, empty.string()));
    CHECK(has(msg, "found: none"));
    msg = config_error(
        [&] { optim::Optimizer::load(empty.string(), "cpu_adam", SOF_TARGET_HOST, 1); });
    CHECK(has(msg, "'cpu_adam' not found"));
    msg = config_error(
        [] { optim::Optimizer::load("/nonexistent/plugins", "auto", SOF_TARGET_HOST, 1); });
    CHECK(has(msg, "/nonexistent/plugins"));
    CHECK(has(msg, "does not exist"));
}

TEST_CASE("ABI mismatch: listed with score 0, load names both versions") {
    bool listed = false;
    for (const auto& p : optim::list_plugins(SOF_TEST_PLUGIN_DIR))
        if (p.name == "abi999") {
            listed = true;
            CHECK(p.score == 0);
            CHECK(has(p.description, "999"));
        }
    CHECK(listed);
    std::string msg = config_error(
        [] { optim::Optimizer::load(SOF_TEST_PLUGIN_DIR, "abi999", SOF_TARGET_HOST, 1); });
    CHECK(has(msg, "version 999"));
    CHECK(has(msg, "version " + std::to_string(SOF_OPTIM_ABI_VERSION)));
    CHECK(has(msg, "rebuild"));
}

TEST_CASE("a plugin that scores 0 is a clear error; auto skips it") {
    std::string msg = config_error(
        [] { optim::Optimizer::load(SOF_TEST_PLUGIN_DIR, "zero_score", SOF_TARGET_HOST, 1); });
    CHECK(has(msg, "zero_score"));
    CHECK(has(msg, "cannot run on this machine"));
    msg = config_error(
        [] { optim::Optimizer::load(SOF_TEST_PLUGIN_DIR, "auto", SOF_TARGET_HOST, 1); });
    CHECK(has(msg, "no host-target plugin"));
    CHECK(has(msg, "abi999"));
    CHECK(has(msg, "zero_score"));
}

TEST_CASE("a forced cpu_adam variant this CPU lacks scores 0") {
    if (std::string(SOF_HOST_PLUGIN) != "cpu_adam") {
        MESSAGE("no cpu_adam in this build (host plugin " SOF_HOST_PLUGIN ")");
        return;
    }
    setenv("SOF_CPU_ADAM_VARIANT", "no_such_isa", 1);
    std::string msg = config_error(
        [] { optim::Optimizer::load(SOF_PLUGIN_DIR, "cpu_adam", SOF_TARGET_HOST, 1); });
    unsetenv("SOF_CPU_ADAM_VARIANT");
    CHECK(has(msg, "cpu_adam"));
    CHECK(has(msg, "cannot run"));
}

TEST_CASE("make_hparams and make_slice fill sizes and default to in place") {
    float p[4]{}, m[4]{}, v[4]{}, g[4]{};
    sof_optim_slice s = optim::make_slice(4, p, g, SOF_DTYPE_F32, m, v);
    CHECK(s.struct_size == sizeof(sof_optim_slice));
    CHECK(s.param_out == p);
    CHECK(s.slot[0].data_out == m);
    CHECK(s.slot[1].data_out == v);
    CHECK(s.lowp_out == nullptr);
    sof_optim_hparams h =
        optim::make_hparams(1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, 7, SOF_ADAM_L2, false, 0.5f);
    CHECK(h.struct_size == sizeof(sof_optim_hparams));
    CHECK(h.step == 7);
    CHECK(h.mode == SOF_ADAM_L2);
    CHECK(h.bias_correction == 0);
    CHECK(h.grad_scale == 0.5f);
}

TEST_CASE("a plugin table shorter than the ABI's: the message reads as a sentence") {
    std::string msg = config_error(
        [] { optim::Optimizer::load(SOF_TEST_PLUGIN_DIR, "short_table", SOF_TARGET_HOST, 1); });
    INFO(msg);
    CHECK(has(msg, "optimizer plugin 'short_table' ("));
    CHECK(has(msg, ") has a plugin table of 16 bytes, but optimizer ABI version " +
                       std::to_string(SOF_OPTIM_ABI_VERSION) + " needs at least " +
                       std::to_string(sizeof(sof_optim_plugin)) + " bytes: rebuild"));
}

TEST_CASE("auto: each .so that cannot be used is listed with the reason") {
    std::string msg = config_error(
        [] { optim::Optimizer::load(SOF_TEST_PLUGIN_DIR, "auto", SOF_TARGET_HOST, 1); });
    INFO(msg);
    CHECK(has(msg, "libbroken.so (not loadable: dlopen failed: "));
    CHECK(has(msg, "libabi999.so (not loadable: was built for optimizer ABI version 999"));
    CHECK(has(msg, "libshort_table.so (not loadable: has a plugin table of 16 bytes"));
    CHECK(has(msg, "zero_score (host test, scores 0 on this machine"));
}
