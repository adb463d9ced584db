// The training loop (see trainer.h): builds every piece from the deck and runs the steps.
// Rank 0 logs one line per step and writes the JSONL metrics; checkpoints are atomic directories.
#include "train/trainer.h"

#include <omp.h>
#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <filesystem>

#include "ckpt/checkpoint.h"
#include "ckpt/llmc.h"
#include "config/deck.h"
#include "core/error.h"
#include "core/timer.h"
#include "core/trace.h"
#include "data/loader.h"
#include "model/gpt2.h"
#include "offload/updater_factory.h"
#include "plan/planner.h"
#include "train/metrics.h"
#include "train/schedule.h"

namespace sof::train {

namespace fs = std::filesystem;

struct Trainer::Impl {
    config::Config cfg;
    const comm::World& world;
    core::Log log;
    model::GPT2Config mcfg;
    std::unique_ptr<model::GPT2> model;
    std::unique_ptr<core::Trace> trace;
    std::unique_ptr<offload::Updater> updater;
    std::unique_ptr<data::DataLoader> train_data, val_data;
    std::vector<int> inputs, targets; // (B*T) each
    int64_t step = 0;                 // steps completed

    Impl(const config::Config& c, const comm::World& w, const core::Log& l)
        : cfg(c), world(w), log(l) {}

    void setup();
    float evaluate();
    std::string save_checkpoint();
    void resume_from(const std::string& dir);
};

void Trainer::Impl::setup() {
    if (world.size() > 1)
        SOF_FAIL(Config,
                 "this build trains on one rank per job so far (got %d ranks); ZeRO-3 and "
                 "Ulysses over MPI are the next milestone: launch with 1 rank",
                 world.size());
    if (cfg.runtime.threads > 0) omp_set_num_threads(cfg.runtime.threads);
    if (!cfg.runtime.out_dir.empty()) fs::create_directories(cfg.runtime.out_dir);

    // Model: from the deck, or from an llm.c checkpoint (its header decides the architecture).
    std::vector<float> params;
    if (!cfg.model.init_from.empty()) {
        mcfg = ckpt::read_llmc_header(cfg.model.init_from);
        cfg.model.max_seq_len = mcfg.max_seq_len;
        cfg.model.vocab_size = mcfg.vocab_size;
        cfg.model.padded_vocab_size = mcfg.padded_vocab_size;
        cfg.model.num_layers = mcfg.num_layers;
        cfg.model.num_heads = mcfg.num_heads;
        cfg.model.channels = mcfg.channels;
        log.info("model: architecture taken from %s", cfg.model.init_from.c_str());
    } else {
        mcfg = plan::model_config_for(cfg.model); // padded_vocab_size 0 -> V rounded to 128
        cfg.model.padded_vocab_size = mcfg.padded_vocab_size;
    }
    model::validate(mcfg);
    if (cfg.train.seq_len > mcfg.max_seq_len)
        SOF_FAIL(Config, "train.seq_len = %d exceeds the model's max_seq_len = %d",
                 cfg.train.seq_len, mcfg.max_seq_len);
    model::ModelOptions mopts;
    mopts.recompute = cfg.model.recompute;
    model = std::make_unique<model::GPT2>(mcfg, mopts, cfg.train.batch_size, cfg.train.seq_len);
    const model::ParamLayout& layout = model->layout();
    params.assign(layout.num_params, 0.0f);
    if (!cfg.model.init_from.empty())
        ckpt::import_llmc(cfg.model.init_from, layout, params.data());
    else
        model::init_params(layout, params.data(), cfg.model.init_std, cfg.train.seed);

    // Offload plan: resolve `auto` choices before the engine is built.
    if (cfg.offload.enabled) {
        plan::HardwareProfile hw = plan::hardware_for(cfg);
        plan::Plan p = plan::make_plan(cfg, mcfg, hw);
        plan::resolve_auto(cfg, p);
    }
    log.info("effective deck:\n%s", config::effective_yaml(cfg).c_str());

    if (!cfg.runtime.trace.empty()) trace = std::make_unique<core::Trace>();
    updater = offload::make_updater(cfg, layout, log, trace.get());
    std::vector<float> zeros(layout.num_params, 0.0f);
    updater->set_state(params.data(), zeros.data(), zeros.data(), 0);

    int B = cfg.train.batch_size, T = cfg.train.seq_len;
    train_data = std::make_unique<data::DataLoader>(cfg.data, data::Split::Train, mcfg.vocab_size,
                                                    B, T, world.rank(), world.size());
    val_data = std::make_unique<data::DataLoader>(cfg.data, data::Split::Val, mcfg.vocab_size, B, T,
                                                  world.rank(), world.size());
    inputs.resize(static_cast<size_t>(B) * T);
    targets.resize(static_cast<size_t>(B) * T);
    log.info("model: GPT-2 L=%d NH=%d C=%d V=%d (padded %d) maxT=%d, %zu params", mcfg.num_layers,
             mcfg.num_heads, mcfg.channels, mcfg.vocab_size, mcfg.padded_vocab_size,
             mcfg.max_seq_len, layout.num_params);
    log.info("data: train %s", train_data->describe().c_str());
    log.info("data: val   %s", val_data->describe().c_str());

    std::string resume = cfg.train.resume;
    if (resume == "auto") {
        resume = cfg.train.checkpoint_dir.empty() ? std::string()
                                                  : ckpt::find_latest(cfg.train.checkpoint_dir);
        if (resume.empty()) log.info("resume: auto, no checkpoint found, starting fresh");
    }
    if (!resume.empty()) resume_from(resume);
}

void Trainer::Impl::resume_from(const std::string& dir) {
    ckpt::Manifest m;
    ckpt::State s;
    ckpt::load(dir, &m, &s, world.rank(), world.size());
    const model::ParamLayout& layout = model->layout();
    if (m.num_params != static_cast<int64_t>(layout.num_params))
        SOF_FAIL(Config, "checkpoint %s holds %lld params but the deck's model has %zu",
                 dir.c_str(), static_cast<long long>(m.num_params), layout.num_params);
    updater->set_state(s.params.data(), s.exp_avg.data(), s.exp_avg_sq.data(), m.opt_step);
    train_data->restore(m.train_data);
    step = m.step;
    log.info("resume: %s (step %lld, optimizer step %lld)", dir.c_str(),
             static_cast<long long>(m.step), static_cast<long long>(m.opt_step));
}

float Trainer::Impl::evaluate() {
    val_data->reset();
    double sum = 0.0;
    int n = std::max(1, cfg.train.eval_batches);
    for (int i = 0; i < n; i++) {
        val_data->next(inputs.data(), targets.data());
        sum += model->forward(updater->weights(), inputs.data(), targets.data(),
                              cfg.train.batch_size, cfg.train.seq_len);
    }
    return static_cast<float>(sum / n);
}

std::string Trainer::Impl::save_checkpoint() {
    const model::ParamLayout& layout = model->layout();
    ckpt::Manifest m;
    ckpt::State s;
    s.params.resize(layout.num_params);
    s.exp_avg.resize(layout.num_params);
    s.exp_avg_sq.resize(layout.num_params);
    int64_t opt_step = 0;
    updater->get_state(s.params.data(), s.exp_avg.data(), s.exp_avg_sq.data(), &opt_step);
    m.step = step;
    m.opt_step = opt_step;
    m.model = mcfg;
    m.num_params = static_cast<int64_t>(layout.num_params);
    m.world_size = world.size();
    m.deck_yaml = config::effective_yaml(cfg);
    m.train_data = train_data->state();
    m.skips = updater->stats().skips;
    m.rollbacks = updater->stats().rollbacks;
    return ckpt::save(cfg.train.checkpoint_dir, m, s, cfg.train.keep_checkpoints, world.rank(),
                      world.size());
}

Trainer::Trainer(const config::Config& cfg, const comm::World& world, const core::Log& log)
    : impl_(std::make_unique<Impl>(cfg, world, log)) {
    impl_->setup();
}

Trainer::~Trainer() = default;

std::vector<float> Trainer::params() const {
    size_t n = impl_->model->layout().num_params;
    std::vector<float> p(n), m(n), v(n);
    int64_t t = 0;
    impl_->updater->get_state(p.data(), m.data(), v.data(), &t);
    return p;
}

RunSummary Trainer::run() {
    Impl& s = *impl_;
    const config::TrainConfig& tc = s.cfg.train;
    const core::Log& log = s.log;
    RunSummary sum;
    sum.start_step = s.step;
    sum.entropy_floor = s.train_data->entropy_floor();
    std::string metrics_path = tc.metrics.empty() && !s.cfg.runtime.out_dir.empty()
                                   ? s.cfg.runtime.out_dir + "/metrics.jsonl"
                                   : tc.metrics;
    MetricsWriter metrics(s.world.rank() == 0 ? metrics_path : std::string(), s.step > 0);

    const int B = tc.batch_size, T = tc.seq_len, accum = tc.grad_accum;
    const double tokens_per_step = static_cast<double>(B) * T * accum * s.world.size();
    const double flops_per_step = model::flops_per_token(s.mcfg, T) * tokens_per_step;
    if (std::isfinite(sum.entropy_floor))
        log.info("data: entropy floor of the built-in corpus: %.4f nats/token", sum.entropy_floor);

    sum.first_val_loss = s.evaluate();
    log.info("step %lld: val loss %.4f", static_cast<long long>(s.step), sum.first_val_loss);
    metrics.write("eval",
                  {{"step", static_cast<double>(s.step)}, {"val_loss", sum.first_val_loss}});

    double total_time = 0.0, total_tokens = 0.0;
    std::string last_ckpt;
    const int64_t stop = tc.stop_after > 0 ? std::min(tc.stop_after, tc.steps) : tc.steps;
    while (s.step < stop) {
        core::Timer step_timer;
        offload::StepHparams hp;
        hp.step = s.step;
        hp.lr = lr_at(tc, static_cast<int>(s.step));
        hp.grad_clip = tc.grad_clip;
        for (int st : s.cfg.debug.inject_nonfinite_steps)
            if (st == s.step) hp.inject_nonfinite = true;
        s.updater->begin_step(hp);
        double loss_sum = 0.0, fwd_ms = 0.0, bwd_ms = 0.0;
        for (int micro = 0; micro < accum; micro++) {
            s.train_data->next(s.inputs.data(), s.targets.data());
            core::Timer t;
            loss_sum +=
                s.model->forward(s.updater->weights(), s.inputs.data(), s.targets.data(), B, T);
            fwd_ms += t.ms();
            t.reset();
            s.updater->begin_micro(micro, micro == accum - 1);
            s.model->backward(s.updater->weights(), s.updater->grads(),
                              1.0f / (static_cast<float>(B) * T * accum));
            bwd_ms += t.ms();
        }
        offload::StepReport rep = s.updater->finish_step();
        double ms = step_timer.ms();
        float loss = static_cast<float>(loss_sum / accum);
        sum.train_losses.push_back(loss);
        sum.grad_norms.push_back(rep.grad_norm);
        s.step++;
        if (s.step > sum.start_step + 1) { // the first step warms caches; leave it out of the mean
            total_time += ms / 1e3;
            total_tokens += tokens_per_step;
        }
        const offload::UpdaterStats& st = s.updater->stats();
        double tok_s = tokens_per_step / (ms / 1e3);
        double tflops = flops_per_step / (ms / 1e3) / 1e12;
        if (tc.log_every > 0 && (s.step % tc.log_every == 0 || s.step == stop))
            log.info(
                "step %5lld/%d | loss %.4f | lr %.3e | norm %.4f%s | %.0f tok/s | %.3f TFLOPS"
                " | %.1f ms (fwd %.1f bwd %.1f opt %.1f xfer %.1f) | skips %lld rollbacks %lld",
                static_cast<long long>(s.step), tc.steps, loss, hp.lr, rep.grad_norm,
                rep.skipped ? " (skipped)" : (rep.clipped ? " (clipped)" : ""), tok_s, tflops, ms,
                fwd_ms, bwd_ms, rep.exposed_optimizer_ms, rep.exposed_transfer_ms,
                static_cast<long long>(st.skips), static_cast<long long>(st.rollbacks));
        metrics.write("step", {{"step", static_cast<double>(s.step)},
                               {"loss", loss},
                               {"lr", hp.lr},
                               {"grad_norm", rep.grad_norm},
                               {"skipped", rep.skipped ? 1.0 : 0.0},
                               {"clipped", rep.clipped ? 1.0 : 0.0},
                               {"tokens_per_s", tok_s},
                               {"tflops", tflops},
                               {"ms", ms},
                               {"forward_ms", fwd_ms},
                               {"backward_ms", bwd_ms},
                               {"exposed_optimizer_ms", rep.exposed_optimizer_ms},
                               {"exposed_transfer_ms", rep.exposed_transfer_ms},
                               {"skips", static_cast<double>(st.skips)},
                               {"rollbacks", static_cast<double>(st.rollbacks)}});
        if (tc.eval_every > 0 && s.step % tc.eval_every == 0 && s.step < stop) {
            float vl = s.evaluate();
            log.info("step %lld: val loss %.4f", static_cast<long long>(s.step), vl);
            metrics.write("eval", {{"step", static_cast<double>(s.step)}, {"val_loss", vl}});
        }
        bool ckpt_due =
            !tc.checkpoint_dir.empty() &&
            ((tc.checkpoint_every > 0 && s.step % tc.checkpoint_every == 0) || s.step == stop);
        if (ckpt_due) {
            last_ckpt = s.save_checkpoint();
            log.info("checkpoint: %s", last_ckpt.c_str());
        }
    }
    sum.end_step = s.step;
    sum.last_val_loss = s.evaluate();
    sum.tokens_per_s = total_time > 0 ? total_tokens / total_time : 0.0;
    sum.skips = s.updater->stats().skips;
    sum.rollbacks = s.updater->stats().rollbacks;
    sum.last_checkpoint = last_ckpt;
    log.info("step %lld: val loss %.4f", static_cast<long long>(s.step), sum.last_val_loss);
    log.info("done: val loss %.4f -> %.4f over steps %lld..%lld, %.0f tok/s, skips %lld, "
             "rollbacks %lld",
             sum.first_val_loss, sum.last_val_loss, static_cast<long long>(sum.start_step),
             static_cast<long long>(sum.end_step), sum.tokens_per_s,
             static_cast<long long>(sum.skips), static_cast<long long>(sum.rollbacks));
    metrics.write("summary", {{"first_val_loss", sum.first_val_loss},
                              {"last_val_loss", sum.last_val_loss},
                              {"steps", static_cast<double>(sum.end_step)},
                              {"tokens_per_s", sum.tokens_per_s}});
    if (s.trace) s.trace->write(s.cfg.runtime.trace);
    return sum;
}

} // namespace sof::train
