// engine/trace_svg.h — one traced step of every rank drawn as an SVG timeline: docs/ddp.md's
// pictures of a step, made from a `train --trace` file (engine/trace.h's events), so that they
// stay true as the code changes.
//
// The step is the last traced optimizer step (last_step, trace_analysis.h); the drawing spans
// the union of the ranks' windows on one time axis in ms, since on one machine every rank
// records the same steady clock. Each rank gets a group of four rows, top to bottom:
//
//   compute       forward, backward, the loss, the optimizer step (anything else grey)
//   buckets       each gradient bucket from launch to done, labelled with its number
//   collectives   SyncBN's meetings and the other collectives (the loss's sums, ...)
//   loader        "data wait"
//
// and a dashed line where its last backward ended, which shows how much of each bucket's
// all-reduce ran behind backward. Ranges that overlap on a row (a bucket queued behind the one
// in flight) are stacked in lanes so that none hides another; a range narrower than a pixel is
// drawn a pixel wide, so that SyncBN's meetings of tens of microseconds stay visible. Every
// range carries a <title> with its name and times, which a browser shows on hover.
#pragma once

#include <string>
#include <vector>

#include "engine/trace.h"

namespace bareyolo::trace {

// The SVG document of the last traced step of `ranks` (ranks[r]: rank r's events). Throws
// std::invalid_argument when no rank has an optimizer step to draw.
std::string step_svg(const std::vector<std::vector<Event>>& ranks);

}  // namespace bareyolo::trace
