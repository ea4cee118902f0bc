// tools/bareyolo/on_off_flags.h — the `bareyolo train` flags that switch one setting on and off
// (--amp and --no-amp, ...): given together they contradict each other (train_command.cpp), a
// --config entry of either takes the command line's place (train_command.cpp), and a resume
// counts either as asking for the setting (resume_flags.cpp).
#pragma once

#include <string>
#include <utility>

namespace bareyolo {

inline constexpr std::pair<const char*, const char*> kOnOffFlags[] = {{"--sync-bn", "--no-sync-bn"},
                                                                      {"--amp", "--no-amp"}};

// The flag that switches off what `name` switches on, or on what it switches off; "" if none.
inline std::string opposite_flag(const std::string& name) {
  for (const auto& [on, off] : kOnOffFlags) {
    if (name == on) return off;
    if (name == off) return on;
  }
  return "";
}

}  // namespace bareyolo
