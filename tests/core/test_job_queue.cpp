// core::JobQueue: submission order, tickets, what a failed job means under each OnError policy
// (Continue: later jobs run, the error is taken once; SkipRest: later jobs skipped, error sticky),
// queued jobs run at destruction. Runs under TSan (label engine).
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "core/job_queue.h"

using sof::core::JobQueue;

namespace {

std::string error_of(const std::function<void()>& fn) {
    try {
        fn();
    } catch (const std::exception& e) {
        return e.what();
    }
    return "";
}

} // namespace

TEST_CASE("jobs run one at a time in submission order; tickets count from 1") {
    JobQueue q(JobQueue::OnError::Continue);
    std::vector<int> order; // touched only by the queue's thread until drain returns
    std::atomic<int> running{0}, overlap{0};
    uint64_t last = 0;
    for (int i = 0; i < 100; i++)
        last = q.submit([&, i] {
            if (running.fetch_add(1) != 0) overlap++;
            order.push_back(i);
            running.fetch_sub(1);
        });
    CHECK(last == 100);
    q.wait(50); // at least the first 50 ran
    q.drain();
    CHECK(q.done(100));
    CHECK_FALSE(q.done(101));
    REQUIRE(order.size() == 100);
    for (int i = 0; i < 100; i++)
        CHECK(order[static_cast<size_t>(i)] == i);
    CHECK(overlap == 0);
    CHECK(q.busy_ms() >= 0.0);
    CHECK(q.waited_ms() >= 0.0);
}

TEST_CASE("Continue: a failed job does not stop later ones; its error is rethrown once") {
    JobQueue q(JobQueue::OnError::Continue);
    std::atomic<int> ran{0};
    q.submit([&] { ran++; });
    q.submit([] { throw std::runtime_error("first"); });
    q.submit([] { throw std::runtime_error("second"); });
    const uint64_t t = q.submit([&] { ran++; });
    CHECK(error_of([&] { q.wait(t); }) == "first");
    CHECK(ran == 2);
    CHECK(error_of([&] { q.drain(); }).empty()); // taken
    q.submit([] { throw std::runtime_error("third"); });
    while (error_of([&] { q.rethrow_if_failed(); }) != "third")
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    CHECK(error_of([&] { q.rethrow_if_failed(); }).empty());
}

TEST_CASE("SkipRest: after a failed job later jobs are skipped and every wait rethrows") {
    JobQueue q(JobQueue::OnError::SkipRest);
    std::atomic<int> ran{0};
    q.submit([&] { ran++; });
    const uint64_t bad = q.submit([] { throw std::runtime_error("collective failed"); });
    const uint64_t after = q.submit([&] { ran++; });
    CHECK(error_of([&] { q.wait(after); }) == "collective failed");
    CHECK(error_of([&] { q.wait(bad); }) == "collective failed"); // sticky
    CHECK(error_of([&] { q.done(1); }) == "collective failed");
    q.submit([&] { ran++; });
    CHECK(error_of([&] { q.drain(); }) == "collective failed");
    CHECK(ran == 1);
}

TEST_CASE("destruction runs what is queued, then joins") {
    std::atomic<int> ran{0};
    {
        JobQueue q(JobQueue::OnError::Continue);
        for (int i = 0; i < 20; i++)
            q.submit([&] {
                std::this_thread::sleep_for(std::chrono::microseconds(200));
                ran++;
            });
    }
    CHECK(ran == 20);
}
