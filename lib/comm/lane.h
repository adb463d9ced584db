// A communication lane: one thread that runs collectives in submission order, so collectives can
// overlap compute while every rank still issues them in the same order (MPI_THREAD_MULTIPLE).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <utility>

#include "core/job_queue.h"
#include "core/trace.h"

namespace sof::comm {

class Lane {
  public:
    // trace (may be null) gets one lane `name` with a span per job (named by submit's `what`).
    explicit Lane(std::string name, core::Trace* trace = nullptr)
        : name_(std::move(name)), queue_(core::JobQueue::OnError::SkipRest, trace, name_, "comm") {}
    // ~Lane runs what is queued, joins; errors of unwaited jobs are dropped
    Lane(const Lane&) = delete;
    Lane& operator=(const Lane&) = delete;

    // Queues a job; returns its ticket (1, 2, ...).
    uint64_t submit(std::function<void()> job, std::string what = "collective") {
        return queue_.submit(std::move(job), std::move(what));
    }
    // Blocks until the job of `ticket` (and every earlier one) has run; rethrows the first error
    // of a job that ran (the lane stops running jobs after an error: a collective after a failed
    // one would hang the other ranks).
    void wait(uint64_t ticket) { queue_.wait(ticket); }
    bool done(uint64_t ticket) { return queue_.done(ticket); } // non-blocking
    void drain() { queue_.drain(); }                           // wait(last ticket)
    const std::string& name() const { return name_; }
    // Time spent running jobs, and time callers spent blocked in wait(), since construction.
    double busy_ms() { return queue_.busy_ms(); }
    double waited_ms() { return queue_.waited_ms(); }

  private:
    std::string name_;
    core::JobQueue queue_;
};

} // namespace sof::comm
