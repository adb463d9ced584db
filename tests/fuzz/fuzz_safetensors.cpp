// Fuzz harness: the safetensors reader. A file is either refused with a core::Error or every
// tensor it lists can be read (its first and last elements, widened to fp32) inside the file.
#include <algorithm>
#include <vector>

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
        for (const ckpt::SafetensorsFile::Tensor& t : f.tensors()) {
            const size_t n = std::min<size_t>(t.numel, 8);
            if (n == 0) continue;
            outs.emplace_back(n);
            reads.push_back({&t, 0, n, outs.back().data()});
            outs.emplace_back(n);
            reads.push_back({&t, t.numel - n, n, outs.back().data()});
        }
        ckpt::ReadOptions o;
        o.direct_io = false;
        o.chunk_bytes = 8192; // small chunks: cheap per run, and reads cross chunk boundaries
        f.read_f32(reads, o);
    });
    return 0;
}
