// tools/bareyolo/resume_flags.h — `train --resume` continues the run it names as that run was
// configured. A flag given beside it (on the command line or in --config) that the saved
// configuration holds is checked against it:
//   - the same value: nothing to do;
//   - more --epochs: applied, with a note (the learning-rate schedule stretches from the
//     resumed step on); --workers: applied (the loader's threads change no result);
//   - anything else (fewer epochs, another --imgsz, --batch, --data, --hyp, --name, ...):
//     refused before anything runs, naming the difference:
//     "--imgsz 128 given, the run was started with --imgsz 640".
// The launch's flags (--device, --nproc-per-node, --max-steps, ...) are not part of the
// configuration and apply as for a new run, except its numerics (--amp, --tf32, --winograd,
// --grad-dtype): the run keeps its own, and a flag that asks for others is refused.
#pragma once

#include <CLI/CLI.hpp>

#include <functional>
#include <string>

#include "models/train/options.h"

namespace bareyolo {

// `request`: the options as the flags give them, prepared as for a new run, with `resume` set;
// `command`: the train subcommand, which knows which flags were given. Returns what the request
// changes; `note` receives a sentence per change. Throws std::invalid_argument for a refusal.
models::ResumeChanges resume_changes(const CLI::App& command, const models::TrainOptions& request,
                                     const std::function<void(const std::string&)>& note);

}  // namespace bareyolo
