// Serial job queue (see job_queue.h): a FIFO of jobs on one thread, tickets to wait for each.
#include "core/job_queue.h"

#include "core/timer.h"

namespace sof::core {

JobQueue::JobQueue(OnError on_error, Trace* trace, std::string lane, const char* category)
    : on_error_(on_error), trace_(trace), category_(category),
      trace_lane_(trace ? trace->lane(lane) : 0), thread_([this] { run(); }) {}

JobQueue::~JobQueue() {
    {
        std::lock_guard<std::mutex> lk(mu_);
        stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
}

uint64_t JobQueue::submit(std::function<void()> job, std::string label) {
    uint64_t ticket;
    {
        std::lock_guard<std::mutex> lk(mu_);
        queue_.push_back({std::move(job), std::move(label)});
        ticket = ++submitted_;
    }
    cv_.notify_one();
    return ticket;
}

void JobQueue::rethrow_locked() {
    if (!error_) return;
    std::exception_ptr e = error_;
    if (on_error_ == OnError::Continue) error_ = nullptr;
    std::rethrow_exception(e);
}

void JobQueue::wait(uint64_t ticket) {
    std::unique_lock<std::mutex> lk(mu_);
    const bool skip = on_error_ == OnError::SkipRest;
    auto ready = [&] { return finished_ >= ticket || (skip && error_); };
    if (!ready()) {
        Timer t;
        done_cv_.wait(lk, ready);
        waited_ms_ += t.ms();
    }
    rethrow_locked();
}

void JobQueue::drain() {
    uint64_t t;
    {
        std::lock_guard<std::mutex> lk(mu_);
        t = submitted_;
    }
    wait(t);
}

bool JobQueue::done(uint64_t ticket) {
    std::lock_guard<std::mutex> lk(mu_);
    rethrow_locked();
    return finished_ >= ticket;
}

void JobQueue::rethrow_if_failed() {
    std::lock_guard<std::mutex> lk(mu_);
    rethrow_locked();
}

double JobQueue::busy_ms() {
    std::lock_guard<std::mutex> lk(mu_);
    return busy_ms_;
}

double JobQueue::waited_ms() {
    std::lock_guard<std::mutex> lk(mu_);
    return waited_ms_;
}

void JobQueue::run() {
    for (;;) {
        Job job;
        bool skip = false;
        {
            std::unique_lock<std::mutex> lk(mu_);
            cv_.wait(lk, [&] { return stop_ || !queue_.empty(); });
            if (queue_.empty()) return; // stopping and nothing left
            job = std::move(queue_.front());
            queue_.pop_front();
            skip = on_error_ == OnError::SkipRest && error_;
        }
        std::exception_ptr err;
        Timer t;
        const double t0 = trace_ && !job.label.empty() ? trace_->now_us() : 0.0;
        if (!skip) {
            try {
                job.fn();
            } catch (...) {
                err = std::current_exception();
            }
            if (trace_ && !job.label.empty())
                trace_->span(trace_lane_, job.label, t0, trace_->now_us(), category_);
        }
        const double ms = t.ms();
        job.fn = nullptr; // the job's captures go before it counts as done
        {
            std::lock_guard<std::mutex> lk(mu_);
            busy_ms_ += ms;
            if (err && !error_) error_ = err;
            finished_++;
        }
        done_cv_.notify_all();
    }
}

} // namespace sof::core
