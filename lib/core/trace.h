// Chrome trace recording (chrome://tracing, Perfetto): thread-safe complete events on named lanes.
// A lane is one stream, one optimizer worker or the main thread; write() emits the JSON file.
#pragma once

#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

namespace sof::core {

class Trace {
  public:
    Trace();
    Trace(const Trace&) = delete;
    Trace& operator=(const Trace&) = delete;

    // Id of the lane called `name`, created on first use (lanes appear in creation order).
    int lane(const std::string& name);
    // Microseconds since this trace was created (steady clock).
    double now_us() const;
    // A complete event on `lane` from t0 to t1 (us, from now_us()); `cat` groups events.
    void span(int lane, const std::string& name, double t0_us, double t1_us, const char* cat = "");
    // An instant marker (e.g. "rollback").
    void instant(int lane, const std::string& name);

    size_t num_events() const;
    std::vector<std::string> lane_names() const;
    // Writes {"traceEvents": [...]} to `path`; throws core::Error (Io) when it cannot.
    void write(const std::string& path) const;

    // Merged multi-rank traces: this trace's lanes and events as comma-separated JSON objects of
    // process `pid` named `process` (no enclosing brackets), timestamps shifted by shift_us.
    std::string events_json(int pid, const std::string& process, double shift_us) const;
    // Wall-clock microseconds (Unix epoch) of this trace's time 0, to align ranks' traces.
    double origin_unix_us() const { return origin_unix_us_; }
    // Writes {"traceEvents": [parts...]} (each part from events_json). Io error when it cannot, and
    // when the path is not a regular file (a FIFO is refused, never waited on).
    static void write_parts(const std::string& path, const std::vector<std::string>& parts);

    // RAII span: records [construction, destruction) on `lane` when trace is non-null.
    class Scope {
      public:
        Scope(Trace* t, int lane, std::string name, const char* cat = "")
            : t_(t), lane_(lane), name_(std::move(name)), cat_(cat), t0_(t ? t->now_us() : 0.0) {}
        ~Scope() {
            if (t_) t_->span(lane_, name_, t0_, t_->now_us(), cat_);
        }
        Scope(const Scope&) = delete;
        Scope& operator=(const Scope&) = delete;

      private:
        Trace* t_;
        int lane_;
        std::string name_;
        const char* cat_;
        double t0_;
    };

  private:
    struct Event {
        int lane;
        std::string name;
        std::string cat;
        double t0, dur; // us
        bool instant;
    };
    double origin_;         // steady-clock seconds at construction
    double origin_unix_us_; // system-clock microseconds at construction
    mutable std::mutex mu_;
    std::vector<std::string> lanes_; // lane id -> name
    std::vector<Event> events_;
};

} // namespace sof::core
