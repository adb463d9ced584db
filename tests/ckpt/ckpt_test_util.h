// Helpers for checkpoint tests: scratch directories, deterministic buffers, byte-level file edits
// and "this call throws a core::Error of kind K whose message contains S".
#pragma once

#include <doctest/doctest.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "core/error.h"

namespace sof::test {

inline std::string ckpt_scratch(const std::string& name) {
    std::string d = std::string(SOF_BINARY_DIR) + "/test-scratch/ckpt/" + name;
    std::filesystem::remove_all(d);
    std::filesystem::create_directories(d);
    return d;
}

// n floats with distinct bit patterns (includes negative zero, denormals, large values).
inline std::vector<float> pattern(size_t n, uint32_t salt) {
    std::vector<float> v(n);
    uint32_t x = 0x9e3779b9u ^ salt;
    for (size_t i = 0; i < n; i++) {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        uint32_t bits = (x & 0x807fffffu) | ((static_cast<uint32_t>(i % 200) + 20u) << 23);
        if (i == 3) bits = 0x80000000u; // -0.0
        if (i == 5) bits = 0x00000007u; // denormal
        std::memcpy(&v[i], &bits, 4);
    }
    return v;
}

inline bool bit_equal(const std::vector<float>& a, const std::vector<float>& b) {
    return a.size() == b.size() &&
           (a.empty() || std::memcmp(a.data(), b.data(), a.size() * 4) == 0);
}

inline void flip_byte(const std::string& path, long offset) {
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    REQUIRE(f.good());
    f.seekg(offset);
    char c = 0;
    f.read(&c, 1);
    c = static_cast<char>(c ^ 0x5a);
    f.seekp(offset);
    f.write(&c, 1);
}

inline std::string slurp(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

inline void spit(const std::string& path, const std::string& text) {
    std::ofstream f(path, std::ios::binary | std::ios::trunc);
    f << text;
}

// Runs fn, requires a core::Error of `kind` whose message contains every needle.
inline void expect_error(const std::function<void()>& fn, core::ErrorKind kind,
                         const std::vector<std::string>& needles) {
    bool thrown = false;
    try {
        fn();
    } catch (const core::Error& e) {
        thrown = true;
        std::string msg = e.what();
        INFO("message: " << msg);
        CHECK(e.kind() == kind);
        for (const std::string& n : needles)
            CHECK_MESSAGE(msg.find(n) != std::string::npos, "missing '" << n << "'");
    }
    CHECK_MESSAGE(thrown, "expected a core::Error");
}

} // namespace sof::test
