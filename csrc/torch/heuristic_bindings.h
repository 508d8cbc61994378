// flashsplit._C.heuristic: the plan's split rules (csrc/core) bound for Python, so the tuner
// (benchmarks/tune_num_splits.py) models exactly what explain() reports and can vary the
// heuristic's constants. Pure C++: present in the CPU-only build too.
#pragma once

#include <pybind11/pybind11.h>

namespace flashsplit {

// Adds the submodule `heuristic` to m.
void bind_heuristic(pybind11::module_& m);

}  // namespace flashsplit
