// `superoffload topo` (cmd_topo linked in directly): machine and placement report for the fixture
// and for this machine (dry run), and usage errors.
#include <doctest/doctest.h>

#include <string>
#include <utility>
#include <vector>

#include "../../app/commands.h"
#include "core/error.h"
#include "run_command.h"
#include "core/strfmt.h"

namespace {

// Runs cmd_topo with `args`, returning what it printed on stdout.
std::string run_topo(std::vector<std::string> args) {
    return sof::test::run_command(sof::app::cmd_topo, std::move(args), "cmd_topo_out.txt");
}

} // namespace

TEST_CASE("topo command: fixture, local rank 2 of 4") {
    std::string xml = std::string(SOF_SOURCE_DIR) + "/tests/topo/gh200-4x.xml";
    std::string out = run_topo({"--xml", xml, "--local-rank", "2", "--local-size", "4"});
    CHECK(out.find("4 packages, 288 cores, 288 PUs, 8 NUMA nodes, 4 GPUs") != std::string::npos);
    CHECK(out.find("placement: local rank 2/4: NUMA node 2, 72 cores (PUs 144-215), GPU cuda2") !=
          std::string::npos);
    CHECK(out.find("dry run") != std::string::npos);
    // local size defaults to the GPU count
    out = run_topo({"--xml", xml, "--local-rank", "3"});
    CHECK(out.find("local rank 3/4: NUMA node 3") != std::string::npos);
}

TEST_CASE("topo command: this machine, dry run") {
    std::string out = run_topo({});
    CHECK(out.find("machine (this system)") != std::string::npos);
    CHECK(out.find("placement: local rank 0/1") != std::string::npos);
}

TEST_CASE("topo command: --ranks N shows every local rank's placement") {
    std::string xml = std::string(SOF_SOURCE_DIR) + "/tests/topo/gh200-4x.xml";
    // before: listed in the program's --help, refused as an unknown argument
    std::string out = run_topo({"--xml", xml, "--ranks", "4"});
    for (int r = 0; r < 4; r++)
        CHECK(out.find(sof::core::strfmt("placement: local rank %d/4: NUMA node %d", r, r)) !=
              std::string::npos);
    out = run_topo({"--ranks", "2"}); // this machine
    CHECK(out.find("placement: local rank 1/2") != std::string::npos);
}

TEST_CASE("topo command: usage errors") {
    for (std::vector<std::string> bad : {std::vector<std::string>{"--frobnicate"},
                                         {"--local-rank"},
                                         {"--local-rank", "x"},
                                         {"--ranks", "0"},
                                         {"--ranks", "2", "--bind"},
                                         {"stray"}}) {
        try {
            run_topo(bad);
            FAIL("expected a usage error");
        } catch (const sof::core::Error& e) {
            CHECK(e.kind() == sof::core::ErrorKind::Usage);
        }
    }
}
