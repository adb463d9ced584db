// Fuzz harness: a Hugging Face config.json. Either refused with a core::Error, or the model it
// describes passes model::validate (sizes within bounds, so its parameter count is finite).
#include <cmath>
#include <filesystem>
#include <string>

#include "ckpt/hf.h"
#include "core/error.h"
#include "fuzz.h"
#include "model/layout.h"

using namespace sof;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::string dir = fuzz::scratch_dir() + "/hf";
    static const bool made = [&] { return std::filesystem::create_directories(dir), true; }();
    (void)made;
    fuzz::write_file(dir + "/config.json", data, size);
    SOF_FUZZ_EXPECT_ONLY_CORE_ERRORS({
        const model::ArchConfig c = ckpt::read_hf_config(dir);
        model::validate(c);
        if (!(model::param_count(c) <= config::kMaxParams))
            fuzz::finding("read_hf_config accepted a model beyond kMaxParams");
    });
    return 0;
}
