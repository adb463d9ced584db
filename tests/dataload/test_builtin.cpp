// The built-in Markov corpus: SplitMix64 against published values, determinism, train/val
// streams, and the analytic entropy floor against a dense recomputation and long samples.
#include <doctest/doctest.h>

#include <cmath>
#include <vector>

#include "data/builtin.h"
#include "data/loader.h"
#include "data/rng.h"

using namespace sof;

namespace {

uint64_t fnv1a(const std::vector<uint16_t>& t) {
    uint64_t h = 1469598103934665603ULL;
    for (uint16_t x : t) {
        h = (h ^ (x & 0xff)) * 1099511628211ULL;
        h = (h ^ (x >> 8)) * 1099511628211ULL;
    }
    return h;
}

} // namespace

TEST_CASE("SplitMix64 matches the reference implementation's outputs") {
    // Reference values of Vigna's splitmix64.c for seed 1234567.
    data::SplitMix64 r(1234567);
    CHECK(r.next() == 6457827717110365317ULL);
    CHECK(r.next() == 3203168211198807973ULL);
    CHECK(r.next() == 9817491932198370423ULL);
    CHECK(r.next() == 4593380528125082431ULL);
    CHECK(r.next() == 16408922859458223821ULL);
}

TEST_CASE("permutation() is a permutation and depends on the seed") {
    std::vector<int64_t> p = data::permutation(1000, 5), q = data::permutation(1000, 6);
    std::vector<int> seen(1000, 0);
    for (int64_t x : p)
        seen[static_cast<size_t>(x)]++;
    for (int c : seen)
        CHECK(c == 1);
    CHECK(p != q);
    CHECK(p == data::permutation(1000, 5));
    CHECK(data::permutation(0, 1).empty());
    CHECK(data::permutation(1, 1) == std::vector<int64_t>{0});
}

TEST_CASE("weights: integers summing to 2^16, Zipf-shaped") {
    data::MarkovChain c(64, 1);
    uint32_t sum = 0;
    for (int k = 0; k < data::MarkovChain::kSuccessors; k++) {
        sum += c.weight(k);
        if (k > 0) CHECK(c.weight(k) < c.weight(k - 1));
    }
    CHECK(sum == 65536u);
}

TEST_CASE("entropy floor: closed form == dense -sum P log P / V") {
    for (int V : {2, 7, 64, 512}) {
        data::MarkovChain c(V, 1234);
        double h = 0.0;
        for (int i = 0; i < V; i++) {
            double row_sum = 0.0;
            for (int j = 0; j < V; j++) {
                double lp = c.log_prob(i, j);
                if (std::isinf(lp)) continue;
                row_sum += std::exp(lp);
                h -= std::exp(lp) * lp;
            }
            CHECK(row_sum == doctest::Approx(1.0).epsilon(1e-12));
        }
        // columns also sum to 1 (doubly stochastic: the uniform distribution is stationary)
        for (int j = 0; j < V; j++) {
            double col = 0.0;
            for (int i = 0; i < V; i++) {
                double lp = c.log_prob(i, j);
                if (!std::isinf(lp)) col += std::exp(lp);
            }
            CHECK(col == doctest::Approx(1.0).epsilon(1e-12));
        }
        CHECK(c.entropy_rate() == doctest::Approx(h / V).epsilon(1e-12));
        CHECK(c.entropy_rate() <= std::log(static_cast<double>(V)) + 1e-12);
    }
}

TEST_CASE("entropy floor matches empirical estimates from a long sample") {
    // N = 4M tokens, V = 64. (a) mean -log P(x_{n+1} | x_n) along the sample: its standard error
    // is about sqrt(Var(-log p) / N) ~ 4e-4 nats; (b) the plug-in conditional entropy of the
    // bigram counts with the Miller-Madow bias correction (cells - rows) / (2N). Tolerance
    // 3e-3 nats (several standard errors) for both.
    const int V = 64;
    const int64_t N = int64_t(1) << 22;
    data::MarkovChain c(V, data::derive_seed(1234, 0x636861696e));
    std::vector<uint16_t> t(static_cast<size_t>(N));
    c.generate(99, N, t.data());
    double nll = 0.0;
    std::vector<double> counts(static_cast<size_t>(V) * V, 0.0), rows(V, 0.0);
    std::vector<double> first(V, 0.0);
    int64_t impossible = 0; // transitions with P = 0 (must never be sampled)
    for (int64_t i = 0; i + 1 < N; i++) {
        double lp = c.log_prob(t[i], t[i + 1]);
        if (!std::isfinite(lp)) {
            impossible++;
            continue;
        }
        nll -= lp;
        counts[static_cast<size_t>(t[i]) * V + t[i + 1]] += 1.0;
        rows[t[i]] += 1.0;
    }
    for (int64_t i = 0; i < N; i++)
        first[t[i]] += 1.0;
    REQUIRE(impossible == 0);
    const double M = static_cast<double>(N - 1);
    nll /= M;
    double plug = 0.0, cells = 0.0;
    for (int i = 0; i < V; i++)
        for (int j = 0; j < V; j++) {
            double n = counts[static_cast<size_t>(i) * V + j];
            if (n == 0) continue;
            cells += 1;
            plug -= n / M * std::log(n / rows[i]);
        }
    plug += (cells - V) / (2.0 * M);
    const double H = c.entropy_rate();
    INFO("H = " << H << ", mean NLL = " << nll << ", plug-in = " << plug);
    CHECK(std::abs(nll - H) < 3e-3);
    CHECK(std::abs(plug - H) < 3e-3);
    // the stationary distribution is uniform: every token's frequency near 1/V
    for (int i = 0; i < V; i++)
        CHECK(std::abs(first[i] / N - 1.0 / V) < 2e-3);
}

TEST_CASE("builtin loader: deterministic, train and val differ, tokens < vocab") {
    config::DataConfig cfg; // builtin, seed 1234
    cfg.builtin.train_tokens = 1 << 16;
    cfg.builtin.val_tokens = 1 << 12;
    cfg.shuffle = false;
    const int V = 512, B = 4, T = 64;
    data::DataLoader tr(cfg, data::Split::Train, V, B, T, 0, 1);
    data::DataLoader tr2(cfg, data::Split::Train, V, B, T, 0, 1);
    data::DataLoader va(cfg, data::Split::Val, V, B, T, 0, 1);
    CHECK(tr.entropy_floor() == va.entropy_floor());
    CHECK(tr.entropy_floor() > 1.0);
    CHECK(tr.entropy_floor() < std::log(8.0));
    CHECK(tr.batches_per_epoch() == ((1 << 16) - 1) / (B * T));
    CHECK(tr.describe().find("builtin") != std::string::npos);
    std::vector<int> in(B * T), tg(B * T), in2(B * T), tg2(B * T), vin(B * T), vtg(B * T);
    std::vector<uint16_t> stream;
    for (int k = 0; k < 16; k++) {
        tr.next(in.data(), tg.data());
        tr2.next(in2.data(), tg2.data());
        va.next(vin.data(), vtg.data());
        CHECK(in == in2);
        CHECK(in != vin);
        for (int i = 0; i < B * T; i++) {
            CHECK(in[i] < V);
            if (i + 1 < B * T) CHECK(tg[i] == in[i + 1]);
        }
        for (int x : in)
            stream.push_back(static_cast<uint16_t>(x));
    }
    // Regression guard: the corpus for seed 1234, V = 512 must never change silently (stored
    // checkpoints and reported losses refer to it). Update only with a deliberate format change.
    CHECK(fnv1a(stream) == 6314390456829344898ULL);
    cfg.builtin.seed = 1235;
    data::DataLoader other(cfg, data::Split::Train, V, B, T, 0, 1);
    other.next(in2.data(), tg2.data());
    tr.reset();
    tr.next(in.data(), tg.data());
    CHECK(in != in2);
}
