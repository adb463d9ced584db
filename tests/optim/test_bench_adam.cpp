// `superoffload bench adam` machinery: every ceiling strategy moves exactly Adam's bytes with the
// right values (in place, separate, with and without the copy), a tiny run (its arguments:
// tests/app/test_cli_args).
#include <doctest/doctest.h>

#include <cstring>
#include <set>

#include "core/error.h"
#include "bench/bench_adam.h"
#include "bench/bench_ceiling.h"
#include "optim_test_util.h"

using namespace sof;
using namespace sof::test;

TEST_CASE("every ceiling strategy writes p+g, m+g, v+g and the truncated copy, nothing else") {
    const auto strategies = bench::ceiling_strategies();
    std::set<std::string> names;
    for (const auto& s : strategies)
        names.insert(s.name());
    CHECK(names.size() == strategies.size()); // distinct, named
    CHECK(strategies.size() >= 12);           // 3 store kinds x 4 prefetch distances (x pinning)
    const int64_t n = 3 * 8192 + 77;          // whole tiles, a partial one, a scalar tail
    for (const auto& st : strategies) {
        for (int separate = 0; separate < 2; separate++)
            for (int lowp = 0; lowp < 2; lowp++) {
                CAPTURE(st.name());
                CAPTURE(separate);
                CAPTURE(lowp);
                AdamData d(n, 3, true), orig(n, 3, true);
                ABuf<float> po(n), mo(n), vo(n);
                ABuf<uint16_t> l(n + 1);
                l[n] = 0xabcd; // guard: nothing written past n
                bench::CeilingBuffers b;
                b.n = n;
                b.p = d.p.data();
                b.g = d.g32.data();
                b.m = d.m.data();
                b.v = d.v.data();
                b.po = separate ? po.data() : d.p.data();
                b.mo = separate ? mo.data() : d.m.data();
                b.vo = separate ? vo.data() : d.v.data();
                b.lowp = lowp ? l.data() : nullptr;
                CHECK(bench::run_ceiling(b, st, 2) > 0.0);
                int64_t bad = 0;
                for (int64_t i = 0; i < n; i++) {
                    float g = orig.g32[i];
                    bad += b.po[i] != orig.p[i] + g;
                    bad += b.mo[i] != orig.m[i] + g;
                    bad += b.vo[i] != orig.v[i] + g;
                    uint32_t u;
                    std::memcpy(&u, &b.po[i], 4);
                    if (lowp) bad += l[i] != static_cast<uint16_t>(u >> 16);
                }
                CHECK(bad == 0);
                CHECK(l[n] == 0xabcd);
                if (separate) { // inputs untouched
                    CHECK(std::memcmp(d.p.data(), orig.p.data(), 4 * n) == 0);
                    CHECK(std::memcmp(d.m.data(), orig.m.data(), 4 * n) == 0);
                    CHECK(std::memcmp(d.v.data(), orig.v.data(), 4 * n) == 0);
                }
            }
    }
}

TEST_CASE("a tiny bench adam run: both modes, every strategy calibrated, paired ratios") {
    bench::BenchAdamOptions o;
    o.params = 100003;
    o.plugin = SOF_HOST_PLUGIN; // the host plugin this build makes
    o.plugin_dir = SOF_PLUGIN_DIR;
    o.threads = 2;
    o.reps = 1;
    o.pairs = 3;
    bench::BenchAdamReport r = bench::bench_adam(o);
    REQUIRE(r.modes.size() == 2);
    CHECK(r.pairs == 3);
    for (const auto& m : r.modes) {
        CAPTURE(m.mode);
        CHECK(m.tries.size() == bench::ceiling_strategies().size());
        bool found = false;
        for (const auto& t : m.tries) {
            CHECK(t.seconds > 0.0);
            found |= t.strategy == m.ceiling_strategy;
        }
        CHECK(found);
        CHECK(m.fraction_min <= m.fraction_of_ceiling);
        CHECK(m.fraction_of_ceiling <= m.fraction_max);
        CHECK(m.fraction_of_ceiling > 0.0);
        CHECK(m.ceiling_best_seconds <= m.ceiling_seconds);
        CHECK(m.step_best_seconds <= m.step_seconds);
        CHECK(m.bf16_grads_params_per_s > 0.0); // the variants ran (their speed is a benchmark's)
        CHECK(m.bf16_state_params_per_s > 0.0);
        CHECK(m.bf16_grads_speedup > 0.0);
        // every state format timed in the same pairs, with its bytes and bandwidth share
        std::set<std::string> names;
        for (const auto& f : m.formats) {
            CAPTURE(f.format);
            names.insert(f.format);
            CHECK(f.seconds > 0.0);
            CHECK(f.speedup > 0.0);
            CHECK(f.bandwidth_fraction > 0.0);
            CHECK(f.ns_per_param == doctest::Approx(1e9 * f.seconds / o.params));
        }
        for (const char* want : {"fp32", "bf16 moments", "q8 moments", "bf16 master",
                                 "bf16 master + bf16 moments", "bf16 master + q8 moments"})
            CHECK(names.count(want) == 1);
        REQUIRE_FALSE(m.formats.empty());
        CHECK(m.formats[0].format == "fp32");
        CHECK(m.formats[0].speedup == 1.0);
        CHECK(m.formats[0].bytes_per_param == 30.0);
        CHECK(m.q8_speedup > 0.0);
    }
    // bytes per parameter of each format (reads + writes; q8: 1 byte + a 4-byte scale per block)
    CHECK(bench::step_bytes_per_param(SOF_DTYPE_F32, SOF_STATE_F32, SOF_DTYPE_F32, true, 256) ==
          30.0);
    CHECK(bench::step_bytes_per_param(SOF_DTYPE_F32, SOF_STATE_BF16, SOF_DTYPE_F32, true, 256) ==
          22.0);
    CHECK(bench::step_bytes_per_param(SOF_DTYPE_F32, SOF_STATE_Q8, SOF_DTYPE_F32, true, 256) ==
          18.0625);
    CHECK(bench::step_bytes_per_param(SOF_DTYPE_F32, SOF_STATE_Q8, SOF_DTYPE_BF16, true, 256) ==
          12.0625);
    CHECK(bench::step_bytes_per_param(SOF_DTYPE_BF16, SOF_STATE_F32, SOF_DTYPE_F32, false, 256) ==
          26.0);
    CHECK(bench::bench_adam_json(r).find("\"q8 moments\": {\"bytes_per_param\"") !=
          std::string::npos);
    CHECK(bench::bench_adam_text(r).find("q8 moments") != std::string::npos);
    CHECK(bench::bench_adam_json(r).find("\"ceiling_tries\"") != std::string::npos);
    CHECK(bench::bench_adam_json(r).find("\"bf16_grads_speedup\"") != std::string::npos);
    CHECK(bench::bench_adam_text(r).find("bf16 grads") != std::string::npos);
    CHECK(bench::bench_adam_text(r).find(r.modes[0].ceiling_strategy) != std::string::npos);
}
