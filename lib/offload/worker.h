// One host worker thread with a FIFO of jobs: the engine's CPU optimizer lane. Jobs run in push
// order; drain() waits for all and rethrows the first job exception; the destructor joins.
#pragma once

#include <condition_variable>
#include <deque>
#include <exception>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

namespace sof::offload {

class Worker {
  public:
    explicit Worker(std::string name);
    ~Worker(); // finishes queued jobs, joins the thread, drops their exceptions
    Worker(const Worker&) = delete;
    Worker& operator=(const Worker&) = delete;

    void push(std::function<void()> job);
    // Blocks until every job pushed so far has run; rethrows the first exception among them.
    void drain();
    // Rethrows (and clears) the first exception of a job that already ran; never blocks.
    void rethrow_if_failed();
    const std::string& name() const { return name_; }

  private:
    void run();
    std::string name_;
    std::mutex mu_;
    std::condition_variable cv_, idle_cv_;
    std::deque<std::function<void()>> queue_;
    uint64_t pushed_ = 0, done_ = 0;
    bool stop_ = false;
    std::exception_ptr error_;
    std::thread thread_;
};

} // namespace sof::offload
