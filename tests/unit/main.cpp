// tests/unit/main.cpp — the doctest runner for the CPU unit tests (tests/unit/*.cpp).
#define DOCTEST_CONFIG_IMPLEMENT
#include "tests/support/doctest_runner.h"

int main(int argc, char** argv) { return bareyolo::testing::run_doctest(argc, argv); }
