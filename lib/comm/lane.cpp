// Communication lane (see lane.h): a FIFO of jobs on one thread, tickets to wait for each.
// After a job throws, later jobs are skipped (their collectives would hang) and waits rethrow.
#include "comm/lane.h"

#include "core/timer.h"

namespace sof::comm {

Lane::Lane(std::string name, core::Trace* trace)
    : name_(std::move(name)), trace_(trace), trace_lane_(trace ? trace->lane(name_) : 0),
      thread_([this] { run(); }) {}

Lane::~Lane() {
    {
        std::lock_guard<std::mutex> lk(mu_);
        stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
}

uint64_t Lane::submit(std::function<void()> job, std::string what) {
    std::lock_guard<std::mutex> lk(mu_);
    queue_.emplace_back(std::move(job), std::move(what));
    cv_.notify_all();
    return ++submitted_;
}

void Lane::wait(uint64_t ticket) {
    std::unique_lock<std::mutex> lk(mu_);
    if (finished_ < ticket && !error_) {
        core::Timer t;
        done_cv_.wait(lk, [&] { return finished_ >= ticket || error_; });
        waited_ms_ += t.ms();
    }
    if (error_) std::rethrow_exception(error_);
}

bool Lane::done(uint64_t ticket) {
    std::lock_guard<std::mutex> lk(mu_);
    if (error_) std::rethrow_exception(error_);
    return finished_ >= ticket;
}

void Lane::drain() {
    uint64_t t;
    {
        std::lock_guard<std::mutex> lk(mu_);
        t = submitted_;
    }
    wait(t);
}

double Lane::busy_ms() {
    std::lock_guard<std::mutex> lk(mu_);
    return busy_ms_;
}

double Lane::waited_ms() {
    std::lock_guard<std::mutex> lk(mu_);
    return waited_ms_;
}

void Lane::run() {
    for (;;) {
        std::function<void()> job;
        std::string what;
        {
            std::unique_lock<std::mutex> lk(mu_);
            cv_.wait(lk, [&] { return stop_ || !queue_.empty(); });
            if (queue_.empty()) return;
            job = std::move(queue_.front().first);
            what = std::move(queue_.front().second);
            queue_.pop_front();
        }
        core::Trace::Scope span(trace_, trace_lane_, what, "comm");
        bool failed;
        {
            std::lock_guard<std::mutex> lk(mu_);
            failed = static_cast<bool>(error_);
        }
        core::Timer t;
        if (!failed) {
            try {
                job();
            } catch (...) {
                std::lock_guard<std::mutex> lk(mu_);
                error_ = std::current_exception();
            }
        }
        {
            std::lock_guard<std::mutex> lk(mu_);
            busy_ms_ += t.ms();
            finished_++;
        }
        done_cv_.notify_all();
    }
}

} // namespace sof::comm
