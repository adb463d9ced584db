// The kernel seam's structure (no GPU needed): every op of kOps has X.h, cpu/X.cpp, cuda/X.cu and
// op driver cases for both twins; every op header is listed; lib/model calls ops only via the seam.
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>

#include "harness.h"
#include "kernels/ops.h"

namespace fs = std::filesystem;
using namespace sof;

namespace {

const fs::path kRoot = SOF_SOURCE_DIR;

bool listed(const std::string& op) {
    for (const char* k : kernels::kOps)
        if (op == k) return true;
    return false;
}

// The file without its // comments (a comment may name what the code must not do).
std::string code_of(const fs::path& p) {
    std::ifstream in(p);
    std::string line, out;
    while (std::getline(in, line)) {
        const size_t c = line.find("//");
        out += (c == std::string::npos ? line : line.substr(0, c)) + "\n";
    }
    return out;
}

} // namespace

TEST_CASE("structure: every op has its header, both twins and op driver cases" *
          doctest::test_suite("style")) {
    const fs::path k = kRoot / "lib" / "kernels";
    for (const char* op_name : kernels::kOps) {
        const std::string op = op_name;
        INFO("op " << op << " (lib/kernels/ops.h)");
        CHECK_MESSAGE(fs::exists(k / (op + ".h")), "missing lib/kernels/" << op << ".h");
        CHECK_MESSAGE(fs::exists(k / "cpu" / (op + ".cpp")),
                      "missing the CPU twin lib/kernels/cpu/" << op << ".cpp");
        CHECK_MESSAGE(fs::exists(k / "cuda" / (op + ".cu")),
                      "missing the CUDA twin lib/kernels/cuda/" << op << ".cu");
        const auto& reg = ktest::registered();
        const auto it = reg.find(op);
        const bool cpu = it != reg.end() && it->second.count(ktest::Part::Cpu) > 0;
        const bool gpu = it != reg.end() && it->second.count(ktest::Part::Gpu) > 0;
        CHECK_MESSAGE(cpu,
                      "no SOF_OP_CPU case for " << op << " (tests/kernels/op_" << op << ".cpp)");
        CHECK_MESSAGE(gpu,
                      "no SOF_OP_GPU case for " << op << " (tests/kernels/op_" << op << ".cpp)");
    }
    for (const auto& e : fs::directory_iterator(k)) {
        const fs::path p = e.path();
        if (p.extension() != ".h") continue;
        const std::string stem = p.stem().string();
        if (stem == "exec" || stem == "blas" || stem == "scratch" || stem == "ops") continue;
        CHECK_MESSAGE(listed(stem), "lib/kernels/" << stem << ".h is not in kOps (ops.h)");
    }
    for (const auto& [op, parts] : ktest::registered())
        CHECK_MESSAGE(listed(op), "the op driver has cases for " << op << ", which is not in kOps");
}

TEST_CASE("structure: lib/model calls ops only through the seam (no OpenBLAS, no cpu:: kernels)" *
          doctest::test_suite("style")) {
    const fs::path m = kRoot / "lib" / "model";
    const std::regex cblas(R"(\bcblas_\w+|#\s*include\s*[<"]cblas\.h[>"])");
    const std::regex cpu_call(R"(\bcpu::\w+)");
    const std::regex allowed(R"((kernels::)?cpu::use_single_threaded_blas\(\))");
    int files = 0;
    for (const auto& e : fs::recursive_directory_iterator(m)) {
        const fs::path p = e.path();
        const std::string ext = p.extension().string();
        if (ext != ".h" && ext != ".cpp" && ext != ".cu" && ext != ".cuh") continue;
        files++;
        const std::string code = code_of(p);
        std::smatch hit;
        const std::string rel = fs::relative(p, kRoot).string();
        CHECK_MESSAGE(!std::regex_search(code, hit, cblas),
                      rel << " uses OpenBLAS directly (" << hit.str() << "): go through kernels::");
        // the one cpu:: call that is no kernel: OpenBLAS to one thread, process-wide, when the
        // model runs on the CPU twins (their OpenMP tiles are the parallelism)
        const std::string calls = std::regex_replace(code, allowed, "");
        CHECK_MESSAGE(!std::regex_search(calls, hit, cpu_call),
                      rel << " calls a CPU twin directly (" << hit.str()
                          << "): call the op of kernels/X.h with an Exec");
    }
    CHECK(files > 0);
}

TEST_CASE("structure: the checks above can fail" * doctest::test_suite("style")) {
    // the patterns of the lib/model check match what they must match, and not the seam's calls
    const std::regex cblas(R"(\bcblas_\w+|#\s*include\s*[<"]cblas\.h[>"])");
    const std::regex cpu_call(R"(\bcpu::\w+)");
    CHECK(std::regex_search(std::string("  cblas_sgemm(CblasRowMajor"), cblas));
    CHECK(std::regex_search(std::string("#include <cblas.h>"), cblas));
    CHECK(std::regex_search(std::string("    cpu::matmul_forward(out"), cpu_call));
    CHECK(std::regex_search(std::string("kernels::cpu::gelu_forward(a"), cpu_call));
    CHECK(std::regex_search(std::string("x = model::cpu::layernorm(x"), cpu_call));
    CHECK_FALSE(std::regex_search(std::string("kernels::matmul_forward(ex, out"), cpu_call));
    CHECK_FALSE(std::regex_search(std::string("auto ex = kernels::cpu_exec();"), cpu_call));
    const std::regex allowed(R"((kernels::)?cpu::use_single_threaded_blas\(\))");
    CHECK(std::regex_replace(std::string("kernels::cpu::use_single_threaded_blas();"), allowed,
                             "") == ";");
    CHECK(std::regex_search(std::regex_replace(std::string("cpu::use_single_threaded_blas(); "
                                                           "cpu::gelu_forward(a"),
                                               allowed, ""),
                            cpu_call));
    CHECK(code_of(kRoot / "lib" / "kernels" / "ops.h").find("//") == std::string::npos);
    // an op without cases is reported: the registry knows only registered ops
    CHECK(ktest::registered().count("no_such_op") == 0);
}
