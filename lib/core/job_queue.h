// A serial job queue: one thread runs jobs in submission order, callers wait on tickets. The one
// implementation behind the host device's streams, the engine's CPU optimizer worker and the comm
// lane; they differ only in what a failed job means for the jobs after it (OnError).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

#include "core/trace.h"

namespace sof::core {

class JobQueue {
  public:
    enum class OnError {
        // Later jobs still run; the first error is kept until a wait/drain/rethrow takes it
        // (device streams, the optimizer worker: the caller decides what the failure means).
        Continue,
        // Later jobs are skipped and every wait rethrows the error from then on (the comm lane:
        // a collective after a failed one would hang the other ranks).
        SkipRest,
    };
    // trace (may be null): one span per labelled job on lane `lane`, category `category`.
    explicit JobQueue(OnError on_error, Trace* trace = nullptr, std::string lane = "",
                      const char* category = "");
    ~JobQueue(); // runs what is queued, joins; errors nobody waited for are dropped
    JobQueue(const JobQueue&) = delete;
    JobQueue& operator=(const JobQueue&) = delete;

    // Queues a job; returns its ticket (1, 2, ...). A non-empty label traces the job's span.
    uint64_t submit(std::function<void()> job, std::string label = "");
    // Blocks until the job of `ticket` (and every earlier one) has run, then rethrows the error
    // of a job that ran (Continue: the first one, taken; SkipRest: returns at once once a job
    // failed, and keeps rethrowing).
    void wait(uint64_t ticket);
    void drain(); // wait(last ticket)
    // Non-blocking: whether the ticket's job has run; rethrows like wait.
    bool done(uint64_t ticket);
    // Rethrows the error of a job that already ran, without blocking (Continue: taken).
    void rethrow_if_failed();
    // Time spent running jobs, and time callers spent blocked in wait(), since construction.
    double busy_ms();
    double waited_ms();

  private:
    struct Job {
        std::function<void()> fn;
        std::string label;
    };
    void run();
    void rethrow_locked(); // with mu_ held

    const OnError on_error_;
    Trace* const trace_;
    const char* const category_;
    int trace_lane_ = 0;
    std::mutex mu_;
    std::condition_variable cv_, done_cv_;
    std::deque<Job> queue_;
    uint64_t submitted_ = 0, finished_ = 0;
    double busy_ms_ = 0.0, waited_ms_ = 0.0;
    bool stop_ = false;
    std::exception_ptr error_;
    std::thread thread_; // last: started once everything above is constructed
};

} // namespace sof::core
