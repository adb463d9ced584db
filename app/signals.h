// Stop signals for `train` (SIGTERM, SIGINT, SIGUSR1: what Slurm and a user's Ctrl-C send): the
// first asks the run to stop after the current step with a checkpoint; a second ends it at once.
#pragma once

namespace sof::app {

// Exit code of a run that stopped early on a signal after finishing a step (and writing a
// checkpoint when train.checkpoint_dir is set): EX_TEMPFAIL, "try again" (resume: auto).
constexpr int kExitStopped = 75;

// Installs the handlers. The only state is one volatile sig_atomic_t in signals.cpp.
void install_stop_handlers();

// The first stop signal received (its number), or 0.
int stop_signal_received();

} // namespace sof::app
