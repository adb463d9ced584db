// `superoffload bench import --create DIR [--params-scale S]` writes a ~1B-parameter LLaMA as a
// bf16 Hugging Face directory; `bench import DIR` times its import against reading the files
// (dd-like).
#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "ckpt/hf.h"
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
    const char* usage = "usage: superoffload bench import --create DIR | DIR";
    if (argc == 3 && std::strcmp(argv[1], "--create") == 0) {
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
        std::vector<float> p(l.num_params);
        model::init_params(l, p.data(), 0.02f, 1);
        ckpt::export_hf(argv[2], l, p.data(), ckpt::HfExportOptions{});
        std::printf("bench import: wrote %s (%zu params, bf16)\n", argv[2], l.num_params);
        return 0;
    }
    if (argc != 2) SOF_FAIL(Usage, "%s", usage);
    const std::string dir = argv[1];
    const model::ArchConfig c = ckpt::read_hf_config(dir);
    const model::ParamLayout l = model::make_layout(c);
    const bool dropped = drop_caches();
    uint64_t bytes = 0;
    const double t_read = read_files(dir, &bytes);
    drop_caches();
    const double rss0 = max_rss_gb();
    Clock::time_point t = Clock::now();
    std::vector<float> master(l.num_params); // the fp32 master weights the import creates
    const double t_alloc = seconds_since(t); // first touch of the fp32 buffer (page faults)
    t = Clock::now();
    ckpt::import_hf(dir, l, model::make_shard_map(l, 1, 0), master.data());
    const double t_imp = seconds_since(t);
    const double rss = max_rss_gb();
    const double gb = static_cast<double>(bytes) / 1e9;
    const double master_gb = 4.0 * static_cast<double>(l.num_params) / 1e9;
    std::printf("bench import: %s, %zu params, %.3f GB of safetensors, page cache %s\n"
                "  read (16 MiB blocks, like dd)  %.3f s  %.2f GB/s\n"
                "  import -> fp32 master          %.3f s  %.2f GB/s of files  (%.2fx the read; "
                "allocating the master buffer took %.3f s more)\n"
                "  peak RSS %.3f GB (%.3f GB before): %.3f x the fp32 master weights (%.3f GB), "
                "%.3f x master + Adam moments (%.3f GB)\n",
                dir.c_str(), l.num_params, gb, dropped ? "dropped before each pass" : "NOT dropped",
                t_read, gb / t_read, t_imp, gb / t_imp, t_imp / t_read, t_alloc, rss, rss0,
                rss / master_gb, master_gb, rss / (3 * master_gb), 3 * master_gb);
    return 0;
}

} // namespace sof::app
