// One host worker thread with a FIFO of jobs: the engine's CPU optimizer lane. Jobs run in push
// order; drain() waits for all and rethrows the first job exception; the destructor joins.
// (A core::JobQueue whose failed jobs do not stop the later ones.)
#pragma once

#include <functional>
#include <string>
#include <utility>

#include "core/job_queue.h"

namespace sof::offload {

class Worker {
  public:
    explicit Worker(std::string name)
        : name_(std::move(name)), queue_(core::JobQueue::OnError::Continue) {}
    Worker(const Worker&) = delete;
    Worker& operator=(const Worker&) = delete;

    void push(std::function<void()> job) { queue_.submit(std::move(job)); }
    // Blocks until every job pushed so far has run; rethrows the first exception among them.
    void drain() { queue_.drain(); }
    // Rethrows (and clears) the first exception of a job that already ran; never blocks.
    void rethrow_if_failed() { queue_.rethrow_if_failed(); }
    const std::string& name() const { return name_; }

  private:
    std::string name_;
    core::JobQueue queue_; // finishes queued jobs and joins on destruction
};

} // namespace sof::offload
