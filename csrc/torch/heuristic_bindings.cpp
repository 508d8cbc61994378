#include "heuristic_bindings.h"

#include <pybind11/stl.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "build_info.h"
#include "core/gate.h"
#include "core/plan.h"
#include "core/portable_tiles.h"
#include "core/problem.h"
#include "core/split_heuristic.h"
#include "core/tiles.h"
#include "explain_dict.h"

namespace flashsplit {
namespace {

namespace py = pybind11;

// Every field of SplitHeuristicConstants, in declaration order. kConstantFieldsBound below
// stops the build when the struct gains a field this list lacks.
#define FLASHSPLIT_CONSTANT_FIELDS(X)                                                         \
  X(hopper_iteration_us_d64) X(hopper_iteration_us_d128) X(portable_iteration_us_d64)       \
  X(portable_iteration_us_d128) X(narrow_iteration_us) X(slots_per_sm_narrow)               \
  X(narrow_crowding) X(co_resident_speedup) X(block_overhead) X(block_overhead_hopper)      \
  X(narrow_block_overhead) X(dram_bytes_per_us) X(packed_dram_bytes_per_us)                 \
  X(packed_sm_bytes_per_us) X(packed_wave_latency_us) X(packed_one_wave_split_penalty)      \
  X(one_wave_imbalance)                                                                     \
  X(partial_wave_penalty) X(split_latency_us) X(combine_us) X(narrow_chunk_latency_us)      \
  X(narrow_combine_us) X(min_gain) X(min_gain_multi_wave) X(multi_wave_grid) X(max_splits)  \
  X(min_key_blocks_per_split)

// The number of fields of an aggregate: T{f, f, ...} compiles with at most that many.
struct AnyField {
  template <class T>
  constexpr operator T() const { return T{}; }
};

template <class T, class... Fields>
constexpr auto initialises(int) -> decltype(T{std::declval<Fields>()...}, true) {
  return true;
}
template <class T, class... Fields>
constexpr bool initialises(...) { return false; }

template <class T, class... Fields>
constexpr std::size_t field_count() {
  if constexpr (initialises<T, Fields..., AnyField>(0)) {
    return field_count<T, Fields..., AnyField>();
  } else {
    return sizeof...(Fields);
  }
}

#define FLASHSPLIT_COUNT_FIELD(name) +1
constexpr std::size_t kConstantFieldsBound = 0 FLASHSPLIT_CONSTANT_FIELDS(FLASHSPLIT_COUNT_FIELD);
#undef FLASHSPLIT_COUNT_FIELD
static_assert(field_count<SplitHeuristicConstants>() == kConstantFieldsBound,
              "SplitHeuristicConstants changed: list every field in FLASHSPLIT_CONSTANT_FIELDS");

std::vector<std::string> constant_fields() {
  return {
#define FLASHSPLIT_NAME_FIELD(name) #name,
      FLASHSPLIT_CONSTANT_FIELDS(FLASHSPLIT_NAME_FIELD)
#undef FLASHSPLIT_NAME_FIELD
  };
}

py::dict constants_dict(const SplitHeuristicConstants& c) {
  py::dict d;
#define FLASHSPLIT_DICT_FIELD(name) d[#name] = c.name;
  FLASHSPLIT_CONSTANT_FIELDS(FLASHSPLIT_DICT_FIELD)
#undef FLASHSPLIT_DICT_FIELD
  return d;
}

// Sets one field by name; an int field refuses a float, every field refuses a non-number.
void set_constant(SplitHeuristicConstants& c, const std::string& name, py::handle value) {
  try {
#define FLASHSPLIT_SET_FIELD(field)              \
  if (name == #field) {                          \
    c.field = value.cast<decltype(c.field)>();   \
    return;                                      \
  }
    FLASHSPLIT_CONSTANT_FIELDS(FLASHSPLIT_SET_FIELD)
#undef FLASHSPLIT_SET_FIELD
  } catch (const py::cast_error&) {
    throw py::type_error("SplitHeuristicConstants." + name + " cannot be set to " +
                         std::string(py::repr(value)));
  }
  throw py::type_error("SplitHeuristicConstants has no field '" + name + "'");
}

SplitHeuristicConstants with_changes(SplitHeuristicConstants c, const py::kwargs& changes) {
  for (const auto& item : changes) set_constant(c, py::cast<std::string>(item.first), item.second);
  return c;
}

bool same_constants(const SplitHeuristicConstants& a, const SplitHeuristicConstants& b) {
#define FLASHSPLIT_SAME_FIELD(name) \
  if (!(a.name == b.name)) return false;
  FLASHSPLIT_CONSTANT_FIELDS(FLASHSPLIT_SAME_FIELD)
#undef FLASHSPLIT_SAME_FIELD
  return true;
}

std::string constants_repr(const SplitHeuristicConstants& c) {
  std::string text = "SplitHeuristicConstants(";
  const char* separator = "";
  for (const auto& item : constants_dict(c)) {
    text += separator + py::cast<std::string>(item.first) + "=" + std::string(py::repr(item.second));
    separator = ", ";
  }
  return text + ")";
}

// ---- names for the core's enums, as explain() and build_info() spell them

constexpr KernelFamily kFamilies[] = {KernelFamily::kNone, KernelFamily::kPortableMma,
                                      KernelFamily::kHopperWgmma, KernelFamily::kPortableMfma};

KernelFamily family_named(const std::string& name) {
  for (KernelFamily family : kFamilies) {
    if (name == kernel_family_name(family)) return family;
  }
  throw py::value_error("unknown kernel family '" + name +
                        "' (expected portable_mma, hopper_wgmma, portable_mfma or none)");
}

const char* vendor_name(Vendor vendor) {
  switch (vendor) {
    case Vendor::kNvidia: return "nvidia";
    case Vendor::kAmd: return "amd";
    case Vendor::kNone: break;
  }
  return "none";
}

Vendor vendor_named(const std::string& name) {
  for (Vendor vendor : {Vendor::kNone, Vendor::kNvidia, Vendor::kAmd}) {
    if (name == vendor_name(vendor)) return vendor;
  }
  throw py::value_error("unknown vendor '" + name + "' (expected nvidia, amd or none)");
}

// dtype_name's spellings, and the short ones the benchmarks' CSVs use.
DType dtype_named(const std::string& name) {
  const std::pair<const char*, DType> names[] = {
      {"float16", DType::kFloat16}, {"fp16", DType::kFloat16},
      {"bfloat16", DType::kBFloat16}, {"bf16", DType::kBFloat16},
      {"float32", DType::kFloat32}, {"fp32", DType::kFloat32},
      {"float64", DType::kFloat64}, {"fp64", DType::kFloat64}};
  for (const auto& [text, dtype] : names) {
    if (name == text) return dtype;
  }
  throw py::value_error("unknown dtype '" + name +
                        "' (expected float16, bfloat16, float32 or float64; fp16, bf16, ...)");
}

// ---- the descriptions, from plain values

// The core's rules divide by these, so a problem is only made valid.
AttnProblem make_problem(int64_t b, int64_t h, int64_t hk, int64_t sq, int64_t sk, int64_t d,
                         bool causal, const std::string& dtype, bool on_gpu) {
  if (b < 1 || h < 1 || hk < 1 || sq < 1 || sk < 1 || d < 1) {
    throw py::value_error("AttnProblem needs b, h, hk, sq, sk, d >= 1, got b=" +
                          std::to_string(b) + " h=" + std::to_string(h) + " hk=" +
                          std::to_string(hk) + " sq=" + std::to_string(sq) + " sk=" +
                          std::to_string(sk) + " d=" + std::to_string(d));
  }
  if (h % hk != 0) {
    throw py::value_error("AttnProblem: h (" + std::to_string(h) +
                          ") must be a multiple of hk (" + std::to_string(hk) + ")");
  }
  AttnProblem p;
  p.b = b; p.h = h; p.hk = hk; p.sq = sq; p.sk = sk; p.d = d;
  p.causal = causal;
  p.dtype = dtype_named(dtype);
  p.on_gpu = on_gpu;
  return p;
}

std::string problem_repr(const AttnProblem& p) {
  return "AttnProblem(b=" + std::to_string(p.b) + ", h=" + std::to_string(p.h) +
         ", hk=" + std::to_string(p.hk) + ", sq=" + std::to_string(p.sq) +
         ", sk=" + std::to_string(p.sk) + ", d=" + std::to_string(p.d) +
         ", causal=" + (p.causal ? "True" : "False") + ", dtype='" + dtype_name(p.dtype) +
         "', on_gpu=" + (p.on_gpu ? "True" : "False") + ")";
}

DeviceInfo make_device(const std::string& vendor, int cc, int sm_count,
                       int64_t smem_per_block_optin, const std::string& arch,
                       double dram_bytes_per_us) {
  if (cc < 0 || sm_count < 0 || smem_per_block_optin < 0 || !(dram_bytes_per_us >= 0)) {
    throw py::value_error(
        "DeviceInfo needs cc, sm_count, smem_per_block_optin, dram_bytes_per_us >= 0");
  }
  return DeviceInfo{vendor_named(vendor), cc, sm_count, smem_per_block_optin, arch,
                    dram_bytes_per_us};
}

std::string device_repr(const DeviceInfo& d) {
  return std::string("DeviceInfo(vendor='") + vendor_name(d.vendor) +
         "', cc=" + std::to_string(d.cc) + ", sm_count=" + std::to_string(d.sm_count) +
         ", smem_per_block_optin=" + std::to_string(d.smem_per_block_optin) + ", arch='" +
         d.arch + "', dram_bytes_per_us=" +
         py::repr(py::float_(d.dram_bytes_per_us)).cast<std::string>() + ")";
}


std::string tiles_repr(const TileConfig& t) {
  return "TileConfig(block_m=" + std::to_string(t.block_m) +
         ", block_n=" + std::to_string(t.block_n) + ", warps=" + std::to_string(t.warps) +
         ", blocks_per_sm=" + std::to_string(t.blocks_per_sm) +
         ", m_tiles=" + std::to_string(t.m_tiles) +
         ", packs_heads=" + (t.packs_heads ? "True" : "False") +
         ", wgmma=" + (t.wgmma ? "True" : "False") +
         ", key_warps=" + std::to_string(t.key_warps) + ")";
}

bool same_tiles(const TileConfig& a, const TileConfig& b) {
  return a.block_m == b.block_m && a.block_n == b.block_n && a.warps == b.warps &&
         a.blocks_per_sm == b.blocks_per_sm && a.m_tiles == b.m_tiles &&
         a.packs_heads == b.packs_heads && a.wgmma == b.wgmma && a.key_warps == b.key_warps;
}

// Where constants are not given, the core's own default argument is used, so the Python call
// is the one the plan makes.
using OptionalConstants = std::optional<SplitHeuristicConstants>;

// SplitHeuristicConstants: the fields by name, their defaults, copies with changes.
void bind_constants(py::module_& h) {
  py::class_<SplitHeuristicConstants> constants(
      h, "SplitHeuristicConstants",
      "The split heuristic's tunable constants (csrc/core/split_heuristic.h explains each). "
      "SplitHeuristicConstants() holds the C++ defaults; keyword arguments change fields.");
  constants
      .def(py::init([](const py::kwargs& changes) {
        return with_changes(SplitHeuristicConstants{}, changes);
      }))
      .def_static("fields", &constant_fields, "Field names, in declaration order.")
      .def("as_dict", &constants_dict, "{field: value}, in declaration order.")
      .def("replace", &with_changes, "A copy with the given fields changed.")
      .def("__eq__", &same_constants, py::is_operator())
      .def("__repr__", &constants_repr)
      .def("__copy__", [](const SplitHeuristicConstants& c) { return c; })
      .def("__deepcopy__", [](const SplitHeuristicConstants& c, py::dict) { return c; },
           py::arg("memo"));
#define FLASHSPLIT_BIND_FIELD(name) constants.def_readwrite(#name, &SplitHeuristicConstants::name);
  FLASHSPLIT_CONSTANT_FIELDS(FLASHSPLIT_BIND_FIELD)
#undef FLASHSPLIT_BIND_FIELD
}

// The problem, device, build and tile descriptions the rules take, and the gate's answer.
void bind_descriptions(py::module_& h) {
  py::class_<AttnProblem>(h, "AttnProblem",
                          "One attention call: q (b, sq, h, d), k/v (b, sk, hk, d). Inputs are "
                          "taken as contiguous, aligned and without the features the native "
                          "kernels lack; on_gpu=False is a call on CPU tensors.")
      .def(py::init(&make_problem), py::kw_only(), py::arg("b"), py::arg("h"), py::arg("hk"),
           py::arg("sq"), py::arg("sk"), py::arg("d"), py::arg("causal") = false,
           py::arg("dtype") = "bfloat16", py::arg("on_gpu") = true)
      .def_readonly("b", &AttnProblem::b)
      .def_readonly("h", &AttnProblem::h)
      .def_readonly("hk", &AttnProblem::hk)
      .def_readonly("sq", &AttnProblem::sq)
      .def_readonly("sk", &AttnProblem::sk)
      .def_readonly("d", &AttnProblem::d)
      .def_readonly("causal", &AttnProblem::causal)
      .def_property_readonly("dtype", [](const AttnProblem& p) { return dtype_name(p.dtype); })
      .def_readonly("on_gpu", &AttnProblem::on_gpu)
      .def("__repr__", &problem_repr);

  py::class_<DeviceInfo>(h, "DeviceInfo",
                         "The GPU a call runs on: vendor ('nvidia', 'amd', 'none'), compute "
                         "capability (major * 10 + minor), SM (CU) count and the HBM's peak "
                         "bandwidth in bytes per microsecond (0: unknown).")
      .def(py::init(&make_device), py::kw_only(), py::arg("vendor") = "nvidia", py::arg("cc") = 0,
           py::arg("sm_count"), py::arg("smem_per_block_optin") = 0, py::arg("arch") = "",
           py::arg("dram_bytes_per_us") = 0.0)
      .def_property_readonly("vendor", [](const DeviceInfo& d) { return vendor_name(d.vendor); })
      .def_readonly("cc", &DeviceInfo::cc)
      .def_readonly("arch", &DeviceInfo::arch)
      .def_readonly("sm_count", &DeviceInfo::sm_count)
      .def_readonly("smem_per_block_optin", &DeviceInfo::smem_per_block_optin)
      .def_readonly("dram_bytes_per_us", &DeviceInfo::dram_bytes_per_us)
      .def("__repr__", &device_repr);

  py::class_<BuildInfo>(h, "BuildInfo",
                        "What a build of the extension contains (this_build() for this one).")
      .def(py::init([](bool gpu_kernels_built, std::vector<int> archs, std::vector<int> head_dims,
                       bool hopper_kernels_built, std::vector<std::string> amd_archs) {
             return BuildInfo{gpu_kernels_built, std::move(archs), std::move(head_dims),
                              hopper_kernels_built, std::move(amd_archs)};
           }),
           py::kw_only(), py::arg("gpu_kernels_built") = false,
           py::arg("archs") = std::vector<int>{}, py::arg("head_dims") = std::vector<int>{},
           py::arg("hopper_kernels_built") = false,
           py::arg("amd_archs") = std::vector<std::string>{})
      .def_readonly("gpu_kernels_built", &BuildInfo::gpu_kernels_built)
      .def_readonly("archs", &BuildInfo::archs)
      .def_readonly("head_dims", &BuildInfo::head_dims)
      .def_readonly("hopper_kernels_built", &BuildInfo::hopper_kernels_built)
      .def_readonly("amd_archs", &BuildInfo::amd_archs);

  py::class_<TileConfig>(h, "TileConfig",
                         "A tile shape: query rows and keys per block, warps, the resident "
                         "blocks per SM the heuristic assumes, whether rows pack heads and "
                         "whether they are Hopper (wgmma) tiles.")
      .def(py::init([](int block_m, int block_n, int warps, int blocks_per_sm, int m_tiles,
                       bool packs_heads, bool wgmma) {
             return TileConfig{block_m, block_n, warps,       blocks_per_sm,
                               m_tiles, packs_heads, wgmma};
           }),
           py::kw_only(), py::arg("block_m"), py::arg("block_n"), py::arg("warps") = 4,
           py::arg("blocks_per_sm") = 1, py::arg("m_tiles") = 1, py::arg("packs_heads") = true,
           py::arg("wgmma") = false)
      .def_readonly("block_m", &TileConfig::block_m)
      .def_readonly("block_n", &TileConfig::block_n)
      .def_readonly("warps", &TileConfig::warps)
      .def_readonly("blocks_per_sm", &TileConfig::blocks_per_sm)
      .def_readonly("m_tiles", &TileConfig::m_tiles)
      .def_readonly("packs_heads", &TileConfig::packs_heads)
      .def_readonly("wgmma", &TileConfig::wgmma)
      .def_readonly("key_warps", &TileConfig::key_warps)
      .def("__eq__", &same_tiles, py::is_operator())
      .def("__repr__", &tiles_repr);

  py::class_<GateDecision>(h, "GateDecision", "The gate's answer: ok, family and reason.")
      .def_readonly("ok", &GateDecision::ok)
      .def_property_readonly("family",
                             [](const GateDecision& g) { return kernel_family_name(g.family); })
      .def_readonly("reason", &GateDecision::reason)
      .def("__repr__", [](const GateDecision& g) {
        return std::string("GateDecision(ok=") + (g.ok ? "True" : "False") + ", family='" +
               kernel_family_name(g.family) + "', reason=" + std::string(py::repr(py::str(g.reason))) +
               ")";
      });
}

// The gate and the whole plan, as explain() computes them, for any described device and build.
void bind_gate_and_plan(py::module_& h) {
  h.def("this_build", &current_build_info, "The BuildInfo of this extension.");

  h.def("check_native",
        [](const AttnProblem& p, const DeviceInfo& d, const BuildInfo& b, bool allow_untested_arch,
           bool arch_verified_here, bool allow_hopper) {
          return check_native(p, d, b, GateOptions{allow_untested_arch, arch_verified_here,
                                                   allow_hopper});
        },
        "The capability gate: whether the native kernels serve the problem on the device with "
        "the build, and the kernel family they run.",
        py::arg("problem"), py::arg("device"), py::arg("build"),
        py::arg("allow_untested_arch") = false, py::arg("arch_verified_here") = false,
        py::arg("allow_hopper") = true);

  h.def("constants_for",
        [](const std::string& family, const DeviceInfo& d) {
          return constants_for(family_named(family), d);
        },
        "The constants the plan's heuristic uses for the family on the device: the H100 fit "
        "for the NVIDIA families, values derived from the target's published figures for the "
        "MFMA kernels.",
        py::arg("family"), py::arg("device"));

  h.def("make_launch_plan",
        [](const AttnProblem& p, const DeviceInfo& d, const BuildInfo& b, long long requested,
           bool allow_untested_arch, bool arch_verified_here, bool allow_hopper,
           bool allow_tail_split) {
          PlanOptions options;
          options.gate = GateOptions{allow_untested_arch, arch_verified_here, allow_hopper};
          options.allow_tail_split = allow_tail_split;
          const LaunchPlan plan = make_launch_plan(p, d, b, options, requested);
          return explain_dict(plan, p.b, p.sq, p.h, p.hk);
        },
        "The plan of a call (explain()'s form) for any described device and build.",
        py::arg("problem"), py::arg("device"), py::arg("build"), py::arg("requested") = 0,
        py::arg("allow_untested_arch") = false, py::arg("arch_verified_here") = false,
        py::arg("allow_hopper") = true, py::arg("allow_tail_split") = true);
}

// The tiles and the split heuristic's cost model, rule by rule.
void bind_split_rules(py::module_& h) {
  h.def("use_narrow_tiles",
        [](const AttnProblem& p) { return use_narrow_tiles(p.sq, p.h, p.hk); },
        "Whether the portable kernels run the problem on their narrow (decode) tiles at most.",
        py::arg("problem"));
  h.def("sm80_uses_narrow_tiles",
        [](const AttnProblem& p) {
          return sm80_uses_narrow_tiles(p.sq, p.h, p.hk);
        },
        "Whether the sm80 policy runs the problem on its narrow tile (also multi-token decode "
        "of up to 32 packed rows).",
        py::arg("problem"));

  h.def("tiles_for",
        [](const std::string& family, const AttnProblem& p) {
          return tiles_for(family_named(family), p);
        },
        "The tiles the split heuristic models for the family: those of split calls.",
        py::arg("family"), py::arg("problem"));

  h.def("tiles_for_run",
        [](const std::string& family, const AttnProblem& p, int sm_count, int num_splits) {
          return tiles_for_run(family_named(family), p, sm_count, num_splits);
        },
        "The tiles a call of num_splits splits runs on sm_count SMs (explain()'s block_m, "
        "block_n and blocks_per_sm).",
        py::arg("family"), py::arg("problem"), py::arg("sm_count"), py::arg("num_splits"));

  h.def("takes_key_warps_for_run",
        [](const std::string& family, const AttnProblem& p, const DeviceInfo& d, int requested) {
          return takes_key_warps_for_run(family_named(family), p, d, requested);
        },
        "Whether the call runs the sm80 narrow tile with key warps, unsplit (explain()'s "
        "key_warps > 1): only where num_splits is left to the heuristic and the device's "
        "blocks may take the tile's shared memory.",
        py::arg("family"), py::arg("problem"), py::arg("device"), py::arg("requested"));

  h.def("key_warp_blocks_per_sm_for_run",
        [](const std::string& family, const AttnProblem& p, const DeviceInfo& d, int requested) {
          return key_warp_blocks_per_sm_for_run(family_named(family), p, d, requested);
        },
        "The key-warp tile the call runs, as its blocks an SM (1 or 2: key_warp_tiles' "
        "blocks_per_sm; explain()'s blocks_per_sm where key_warps > 1), 0 without key warps.",
        py::arg("family"), py::arg("problem"), py::arg("device"), py::arg("requested"));

  h.def("key_warp_tiles", &sm80_key_warp_tile_config,
        "The sm80 narrow tile with key warps at this head dim, sized for blocks_per_sm blocks "
        "an SM (1 or 2; block_m 0 where there is none).",
        py::arg("head_dim"), py::arg("blocks_per_sm") = 1);

  h.def("forward_blocks",
        [](const AttnProblem& p, const TileConfig& t) {
          return t.block_m > 0 ? forward_blocks(p.b, p.sq, p.h, p.hk, t) : 0LL;
        },
        "Thread blocks of one split of the forward grid on these tiles (explain()'s "
        "grid_blocks).",
        py::arg("problem"), py::arg("tiles"));

  h.def("modelled_split_us",
        [](const AttnProblem& p, const DeviceInfo& d, const TileConfig& t, int g,
           const OptionalConstants& c) {
          return c ? modelled_split_us(p, d, t, g, *c) : modelled_split_us(p, d, t, g);
        },
        "The heuristic's modelled time of the call with g splits on these tiles, microseconds "
        "(negative where the tiles or the device cannot run it).",
        py::arg("problem"), py::arg("device"), py::arg("tiles"), py::arg("g"),
        py::arg("constants") = py::none());

  h.def("choose_num_splits",
        [](const AttnProblem& p, const DeviceInfo& d, const TileConfig& t,
           const OptionalConstants& c) {
          return c ? choose_num_splits(p, d, t, *c) : choose_num_splits(p, d, t);
        },
        "The heuristic's G on these tiles.", py::arg("problem"), py::arg("device"),
        py::arg("tiles"), py::arg("constants") = py::none());

  h.def("resolve_num_splits",
        [](int requested, const AttnProblem& p, const DeviceInfo& d, const TileConfig& t,
           const OptionalConstants& c) {
          return c ? resolve_num_splits(requested, p, d, t, *c)
                   : resolve_num_splits(requested, p, d, t);
        },
        "The G a requested num_splits runs on these tiles: 0 the heuristic, 1 no split, more "
        "clamped to the key blocks. ValueError for a negative request.",
        py::arg("requested"), py::arg("problem"), py::arg("device"), py::arg("tiles"),
        py::arg("constants") = py::none());

  h.def("resolve_splits_for",
        [](const std::string& family, const AttnProblem& p, const DeviceInfo& d, int requested,
           const OptionalConstants& c) {
          if (requested < 0) {
            throw py::value_error("num_splits must be >= 0 (0 = auto), got " +
                                  std::to_string(requested));
          }
          const KernelFamily f = family_named(family);
          return resolve_splits_for(f, p, d, requested, c ? *c : constants_for(f, d));
        },
        "The G the plan runs for a call of this family (explain()'s num_splits): "
        "resolve_num_splits on tiles_for, and for an auto G on Hopper tiles the weighing "
        "against an unsplit call's own tiles.",
        py::arg("family"), py::arg("problem"), py::arg("device"), py::arg("requested") = 0,
        py::arg("constants") = py::none());
}

}  // namespace

void bind_heuristic(py::module_& m) {
  py::module_ h = m.def_submodule(
      "heuristic",
      "The plan's split rules from csrc/core (torch-free): the problem and device descriptions, "
      "the capability gate's kernel family, the tiles, the split heuristic's cost model and its "
      "constants, and the G a call resolves to. A function given no constants uses the "
      "core's defaults, as the plan does.");
  h.attr("KERNEL_FAMILIES") =
      py::make_tuple(kernel_family_name(kFamilies[0]), kernel_family_name(kFamilies[1]),
                     kernel_family_name(kFamilies[2]), kernel_family_name(kFamilies[3]));
  bind_constants(h);
  bind_descriptions(h);
  bind_gate_and_plan(h);
  bind_split_rules(h);
}

}  // namespace flashsplit

#undef FLASHSPLIT_CONSTANT_FIELDS
