// `superoffload bench import --create DIR [--params-scale S]` writes a ~1B-parameter LLaMA as a
// bf16 Hugging Face directory; `bench import DIR [--rounds N]` times its import (O_DIRECT and
// buffered) against reading the same files dd-like, each from a dropped page cache.
#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "ckpt/hf.h"
#include "cli.h"
#include "commands.h"
#include "core/error.h"
#include "model/model.h"

namespace sof::app {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) {
    return std::chrono::duration<double>(Clock::now() - t).count();
}

double max_rss_gb() {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return static_cast<double>(ru.ru_maxrss) * 1024.0 / 1e9; // ru_maxrss is in KiB on Linux
}

// Asks the kernel to drop clean page-cache pages (root only); false when not allowed.
bool drop_caches() {
    ::sync();
    const int fd = ::open("/proc/sys/vm/drop_caches", O_WRONLY);
    if (fd < 0) return false;
    const bool ok = ::write(fd, "3\n", 2) == 2;
    ::close(fd);
    return ok;
}

// Reads every .safetensors file of dir in 16 MiB blocks (what `dd bs=16M of=/dev/null` does).
double read_files(const std::string& dir, uint64_t* bytes) {
    std::vector<char> buf(16u << 20);
    *bytes = 0;
    const Clock::time_point t = Clock::now();
    for (const auto& e : std::filesystem::directory_iterator(dir)) {
        if (e.path().extension() != ".safetensors") continue;
        const int fd = ::open(e.path().c_str(), O_RDONLY);
        if (fd < 0) SOF_FAIL(Io, "cannot open '%s'", e.path().c_str());
        ssize_t n;
        while ((n = ::read(fd, buf.data(), buf.size())) > 0)
            *bytes += static_cast<uint64_t>(n);
        ::close(fd);
    }
    return seconds_since(t);
}

} // namespace

int cmd_bench_import(int argc, char** argv) {
    const char* usage = "usage: superoffload bench import --create DIR | DIR [--rounds N]";
    CliParser p({usage, "bench import: unknown option '%s'",
                 [](const std::string& opt) { return "bench import: " + opt + " needs a value"; }});
    std::string create, rounds_s;
    p.option("--create", &create);
    p.option("--rounds", &rounds_s);
    // argv[0] is "import"
    const std::vector<std::string> dirs = p.parse(argc - 1, argv + 1);
    if (p.count("--create")) {
        if (!dirs.empty() || p.count("--rounds"))
            p.fail("bench import: --create DIR writes a model and takes nothing else");
        model::ArchConfig c; // ~1.0B parameters: Llama-style, 18 layers of C=2048, GQA 16/8
        c.arch = model::Arch::Llama;
        model::apply_arch_defaults(&c);
        c.channels = 2048;
        c.num_layers = 18;
        c.num_heads = 16;
        c.num_kv_heads = 8;
        c.intermediate_size = 5632;
        c.vocab_size = c.padded_vocab_size = 32000;
        c.max_seq_len = 4096;
        c.tie_embeddings = false;
        const model::ParamLayout l = model::make_layout(c);
        std::vector<float> w(l.num_params);
        model::init_params(l, w.data(), 0.02f, 1);
        ckpt::export_hf(create, l, w.data(), ckpt::HfExportOptions{});
        std::printf("bench import: wrote %s (%zu params, bf16)\n", create.c_str(), l.num_params);
        return 0;
    }
    if (dirs.size() != 1)
        p.fail(dirs.empty()
                   ? std::string("bench import: give --create DIR or one DIR to import")
                   : "bench import: one DIR only, got '" + dirs[0] + "' and '" + dirs[1] + "'");
    int rounds = 3;
    if (p.count("--rounds")) {
        char* end = nullptr;
        const long n = std::strtol(rounds_s.c_str(), &end, 10);
        if (rounds_s.empty() || *end || n < 1 || n > 1000)
            p.fail("bench import: --rounds '" + rounds_s + "' must be an integer in [1, 1000]");
        rounds = static_cast<int>(n);
    }
    const std::string dir = dirs[0];
    const model::ArchConfig c = ckpt::read_hf_config(dir);
    const model::ParamLayout l = model::make_layout(c);
    const zero::ShardMap whole = zero::make_shard_map(l, 1, 0);
    const double rss0 = max_rss_gb();
    Clock::time_point t = Clock::now();
    std::vector<float> master(l.num_params); // the fp32 master weights the import creates
    const double t_alloc = seconds_since(t); // first touch of the fp32 buffer (page faults)
    bool dropped = true;
    uint64_t bytes = 0;
    bool direct = false;
    std::vector<double> r_read, r_direct, r_buffered, r_cached;
    std::printf("bench import: %s, %zu params; each pass but the last starts from a dropped page "
                "cache\n"
                "  round  read(dd-like) s  GB/s   import O_DIRECT s  x read   import buffered s  "
                "x read  cached file s\n",
                dir.c_str(), l.num_params);
    for (int round = 0; round < rounds; round++) {
        dropped = drop_caches() && dropped;
        const double tr = read_files(dir, &bytes);
        dropped = drop_caches() && dropped;
        ckpt::ReadOptions o_direct;
        o_direct.direct_io = true;
        t = Clock::now();
        direct = ckpt::import_hf(dir, l, whole, master.data(), o_direct).direct_used;
        const double td = seconds_since(t);
        dropped = drop_caches() && dropped;
        ckpt::ReadOptions buffered; // the default
        buffered.direct_io = false;
        t = Clock::now();
        ckpt::import_hf(dir, l, whole, master.data(), buffered);
        const double tb = seconds_since(t);
        // the CPU side alone: the files are in the page cache (read_files leaves them there)
        read_files(dir, &bytes);
        ckpt::ReadOptions keep = buffered;
        keep.drop_pages = false;
        t = Clock::now();
        ckpt::import_hf(dir, l, whole, master.data(), keep);
        const double tc = seconds_since(t);
        const double gb = static_cast<double>(bytes) / 1e9;
        std::printf("  %5d  %15.3f  %5.2f  %17.3f  %6.2f  %17.3f  %6.2f  %13.3f\n", round, tr,
                    gb / tr, td, td / tr, tb, tb / tr, tc);
        r_read.push_back(tr);
        r_direct.push_back(td / tr);
        r_buffered.push_back(tb / tr);
        r_cached.push_back(tc);
    }
    auto median = [](std::vector<double> v) {
        std::sort(v.begin(), v.end());
        return v[v.size() / 2];
    };
    const double rss = max_rss_gb();
    const double gb = static_cast<double>(bytes) / 1e9;
    const double master_gb = 4.0 * static_cast<double>(l.num_params) / 1e9;
    std::printf("  %.3f GB of safetensors; page cache %s; O_DIRECT %s\n"
                "  median import / read: O_DIRECT %.2fx, buffered (default) %.2fx (read %.2f "
                "GB/s)\n"
                "  median import from the page cache (the CPU side alone): %.3f s, %.2f GB/s\n"
                "  allocating the master buffer took %.3f s (not in the import times)\n"
                "  peak RSS %.3f GB (%.3f GB before): %.3f x the fp32 master weights (%.3f GB), "
                "%.3f x master + Adam moments (%.3f GB)\n",
                gb, dropped ? "dropped before each timed pass" : "NOT dropped (not root?)",
                direct ? "used" : "refused by the filesystem (buffered reads)", median(r_direct),
                median(r_buffered), gb / median(r_read), median(r_cached), gb / median(r_cached),
                t_alloc, rss, rss0, rss / master_gb, master_gb, rss / (3 * master_gb),
                3 * master_gb);
    return 0;
}

} // namespace sof::app
