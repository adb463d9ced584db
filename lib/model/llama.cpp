// LLaMA-family forward/backward on the CPU (placeholder while the kernels land).
// See llama.h.
#include "model/llama.h"

#include "core/error.h"

namespace sof::model {

Llama::Llama(const ArchConfig& cfg, const ModelOptions&, int, int)
    : cfg_(cfg), layout_(make_layout(cfg)), impl_(nullptr) {
    SOF_FAIL(Config, "model.type %s: not built yet", arch_name(cfg.arch));
}
Llama::~Llama() = default;
float Llama::forward(WeightSource&, const int*, const int*, int, int) {
    return 0;
}
void Llama::backward(WeightSource&, GradSink&, float) {}
const float* Llama::logits() const {
    return nullptr;
}
const float* Llama::probs() const {
    return nullptr;
}
std::vector<float> rope_inv_freq(const ArchConfig&) {
    return {};
}

} // namespace sof::model
