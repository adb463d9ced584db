// Long-sequence machinery of the transformer driver on every architecture: the tiled LM head +
// loss and the tiled MLP against the untiled path, offloaded checkpoints bitwise against plain
// recompute, and the activation list shrinking to a tile.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "core/error.h"
#include "device/host_device.h"
#include "model/activations.h"
#include "model/block_spec.h"
#include "model/transformer.h"

using namespace sof;

namespace {

// 3 layers (two checkpoints go to host memory and the device slots alternate), B*T = 100
// positions, so tiles of 16, 24 or 64 rows leave a partial last tile.
model::ArchConfig arch_config(model::Arch a) {
    model::ArchConfig c;
    c.arch = a;
    c.max_seq_len = 64;
    c.vocab_size = 100;
    c.padded_vocab_size = 128;
    c.num_layers = 3;
    c.num_heads = 4;
    c.channels = 32;
    model::apply_arch_defaults(&c);
    if (a != model::Arch::Gpt2) {
        c.num_kv_heads = 2;
        c.intermediate_size = 40;
        c.tie_embeddings = a == model::Arch::Qwen2; // qwen2 tied, llama and qwen3 untied
    }
    if (a == model::Arch::Qwen3) c.head_dim = 12; // != C/NH
    return c;
}

const model::Arch kArchs[] = {model::Arch::Gpt2, model::Arch::Llama, model::Arch::Qwen2,
                              model::Arch::Qwen3};
constexpr int kB = 2, kT = 50;

struct Result {
    float loss = 0;
    std::vector<float> grads;
    size_t arena = 0; // the device's peak: every activation buffer, allocated once
};

Result run(const model::ArchConfig& cfg, const model::ModelOptions& base) {
    device::HostDevice dev(size_t{1} << 30, nullptr);
    model::ModelOptions o = base;
    o.device = &dev;
    Result r;
    {
        model::Transformer m(cfg, o, kB, kT);
        const model::ParamLayout& lay = m.layout();
        std::vector<float> params(lay.num_params);
        model::init_params(lay, params.data(), 0.2f, 7);
        std::vector<int> in, tg;
        for (int i = 0; i < kB * kT; i++) {
            in.push_back((i * 7919 + 13) % cfg.vocab_size);
            tg.push_back(i % 17 == 5 ? -1 : (i * 104729 + 5) % cfg.vocab_size); // some ignored
        }
        r.grads.assign(lay.num_params, 0.0f);
        model::FlatWeights w(lay, params.data());
        model::FlatGrads g(lay, r.grads.data());
        for (int rep = 0; rep < 2; rep++) { // twice: no state may leak between passes
            std::fill(r.grads.begin(), r.grads.end(), 0.0f);
            r.loss = m.forward(w, in.data(), tg.data(), kB, kT);
            m.backward(w, g, 1.0f / static_cast<float>(kB * kT));
        }
        r.arena = dev.peak();
    }
    CHECK(dev.used() == 0);
    return r;
}

model::ModelOptions opts(bool recompute, int loss_tile, int mlp_tile, bool offload = false,
                         int kept = 0) {
    model::ModelOptions o;
    o.recompute = recompute;
    o.loss_tile = loss_tile;
    o.mlp_tile = mlp_tile;
    o.offload_checkpoints = offload;
    o.device_checkpoints = kept;
    return o;
}

bool bitwise(const std::vector<float>& a, const std::vector<float>& b) {
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// max |a - b| / max |b| over each tensor of the layout; the worst tensor's value
double worst_tensor_rel(const model::ArchConfig& cfg, const std::vector<float>& a,
                        const std::vector<float>& b, std::string* which) {
    const model::ParamLayout lay = model::make_layout(cfg);
    double worst = 0;
    for (const model::TensorInfo& t : lay.tensors) {
        double d = 0, m = 0;
        for (size_t i = t.offset; i < t.offset + t.numel; i++) {
            d = std::max(d, std::fabs(static_cast<double>(a[i]) - b[i]));
            m = std::max(m, std::fabs(static_cast<double>(b[i])));
        }
        const double rel = m > 0 ? d / m : d;
        if (rel >= worst) worst = rel, *which = t.name;
    }
    return worst;
}

} // namespace

TEST_CASE("tiled LM head + loss and tiled MLP equal the untiled path within fp32 rounding") {
    // Tiles of 64 rows (the CPU matmul's row tile) give bitwise the same forward products; any
    // tile changes only the order in which the weight grads add up the rows (K of their sgemm
    // split at tile edges). Measured worst per-tensor error (max |diff| / max |untiled| of the
    // tensor): 1.6e-6 with 16-row MLP tiles, 2e-7 to 6e-7 otherwise. A wrong row offset or a
    // lost tile moves grads by O(1).
    struct Tiles {
        bool rec;
        int loss, mlp;
    };
    const Tiles cases[] = {{true, 24, 16}, {true, 64, 64}, {true, 24, 0}, {false, 64, 16}};
    for (model::Arch a : kArchs) {
        const model::ArchConfig cfg = arch_config(a);
        const Result ref[2] = {run(cfg, opts(false, model::kTileOff, model::kTileOff)),
                               run(cfg, opts(true, model::kTileOff, model::kTileOff))};
        CHECK(bitwise(ref[0].grads, ref[1].grads));
        for (const Tiles& c : cases) {
            CAPTURE(model::arch_name(a));
            CAPTURE(c.rec);
            CAPTURE(c.loss);
            CAPTURE(c.mlp);
            const Result& r = ref[c.rec];
            const Result t = run(cfg, opts(c.rec, c.loss, c.mlp));
            std::string which;
            const double rel = worst_tensor_rel(cfg, t.grads, r.grads, &which);
            CAPTURE(which);
            CHECK(std::fabs(t.loss - r.loss) <= 1e-6 * std::fabs(r.loss));
            if (c.loss == 64 && c.mlp != 16) CHECK(t.loss == r.loss); // the same products
            CHECK(rel <= 1e-5);
            CHECK(rel > 0.0); // the tiles did run (the weight grads round differently)
            CHECK(t.arena < r.arena);
            std::printf("  %-5s recompute %d loss tile %2d mlp tile %2d: worst grad rel %.2e "
                        "(%s)\n",
                        model::arch_name(a), c.rec, c.loss, c.mlp, rel, which.c_str());
        }
    }
}

TEST_CASE("offloaded checkpoints: bitwise equal to recompute without offload") {
    for (model::Arch a : kArchs)
        for (int tile : {0, 24}) {
            CAPTURE(model::arch_name(a));
            CAPTURE(tile);
            const model::ArchConfig cfg = arch_config(a);
            const Result rec = run(cfg, opts(true, tile, tile));
            const Result off = run(cfg, opts(true, tile, tile, true));
            CHECK(off.loss == rec.loss);
            CHECK(bitwise(off.grads, rec.grads));
            // the device holds two residual slots instead of L+1 (L-1 move to host memory)
            const size_t slot = static_cast<size_t>(kB) * kT * cfg.channels * 4;
            CHECK(rec.arena - off.arena == (cfg.num_layers + 1 - 2) * slot);
        }
}

TEST_CASE("offloaded checkpoints with the first K kept on the device: bitwise, K slots more") {
    model::ArchConfig cfg = arch_config(model::Arch::Qwen3);
    cfg.num_layers = 5; // 4 checkpoints: K = 1, 2 leave an odd and an even count to rotate
    const Result rec = run(cfg, opts(true, 24, 16));
    const size_t slot = static_cast<size_t>(kB) * kT * cfg.channels * 4;
    for (int k : {1, 2, 4}) {
        CAPTURE(k);
        const Result off = run(cfg, opts(true, 24, 16, true, k));
        CHECK(off.loss == rec.loss);
        CHECK(bitwise(off.grads, rec.grads));
        CHECK(rec.arena - off.arena == (cfg.num_layers + 1 - 2 - k) * slot);
    }
}

TEST_CASE("offloaded checkpoints at 1 and 2 layers (no or one host checkpoint)") {
    for (int L : {1, 2}) {
        model::ArchConfig cfg = arch_config(model::Arch::Llama);
        cfg.num_layers = L;
        const Result rec = run(cfg, opts(true, 0, 0));
        const Result off = run(cfg, opts(true, 0, 0, true));
        CAPTURE(L);
        CHECK(off.loss == rec.loss);
        CHECK(bitwise(off.grads, rec.grads));
    }
}

TEST_CASE("the activation list holds tiles, not B*T x Vp or B*T x intermediate") {
    const model::BlockSpec s = model::block_spec(arch_config(model::Arch::Llama));
    model::ActShape a;
    a.B = 1;
    a.T = 10000;
    a.recompute = true;
    auto bytes_of = [&](model::Act id) {
        size_t b = 0;
        for (const model::ActBuffer& x : model::activation_buffers(s, a))
            if (x.id == id) b += x.bytes;
        return b;
    };
    // auto: B*T > 4096 -> 4096-row tiles (the MLP only with recompute)
    CHECK(model::loss_rows(a) == model::kAutoTileRows);
    CHECK(model::mlp_rows(a) == model::kAutoTileRows);
    CHECK(bytes_of(model::Act::Logits) == size_t{4096} * s.Vp * 4);
    CHECK(bytes_of(model::Act::FcPre) == size_t{4096} * s.fc_rows() * 4);
    a.recompute = false;
    CHECK(model::mlp_rows(a) == 10000);
    CHECK(bytes_of(model::Act::FcPre) == size_t{10000} * s.fc_rows() * 4 * s.L);
    a.loss_tile = model::kTileOff;
    CHECK(bytes_of(model::Act::Logits) == size_t{10000} * s.Vp * 4);
    a.loss_tile = 300;
    a.mlp_tile = 200;
    CHECK(model::loss_rows(a) == 300);
    CHECK(model::mlp_rows(a) == 200);
    CHECK(bytes_of(model::Act::DAct) == size_t{200} * s.I * 4);
    a.T = 100; // a tile larger than B*T is the whole
    CHECK(model::loss_rows(a) == 100);
    CHECK_FALSE(model::mlp_tiled(a));
    // offloaded checkpoints: two device slots, L-1 host buffers
    a.recompute = true;
    a.offload = true;
    CHECK(bytes_of(model::Act::Res) == size_t{2} * 100 * s.C * 4);
    CHECK(bytes_of(model::Act::ResHost) == size_t(s.L - 1) * 100 * s.C * 4);
    CHECK(model::activation_bytes(s, a, 1, true) == static_cast<double>((s.L - 1) * 100 * s.C * 4));
}

TEST_CASE("tiled logits are not kept whole; offload without recompute is refused") {
    const model::ArchConfig cfg = arch_config(model::Arch::Gpt2);
    model::Transformer m(cfg, opts(false, 24, 0), kB, kT);
    std::vector<float> params(m.layout().num_params);
    model::init_params(m.layout(), params.data(), 0.2f, 7);
    std::vector<int> in(kB * kT, 3), tg(kB * kT, 4);
    model::FlatWeights w(m.layout(), params.data());
    m.forward(w, in.data(), tg.data(), kB, kT);
    CHECK_THROWS_WITH_AS(m.logits(), doctest::Contains("model.loss_tile = 0"), core::Error);
    CHECK_THROWS_WITH_AS(model::Transformer(cfg, opts(false, 0, 0, true), kB, kT),
                         doctest::Contains("needs model.recompute: true"), core::Error);
}

namespace {
class DegreeOnly : public model::SeqExchange { // what the constructor checks: the degree
  public:
    explicit DegreeOnly(int p) : p_(p) {}
    int degree() const override { return p_; }
    int index() const override { return 0; }
    void to_heads(const void*, void*, void*, size_t, int, int, int, int) override {}
    void to_tokens(const void*, void*, void*, size_t, int, int, int, int) override {}

  private:
    int p_;
};
} // namespace

TEST_CASE("the driver refuses heads that do not divide by the Ulysses degree, naming both") {
    const model::ArchConfig llama = arch_config(model::Arch::Llama); // 4 heads, 2 kv heads
    DegreeOnly three(3), four(4);
    model::ModelOptions o;
    o.seq = &three;
    CHECK_THROWS_WITH_AS(model::Transformer(llama, o, 1, 8),
                         doctest::Contains("model.num_heads = 4 is not divisible by "
                                           "parallel.sp = 3"),
                         core::Error);
    o.seq = &four; // the query heads divide, the kv heads do not
    CHECK_THROWS_WITH_AS(model::Transformer(llama, o, 1, 8),
                         doctest::Contains("model.num_kv_heads = 2 is not divisible by "
                                           "parallel.sp = 4"),
                         core::Error);
}
