// CPU kernels on odd sizes against naive double-precision loops (every sgemm tile edge), and the
// whole model's gradients against central finite differences (a check that needs no PyTorch).
#include <doctest/doctest.h>

#include <omp.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "model/transformer.h"
#include "kernels/bias_grad.h"
#include "kernels/matmul.h"
#include "model_test_util.h"

using namespace sof;

namespace {

std::vector<float> randn(size_t n, unsigned seed) {
    std::mt19937 gen(seed);
    std::normal_distribution<float> d(0.0f, 1.0f);
    std::vector<float> v(n);
    for (float& x : v)
        x = d(gen);
    return v;
}

double max_err(const std::vector<float>& got, const std::vector<double>& want) {
    double e = 0;
    for (size_t i = 0; i < got.size(); i++)
        e = std::max(e, std::fabs(got[i] - want[i]));
    return e;
}

} // namespace

TEST_CASE("matmul forward/backward on sizes that cut every tile edge") {
    kernels::cpu::use_single_threaded_blas();
    // tiles are 64 x 256: N and OC/C straddle them (rows 70 = 64 + 6, columns 300 = 256 + 44)
    const int N = 70, C = 300, OC = 130;
    const std::vector<float> inp = randn(static_cast<size_t>(N) * C, 1);
    const std::vector<float> w = randn(static_cast<size_t>(OC) * C, 2);
    const std::vector<float> bias = randn(OC, 3);
    const std::vector<float> dout = randn(static_cast<size_t>(N) * OC, 4);
    std::vector<double> out_ref(static_cast<size_t>(N) * OC), dinp_ref(static_cast<size_t>(N) * C),
        dw_ref(static_cast<size_t>(OC) * C, 0.5), db_ref(OC, 0.25);
    for (int n = 0; n < N; n++)
        for (int o = 0; o < OC; o++) {
            double s = bias[o];
            for (int c = 0; c < C; c++)
                s += static_cast<double>(inp[n * C + c]) * w[o * C + c];
            out_ref[static_cast<size_t>(n) * OC + o] = s;
        }
    for (int n = 0; n < N; n++)
        for (int c = 0; c < C; c++) {
            double s = 0;
            for (int o = 0; o < OC; o++)
                s += static_cast<double>(dout[n * OC + o]) * w[o * C + c];
            dinp_ref[static_cast<size_t>(n) * C + c] = s;
        }
    for (int o = 0; o < OC; o++) {
        for (int c = 0; c < C; c++) {
            double s = 0;
            for (int n = 0; n < N; n++)
                s += static_cast<double>(dout[n * OC + o]) * inp[n * C + c];
            dw_ref[static_cast<size_t>(o) * C + c] += s;
        }
        for (int n = 0; n < N; n++)
            db_ref[static_cast<size_t>(o)] += dout[n * OC + o];
    }
    const int saved = omp_get_max_threads();
    std::vector<float> first_dw;
    for (int threads : {1, 3}) {
        omp_set_num_threads(threads);
        std::vector<float> out(out_ref.size()), dinp(dinp_ref.size());
        std::vector<float> dw(dw_ref.size(), 0.5f), db(db_ref.size(), 0.25f);
        kernels::cpu::matmul_forward(out.data(), nullptr, inp.data(), w.data(), bias.data(), N, C,
                                     OC);
        kernels::cpu::matmul_backward(dinp.data(), dw.data(), dout.data(), inp.data(), w.data(), N,
                                      C, OC);
        kernels::cpu::bias_grad(db.data(), dout.data(), N, OC);
        CAPTURE(threads);
        // sums of ~300 products of unit normals: |sum| ~ 17, fp32 error ~ 1e-5 at worst
        CHECK(max_err(out, out_ref) < 1e-4);
        CHECK(max_err(dinp, dinp_ref) < 1e-4);
        CHECK(max_err(dw, dw_ref) < 1e-4);
        CHECK(max_err(db, db_ref) < 1e-4);
        if (first_dw.empty())
            first_dw = dw;
        else
            CHECK(std::memcmp(first_dw.data(), dw.data(), dw.size() * sizeof(float)) == 0);
    }
    omp_set_num_threads(saved);
}

TEST_CASE("gradients agree with central finite differences of the loss") {
    const auto& ref = sof::testing::gpt2_ref();
    model::Transformer gpt(ref.config, model::ModelOptions{}, ref.B, ref.T);
    const model::ParamLayout& lay = gpt.layout();
    std::vector<float> params = sof::testing::ref_to_flat(lay, ref.params);
    std::vector<float> grads(lay.num_params, 0.0f);
    model::FlatWeights w(lay, params.data());
    model::FlatGrads g(lay, grads.data());
    const int N = ref.B * ref.T;
    gpt.forward(w, ref.inputs.data(), ref.targets.data(), ref.B, ref.T);
    gpt.backward(w, g, 1.0f / static_cast<float>(N));
    // one element of every tensor of block 1 and the embeddings, the one with the largest grad
    // (a small grad would be lost in the fp32 loss's rounding: |loss| ulp ~ 5e-7)
    int checked = 0;
    for (const model::TensorInfo& t : lay.tensors) {
        if (t.layer == 0) continue;
        size_t best = t.offset;
        for (size_t i = t.offset; i < t.offset + t.numel; i++)
            if (std::fabs(grads[i]) > std::fabs(grads[best])) best = i;
        const float h = 1e-2f, saved = params[best];
        params[best] = saved + h;
        const double lp = gpt.forward(w, ref.inputs.data(), ref.targets.data(), ref.B, ref.T);
        params[best] = saved - h;
        const double lm = gpt.forward(w, ref.inputs.data(), ref.targets.data(), ref.B, ref.T);
        params[best] = saved;
        const double fd = (lp - lm) / (2.0 * h);
        CAPTURE(t.name);
        CAPTURE(fd);
        CAPTURE(grads[best]);
        // O(h^2) truncation plus 2 ulps of the loss / 2h
        CHECK(std::fabs(fd - grads[best]) <=
              5e-4 * std::fabs(grads[best]) + 5e-5); // measured <= 1.7e-5
        checked++;
    }
    CHECK(checked == 2 + 12 + 2);
}
