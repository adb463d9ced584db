// resolve_model (model_source.h): init_from's Hugging Face config or llm.c header, or the deck.
#include "ckpt/model_source.h"

#include "ckpt/hf.h"
#include "ckpt/llmc.h"
#include "core/error.h"
#include "model/model_config.h"

namespace sof::ckpt {

model::ArchConfig resolve_model(config::Config* cfg, std::string* source) {
    model::ArchConfig m;
    std::string from;
    const std::string& init = cfg->model.init_from;
    if (!init.empty() && is_hf_dir(init)) {
        m = read_hf_config(init);
        model::set_deck_model(m, &cfg->model);
        from = init + "/config.json";
    } else if (!init.empty()) {
        m = read_llmc_header(init);
        model::set_deck_model(m, &cfg->model);
        from = init;
    } else {
        m = model::config_for(cfg->model); // padded_vocab_size 0 -> V rounded to 128
        cfg->model.padded_vocab_size = m.padded_vocab_size;
    }
    // auto: the model's own rates (config.json's; a deck model's are its keys, auto = 0)
    if (cfg->model.attention_dropout < 0.0f) cfg->model.attention_dropout = m.attn_dropout;
    if (cfg->model.residual_dropout < 0.0f) cfg->model.residual_dropout = m.resid_dropout;
    if (source) *source = from;
    return m;
}

void check_run_shape(const config::Config& cfg, const model::ArchConfig& m) {
    model::validate(m, cfg.parallel.sp, cfg.train.seq_len);
    if (cfg.train.seq_len > m.max_seq_len)
        SOF_FAIL(Config, "train.seq_len = %d exceeds the model's max_seq_len = %d",
                 cfg.train.seq_len, m.max_seq_len);
}

} // namespace sof::ckpt
