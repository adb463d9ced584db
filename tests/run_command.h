// Runs one of the program's commands linked into a test (app/commands.h: int cmd(argc, argv))
// with its stdout captured to a file in the build tree, and returns what it printed.
#pragma once

#include <doctest/doctest.h>

#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace sof::test {

// cmd(args) with stdout sent to SOF_BINARY_DIR/<out_name> and restored afterwards (also when cmd
// throws: the exception goes on to the caller); CHECKs that it returned 0.
template <class Cmd>
std::string run_command(Cmd cmd, std::vector<std::string> args, const std::string& out_name) {
    std::vector<char*> argv;
    for (std::string& a : args)
        argv.push_back(a.data());
    const std::string path = std::string(SOF_BINARY_DIR) + "/" + out_name;
    std::fflush(stdout);
    const int saved = dup(1);
    REQUIRE(std::freopen(path.c_str(), "w", stdout));
    int rc = -1;
    try {
        rc = cmd(static_cast<int>(argv.size()), argv.data());
    } catch (...) {
        std::fflush(stdout);
        dup2(saved, 1);
        close(saved);
        throw;
    }
    std::fflush(stdout);
    dup2(saved, 1);
    close(saved);
    CHECK(rc == 0);
    std::ifstream in(path);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

} // namespace sof::test
