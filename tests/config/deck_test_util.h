// Helpers shared by the deck tests: load-or-capture-the-error and scratch files.
// Each expects the loader to throw a Config error and returns its message for CHECKs.
#pragma once

#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "config/deck.h"
#include "core/error.h"

namespace sof::test {

// The message of the Config error that loading `yaml` (named deck.yaml) with `ov` throws.
inline std::string deck_error(const std::string& yaml, const std::vector<std::string>& ov = {},
                              const std::string& name = "deck.yaml") {
    try {
        config::load_deck_from_string(yaml, name, ov);
    } catch (const core::Error& e) {
        CHECK(e.kind() == core::ErrorKind::Config);
        return e.what();
    }
    FAIL("expected a config error for:\n" << yaml);
    return "";
}

inline bool contains(const std::string& hay, const std::string& needle) {
    return hay.find(needle) != std::string::npos;
}

// A fresh scratch directory under the build tree.
inline std::string scratch(const std::string& name) {
    std::string d = std::string(SOF_BINARY_DIR) + "/test-scratch/config/" + name;
    std::filesystem::remove_all(d);
    std::filesystem::create_directories(d);
    return d;
}

inline void write_file(const std::string& path, const std::string& text) {
    std::ofstream f(path, std::ios::binary);
    f << text;
}

} // namespace sof::test
