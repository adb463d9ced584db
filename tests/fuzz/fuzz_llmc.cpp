// Fuzz harness: llm.c GPT-2 checkpoint files. The header is either refused with a core::Error or
// describes a valid model whose size matches the file; a small one is imported as well (every
// weight read, non-finite ones refused).
#include <vector>

#include "ckpt/llmc.h"
#include "core/error.h"
#include "fuzz.h"
#include "model/layout.h"

using namespace sof;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::string path = fuzz::scratch_dir() + "/model.bin";
    fuzz::write_file(path, data, size);
    SOF_FUZZ_EXPECT_ONLY_CORE_ERRORS({
        const model::ArchConfig c = ckpt::read_llmc_header(path);
        if (1024.0 + 4.0 * ckpt::llmc_param_count(c) != static_cast<double>(size))
            fuzz::finding("read_llmc_header accepted a file whose size does not match");
        if (ckpt::llmc_param_count(c) <= 1e6) {
            const model::ParamLayout l = model::make_layout(c);
            std::vector<float> p(l.num_params);
            ckpt::import_llmc(path, l, p.data());
        }
    });
    return 0;
}
