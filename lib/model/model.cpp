// The Model factory: picks the architecture's implementation from ArchConfig::arch.
// The only place that knows every architecture class.
#include "model/model.h"

#include "model/gpt2.h"
#include "model/llama.h"

namespace sof::model {

std::unique_ptr<Model> make_model(const ArchConfig& cfg, const ModelOptions& opts, int max_B,
                                  int max_T) {
    if (cfg.llama_family()) return std::make_unique<Llama>(cfg, opts, max_B, max_T);
    return std::make_unique<GPT2>(cfg, opts, max_B, max_T);
}

} // namespace sof::model
