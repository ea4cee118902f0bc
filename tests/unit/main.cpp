// tests/unit/main.cpp — the doctest runner for the CPU unit tests (tests/unit/*.cpp).
#define DOCTEST_CONFIG_IMPLEMENT
#include "tests/support/doctest_runner.h"
#include "tests/support/sanitizers.h"

#if BAREYOLO_TEST_ASAN
// Under ASan an allocation beyond its limit returns null, as malloc does, instead of aborting:
// the tests of out-of-memory messages need the failure the program would see.
extern "C" const char* __asan_default_options() { return "allocator_may_return_null=1"; }
#endif

int main(int argc, char** argv) { return bareyolo::testing::run_doctest(argc, argv); }
