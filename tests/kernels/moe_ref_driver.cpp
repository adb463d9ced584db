// Test helper (not a test) for tests/kernels/moe_reference.py: composes the MoE ops of lib/kernels
// into L sparse MoE blocks (CPU twins, fp32), runs forward and backward, writes outputs and grads.
// Usage:
//   moe_ref_driver --in FILE --out FILE --kind qwen3moe|mixtral|gpt-oss --topk K [--norm 0|1]
//                  [--aux-coef c] [--z-coef z]
//     --in (F32 safetensors): "x" (N,H), "dy" (N,H), optional "mask" (N); per layer l = 0..L-1:
//       "l<l>.router" (E,H), "l<l>.gate_up" (E,2I,H), "l<l>.down" (E,H,I); gpt-oss also
//       "l<l>.router_bias" (E), "l<l>.gate_up_bias" (E,2I), "l<l>.down_bias" (E,H). Block l+1
//       takes block l's output; the loss is sum(dy * y_L) + aux-coef * balance + z-coef * z.
//     --out: "y" (N,H), "balance" (1), "z" (1), "dx" (N,H), "grad:<name>" for every weight.
//   moe_ref_driver --mxfp4 IN OUT: every "<base>_blocks"/"<base>_scales" pair of IN dequantized
//     (ckpt/mxfp4.h) to "<base>" (F32) in OUT.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "ckpt/mxfp4.h"
#include "ckpt/safetensors.h"
#include "core/error.h"
#include "kernels/bias_grad.h"
#include "kernels/grouped_matmul.h"
#include "kernels/matmul.h"
#include "kernels/moe_aux.h"
#include "kernels/moe_dispatch.h"
#include "kernels/moe_router.h"
#include "kernels/residual.h"
#include "kernels/swiglu.h"
#include "kernels/swiglu_clamp.h"

using namespace sof;
namespace k = sof::kernels;

namespace {

using Vec = std::vector<float>;

struct Opts {
    std::string in, out, kind;
    int K = 0;
    bool norm = true;
    float aux_coef = 0.0f, z_coef = 0.0f;
};

struct Tensors {
    std::map<std::string, Vec> v;
    std::map<std::string, std::vector<int64_t>> shape;
    const Vec& at(const std::string& n) const {
        auto it = v.find(n);
        if (it == v.end())
            SOF_FAIL(Format, "moe_ref_driver: input tensor '%s' is missing", n.c_str());
        return it->second;
    }
    bool has(const std::string& n) const { return v.count(n) > 0; }
};

Tensors read_all(const std::string& path) {
    ckpt::SafetensorsFile f(path);
    Tensors t;
    for (const auto& x : f.tensors()) {
        Vec d(x.numel);
        f.read_f32(x, 0, x.numel, d.data());
        t.v[x.name] = std::move(d);
        t.shape[x.name] = x.shape;
    }
    return t;
}

// One layer's forward state (what the backward needs).
struct Layer {
    std::string p; // name prefix "l<l>."
    Vec x, logits, w, xs, gu, h, ys;
    std::vector<int> idx, order, slot, off;
};

struct Model {
    Opts o;
    int N = 0, H = 0, E = 0, I = 0, L = 0;
    bool oss = false;
    const Tensors* in = nullptr;
    k::RouterArgs ra;
    k::ClampedSwiglu act;

    const float* bias(const std::string& n) const { return oss ? in->at(n).data() : nullptr; }
    k::GroupedShape shape(const Layer& y, int C, int OC) const {
        k::GroupedShape s;
        s.E = E;
        s.C = C;
        s.OC = OC;
        s.offsets = s.host_offsets = y.off.data();
        return s;
    }

    Vec forward(Layer& y, const Vec& x, float* stats) const {
        const auto ex = k::cpu_exec();
        const size_t P = static_cast<size_t>(N) * o.K;
        y.x = x;
        y.logits.resize(static_cast<size_t>(N) * E);
        k::matmul_forward(ex, y.logits.data(), static_cast<float*>(nullptr), x.data(),
                          in->at(y.p + "router").data(), bias(y.p + "router_bias"), N, H, E);
        y.idx.resize(P);
        y.w.resize(P);
        k::moe_router_forward(ex, y.idx.data(), y.w.data(), y.logits.data(), ra);
        k::moe_aux_stats(ex, stats, y.logits.data(), y.idx.data(), mask(), N, E, o.K);
        y.order.resize(P);
        y.slot.resize(P);
        y.off.resize(static_cast<size_t>(E) + 1);
        k::moe_plan(ex, y.order.data(), y.slot.data(), y.off.data(), y.off.data(), y.idx.data(), N,
                    o.K, E);
        y.xs.resize(P * H);
        k::moe_gather(ex, y.xs.data(), x.data(), y.order.data(), N, o.K, H);
        y.gu.resize(P * 2 * I);
        k::grouped_matmul_forward(ex, y.gu.data(), y.xs.data(), in->at(y.p + "gate_up").data(),
                                  bias(y.p + "gate_up_bias"), shape(y, H, 2 * I));
        y.h.resize(P * I);
        if (oss)
            k::swiglu_clamp_forward(ex, y.h.data(), y.gu.data(), static_cast<int>(P), I, act);
        else
            k::swiglu_forward(ex, y.h.data(), y.gu.data(), static_cast<int>(P), I);
        y.ys.resize(P * H);
        k::grouped_matmul_forward(ex, y.ys.data(), y.h.data(), in->at(y.p + "down").data(),
                                  bias(y.p + "down_bias"), shape(y, I, H));
        Vec out(static_cast<size_t>(N) * H);
        k::moe_combine(ex, out.data(), y.ys.data(), y.w.data(), y.slot.data(), N, o.K, H);
        return out;
    }

    // dy of this layer's output -> dx of its input; grads into g ("grad:<name>").
    Vec backward(const Layer& y, const Vec& dy, const float* stats,
                 std::map<std::string, Vec>& g) const {
        const auto ex = k::cpu_exec();
        const size_t P = static_cast<size_t>(N) * o.K;
        auto grad = [&](const std::string& n) -> float* {
            Vec& v = g["grad:" + y.p + n];
            v.assign(in->at(y.p + n).size(), 0.0f);
            return v.data();
        };
        Vec dys(P * H), dw(P), dh(P * I), dgu(P * 2 * I), dxs(P * H),
            dx(static_cast<size_t>(N) * H);
        k::moe_combine_backward(ex, dys.data(), dw.data(), dy.data(), y.ys.data(), y.w.data(),
                                y.slot.data(), N, o.K, H);
        k::grouped_matmul_backward(ex, dh.data(), grad("down"), oss ? grad("down_bias") : nullptr,
                                   dys.data(), y.h.data(), in->at(y.p + "down").data(),
                                   shape(y, I, H));
        if (oss)
            k::swiglu_clamp_backward(ex, dgu.data(), dh.data(), y.gu.data(), static_cast<int>(P), I,
                                     act);
        else
            k::swiglu_backward(ex, dgu.data(), dh.data(), y.gu.data(), static_cast<int>(P), I);
        k::grouped_matmul_backward(ex, dxs.data(), grad("gate_up"),
                                   oss ? grad("gate_up_bias") : nullptr, dgu.data(), y.xs.data(),
                                   in->at(y.p + "gate_up").data(), shape(y, H, 2 * I));
        k::moe_gather_backward(ex, dx.data(), dxs.data(), y.slot.data(), N, o.K, H);
        k::RouterAuxGrad aux;
        aux.stats = stats;
        aux.mask = mask();
        aux.d_aux = o.aux_coef;
        aux.d_z = o.z_coef;
        Vec dlogits(static_cast<size_t>(N) * E), dxr(dx.size());
        k::moe_router_backward(ex, dlogits.data(), dw.data(), y.logits.data(), y.idx.data(), ra,
                               &aux);
        k::matmul_backward(ex, dxr.data(), grad("router"), dlogits.data(), y.x.data(),
                           in->at(y.p + "router").data(), N, H, E);
        if (oss) k::bias_grad(ex, grad("router_bias"), dlogits.data(), N, E);
        k::add_inplace(ex, dx.data(), dxr.data(), static_cast<long>(dx.size()));
        return dx;
    }

    const float* mask() const { return in->has("mask") ? in->at("mask").data() : nullptr; }
};

int run_mxfp4(const std::string& in, const std::string& out) {
    ckpt::SafetensorsFile f(in);
    std::vector<Vec> data;
    std::vector<ckpt::SafetensorsOut> outs;
    for (const auto& t : f.tensors()) {
        const std::string suffix = "_blocks";
        if (t.name.size() <= suffix.size() ||
            t.name.compare(t.name.size() - suffix.size(), suffix.size(), suffix) != 0)
            continue;
        const std::string base = t.name.substr(0, t.name.size() - suffix.size());
        std::vector<int64_t> shape;
        data.push_back(ckpt::read_mxfp4(f, base, &shape));
        outs.push_back({base, shape, nullptr});
    }
    for (size_t i = 0; i < outs.size(); i++)
        outs[i].data = data[i].data();
    ckpt::write_safetensors(out, outs, false);
    return 0;
}

int run(int argc, char** argv) {
    Opts o;
    for (int i = 1; i < argc; i++) {
        const std::string a = argv[i];
        auto next = [&]() -> std::string {
            if (i + 1 >= argc) SOF_FAIL(Usage, "moe_ref_driver: %s needs a value", a.c_str());
            return argv[++i];
        };
        if (a == "--mxfp4") {
            const std::string in = next();
            return run_mxfp4(in, next());
        }
        if (a == "--in")
            o.in = next();
        else if (a == "--out")
            o.out = next();
        else if (a == "--kind")
            o.kind = next();
        else if (a == "--topk")
            o.K = std::atoi(next().c_str());
        else if (a == "--norm")
            o.norm = next() != "0";
        else if (a == "--aux-coef")
            o.aux_coef = std::strtof(next().c_str(), nullptr);
        else if (a == "--z-coef")
            o.z_coef = std::strtof(next().c_str(), nullptr);
        else
            SOF_FAIL(Usage, "moe_ref_driver: unknown argument '%s'", a.c_str());
    }
    if (o.in.empty() || o.out.empty() || o.K < 1 ||
        (o.kind != "qwen3moe" && o.kind != "mixtral" && o.kind != "gpt-oss"))
        SOF_FAIL(Usage,
                 "usage: moe_ref_driver --in FILE --out FILE --kind qwen3moe|mixtral|gpt-oss "
                 "--topk K [--norm 0|1] [--aux-coef c] [--z-coef z]");
    k::cpu::use_single_threaded_blas();
    const Tensors in = read_all(o.in);
    Model m;
    m.o = o;
    m.in = &in;
    m.oss = o.kind == "gpt-oss";
    m.N = static_cast<int>(in.shape.at("x")[0]);
    m.H = static_cast<int>(in.shape.at("x")[1]);
    m.E = static_cast<int>(in.shape.at("l0.router")[0]);
    m.I = static_cast<int>(in.shape.at("l0.down")[2]);
    while (in.has("l" + std::to_string(m.L) + ".router"))
        m.L++;
    m.ra.N = m.N;
    m.ra.E = m.E;
    m.ra.K = o.K;
    m.ra.kind = m.oss ? k::RouterKind::TopkSoftmax : k::RouterKind::SoftmaxTopk;
    m.ra.renorm = o.kind == "mixtral" || o.norm;

    std::vector<Layer> layers(static_cast<size_t>(m.L));
    Vec stats(static_cast<size_t>(k::moe_aux_stats_size(m.E)), 0.0f);
    Vec x = in.at("x");
    for (int l = 0; l < m.L; l++) {
        layers[static_cast<size_t>(l)].p = "l" + std::to_string(l) + ".";
        x = m.forward(layers[static_cast<size_t>(l)], x, stats.data());
    }
    const k::MoeAuxLosses losses = k::moe_aux_losses(stats.data(), m.E);
    std::map<std::string, Vec> g;
    Vec d = in.at("dy");
    for (int l = m.L - 1; l >= 0; l--)
        d = m.backward(layers[static_cast<size_t>(l)], d, stats.data(), g);

    const Vec balance = {static_cast<float>(losses.balance)}, z = {static_cast<float>(losses.z)};
    std::vector<ckpt::SafetensorsOut> outs = {
        {"y", {m.N, m.H}, x.data()},
        {"balance", {1}, balance.data()},
        {"z", {1}, z.data()},
        {"dx", {m.N, m.H}, d.data()},
    };
    for (const auto& [name, v] : g)
        outs.push_back({name, in.shape.at(name.substr(5)), v.data()});
    ckpt::write_safetensors(o.out, outs, false);
    return 0;
}

} // namespace

int main(int argc, char** argv) {
    try {
        return run(argc, argv);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "moe_ref_driver: %s\n", e.what());
        return 1;
    }
}
