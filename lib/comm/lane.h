// A communication lane: one thread that runs collectives in submission order, so collectives can
// overlap compute while every rank still issues them in the same order (MPI_THREAD_MULTIPLE).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <utility>

#include "core/trace.h"

namespace sof::comm {

class Lane {
  public:
    // trace (may be null) gets one lane `name` with a span per job (named by submit's `what`).
    explicit Lane(std::string name, core::Trace* trace = nullptr);
    ~Lane(); // runs what is queued, joins; errors of unwaited jobs are dropped
    Lane(const Lane&) = delete;
    Lane& operator=(const Lane&) = delete;

    // Queues a job; returns its ticket (1, 2, ...).
    uint64_t submit(std::function<void()> job, std::string what = "collective");
    // Blocks until the job of `ticket` (and every earlier one) has run; rethrows the first error
    // of a job that ran (the lane stops running jobs after an error).
    void wait(uint64_t ticket);
    bool done(uint64_t ticket); // non-blocking
    void drain();               // wait(last ticket)
    const std::string& name() const { return name_; }
    // Time spent running jobs, and time callers spent blocked in wait(), since construction.
    double busy_ms();
    double waited_ms();

  private:
    void run();
    std::string name_;
    std::mutex mu_;
    std::condition_variable cv_, done_cv_;
    std::deque<std::pair<std::function<void()>, std::string>> queue_;
    core::Trace* trace_ = nullptr;
    int trace_lane_ = 0;
    uint64_t submitted_ = 0, finished_ = 0;
    double busy_ms_ = 0.0, waited_ms_ = 0.0;
    bool stop_ = false;
    std::exception_ptr error_;
    std::thread thread_;
};

} // namespace sof::comm
