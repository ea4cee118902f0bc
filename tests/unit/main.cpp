// tests/unit/main.cpp — the doctest runner for the CPU unit tests (tests/test_*.cpp).
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>
