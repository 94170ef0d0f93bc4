// The deployment planner: target profiles (targets/*.json) as data, the placement of every
// node on a device, the variants a user can compare, execution segments and boundaries, and
// the latency decomposition (docs/planner.md for the model, docs/target-profile.md for the
// file format).
//
// Contract:
//  - load_target() reads one profile and validates every field; an error names the file and
//    the field (e.g. "targets/x.json: ops[3].requires[0].check: unknown check 'foo'").
//  - place() answers, for one node as written, where the profile runs it and why: the first
//    rule for its op type whose requirements all hold puts it on the rule's device; a failed
//    requirement puts it on the rule's fallback with that requirement's reason; op types
//    without a rule take the profile's default. Device `none` means the runtime accepts the
//    model but has no implementation: it fails at run time.
//  - plan_variant() takes a graph already in the variant's form (the runtime layer builds it:
//    as imported, with the deformable-attention fusion, or the discrete-sampling model), the
//    host's measured per-node CPU times, and returns the placement, the segments of a serial
//    schedule that delays every device switch while the current device still has ready work,
//    k = the number of switches in that schedule (segments - 1), and the latency terms.
#pragma once

#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "core/result.h"
#include "ir/ir.h"
#include "npu/lower/constraints.h"
#include "npu/lower/node_geometry.h"

namespace rkd::plan {

enum class Device { npu, cpu, gpu, none };
const char* device_name(Device d);
Result<Device> parse_device(const std::string& s);

// One requirement of an op rule: a check over the node and why the runtime has it.
//   max_rank N         input 0 has at most N dims
//   attr_in A [V...]   attribute A (its default when absent, given as `default`) is one of V
//   max_kernel N       every kernel dim (kernel_shape, or the weight's spatial dims) <= N
//   max_stride N       every stride <= N
//   groups [dense|depthwise|grouped...]  the convolution's grouping is listed
//   const_input I      input I is a constant (weights known at conversion)
//   max_dim N          every static dim of input 0 and output 0 <= N (hardware size fields)
//   dtype_in [T...]    input 0's element type is one of T (float32, float16, int8, uint8, ...)
//   quantized          input 0 is 8-bit or comes from a DequantizeLinear (a QDQ site)
//   per_tensor_quant   a quantized site whose weights (input 1) have one scale, not one per channel
//   npu_conv_geometry / npu_eltwise_geometry / npu_pool_geometry
//                      npu/lower/constraints.h's convolution / element-wise / pooling rules hold
//   npu_channel_pad    a constant Pad adding channels at the end of a map only (element-wise rules)
//   npu_upsample2      a nearest Resize x2 in height and width (element-wise rules on the output)
//   npu_conv_transpose2  a 2 x 2 stride-2 ConvTranspose (its 1 x 1 convolution, the interleaving)
struct Constraint {
  std::string check;
  int64_t value = 0;
  std::string attr, attr_default;
  std::vector<std::string> values;
  std::string reason;
};

struct OpRule {
  std::string op;  // ONNX op type; rkdeploy's own ops as "rkdeploy.<type>"
  Device device = Device::cpu;
  std::vector<Constraint> requirements;
  Device fallback = Device::cpu;  // where the op goes when a requirement fails
  std::string reason;             // why it is on `device` (for `none`: how it fails)
  std::vector<Device> custom_op;  // devices on which a user-registered custom op can run it
  bool lowered = true;            // false: the hardware can, this runtime's lowering does not yet (never NPU time: the fallback device)
};

// The hardware's constants (macs_per_cycle, clock_mhz, utilization, task_overhead_us,
// ddr_gbps; the CPU and GPU; the boundary's layout and copy rates) come from the SoC description
// (targets/soc/<soc>.json) that every profile of the chip shares; a profile gives what its
// runtime does with them (cores_used, bytes_per_element, task_submit_us, boundary.sync_us).
struct NpuCost {
  int cores = 1;  // the SoC's NPU cores
  int cores_used = 1;
  double macs_per_cycle = 1024;  // per core, at the profile's precision
  double clock_mhz = 1000;
  double utilization = 0.5;      // fraction of the MAC array busy on average
  double task_overhead_us = 10;  // per NPU op (register programming, kick, interrupt)
  double task_submit_us = 0;     // the runtime's own cost per task beyond it (a submit per task)
  double ddr_gbps = 10;          // achieved DDR bandwidth for weights and features
  int bytes_per_element = 1;     // int8 = 1, fp16 = 2
};
struct CpuCost {
  std::string name;
  int cores = 1;           // big cores: --threads beyond this is refused
  double host_factor = 1;  // target CPU time = this host's measured time x host_factor
};
struct GpuCost {
  bool present = false;
  std::string name;
  double host_factor = 1;  // GPU time = host CPU time x host_factor + op_overhead_us per op
  double op_overhead_us = 0;
};
struct BoundaryCost {
  double sync_us = 0;           // per switch: wait for the device, cache maintenance, submit
  double layout_us_per_mb = 0;  // per MB crossing: NC1HWC2 <-> NCHW and precision conversion
  double copy_gbps = 10;        // per MB crossing: the copy itself
};

struct Target {
  std::string path, name, soc, runtime, version, summary;
  std::string soc_path;  // the SoC description read for `soc`
  std::vector<std::string> sources;
  NpuCost npu;
  CpuCost cpu;
  GpuCost gpu;
  BoundaryCost boundary;
  std::vector<Device> custom_op_devices;  // where the runtime lets users register custom ops
  std::set<std::string> zero_cost_ops;    // views: run wherever their input is, cost nothing
  OpRule default_rule;
  std::vector<OpRule> ops;
  std::vector<std::string> free_parameters;  // what --calibrate may fit (parameter names below)
  // The profile describes rkdeploy's own back end: the default variant is as-run, and the NPU
  // time of the runtime's graph comes from its lowered tasks (NpuTaskCost).
  bool rkdeploy_lowering = false;

  // The rules for an op type, in file order (empty: the default applies).
  std::vector<const OpRule*> rules_for(const std::string& op_type) const;
};

Result<Target> load_target(const std::string& path);
// NAME (targets/NAME.json in dir) or a path to a .json file.
Result<Target> find_target(const std::string& name_or_path, const std::string& dir);
Result<std::vector<Target>> load_targets(const std::string& dir);  // every *.json, by name
// The SoC description of `soc` (e.g. "RK3588"): targets/soc/<soc in lower case>.json in the
// profile's folder, else in default_targets_dir(). Fills the hardware's fields of `t` (above).
Status read_soc(const std::string& profile_path, const std::string& soc, Target& t);
// Where the profiles are: $RKDEPLOY_TARGETS, else the source tree's targets/ (compiled in) if it
// exists, else PREFIX/share/rkdeploy/targets beside an installed PREFIX/bin/rkdeploy.
std::string default_targets_dir();

// Calibratable parameters, by name: npu.utilization, npu.task_overhead_us, npu.ddr_gbps,
// npu.task_submit_us, cpu.host_factor, gpu.host_factor, gpu.op_overhead_us, boundary.sync_us,
// boundary.layout_us_per_mb, boundary.copy_gbps.
const std::vector<std::string>& parameter_names();
Result<double> get_parameter(const Target& t, const std::string& name);
Status set_parameter(Target& t, const std::string& name, double v);

struct Placement {
  Device device = Device::cpu;
  std::string reason;
  bool zero_cost = false;
  bool lowered = true;
  std::vector<Device> custom_op;
};
Placement place(const Target& t, const ir::Node& n);

// docs/SUPPORTED_OPS.md: every op any profile names, per profile: device and conditions.
std::string supported_ops_markdown(const std::vector<Target>& targets);

enum class Variant { as_is, as_run, custom_op_cpu, custom_op_gpu, fused_fallback, decoder_on_cpu, discrete };
// The variants `--variant all` plans on t: on a profile of rkdeploy's own back end
// (Target::rkdeploy_lowering) as-run first - the graph `run --backend sim` executes
// (GraphForm::runtime): the operations the runtime placed on the NPU (the op table's kOnNpu ops)
// there, every other one on the CPU - then every other variant; elsewhere every variant but
// as-run (it plans rkdeploy's runtime).
std::vector<Variant> default_variants(const Target& t);
const char* variant_name(Variant v);
// Every variant's name, comma-separated, in table order.
std::string variant_names();
const char* variant_description(Variant v);
Result<Variant> parse_variant(const std::string& s);
// The graph form the variant plans: the model as imported, with the fused
// deformable-attention op per decoder layer, the discrete-sampling export, or the int8 graph
// as the runtime compiles it for the NPU simulator (qdq-to-qlinear, npu-placement).
enum class GraphForm { imported, fused, discrete, runtime };
// The ops of a runtime-form graph that run on the NPU (ir::kOnNpu).
bool npu_placed_op(const ir::Node& n);
GraphForm graph_form(Variant v);

// Latency terms in milliseconds; total() is their sum (a serial critical path).
struct Terms {
  double npu_compute = 0, npu_traffic = 0, npu_overhead = 0, cpu = 0, gpu = 0;
  double boundary_sync = 0, boundary_layout = 0, boundary_copy = 0;
  double total() const;
};
const std::vector<std::pair<std::string, double Terms::*>>& term_fields();

// A node of the runtime's graph as its lowering's tasks (a profile with rkdeploy_lowering, the
// as-run variant): each task's work from its register commands (npu::sim::chain_work) and the
// jobs they form on a device (the device back end's: runtime::npu_node_jobs over the profile's
// cores_used; stage 1 after every stage-0 job).
struct NpuTaskCost {
  double padded_macs = 0, read_bytes = 0, write_bytes = 0;
};
struct NpuJob {
  int stage = 0;
  std::vector<size_t> tasks;
};
struct NpuNodeCost {
  std::vector<NpuTaskCost> tasks;
  std::vector<NpuJob> jobs;
};

// The least an NPU node's work needs: its weights (constants, or a QDQ graph's dequantized
// constants) and its feature maps (every other input, every output), each read or written once,
// at bytes_per_element bytes per element - the traffic the planner prices a node without
// lowered tasks at, and the minimum a lowered node's bytes are compared with.
struct NodeTraffic {
  double weight_bytes = 0, feature_bytes = 0;
};
NodeTraffic node_traffic(const ir::Node& n, int bytes_per_element);
// A lowered NPU node's work against that minimum: the MACs its tasks' array passes compute
// (channels and kernels padded to the atomic sizes, every channel group and tile: MAC
// utilisation = the node's MACs / these) and the bytes their DMA moves (inputs re-read per
// group or tile, weights re-read per slice, scratch maps; traffic ratio = these / the minimum).
struct NpuWork {
  int tasks = 0, jobs = 0;
  double macs = 0, padded_macs = 0, bytes = 0, min_bytes = 0;
  double mac_utilization() const { return padded_macs > 0 ? macs / padded_macs : 0; }
  double traffic_ratio() const { return min_bytes > 0 ? bytes / min_bytes : 0; }
};
NpuWork npu_work(double macs, const NodeTraffic& minimum, const NpuNodeCost& c);

struct PlannedNode {
  std::string name, op_type;
  Device device = Device::cpu;
  std::string reason;
  bool zero_cost = false, lowered = true;
  double macs = 0, weight_bytes = 0, feature_bytes = 0;  // NPU estimate inputs
  std::optional<NpuNodeCost> lowered_tasks;              // its lowering's tasks: priced from them instead
  double host_ms = 0;                                    // measured on this host (CPU/GPU nodes): the median of its runs
  std::vector<double> host_runs;                         // its time in each measured run
  double board_ms = -1;                                  // >= 0: measured on the target's CPU (--cpu-times)
  double ms = 0;                                         // this node's predicted time on the target
  int segment = -1;
};
struct Segment {
  Device device = Device::cpu;
  std::vector<size_t> nodes;  // indexes into VariantPlan::nodes, in schedule order
  double ms = 0;              // the nodes' time
  double in_bytes = 0;        // bytes produced on another device and read here
  double boundary_ms = 0;     // the switch into this segment (0 for the first)
};
struct VariantPlan {
  Variant variant = Variant::as_is;
  bool planned = true;  // false: an input was missing (failures say which)
  bool executable = true;
  std::vector<std::string> failures;  // "node N (Op): reason" when not executable
  std::vector<std::string> notes;     // e.g. a different model; ops the lowering lacks
  std::vector<PlannedNode> nodes;
  std::vector<Segment> segments;
  int k = 0;
  Terms terms;
  // The CPU term over the measured runs (each run's CPU nodes summed, at the profile's factor;
  // board times where given): how much the host's load moves it. cpu_runs 0: not measured.
  int cpu_runs = 0;
  double cpu_min_ms = 0, cpu_max_ms = 0;
};

// What the runtime decided for its own graph (GraphForm::runtime): per NPU node its lowering's
// tasks and jobs (a profile with rkdeploy_lowering), per candidate it left on the CPU the
// placement's reason (runtime/npu_ops.h).
struct RuntimePlacement {
  std::map<std::string, NpuNodeCost> lowered;
  std::map<std::string, std::string> cpu_reasons;
};
// host_ms: per node name, this host's measured CPU time (median of runs); host_runs: the same
// node's time in each run (every node once per run), for the CPU term's spread.
Result<VariantPlan> plan_variant(const ir::Graph& g, const Target& t, Variant v, const std::map<std::string, double>& host_ms,
                                 const std::map<std::string, std::vector<double>>& host_runs = {}, const RuntimePlacement& runtime = {});
// Recomputes the times of a plan under (possibly re-calibrated) cost parameters.
void price(VariantPlan& p, const Target& t);

// A priced plan's lowered NPU node against its ideal: its time against the longer of its MACs
// on cores_used cores at the profile's rate and its minimum bytes at the DDR rate, plus one
// job's overhead (one submission) - what `plan` lists so that the next inefficiency is visible.
struct NpuNodeEfficiency {
  const PlannedNode* node = nullptr;
  NpuWork work;
  double ms = 0, ideal_ms = 0;
  double excess_ms() const { return ms - ideal_ms; }
};
// Every NPU node of p priced from its lowered tasks, the most time above its ideal first.
std::vector<NpuNodeEfficiency> npu_efficiency(const VariantPlan& p, const Target& t);

// --cpu-times: CPU node times measured on the board itself, which replace host time x
// host_factor: {"schema": "rkdeploy-cpu-times/1", "nodes": {NAME: ms}, "ops": {OP_TYPE: ms per node}}
// (a node's own entry wins over its op type's).
struct BoardTimes {
  std::map<std::string, double> nodes, ops;
};
Result<BoardTimes> read_board_times(const std::string& path);
// Sets board_ms of the plan's CPU nodes the times cover; returns how many.
int apply_board_times(VariantPlan& p, const BoardTimes& bt);

// Multiply-accumulates of a Conv/ConvTranspose/QLinearConv/MatMul/Gemm/QLinearMatMul node (or
// their rkdeploy.NpuConv / NpuMatMul forms) with known shapes (a symbolic batch counts as 1).
std::optional<double> node_macs(const ir::Node& n);

// --calibrate: measured latencies; role "fit" entries fit the free parameters, "check"
// entries are predicted and compared.
struct Measurement {
  std::string target, variant, source, role = "fit";
  double latency_ms = 0;
  std::string model;  // optional: the model file (relative to --models-dir) of a calibration set
};
// A file may name the parameters it fits ("free", e.g. the SoC's NPU rates for a model zoo's
// latencies, the runtime's fallback costs for a model with CPU fallbacks): `free` receives them
// (empty: the profile's calibration.free applies).
Result<std::vector<Measurement>> read_measurements(const std::string& path, std::vector<std::string>* free = nullptr);
struct FitResult {
  std::map<std::string, double> before, after;  // free parameters
  struct Row {
    std::string model, variant, role, source;
    double measured_ms = 0, predicted_before_ms = 0, predicted_ms = 0;
    double error_pct() const { return measured_ms > 0 ? 100.0 * (predicted_ms - measured_ms) / measured_ms : 0; }
  };
  std::vector<Row> rows;
  std::string note;
};
// Fits t's free parameters (least squares over the "fit" rows of this target) and re-prices
// `plans` in place.
Result<FitResult> calibrate(Target& t, std::vector<VariantPlan>& plans, const std::vector<Measurement>& m);
// The same over rows already matched (a calibration set: each measurement with the plan of its
// own model); every plan re-priced.
struct CalibrationRow {
  VariantPlan* plan = nullptr;
  const Measurement* m = nullptr;
};
Result<FitResult> calibrate_rows(Target& t, const std::vector<CalibrationRow>& rows);

// ---- reports (report.cc) ----

struct PlanReport {
  std::string model, discrete_model;
  Target target;  // after calibration when fit is set
  std::vector<VariantPlan> plans;
  std::optional<FitResult> fit;
  std::map<std::string, std::string> host;  // where the CPU times were measured
  int layers = 25;                          // rows of the per-layer tables (text, Markdown, HTML)
};
// The op groups a variant does not run on the NPU: op, device, count, reason.
struct Fallback {
  std::string op;
  Device device = Device::cpu;
  int count = 0;
  double ms = 0;
  std::string reason;
};
std::vector<Fallback> fallbacks(const VariantPlan& p);
std::string plan_json(const PlanReport& r);  // docs/cli-json.md "plan"
std::string plan_text(const PlanReport& r);  // the terminal summary
std::string plan_markdown(const PlanReport& r);
std::string plan_html(const PlanReport& r);  // self-contained: SVG timeline and stacked bars

}  // namespace rkd::plan
