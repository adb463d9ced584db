// The directories a training run writes, claimed before any work: an advisory lock on
// runtime.out_dir and train.checkpoint_dir (one run per directory), leftovers of killed saves
// cleaned once the checkpoint directory is ours.
#pragma once

#include <vector>

#include "config/config.h"
#include "core/lockfile.h"
#include "core/log.h"

namespace sof::train {

struct RunDirs {
    std::vector<core::DirLock> locks; // held for the whole run (rank 0)
};

// Creates and locks out_dir and checkpoint_dir (rank 0; one lock when they are the same
// directory), then removes interrupted saves in checkpoint_dir (logging each). Throws Error(Io)
// naming the directory and the holder's pid and host when another run holds a lock.
RunDirs claim_run_dirs(const config::Config& cfg, int rank, const core::Log& log);

} // namespace sof::train
