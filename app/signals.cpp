// Stop-signal handlers (see signals.h). The handler only stores the signal number in a volatile
// sig_atomic_t (the program's one piece of signal state) and writes a note with write(2); the
// trainer polls it once per step. A second signal restores the default action and re-raises it.
#include "signals.h"

#include <unistd.h>

#include <csignal>
#include <cstring>
#include <initializer_list>

namespace sof::app {

namespace {

volatile std::sig_atomic_t g_stop_signal = 0; // 0 or the first stop signal's number

void say(const char* msg) {
    ssize_t r = ::write(STDERR_FILENO, msg, std::strlen(msg)); // async-signal-safe
    (void)r;
}

extern "C" void on_stop_signal(int sig) {
    if (g_stop_signal != 0) {
        say("superoffload: second stop signal: exiting now without a checkpoint\n");
        std::signal(sig, SIG_DFL);
        std::raise(sig); // delivered when this handler returns (the signal is blocked in it)
        return;
    }
    g_stop_signal = sig;
    say("superoffload: stop signal received: finishing the current step, then checkpoint and exit "
        "(send it again to exit at once)\n");
}

} // namespace

void install_stop_handlers() {
    struct sigaction sa;
    std::memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_stop_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART; // file I/O in progress continues; the flag is read between steps
    for (int sig : {SIGTERM, SIGINT, SIGUSR1})
        sigaction(sig, &sa, nullptr);
}

int stop_signal_received() {
    return static_cast<int>(g_stop_signal);
}

} // namespace sof::app
