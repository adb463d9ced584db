// Op driver cases of copy.h: strided row copies (a q|k|v slice out of fused rows and back) and
// zero fills; exact, so the CPU twin is checked against a plain loop and the CUDA twin bitwise.
#include <cstring>

#include "harness.h"
#include "kernels/copy.h"

using namespace sof;
using namespace sof::ktest;

namespace {

struct Shape {
    const char* name;
    size_t rows, width, lds, ldd, offset; // source rows of lds, the slice [offset, offset+width)
};
const Shape kShapes[] = {
    {"tiny", 1, 1, 1, 1, 0},
    {"k slice of fused qkv", 37, 64, 3 * 96, 64, 96},
    {"into a wider row", 100, 33, 33, 40, 0},
    {"many rows (threaded)", 1000, 96, 3 * 96, 96, 2 * 96},
};

std::vector<float> reference(const std::vector<float>& src, const std::vector<float>& dst0,
                             const Shape& s) {
    std::vector<float> d = dst0;
    for (size_t r = 0; r < s.rows; r++)
        for (size_t i = 0; i < s.width; i++)
            d[r * s.ldd + i] = src[r * s.lds + s.offset + i];
    return d;
}

} // namespace

SOF_OP_CPU("copy", "strided rows and zero fills against a plain loop") {
    for (const Shape& s : kShapes) {
        INFO("shape " << s.name);
        const auto src = randn(s.rows * s.lds, 1), dst0 = randn(s.rows * s.ldd, 2);
        std::vector<float> dst = dst0;
        kernels::copy_rows(kernels::cpu_exec(), dst.data(), s.ldd, src.data() + s.offset, s.lds,
                           s.rows, s.width);
        check_bitwise(std::string("copy_rows ") + s.name, dst, reference(src, dst0, s));
        // 2-byte elements (bf16 rows) move the same bytes
        std::vector<core::bf16> s16(src.size()), d16(dst0.size()), r16(dst0.size());
        for (size_t i = 0; i < src.size(); i++)
            s16[i] = core::to_bf16(src[i]);
        for (size_t i = 0; i < dst0.size(); i++)
            d16[i] = r16[i] = core::to_bf16(dst0[i]);
        kernels::copy_rows(kernels::cpu_exec(), d16.data(), s.ldd, s16.data() + s.offset, s.lds,
                           s.rows, s.width);
        for (size_t r = 0; r < s.rows; r++)
            for (size_t i = 0; i < s.width; i++)
                r16[r * s.ldd + i] = s16[r * s.lds + s.offset + i];
        CHECK(std::memcmp(d16.data(), r16.data(), d16.size() * 2) == 0);
        kernels::zero(kernels::cpu_exec(), dst.data(), dst.size() * sizeof(float));
        check_bitwise(std::string("zero ") + s.name, dst, std::vector<float>(dst.size(), 0.0f));
    }
}

namespace {

template <class T> void gpu_cases(Gpu& g) {
    for (const Shape& s : kShapes) {
        INFO("shape " << s.name << " " << dtype_name<T>());
        const auto src = representable<T>(randn(s.rows * s.lds, 3));
        const auto dst0 = representable<T>(randn(s.rows * s.ldd, 4));
        auto dsrc = g.upload<T>(src), ddst = g.upload<T>(dst0);
        kernels::copy_rows<T>(g.exec(), ddst.get(), s.ldd, dsrc.get() + s.offset, s.lds, s.rows,
                              s.width);
        const std::string tag = std::string("copy ") + s.name + " " + dtype_name<T>();
        check_bitwise(tag + " copy_rows", g.download(ddst), reference(src, dst0, s));
        kernels::zero(g.exec(), ddst.get(), dst0.size() * sizeof(T));
        check_bitwise(tag + " zero", g.download(ddst), std::vector<float>(dst0.size(), 0.0f));
    }
}

} // namespace

SOF_OP_GPU("copy", "bitwise against the plain loop (fp32 and bf16 rows)") {
    Gpu* g = gpu_or_skip();
    if (!g) return;
    // data movement: exact in every type
    gpu_cases<float>(*g);
    gpu_cases<core::bf16>(*g);
}

SOF_OP_GPU("copy", "rows whose pitch passes 2^31 bytes (Ulysses at long sequences)") {
    Gpu* g = gpu_or_skip();
    if (!g) return;
    // cudaMemcpy2DAsync refuses such pitches; copy_rows then copies row by row. Scatter two rows
    // into a 4 GiB buffer (destination pitch 2^31 + 256 bytes), gather them back (source pitch),
    // and read the second row where it must have landed.
    const size_t rows = 2, width = 48, pitch = (size_t{1} << 29) + 64; // floats
    const auto a = randn(rows * width, 5);
    auto narrow = g->upload<float>(a);
    DevBuf<float> wide(&g->dev(), rows * pitch), back(&g->dev(), rows * width);
    kernels::copy_rows<float>(g->exec(), wide.get(), pitch, narrow.get(), width, rows, width);
    kernels::copy_rows<float>(g->exec(), back.get(), width, wide.get(), pitch, rows, width);
    check_bitwise("copy pitch: row 1 in place", g->download(wide.get() + pitch, width),
                  std::vector<float>(a.begin() + width, a.end()));
    check_bitwise("copy pitch: round trip", g->download(back), a);
}
