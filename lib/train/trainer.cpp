// The training loop (see trainer.h): builds every piece from the deck and the rank context, and
// runs the steps. Rank 0 logs; every rank writes its JSONL metrics; checkpoints are sharded.
#include "train/trainer.h"
#include "train/trainer_impl.h"

#include <omp.h>
#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <chrono>
#include <filesystem>
#include <thread>

#include "ckpt/checkpoint.h"
#include "ckpt/compat.h"
#include "ckpt/fileio.h"
#include "ckpt/hf.h"
#include "ckpt/model_source.h"
#include "ckpt/llmc.h"
#include "config/batch.h"
#include "config/deck.h"
#include "core/error.h"
#include "core/timer.h"
#include "core/trace.h"
#include "data/loader.h"
#include "model/model.h"
#include "model/model_config.h"
#include "zero/shard.h"
#include "device/device.h"
#include "offload/memory_plan.h"
#include "offload/updater_factory.h"
#include "plan/planner.h"
#include "rank/context.h"
#include "sp/ulysses.h"
#include "train/metrics.h"
#include "train/run_dirs.h"
#include "train/batches.h"
#include "train/schedule.h"
#include "zero/sharded.h"

namespace sof::train {

namespace fs = std::filesystem;

// Ranks that read different decks (or overrides) would train different models and hang in the
// first collective that differs: compare a checksum of the effective deck first.
// collective: all ranks of world
void Trainer::Impl::check_same_deck() {
    if (world.size() == 1) return;
    const std::string y = config::effective_yaml(cfg);
    const uint64_t h = ckpt::fnv1a64(y.data(), y.size());
    std::vector<unsigned long long> all(static_cast<size_t>(world.size()));
    unsigned long long mine = h;
    SOF_CHECK_MPI(MPI_Allgather(&mine, 1, MPI_UNSIGNED_LONG_LONG, all.data(), 1,
                                MPI_UNSIGNED_LONG_LONG, world.comm()));
    std::string differ;
    for (size_t r = 1; r < all.size(); r++)
        if (all[r] != all[0]) differ += (differ.empty() ? "" : ", ") + std::to_string(r);
    if (!differ.empty())
        SOF_FAIL(Config,
                 "the ranks of this job disagree on the deck: the effective deck of rank(s) %s "
                 "differs from rank 0's; every rank must read the same deck file with the same "
                 "--set overrides (compare the 'effective deck' of each rank with "
                 "`superoffload check`)",
                 differ.c_str());
}

void Trainer::Impl::setup() {
    check_same_deck();
    if (cfg.runtime.threads > 0) omp_set_num_threads(cfg.runtime.threads);
    dirs = claim_run_dirs(cfg, world.rank(), log);
    if (world.size() > 1) world.barrier(); // rank 0's cleanup is done before anyone looks for steps
    if (!cfg.train.checkpoint_dir.empty() || !cfg.train.resume.empty())
        data_id = ckpt::data_identity(cfg.data);

    // Model: from the deck, or from an llm.c checkpoint (its header decides the architecture).
    std::vector<float> params;
    const bool hf_init = !cfg.model.init_from.empty() && ckpt::is_hf_dir(cfg.model.init_from);
    std::string source; // the effective deck names the model trained
    mcfg = ckpt::resolve_model(&cfg, &source);
    if (!source.empty())
        log.info("model: architecture taken from %s (deck model keys ignored)", source.c_str());
    // the model (sizes, heads, and the heads and seq_len over parallel.sp), then the ranks
    sp::check_degrees(mcfg, cfg.train.seq_len, world.size(), cfg.parallel.sp);
    if (cfg.train.seq_len > mcfg.max_seq_len)
        SOF_FAIL(Config, "train.seq_len = %d exceeds the model's max_seq_len = %d",
                 cfg.train.seq_len, mcfg.max_seq_len);

    // train.global_batch: batch_size x grad_accum for this rank count (config/batch.h), before
    // the plan: the planner sizes the micro-batch and accumulation the engine runs
    if (const std::string note = config::apply_batch_geometry(cfg, world.size()); !note.empty())
        log.info("batch: %s", note.c_str());
    // Offload plan: resolve `auto` choices before the engine is built.
    if (cfg.offload.enabled) {
        plan::HardwareProfile hw = plan::hardware_for(cfg);
        // memory per rank: under ZeRO-3 each rank's engine holds a 1/world shard
        int shard_ranks = cfg.parallel.zero_stage == 3 ? world.size() : 1;
        plan::Plan p = plan::make_plan(cfg, mcfg, hw, shard_ranks);
        plan::resolve_auto(cfg, p);
        for (const std::string& n : p.auto_notes) // every `auto` the planner resolved, and why
            log.info("plan: %s", n.c_str());
        if (!p.fits) log.warn("plan on %s: does not fit: %s", p.hardware.c_str(), p.why.c_str());
    }
    cfg.data.eos_id = resolve_eos_id(cfg); // data.pack: the document separator (-1: auto)
    if (world.rank() == 0)
        for (const std::string& w : config::deck_warnings(cfg))
            log.warn("%s", w.c_str());
    // the effective deck (every key, about 100 lines) goes to the run directory; the log shows
    // it only at log level debug (`train -v`)
    const std::string deck_yaml = config::effective_yaml(cfg);
    if (world.rank() == 0 && !cfg.runtime.out_dir.empty()) {
        const std::string path = cfg.runtime.out_dir + "/effective_deck.yaml";
        ckpt::write_file_atomic(path, deck_yaml.data(), deck_yaml.size(), "effective deck");
        log.info("effective deck: %s", path.c_str());
    }
    log.debug("effective deck:\n%s", deck_yaml.c_str());

    // The rank context: grid, groups, binding, device and streams, collective transport.
    if (!cfg.runtime.trace.empty()) trace = std::make_unique<core::Trace>();
    ctx = std::make_unique<rank::Context>(cfg, world, log, trace.get());
    const rank::Grid& g = ctx->grid();
    if (g.sp > 1) // on the model's stream, through the SP group's device-buffer collectives
        ulysses = std::make_unique<sp::Ulysses>(*ctx->sp_device_comm(), ctx->devices().compute());

    const int B = cfg.train.batch_size, T = cfg.train.seq_len, Tl = T / g.sp;
    model::ModelOptions mopts;
    mopts.recompute = cfg.model.recompute;
    mopts.loss_tile = cfg.model.loss_tile;
    mopts.mlp_tile = cfg.model.mlp_tile;
    mopts.offload_checkpoints = cfg.model.offload_checkpoints;
    mopts.device_checkpoints = cfg.model.device_checkpoints;
    // resolved by resolve_model (auto: the model's rates); masks keyed per micro-step below
    mopts.attn_dropout = std::max(0.0f, cfg.model.attention_dropout);
    mopts.resid_dropout = std::max(0.0f, cfg.model.residual_dropout);
    mopts.router_z_loss_coef = cfg.model.router_z_loss_coef;
    mopts.attention_kernel =
        cfg.debug.attention_kernel == "cuda_cores"
            ? kernels::AttnKernel::CudaCores
            : (cfg.debug.attention_kernel == "tensor_cores" ? kernels::AttnKernel::TensorCores
                                                            : kernels::AttnKernel::Auto);
    mopts.seq = ulysses.get();
    // The model runs on the rank's device and compute stream, its activations in the device's
    // memory (the host device's arena counts them); on a CUDA device with train.dtype bf16 it
    // reads bf16 weights (offload::bf16_working_weights): the engine's bf16 working weights, or
    // under ZeRO-3 the wrapper's bf16 gather slots.
    mopts.device = &ctx->device();
    mopts.stream = &ctx->devices().compute();
    mopts.bf16 = offload::bf16_working_weights(cfg, ctx->device().host_accessible());
    model = model::make_model(mcfg, mopts, B, Tl);
    const model::ParamLayout& layout = model->layout();
    params.assign(layout.num_params, 0.0f);
    if (hf_init && world.size() == 1)
        ckpt::import_hf(cfg.model.init_from, layout, zero::make_shard_map(layout, 1, 0),
                        params.data());
    else if (!cfg.model.init_from.empty() && !hf_init)
        ckpt::import_llmc(cfg.model.init_from, layout, params.data());
    else if (!hf_init)
        model::init_params(layout, params.data(), cfg.model.init_std, cfg.train.seed);

    updater = zero::make_parallel_updater(cfg, layout, *ctx, log, trace.get(), mopts.bf16);
    shards = dynamic_cast<zero::ShardAccess*>(updater.get());
    if (updater->bf16_weights() != mopts.bf16)
        SOF_FAIL(Internal, "the update path hands %s weights, the model reads %s",
                 updater->bf16_weights() ? "bf16" : "fp32", mopts.bf16 ? "bf16" : "fp32");
    {
        std::vector<float> zeros(layout.num_params, 0.0f);
        updater->set_state(params.data(), zeros.data(), zeros.data(), 0);
    }
    if (hf_init && world.size() > 1) {
        // every rank reads only its slices of the files, straight into its shard
        if (!shards)
            SOF_FAIL(Internal, "multi-rank update path without shard access (zero_stage %d)",
                     cfg.parallel.zero_stage);
        zero::ShardState st;
        st.map = shards->shard_map();
        std::vector<float> local(st.map.local_size);
        ckpt::import_hf(cfg.model.init_from, layout, st.map, local.data());
        st.params.resize(st.map.real_size);
        zero::shard_pack_real(layout, st.map, local.data(), st.params.data());
        st.exp_avg.assign(st.map.real_size, 0.0f);
        st.exp_avg_sq.assign(st.map.real_size, 0.0f);
        shards->set_shard(st);
    }
    if (hf_init)
        log.info("model: imported %s (%s)", cfg.model.init_from.c_str(),
                 world.size() > 1 ? "each rank read its own shard" : "whole model");
    std::vector<float>().swap(params); // the update path holds the master now: 4 B/param freed

    // Data: DP ranks stride over the global batch; SP ranks of one DP rank read the same
    // sequences and keep their slice of positions.
    // with train.global_batch the unit of order is the optimizer step (the same sequences per
    // step at any rank count); without it llm.c's order of micro-batches (docs/data.md)
    train_data = std::make_unique<data::DataLoader>(
        cfg.data, data::Split::Train, mcfg.vocab_size, B, T, g.dp_rank, g.dp,
        cfg.train.global_batch > 0 ? cfg.train.grad_accum : 1);
    val_data = std::make_unique<data::DataLoader>(cfg.data, data::Split::Val, mcfg.vocab_size, B, T,
                                                  g.dp_rank, g.dp);
    inputs.resize(static_cast<size_t>(B) * T);
    targets.resize(static_cast<size_t>(B) * T);
    linputs.resize(static_cast<size_t>(B) * Tl);
    ltargets.resize(static_cast<size_t>(B) * Tl);
    if (cfg.data.pack) segments.resize(static_cast<size_t>(B) * T);
    if (train_data->has_masks()) {
        step_inputs.assign(static_cast<size_t>(cfg.train.grad_accum), linputs);
        step_targets.assign(static_cast<size_t>(cfg.train.grad_accum), ltargets);
        step_segments.assign(static_cast<size_t>(cfg.train.grad_accum), segments);
    }
    if (mcfg.llama_family())
        log.info("model: %s L=%d NH=%d NKV=%d hd=%d C=%d I=%d V=%d (padded %d) maxT=%d, %s head, "
                 "%zu params",
                 model::arch_name(mcfg.arch), mcfg.num_layers, mcfg.num_heads, mcfg.kv_heads(),
                 mcfg.hdim(), mcfg.channels, mcfg.ffn_dim(), mcfg.vocab_size,
                 mcfg.padded_vocab_size, mcfg.max_seq_len, mcfg.tie_embeddings ? "tied" : "untied",
                 layout.num_params);
    else
        log.info("model: GPT-2 L=%d NH=%d C=%d V=%d (padded %d) maxT=%d, %zu params",
                 mcfg.num_layers, mcfg.num_heads, mcfg.channels, mcfg.vocab_size,
                 mcfg.padded_vocab_size, mcfg.max_seq_len, layout.num_params);
    if (world.size() > 1)
        log.info("parallel: %d ranks = DP %d x SP %d, ZeRO stage %d%s", g.world, g.dp, g.sp,
                 cfg.parallel.zero_stage, g.sp > 1 ? ", Ulysses all-to-all around attention" : "");
    log.info("data: train %s", train_data->describe().c_str());
    log.info("data: val   %s", val_data->describe().c_str());
    // no silent wrap-around: evaluation reads each validation batch at most once
    eval_n = cfg.train.eval_batches;
    if (eval_n > val_data->batches_per_epoch()) {
        eval_n = static_cast<int>(val_data->batches_per_epoch());
        log.warn("train.eval_batches = %d but the validation data holds only %d batch(es) of %d x "
                 "%d per rank over %d data-parallel rank(s): evaluating on those %d (each read "
                 "once, no wrap-around); lower train.eval_batches or give more validation data",
                 cfg.train.eval_batches, eval_n, B, T, g.dp, eval_n);
    }

    std::string resume = cfg.train.resume;
    if (resume == "auto") { // rank 0's choice on every rank
        resume = agreed_latest_checkpoint();
        if (resume.empty()) log.info("resume: auto, no checkpoint found, starting fresh");
    }
    if (!resume.empty()) resume_from(resume);
}

zero::ShardMap Trainer::Impl::shard_map() const {
    return shards ? shards->shard_map() : zero::make_shard_map(model->layout(), 1, 0);
}

void Trainer::Impl::next_batch(data::DataLoader& d) {
    d.next(inputs.data(), targets.data(), d.packed() ? segments.data() : nullptr);
    const rank::Grid& g = ctx->grid();
    if (g.sp == 1) {
        linputs = inputs;
        ltargets = targets;
        return;
    }
    sp::slice_sequence(inputs.data(), linputs.data(), cfg.train.batch_size, cfg.train.seq_len, g.sp,
                       g.sp_rank);
    sp::slice_sequence(targets.data(), ltargets.data(), cfg.train.batch_size, cfg.train.seq_len,
                       g.sp, g.sp_rank);
}

// Mean over every rank's local mean (equal token counts), added in rank order.
// collective: all ranks of world
float Trainer::Impl::global_loss(double local) {
    if (world.size() == 1) return static_cast<float>(local);
    return static_cast<float>(ctx->all().ordered_sum(local) / world.size());
}

// With loss masks: sum(local means x local counts) / global count, both summed in rank order.
// collective: all ranks of world
float Trainer::Impl::masked_mean(double local_sum, double local_count, double* global_count) {
    double n = local_count, sum = local_sum;
    if (world.size() > 1) {
        n = ctx->all().ordered_sum(local_count);
        sum = ctx->all().ordered_sum(local_sum);
    }
    if (global_count) *global_count = n;
    return n > 0 ? static_cast<float>(sum / n) : 0.0f;
}

float Trainer::Impl::evaluate() {
    return static_cast<float>(eval_pass(eval_n).loss);
}

// The first n validation batches (n <= batches per epoch: each read once).
// collective: all ranks of world
EvalResult Trainer::Impl::eval_pass(int n) {
    const core::Timer timer;
    val_data->reset();
    model->set_dropout(nullptr); // evaluation: no dropout (training sets its key per micro-step)
    double sum = 0.0, counted = 0.0;
    n = std::max(1, n);
    const int Tl = cfg.train.seq_len / ctx->grid().sp;
    for (int i = 0; i < n; i++) {
        next_batch(*val_data);
        const float l = model->forward(updater->weights(), linputs.data(), ltargets.data(),
                                       seg_ptr(), cfg.train.batch_size, Tl);
        const double c = static_cast<double>(
            std::count_if(ltargets.begin(), ltargets.end(), [](int t) { return t >= 0; }));
        sum += val_data->has_masks() ? l * c : l;
        counted += c;
    }
    EvalResult r;
    r.batches = n;
    if (val_data->has_masks()) {
        r.loss = masked_mean(sum, counted, &r.tokens);
    } else {
        r.loss = global_loss(sum / n);
        r.tokens =
            static_cast<double>(cfg.train.batch_size) * cfg.train.seq_len * n * ctx->grid().dp;
    }
    r.perplexity = std::exp(r.loss);
    r.seconds = timer.seconds();
    r.tokens_per_s = static_cast<double>(cfg.train.batch_size) * cfg.train.seq_len * n *
                     ctx->grid().dp / std::max(r.seconds, 1e-9);
    return r;
}

Trainer::Trainer(const config::Config& cfg, const comm::World& world, const core::Log& log)
    : impl_(std::make_unique<Impl>(cfg, world, log)) {
    impl_->setup();
}

Trainer::~Trainer() = default;

void Trainer::set_crash_hook(std::function<void()> crash) {
    impl_->crash = std::move(crash);
}

const model::ArchConfig& Trainer::model_config() const {
    return impl_->model->config();
}

void Trainer::set_stop_check(StopCheck check) {
    impl_->stop_check = std::move(check);
}

EvalResult Trainer::evaluate(int batches) {
    Impl& s = *impl_;
    const int64_t have = s.val_data->batches_per_epoch();
    int n = batches > 0 ? batches : static_cast<int>(std::min<int64_t>(have, 1 << 30));
    if (n > have) {
        s.log.warn("eval: %d batches asked but the validation data holds %lld of %d x %d per rank "
                   "over %d data-parallel rank(s): evaluating on those %lld (each read once, no "
                   "wrap-around)",
                   batches, static_cast<long long>(have), s.cfg.train.batch_size,
                   s.cfg.train.seq_len, s.ctx->grid().dp, static_cast<long long>(have));
        n = static_cast<int>(have);
    }
    return s.eval_pass(n);
}

std::vector<float> Trainer::params() const {
    size_t n = impl_->model->layout().num_params;
    std::vector<float> p(n), m(n), v(n);
    int64_t t = 0;
    impl_->updater->get_state(p.data(), m.data(), v.data(), &t);
    return p;
}

// The end of a run asked to stop (stop.h): the step is complete; checkpoint it unless that was
// just done, mark the metrics, skip the final evaluation (the scheduler's grace time is short).
// saved_step (the step of the last checkpoint this run wrote, -1: none) is the same on every rank:
// the save below is a collective, so whether to save must not depend on rank-local values (the
// directory name is known to rank 0 alone). after_eval: the stop came during the final evaluation.
// collective: all ranks of world
RunSummary Trainer::Impl::finish_stopped(RunSummary& sum, MetricsWriter& metrics,
                                         int64_t saved_step, std::string last_ckpt,
                                         bool after_eval) {
    Impl& s = *this;
    const std::string why = signal_name(sum.stop_signal);
    if (!s.cfg.train.checkpoint_dir.empty() && saved_step != s.step)
        last_ckpt = s.save_checkpoint();
    sum.end_step = s.step;
    sum.skips = (s.skips0 + s.updater->stats().skips);
    sum.rollbacks = (s.rollbacks0 + s.updater->stats().rollbacks);
    sum.last_checkpoint = last_ckpt;
    sum.device_peak = s.ctx->device().peak();
    sum.device_used = s.ctx->device().used();
    metrics.write("stop", {{"step", static_cast<double>(s.step)},
                           {"signal", static_cast<double>(sum.stop_signal)}});
    if (s.trace) s.write_trace();
    metrics.close();
    const char* when = after_eval ? " (during the final evaluation)" : "";
    if (s.cfg.train.checkpoint_dir.empty())
        s.log.info("stop: %s, stopped after step %lld%s; no checkpoint written "
                   "(train.checkpoint_dir is not set): the steps of this run are lost",
                   why.c_str(), static_cast<long long>(s.step), when);
    else
        s.log.info("stop: %s, stopped after step %lld%s; checkpoint %s written, metrics flushed; "
                   "continue with train.resume: auto",
                   why.c_str(), static_cast<long long>(s.step), when,
                   ckpt::step_dir_name(s.step).c_str());
    return sum;
}

// debug.hold_for_stop: after that step every rank waits until a stop is requested on any rank,
// so a test can deliver its signal at a known step however fast or slow the machine is. Polls the
// stop check and agrees every 20 ms; gives up (Runtime error on every rank) after 600 s.
// collective: all ranks of world
bool Trainer::Impl::hold_for_stop(RunSummary& sum) {
    log.info("debug.hold_for_stop: holding after step %lld until a stop is requested",
             static_cast<long long>(step));
    core::Timer waited;
    for (;;) {
        if (stop_agreed(stop_check, world, &sum.stop_signal)) return true;
        const bool late = waited.ms() > 600e3;
        if (world.any(late))
            SOF_FAIL(Runtime,
                     "debug.hold_for_stop = %lld: no stop request arrived within 600 s (is a "
                     "signal handler installed? `superoffload train` installs one for SIGTERM, "
                     "SIGINT and SIGUSR1)",
                     static_cast<long long>(cfg.debug.hold_for_stop));
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
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
    // every rank writes its own metrics (rank 0: metrics.jsonl, rank r: metrics.rank<r>.jsonl)
    if (s.world.rank() > 0 && !metrics_path.empty()) {
        std::string stem = metrics_path, ext;
        size_t dot = stem.rfind('.');
        if (dot != std::string::npos && stem.find('/', dot) == std::string::npos) {
            ext = stem.substr(dot);
            stem = stem.substr(0, dot);
        }
        metrics_path = core::strfmt("%s.rank%d%s", stem.c_str(), s.world.rank(), ext.c_str());
    }
    MetricsWriter metrics(metrics_path, s.step > 0);
    if (s.step > 0) metrics.write("resume", {{"step", static_cast<double>(s.step)}});

    const int B = tc.batch_size, T = tc.seq_len, accum = tc.grad_accum;
    const rank::Grid& grid = s.ctx->grid();
    const int Tl = T / grid.sp;
    const double tokens_per_step = static_cast<double>(B) * T * accum * grid.dp;
    const double flops_per_step = model::flops_per_token(s.mcfg, T) * tokens_per_step;
    if (std::isfinite(sum.entropy_floor))
        log.info("data: entropy floor of the built-in corpus: %.4f nats/token", sum.entropy_floor);

    sum.first_val_loss = s.evaluate();
    log.info("step %lld: val loss %.4f", static_cast<long long>(s.step), sum.first_val_loss);
    metrics.write("eval",
                  {{"step", static_cast<double>(s.step)}, {"val_loss", sum.first_val_loss}});

    double total_time = 0.0, total_tokens = 0.0;
    int64_t timed_steps = 0;
    const core::Timer run_timer;
    std::string last_ckpt;
    int64_t saved_step = -1; // step of the last checkpoint written by this run (every rank)
    const int64_t stop = tc.stop_after > 0 ? std::min(tc.stop_after, tc.steps) : tc.steps;
    comm::CommBytes bytes0 = s.ctx->bytes();
    double busy0 = s.ctx->lane().busy_ms(), waited0 = s.ctx->lane().waited_ms();
    // The forward/backward split is device time on the compute stream: timing events before the
    // forward, after it and after the backward of each micro-batch (host timers would charge the
    // backward's GPU time to the next forward's loss readback and give the backward its enqueue
    // time only).
    device::Device& dev = s.ctx->device();
    device::Stream& compute = s.ctx->devices().compute();
    std::vector<std::unique_ptr<device::Event>> marks; // (3 * accum)
    for (int i = 0; i < 3 * accum; i++)
        marks.push_back(dev.create_timing_event());
    while (s.step < stop) {
        if (s.cfg.debug.fail_rank == s.world.rank() && s.cfg.debug.fail_step == s.step) {
            if (s.cfg.debug.fail_hard && s.crash) s.crash();
            SOF_FAIL(Runtime,
                     "debug.fail_rank = %d: rank %d fails at step %lld as the deck asks (a test of "
                     "failure handling)",
                     s.cfg.debug.fail_rank, s.world.rank(), static_cast<long long>(s.step));
        }
        core::Timer step_timer;
        offload::StepHparams hp;
        hp.step = s.step;
        hp.lr = lr_at(tc, static_cast<int>(s.step));
        hp.grad_clip = tc.grad_clip;
        for (int st : s.cfg.debug.inject_nonfinite_steps)
            if (st == s.step) hp.inject_nonfinite = true;
        s.updater->begin_step(hp);
        double loss_sum = 0.0, fwd_ms = 0.0, bwd_ms = 0.0;
        double balance_sum = 0.0, z_sum = 0.0; // MoE: the routers' losses of the micro-batches
        // d(mean loss over the global batch): grads are summed over every rank. With loss masks
        // the mean is over the counted targets of the whole global batch: the step's micro-
        // batches are read first and their counted targets summed over all ranks (rank order).
        float dloss = 1.0f / (static_cast<float>(B) * T * accum * grid.dp);
        const bool masked = s.train_data->has_masks();
        double step_counted = 0.0;
        std::vector<int> counts(static_cast<size_t>(accum), 0);
        if (masked) {
            for (int micro = 0; micro < accum; micro++) {
                s.next_batch(*s.train_data);
                s.step_inputs[static_cast<size_t>(micro)] = s.linputs;
                s.step_targets[static_cast<size_t>(micro)] = s.ltargets;
                s.step_segments[static_cast<size_t>(micro)] = s.segments;
                counts[static_cast<size_t>(micro)] = static_cast<int>(std::count_if(
                    s.ltargets.begin(), s.ltargets.end(), [](int t) { return t >= 0; }));
                step_counted += counts[static_cast<size_t>(micro)];
            }
            if (s.world.size() > 1) step_counted = s.ctx->all().ordered_sum(step_counted);
            dloss = step_counted > 0 ? static_cast<float>(1.0 / step_counted) : 0.0f;
        }
        for (int micro = 0; micro < accum; micro++) {
            if (masked) {
                s.linputs = s.step_inputs[static_cast<size_t>(micro)];
                s.ltargets = s.step_targets[static_cast<size_t>(micro)];
                s.segments = s.step_segments[static_cast<size_t>(micro)];
            } else {
                s.next_batch(*s.train_data);
            }
            // dropout masks of this micro-batch: its rows are rows (micro * DP + dp_rank) * B ..
            // of the step's global batch (the loader's order), the same at any rank count and sp
            const model::DropoutStep drop{s.cfg.train.seed, static_cast<uint32_t>(s.step),
                                          (static_cast<uint64_t>(micro) * grid.dp + grid.dp_rank) *
                                              static_cast<uint64_t>(B)};
            s.model->set_dropout(&drop);
            dev.record(*marks[static_cast<size_t>(3 * micro)], compute);
            const float l = s.model->forward(s.updater->weights(), s.linputs.data(),
                                             s.ltargets.data(), s.seg_ptr(), B, Tl);
            loss_sum += masked ? static_cast<double>(l) * counts[static_cast<size_t>(micro)] : l;
            const model::RouterLosses rl = s.model->router_losses(); // host values: no cost
            balance_sum += rl.balance;
            z_sum += rl.z;
            dev.record(*marks[static_cast<size_t>(3 * micro + 1)], compute);
            s.updater->begin_micro(micro, micro == accum - 1);
            s.model->backward(s.updater->weights(), s.updater->grads(), dloss);
            dev.record(*marks[static_cast<size_t>(3 * micro + 2)], compute);
        }
        offload::StepReport rep = s.updater->finish_step();
        for (size_t micro = 0; micro < static_cast<size_t>(accum); micro++) {
            fwd_ms += dev.elapsed_ms(*marks[3 * micro], *marks[3 * micro + 1]);
            bwd_ms += dev.elapsed_ms(*marks[3 * micro + 1], *marks[3 * micro + 2]);
        }
        float loss = masked ? (s.world.size() > 1 ? s.ctx->all().ordered_sum(loss_sum) : loss_sum) /
                                  std::max(1.0, step_counted)
                            : s.global_loss(loss_sum / accum);
        // MoE: the balance loss and z, unscaled, each the mean over the micro-batches and ranks
        // (each rank's over its own tokens, as the loss term is computed)
        const bool moe = s.model->router_losses().moe;
        const double balance = moe ? s.global_loss(balance_sum / accum) : 0.0;
        const double router_z = moe ? s.global_loss(z_sum / accum) : 0.0;
        double ms = step_timer.ms();
        const comm::CommBytes bytes1 = s.ctx->bytes(), db = bytes1 - bytes0;
        const double busy1 = s.ctx->lane().busy_ms(), waited1 = s.ctx->lane().waited_ms();
        const double comm_ms = busy1 - busy0, comm_wait_ms = waited1 - waited0;
        bytes0 = bytes1;
        busy0 = busy1;
        waited0 = waited1;
        sum.comm_bytes.push_back(db);
        sum.comm_ms += comm_ms;
        sum.comm_wait_ms += comm_wait_ms;
        sum.train_losses.push_back(loss);
        sum.grad_norms.push_back(rep.grad_norm);
        sum.step_times.push_back(
            {ms, fwd_ms, bwd_ms, rep.exposed_optimizer_ms, rep.exposed_transfer_ms});
        s.step++;
        if (s.step > sum.start_step + 1) { // the first step warms caches; leave it out of the mean
            total_time += ms / 1e3;
            total_tokens += tokens_per_step;
            timed_steps++;
        }
        const offload::UpdaterStats& st = s.updater->stats();
        double tok_s = tokens_per_step / (ms / 1e3);
        // elapsed since this run's first step; ETA = remaining steps x mean step time (the
        // steps after the first; the first alone until there are more)
        const double elapsed_s = run_timer.seconds();
        const double eta_s = static_cast<double>(stop - s.step) *
                             (timed_steps > 0 ? total_time / timed_steps : ms / 1e3);
        double tflops = flops_per_step / (ms / 1e3) / 1e12;
        if (tc.log_every > 0 && (s.step % tc.log_every == 0 || s.step == stop))
            log.info(
                "step %5lld/%d | loss %.4f%s | lr %.3e | norm %.4f%s | %.0f tok/s | %.3f TFLOPS"
                " | %.1f ms (fwd %.1f bwd %.1f opt %.1f xfer %.1f%s) | skips %lld rollbacks %lld"
                " | elapsed %s eta %s",
                static_cast<long long>(s.step), tc.steps, loss,
                moe ? core::strfmt(" | router balance %.4f z %.4f", balance, router_z).c_str() : "",
                hp.lr, rep.grad_norm,
                rep.skipped ? " (skipped)" : (rep.clipped ? " (clipped)" : ""), tok_s, tflops, ms,
                fwd_ms, bwd_ms, rep.exposed_optimizer_ms, rep.exposed_transfer_ms,
                s.world.size() > 1
                    ? core::strfmt(" comm %.1f, waited %.1f, %.2f MB sent", comm_ms, comm_wait_ms,
                                   static_cast<double>(db.total_sent()) / 1e6)
                          .c_str()
                    : "",
                static_cast<long long>(s.skips0 + st.skips),
                static_cast<long long>(s.rollbacks0 + st.rollbacks),
                format_duration(elapsed_s).c_str(), format_duration(eta_s).c_str());
        std::vector<std::pair<std::string, double>> rec = {
            {"step", static_cast<double>(s.step)},
            {"loss", loss},
            {"lr", hp.lr},
            {"grad_norm", rep.grad_norm},
            {"skipped", rep.skipped ? 1.0 : 0.0},
            {"clipped", rep.clipped ? 1.0 : 0.0},
            {"tokens_per_s", tok_s},
            {"tflops", tflops},
            {"ms", ms},
            {"elapsed_s", elapsed_s},
            {"eta_s", eta_s},
            {"forward_ms", fwd_ms},
            {"backward_ms", bwd_ms},
            {"exposed_optimizer_ms", rep.exposed_optimizer_ms},
            {"exposed_transfer_ms", rep.exposed_transfer_ms},
            {"skips", static_cast<double>(s.skips0 + st.skips)},
            {"rollbacks", static_cast<double>(s.rollbacks0 + st.rollbacks)},
            {"rank", static_cast<double>(s.world.rank())},
            {"comm_ms", comm_ms},
            {"comm_wait_ms", comm_wait_ms},
            {"sent_allgather", static_cast<double>(db.sent[0])},
            {"recv_allgather", static_cast<double>(db.recv[0])},
            {"sent_reduce_scatter", static_cast<double>(db.sent[1])},
            {"recv_reduce_scatter", static_cast<double>(db.recv[1])},
            {"sent_allreduce", static_cast<double>(db.sent[2])},
            {"recv_allreduce", static_cast<double>(db.recv[2])},
            {"sent_alltoall", static_cast<double>(db.sent[3])},
            {"recv_alltoall", static_cast<double>(db.recv[3])},
            {"sent_small", static_cast<double>(db.sent[4])},
            {"recv_small", static_cast<double>(db.recv[4])},
            {"commits", static_cast<double>(st.commits)},
            {"grads_d2h_bytes", static_cast<double>(rep.bytes.grads_d2h)},
            {"params_h2d_bytes", static_cast<double>(rep.bytes.params_h2d)},
            {"params_d2h_bytes", static_cast<double>(rep.bytes.params_d2h)},
            {"state_h2d_bytes", static_cast<double>(rep.bytes.state_h2d)},
            {"state_d2h_bytes", static_cast<double>(rep.bytes.state_d2h)}};
        if (moe) { // unscaled; coef x each joins "loss" only where it is on (docs/moe.md)
            rec.emplace_back("router_balance", balance);
            rec.emplace_back("router_z", router_z);
        }
        metrics.write("step", rec);
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
            saved_step = s.step;
            log.info("checkpoint: %s", last_ckpt.c_str());
        }
        // A stop during the last step counts too: the checkpoint of the last step is written
        // already, the final evaluation is skipped and the run exits 75 (the scheduler's time
        // limit came; a resume finds the run complete).
        if (s.step == s.cfg.debug.hold_for_stop && s.stop_check) {
            sum.stopped = s.hold_for_stop(sum);
            break;
        }
        if (stop_agreed(s.stop_check, s.world, &sum.stop_signal)) {
            sum.stopped = true;
            break;
        }
    }
    if (sum.stopped) return s.finish_stopped(sum, metrics, saved_step, last_ckpt, false);
    sum.end_step = s.step;
    sum.last_val_loss = s.evaluate();
    // a stop during the final evaluation: the result is printed, the run still reports the stop
    // (exit 75) so that a wrapper script does not take it for a finished, undisturbed run
    if (stop_agreed(s.stop_check, s.world, &sum.stop_signal)) {
        sum.stopped = true;
        log.info("step %lld: val loss %.4f", static_cast<long long>(s.step), sum.last_val_loss);
        return s.finish_stopped(sum, metrics, saved_step, last_ckpt, true);
    }
    sum.tokens_per_s = total_time > 0 ? total_tokens / total_time : 0.0;
    const offload::UpdaterStats& fin = s.updater->stats();
    sum.skips = (s.skips0 + fin.skips);
    sum.rollbacks = (s.rollbacks0 + fin.rollbacks);
    sum.commits = sum.end_step - sum.skips; // every completed step is a commit or a skip
    const int64_t steps_run = sum.end_step - sum.start_step;
    sum.all_skipped = steps_run > 0 && fin.skips >= steps_run;
    sum.bytes = fin.bytes;
    sum.last_checkpoint = last_ckpt;
    sum.device_peak = s.ctx->device().peak();
    sum.device_used = s.ctx->device().used();
    if (s.world.size() > 1)
        log.all("rank %d: device memory peak %s (%s in use), comm lane busy %.1f ms, main thread "
                "waited %.1f ms on it (%.0f%% of collective time hidden behind compute)",
                s.world.rank(), device::format_bytes(static_cast<double>(sum.device_peak)).c_str(),
                device::format_bytes(static_cast<double>(sum.device_used)).c_str(), sum.comm_ms,
                sum.comm_wait_ms,
                sum.comm_ms > 0 ? 100.0 * (1.0 - std::min(1.0, sum.comm_wait_ms / sum.comm_ms))
                                : 100.0);
    log.info("step %lld: val loss %.4f", static_cast<long long>(s.step), sum.last_val_loss);
    log.info("done: val loss %.4f -> %.4f over steps %lld..%lld, %.0f tok/s, commits %lld, "
             "skips %lld, rollbacks %lld (link: %s D2H, %s H2D)",
             sum.first_val_loss, sum.last_val_loss, static_cast<long long>(sum.start_step),
             static_cast<long long>(sum.end_step), sum.tokens_per_s,
             static_cast<long long>(sum.commits), static_cast<long long>(sum.skips),
             static_cast<long long>(sum.rollbacks),
             device::format_bytes(static_cast<double>(fin.bytes.d2h())).c_str(),
             device::format_bytes(static_cast<double>(fin.bytes.h2d())).c_str());
    metrics.write("summary", {{"first_val_loss", sum.first_val_loss},
                              {"last_val_loss", sum.last_val_loss},
                              {"steps", static_cast<double>(sum.end_step)},
                              {"tokens_per_s", sum.tokens_per_s}});
    if (s.trace) s.write_trace();
    metrics.close();
    if (sum.all_skipped)
        log.warn("every one of the %lld steps of this run was skipped (the loss or the gradients "
                 "were not finite: val loss %.4f): nothing was trained",
                 static_cast<long long>(steps_run), sum.first_val_loss);
    return sum;
}

} // namespace sof::train
