// Shared pieces of the fuzz harnesses: the libFuzzer entry point every harness defines, a scratch
// file per process for the readers that take a path, and what counts as a finding.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace sof::fuzz {

// A directory of this process for the files a harness writes ($TMPDIR or /tmp, created once).
const std::string& scratch_dir();

// Writes `data` to `path` (replacing it); aborts on failure (a broken harness, not a finding).
void write_file(const std::string& path, const uint8_t* data, size_t size);

// The harness accepted the input (it parsed without an error): the seeded driver keeps such
// inputs as seeds for further mutation (a cheap stand-in for coverage feedback).
void note_accepted();

// A finding that is not a crash: prints `what` and aborts (the driver saves the input).
[[noreturn]] void finding(const std::string& what);

} // namespace sof::fuzz

// Runs `body`; a core::Error (the documented way to refuse bad input) is fine, anything else that
// escapes (std::out_of_range, a JSON library's type_error, bad_alloc) is a finding.
#define SOF_FUZZ_EXPECT_ONLY_CORE_ERRORS(body)                                                     \
    try {                                                                                          \
        body;                                                                                      \
        ::sof::fuzz::note_accepted();                                                              \
    } catch (const ::sof::core::Error&) {                                                          \
    } catch (const std::exception& e) {                                                            \
        ::sof::fuzz::finding(std::string("an exception other than core::Error escaped: ") +        \
                             e.what());                                                            \
    }
