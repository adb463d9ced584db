// Chrome trace recording (see trace.h): events buffered under a mutex, written as JSON
// "complete" events (ph X) with one tid per lane and thread_name metadata so lanes are labelled.
#include "core/trace.h"

#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>

#include "core/error.h"
#include "core/output_file.h"
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

Trace::Trace()
    : origin_(now_seconds()),
      origin_unix_us_(static_cast<double>(std::chrono::duration_cast<std::chrono::microseconds>(
                                              std::chrono::system_clock::now().time_since_epoch())
                                              .count())) {}

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

std::string Trace::events_json(int pid, const std::string& process, double shift_us) const {
    std::lock_guard<std::mutex> lk(mu_);
    std::string o;
    char buf[512];
    auto add = [&](const std::string& x) {
        if (!o.empty()) o += ",\n";
        o += x;
    };
    std::snprintf(
        buf, sizeof buf,
        "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":%d,\"args\":{\"name\":\"%s\"}},\n"
        "{\"name\":\"process_sort_index\",\"ph\":\"M\",\"pid\":%d,"
        "\"args\":{\"sort_index\":%d}}",
        pid, json_escape(process).c_str(), pid, pid);
    add(buf);
    for (size_t i = 0; i < lanes_.size(); i++) {
        std::snprintf(buf, sizeof buf,
                      "{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":%zu,"
                      "\"args\":{\"name\":\"%s\"}},\n"
                      "{\"name\":\"thread_sort_index\",\"ph\":\"M\",\"pid\":%d,\"tid\":%zu,"
                      "\"args\":{\"sort_index\":%zu}}",
                      pid, i, json_escape(lanes_[i]).c_str(), pid, i, i);
        add(buf);
    }
    for (const Event& e : events_) {
        const std::string name = json_escape(e.name), cat = json_escape(e.cat);
        if (e.instant)
            add("{\"name\":\"" + name + "\",\"cat\":\"" + cat +
                "\",\"ph\":\"i\",\"s\":\"t\",\"ts\":" + std::to_string(e.t0 + shift_us) +
                ",\"pid\":" + std::to_string(pid) + ",\"tid\":" + std::to_string(e.lane) + "}");
        else
            add("{\"name\":\"" + name + "\",\"cat\":\"" + cat + "\",\"ph\":\"X\",\"ts\":" +
                std::to_string(e.t0 + shift_us) + ",\"dur\":" + std::to_string(e.dur) +
                ",\"pid\":" + std::to_string(pid) + ",\"tid\":" + std::to_string(e.lane) + "}");
    }
    return o;
}

void Trace::write_parts(const std::string& path, const std::vector<std::string>& parts) {
    // a FIFO or device at the path is refused, not waited on (open_output)
    const int fd = open_output(path, O_WRONLY | O_CREAT | O_TRUNC, "trace file (runtime.trace)");
    FILE* f = ::fdopen(fd, "w");
    if (!f) {
        ::close(fd);
        SOF_FAIL(Io, "cannot write trace file '%s' (runtime.trace): out of memory", path.c_str());
    }
    std::fputs("{\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n", f);
    bool first = true;
    for (const std::string& p : parts) {
        if (p.empty()) continue;
        if (!first) std::fputs(",\n", f);
        std::fputs(p.c_str(), f);
        first = false;
    }
    std::fputs("\n]}\n", f);
    bool ok = std::fflush(f) == 0;
    ok = std::fclose(f) == 0 && ok;
    if (!ok) SOF_FAIL(Io, "error while writing trace file '%s' (disk full?)", path.c_str());
}

void Trace::write(const std::string& path) const {
    write_parts(path, {events_json(1, "superoffload", 0.0)});
}

} // namespace sof::core
