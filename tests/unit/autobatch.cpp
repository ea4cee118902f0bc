// tests/unit/autobatch.cpp — AutoBatch's arithmetic with an injected memory probe (no GPU):
// the fit, the failure bound, the fallbacks, and the global batch for several ranks.
#include "models/train/autobatch.h"
#include "tests/support/testing.h"

using namespace bareyolo::models;

TEST_CASE("autobatch fits memory = 0.5 GB per image + 1 GB to 80% of the free memory") {
  const DeviceMemory memory{.total_gib = 80, .reserved_gib = 1, .allocated_gib = 1};
  const AutobatchResult r = autobatch_per_device(memory, [](int b) { return 0.5 * b + 1; });
  CHECK(r.batch == int((78 * 0.8 - 1) / 0.5));  // 122
  CHECK(r.message.find("batch 122") != std::string::npos);
}

TEST_CASE("autobatch stays below the first batch size that failed") {
  const DeviceMemory memory{.total_gib = 80};
  const AutobatchResult r = autobatch_per_device(memory, [](int b) -> std::optional<double> {
    return b >= 8 ? std::nullopt : std::optional(0.1 * b);
  });
  CHECK(r.batch == 4);
  // A prediction of exactly the failed size (8.5 -> 8) steps back to the size below it too.
  const AutobatchResult at_failure =
      autobatch_per_device({.total_gib = 1.328125}, [](int b) -> std::optional<double> {
        return b >= 8 ? std::nullopt : std::optional(0.125 * b);
      });
  CHECK(at_failure.batch == 4);
  // Only batch 1 ran: no line to fit, and 16 would not fit either.
  const AutobatchResult only_one = autobatch_per_device(
      memory, [](int b) { return b == 1 ? std::optional(0.5) : std::nullopt; });
  CHECK(only_one.batch == 1);
  CHECK(only_one.message.find("one batch size of 1, 2, 4, 8, 16 could be measured; using 1") !=
        std::string::npos);
}

TEST_CASE("autobatch falls back to 16 when the measurements make no sense") {
  const DeviceMemory memory{.total_gib = 8};
  CHECK(autobatch_per_device(memory, [](int) { return 3.0; }).batch == 16);  // flat line
  CHECK(autobatch_per_device(memory, [](int) { return std::optional<double>(); }).batch == 16);
  CHECK(autobatch_per_device(memory, [](int b) { return 1e-6 * b; }).batch == 16);  // > 1024
  // A slope so small that the predicted batch is past any int: still the fallback.
  CHECK(autobatch_per_device(memory, [](int b) { return 1e-15 * b; }).batch == 16);
}

TEST_CASE("global autobatch: times world, capped at nbs, rounded down to a world multiple") {
  std::string message;
  CHECK(global_autobatch(10, 1, 64) == 10);
  CHECK(global_autobatch(10, 4, 64, &message) == 40);
  CHECK(global_autobatch(30, 4, 64, &message) == 64);
  CHECK(message.find("capped at nbs 64") != std::string::npos);
  CHECK(global_autobatch(30, 3, 64) == 63);    // 64 rounded down to a multiple of 3
  CHECK(global_autobatch(1, 128, 64) == 128);  // never below one image per rank
}
