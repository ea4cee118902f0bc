// tests/dist/main.cpp — the runner for the multi-process tests (tests/dist/*.cpp): each test
// forks its ranks, which talk over loopback TCP; ctest runs them one at a time (RUN_SERIAL).
#define DOCTEST_CONFIG_IMPLEMENT
#include "tests/support/doctest_runner.h"

int main(int argc, char** argv) { return bareyolo::testing::run_doctest(argc, argv); }
