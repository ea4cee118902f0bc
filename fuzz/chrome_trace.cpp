// fuzz/chrome_trace.cpp — fuzz target: a `train --trace` file read back by `bareyolo
// trace-summary` (engine/trace_analysis.h, engine/trace_svg.h): parsed, each rank's step
// anatomy and shares, SyncBN's meeting costs and the SVG timeline, as the command does.
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "engine/trace_analysis.h"
#include "engine/trace_svg.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace trace = bareyolo::trace;
  const std::string text(reinterpret_cast<const char*>(data), size);
  std::vector<std::vector<trace::Event>> ranks;
  try {
    ranks = trace::events_from_chrome_json(text);
  } catch (const std::invalid_argument&) {  // a refusal naming the event: what bad input gets
    return 0;
  }
  for (const std::vector<trace::Event>& events : ranks) {
    (void)trace::step_anatomy(events);
    (void)trace::step_shares(events);
  }
  (void)trace::meeting_costs(ranks);
  try {
    (void)trace::step_svg(ranks);
  } catch (const std::invalid_argument&) {  // nothing to draw
  }
  return 0;
}
