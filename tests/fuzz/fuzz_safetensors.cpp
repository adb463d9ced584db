// Fuzz harness: the safetensors reader. A file is either refused with a core::Error or every
// tensor it lists can be read (its first and last elements, widened to fp32; U8 ones as bytes)
// inside the file, and every "<base>_blocks" is dequantized as MXFP4 or refused.
#include <algorithm>
#include <vector>

#include "ckpt/mxfp4.h"
#include "ckpt/pipelined_reader.h"
#include "ckpt/safetensors.h"
#include "core/error.h"
#include "fuzz.h"

using namespace sof;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::string path = fuzz::scratch_dir() + "/input.safetensors";
    fuzz::write_file(path, data, size);
    SOF_FUZZ_EXPECT_ONLY_CORE_ERRORS({
        ckpt::SafetensorsFile f(path);
        std::vector<ckpt::SafetensorsFile::F32Read> reads;
        std::vector<std::vector<float>> outs;
        outs.reserve(2 * f.tensors().size());
        std::vector<uint8_t> bytes(8);
        for (const ckpt::SafetensorsFile::Tensor& t : f.tensors()) {
            const size_t n = std::min<size_t>(t.numel, 8);
            if (n == 0) continue;
            if (t.dtype == "U8") {
                f.read_u8(t, 0, n, bytes.data());
                f.read_u8(t, t.numel - n, n, bytes.data());
                continue;
            }
            outs.emplace_back(n);
            reads.push_back({&t, 0, n, outs.back().data()});
            outs.emplace_back(n);
            reads.push_back({&t, t.numel - n, n, outs.back().data()});
        }
        ckpt::ReadOptions o;
        o.direct_io = false;
        o.chunk_bytes = 8192; // small chunks: cheap per run, and reads cross chunk boundaries
        f.read_f32(reads, o);
        const std::string suffix = "_blocks";
        for (const ckpt::SafetensorsFile::Tensor& t : f.tensors()) {
            if (t.name.size() < suffix.size() ||
                t.name.compare(t.name.size() - suffix.size(), suffix.size(), suffix) != 0)
                continue;
            std::vector<int64_t> shape;
            std::vector<float> v;
            try { // refused (a core::Error) is fine; anything else escapes to the finding above
                v = ckpt::read_mxfp4(f, t.name.substr(0, t.name.size() - suffix.size()), &shape);
            } catch (const core::Error&) {
                continue;
            }
            size_t n = 1;
            for (int64_t d : shape)
                n *= static_cast<size_t>(d);
            if (n != v.size()) fuzz::finding("read_mxfp4: the shape does not match the values");
        }
    });
    return 0;
}
