// The planner (src/plan): profiles load and their errors name file and field; placement
// follows the rules; k counts device switches of the serial schedule, not unsupported nodes;
// the latency terms equal the model's formulas computed here in double; calibration
// recovers a known parameter; docs/SUPPORTED_OPS.md equals what the profiles generate.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include <unistd.h>

#include "npu/arch/arch.h"
#include "npu/lower/constraints.h"
#include "plan/plan.h"

namespace rkd {
namespace {

using ir::Dim;

const std::string kTargets = std::string(RKD_SOURCE_DIR) + "/targets";

// The test profiles' folder (one per process: CTest runs the cases side by side), with the SoC
// description of their chip "T" in soc/t.json; removed at exit.
struct TempDir {
  std::filesystem::path path = std::filesystem::temp_directory_path() / ("rkd_plan_" + std::to_string(::getpid()));
  TempDir() {
    std::filesystem::create_directories(path / "soc");
    std::ofstream(path / "soc" / "t.json") << R"({
  "schema": "rkdeploy-soc/1", "soc": "T", "sources": ["test"],
  "npu": {"cores": 2, "macs_per_cycle": 500, "clock_mhz": 1000, "utilization": 0.5, "task_overhead_us": 10, "ddr_gbps": 2},
  "cpu": {"name": "c", "cores": 2, "host_factor": 2},
  "boundary": {"layout_us_per_mb": 1000, "copy_gbps": 1}})";
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
};
const std::filesystem::path& temp_dir() {
  static TempDir d;
  return d.path;
}

struct TempFile {
  std::string path;
  explicit TempFile(const std::string& name, const std::string& text) {
    path = (temp_dir() / name).string();
    std::ofstream(path) << text;
  }
  ~TempFile() { std::filesystem::remove(path); }
};

// A small profile: Conv and Add on the NPU, GridSample missing (custom op on the CPU), the
// rest on the CPU; round numbers so the terms are easy to recompute (its chip's constants are
// soc/t.json's, above).
const char* kProfile = R"({
  "schema": "rkdeploy-target/1", "name": "test", "soc": "T", "runtime": "R", "version": "1",
  "npu": {"cores_used": 2, "bytes_per_element": 1},
  "boundary": {"sync_us": 100},
  "custom_op_devices": ["cpu"],
  "zero_cost_ops": ["Reshape"],
  "default": {"device": "cpu", "reason": "default"},
  "calibration": {"free": ["boundary.sync_us"]},
  "ops": [
    {"op": "Conv", "device": "npu", "fallback": "cpu", "reason": "conv", "requires": [
      {"check": "max_kernel", "value": 3, "reason": "kernels up to 3"}]},
    {"op": "Add", "device": "npu", "reason": "ew"},
    {"op": "Sigmoid", "device": "npu", "reason": "lut", "requires": [{"check": "dtype_in", "values": ["float16"], "reason": "fp16 tables only"}]},
    {"op": "GridSample", "device": "none", "custom_op": ["cpu"], "reason": "no kernel"}
  ]
})";

ir::Value* input(ir::Graph& g, const std::string& name, std::vector<int64_t> dims) {
  ir::Value* v = *g.add_value(name);
  v->dtype = DType::f32;
  ir::Dims d;
  for (int64_t x : dims) d.push_back(Dim{x, ""});
  v->shape = d;
  g.inputs.push_back(v);
  return v;
}

ir::Node* node(ir::Graph& g, const std::string& op, std::vector<ir::Value*> in, std::vector<int64_t> out_dims) {
  ir::Node* n = *g.add_node(op + std::to_string(g.nodes().size()), op, "", in, {op + "_out" + std::to_string(g.nodes().size())});
  n->outputs[0]->dtype = DType::f32;
  ir::Dims d;
  for (int64_t x : out_dims) d.push_back(Dim{x, ""});
  n->outputs[0]->shape = d;
  return n;
}

ir::Node* conv(ir::Graph& g, ir::Value* x, int64_t c, int64_t m, int64_t k, int64_t h) {
  Tensor w = Tensor::zeros(DType::f32, {m, c, k, k}).value();
  ir::Node* n = node(g, "Conv", {x, g.add_constant("w", w)}, {1, m, h, h});
  n->attrs["kernel_shape"] = std::vector<int64_t>{k, k};
  n->attrs["pads"] = std::vector<int64_t>{k / 2, k / 2, k / 2, k / 2};
  return n;
}

TEST(TargetProfiles, EveryShippedProfileLoads) {
  auto all = plan::load_targets(kTargets);
  ASSERT_TRUE(all.ok()) << all.error().to_string();
  std::set<std::string> names;
  for (const auto& t : *all) names.insert(t.name);
  for (const char* want : {"rk3588-rknn-2.3.2", "rk3576-rknn-2.3.2", "rk3576-rknn-2.4", "rk3588-mesa-rocket", "rk3588-rkdeploy"}) {
    EXPECT_TRUE(names.count(want)) << want;
  }
  // The 2.4 profile extends 2.3.2 and replaces its GridSample rule.
  auto t = plan::find_target("rk3576-rknn-2.4", kTargets);
  ASSERT_TRUE(t.ok());
  ASSERT_EQ(t->rules_for("GridSample").size(), 1u);
  EXPECT_EQ(t->rules_for("GridSample")[0]->device, plan::Device::gpu);
  EXPECT_EQ(t->rules_for("Conv").size(), 1u);
}

TEST(TargetProfiles, ErrorsNameTheFileAndTheField) {
  struct Case {
    std::string from, to, field;
  };
  const std::vector<Case> cases = {
      {R"("check": "max_kernel")", R"("check": "max_kernal")", "ops[0].requires[0].check"},
      {R"("device": "none", "custom_op")", R"("device": "tpu", "custom_op")", "ops[3].device"},
      {R"("reason": "no kernel")", R"("note": "x")", "ops[3].note"},
      {R"("cores_used": 2)", R"("cores_used": 3)", "npu.cores_used"},
      {R"("sync_us": 100)", R"("sync_us": -1)", "boundary.sync_us"},
      {R"("schema": "rkdeploy-target/1")", R"("schema": "rkdeploy-target/9")", "schema"},
      {R"("free": ["boundary.sync_us"])", R"("free": ["npu.speed"])", "calibration.free"},
  };
  for (const Case& c : cases) {
    std::string text = kProfile;
    const size_t at = text.find(c.from);
    ASSERT_NE(at, std::string::npos) << c.from;
    text.replace(at, c.from.size(), c.to);
    TempFile f("bad.json", text);
    auto t = plan::load_target(f.path);
    ASSERT_FALSE(t.ok()) << c.to;
    EXPECT_NE(t.error().message.find(f.path), std::string::npos) << t.error().message;
    EXPECT_NE(t.error().message.find(c.field), std::string::npos) << t.error().message;
  }
  TempFile junk("junk.json", "{\"schema\": ");
  auto t = plan::load_target(junk.path);
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.error().message.find("not valid JSON"), std::string::npos);
  TempFile loop("loop.json", "{\"extends\": \"loop.json\"}");
  EXPECT_FALSE(plan::load_target(loop.path).ok());
}

// Fuzz finding (fuzz_plan, docs/fuzzing.md): a field of the wrong JSON type made nlohmann's
// value() throw through read_measurements; every such field is an error naming it.
TEST(MeasurementFiles, FieldsOfTheWrongTypeAreErrorsNotExceptions) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {R"({"schema": 4})", "schema"},
      {R"({"schema": "rkdeploy-measurements/1", "measurements": [{"target": "t", "variant": "as-is", "latency_ms": 1, "role": 7}]})",
       "measurements[0].role: must be a string"},
      {R"({"schema": "rkdeploy-measurements/1", "measurements": [{"target": "t", "variant": "as-is", "latency_ms": 1, "source": []}]})",
       "measurements[0].source: must be a string"},
  };
  for (const auto& [text, field] : cases) {
    TempFile f("m.json", text);
    auto m = plan::read_measurements(f.path);
    ASSERT_FALSE(m.ok()) << text;
    EXPECT_NE(m.error().message.find(field), std::string::npos) << m.error().message;
  }
  TempFile cpu("cpu.json", R"({"schema": ["x"]})");
  EXPECT_FALSE(plan::read_board_times(cpu.path).ok());
}

TEST(Placement, RequirementsDecideAndTheirReasonsAreReported) {
  TempFile f("p.json", kProfile);
  const plan::Target t = *plan::load_target(f.path);
  ir::Graph g;
  g.opset = 17;
  ir::Value* x = input(g, "x", {1, 4, 8, 8});
  ir::Node* small = conv(g, x, 4, 4, 3, 8);
  ir::Node* big = conv(g, small->outputs[0], 4, 4, 5, 8);
  ir::Node* gs = node(g, "GridSample", {big->outputs[0], x}, {1, 4, 8, 8});
  ir::Node* other = node(g, "Softmax", {gs->outputs[0]}, {1, 4, 8, 8});
  EXPECT_EQ(plan::place(t, *small).device, plan::Device::npu);
  const plan::Placement pb = plan::place(t, *big);
  EXPECT_EQ(pb.device, plan::Device::cpu);
  EXPECT_NE(pb.reason.find("kernel 5"), std::string::npos) << pb.reason;
  EXPECT_NE(pb.reason.find("kernels up to 3"), std::string::npos) << pb.reason;
  EXPECT_EQ(plan::place(t, *gs).device, plan::Device::none);
  EXPECT_EQ(plan::place(t, *other).reason, "default");
  ir::Node* sig = node(g, "Sigmoid", {other->outputs[0]}, {1, 4, 8, 8});
  EXPECT_EQ(plan::place(t, *sig).device, plan::Device::cpu);
  EXPECT_EQ(plan::place(t, *sig).reason, "float32 input: fp16 tables only");
}

// One description per chip: every profile of a SoC prices the hardware with the same constants
// (targets/soc/<soc>.json; the RK3588's MAC rate and cores are the lowering's arch description),
// whatever its runtime places and emits.
TEST(Targets, EveryProfileOfAChipReadsItsOneDescription) {
  const auto all = plan::load_targets(kTargets);
  ASSERT_TRUE(all.ok()) << all.error().message;
  std::map<std::string, const plan::Target*> first;
  for (const plan::Target& t : *all) {
    SCOPED_TRACE(t.name);
    EXPECT_NE(t.soc_path.find("/soc/"), std::string::npos) << t.soc_path;
    const plan::Target*& f = first[t.soc];
    if (!f) {
      f = &t;
      continue;
    }
    EXPECT_EQ(t.soc_path, f->soc_path);
    EXPECT_EQ(t.npu.cores, f->npu.cores);
    EXPECT_EQ(t.npu.macs_per_cycle, f->npu.macs_per_cycle);
    EXPECT_EQ(t.npu.clock_mhz, f->npu.clock_mhz);
    EXPECT_EQ(t.npu.utilization, f->npu.utilization);
    EXPECT_EQ(t.npu.task_overhead_us, f->npu.task_overhead_us);
    EXPECT_EQ(t.npu.ddr_gbps, f->npu.ddr_gbps);
    EXPECT_EQ(t.cpu.name, f->cpu.name);
    EXPECT_EQ(t.cpu.host_factor, f->cpu.host_factor);
    EXPECT_EQ(t.gpu.present, f->gpu.present);
    EXPECT_EQ(t.gpu.host_factor, f->gpu.host_factor);
    EXPECT_EQ(t.boundary.layout_us_per_mb, f->boundary.layout_us_per_mb);
    EXPECT_EQ(t.boundary.copy_gbps, f->boundary.copy_gbps);
  }
  EXPECT_EQ(first.size(), 2u);  // RK3588, RK3576
  const plan::Target& rk3588 = *first.at("RK3588");
  const auto& a = npu::arch::kRk3588;
  EXPECT_EQ(rk3588.npu.macs_per_cycle, static_cast<double>(a.int8_macs_per_cycle_per_core));
  EXPECT_EQ(rk3588.npu.cores, a.cores);
  EXPECT_EQ(rk3588.npu.clock_mhz * 1e6, static_cast<double>(a.clock_hz));
}

// A profile that gives one of the chip's constants itself is refused, naming the SoC file.
TEST(Targets, AProfileCannotRestateTheChipsConstants) {
  const std::string dir = ::testing::TempDir() + "/rkd_soc_profiles";
  std::filesystem::create_directories(dir + "/soc");
  std::filesystem::copy_file(std::string(kTargets) + "/soc/rk3588.json", dir + "/soc/rk3588.json", std::filesystem::copy_options::overwrite_existing);
  const std::string head = R"({"schema": "rkdeploy-target/1", "name": "x", "soc": "RK3588", "runtime": "r", "version": "1", "sources": [],
    "custom_op_devices": [], "zero_cost_ops": [], "default": {"device": "cpu", "reason": "r"}, "ops": [], )";
  auto write = [&](const std::string& name, const std::string& rest) {
    std::ofstream(dir + "/" + name) << head << rest << "}";
    return plan::load_target(dir + "/" + name);
  };
  auto ok = write("ok.json", R"("npu": {"bytes_per_element": 1}, "boundary": {"sync_us": 10})");
  ASSERT_TRUE(ok.ok()) << ok.error().message;
  EXPECT_EQ(ok->npu.cores_used, 3);
  EXPECT_EQ(ok->soc_path, dir + "/soc/rk3588.json");
  auto ddr = write("ddr.json", R"("npu": {"bytes_per_element": 1, "ddr_gbps": 30}, "boundary": {"sync_us": 10})");
  ASSERT_FALSE(ddr.ok());
  EXPECT_EQ(ddr.error().message, dir + "/ddr.json: npu.ddr_gbps: the SoC description " + dir + "/soc/rk3588.json holds the chip's constants");
  auto cpu = write("cpu.json", R"("npu": {"bytes_per_element": 1}, "boundary": {"sync_us": 10}, "cpu": {"name": "a", "cores": 1, "host_factor": 1})");
  ASSERT_FALSE(cpu.ok());
  EXPECT_NE(cpu.error().message.find("cpu: the SoC description"), std::string::npos) << cpu.error().message;
  std::ofstream(dir + "/other.json") << head << R"("npu": {"bytes_per_element": 1}, "boundary": {"sync_us": 10}})";
  std::string text;
  {
    std::ifstream in(dir + "/other.json");
    text.assign(std::istreambuf_iterator<char>(in), {});
  }
  const auto pos = text.find("RK3588");
  text.replace(pos, 6, "RK9999");
  std::ofstream(dir + "/other.json") << text;
  auto none = plan::load_target(dir + "/other.json");
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.error().message.find("soc: no SoC description rk9999.json"), std::string::npos) << none.error().message;
}

// The rk3588-rkdeploy profile places a convolution on the NPU exactly when the lowering's own
// constraints (npu/lower/constraints.h) take its geometry.
TEST(Placement, TheRkdeployProfileAgreesWithTheLoweringConstraints) {
  const plan::Target t = *plan::find_target("rk3588-rkdeploy", kTargets);
  const auto& l = npu::lower::conv_limits();
  struct G {
    int64_t c, oc, h, w, k, stride, pad, dilation, group;
  };
  const std::vector<G> cases = {
      {8, 8, 16, 16, 3, 1, 1, 1, 1},                           // ordinary
      {8, 8, 40, 40, l.max_kernel_w, 1, l.max_pad_top, 1, 1},  // the largest kernel and padding
      {8, 8, 40, 40, l.max_kernel_w + 1, 1, 0, 1, 1},          // one past the kernel field
      {8, 8, 64, 64, 9, l.max_stride_w, 0, 1, 1},              // the largest stride
      {8, 8, 64, 64, 9, l.max_stride_w + 1, 0, 1, 1},          // one past it
      {8, 8, 40, 40, 3, 1, l.max_pad_top + 1, 1, 1},           // padding past its field
      {4, 4, 8, l.max_width, 1, 1, 0, 1, 1},                   // the widest map
      {4, 4, 8, l.max_width + 1, 1, 1, 0, 1, 1},               // one wider
      {8, 8, 16, 16, 3, 1, 2, 2, 1},                           // dilated
      {8, 8, 16, 16, 3, 1, 1, 1, 8},                           // depthwise
      {8, 16, 16, 16, 3, 1, 1, 1, 4},                          // grouped
  };
  for (const G& c : cases) {
    ir::Graph g;
    g.opset = 17;
    ir::Value* x = input(g, "x", {1, c.c, c.h, c.w});
    Tensor w = Tensor::zeros(DType::f32, {c.oc, c.c / c.group, c.k, c.k}).value();
    const int64_t ke = (c.k - 1) * c.dilation + 1;
    const int64_t oh = (c.h + 2 * c.pad - ke) / c.stride + 1, ow = (c.w + 2 * c.pad - ke) / c.stride + 1;
    ir::Node* n = node(g, "Conv", {x, g.add_constant("w", w)}, {1, c.oc, oh, ow});
    n->attrs["pads"] = std::vector<int64_t>{c.pad, c.pad, c.pad, c.pad};
    n->attrs["strides"] = std::vector<int64_t>{c.stride, c.stride};
    n->attrs["dilations"] = std::vector<int64_t>{c.dilation, c.dilation};
    n->attrs["group"] = c.group;
    npu::lower::ConvGeometry geo;
    geo.C = c.c;
    geo.H = c.h;
    geo.W = c.w;
    geo.OC = c.oc;
    geo.KH = geo.KW = c.k;
    geo.stride_h = geo.stride_w = c.stride;
    geo.pad_top = geo.pad_left = c.pad;
    geo.dilation_h = geo.dilation_w = c.dilation;
    geo.groups = c.group;
    const auto v = npu::lower::check_conv(geo);
    const plan::Placement p = plan::place(t, *n);
    const std::string what = "k " + std::to_string(c.k) + " stride " + std::to_string(c.stride) + " pad " + std::to_string(c.pad) + " width " +
                             std::to_string(c.w) + " dilation " + std::to_string(c.dilation) + " groups " + std::to_string(c.group);
    if (v.empty()) {
      EXPECT_EQ(p.device, plan::Device::npu) << what << ": " << p.reason;
      EXPECT_TRUE(p.lowered) << what;
    } else {
      // The 1x1 refold rule may still take it (not lowered); never as a lowered NPU op.
      EXPECT_FALSE(p.device == plan::Device::npu && p.lowered) << what << ": " << p.reason;
      if (p.device == plan::Device::cpu) {
        EXPECT_NE(p.reason.find(v[0].found), std::string::npos) << what << ": " << p.reason;
      }
    }
  }
}

// Averages: the windows ir::average_window takes are placed as the lowered NPU rows (one
// depthwise convolution) while that convolution keeps to the rules; the others take the
// profile's next row (not lowered) or fall back to the CPU, with that row's reason or the
// convolution rule's.
TEST(Placement, AveragesAreLoweredWhereOneDepthwiseConvolutionComputesThem) {
  const plan::Target t = *plan::find_target("rk3588-rkdeploy", kTargets);
  const int64_t big = npu::lower::conv_limits().max_kernel_w + 1;
  struct Case {
    const char* op;
    int64_t h, w, k, stride, pad, count_include_pad;
    std::vector<int64_t> axes;
    const char* reason;  // null: lowered on the NPU; else what the placement's reason says
  };
  const Case cases[] = {
      {"AveragePool", 16, 16, 3, 2, 0, 0, {}, nullptr},
      {"AveragePool", 16, 16, 3, 1, 1, 1, {}, nullptr},
      {"AveragePool", 16, 16, 3, 1, 1, 0, {}, "count_include_pad 0 with padding"},
      {"GlobalAveragePool", 20, 24, 0, 0, 0, 0, {}, nullptr},
      {"GlobalAveragePool", big, big, 0, 0, 0, 0, {}, "kernel <= "},
      {"ReduceMean", 12, 9, 0, 0, 0, 0, {2, 3}, nullptr},
      {"ReduceMean", 12, 9, 0, 0, 0, 0, {1}, "other axes"},
  };
  for (const Case& c : cases) {
    ir::Graph g;
    g.opset = 17;
    ir::Value* x = input(g, "x", {1, 8, c.h, c.w});
    const bool window = std::string(c.op) == "AveragePool";
    const int64_t oh = window ? (c.h + 2 * c.pad - c.k) / c.stride + 1 : 1, ow = window ? (c.w + 2 * c.pad - c.k) / c.stride + 1 : 1;
    const bool channels = c.axes == std::vector<int64_t>{1};
    ir::Node* n = node(g, c.op, {x}, {1, channels ? 1 : 8, channels ? c.h : oh, channels ? c.w : ow});
    if (window) {
      n->attrs["kernel_shape"] = std::vector<int64_t>{c.k, c.k};
      n->attrs["strides"] = std::vector<int64_t>{c.stride, c.stride};
      n->attrs["pads"] = std::vector<int64_t>(4, c.pad);
      n->attrs["count_include_pad"] = c.count_include_pad;
    }
    if (!c.axes.empty()) n->attrs["axes"] = c.axes;
    const plan::Placement p = plan::place(t, *n);
    const std::string what = std::string(c.op) + " " + std::to_string(c.h) + "x" + std::to_string(c.w);
    if (!c.reason) {
      EXPECT_EQ(p.device, plan::Device::npu) << what << ": " << p.reason;
      EXPECT_TRUE(p.lowered) << what;
    } else {
      EXPECT_FALSE(p.device == plan::Device::npu && p.lowered) << what << ": " << p.reason;
      EXPECT_NE(p.reason.find(c.reason), std::string::npos) << what << ": " << p.reason;
    }
  }
}

// x -> conv -> {GridSample a, GridSample b} -> Add -> conv -> GridSample c -> conv: three
// unsupported nodes; the two parallel ones share one CPU segment, so the custom-op variant
// has NPU, CPU, NPU, CPU, NPU: k = 4, and the as-is variant fails naming all three.
TEST(Partition, KCountsDeviceSwitchesNotUnsupportedNodes) {
  TempFile f("p.json", kProfile);
  const plan::Target t = *plan::load_target(f.path);
  ir::Graph g;
  g.opset = 17;
  ir::Value* x = input(g, "x", {1, 4, 8, 8});
  ir::Node* c1 = conv(g, x, 4, 4, 3, 8);
  ir::Node* ga = node(g, "GridSample", {c1->outputs[0], x}, {1, 4, 8, 8});
  ir::Node* gb = node(g, "GridSample", {c1->outputs[0], x}, {1, 4, 8, 8});
  ir::Node* add = node(g, "Add", {ga->outputs[0], gb->outputs[0]}, {1, 4, 8, 8});
  ir::Node* view = node(g, "Reshape", {add->outputs[0]}, {1, 4, 8, 8});
  ir::Node* c2 = conv(g, view->outputs[0], 4, 4, 3, 8);
  ir::Node* gc = node(g, "GridSample", {c2->outputs[0], x}, {1, 4, 8, 8});
  ir::Node* c3 = conv(g, gc->outputs[0], 4, 4, 3, 8);
  g.outputs.push_back(c3->outputs[0]);
  std::map<std::string, double> host;
  for (const auto& n : g.nodes()) host[n->name] = 1.5;
  auto as_is = plan::plan_variant(g, t, plan::Variant::as_is, host);
  ASSERT_TRUE(as_is.ok());
  EXPECT_FALSE(as_is->executable);
  EXPECT_EQ(as_is->failures.size(), 3u);
  EXPECT_NE(as_is->failures[0].find(ga->name), std::string::npos);
  auto p = plan::plan_variant(g, t, plan::Variant::custom_op_cpu, host);
  ASSERT_TRUE(p.ok());
  ASSERT_TRUE(p->executable);
  EXPECT_EQ(p->k, 4);
  ASSERT_EQ(p->segments.size(), 5u);
  const std::vector<plan::Device> want = {plan::Device::npu, plan::Device::cpu, plan::Device::npu, plan::Device::cpu, plan::Device::npu};
  for (size_t i = 0; i < want.size(); ++i) EXPECT_EQ(p->segments[i].device, want[i]) << i;
  EXPECT_EQ(p->segments[1].nodes.size(), 2u);  // both parallel GridSamples
  // The custom-op GPU variant is not available on this profile.
  auto gpu = plan::plan_variant(g, t, plan::Variant::custom_op_gpu, host);
  ASSERT_TRUE(gpu.ok());
  EXPECT_FALSE(gpu->executable);

  // The terms, recomputed from the model's definition in double.
  const double rate = 500.0 * 2 * 1000e6 * 0.5;  // MAC/s
  double npu_compute = 0, npu_traffic = 0, cpu = 0;
  // Each node the longer of its compute and its traffic (they overlap), in that one's term.
  for (ir::Node* c : {c1, add, c2, c3}) {
    const double macs = c->op_type == "Conv" ? 8.0 * 8 * 4 * 4 * 9 : 0;
    const double bytes = c->op_type == "Conv" ? (256 + 144 + 256) : 3 * 256;
    const double compute = macs / rate * 1e3, traffic = bytes / 2e9 * 1e3;
    (compute >= traffic ? npu_compute : npu_traffic) += std::max(compute, traffic);
  }
  cpu = 3 * 1.5 * 2;
  EXPECT_NEAR(p->terms.npu_compute, npu_compute, 1e-9);
  EXPECT_NEAR(p->terms.npu_traffic, npu_traffic, 1e-9);
  EXPECT_NEAR(p->terms.npu_overhead, 4 * 0.010, 1e-12);
  EXPECT_NEAR(p->terms.cpu, cpu, 1e-12);
  // Entering segments: CPU 1 reads c1 (1 KiB), NPU 2 reads a and b (2 KiB), CPU 3 reads c2, NPU 4 reads c.
  const double in_bytes = (1 + 2 + 1 + 1) * 256 * 4.0;
  EXPECT_NEAR(p->terms.boundary_sync, 4 * 0.1, 1e-12);
  EXPECT_NEAR(p->terms.boundary_layout, 1000.0 * in_bytes / 1e6 / 1e3, 1e-12);
  EXPECT_NEAR(p->terms.boundary_copy, in_bytes / 1e9 * 1e3, 1e-12);
  EXPECT_NEAR(p->terms.total(), npu_compute + npu_traffic + 0.04 + cpu + 0.4 + in_bytes / 1e6 + in_bytes / 1e6, 1e-9);

  // Calibration recovers a sync cost from a latency computed with it.
  plan::Target t2 = t;
  std::vector<plan::VariantPlan> plans{*p};
  const double truth = 2345.0;
  const double measured = p->terms.total() + 4 * (truth - 100) / 1e3;
  auto fit = plan::calibrate(t2, plans, {plan::Measurement{"test", "custom-op-cpu", "unit test", "fit", measured, ""}});
  ASSERT_TRUE(fit.ok()) << fit.error().to_string();
  EXPECT_NEAR(fit->after.at("boundary.sync_us"), truth, 1e-3 * truth);
  EXPECT_NEAR(fit->rows[0].predicted_ms, measured, 1e-6 * measured);
  // A measurement of a variant the plan does not hold is an error that says so.
  auto bad = plan::calibrate(t2, plans, {plan::Measurement{"test", "fused-fallback", "", "fit", 10, ""}});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("fused-fallback"), std::string::npos);
}

TEST(Efficiency, LoweredNodesAgainstTheirIdeal) {
  // Two convolutions priced from lowered tasks: c1 as one task that computes and moves just its
  // work, c2 as four tasks that pad its MACs to 4x and move 40 kB each over two jobs on the two
  // cores - bound by the DDR they share. The efficiency list puts c2 first, with the figures
  // recomputed here.
  TempFile f("e.json", kProfile);
  const plan::Target t = *plan::load_target(f.path);
  ir::Graph g;
  g.opset = 17;
  ir::Value* x = input(g, "x", {1, 4, 8, 8});
  ir::Node* c1 = conv(g, x, 4, 4, 3, 8);
  ir::Node* c2 = conv(g, c1->outputs[0], 4, 4, 3, 8);
  g.outputs.push_back(c2->outputs[0]);
  const double macs = 8.0 * 8 * 4 * 4 * 9, min_bytes = 256 + 144 + 256;
  plan::RuntimePlacement rt;
  rt.lowered[c1->name] = plan::NpuNodeCost{{{macs, 400, 256}}, {{0, {0}}}};
  rt.lowered[c2->name] =
      plan::NpuNodeCost{{{macs, 30000, 10000}, {macs, 30000, 10000}, {macs, 30000, 10000}, {macs, 30000, 10000}}, {{0, {0, 1}}, {0, {2, 3}}}};
  auto p = plan::plan_variant(g, t, plan::Variant::as_is, {}, {}, rt);
  ASSERT_TRUE(p.ok()) << p.error().to_string();
  const auto eff = plan::npu_efficiency(*p, t);
  ASSERT_EQ(eff.size(), 2u);
  EXPECT_EQ(eff[0].node->name, c2->name);
  EXPECT_EQ(eff[0].work.tasks, 4);
  EXPECT_EQ(eff[0].work.jobs, 2);
  EXPECT_DOUBLE_EQ(eff[0].work.mac_utilization(), 0.25);
  EXPECT_DOUBLE_EQ(eff[0].work.traffic_ratio(), 4 * 40000 / min_bytes);
  // Each job 10 us + two tasks of 40 kB at 2 GB/s on its own core: 0.05 ms; the four tasks'
  // 160 kB through the one DDR take 0.08 ms, the node's time.
  EXPECT_NEAR(eff[0].ms, 4 * 40000 / 2e9 * 1e3, 1e-12);
  EXPECT_NEAR(eff[1].ms, 0.010 + min_bytes / 2e9 * 1e3, 1e-12);
  EXPECT_DOUBLE_EQ(eff[1].work.mac_utilization(), 1.0);
  EXPECT_DOUBLE_EQ(eff[1].work.traffic_ratio(), 1.0);
  // The ideal: the longer of the MACs on both cores (500 MAC/cycle, 1 GHz, utilisation 0.5)
  // and the minimum bytes at 2 GB/s, plus one job's 10 us.
  const double ideal = std::max(macs / (500.0 * 2 * 1000e6 * 0.5), min_bytes / 2e9) * 1e3 + 0.010;
  for (const auto& e : eff) {
    EXPECT_NEAR(e.ideal_ms, ideal, 1e-12);
    EXPECT_DOUBLE_EQ(e.ms, e.node->ms);
  }
  EXPECT_NEAR(eff[1].excess_ms(), 0.0, 1e-12);  // one task, every byte once: the ideal itself
  EXPECT_GT(eff[0].excess_ms(), 0.0);
}

TEST(SupportedOpsDoc, MatchesTheProfiles) {
  auto all = plan::load_targets(kTargets);
  ASSERT_TRUE(all.ok());
  std::ifstream f(std::string(RKD_SOURCE_DIR) + "/docs/SUPPORTED_OPS.md");
  std::stringstream ss;
  ss << f.rdbuf();
  EXPECT_EQ(ss.str(), plan::supported_ops_markdown(*all)) << "regenerate: rkdeploy plan --supported-ops > docs/SUPPORTED_OPS.md";
}

}  // namespace
}  // namespace rkd
