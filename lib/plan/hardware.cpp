// Hardware profiles for the planner: the built-in host profile, the YAML reader (strict, with
// file:line:key errors) and the link's bandwidth-vs-size curve.
#include <yaml-cpp/yaml.h>

#include <cmath>
#include <fstream>
#include <limits>
#include <set>
#include <sstream>

#include "config/deck.h"
#include "core/error.h"
#include "plan/planner.h"

namespace sof::plan {

namespace {

constexpr double kMiB = 1024.0 * 1024.0;

// Reads one mapping strictly: every key must be known, every required key present.
class MapReader {
  public:
    MapReader(const YAML::Node& node, const std::string& file, const std::string& path)
        : node_(node), file_(file), path_(path) {
        if (!node_.IsMap())
            SOF_FAIL(Config, "%s:%d: %s: expected a mapping of keys", file_.c_str(), line(node_),
                     path_.empty() ? "(top level)" : path_.c_str());
    }

    static int line(const YAML::Node& n) { return n.Mark().line + 1; }
    std::string key_path(const std::string& key) const {
        return path_.empty() ? key : path_ + "." + key;
    }

    // The node of `key`, or an invalid node when absent and optional.
    YAML::Node get(const std::string& key, bool required) {
        known_.insert(key);
        YAML::Node n = node_[key];
        if (!n && required)
            SOF_FAIL(Config, "%s:%d: missing key '%s' (see inputs/hardware/gh200.yaml)",
                     file_.c_str(), line(node_), key_path(key).c_str());
        return n;
    }

    double number(const std::string& key, bool required, double fallback, double lo, double hi) {
        YAML::Node n = get(key, required);
        if (!n) return fallback;
        double v = as_number(n, key_path(key));
        if (!(v >= lo && v <= hi))
            SOF_FAIL(Config, "%s:%d: %s: %g is out of range [%g, %g]", file_.c_str(), line(n),
                     key_path(key).c_str(), v, lo, hi);
        return v;
    }

    std::string text(const std::string& key, bool required, const std::string& fallback) {
        YAML::Node n = get(key, required);
        if (!n) return fallback;
        if (!n.IsScalar())
            SOF_FAIL(Config, "%s:%d: %s: expected a string", file_.c_str(), line(n),
                     key_path(key).c_str());
        return n.Scalar();
    }

    double as_number(const YAML::Node& n, const std::string& what) const {
        if (n.IsScalar()) {
            const std::string& s = n.Scalar();
            std::istringstream in(s);
            double v = 0;
            in >> v;
            if (!in.fail() && in.eof() && std::isfinite(v)) return v;
        }
        SOF_FAIL(Config, "%s:%d: %s: expected a number, got '%s'", file_.c_str(), line(n),
                 what.c_str(), n.IsScalar() ? n.Scalar().c_str() : "(not a scalar)");
    }

    // After reading: any key not asked for is unknown.
    void finish() const {
        for (auto it = node_.begin(); it != node_.end(); ++it) {
            std::string k = it->first.Scalar();
            if (known_.count(k)) continue;
            std::string keys;
            for (const std::string& s : known_)
                keys += (keys.empty() ? "" : ", ") + s;
            SOF_FAIL(Config, "%s:%d: unknown key '%s' (keys here: %s)", file_.c_str(),
                     line(it->first), key_path(k).c_str(), keys.c_str());
        }
    }

    const std::string& file() const { return file_; }

  private:
    YAML::Node node_;
    std::string file_;
    std::string path_;
    std::set<std::string> known_;
};

// A curve: a sequence of [size_MiB, GB/s] pairs with increasing sizes.
std::vector<BandwidthPoint> read_curve(MapReader& r, const std::string& key) {
    YAML::Node n = r.get(key, true);
    std::string what = r.key_path(key);
    if (!n.IsSequence() || n.size() == 0)
        SOF_FAIL(Config, "%s:%d: %s: expected a list of [size_MiB, GB/s] pairs", r.file().c_str(),
                 MapReader::line(n), what.c_str());
    std::vector<BandwidthPoint> out;
    for (size_t i = 0; i < n.size(); ++i) {
        YAML::Node p = n[i];
        std::string pw = what + "[" + std::to_string(i) + "]";
        if (!p.IsSequence() || p.size() != 2)
            SOF_FAIL(Config, "%s:%d: %s: expected a pair [size_MiB, GB/s]", r.file().c_str(),
                     MapReader::line(p), pw.c_str());
        double mb = r.as_number(p[0], pw);
        double gbps = r.as_number(p[1], pw);
        if (!(mb > 0) || !(gbps > 0))
            SOF_FAIL(Config, "%s:%d: %s: size and bandwidth must be > 0 (got [%g, %g])",
                     r.file().c_str(), MapReader::line(p), pw.c_str(), mb, gbps);
        if (!out.empty() && !(mb * kMiB > out.back().bytes))
            SOF_FAIL(Config, "%s:%d: %s: sizes must increase (%g MiB after %g MiB)",
                     r.file().c_str(), MapReader::line(p), pw.c_str(), mb, out.back().bytes / kMiB);
        out.push_back({mb * kMiB, gbps});
    }
    return out;
}

HardwareProfile parse_profile(const YAML::Node& root, const std::string& file) {
    HardwareProfile hw;
    hw.source = file;
    MapReader top(root, file, "");
    hw.name = top.text("name", true, "");
    std::string dev = top.text("device", false, "gpu");
    if (dev != "gpu" && dev != "host")
        SOF_FAIL(Config, "%s:%d: device: expected 'gpu' or 'host', got '%s'", file.c_str(),
                 MapReader::line(top.get("device", false)), dev.c_str());
    hw.host_device = dev == "host";

    MapReader gpu(top.get("gpu", true), file, "gpu");
    hw.gpu_peak_tflops = gpu.number("peak_tflops", true, 0, 1e-6, 1e6);
    hw.gpu_achievable_fraction = gpu.number("achievable_fraction", true, 0, 1e-3, 1.0);
    hw.gpu_memory_gb = gpu.number("memory_gb", true, 0, 1e-3, 1e6);
    hw.gpu_usable_fraction = gpu.number("usable_fraction", false, 0.9, 0.05, 1.0);
    hw.gpu_adam_params_per_s = gpu.number("adam_params_per_s", true, 0, 1e3, 1e15);
    gpu.finish();

    MapReader cpu(top.get("cpu", true), file, "cpu");
    hw.cpu_memory_gb = cpu.number("memory_gb", true, 0, 1e-3, 1e7);
    hw.cpu_cores = static_cast<int>(cpu.number("cores", true, 0, 1, 1e5));
    hw.cpu_adam_params_per_s = cpu.number("adam_params_per_s", true, 0, 1e3, 1e15);
    hw.cpu_cast_params_per_s = cpu.number("cast_params_per_s", true, 0, 1e3, 1e15);
    hw.cpu_adam_params_per_s_bf16 = cpu.number("adam_params_per_s_bf16", false, 0, 1e3, 1e15);
    hw.cpu_adam_params_per_s_q8 = cpu.number("adam_params_per_s_q8", false, 0, 1e3, 1e15);
    cpu.finish();

    MapReader link(top.get("link", true), file, "link");
    hw.link = link.text("name", true, "");
    hw.saturation_fraction = link.number("saturation_fraction", false, 0.95, 0.5, 1.0);
    hw.h2d = read_curve(link, "h2d");
    hw.d2h = read_curve(link, "d2h");
    link.finish();
    if (YAML::Node n = top.get("network", false)) {
        MapReader net(n, file, "network");
        hw.ranks_per_node = static_cast<int>(net.number("ranks_per_node", true, 1, 1, 1e6));
        auto read_link = [&](const char* key, std::string* name, double* gbps) {
            YAML::Node l = net.get(key, false);
            if (!l) return;
            MapReader r(l, file, std::string("network.") + key);
            *name = r.text("name", true, "");
            *gbps = r.number("gbps", true, 0, 1e-3, 1e5);
            r.finish();
        };
        read_link("intra_node", &hw.intra_node, &hw.intra_node_gbps);
        read_link("inter_node", &hw.inter_node, &hw.inter_node_gbps);
        net.finish();
    }
    top.finish();
    return hw;
}

} // namespace

HardwareProfile default_host_profile() {
    // The `host` device on a small x86 machine (2 cores, AVX2): "device" compute is the CPU's
    // BLAS, the "link" is memcpy between two host buffers. Kept equal to this-host.yaml.
    HardwareProfile hw;
    hw.name = "host";
    hw.source = "built-in";
    hw.host_device = true;
    hw.gpu_peak_tflops = 0.15;
    hw.gpu_achievable_fraction = 0.5;
    hw.gpu_memory_gb = 8.0 * 1.073741824;
    hw.gpu_usable_fraction = 1.0;
    hw.gpu_adam_params_per_s = 3.0e9;
    hw.cpu_memory_gb = 16.0;
    hw.cpu_cores = 2;
    hw.cpu_adam_params_per_s = 3.0e9;
    hw.cpu_cast_params_per_s = 4.0e9;
    hw.link = "memcpy";
    hw.saturation_fraction = 0.95;
    hw.h2d = {{0.0625 * kMiB, 6.0}, {1 * kMiB, 9.0}, {4 * kMiB, 10.0}, {64 * kMiB, 10.0}};
    hw.d2h = hw.h2d;
    hw.ranks_per_node = 64;
    hw.intra_node = "shared memory";
    hw.intra_node_gbps = 5.0;
    return hw;
}

HardwareProfile load_hardware(const std::string& yaml_path) {
    const std::string text = config::read_yaml_file(yaml_path, "hardware profile");
    YAML::Node root;
    try {
        root = YAML::Load(text);
    } catch (const YAML::Exception& e) {
        SOF_FAIL(Config, "%s:%d: YAML syntax error: %s", yaml_path.c_str(), e.mark.line + 1,
                 e.msg.c_str());
    }
    if (!root || root.IsNull())
        SOF_FAIL(Config, "%s:1: the hardware profile is empty", yaml_path.c_str());
    try {
        return parse_profile(root, yaml_path);
    } catch (const YAML::Exception& e) {
        SOF_FAIL(Config, "%s:%d: %s", yaml_path.c_str(), e.mark.line + 1, e.msg.c_str());
    }
}

HardwareProfile hardware_for(const config::Config& cfg) {
    if (cfg.offload.hardware.empty()) return default_host_profile();
    return load_hardware(cfg.offload.hardware);
}

double bandwidth_gbps(const std::vector<BandwidthPoint>& curve, double bytes) {
    SOF_CHECK(!curve.empty(), "bandwidth curve without points");
    if (bytes <= curve.front().bytes) return curve.front().gbps;
    if (bytes >= curve.back().bytes) return curve.back().gbps;
    for (size_t i = 1; i < curve.size(); ++i) {
        if (bytes > curve[i].bytes) continue;
        const BandwidthPoint& a = curve[i - 1];
        const BandwidthPoint& b = curve[i];
        double t = std::log(bytes / a.bytes) / std::log(b.bytes / a.bytes);
        return a.gbps + t * (b.gbps - a.gbps);
    }
    return curve.back().gbps;
}

double transfer_seconds(const std::vector<BandwidthPoint>& curve, double bytes) {
    if (bytes <= 0) return 0;
    return bytes / (bandwidth_gbps(curve, bytes) * 1e9);
}

double saturating_bucket_bytes(const HardwareProfile& hw) {
    auto best = [](const std::vector<BandwidthPoint>& c) {
        double b = 0;
        for (const BandwidthPoint& p : c)
            b = std::max(b, p.gbps);
        return b;
    };
    double best_h2d = best(hw.h2d), best_d2h = best(hw.d2h);
    double size = 256.0 * 1024.0;
    const double max_size = 4.0 * 1024.0 * kMiB;
    for (; size < max_size; size *= 2) {
        // a hair of slack so a point sitting exactly on the threshold counts
        bool h = bandwidth_gbps(hw.h2d, size) >= hw.saturation_fraction * best_h2d * (1 - 1e-12);
        bool d = bandwidth_gbps(hw.d2h, size) >= hw.saturation_fraction * best_d2h * (1 - 1e-12);
        if (h && d) break;
    }
    return size;
}

double weight_flow_efficiency(double batch, double seq_len, double peak_flops,
                              double bw_bytes_per_s, double bytes_per_param) {
    // params cancels out; use 1 for clarity of the equations
    const double params = 1.0;
    double comp_time = 2.0 * batch * seq_len * params / peak_flops; // Eq. 1
    double comm_time = bytes_per_param * params / bw_bytes_per_s;   // Eq. 2
    return comp_time / (comp_time + comm_time);                     // Eq. 3
}

double dos_interleave_k(double B, double Ug, double Uc, double Dc) {
    double num = 3.0 / B + 1.0 / Ug;
    double den = 1.0 / Uc + 1.0 / Dc - 1.0 / (2.0 * B);
    if (!(den > 0)) return std::numeric_limits<double>::infinity();
    return num / den;
}

} // namespace sof::plan
