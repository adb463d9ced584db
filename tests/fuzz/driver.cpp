// A seeded mutation driver for the fuzz harnesses (libFuzzer's LLVMFuzzerTestOneInput), built
// with GCC's ASan/UBSan in CI: replays the corpus, then mutates it (bit flips, interesting
// integers and numbers, dictionary tokens, splices, cuts) for a number of runs or seconds. Inputs
// a harness accepts join the pool of parents. A watchdog reports an input that runs longer than
// --timeout as a hang; a crash or a sanitizer report saves the input before the process dies.
//   fuzz_X [--runs N] [--seconds S] [--seed K] [--max-len L] [--timeout S] [--dict FILE]
//          [--out DIR] CORPUS_DIR...
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "fuzz.h"

extern "C" __attribute__((weak)) void __sanitizer_set_death_callback(void (*)(void));

namespace {

namespace fs = std::filesystem;
using Bytes = std::vector<uint8_t>;

// The input being run, for the crash handlers (async-signal-safe: plain buffers).
Bytes g_current;
char g_crash_path[4096];
std::atomic<int64_t> g_started_ns{0}; // 0: idle
std::atomic<bool> g_accepted{false};

void save_current(const char* path) {
    const int fd = ::open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) return;
    size_t done = 0;
    while (done < g_current.size()) {
        const ssize_t n = ::write(fd, g_current.data() + done, g_current.size() - done);
        if (n <= 0) break;
        done += static_cast<size_t>(n);
    }
    ::close(fd);
    const char msg[] = "fuzz driver: the input is saved as ";
    (void)!::write(2, msg, sizeof msg - 1);
    (void)!::write(2, path, std::strlen(path));
    (void)!::write(2, "\n", 1);
}

void on_death() {
    save_current(g_crash_path);
}

void on_signal(int sig) {
    save_current(g_crash_path);
    ::signal(sig, SIG_DFL);
    ::raise(sig);
}

int64_t now_ns() {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
}

// libFuzzer dictionary lines: name="token" or "token", with \\, \" and \xHH escapes.
std::vector<Bytes> load_dict(const std::string& path) {
    std::vector<Bytes> out;
    std::ifstream f(path);
    if (!f) {
        std::fprintf(stderr, "fuzz driver: cannot read dictionary %s\n", path.c_str());
        std::exit(2);
    }
    for (std::string line; std::getline(f, line);) {
        const size_t q = line.find('"');
        if (line.empty() || line[0] == '#' || q == std::string::npos) continue;
        Bytes t;
        for (size_t i = q + 1; i < line.size() && line[i] != '"'; i++) {
            if (line[i] == '\\' && i + 1 < line.size()) {
                if (line[i + 1] == 'x' && i + 3 < line.size()) {
                    t.push_back(
                        static_cast<uint8_t>(std::stoi(line.substr(i + 2, 2), nullptr, 16)));
                    i += 3;
                } else {
                    t.push_back(static_cast<uint8_t>(line[++i]));
                }
            } else {
                t.push_back(static_cast<uint8_t>(line[i]));
            }
        }
        if (!t.empty()) out.push_back(t);
    }
    return out;
}

struct Mutator {
    std::mt19937_64 rng;
    const std::vector<Bytes>& dict;
    size_t max_len;

    size_t below(size_t n) { return n == 0 ? 0 : static_cast<size_t>(rng() % n); }

    void insert(Bytes& b, size_t at, const Bytes& what) {
        b.insert(b.begin() + static_cast<long>(std::min(at, b.size())), what.begin(), what.end());
    }

    // ASCII numbers a parser may mishandle: bounds of int/int64/float, signs, exponents.
    const char* number() {
        static const char* const k[] = {"0",
                                        "-1",
                                        "1",
                                        "2147483647",
                                        "2147483648",
                                        "-2147483649",
                                        "4294967296",
                                        "65536",
                                        "16777217",
                                        "9223372036854775807",
                                        "18446744073709551616",
                                        "1e308",
                                        "1e-320",
                                        "-0",
                                        "0.5",
                                        "3.4e38",
                                        "1e39",
                                        "nan",
                                        "inf",
                                        "0x10",
                                        "1_000",
                                        "+5",
                                        "007"};
        return k[below(sizeof k / sizeof k[0])];
    }

    void mutate_once(Bytes& b, const std::vector<Bytes>& pool) {
        switch (below(11)) {
        case 0: // flip a bit
            if (!b.empty()) b[below(b.size())] ^= static_cast<uint8_t>(1u << below(8));
            break;
        case 1: // a random byte
            if (!b.empty()) b[below(b.size())] = static_cast<uint8_t>(rng());
            break;
        case 2: { // insert random bytes
            Bytes r(1 + below(8));
            for (uint8_t& x : r)
                x = static_cast<uint8_t>(rng());
            insert(b, below(b.size() + 1), r);
            break;
        }
        case 3: { // erase a range
            if (b.empty()) break;
            const size_t at = below(b.size()), n = 1 + below(std::min<size_t>(16, b.size() - at));
            b.erase(b.begin() + static_cast<long>(at), b.begin() + static_cast<long>(at + n));
            break;
        }
        case 4: { // an interesting integer, little endian, 1/2/4/8 bytes
            static const uint64_t k[] = {0,          1,          0x7f,       0x80,
                                         0xff,       0x7fff,     0x8000,     0xffff,
                                         0x7fffffff, 0x80000000, 0xffffffff, 0x100000000ull,
                                         ~0ull,      1ull << 63, 20240520,   20240801,
                                         20240326,   1024,       256,        4096};
            const uint64_t v = k[below(sizeof k / sizeof k[0])];
            const size_t w = size_t(1) << below(4);
            if (b.size() < w) break;
            const size_t at = rng() % 2 ? below(b.size() - w + 1) / w * w : below(b.size() - w + 1);
            for (size_t i = 0; i < w; i++)
                b[at + i] = static_cast<uint8_t>(v >> (8 * i));
            break;
        }
        case 5: { // duplicate a chunk somewhere else
            if (b.empty()) break;
            const size_t at = below(b.size()), n = 1 + below(std::min<size_t>(64, b.size() - at));
            Bytes c(b.begin() + static_cast<long>(at), b.begin() + static_cast<long>(at + n));
            insert(b, below(b.size() + 1), c);
            break;
        }
        case 6: { // splice with another pool entry
            const Bytes& o = pool[below(pool.size())];
            const size_t cut = below(b.size() + 1), from = below(o.size() + 1);
            b.resize(cut);
            b.insert(b.end(), o.begin() + static_cast<long>(from), o.end());
            break;
        }
        case 7: { // replace a run of digits with an interesting number
            std::vector<size_t> starts;
            for (size_t i = 0; i < b.size(); i++)
                if (std::isdigit(b[i]) && (i == 0 || !std::isdigit(b[i - 1]))) starts.push_back(i);
            if (starts.empty()) break;
            const size_t s = starts[below(starts.size())];
            size_t e = s;
            while (e < b.size() && (std::isdigit(b[e]) || b[e] == '.'))
                e++;
            const std::string n = number();
            b.erase(b.begin() + static_cast<long>(s), b.begin() + static_cast<long>(e));
            insert(b, s, Bytes(n.begin(), n.end()));
            break;
        }
        case 8: // a dictionary token
            if (!dict.empty()) insert(b, below(b.size() + 1), dict[below(dict.size())]);
            break;
        case 9: // cut the end
            if (!b.empty()) b.resize(below(b.size()));
            break;
        default: // swap two bytes
            if (b.size() >= 2) std::swap(b[below(b.size())], b[below(b.size())]);
            break;
        }
    }

    Bytes mutate(const Bytes& parent, const std::vector<Bytes>& pool) {
        Bytes b = parent;
        const size_t n = 1 + below(rng() % 4 == 0 ? 16 : 4);
        for (size_t i = 0; i < n; i++)
            mutate_once(b, pool);
        if (b.size() > max_len) b.resize(max_len);
        return b;
    }
};

void run_one(const Bytes& b) {
    g_current = b;
    g_started_ns = now_ns();
    LLVMFuzzerTestOneInput(b.data(), b.size());
    g_started_ns = 0;
}

} // namespace

extern "C" void sof_fuzz_driver_note_accepted() {
    g_accepted = true;
}

int main(int argc, char** argv) {
    long long runs = -1;
    double seconds = -1, timeout = 10;
    unsigned long long seed = 1;
    size_t max_len = 1 << 16;
    std::string out = ".", dict_path;
    std::vector<std::string> dirs;
    for (int i = 1; i < argc; i++) {
        const std::string a = argv[i];
        auto value = [&]() -> std::string {
            if (i + 1 >= argc) {
                std::fprintf(stderr, "fuzz driver: %s needs a value\n", a.c_str());
                std::exit(2);
            }
            return argv[++i];
        };
        if (a == "--runs")
            runs = std::stoll(value());
        else if (a == "--seconds")
            seconds = std::stod(value());
        else if (a == "--seed")
            seed = std::stoull(value());
        else if (a == "--max-len")
            max_len = std::stoull(value());
        else if (a == "--timeout")
            timeout = std::stod(value());
        else if (a == "--dict")
            dict_path = value();
        else if (a == "--out")
            out = value();
        else
            dirs.push_back(a);
    }
    if (runs < 0 && seconds < 0) runs = 0; // corpus replay only
    std::vector<Bytes> pool;
    for (const std::string& d : dirs) {
        std::vector<fs::path> files;
        for (const auto& e : fs::directory_iterator(d))
            if (e.is_regular_file()) files.push_back(e.path());
        std::sort(files.begin(), files.end());
        for (const fs::path& p : files) {
            std::ifstream f(p, std::ios::binary);
            pool.emplace_back(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
        }
    }
    if (pool.empty()) pool.emplace_back();
    const std::vector<Bytes> dict = dict_path.empty() ? std::vector<Bytes>() : load_dict(dict_path);
    const std::string name = fs::path(argv[0]).filename().string();
    std::snprintf(g_crash_path, sizeof g_crash_path, "%s/crash-%s-seed%llu.bin", out.c_str(),
                  name.c_str(), seed);
    for (int sig : {SIGSEGV, SIGABRT, SIGBUS, SIGFPE, SIGILL})
        ::signal(sig, on_signal);
    if (__sanitizer_set_death_callback) __sanitizer_set_death_callback(on_death);

    std::atomic<bool> done{false};
    std::thread watchdog([&] {
        while (!done) {
            const int64_t t0 = g_started_ns;
            if (t0 != 0 && now_ns() - t0 > static_cast<int64_t>(timeout * 1e9)) {
                char hang[4096];
                std::snprintf(hang, sizeof hang, "%s/hang-%s-seed%llu.bin", out.c_str(),
                              name.c_str(), seed);
                std::fprintf(stderr, "fuzz driver: HANG: an input ran longer than %g s\n", timeout);
                save_current(hang);
                std::_Exit(3);
            }
            std::this_thread::sleep_for(std::chrono::milliseconds(100));
        }
    });

    const int64_t t_start = now_ns();
    long long execs = 0, accepted = 0;
    const size_t seeds = pool.size();
    for (size_t i = 0; i < seeds; i++) { // the corpus itself first (regressions)
        g_accepted = false;
        run_one(pool[i]);
        execs++;
        accepted += g_accepted ? 1 : 0;
    }
    Mutator m{std::mt19937_64(seed), dict, max_len};
    auto elapsed = [&] { return static_cast<double>(now_ns() - t_start) / 1e9; };
    for (long long r = 0;; r++) {
        if (runs >= 0 && r >= runs) break;
        if (seconds >= 0 && (r & 63) == 0 && elapsed() >= seconds) break;
        const Bytes in = m.mutate(pool[m.below(pool.size())], pool);
        g_accepted = false;
        run_one(in);
        execs++;
        if (g_accepted) {
            accepted++;
            if (pool.size() < seeds + 4096) // keep accepted inputs as parents
                pool.push_back(in);
            else
                pool[seeds + m.below(4096)] = in;
        }
    }
    done = true;
    watchdog.join();
    const double s = elapsed();
    std::printf("%s: %lld execs in %.1f s (%.0f/s), %lld accepted, pool %zu, seed %llu: 0 crashes, "
                "0 hangs\n",
                name.c_str(), execs, s, s > 0 ? static_cast<double>(execs) / s : 0.0, accepted,
                pool.size(), seed);
    std::error_code ec;
    fs::remove_all(sof::fuzz::scratch_dir(), ec);
    return 0;
}
