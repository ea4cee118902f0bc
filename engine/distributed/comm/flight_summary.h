// engine/distributed/comm/flight_summary.h — the ranks' flight records read together: what each
// last did, who never arrived, and where the ranks' collectives first differ.
//
// `bareyolo trace-summary <run>/flight` prints it. The records are the files the watched
// communicator writes when a collective fails (flight_recorder.h), one per rank that could
// write one: a rank killed outright leaves none, and the summary says so.
#pragma once

#include <string>
#include <vector>

#include "engine/distributed/comm/flight_recorder.h"

namespace bareyolo::dist {

// Every rank<R>.json in `folder`, by rank. Throws naming the folder when it holds none.
std::vector<FlightFile> read_flight_folder(const std::string& folder);

// The summary as lines of text: per rank its newest collective issued and finished and why it
// wrote; the ranks that never reached the newest collective any rank issued; the first
// collective number at which two ranks' fingerprints differ, naming both.
std::vector<std::string> summarize_flights(const std::vector<FlightFile>& ranks);

}  // namespace bareyolo::dist
