// Engine driver (not a test): trains a GPT-2 of a given size on random tokens for a few steps with
// the plain path or the engine and prints per-step times; --trace writes a Chrome trace for
// scripts/plot_trace.py. Example: engine_driver --layers 4 --channels 256 --trace t.json
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/timer.h"
#include "core/trace.h"
#include "model/transformer.h"
#include "offload/updater_factory.h"

using namespace sof;

int main(int argc, char** argv) {
    config::Config c;
    c.optimizer.plugin_dir = SOF_PLUGIN_DIR;
    c.device.type = config::DeviceType::Host;
    c.offload.enabled = true;
    c.offload.bucket_mb = 4.0;
    c.offload.gpu_tail_buckets = 1;
    model::ArchConfig g;
    g.num_layers = 4, g.channels = 256, g.num_heads = 4, g.vocab_size = 8192;
    g.padded_vocab_size = 8192, g.max_seq_len = 128;
    int B = 4, T = 64, steps = 6;
    std::string trace_path;
    for (int i = 1; i < argc; i++) {
        std::string a = argv[i];
        auto next = [&]() -> const char* {
            if (i + 1 >= argc) {
                std::fprintf(stderr, "%s needs a value\n", a.c_str());
                std::exit(2);
            }
            return argv[++i];
        };
        if (a == "--layers")
            g.num_layers = std::atoi(next());
        else if (a == "--channels")
            g.channels = std::atoi(next());
        else if (a == "--batch")
            B = std::atoi(next());
        else if (a == "--seq")
            T = std::atoi(next());
        else if (a == "--steps")
            steps = std::atoi(next());
        else if (a == "--bucket-mb")
            c.offload.bucket_mb = std::atof(next());
        else if (a == "--tail")
            c.offload.gpu_tail_buckets = std::atoi(next());
        else if (a == "--threads")
            c.optimizer.threads = std::atoi(next());
        else if (a == "--plain")
            c.offload.enabled = false;
        else if (a == "--sync")
            c.offload.schedule = config::Schedule::Synchronous;
        else if (a == "--flow")
            c.offload.weights = config::WeightsPolicy::Flow;
        else if (a == "--bf16")
            c.train.dtype = config::Precision::BF16;
        else if (a == "--clip")
            c.train.grad_clip = static_cast<float>(std::atof(next()));
        else if (a == "--trace")
            trace_path = next();
        else {
            std::fprintf(stderr, "unknown option %s\n", a.c_str());
            return 2;
        }
    }
    try {
        model::Transformer net(g, model::ModelOptions{}, B, T);
        const model::ParamLayout& l = net.layout();
        core::Trace trace;
        core::Log log(0, core::LogLevel::Info);
        auto u = offload::make_updater(c, l, log, trace_path.empty() ? nullptr : &trace);
        std::vector<float> p(l.num_params), z(l.num_params, 0.0f);
        model::init_params(l, p.data(), 0.02f, 1);
        u->set_state(p.data(), z.data(), z.data(), 0);
        std::vector<int> in(static_cast<size_t>(B) * T), tg(in.size());
        double total = 0;
        for (int s = 0; s < steps; s++) {
            for (size_t i = 0; i < in.size(); i++) {
                in[i] = static_cast<int>((i * 2654435761u + s * 97u) % g.vocab_size);
                tg[i] = static_cast<int>((i * 40503u + s * 31u + 7) % g.vocab_size);
            }
            core::Timer t;
            offload::StepHparams hp;
            hp.step = s;
            hp.lr = 1e-3f;
            hp.grad_clip = c.train.grad_clip;
            u->begin_step(hp);
            float loss = net.forward(u->weights(), in.data(), tg.data(), B, T);
            double fwd = t.ms();
            u->begin_micro(0, true);
            net.backward(u->weights(), u->grads(), 1.0f / (B * T));
            double bwd = t.ms() - fwd;
            offload::StepReport r = u->finish_step();
            double ms = t.ms();
            if (s > 0) total += ms;
            std::printf("step %d loss %.4f norm %.3f%s | %.1f ms (fwd %.1f bwd %.1f finish %.1f: "
                        "exposed opt %.1f xfer %.1f)\n",
                        s, loss, r.grad_norm, r.clipped ? " clipped" : "", ms, fwd, bwd,
                        ms - fwd - bwd, r.exposed_optimizer_ms, r.exposed_transfer_ms);
        }
        std::printf("params %zu, mean step %.1f ms (steps 1..%d), rollbacks %lld\n", l.num_params,
                    steps > 1 ? total / (steps - 1) : 0.0, steps - 1,
                    static_cast<long long>(u->stats().rollbacks));
        if (!trace_path.empty()) trace.write(trace_path);
    } catch (const core::Error& e) {
        std::fprintf(stderr, "error: %s\n", e.what());
        return 1;
    }
    return 0;
}
