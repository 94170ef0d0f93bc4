// The CPU executor: compiles an IR graph (passes, kernels, memory plan) and runs it.
//
// Contract:
//  - optimize() runs the pass pipeline (names as used by --dump-after):
//      shape-inference, constant-folding, dead-code-elimination, conv-bn-folding,
//      qdq-to-qlinear (CompileOptions::int8 only), constant-folding-2, deform-attn-fusion
//      (unless CompileOptions::fuse is false), conv-activation-fusion, dead-code-elimination-2
//    (CompileOptions::portable skips qdq-to-qlinear and both fusions).
//    and then checks that every remaining node has a kernel and static output shapes,
//    reporting every offending node at once ("unsupported").
//  - Executor::create() prepares one kernel per node (the NPU nodes' in one shared device
//    memory: npu_conv.h, device-memory chaining) and plans memory: every
//    intermediate value gets an offset in one arena, values whose lifetimes
//    (producer .. last reader, in node order) do not overlap may share bytes (greedy by
//    size, as TFLite's arena planner). View ops (Reshape, Flatten, Squeeze, Unsqueeze,
//    Identity) alias their input and extend its lifetime. Graph outputs get their own
//    buffers so that run() can return them.
//  - run() checks every graph input by name, dtype and shape (errors name the input) and
//    returns every graph output by name. The Executor reads the graph it was created
//    from: the graph must outlive it and stay unchanged.
//  - Threads: ExecutorOptions::threads sets both the kernels' pool and oneDNN's OpenMP
//    threads (process-wide settings).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <optional>
#include <string>
#include <vector>

#include "core/result.h"
#include "core/tensor.h"
#include "ir/ir.h"
#include "ir/passes/fusion.h"
#include "npu/lower/strategy.h"
#include "npu/sim/sim.h"
#include "quant/requant.h"

namespace rkd::runtime {

class NpuDevice;

struct CompileOptions {
  bool fuse = true;              // deform-attn-fusion
  bool fuse_activations = true;  // conv-activation-fusion (off: the planner keeps ONNX ops)
  // qdq-to-qlinear: QDQ patterns become integer ops on the int8 reference kernels
  // (`run --backend int8`). Off (`--backend cpu`), QuantizeLinear/DequantizeLinear run as
  // written and everything between them in float: ONNX's definition of the QDQ graph.
  bool int8 = false;
  // With int8: the requantization convention for every integer op, replacing the one the
  // model's format implies (graph metadata rkdeploy.requant: TFLite files
  // tflite_double_rounding, ONNX onnx_float). Unset: the model's own.
  std::optional<quant::Requant> requant;
  // With int8: place every node the NPU operation table's lowerings take on the NPU
  // (npu_ops.h: npu_placement_pass), convolutions lowered with this strategy (`run --backend
  // sim` and device); the others stay on the CPU kernels and are reported. Unset: none.
  // npu_quirks: the simulator's knobs.
  std::optional<npu::lower::Strategy> npu_strategy;
  npu::sim::Quirks npu_quirks;
  // With npu_strategy: fuse an Add into the convolution it follows (the EW stage, one
  // rounding instead of two: no longer the int8 reference's result bit for bit) instead of
  // running it as its own DPU task.
  bool npu_fuse_add = false;
  // With npu_strategy: the NPU is a mainline rocket device (--backend device), which learns
  // of a task's end only through the DPU's interrupt: no PPU-only tasks (MaxPool stays on the
  // CPU, exact either way).
  bool npu_mainline = false;
  // With int8: int8-channels-last, the CPU int8 convolutions' activations kept [N, H, W, C]
  // between them (fusion.h). Off where a workflow reads the convolutions' NCHW geometry
  // (analyze, compile).
  bool channels_last = true;
  // Only standard ONNX rewrites (folding, conv-bn-folding): no fusion into rkdeploy ops or
  // attributes; QuantizeLinear/DequantizeLinear of activations kept (those of constant
  // weights fold into float constants). The graph `quantize` and `accuracy` work on.
  bool portable = false;
  // Fail when a node is left without a CPU kernel or a static shape (the executor needs
  // both). Off for the planner, which places such nodes and reports them.
  bool require_executable = true;
  std::set<std::string> dump_after;  // pass names
  std::function<void(const std::string& pass, const std::string& ir)> dump;
};

// What the rewriting passes found (for inspect): src/ir/passes/fusion.h.
using ir::FusionReport;

Status optimize(ir::Graph& g, const CompileOptions& opt = {}, FusionReport* report = nullptr);
// The nodes of an optimized graph the CPU executor cannot run: "node X (Op): why".
std::vector<std::string> unexecutable_nodes(const ir::Graph& g);
// What Executor::create checks before it prepares any kernel (the int8 and oneDNN kernels
// allocate while they prepare): every value of static shape within the tensor limit, and the
// least memory a run needs - the constants plus the largest node's inputs and outputs - within
// what the process may use (core/limits.h). Errors name the node and value.
Status check_graph_memory(const ir::Graph& g);
// The inputs Executor::run takes: one tensor per graph input, of its dtype and (static) shape,
// and no other. Errors name the input.
Status check_graph_inputs(const ir::Graph& g, const std::map<std::string, Tensor>& inputs);
// The pass names optimize() runs, in order.
std::vector<std::string> pass_names(bool fuse);

struct ExecutorOptions {
  int threads = 0;       // <= 0: hardware concurrency
  bool profile = false;  // time every node
  // The NPU nodes read each other's outputs in device memory where the layouts agree
  // (npu_conv.h); false: every NPU node alone, each value through the host (the reference
  // the chaining is checked against).
  bool npu_chaining = true;
  // Set: the NPU nodes run on this device (npu_device.h) instead of the simulator.
  std::shared_ptr<NpuDevice> npu_device;
  // Set: called by run() with every value a node computes (graph inputs are not), right
  // after that node, in node order. The tensor may live in the shared arena: it is valid
  // during the call only (copy what must outlive it). Streaming statistics (calibration)
  // read every intermediate value this way without keeping them.
  std::function<void(const ir::Value& v, const Tensor& t)> observe;
  // Set: called by run() with every value a node computes, before observe and before any
  // reader runs, and may change the value in place (sensitivity analysis fake-quantizes one
  // value at a time). A view's output shares its input's bytes: changing it changes both.
  std::function<void(const ir::Value& v, Tensor& t)> rewrite;
};

struct NodeTime {
  std::string node, op_type;
  double micros = 0;
};

struct MemoryPlan {
  int64_t arena_bytes = 0;         // bytes of the shared arena
  int64_t intermediate_bytes = 0;  // sum of every planned value's size (no reuse)
  int64_t output_bytes = 0;
  int64_t constant_bytes = 0;
  int planned_values = 0, aliased_values = 0;
};

struct NpuSession;
struct NpuChaining;

class Executor {
 public:
  static Result<std::unique_ptr<Executor>> create(const ir::Graph& g, const ExecutorOptions& opt = {});
  Result<std::map<std::string, Tensor>> run(const std::map<std::string, Tensor>& inputs);

  const MemoryPlan& memory_plan() const { return plan_; }
  // Per-node times of the last run() (empty unless profile).
  const std::vector<NodeTime>& last_profile() const { return profile_; }
  // The NPU nodes' device memory (npu_conv.h: one NpuSession shared by every rkdeploy.Npu*
  // node, consecutive ones reading each other's outputs in place), or nullptr without them.
  const NpuSession* npu_session() const { return npu_.get(); }

 private:
  struct Step;
  Executor() = default;

  const ir::Graph* g_ = nullptr;
  ExecutorOptions opt_;
  std::vector<std::shared_ptr<Step>> steps_;
  std::map<const ir::Value*, size_t> slot_of_;  // value -> slot index
  std::vector<Tensor> slots_;                   // bound tensors per run
  std::shared_ptr<uint8_t[]> arena_;
  MemoryPlan plan_;
  std::vector<NodeTime> profile_;
  std::shared_ptr<NpuSession> npu_;
  friend struct ExecutorBuilder;
};

}  // namespace rkd::runtime
