// gpu_adam conformance: the CUDA plugin against the scalar twin (tests/grace/adam_twin.h), bitwise,
// over sizes, dtypes, decay, step, scale, in-place/separate, multi-slice, rollback and stats.
#include <doctest/doctest.h>

#include "case_names.h" // each case named in the log before it runs

#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <thread>

#include "cuda/gpu_test_util.h"
#include "grace/adam_twin.h"

extern "C" const sof_optim_plugin* sof_optim_plugin_get(void);

namespace {

using namespace sof::test;

// The plugin table and one context on device 0.
struct Plugin {
    const sof_optim_plugin* api = sof_optim_plugin_get();
    sof_optim_ctx* ctx = nullptr;
    Plugin() {
        sof_optim_init init{sizeof(sof_optim_init), 0, 0};
        if (api->create(&init, &ctx) != SOF_OK) throw std::runtime_error("gpu_adam create failed");
    }
    ~Plugin() { api->destroy(ctx); }
};

struct Case {
    int64_t n = 17;
    int32_t gdt = SOF_DTYPE_F32;
    float wd = 0.0f;
    int64_t step = 1;
    float scale = 1.0f;
    bool separate = false;
    int32_t ldt = -1; // -1: no low-precision copy
    int32_t mode = SOF_ADAM_ADAMW;
    bool bias = true;
    int64_t offset = 0; // elements: misaligns every device pointer when odd
};

sof_optim_hparams hparams_of(const Case& c) {
    sof_optim_hparams hp{};
    hp.struct_size = sizeof(hp);
    hp.lr = 1e-3f, hp.beta1 = 0.9f, hp.beta2 = 0.999f, hp.eps = 1e-8f;
    hp.weight_decay = c.wd, hp.step = c.step, hp.mode = c.mode, hp.bias_correction = c.bias;
    hp.grad_scale = c.scale;
    return hp;
}

// Makes slot k of s a Q8 slot of `block` over codes and scales, in place (optim::set_q8; this test
// links no project library).
void set_q8(sof_optim_slice& s, int k, int32_t block, void* codes, float* scales) {
    s.slot[k].format = SOF_STATE_Q8, s.slot[k].block = block;
    s.slot[k].data = s.slot[k].data_out = codes;
    s.slot[k].scale = s.slot[k].scale_out = scales;
}

std::string describe(const Case& c) {
    return "n=" + std::to_string(c.n) + " gdt=" + std::to_string(c.gdt) +
           " wd=" + std::to_string(c.wd) + " step=" + std::to_string(c.step) +
           " scale=" + std::to_string(c.scale) + " separate=" + std::to_string(c.separate) +
           " ldt=" + std::to_string(c.ldt) + " mode=" + std::to_string(c.mode) +
           " bias=" + std::to_string(c.bias) + " offset=" + std::to_string(c.offset);
}

int64_t max_ulp(const std::vector<float>& a, const std::vector<float>& b) {
    int64_t worst = 0;
    for (size_t i = 0; i < a.size(); i++)
        worst = std::max(worst, ulp_distance(a[i], b[i]));
    return worst;
}

// Device buffers of one slice (inputs, optional separate outputs, lowp copy, grads).
struct DevSlice {
    int64_t n, off;
    DevBuf p, m, v, g, po, mo, vo, lowp;
    DevSlice(int64_t n_, int64_t off_, bool separate)
        : n(n_), off(off_), p((n + off) * 4), m((n + off) * 4), v((n + off) * 4), g((n + off) * 4),
          po(separate ? (n + off) * 4 : 0), mo(separate ? (n + off) * 4 : 0),
          vo(separate ? (n + off) * 4 : 0), lowp((n + off) * 2) {}
};

template <class T> void upload_at(DevBuf& b, const std::vector<T>& h, int64_t off) {
    cuda_ok(cudaMemcpy(b.as<T>() + off, h.data(), h.size() * sizeof(T), cudaMemcpyHostToDevice),
            "H2D");
}
template <class T> std::vector<T> download_at(const DevBuf& b, int64_t n, int64_t off) {
    std::vector<T> h(n);
    cuda_ok(cudaMemcpy(h.data(), b.as<T>() + off, n * sizeof(T), cudaMemcpyDeviceToHost), "D2H");
    return h;
}

// Builds the device slice descriptor for `c` over `d` (host state already uploaded).
sof_optim_slice device_slice(const Case& c, DevSlice& d) {
    int64_t o = c.offset;
    sof_optim_slice s{};
    s.struct_size = sizeof(s);
    s.n = c.n;
    s.param = d.p.as<float>() + o;
    s.grad = c.gdt == SOF_DTYPE_F32 ? static_cast<const void*>(d.g.as<float>() + o)
                                    : static_cast<const void*>(d.g.as<uint16_t>() + o);
    s.grad_dtype = c.gdt;
    s.num_slots = 2;
    s.slot[0].data = d.m.as<float>() + o;
    s.slot[1].data = d.v.as<float>() + o;
    s.param_out = c.separate ? d.po.as<float>() + o : d.p.as<float>() + o;
    s.slot[0].data_out = c.separate ? d.mo.as<float>() + o : d.m.as<float>() + o;
    s.slot[1].data_out = c.separate ? d.vo.as<float>() + o : d.v.as<float>() + o;
    s.lowp_dtype = c.ldt < 0 ? SOF_DTYPE_BF16 : c.ldt;
    s.lowp_out = c.ldt < 0 ? nullptr : static_cast<void*>(d.lowp.as<uint16_t>() + o);
    return s;
}

void upload_state(const Case& c, const HostState& h, DevSlice& d) {
    upload_at(d.p, h.p, c.offset);
    upload_at(d.m, h.m, c.offset);
    upload_at(d.v, h.v, c.offset);
    if (c.gdt == SOF_DTYPE_F32)
        upload_at(d.g, h.g32, c.offset);
    else
        upload_at(d.g, h.g16, c.offset);
}

// The twin's slice over host vectors (outputs in out_*).
sof_optim_slice host_slice(const Case& c, HostState& h, std::vector<float>& po,
                           std::vector<float>& mo, std::vector<float>& vo,
                           std::vector<uint16_t>& lowp) {
    po.resize(c.n), mo.resize(c.n), vo.resize(c.n), lowp.assign(c.n, 0);
    sof_optim_slice s{};
    s.struct_size = sizeof(s);
    s.n = c.n;
    s.param = h.p.data();
    s.grad = c.gdt == SOF_DTYPE_F32 ? static_cast<const void*>(h.g32.data())
                                    : static_cast<const void*>(h.g16.data());
    s.grad_dtype = c.gdt;
    s.num_slots = 2;
    s.slot[0].data = h.m.data();
    s.slot[1].data = h.v.data();
    s.param_out = po.data(), s.slot[0].data_out = mo.data(), s.slot[1].data_out = vo.data();
    s.lowp_dtype = c.ldt < 0 ? SOF_DTYPE_BF16 : c.ldt;
    s.lowp_out = c.ldt < 0 ? nullptr : lowp.data();
    return s;
}

// One step of case c on the GPU (on a non-default stream) against the twin, bitwise.
void check_case(Plugin& pl, const Case& c) {
    INFO(describe(c));
    HostState h = make_state(c.n, static_cast<uint64_t>(c.n) * 31 + c.gdt, c.gdt);
    DevSlice d(c.n, c.offset, c.separate);
    upload_state(c, h, d);
    sof_optim_slice s = device_slice(c, d);
    sof_optim_hparams hp = hparams_of(c);
    DevBuf res(sizeof(sof_optim_result));
    cudaStream_t stream;
    cuda_ok(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "stream");
    REQUIRE(pl.api->step(pl.ctx, &s, &hp, res.as<sof_optim_result>(), stream) == SOF_OK);
    cuda_ok(cudaStreamSynchronize(stream), "sync");
    cudaStreamDestroy(stream);

    std::vector<float> po, mo, vo;
    std::vector<uint16_t> lowp;
    sof_optim_slice hs = host_slice(c, h, po, mo, vo, lowp);
    sof_optim_result want = twin_step(hs, hp);

    const DevBuf& dp = c.separate ? d.po : d.p;
    const DevBuf& dm = c.separate ? d.mo : d.m;
    const DevBuf& dv = c.separate ? d.vo : d.v;
    CHECK(max_ulp(download_at<float>(dp, c.n, c.offset), po) == 0);
    CHECK(max_ulp(download_at<float>(dm, c.n, c.offset), mo) == 0);
    CHECK(max_ulp(download_at<float>(dv, c.n, c.offset), vo) == 0);
    if (c.ldt >= 0) CHECK(download_at<uint16_t>(d.lowp, c.n, c.offset) == lowp);
    if (c.separate) { // inputs untouched
        CHECK(download_at<float>(d.p, c.n, c.offset) == h.p);
        CHECK(download_at<float>(d.m, c.n, c.offset) == h.m);
        CHECK(download_at<float>(d.v, c.n, c.offset) == h.v);
    }
    sof_optim_result got = res.download<sof_optim_result>(1)[0];
    CHECK(got.nonfinite == 0);
    CHECK(std::fabs(got.grad_sumsq - want.grad_sumsq) <= 1e-12 * want.grad_sumsq + 1e-300);
}

} // namespace

TEST_CASE("gpu_adam reports a score and a variant") {
    const sof_optim_plugin* api = sof_optim_plugin_get();
    CHECK(api->abi_version == SOF_OPTIM_ABI_VERSION);
    CHECK(api->target == SOF_TARGET_CUDA);
    CHECK(api->score() > 0);
    MESSAGE("variant: " << std::string(api->variant()));
}

TEST_CASE("gpu_adam conformance matrix is bitwise equal to the scalar twin") {
    Plugin pl;
    const int64_t sizes[] = {1, 7, 15, 16, 17, 1023, 4099, 3000017};
    for (int64_t n : sizes)
        for (int32_t gdt : {SOF_DTYPE_F32, SOF_DTYPE_BF16})
            for (float wd : {0.0f, 0.1f})
                for (int64_t step : {int64_t{1}, int64_t{1000}})
                    for (int variant = 0; variant < 2; variant++) {
                        Case c;
                        c.n = n, c.gdt = gdt, c.wd = wd, c.step = step;
                        c.scale = variant ? 0.37f : 1.0f;
                        c.separate = variant == 1;
                        c.ldt = variant ? SOF_DTYPE_BF16 : -1;
                        check_case(pl, c);
                    }
}

TEST_CASE("gpu_adam: L2 mode, no bias correction, fp16 grads and copy, misaligned slices") {
    Plugin pl;
    for (int64_t n : {int64_t{1}, int64_t{17}, int64_t{4099}, int64_t{100003}}) {
        Case c;
        c.n = n, c.wd = 0.01f, c.mode = SOF_ADAM_L2, c.bias = false, c.step = 7;
        c.gdt = SOF_DTYPE_F16, c.ldt = SOF_DTYPE_F16, c.scale = 0.5f;
        check_case(pl, c);
        c.offset = 1, c.separate = true, c.gdt = SOF_DTYPE_BF16, c.ldt = SOF_DTYPE_BF16;
        check_case(pl, c);
        c.mode = SOF_ADAM_ADAMW, c.gdt = SOF_DTYPE_F32, c.offset = 3;
        check_case(pl, c);
    }
}

TEST_CASE("gpu_adam: bf16 moments (optimizer.state_dtype bf16) equal the twin bitwise") {
    Plugin pl;
    for (int64_t n : {int64_t{1}, int64_t{17}, int64_t{4099}, int64_t{100003}})
        for (int64_t off : {int64_t{0}, int64_t{1}})
            for (bool sep : {false, true}) {
                Case c;
                c.n = n, c.offset = off, c.separate = sep, c.wd = 0.1f, c.step = 5;
                c.gdt = off ? SOF_DTYPE_BF16 : SOF_DTYPE_F32, c.ldt = SOF_DTYPE_BF16;
                INFO(describe(c));
                HostState h = make_state(c.n, static_cast<uint64_t>(n) * 7 + off, c.gdt);
                std::vector<uint16_t> m16(n), v16(n);
                for (int64_t i = 0; i < n; i++) {
                    m16[i] = sof::core::f32_to_bf16(h.m[i]);
                    v16[i] = sof::core::f32_to_bf16(h.v[i]);
                }
                DevSlice d(n, off, sep);
                upload_state(c, h, d);
                upload_at(d.m, m16, off); // the moments as bf16 (the buffers are large enough)
                upload_at(d.v, v16, off);
                sof_optim_slice s = device_slice(c, d);
                s.slot[0].format = s.slot[1].format = SOF_STATE_BF16;
                s.slot[0].data = d.m.as<uint16_t>() + off;
                s.slot[1].data = d.v.as<uint16_t>() + off;
                s.slot[0].data_out = sep ? d.mo.as<uint16_t>() + off : d.m.as<uint16_t>() + off;
                s.slot[1].data_out = sep ? d.vo.as<uint16_t>() + off : d.v.as<uint16_t>() + off;
                sof_optim_hparams hp = hparams_of(c);
                REQUIRE(pl.api->step(pl.ctx, &s, &hp, nullptr, nullptr) == SOF_OK);
                cuda_ok(cudaDeviceSynchronize(), "sync");

                std::vector<float> po(n);
                std::vector<uint16_t> mo(n), vo(n), lowp(n);
                sof_optim_slice hs{};
                hs.struct_size = sizeof(hs);
                hs.n = n;
                hs.param = h.p.data();
                hs.grad = c.gdt == SOF_DTYPE_F32 ? static_cast<const void*>(h.g32.data())
                                                 : static_cast<const void*>(h.g16.data());
                hs.grad_dtype = c.gdt;
                hs.num_slots = 2;
                hs.slot[0].format = hs.slot[1].format = SOF_STATE_BF16;
                hs.slot[0].data = m16.data(), hs.slot[1].data = v16.data();
                hs.param_out = po.data(), hs.slot[0].data_out = mo.data(),
                hs.slot[1].data_out = vo.data();
                hs.lowp_dtype = SOF_DTYPE_BF16, hs.lowp_out = lowp.data();
                sof::optim::adam_ref_step(hs, hp);
                CHECK(max_ulp(download_at<float>(sep ? d.po : d.p, n, off), po) == 0);
                CHECK(download_at<uint16_t>(sep ? d.mo : d.m, n, off) == mo);
                CHECK(download_at<uint16_t>(sep ? d.vo : d.v, n, off) == vo);
                CHECK(download_at<uint16_t>(d.lowp, n, off) == lowp);
            }
}

TEST_CASE("gpu_adam: Q8 moments and bf16 master params equal the reference bitwise") {
    // optim/qstate.h: codes, scales, stochastically rounded bf16 params and the copy, in place
    // and separate, blocks 64/256/4096 (partial last blocks), from a random quantized state; every
    // third case with its first block all zero (grads and moments: scale 0), the element index
    // past 2^32 (the counter's high word), and the step's statistics (q_kernel's reduction)
    Plugin pl;
    uint64_t seed = 31;
    for (int32_t qb : {64, 256, 4096})
        for (int64_t n : {int64_t{1}, int64_t{300}, int64_t{4099}, int64_t{100003}})
            for (int fmt = 0; fmt < 3; fmt++) // q8 + fp32 master, q8 + bf16, fp32 moments + bf16
                for (bool sep : {false, true}) {
                    const bool q8 = fmt<2, p16 = fmt> 0;
                    Case c;
                    c.n = n, c.separate = sep, c.wd = 0.1f, c.step = 5, c.scale = 0.5f;
                    c.gdt = (seed & 1) ? SOF_DTYPE_BF16 : SOF_DTYPE_F32, c.ldt = SOF_DTYPE_BF16;
                    INFO(describe(c) << " qb=" << qb << " fmt=" << fmt);
                    HostState h = make_state(c.n, seed++, c.gdt);
                    const size_t un = static_cast<size_t>(n);
                    if (seed % 3 == 0)
                        for (size_t i = 0; i < std::min<size_t>(un, qb); i++)
                            h.g32[i] = h.m[i] = h.v[i] = 0.0f, h.g16[i] = 0;
                    const size_t nb = static_cast<size_t>((n + qb - 1) / qb);
                    std::vector<uint8_t> mc(un), vc(un);
                    std::vector<float> ms(nb), vs(nb);
                    std::vector<uint16_t> p16v(un);
                    for (size_t b = 0; b < nb; b++) {
                        size_t i0 = b * qb, len = std::min<size_t>(qb, un - i0);
                        sof::optim::q_quantize_block(h.m.data() + i0, len, sof::optim::q8_map(true),
                                                     mc.data() + i0, &ms[b]);
                        sof::optim::q_quantize_block(h.v.data() + i0, len,
                                                     sof::optim::q8_map(false), vc.data() + i0,
                                                     &vs[b]);
                    }
                    for (size_t i = 0; i < un; i++)
                        p16v[i] = sof::core::f32_to_bf16(h.p[i]);
                    // device buffers: codes and scales in and out, bf16 master in and out
                    DevSlice d(n, 0, sep);
                    upload_state(c, h, d);
                    DevBuf dmc(un), dvc(un), dms(nb * 4), dvs(nb * 4), dmco(un), dvco(un),
                        dmso(nb * 4), dvso(nb * 4), dp16(un * 2), dp16o(un * 2);
                    upload_at(dmc, mc, 0), upload_at(dvc, vc, 0), upload_at(dms, ms, 0);
                    upload_at(dvs, vs, 0), upload_at(dp16, p16v, 0);
                    sof_optim_slice s = device_slice(c, d);
                    s.index0 = (int64_t{1} << 33) + 12345 * static_cast<int64_t>(seed);
                    if (q8) {
                        set_q8(s, 0, qb, dmc.as<uint8_t>(), dms.as<float>());
                        set_q8(s, 1, qb, dvc.as<uint8_t>(), dvs.as<float>());
                        if (sep) {
                            s.slot[0].data_out = dmco.as<uint8_t>(),
                            s.slot[1].data_out = dvco.as<uint8_t>();
                            s.slot[0].scale_out = dmso.as<float>(),
                            s.slot[1].scale_out = dvso.as<float>();
                        }
                    }
                    if (p16) {
                        s.param_dtype = SOF_DTYPE_BF16;
                        s.param = dp16.as<uint16_t>();
                        s.param_out = sep ? dp16o.as<uint16_t>() : dp16.as<uint16_t>();
                    }
                    sof_optim_hparams hp = hparams_of(c);
                    hp.seed = 0xabcdef12345ull + seed;
                    DevBuf res(sizeof(sof_optim_result));
                    REQUIRE(pl.api->step(pl.ctx, &s, &hp, res.as<sof_optim_result>(), nullptr) ==
                            SOF_OK);
                    cuda_ok(cudaDeviceSynchronize(), "sync");
                    // the reference on host copies
                    std::vector<float> po, mo, vo;
                    std::vector<uint16_t> lowp, p16o(un);
                    std::vector<uint8_t> rmc(un), rvc(un);
                    std::vector<float> rms(nb), rvs(nb);
                    sof_optim_slice hs = host_slice(c, h, po, mo, vo, lowp);
                    hs.index0 = s.index0;
                    if (q8) {
                        set_q8(hs, 0, qb, mc.data(), ms.data());
                        set_q8(hs, 1, qb, vc.data(), vs.data());
                        hs.slot[0].data_out = rmc.data(), hs.slot[1].data_out = rvc.data();
                        hs.slot[0].scale_out = rms.data(), hs.slot[1].scale_out = rvs.data();
                    }
                    if (p16) {
                        hs.param_dtype = SOF_DTYPE_BF16;
                        hs.param = p16v.data(), hs.param_out = p16o.data();
                    }
                    const sof_optim_result want = sof::optim::adam_ref_step(hs, hp);
                    const sof_optim_result got = res.download<sof_optim_result>(1)[0];
                    CHECK(got.nonfinite == 0);
                    CHECK(std::fabs(got.grad_sumsq - want.grad_sumsq) <=
                          1e-12 * want.grad_sumsq + 1e-300);
                    if (q8) {
                        CHECK(download_at<uint8_t>(sep ? dmco : dmc, n, 0) == rmc);
                        CHECK(download_at<uint8_t>(sep ? dvco : dvc, n, 0) == rvc);
                        CHECK(download_at<float>(sep ? dmso : dms, nb, 0) == rms);
                        CHECK(download_at<float>(sep ? dvso : dvs, nb, 0) == rvs);
                    } else {
                        CHECK(max_ulp(download_at<float>(sep ? d.mo : d.m, n, 0), mo) == 0);
                        CHECK(max_ulp(download_at<float>(sep ? d.vo : d.v, n, 0), vo) == 0);
                    }
                    if (p16)
                        CHECK(download_at<uint16_t>(sep ? dp16o : dp16, n, 0) == p16o);
                    else
                        CHECK(max_ulp(download_at<float>(sep ? d.po : d.p, n, 0), po) == 0);
                    CHECK(download_at<uint16_t>(d.lowp, n, 0) == lowp);
                }
}

TEST_CASE("gpu_adam multi-slice: one call over 200 slices of mixed hparams equals per-slice twin") {
    Plugin pl;
    const int count = 200; // more than one launch group (96 slices per launch)
    std::vector<Case> cases(count);
    std::vector<HostState> hs;
    std::vector<std::unique_ptr<DevSlice>> ds;
    std::vector<sof_optim_slice> slices;
    std::vector<sof_optim_hparams> hps;
    for (int i = 0; i < count; i++) {
        Case& c = cases[i];
        c.n = (i * 7919) % 20000 + (i % 5 == 0 ? 1 : 0);
        c.gdt = i % 3 == 0 ? SOF_DTYPE_BF16 : SOF_DTYPE_F32;
        c.wd = i % 2 ? 0.1f : 0.0f;
        c.step = 1 + i;
        c.scale = i % 4 ? 1.0f : 0.25f;
        c.separate = i % 2 == 0;
        c.ldt = i % 3 == 1 ? SOF_DTYPE_BF16 : -1;
        c.offset = i % 7 == 3 ? 1 : 0;
        hs.push_back(make_state(c.n, 1000 + i, c.gdt));
        ds.push_back(std::make_unique<DevSlice>(c.n, c.offset, c.separate));
        upload_state(c, hs.back(), *ds.back());
        slices.push_back(device_slice(c, *ds.back()));
        hps.push_back(hparams_of(c));
    }
    DevBuf res(sizeof(sof_optim_result));
    REQUIRE(pl.api->step_multi(pl.ctx, slices.data(), hps.data(), count, res.as<sof_optim_result>(),
                               nullptr) == SOF_OK);
    cuda_ok(cudaDeviceSynchronize(), "sync");
    double want_sum = 0.0;
    for (int i = 0; i < count; i++) {
        const Case& c = cases[i];
        INFO(describe(c));
        std::vector<float> po, mo, vo;
        std::vector<uint16_t> lowp;
        sof_optim_slice s = host_slice(c, hs[i], po, mo, vo, lowp);
        want_sum += twin_step(s, hps[i]).grad_sumsq;
        DevSlice& d = *ds[i];
        CHECK(max_ulp(download_at<float>(c.separate ? d.po : d.p, c.n, c.offset), po) == 0);
        CHECK(max_ulp(download_at<float>(c.separate ? d.mo : d.m, c.n, c.offset), mo) == 0);
        CHECK(max_ulp(download_at<float>(c.separate ? d.vo : d.v, c.n, c.offset), vo) == 0);
        if (c.ldt >= 0) CHECK(download_at<uint16_t>(d.lowp, c.n, c.offset) == lowp);
    }
    sof_optim_result got = res.download<sof_optim_result>(1)[0];
    CHECK(std::fabs(got.grad_sumsq - want_sum) <= 1e-12 * want_sum);
    CHECK(got.nonfinite == 0);
}

TEST_CASE("gpu_adam 100-step drift stays bitwise equal to the twin") {
    Plugin pl;
    Case c;
    c.n = 4099, c.wd = 0.1f, c.gdt = SOF_DTYPE_BF16, c.ldt = SOF_DTYPE_BF16;
    HostState h = make_state(c.n, 77, c.gdt);
    DevSlice d(c.n, 0, false);
    upload_state(c, h, d);
    std::vector<float> po, mo, vo;
    std::vector<uint16_t> lowp;
    for (int64_t t = 1; t <= 100; t++) {
        c.step = t;
        sof_optim_hparams hp = hparams_of(c);
        sof_optim_slice s = device_slice(c, d);
        REQUIRE(pl.api->step(pl.ctx, &s, &hp, nullptr, nullptr) == SOF_OK);
        sof_optim_slice hsl = host_slice(c, h, po, mo, vo, lowp);
        twin_step(hsl, hp);
        h.p = po, h.m = mo, h.v = vo;
    }
    cuda_ok(cudaDeviceSynchronize(), "sync");
    CHECK(max_ulp(d.p.download<float>(c.n), h.p) == 0);
    CHECK(max_ulp(d.m.download<float>(c.n), h.m) == 0);
    CHECK(max_ulp(d.v.download<float>(c.n), h.v) == 0);
    CHECK(d.lowp.download<uint16_t>(c.n) == lowp);
}

TEST_CASE("gpu_adam rollback inverts an in-place step (twin-exact, close to the old state)") {
    Plugin pl;
    for (int32_t mode : {SOF_ADAM_ADAMW, SOF_ADAM_L2}) {
        Case c;
        c.n = 4099, c.wd = 0.1f, c.step = 10, c.mode = mode, c.ldt = SOF_DTYPE_BF16;
        INFO(describe(c));
        HostState h = make_state(c.n, 5, c.gdt);
        DevSlice d(c.n, 0, false);
        upload_state(c, h, d);
        sof_optim_slice s = device_slice(c, d);
        sof_optim_hparams hp = hparams_of(c);
        REQUIRE(pl.api->step(pl.ctx, &s, &hp, nullptr, nullptr) == SOF_OK);
        REQUIRE(pl.api->rollback(pl.ctx, &s, &hp, nullptr) == SOF_OK);
        cuda_ok(cudaDeviceSynchronize(), "sync");
        // twin: step then rollback
        std::vector<float> po, mo, vo;
        std::vector<uint16_t> lowp;
        HostState t = h;
        sof_optim_slice hsl = host_slice(c, t, po, mo, vo, lowp);
        twin_step(hsl, hp);
        t.p = po, t.m = mo, t.v = vo;
        hsl = host_slice(c, t, po, mo, vo, lowp);
        twin_rollback(hsl, hp);
        std::vector<float> gp = d.p.download<float>(c.n), gm = d.m.download<float>(c.n),
                           gv = d.v.download<float>(c.n);
        CHECK(max_ulp(gp, po) == 0);
        CHECK(max_ulp(gm, mo) == 0);
        CHECK(max_ulp(gv, vo) == 0);
        CHECK(d.lowp.download<uint16_t>(c.n) == lowp);
        double worst_p = 0, worst_m = 0;
        for (int64_t i = 0; i < c.n; i++) {
            worst_p = std::max(worst_p, std::fabs(double(gp[i]) - h.p[i]));
            worst_m = std::max(worst_m, std::fabs(double(gm[i]) - h.m[i]));
        }
        CHECK(worst_p < 1e-6);
        CHECK(worst_m < 1e-6);
    }
}

TEST_CASE("gpu_adam statistics: non-finite grads, host result, grad_stats") {
    Plugin pl;
    Case c;
    c.n = 5000, c.scale = 2.0f;
    HostState h = make_state(c.n, 9, c.gdt);
    h.g32[4321] = std::numeric_limits<float>::infinity();
    DevSlice d(c.n, 0, false);
    upload_state(c, h, d);
    sof_optim_slice s = device_slice(c, d);
    sof_optim_hparams hp = hparams_of(c);
    sof_optim_result host_res{}; // pageable host memory: the plugin copies the result back
    REQUIRE(pl.api->step(pl.ctx, &s, &hp, &host_res, nullptr) == SOF_OK);
    CHECK(host_res.nonfinite == 1);

    h.g32[4321] = 0.5f;
    upload_state(c, h, d);
    sof_optim_result want = twin_stats(h.g32.data(), SOF_DTYPE_F32, c.n, 3.0f);
    sof_optim_result* managed = nullptr;
    cuda_ok(cudaMallocManaged(&managed, sizeof(sof_optim_result)), "managed");
    REQUIRE(pl.api->grad_stats(pl.ctx, d.g.ptr, SOF_DTYPE_F32, c.n, 3.0f, managed, nullptr) ==
            SOF_OK);
    cuda_ok(cudaDeviceSynchronize(), "sync");
    CHECK(managed->nonfinite == 0);
    CHECK(std::fabs(managed->grad_sumsq - want.grad_sumsq) <= 1e-12 * want.grad_sumsq);
    cudaFree(managed);
}

TEST_CASE("gpu_adam keeps NaN in the low-precision copy, rejects partial overlap and bad betas") {
    Plugin pl;
    Case c;
    c.n = 64, c.ldt = SOF_DTYPE_BF16;
    HostState h = make_state(c.n, 3, c.gdt);
    h.p[5] = -std::numeric_limits<float>::quiet_NaN();
    h.p[6] = std::numeric_limits<float>::infinity();
    DevSlice d(c.n, 0, false);
    upload_state(c, h, d);
    sof_optim_slice s = device_slice(c, d);
    sof_optim_hparams hp = hparams_of(c);
    REQUIRE(pl.api->step(pl.ctx, &s, &hp, nullptr, nullptr) == SOF_OK);
    std::vector<uint16_t> lowp = d.lowp.download<uint16_t>(c.n);
    CHECK(std::isnan(sof::core::bf16_to_f32(lowp[5]))); // GPU arithmetic canonicalizes the sign
    CHECK(lowp[6] == 0x7f80u);

    sof_optim_slice bad = s;
    bad.param_out = const_cast<float*>(static_cast<const float*>(s.param)) +
                    1; // overlaps param by n-1 elements
    CHECK(pl.api->step(pl.ctx, &bad, &hp, nullptr, nullptr) == SOF_ERR_INVALID_ARGUMENT);
    CHECK(std::string(pl.api->last_error(pl.ctx)).find("overlap") != std::string::npos);
    // betas outside [0, 1): the same check (sof_optim_check.h), step and rollback
    for (float b : {1.0f, -0.5f, std::nanf("")}) {
        CAPTURE(b);
        sof_optim_hparams hb = hp;
        hb.beta1 = b;
        CHECK(pl.api->step(pl.ctx, &s, &hb, nullptr, nullptr) == SOF_ERR_INVALID_ARGUMENT);
        CHECK(std::string(pl.api->last_error(pl.ctx)).find("betas must lie in [0, 1)") !=
              std::string::npos);
        hb = hp;
        hb.beta2 = b;
        CHECK(pl.api->rollback(pl.ctx, &s, &hb, nullptr) == SOF_ERR_INVALID_ARGUMENT);
    }
}

TEST_CASE("gpu_adam: two host threads on two streams share one context; empty list gives 0") {
    Plugin pl;
    Case c;
    c.n = 300007, c.wd = 0.1f, c.gdt = SOF_DTYPE_BF16, c.ldt = SOF_DTYPE_BF16, c.separate = true;
    HostState h[2] = {make_state(c.n, 11, c.gdt), make_state(c.n, 12, c.gdt)};
    std::unique_ptr<DevSlice> d[2];
    sof_optim_slice s[2];
    sof_optim_hparams hp = hparams_of(c);
    DevBuf res(2 * sizeof(sof_optim_result));
    sof_status st[2] = {SOF_OK, SOF_OK};
    for (int k = 0; k < 2; k++) {
        d[k] = std::make_unique<DevSlice>(c.n, 0, true);
        upload_state(c, h[k], *d[k]);
        s[k] = device_slice(c, *d[k]);
    }
    auto work = [&](int k) {
        cudaStream_t stream;
        cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
        for (int rep = 0; rep < 5 && st[k] == SOF_OK; rep++)
            st[k] = pl.api->step(pl.ctx, &s[k], &hp, res.as<sof_optim_result>() + k, stream);
        cudaStreamSynchronize(stream);
        cudaStreamDestroy(stream);
    };
    std::thread t0(work, 0), t1(work, 1);
    t0.join(), t1.join();
    REQUIRE(st[0] == SOF_OK);
    REQUIRE(st[1] == SOF_OK);
    std::vector<sof_optim_result> got = res.download<sof_optim_result>(2);
    for (int k = 0; k < 2; k++) {
        std::vector<float> po, mo, vo;
        std::vector<uint16_t> lowp;
        sof_optim_slice hs = host_slice(c, h[k], po, mo, vo, lowp);
        sof_optim_result want = twin_step(hs, hp);
        CHECK(max_ulp(d[k]->po.download<float>(c.n), po) == 0);
        CHECK(d[k]->lowp.download<uint16_t>(c.n) == lowp);
        CHECK(std::fabs(got[k].grad_sumsq - want.grad_sumsq) <= 1e-12 * want.grad_sumsq);
    }
    sof_optim_result* managed = nullptr;
    cuda_ok(cudaMallocManaged(&managed, sizeof(sof_optim_result)), "managed");
    managed->grad_sumsq = 5.0, managed->nonfinite = 1;
    REQUIRE(pl.api->step_multi(pl.ctx, nullptr, nullptr, 0, managed, nullptr) == SOF_OK);
    cuda_ok(cudaDeviceSynchronize(), "sync");
    CHECK(managed->grad_sumsq == 0.0);
    CHECK(managed->nonfinite == 0);
    cudaFree(managed);
}

int main(int argc, char** argv) {
    std::string why = cuda_unavailable_reason();
    if (!why.empty()) {
        std::printf("SKIPPED: no usable CUDA device (%s)\n", why.c_str());
        return kSkipCode;
    }
    doctest::Context ctx(argc, argv);
    return ctx.run();
}
