// What this build contains, from the macros setup.py defines.
#pragma once

#include <string>

#include "core/problem.h"

namespace flashsplit {

BuildInfo current_build_info();

// A digest of the sources and options this build was compiled from (setup.py's
// FLASHSPLIT_BUILD_ID): a verify stamp admits a GPU for the build it was written by only.
std::string build_id();

}  // namespace flashsplit
