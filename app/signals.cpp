// Stop-signal handlers (see signals.h). The handler only stores the signal number in a lock-free
// atomic (the program's one piece of signal state) and writes a note with write(2); the trainer
// polls it once per step. A second signal restores the default action and re-raises it.
#include "signals.h"

#include <unistd.h>

#include <atomic>
#include <csignal>
#include <cstring>
#include <initializer_list>

namespace sof::app {

namespace {

// 0 or the first stop signal's number. A lock-free atomic (async-signal-safe): two signals that
// arrive together may run the handler on two threads at once, and exactly one of them must win.
std::atomic<int> g_stop_signal{0};
static_assert(std::atomic<int>::is_always_lock_free, "the stop flag must be lock-free");

void say(const char* msg) {
    ssize_t r = ::write(STDERR_FILENO, msg, std::strlen(msg)); // async-signal-safe
    (void)r;
}

extern "C" void on_stop_signal(int sig) {
    int none = 0;
    if (!g_stop_signal.compare_exchange_strong(none, sig)) {
        say("superoffload: second stop signal: exiting now without a checkpoint\n");
        std::signal(sig, SIG_DFL);
        std::raise(sig); // delivered when this handler returns (the signal is blocked in it)
        return;
    }
    say("superoffload: stop signal received: finishing the current step, then checkpoint and exit "
        "(send it again to exit at once)\n");
}

} // namespace

void install_stop_handlers() {
    struct sigaction sa;
    std::memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_stop_signal;
    // every stop signal is blocked while the handler runs: two signals that arrive together
    // (pending while the process was stopped) run the handler one after the other, so the
    // second one sees the first's flag instead of interrupting the handler before it is set
    sigemptyset(&sa.sa_mask);
    for (int sig : {SIGTERM, SIGINT, SIGUSR1})
        sigaddset(&sa.sa_mask, sig);
    sa.sa_flags = SA_RESTART; // file I/O in progress continues; the flag is read between steps
    for (int sig : {SIGTERM, SIGINT, SIGUSR1})
        sigaction(sig, &sa, nullptr);
}

int stop_signal_received() {
    return g_stop_signal.load();
}

} // namespace sof::app
