// tests/support/winograd_use.h — sets when the CPU convolutions run Winograd
// (kernels/cpu/winograd.h) for a scope, then puts back what it was.
#pragma once

#include "kernels/cpu/winograd.h"

namespace bareyolo::testing {

struct ScopedWinogradUse {
  cpu::WinogradUse saved = cpu::winograd_use();
  explicit ScopedWinogradUse(cpu::WinogradUse use) { cpu::set_winograd_use(use); }
  ~ScopedWinogradUse() { cpu::set_winograd_use(saved); }
  ScopedWinogradUse(const ScopedWinogradUse&) = delete;
  ScopedWinogradUse& operator=(const ScopedWinogradUse&) = delete;
};

}  // namespace bareyolo::testing
