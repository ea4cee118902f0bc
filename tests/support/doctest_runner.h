// tests/support/doctest_runner.h — the doctest run of every test binary (included once, by its
// main.cpp). ctest runs one doctest case per entry (--test-case=NAME); an entry whose filter
// matches no case would pass without running anything — as happened to names holding a ';',
// which CMake splits into two entries. Here such a run fails, naming its filter.
#pragma once

#include <doctest/doctest.h>

#include <cstdio>
#include <cstring>
#include <string>

#include "kernels/step_guard.h"
#include "tests/support/skip.h"

namespace bareyolo::testing {

// Counts the test cases that passed the run's filters (a listener: it reports nothing).
class FilterCountListener : public doctest::IReporter {
 public:
  explicit FilterCountListener(const doctest::ContextOptions&) {}
  static unsigned& cases_run() {
    static unsigned count = 0;
    return count;
  }
  void test_run_end(const doctest::TestRunStats& stats) override {
    cases_run() = stats.numTestCasesPassingFilters;
  }
  void report_query(const doctest::QueryData&) override {}
  void test_run_start() override {}
  void test_case_start(const doctest::TestCaseData&) override {}
  void test_case_reenter(const doctest::TestCaseData&) override {}
  void test_case_end(const doctest::CurrentTestCaseStats&) override {}
  void test_case_exception(const doctest::TestCaseException&) override {}
  void subcase_start(const doctest::SubcaseSignature&) override {}
  void subcase_end() override {}
  void log_assert(const doctest::AssertData&) override {}
  void log_message(const doctest::MessageData&) override {}
  void test_case_skipped(const doctest::TestCaseData&) override {}
};
REGISTER_LISTENER("bareyolo_filter_count", 1, FilterCountListener);

// The --test-case filter of the command line ("" when none).
inline std::string test_case_filter(int argc, char** argv) {
  for (int i = 1; i < argc; ++i)
    for (const char* prefix : {"--test-case=", "-tc="})
      if (std::string arg = argv[i]; arg.rfind(prefix, 0) == 0) return arg.substr(strlen(prefix));
  return "";
}

// doctest's run, failed when a --test-case filter matched no case.
inline int run_doctest(int argc, char** argv) {
  // Every training step a test runs is guarded: a host read, a host wait or (once warm) a system
  // allocation inside one fails the test at its call site (kernels/step_guard.h).
  step_guard::set_enforcing(true);
  doctest::Context context(argc, argv);
  const int result = context.run();
  if (only_listing_tests(argc, argv)) return result;  // ctest's discovery: nothing was to run
  const std::string filter = test_case_filter(argc, argv);
  if (!filter.empty() && FilterCountListener::cases_run() == 0) {
    std::printf(
        "FAILED: --test-case=%s matches no test case, so nothing ran (a ';' in a case name "
        "splits its ctest entry; rename the case)\n",
        filter.c_str());
    return 1;
  }
  return result;
}

}  // namespace bareyolo::testing
