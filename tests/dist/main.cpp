// tests/dist/main.cpp — the runner for the multi-process tests (tests/dist_*.cpp): each test
// forks its ranks, which talk over loopback TCP; ctest runs them one at a time (RUN_SERIAL).
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>
