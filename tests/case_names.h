// A doctest listener that prints each test case's (and subcase's) name before it runs, flushed,
// so the log of a test that crashes, hangs or poisons the GPU says which case it was in.
#pragma once

#include <doctest/doctest.h>

#include <cstdio>

namespace sof::test {

// Include in one source file of a test executable (the one with its main(), if it has one) and the
// listener runs in every case of that executable.
struct CaseNames : doctest::IReporter {
    explicit CaseNames(const doctest::ContextOptions&) {}
    void report_query(const doctest::QueryData&) override {}
    void test_run_start() override {}
    void test_run_end(const doctest::TestRunStats&) override {}
    void test_case_start(const doctest::TestCaseData& tc) override {
        std::printf("[case] %s (%s:%d)\n", tc.m_name, tc.m_file.c_str(), tc.m_line);
        std::fflush(stdout);
    }
    void test_case_reenter(const doctest::TestCaseData&) override {}
    void test_case_end(const doctest::CurrentTestCaseStats& st) override {
        std::printf("[case done] %s in %.1f s\n", st.testCaseSuccess ? "ok" : "FAILED", st.seconds);
        std::fflush(stdout);
    }
    void test_case_exception(const doctest::TestCaseException&) override {}
    void subcase_start(const doctest::SubcaseSignature& s) override {
        std::printf("[subcase] %s\n", s.m_name.c_str());
        std::fflush(stdout);
    }
    void subcase_end() override {}
    void log_assert(const doctest::AssertData&) override {}
    void log_message(const doctest::MessageData&) override {}
    void test_case_skipped(const doctest::TestCaseData&) override {}
};

REGISTER_LISTENER("case_names", 1, CaseNames);

} // namespace sof::test
