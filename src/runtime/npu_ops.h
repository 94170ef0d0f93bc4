// The NPU operation table: one record per operation family the NPU back end lowers. Every
// consumer derives from it: the placement pass (npu_placement_pass), the kernels' lowering
// (lower_npu_node), `compile`'s manifest entries (NpuOpFamily::manifest), `run`'s report
// (npu_placement_text), the FusionReport's per-family keys and the sentence that says what the
// NPU takes (npu_lowered_ops_text). The op table's kOnNpu records (ir/op_info.cc) are its node
// types, and a test enumerates the table against every consumer.
//
// A family, placed in table order:
//  - candidate: a node of the int8 graph the family is asked to take (a QLinearConv, an integer
//    Concat, ...); every candidate is either placed or listed with its reason;
//  - lowerable: the node's spec within constraints.h (npu_conv.h's *_spec functions) and
//    whatever else the lowering needs; placed only next to an NPU node when next_to_npu (a copy
//    or table between CPU nodes only would add two device switches for no arithmetic) - asked
//    again once every family is placed, until none gains an NPU neighbour (a table that reads
//    a Split placed after the tables);
//  - the placed node: domain rkdeploy, op type npu_op(node), attributes rkd_npu_knobs (and a
//    convolution's rkd_npu_strategy);
//  - lower: the placed node into an NpuSession (npu_kernels.cc);
//  - manifest: its entry in `compile`'s manifest.json (docs/npu.md, "compile");
//  - report: its part of the line `run --backend sim` prints.
#pragma once

#include <nlohmann/json.hpp>

#include <memory>
#include <string>
#include <vector>

#include "core/result.h"
#include "ir/ir.h"
#include "ir/pass.h"
#include "ir/passes/fusion.h"
#include "npu/lower/strategy.h"
#include "npu/sim/sim.h"
#include "runtime/npu_conv.h"

namespace rkd::runtime {

// What the placement is asked for: the convolutions' strategy, the simulator's quirks (written
// to every placed node), whether a convolution's only reader Add joins it (the EW stage: one
// rounding where the int8 reference rounds twice, so off by default), and whether tasks that
// end in the PPU may run (false on a mainline rocket device, which learns of a task's end only
// through the DPU's interrupt).
struct NpuPlacementOptions {
  npu::lower::Strategy strategy = npu::lower::kDefaultStrategy;
  npu::sim::Quirks quirks;
  bool fuse_add = false;
  bool ppu_only_tasks = true;
};

// Where `compile` writes a family's entry and what it needs from the session.
struct NpuManifestContext {
  const npu::DeviceMemory* mem = nullptr;
  std::string directory;  // the entry's folder, relative to the output folder (its files go there)
  // Writes bytes to the file `relative` (under the output folder) atomically.
  std::function<Status(const std::string& relative, std::span<const uint8_t> bytes)> write;
  int cores = 1;  // the jobs a node's tasks form on a device (npu_node_jobs)
  // Whether the host reads output j back: decided once every node is lowered; `at` is the JSON
  // pointer (relative to the entry) where compile writes the answer.
  std::function<void(const std::string& at, std::function<bool()> reads)> host_reads;
};

struct NpuOpFamily {
  const char* name;                  // FusionReport::npu key, `run`'s and compile's name for it
  std::vector<const char*> npu_ops;  // the rkdeploy op types of its placed nodes
  const char* lowered;               // what it lowers, for the sentence naming the NPU's operations
  // The ONNX op types of the float graph it takes over (through qdq-to-qlinear's integer forms):
  // the rk3588-rkdeploy profile has a lowered NPU rule for each, and for nothing else (a test).
  std::vector<const char*> sources;
  // The float op types of its kind that the quantizer's plan may keep in float (a layer kept
  // for accuracy, --keep-float): they run on the CPU, and `run` counts them as such.
  std::vector<const char*> float_forms = {};
  const char* section;       // compile's manifest array: "convolutions" or "elementwise"
  const char* entry_prefix;  // its entries' folders: PREFIXnnn
  // Its nodes take rows - a [..., P, C] tensor of rank other than 4 in the token map
  // (npu::lower::npu_map_view) - as well as maps; the kernel converts the host's rows.
  bool rows = false;
  bool next_to_npu = false;
  bool ppu_only = false;        // its tasks end in the PPU: not on a mainline device
  const char* alone = nullptr;  // with next_to_npu, the reason for one that is not (default: its producer and readers)
  bool (*candidate)(const ir::Node& n);
  Status (*lowerable)(const ir::Node& n, const NpuPlacementOptions& o);
  // Optional, before any family's candidates are placed: a rewrite of the graph (Resize: the
  // edge Pad read only by a nearest x2 merged into it).
  Status (*before)(ir::Graph& g, const NpuPlacementOptions& o) = nullptr;
  // Optional, once a candidate is known lowerable: the node to place instead (Conv: the Add
  // that is its only reader fused into it); notes its own counts.
  ir::Node* (*rewrite)(ir::Graph& g, ir::Node* n, const NpuPlacementOptions& o, ir::NpuFamilyPlacement& p) = nullptr;
  std::string (*npu_op)(const ir::Node& n);
  Result<std::shared_ptr<NpuLoweredNode>> (*lower)(const ir::Node& n, const std::shared_ptr<NpuSession>& s);
  Result<nlohmann::ordered_json> (*manifest)(const ir::Node& n, const NpuLoweredNode& ln, const NpuManifestContext& c);
  // "N <what> as <tasks>, M on the CPU" (with `where` and `strategy` for the convolutions).
  std::string (*report)(const ir::NpuFamilyPlacement& p, const std::string& where, const std::string& strategy);
};

// The table, in placement order.
const std::vector<NpuOpFamily>& npu_op_families();
// The family of a placed NPU node (its op type among a family's npu_ops), or null.
const NpuOpFamily* npu_family_of(const ir::Node& n);

// npu-placement: every candidate of every family, in table order, placed where lowerable, or
// listed in `report` (FusionReport::npu[family].on_cpu) with the reason.
ir::Pass npu_placement_pass(const NpuPlacementOptions& o, ir::FusionReport* report);

// "npu: N convolution(s) on WHERE (strategy S, ...), M on the CPU; N Add(s) as DPU tasks, ..."
std::string npu_placement_text(const ir::FusionReport& f, const std::string& where, const std::string& strategy);
// The switches between the CPU and the NPU when the executor runs g in its node order: runs of
// NPU nodes (kOnNpu) and of CPU nodes, views (kView: no computation) joining the run they are
// in; k = runs - 1 (the planner's as-run variant counts the same).
int npu_device_switches(const ir::Graph& g);
// npu-schedule: the node order the executor, `compile`, the artifact, the device back end and the
// planner's as-run all read: ir::device_grouped_order over the CPU and the NPU (the planner's
// serial schedule), started from either device, the order with fewer switches kept (a tie: the
// one starting on the device of the graph's first node). Values keep their data; only the order
// changes, so every result stays bit for bit.
std::vector<const ir::Node*> npu_schedule(const ir::Graph& g);
ir::Pass npu_schedule_pass();
// "int8 convolutions, Adds, ... and channel Concats": what the NPU back end lowers.
std::string npu_lowered_ops_text();
// "conv007": an entry's folder (prefix, index in its section), a task's file name.
std::string npu_numbered(const char* prefix, size_t i);
// The reason the placement gave for leaving node `name` on the CPU, or empty.
std::string npu_cpu_reason(const ir::FusionReport& f, const std::string& name);

}  // namespace rkd::runtime
