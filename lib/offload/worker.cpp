// Worker thread (see worker.h).
#include "offload/worker.h"

namespace sof::offload {

Worker::Worker(std::string name) : name_(std::move(name)) {
    thread_ = std::thread([this] { run(); });
}

Worker::~Worker() {
    {
        std::lock_guard<std::mutex> lk(mu_);
        stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
}

void Worker::push(std::function<void()> job) {
    {
        std::lock_guard<std::mutex> lk(mu_);
        queue_.push_back(std::move(job));
        pushed_++;
    }
    cv_.notify_one();
}

void Worker::drain() {
    std::unique_lock<std::mutex> lk(mu_);
    uint64_t target = pushed_;
    idle_cv_.wait(lk, [&] { return done_ >= target; });
    if (error_) {
        std::exception_ptr e = error_;
        error_ = nullptr;
        std::rethrow_exception(e);
    }
}

void Worker::rethrow_if_failed() {
    std::exception_ptr e;
    {
        std::lock_guard<std::mutex> lk(mu_);
        e = error_;
        error_ = nullptr;
    }
    if (e) std::rethrow_exception(e);
}

void Worker::run() {
    for (;;) {
        std::function<void()> job;
        {
            std::unique_lock<std::mutex> lk(mu_);
            cv_.wait(lk, [&] { return stop_ || !queue_.empty(); });
            if (queue_.empty()) return; // stopping and nothing left
            job = std::move(queue_.front());
            queue_.pop_front();
        }
        std::exception_ptr err;
        try {
            job();
        } catch (...) {
            err = std::current_exception();
        }
        {
            std::lock_guard<std::mutex> lk(mu_);
            if (err && !error_) error_ = err;
            done_++;
        }
        idle_cv_.notify_all();
    }
}

} // namespace sof::offload
