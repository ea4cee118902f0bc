// kernels/cpu/step_guard.cpp — see kernels/step_guard.h.
#include "kernels/step_guard.h"

#include <array>
#include <atomic>

#include "kernels/cuda/runtime/runtime.h"  // defines: cuda::environment_flag

namespace bareyolo::step_guard {

namespace {

#ifdef NDEBUG
constexpr bool kDebugBuild = false;
#else
constexpr bool kDebugBuild = true;
#endif

std::atomic<bool> enforcing_on{kDebugBuild || cuda::environment_flag("BAREYOLO_STEP_GUARD", false)};
std::atomic<bool> enforcing_allocations{false};
std::array<std::atomic<uint64_t>, 3> events{};

thread_local int step_depth = 0;
thread_local bool step_warm = false;

const char* describe(Event event) {
  switch (event) {
    case Event::host_read:
      return "a host read of a tensor's values";
    case Event::host_wait:
      return "a host wait on the device";
    case Event::system_allocation:
      return "an allocation from the system allocator";
  }
  return "?";
}

const char* remedy(Event event) {
  switch (event) {
    case Event::host_read:
      return "keep the value on the device and read it after the step";
    case Event::host_wait:
      return "order the work with events on the device's streams instead";
    case Event::system_allocation:
      return "allocate it before the step, or through the caching allocator";
  }
  return "";
}

// The site's path from the repository's root down (the compiler records the absolute path).
std::string_view relative(std::string_view path) {
  for (std::string_view room :
       {"/kernels/", "/engine/", "/data/", "/models/", "/tools/", "/bench/", "/tests/"}) {
    const size_t at = path.rfind(room);
    if (at != std::string_view::npos) return path.substr(at + 1);
  }
  return path;
}

}  // namespace

Scope::Scope(bool warm) : outer_warm_(step_warm) {
  ++step_depth;
  step_warm = warm;
}

Scope::~Scope() {
  --step_depth;
  step_warm = outer_warm_;
}

bool inside_step() { return step_depth > 0; }

void set_enforcing(bool on) { enforcing_on = on; }
void set_enforcing_allocations(bool on) { enforcing_allocations = on; }
bool enforcing() { return enforcing_on; }

void report(Event event, std::string_view what, SourceLocation where) {
  if (!inside_step() || (event == Event::system_allocation && !step_warm)) return;
  ++events[size_t(event)];
  if (!enforcing() || (event == Event::system_allocation && !enforcing_allocations)) return;
  throw StepGuardViolation("step guard: " + std::string(describe(event)) + " (" +
                           std::string(what) + ") at " + std::string(relative(where.file_name())) +
                           ":" + std::to_string(where.line()) +
                           " inside a training step: " + remedy(event) + " (kernels/step_guard.h)");
}

uint64_t count(Event event) { return events[size_t(event)]; }

}  // namespace bareyolo::step_guard
