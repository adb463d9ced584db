// Early stop of a run on request (SIGTERM/SIGINT/SIGUSR1 from a scheduler): the app owns the
// signal flag and hands the trainer a StopCheck; the trainer asks it once per step, all ranks
// agree.
#pragma once

#include <functional>
#include <string>

#include "comm/world.h"

namespace sof::train {

// Returns the signal number that asked this rank to stop, or 0. Must be cheap and must not block:
// called once per step (the app's version reads a volatile sig_atomic_t set by its handler).
using StopCheck = std::function<int()>;

// True when any rank's check asks to stop; *signal gets this rank's signal number (0 when only
// other ranks were asked). An empty check never stops and costs no communication.
// collective: all ranks of world (when check is set)
bool stop_agreed(const StopCheck& check, const comm::World& world, int* signal);

// "SIGTERM", "SIGUSR1", ... ("signal N" for others; "another rank's signal" for 0).
std::string signal_name(int sig);

} // namespace sof::train
