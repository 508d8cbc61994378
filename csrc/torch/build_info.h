// What this build contains, from the macros setup.py defines.
#pragma once

#include "core/problem.h"

namespace flashsplit {

BuildInfo current_build_info();

}  // namespace flashsplit
