// explain()'s form of a plan, written once for explain() and for
// flashsplit._C.heuristic.make_launch_plan, so the two cannot differ.
#pragma once

#include <pybind11/pybind11.h>

#include <cstdint>

#include "core/plan.h"

namespace flashsplit {

// {path, kernel, num_splits, reason, verification, details}: details holds the kernel internals
// of a native plan (tiles, the Hopper walk, the launches) and is empty on the reference path.
// b, sq, h, hk: the call's batch, query rows and heads (for details' grid_blocks).
pybind11::dict explain_dict(const LaunchPlan& plan, int64_t b, int64_t sq, int64_t h, int64_t hk);

// What the launchers ran (kernels/attn_launch.h), in the keys of explain()'s details, beside
// the kernel family and G.
pybind11::dict launch_record_dict(const LaunchRecord& record);

}  // namespace flashsplit
