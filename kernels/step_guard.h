// kernels/step_guard.h — the proof that a training step never makes the host wait for the device.
//
// A GPU is fast only while the host queues work ahead of it. Inside a step three things break
// that: a host read of a tensor's values (the host waits until the device has produced them), a
// host wait on the device (a synchronise, a blocking copy), and an allocation from the system
// allocator (cudaMalloc synchronises; a step that repeats itself must reuse its memory, which is
// also what lets it be captured as one CUDA graph). Each hook below reports one of those events
// with the call site that caused it. The guard counts the events of every step; while enforcing,
// an event inside a step throws StepGuardViolation naming the site instead.
//
//   Scope             on the step's thread for the step's duration (Solver::step): inside_step()
//   report(event)     called by Tensor's host reads, the runtime's waits and the allocators
//   count(event)      events inside steps so far, process-wide (results.jsonl's host_waits)
//
// Enforcing is on in debug builds, in the test programs and under BAREYOLO_STEP_GUARD=1.
// Allocations are checked only in a warm step: one of a kind (shapes, whether it updates) that
// ran before, since the first step of a kind fills the caching allocator.
// On the CPU the kernels read and write host memory themselves; what the guard checks there is
// the same API calls, so a CPU run proves the GPU path free of them.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>

#include "kernels/source_location.h"

namespace bareyolo::step_guard {

enum class Event { host_read, host_wait, system_allocation };

class StepGuardViolation : public std::logic_error {
 public:
  using std::logic_error::logic_error;
};

// Marks the calling thread as inside a training step for the scope's lifetime. `warm`: a step
// of this kind ran before, so an allocation from the system allocator is an event too.
class Scope {
 public:
  explicit Scope(bool warm);
  ~Scope();
  Scope(const Scope&) = delete;
  Scope& operator=(const Scope&) = delete;

 private:
  bool outer_warm_;
};

bool inside_step();

void set_enforcing(bool on);
bool enforcing();
// Whether an allocation event throws too (while enforcing): off by default, since a real run's
// steps still meet sizes their kind has not seen (a batch with more labels, a trimmed host
// cache); the tests that run a step of fixed shape turn it on.
void set_enforcing_allocations(bool on);

// An event at `where`; `what` names the call ("Tensor::to_vector", "a 4096-byte tensor").
// Outside a step (and for allocations, outside a warm one) it is not an event.
void report(Event event, std::string_view what, SourceLocation where = SourceLocation::current());

// Events inside steps since the process started (every thread's).
uint64_t count(Event event);

}  // namespace bareyolo::step_guard
