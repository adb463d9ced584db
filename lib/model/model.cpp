// The Model factory: every architecture is a block spec run by the one transformer driver.
// The only place that builds a Model.
#include "model/model.h"

#include "model/transformer.h"

namespace sof::model {

std::unique_ptr<Model> make_model(const ArchConfig& cfg, const ModelOptions& opts, int max_B,
                                  int max_T) {
    return std::make_unique<Transformer>(cfg, opts, max_B, max_T);
}

} // namespace sof::model
