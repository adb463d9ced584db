// Stop agreement across ranks (see stop.h): one MPI_Allreduce (World::any) per step, so every rank
// leaves the loop after the same step and no rank waits in a collective that others skipped.
#include "train/stop.h"

#include <csignal>

#include "core/strfmt.h"

namespace sof::train {

bool stop_agreed(const StopCheck& check, const comm::World& world, int* signal) {
    *signal = 0;
    if (!check) return false;
    *signal = check();
    return world.any(*signal != 0);
}

std::string signal_name(int sig) {
    switch (sig) {
    case 0:
        return "another rank's signal";
    case SIGTERM:
        return "SIGTERM";
    case SIGINT:
        return "SIGINT";
    case SIGUSR1:
        return "SIGUSR1";
    case SIGUSR2:
        return "SIGUSR2";
    case SIGHUP:
        return "SIGHUP";
    }
    return core::strfmt("signal %d", sig);
}

} // namespace sof::train
