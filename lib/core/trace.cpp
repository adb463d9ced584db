// Chrome trace recording (see trace.h): events buffered under a mutex, written as JSON
// "complete" events (ph X) with one tid per lane and thread_name metadata so lanes are labelled.
#include "core/trace.h"

#include <cstdio>

#include "core/error.h"
#include "core/timer.h"

namespace sof::core {

namespace {

std::string json_escape(const std::string& s) {
    std::string o;
    o.reserve(s.size() + 2);
    for (char c : s) {
        if (c == '"' || c == '\\') {
            o += '\\';
            o += c;
        } else if (static_cast<unsigned char>(c) < 0x20) {
            char buf[8];
            std::snprintf(buf, sizeof buf, "\\u%04x", c);
            o += buf;
        } else {
            o += c;
        }
    }
    return o;
}

} // namespace

Trace::Trace() : origin_(now_seconds()) {}

int Trace::lane(const std::string& name) {
    std::lock_guard<std::mutex> lk(mu_);
    for (size_t i = 0; i < lanes_.size(); i++)
        if (lanes_[i] == name) return static_cast<int>(i);
    lanes_.push_back(name);
    return static_cast<int>(lanes_.size()) - 1;
}

double Trace::now_us() const {
    return (now_seconds() - origin_) * 1e6;
}

void Trace::span(int lane, const std::string& name, double t0_us, double t1_us, const char* cat) {
    std::lock_guard<std::mutex> lk(mu_);
    events_.push_back(
        {lane, name, cat ? cat : "", t0_us, t1_us > t0_us ? t1_us - t0_us : 0.0, false});
}

void Trace::instant(int lane, const std::string& name) {
    double t = now_us();
    std::lock_guard<std::mutex> lk(mu_);
    events_.push_back({lane, name, "marker", t, 0.0, true});
}

size_t Trace::num_events() const {
    std::lock_guard<std::mutex> lk(mu_);
    return events_.size();
}

std::vector<std::string> Trace::lane_names() const {
    std::lock_guard<std::mutex> lk(mu_);
    return lanes_;
}

void Trace::write(const std::string& path) const {
    std::lock_guard<std::mutex> lk(mu_);
    FILE* f = std::fopen(path.c_str(), "w");
    if (!f)
        SOF_FAIL(Io,
                 "cannot write trace file '%s' (runtime.trace): check that its directory "
                 "exists and is writable",
                 path.c_str());
    std::fputs("{\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n", f);
    bool first = true;
    for (size_t i = 0; i < lanes_.size(); i++) {
        std::fprintf(f,
                     "%s{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":1,\"tid\":%zu,"
                     "\"args\":{\"name\":\"%s\"}},\n"
                     "{\"name\":\"thread_sort_index\",\"ph\":\"M\",\"pid\":1,\"tid\":%zu,"
                     "\"args\":{\"sort_index\":%zu}}",
                     first ? "" : ",\n", i, json_escape(lanes_[i]).c_str(), i, i);
        first = false;
    }
    for (const Event& e : events_) {
        if (e.instant)
            std::fprintf(f,
                         "%s{\"name\":\"%s\",\"cat\":\"%s\",\"ph\":\"i\",\"s\":\"t\",\"ts\":%.3f,"
                         "\"pid\":1,\"tid\":%d}",
                         first ? "" : ",\n", json_escape(e.name).c_str(),
                         json_escape(e.cat).c_str(), e.t0, e.lane);
        else
            std::fprintf(f,
                         "%s{\"name\":\"%s\",\"cat\":\"%s\",\"ph\":\"X\",\"ts\":%.3f,"
                         "\"dur\":%.3f,\"pid\":1,\"tid\":%d}",
                         first ? "" : ",\n", json_escape(e.name).c_str(),
                         json_escape(e.cat).c_str(), e.t0, e.dur, e.lane);
        first = false;
    }
    std::fputs("\n]}\n", f);
    bool ok = std::fflush(f) == 0;
    ok = std::fclose(f) == 0 && ok;
    if (!ok) SOF_FAIL(Io, "error while writing trace file '%s' (disk full?)", path.c_str());
}

} // namespace sof::core
