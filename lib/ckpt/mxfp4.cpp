// MXFP4 dequantization (mxfp4.h): a 16-entry table and ldexp per element, rows in parallel; the
// safetensors reader's U8 tensors for the blocks and scales.
#include "ckpt/mxfp4.h"

#include <cmath>

#include "ckpt/safetensors.h"
#include "core/error.h"

namespace sof::ckpt {

namespace {
std::string dims(const std::vector<int64_t>& s) {
    std::string r = "(";
    for (size_t i = 0; i < s.size(); i++)
        r += (i ? ", " : "") + std::to_string(s[i]);
    return r + ")";
}
} // namespace

const float kE2M1Values[16] = {+0.0f, +0.5f, +1.0f, +1.5f, +2.0f, +3.0f, +4.0f, +6.0f,
                               -0.0f, -0.5f, -1.0f, -1.5f, -2.0f, -3.0f, -4.0f, -6.0f};

void mxfp4_dequantize(const uint8_t* blocks, const uint8_t* scales, size_t rows, size_t groups,
                      size_t bytes, float* out, const std::string& what) {
    const size_t n = rows * groups;
    for (size_t i = 0; i < n; i++)
        if (scales[i] == 255)
            SOF_FAIL(Format,
                     "%s: scale 255 (E8M0 NaN) at row %zu, group %zu; an MXFP4 checkpoint never "
                     "holds it (corrupt file?)",
                     what.c_str(), i / groups, i % groups);
#pragma omp parallel for schedule(static) if (n > 4096)
    for (size_t i = 0; i < n; i++) { // one (row, group): bytes * 2 elements
        const int exp = static_cast<int>(scales[i]) - 127;
        const uint8_t* b = blocks + i * bytes;
        float* o = out + i * bytes * 2;
        for (size_t j = 0; j < bytes; j++) {
            o[2 * j] = std::ldexp(kE2M1Values[b[j] & 0x0F], exp);
            o[2 * j + 1] = std::ldexp(kE2M1Values[b[j] >> 4], exp);
        }
    }
}

std::vector<float> read_mxfp4(const SafetensorsFile& f, const std::string& base,
                              std::vector<int64_t>* shape) {
    const std::string bn = base + "_blocks", sn = base + "_scales";
    const SafetensorsFile::Tensor* bt = f.find(bn);
    const SafetensorsFile::Tensor* st = f.find(sn);
    if (!bt || !st)
        SOF_FAIL(Format, "'%s': MXFP4 weight '%s' needs both '%s' and '%s'", f.path().c_str(),
                 base.c_str(), bn.c_str(), sn.c_str());
    if (bt->dtype != "U8" || st->dtype != "U8")
        SOF_FAIL(Format, "'%s': '%s' is %s and '%s' is %s; MXFP4 blocks and scales are U8",
                 f.path().c_str(), bn.c_str(), bt->dtype.c_str(), sn.c_str(), st->dtype.c_str());
    const std::vector<int64_t>& bs = bt->shape;
    if (bs.size() < 2 || st->shape != std::vector<int64_t>(bs.begin(), bs.end() - 1))
        SOF_FAIL(Format,
                 "'%s': '%s' has shape %s and '%s' %s; the scales must be the blocks' shape "
                 "without its last axis (one scale per block of 32 values)",
                 f.path().c_str(), bn.c_str(), dims(bs).c_str(), sn.c_str(),
                 dims(st->shape).c_str());
    const size_t bytes = static_cast<size_t>(bs.back());
    const size_t groups = static_cast<size_t>(bs[bs.size() - 2]);
    const size_t rows = groups == 0 ? 0 : st->numel / groups;
    std::vector<uint8_t> b(bt->numel), s(st->numel);
    f.read_u8(*bt, 0, bt->numel, b.data());
    f.read_u8(*st, 0, st->numel, s.data());
    std::vector<float> out(rows * groups * bytes * 2);
    mxfp4_dequantize(b.data(), s.data(), rows, groups, bytes, out.data(),
                     "'" + f.path() + "': '" + base + "'");
    *shape = std::vector<int64_t>(bs.begin(), bs.end() - 2);
    shape->push_back(static_cast<int64_t>(groups * bytes * 2));
    return out;
}

} // namespace sof::ckpt
