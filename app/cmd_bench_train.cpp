// `superoffload bench train DECK [--steps N] [--hardware FILE] [--variants LIST] [--set k=v ...]`:
// the deck's training step measured up to three ways in one run: as the deck says (offload), with
// the CPU step fully exposed (schedule synchronous, no speculation), and with no offload (every
// bucket's state on the device): tokens/s, model TFLOPS, MFU against the hardware profile's peak,
// the time split (forward/backward: device time between timing events on the compute stream), the
// share of the CPU optimizer's time hidden behind compute, and offload / no-offload.
#include <mpi.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "comm/world.h"
#include "cli.h"
#include "commands.h"
#include "config/deck.h"
#include "core/error.h"
#include "core/log.h"
#include "core/strfmt.h"
#include "model/model.h"
#include "plan/planner.h"
#include "train/trainer.h"

namespace sof::app {

namespace {

struct Variant {
    const char* key; // --variants name
    const char* name;
    std::vector<std::string> overrides;
};

struct Measured {
    std::string key, name;
    train::StepTimes median; // over the steps after the warm-up
    double tokens_per_s = 0, tflops = 0, mfu = 0;
    float first_loss = 0, last_loss = 0;
};

double median_of(std::vector<double> v) {
    if (v.empty()) return 0.0;
    std::sort(v.begin(), v.end());
    const size_t n = v.size();
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

} // namespace

int cmd_bench_train(int argc, char** argv) {
    // argv[0] is "train"
    DeckArgs args =
        parse_deck_args(argc - 1, argv + 1, "bench train", {"steps", "hardware", "variants"});
    int steps = 8;
    if (args.options.count("steps")) {
        steps = std::atoi(args.options["steps"].c_str());
        if (steps < 3)
            SOF_FAIL(Usage, "bench train: --steps %s: need at least 3 (the first two are warm-up)",
                     args.options["steps"].c_str());
    }
    comm::World world(MPI_COMM_WORLD);
    core::Log log(world.rank(), core::LogLevel::Info);
    core::Log quiet(world.rank(), core::LogLevel::Quiet);

    std::vector<std::string> common = args.overrides;
    for (const char* o : {"runtime.log_level=quiet", "train.eval_every=0", "train.eval_batches=1",
                          "train.checkpoint_dir=", "train.checkpoint_every=0",
                          "train.resume=", "runtime.trace=", "train.log_every=0"})
        common.push_back(o);
    common.push_back(core::strfmt("train.steps=%d", steps));
    // --hardware is the machine measured: the planner's `auto` choices are made for it too
    if (args.options.count("hardware"))
        common.push_back("offload.hardware=" + args.options["hardware"]);
    const std::vector<Variant> all = {
        {"deck", "offload (deck)", {"offload.enabled=true"}},
        {"exposed",
         "offload, CPU step exposed",
         {"offload.enabled=true", "offload.schedule=synchronous", "offload.stv=false"}},
        {"no-offload",
         "no offload (state on device)",
         {"offload.enabled=true", "offload.gpu_tail_buckets=1000000000", "offload.stv=false",
          "offload.weights=stationary"}},
    };
    // --variants deck,exposed,no-offload (default: all three; a model whose training state does
    // not fit the device runs `deck` alone)
    std::vector<Variant> variants = all;
    if (args.options.count("variants")) {
        std::vector<std::string> asked;
        const std::string list = args.options["variants"] + ",";
        for (size_t p = 0, q; (q = list.find(',', p)) != std::string::npos; p = q + 1)
            asked.push_back(list.substr(p, q - p));
        for (const std::string& k : asked)
            if (std::none_of(all.begin(), all.end(), [&](const Variant& v) { return k == v.key; }))
                SOF_FAIL(Usage,
                         "bench train: --variants %s: unknown variant '%s' (a comma list of deck, "
                         "exposed, no-offload)",
                         args.options["variants"].c_str(), k.c_str());
        variants.clear(); // in the order of `all`, each once
        for (const Variant& v : all)
            if (std::find(asked.begin(), asked.end(), v.key) != asked.end()) variants.push_back(v);
    }

    std::vector<Measured> out;
    for (const Variant& v : variants) {
        std::vector<std::string> ov = common;
        ov.insert(ov.end(), v.overrides.begin(), v.overrides.end());
        config::Config cfg = config::load_deck(args.deck, ov);
        const plan::HardwareProfile hw = plan::hardware_for(cfg);
        train::Trainer t(cfg, world, quiet);
        train::RunSummary sum = t.run();
        const model::ArchConfig& arch = t.model_config();
        Measured m;
        m.key = v.key;
        m.name = v.name;
        std::vector<double> ms, fwd, bwd, opt, xfer;
        for (size_t i = 2; i < sum.step_times.size(); i++) {
            ms.push_back(sum.step_times[i].ms);
            fwd.push_back(sum.step_times[i].forward_ms);
            bwd.push_back(sum.step_times[i].backward_ms);
            opt.push_back(sum.step_times[i].exposed_optimizer_ms);
            xfer.push_back(sum.step_times[i].exposed_transfer_ms);
        }
        m.median = {median_of(ms), median_of(fwd), median_of(bwd), median_of(opt), median_of(xfer)};
        const double tokens = static_cast<double>(cfg.train.batch_size) * cfg.train.seq_len *
                              cfg.train.grad_accum * (world.size() / std::max(1, cfg.parallel.sp));
        const double flops = model::flops_per_token(arch, cfg.train.seq_len) * tokens;
        m.tokens_per_s = tokens / (m.median.ms / 1e3);
        m.tflops = flops / (m.median.ms / 1e3) / 1e12 / world.size();
        m.mfu = hw.gpu_peak_tflops > 0 ? m.tflops / hw.gpu_peak_tflops : 0.0;
        m.first_loss = sum.train_losses.empty() ? 0.0f : sum.train_losses.front();
        m.last_loss = sum.train_losses.empty() ? 0.0f : sum.train_losses.back();
        out.push_back(m);
        if (out.size() == 1)
            log.info("bench train %s: %s, %d steps (medians of steps 3..%d), %d rank(s), "
                     "hardware profile %s (peak %.1f TFLOPS)",
                     args.deck.c_str(), model::arch_name(arch.arch), steps, steps, world.size(),
                     hw.name.c_str(), hw.gpu_peak_tflops);
        if (out.size() == 1 && hw.host_device && cfg.device.type == config::DeviceType::Cuda)
            log.info("bench train: MFU is against the host profile's peak: give the GPU's "
                     "profile with --hardware (e.g. inputs/hardware/h100-sxm.yaml) or "
                     "offload.hardware");
    }
    log.info("%-30s %9s %10s %8s %6s | %8s %8s %8s %8s | %s", "variant", "ms/step", "tokens/s",
             "TFLOPS", "MFU", "fwd", "bwd", "opt exp", "xfer exp", "loss first -> last");
    for (const Measured& m : out)
        log.info("%-30s %9.2f %10.0f %8.4f %5.1f%% | %8.2f %8.2f %8.2f %8.2f | %.4f -> %.4f",
                 m.name.c_str(), m.median.ms, m.tokens_per_s, m.tflops, 100.0 * m.mfu,
                 m.median.forward_ms, m.median.backward_ms, m.median.exposed_optimizer_ms,
                 m.median.exposed_transfer_ms, m.first_loss, m.last_loss);
    auto find = [&](const char* key) -> const Measured* {
        for (const Measured& m : out)
            if (m.key == key) return &m;
        return nullptr;
    };
    const Measured *deck = find("deck"), *exp = find("exposed"), *none = find("no-offload");
    if (deck && exp) {
        const double exposed = exp->median.exposed_optimizer_ms;
        const double hidden = exposed > 0 ? 1.0 - deck->median.exposed_optimizer_ms / exposed : 1.0;
        log.info("CPU optimizer time hidden behind compute: %.1f%% (exposed %.2f ms of %.2f ms "
                 "when nothing overlaps)",
                 100.0 * std::clamp(hidden, 0.0, 1.0), deck->median.exposed_optimizer_ms, exposed);
    }
    if (deck && none)
        log.info("offload / no offload iteration time: %.3fx", deck->median.ms / none->median.ms);
    return 0;
}

} // namespace sof::app
