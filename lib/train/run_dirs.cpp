// Claiming a run's directories (see run_dirs.h): flock-based DirLocks from core, cleanup of
// .tmp-*/.old-* checkpoint leftovers from ckpt.
#include "train/run_dirs.h"

#include <filesystem>
#include <system_error>

#include "ckpt/checkpoint.h"
#include "core/error.h"

namespace sof::train {

namespace fs = std::filesystem;

RunDirs claim_run_dirs(const config::Config& cfg, int rank, const core::Log& log) {
    RunDirs out;
    std::vector<std::pair<std::string, std::string>> dirs; // (role, path)
    if (!cfg.runtime.out_dir.empty()) dirs.emplace_back("runtime.out_dir", cfg.runtime.out_dir);
    if (!cfg.train.checkpoint_dir.empty())
        dirs.emplace_back("train.checkpoint_dir", cfg.train.checkpoint_dir);
    std::vector<fs::path> seen;
    for (const auto& [role, path] : dirs) {
        std::error_code ec;
        fs::create_directories(path, ec); // errors are reported by DirLock (rank 0)
        if (rank != 0) continue;
        fs::path canon = fs::weakly_canonical(path, ec);
        bool dup = false;
        for (const fs::path& p : seen)
            dup = dup || (!ec && p == canon);
        if (dup) continue; // the same directory under another name: its lock is held already
        out.locks.emplace_back(path, role);
        if (!ec) seen.push_back(canon);
    }
    if (rank == 0 && !cfg.train.checkpoint_dir.empty())
        for (const std::string& what : ckpt::clean_interrupted(cfg.train.checkpoint_dir))
            log.info("checkpoint: %s", what.c_str());
    return out;
}

} // namespace sof::train
