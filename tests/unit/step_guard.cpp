// tests/unit/step_guard.cpp — the step guard (kernels/step_guard.h) itself: inside a step it
// refuses a planted host read and, once the step is warm, an allocation the cache cannot serve,
// each naming the line that did it; outside a step the same calls are free and uncounted. The
// Solver's steps under the guard: tests/unit/solver.cpp ("step guard ...").
#include "kernels/step_guard.h"

#include <string>

#include "engine/tensor.h"
#include "tests/support/testing.h"

using namespace bareyolo;
using step_guard::Event;
using step_guard::StepGuardViolation;

namespace {

std::string site(int line) { return "tests/unit/step_guard.cpp:" + std::to_string(line); }

}  // namespace

TEST_CASE("step guard refuses a planted host read inside a step, naming its line") {
  REQUIRE(step_guard::enforcing());  // the test runner turns it on
  const Tensor values = Tensor::zeros({1, 2, 3, 4});
  const uint64_t reads = step_guard::count(Event::host_read);
  CHECK(values.to_vector<float>().size() == 24);  // outside a step: allowed, not counted
  CHECK(step_guard::count(Event::host_read) == reads);
  {
    const step_guard::Scope step(/*warm=*/false);
    CHECK(step_guard::inside_step());
    // The read outside the macro: GCC and clang name different lines of a macro's arguments.
    const int line = __LINE__ + 1;
    const auto read = [&] { return values.to_doubles(); };
    CHECK_THROWS_WITH_AS(read(), doctest::Contains(site(line).c_str()), StepGuardViolation);
    CHECK_THROWS_WITH_AS(values.to_vector<float>(),
                         doctest::Contains("a host read of a tensor's values"), StepGuardViolation);
  }
  CHECK_FALSE(step_guard::inside_step());
  CHECK(step_guard::count(Event::host_read) == reads + 2);
}

TEST_CASE("step guard counts without throwing when it is not enforcing") {
  const Tensor values = Tensor::zeros({1, 1, 1, 3});
  const uint64_t reads = step_guard::count(Event::host_read);
  step_guard::set_enforcing(false);
  {
    const step_guard::Scope step(/*warm=*/true);
    CHECK(values.to_vector<float>().size() == 3);
  }
  step_guard::set_enforcing(true);
  CHECK(step_guard::count(Event::host_read) == reads + 1);
}

TEST_CASE("step guard refuses a system allocation in a warm step only") {
  step_guard::set_enforcing_allocations(true);
  // A size no other test allocates, so the host cache cannot hold a block of its class yet.
  const Shape4 odd{1, 1, 1, 987'653};
  {
    const step_guard::Scope cold(/*warm=*/false);  // a step's first run fills the cache
    const Tensor first = Tensor::empty(odd);
  }
  {
    const step_guard::Scope warm(/*warm=*/true);
    const Tensor again = Tensor::empty(odd);  // the block the cold step gave back
    const Shape4 unseen{1, 1, 1, 1'234'567};
    const int line = __LINE__ + 1;
    const auto allocate = [&] { return Tensor::empty(unseen); };
    CHECK_THROWS_WITH_AS(allocate(), doctest::Contains(site(line).c_str()), StepGuardViolation);
  }
  step_guard::set_enforcing_allocations(false);
}
