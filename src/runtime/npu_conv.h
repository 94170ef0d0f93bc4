// The bridge between the int8 graph and the NPU back end: each NPU operation's spec from its
// node (a QLinearConv as an npu::lower::ConvSpec, ...; the geometry part is plan's
// npu_*_geometry, which the planner reads too), and the kernels that run the placed nodes on
// the simulator or a device in one shared device memory (npu_kernels.cc). Which node becomes
// which NPU node, and in which order, is the NPU operation table's (npu_ops.h).
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "core/result.h"
#include "ir/ir.h"
#include "npu/lower/eltwise.h"
#include "npu/lower/lower.h"
#include "npu/sim/sim.h"
#include "ir/pass.h"
#include "runtime/executor.h"
#include "runtime/op_registry.h"

namespace rkd::runtime {

// The NPU convolution of a QLinearConv node (static [1, C, H, W] input, constant weights,
// per-tensor input/output quantization, groups 1 or depthwise, no dilation; fused clamp from
// rkd_act_min / rkd_act_max) within the lowering's shared limits (npu::lower::check_spec),
// or why the lowering cannot express it.
// A QLinearMatMul (or its placed NpuMatMul) is the 1 x 1 convolution npu_matmul_spec gives.
Result<npu::lower::ConvSpec> npu_conv_spec(const ir::Node& n);
// The NPU convolution of a QLinearMatMul / NpuMatMul with a constant 2-D B [K, N] (per-column
// or one weight scale, per-tensor A and Y, optional int32 bias [N] as input 8): B^T as the
// weights [N, K, 1, 1] of a 1 x 1 convolution over A's rows folded into the token map
// (npu::lower::npu_token_map: C = K, H x W = A's rows); the host's A [..., P, K] and Y [..., P, N]
// are that map channels-last (the kernel converts them).
Result<npu::lower::ConvSpec> npu_matmul_spec(const ir::Node& n);
bool npu_matmul_node(const ir::Node& n);
// Lowers `spec` with `strategy` into scratch device memory and discards it: ok when the
// convolution can run on the NPU that way, else the lowering's reason (weights that no CBUF
// split fits, ...). What cannot be lowered stays on the CPU.
Status npu_try_lower(const npu::lower::ConvSpec& spec, npu::lower::Strategy strategy);

// The NPU add of an rkdeploy.QLinearAdd node (static [1, C, H, W] operands, or rows
// (npu::lower::npu_map_view), of one shape and type, per-tensor constant scales and zero points), within constraints.h's eltwise rules
// and the converters' ranges (npu::lower::check_add), or why not.
// rkdeploy.QLinearSub / QLinearMax / QLinearMin (and their Npu nodes) alike, with AddSpec::alu
// from the op (binary_alu_of: QLinearAdd / NpuAdd add, ...; none for other nodes).
Result<npu::lower::AddSpec> npu_add_spec(const ir::Node& n);
std::optional<quant::BinaryAlu> binary_alu_of(const ir::Node& n);

// The NPU multiply of an rkdeploy.QLinearMul node (A a static [1, C, H, W] map of the output's
// shape; B of its shape, [1, C, 1, 1] or one element; per-tensor constant scales and zero
// points), within constraints.h's eltwise rules and OUT_CVT's range (npu::lower::check_mul),
// or why not; the kernel runs it as one DPU-only task (quant::rknpu_mul_plan's arithmetic).
Result<npu::lower::MulSpec> npu_mul_spec(const ir::Node& n);

// The NPU LeakyRelu of an rkdeploy.QLinearLut made from a LeakyRelu site (attributes rkd_op,
// rkd_alpha, rkd_x_scale / _zero_point, rkd_y_scale / _zero_point: quant/qlinear_lut.cc), or
// why not; the kernel runs it as one DPU-only task (quant::rknpu_leaky_relu_plan).
Result<npu::lower::LeakyReluSpec> npu_leaky_relu_spec(const ir::Node& n);
// Entries of the node's table that differ from the NPU's arithmetic (0 under rknpu_out_cvt,
// whose tables are the NPU's; with onnx_float tables: the bound, per node, of 256).
Result<int> npu_leaky_relu_table_differences(const ir::Node& n);
// Any other rkdeploy.QLinearLut (a function of the input code: Sigmoid, SiLU, HardSwish, ...)
// on a static [1, C, H, W] map, input and output of one 8-bit type, as one DPU-only task
// through the DPU's lookup table (npu::lower::lower_lut), or why not.
Result<npu::lower::LutSpec> npu_lut_spec(const ir::Node& n);
// An integer Concat (qdq-to-qlinear leaves one where every part is quantized alike) along the
// channels of [1, C, H, W] int8/uint8 maps; unsupported with constraints.h's reason otherwise.
Result<npu::lower::ConcatSpec> npu_concat_spec(const ir::Node& n);
// A plain Concat of int8/uint8 values: one the NPU is asked to take (placement, compile; a
// float Concat is not the int8 graph's and stays on the CPU without a reason).
bool npu_concat_candidate(const ir::Node& n);
// An integer Split (qdq-to-qlinear moves a Split of a per-tensor map to the integers) along
// the channels of a [1, C, H, W] int8/uint8 map; unsupported with constraints.h's reason
// otherwise. The candidate test as for Concat.
Result<npu::lower::SplitSpec> npu_split_spec(const ir::Node& n);
bool npu_split_candidate(const ir::Node& n);

// An integer MaxPool (qdq-to-qlinear's, on int8/uint8 codes: quant/qlinear_lut.cc) of a
// static [1, C, H, W] map as one PPU-only task (npu::lower::lower_max_pool), within
// constraints.h's pool rules, or why not. The candidate test: a MaxPool of 8-bit integers.
Result<npu::lower::MaxPoolSpec> npu_max_pool_spec(const ir::Node& n);
bool npu_max_pool_candidate(const ir::Node& n);

// An integer Pad (qdq-to-qlinear's, on int8/uint8 codes) of the channels' end with one constant
// code on a static [1, C, H, W] map as one DPU-only task (npu::lower::lower_channel_pad), or
// why not. The candidate test: a Pad of 8-bit integers.
Result<npu::lower::ChannelPadSpec> npu_channel_pad_spec(const ir::Node& n);
bool npu_channel_pad_candidate(const ir::Node& n);

// An integer Resize (qdq-to-qlinear moves a nearest Resize to the integers) that repeats each
// cell of a static [1, C, H, W] map in a 2 x 2 block - the kernel's own nearest sources are
// i / 2 along height and width, whatever the coordinate transformation and rounding that give
// them - as copy tasks (npu::lower::lower_upsample2), or why not. The candidate test: a nearest
// Resize of 8-bit integers.
Result<npu::lower::Upsample2Spec> npu_upsample2_spec(const ir::Node& n);
bool npu_upsample2_candidate(const ir::Node& n);

// An integer DepthToSpace (DCR, blocksize 2: qdq-to-qlinear's form of a 2 x 2 stride-2
// ConvTranspose after its 1 x 1 convolution) of a static [1, 4 C, H, W] map, C a multiple of
// 16, as copy tasks (npu::lower::lower_depth_to_space2), or why not. The candidate test: a
// DepthToSpace of 8-bit integers.
Result<npu::lower::DepthToSpace2Spec> npu_depth_to_space_spec(const ir::Node& n);
bool npu_depth_to_space_candidate(const ir::Node& n);

// Device-memory chaining. The NPU nodes of one executor share one simulated device memory
// (an NpuSession); each is lowered once when its kernel is prepared (in node order), and an
// input that an earlier NPU node's output holds in the layout the reader would allocate
// (npu::lower::chainable: a convolution whose one task group writes every channel in order,
// an element-wise task's dense output; a convolution's input needs at least 4 rows) is read
// there: the host neither reads it back nor writes it again. Values a CPU node or the caller
// reads (graph outputs, through name-giving Identities) are read back after their producer
// runs. npu_node_kernel(n, nullptr): the node alone, every value through the host.
struct NpuSession;
class NpuDevice;
// With a device (npu_device.h): the session lowers at the device's base address and its kernels
// submit jobs to it (npu_session_attach) instead of running the simulator.
std::shared_ptr<NpuSession> make_npu_session(const std::vector<ir::Value*>& graph_outputs, std::shared_ptr<NpuDevice> device = nullptr);
// Whether the session, every node lowered, needs the device's arena made (or remade) and every
// node lowered again at its address: no arena yet, another base, or too small.
bool npu_session_needs_arena(const NpuSession& s, const NpuDevice& d);
// Moves the session's device memory into the device's arena (FINI_BO: weights, operands and
// register commands are the device's) and makes a token buffer object per job.
Status npu_session_attach(NpuSession& s, std::shared_ptr<NpuDevice> d);
// One NPU node lowered into a session: what `rkdeploy compile` writes and what its kernel runs.
struct NpuLoweredNode {
  const ir::Node* node = nullptr;
  npu::sim::Quirks quirks;                           // from rkd_npu_knobs
  std::optional<npu::lower::ConvSpec> conv;          // an NpuConv or NpuMatMul: conv_lowered holds its tasks
  bool channels_last = false;                        // an NpuMatMul: the host's input and output are [..., P, C] (the token map's rows)
  npu::lower::Lowered conv_lowered;                  //   (its input at conv_lowered.input_address)
  std::optional<npu::lower::ConvSpec> compaction;    // its regions' compaction on the NPU (npu::lower::compaction_spec), tasks after the conv's:
  npu::lower::Lowered compaction_lowered;            //   when the regions are out of order and an NPU node reads the output
  std::optional<npu::lower::DeviceMap> conv_output;  // the conv's output as one map (compacted or not), if it is one:
  std::vector<int64_t> conv_output_channels;         //   empty: in channel order; else its regions, read by convolutions with permuted weights
  npu::lower::LoweredEltwise eltwise;                // any other NPU node's tasks and maps
  npu::lower::PlacedRegcmd regcmd;                   // the tasks' chained register commands
  std::vector<size_t> data_inputs;                   // node input index of the lowering's data input i (a conv: {0})
  std::vector<const ir::Value*> read_from;           // per data input: the NPU node's output read in place, or null (the host writes it)
  std::vector<std::function<bool()>> host_reads;     // per output: whether the host reads it back (final once the session's every node is lowered)
};
// The jobs an NPU node's tasks form on a device: stage 0 the node's own tasks, a convolution's
// split into up to `cores` jobs of consecutive tasks balanced by their output cells x channels
// (its channel groups and row slices write disjoint outputs and read only the input, weights
// and operands); stage 1, after every stage-0 job, the compaction tasks (they read the
// convolution's regions). Any other node: one job of all its tasks (its copy tasks are not
// proven independent).
struct NpuJobPlan {
  int stage = 0;
  std::vector<size_t> tasks;  // indices into the node's PlacedRegcmd::spans
  int64_t cost = 0;           // output cells x channels its tasks write (0: not a convolution's)
};
std::vector<NpuJobPlan> npu_node_jobs(const NpuLoweredNode& ln, int cores);
// Lowers an NPU node (npu_ops.h: a node of a family of the NPU operation table, placed by
// npu_placement_pass with its attributes rkd_npu_knobs and, a convolution, rkd_npu_strategy) into
// `session`, after the nodes lowered before it (their order is the graph's).
Result<std::shared_ptr<const NpuLoweredNode>> lower_npu_node(const ir::Node& n, const std::shared_ptr<NpuSession>& session);
// The families' lowerings (npu_ops.cc) into a session. A convolution: its input read in place or
// placed (padding lanes and rows, and until the host writes it every value, the input zero
// point), its regions compacted on the NPU when an NPU reader needs them in order.
Result<std::shared_ptr<NpuLoweredNode>> lower_conv_node(const ir::Node& n, const std::shared_ptr<NpuSession>& s);
// Any other: `lower` places its maps (the inputs `at` names chained) and tasks; data_inputs[i] is
// the node input index of the lowering's data input i.
using NpuEltwiseLowering = std::function<Result<npu::lower::LoweredEltwise>(npu::DeviceMemory&, const npu::lower::InputsAt&)>;
Result<std::shared_ptr<NpuLoweredNode>> lower_eltwise_node(const ir::Node& n, const std::shared_ptr<NpuSession>& s, const NpuEltwiseLowering& lower,
                                                           std::vector<size_t> data_inputs);
// What each of a lowered node's tasks asks of the hardware: npu::sim::chain_work on its register
// commands in the session's memory (the planner's cost of the graph the runtime executes).
Result<std::vector<npu::sim::TaskWork>> npu_node_work(const NpuSession& s, const NpuLoweredNode& ln);
// The device memory the session's nodes are lowered into.
const npu::DeviceMemory& npu_session_memory(const NpuSession& s);
// The kernel of an NPU node lowered into `session` (null: its own, every value through the
// host): per call the host writes the inputs read_from leaves to it, the tasks run on the
// simulator, and the outputs host_reads names are read back.
Result<Kernel> npu_node_kernel(const ir::Node& n, std::shared_ptr<NpuSession> session);
// What the session's nodes move: data inputs read in place or written by the host, outputs
// read back by the host or left in device memory only.
struct NpuChaining {
  int chained_inputs = 0, host_written_inputs = 0, host_read_outputs = 0, device_only_outputs = 0;
};
NpuChaining npu_chaining(const NpuSession& s);
// "N input(s) read in place from the NPU node before, N written by the host; N output(s) only
// in device memory, N read back by the host" (run --backend sim and compile print it).
std::string npu_chaining_text(const NpuChaining& c);

}  // namespace rkd::runtime
