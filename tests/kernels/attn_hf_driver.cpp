// The attention op's CPU twin as a file filter for attention_hf_reference.py (transformers' own
// gpt_oss / mistral eager attention in float64): reads a problem, writes out, lse and the grads.
//
// Usage: attn_hf_driver IN OUT. IN: int32 B, T, NH, NKV, hd, window, has_sinks, has_segments;
// float32 q (B,T,NH,hd), k, v (B,T,NKV,hd), dout (B,T,NH,hd), sinks (NH) if has_sinks; int32
// segments (B,T) if has_segments. OUT: float32 out (B,T,NH,hd), lse (B,NH,T), dq, dk, dv (as q, k,
// v), dsinks (NH) if has_sinks (accumulated from 0). Exit 1 with a message on a bad file.
#include <cstdint>
#include <cstdio>
#include <exception>
#include <vector>

#include "kernels/attention.h"
#include "kernels/matmul.h"

namespace {

template <class T> bool read(FILE* f, std::vector<T>& v, size_t n) {
    v.resize(n);
    return std::fread(v.data(), sizeof(T), n, f) == n;
}
template <class T> bool write(FILE* f, const std::vector<T>& v) {
    return std::fwrite(v.data(), sizeof(T), v.size(), f) == v.size();
}

int run(const char* in_path, const char* out_path) {
    using namespace sof;
    FILE* in = std::fopen(in_path, "rb");
    if (!in) {
        std::fprintf(stderr, "attn_hf_driver: cannot open %s\n", in_path);
        return 1;
    }
    std::vector<int32_t> h;
    std::vector<float> q, k, v, dout, sinks;
    std::vector<int32_t> seg;
    bool ok = read(in, h, 8);
    const int B = h[0], T = h[1], NH = h[2], NKV = h[3], hd = h[4];
    const size_t rows = static_cast<size_t>(B) * T;
    ok = ok && B > 0 && T > 0 && NH > 0 && NKV > 0 && hd > 0;
    ok = ok && read(in, q, rows * NH * hd) && read(in, k, rows * NKV * hd) &&
         read(in, v, rows * NKV * hd) && read(in, dout, rows * NH * hd);
    if (ok && h[6]) ok = read(in, sinks, static_cast<size_t>(NH));
    if (ok && h[7]) ok = read(in, seg, rows);
    std::fclose(in);
    if (!ok) {
        std::fprintf(stderr, "attn_hf_driver: %s is short or its header is bad\n", in_path);
        return 1;
    }
    kernels::cpu::use_single_threaded_blas();
    const size_t ldq = static_cast<size_t>(NH) * hd, ldk = static_cast<size_t>(NKV) * hd;
    kernels::AttnArgs<float> a{q.data(),
                               k.data(),
                               v.data(),
                               ldq,
                               ldk,
                               ldk,
                               ldq,
                               B,
                               T,
                               NH,
                               NKV,
                               hd,
                               h[7] ? seg.data() : nullptr,
                               0};
    a.window = h[5];
    a.sinks = h[6] ? sinks.data() : nullptr;
    std::vector<float> out(rows * ldq), lse(static_cast<size_t>(B) * NH * T), delta(lse.size());
    std::vector<float> dq(q.size()), dk(k.size()), dv(v.size()), dsinks(sinks.size(), 0.0f);
    kernels::AttnGrads<float> d{dq.data(), dk.data(), dv.data(), ldq, ldk, ldk};
    d.dsinks = h[6] ? dsinks.data() : nullptr;
    const kernels::Exec ex = kernels::cpu_exec();
    kernels::attention_forward(ex, out.data(), lse.data(), a);
    kernels::attention_backward(ex, d, dout.data(), out.data(), lse.data(), delta.data(), a);
    FILE* o = std::fopen(out_path, "wb");
    if (!o) {
        std::fprintf(stderr, "attn_hf_driver: cannot write %s\n", out_path);
        return 1;
    }
    ok = write(o, out) && write(o, lse) && write(o, dq) && write(o, dk) && write(o, dv) &&
         write(o, dsinks);
    ok = std::fclose(o) == 0 && ok;
    if (!ok) std::fprintf(stderr, "attn_hf_driver: writing %s failed\n", out_path);
    return ok ? 0 : 1;
}

} // namespace

int main(int argc, char** argv) {
    if (argc != 3) {
        std::fprintf(stderr, "usage: attn_hf_driver IN OUT\n");
        return 2;
    }
    try {
        return run(argv[1], argv[2]);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "attn_hf_driver: %s\n", e.what());
        return 1;
    }
}
