// Target profiles: reading targets/*.json (docs/target-profile.md), placing nodes, and the
// supported-ops table generated from the same data.
#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "ir/op_info.h"
#include "ir/passes/shape_inference.h"
#include "core/npy.h"
#include "npu/arch/arch.h"
#include "npu/lower/constraints.h"
#include "plan/plan.h"

namespace rkd::plan {

using nlohmann::json;
using npu::lower::npu_binary_geometry;
using npu::lower::npu_conv_geometry;
using npu::lower::npu_matmul_geometry;
using npu::lower::npu_parts_geometry;
using npu::lower::npu_patch_embedding_as_1x1;
using npu::lower::npu_pool_geometry;
using npu::lower::weight_constant;

const char* device_name(Device d) {
  switch (d) {
    case Device::npu: return "npu";
    case Device::cpu: return "cpu";
    case Device::gpu: return "gpu";
    case Device::none: return "none";
  }
  return "?";
}

Result<Device> parse_device(const std::string& s) {
  for (Device d : {Device::npu, Device::cpu, Device::gpu, Device::none}) {
    if (s == device_name(d)) return d;
  }
  return invalid("unknown device '" + s + "' (npu, cpu, gpu, none)");
}

namespace {

// Field access with errors that name the file and the field path.
struct Reader {
  std::string file;
  Error err(const std::string& where, const std::string& what) const { return Error{ErrorKind::invalid, file + ": " + where + ": " + what}; }

  Status only_keys(const json& j, const std::string& where, std::initializer_list<const char*> keys) const {
    if (!j.is_object()) return err(where, "must be an object");
    for (auto it = j.begin(); it != j.end(); ++it) {
      if (std::none_of(keys.begin(), keys.end(), [&](const char* k) { return it.key() == k; })) return err(where + "." + it.key(), "unknown field");
    }
    return {};
  }
  Result<std::string> str(const json& j, const std::string& where, const char* key, std::optional<std::string> fallback = std::nullopt) const {
    if (!j.contains(key)) {
      if (fallback) return *fallback;
      return err(where + "." + key, "missing");
    }
    if (!j[key].is_string()) return err(where + "." + key, "must be a string");
    return j[key].get<std::string>();
  }
  Result<double> num(const json& j, const std::string& where, const char* key, double lo, double hi,
                     std::optional<double> fallback = std::nullopt) const {
    if (!j.contains(key)) {
      if (fallback) return *fallback;
      return err(where + "." + key, "missing");
    }
    if (!j[key].is_number()) return err(where + "." + key, "must be a number");
    const double v = j[key].get<double>();
    if (!(v >= lo && v <= hi)) {
      std::ostringstream o;
      o << v << " is outside [" << lo << ", " << hi << "]";
      return err(where + "." + key, o.str());
    }
    return v;
  }
  Result<std::vector<std::string>> strings(const json& j, const std::string& where, const char* key) const {
    std::vector<std::string> v;
    if (!j.contains(key)) return v;
    if (!j[key].is_array()) return err(where + "." + key, "must be an array of strings");
    for (const auto& e : j[key]) {
      if (e.is_string()) v.push_back(e.get<std::string>());
      else if (e.is_number_integer()) v.push_back(std::to_string(e.get<int64_t>()));
      else return err(where + "." + key, "must be an array of strings");
    }
    return v;
  }
  Result<Device> device(const json& j, const std::string& where, const char* key, std::optional<Device> fallback = std::nullopt) const {
    auto s = str(j, where, key, fallback ? std::optional<std::string>(device_name(*fallback)) : std::nullopt);
    if (!s.ok()) return s.error();
    auto d = parse_device(*s);
    if (!d.ok()) return err(where + "." + key, d.error().message);
    return *d;
  }
};

const std::set<std::string>& known_checks() {
  static const std::set<std::string> c = {"max_rank",
                                          "attr_in",
                                          "max_kernel",
                                          "max_stride",
                                          "groups",
                                          "const_input",
                                          "max_dim",
                                          "dtype_in",
                                          "quantized",
                                          "per_tensor_quant",
                                          "npu_conv_geometry",
                                          "npu_matmul_geometry",
                                          "npu_eltwise_geometry",
                                          "npu_pool_geometry",
                                          "npu_channel_pad",
                                          "npu_upsample2",
                                          "npu_conv_transpose2",
                                          "npu_average_as_conv"};
  return c;
}

Result<Constraint> read_constraint(const Reader& r, const json& j, const std::string& where) {
  RKD_TRY(r.only_keys(j, where, {"check", "value", "attr", "default", "values", "reason"}));
  Constraint c;
  RKD_ASSIGN(c.check, r.str(j, where, "check"));
  if (!known_checks().count(c.check)) return r.err(where + ".check", "unknown check '" + c.check + "'");
  RKD_ASSIGN(c.reason, r.str(j, where, "reason"));
  if (c.check == "max_rank" || c.check == "max_kernel" || c.check == "max_stride" || c.check == "const_input" || c.check == "max_dim") {
    RKD_ASSIGN(double v, r.num(j, where, "value", 0, 1e9));
    c.value = static_cast<int64_t>(v);
  }
  if (c.check == "attr_in") {
    RKD_ASSIGN(c.attr, r.str(j, where, "attr"));
    RKD_ASSIGN(c.attr_default, r.str(j, where, "default", std::string()));
  }
  if (c.check == "attr_in" || c.check == "groups" || c.check == "dtype_in") {
    RKD_ASSIGN(c.values, r.strings(j, where, "values"));
    if (c.values.empty()) return r.err(where + ".values", "must list at least one value");
  }
  return c;
}

Result<std::vector<Device>> read_devices(const Reader& r, const json& j, const std::string& where, const char* key) {
  RKD_ASSIGN(auto names, r.strings(j, where, key));
  std::vector<Device> v;
  for (const auto& n : names) {
    auto d = parse_device(n);
    if (!d.ok() || *d == Device::none) return r.err(where + "." + key, "'" + n + "' is not npu, cpu or gpu");
    v.push_back(*d);
  }
  return v;
}

Result<OpRule> read_rule(const Reader& r, const json& j, const std::string& where, bool needs_op) {
  RKD_TRY(r.only_keys(j, where, {"op", "device", "requires", "fallback", "reason", "custom_op", "lowered"}));
  OpRule o;
  if (needs_op) {
    RKD_ASSIGN(o.op, r.str(j, where, "op"));
  }
  RKD_ASSIGN(o.device, r.device(j, where, "device"));
  RKD_ASSIGN(o.fallback, r.device(j, where, "fallback", Device::cpu));
  RKD_ASSIGN(o.reason, r.str(j, where, "reason", std::string()));
  if (o.device == Device::none && o.reason.empty()) return r.err(where + ".reason", "a rule with device none must say how the op fails");
  RKD_ASSIGN(o.custom_op, read_devices(r, j, where, "custom_op"));
  if (j.contains("lowered")) {
    if (!j["lowered"].is_boolean()) return r.err(where + ".lowered", "must be true or false");
    o.lowered = j["lowered"].get<bool>();
  }
  if (j.contains("requires")) {
    if (!j["requires"].is_array()) return r.err(where + ".requires", "must be an array");
    for (size_t i = 0; i < j["requires"].size(); ++i) {
      RKD_ASSIGN(Constraint c, read_constraint(r, j["requires"][i], where + ".requires[" + std::to_string(i) + "]"));
      o.requirements.push_back(std::move(c));
    }
  }
  return o;
}

}  // namespace

std::vector<const OpRule*> Target::rules_for(const std::string& op_type) const {
  std::vector<const OpRule*> v;
  for (const OpRule& r : ops) {
    if (r.op == op_type) v.push_back(&r);
  }
  return v;
}

namespace {

// The profile's JSON with its "extends" chain applied: the base file (relative to this one)
// first, then this file's fields on top - objects merged field by field, "sources" as this
// file's entries followed by the base's, "ops" as this file's rules followed by the base's
// rules for op types this file does not name, anything else replaced.
Result<json> read_profile_json(const std::string& path, int depth) {
  if (depth > 8) return invalid(path + ": extends: more than 8 levels (a cycle?)");
  auto text = read_file_bytes(path);
  if (!text.ok()) return text.error().with_context("the target profile");
  json j;
  try {
    j = json::parse(*text);
  } catch (const json::exception& e) {
    return invalid(path + ": not valid JSON: " + e.what());
  }
  if (!j.is_object()) return invalid(path + ": a profile must be a JSON object");
  if (!j.contains("extends")) return j;
  if (!j["extends"].is_string()) return invalid(path + ": extends: must be a file name");
  const std::string base_path = (std::filesystem::path(path).parent_path() / j["extends"].get<std::string>()).string();
  auto base = read_profile_json(base_path, depth + 1);
  if (!base.ok()) return base.error().with_context(path + ": extends");
  json merged = *base;
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string& k = it.key();
    if (k == "extends") continue;
    if ((k == "ops" || k == "sources") && it->is_array() && merged.contains(k) && merged[k].is_array()) {
      json v = *it;
      std::set<std::string> named;
      for (const auto& e : *it) {
        if (e.is_object() && e.contains("op") && e["op"].is_string()) named.insert(e["op"].get<std::string>());
      }
      for (const auto& e : merged[k]) {
        if (k == "ops" && e.is_object() && e.contains("op") && e["op"].is_string() && named.count(e["op"].get<std::string>())) continue;
        v.push_back(e);
      }
      merged[k] = v;
    } else if (it->is_object() && merged.contains(k) && merged[k].is_object()) {
      for (auto f2 = it->begin(); f2 != it->end(); ++f2) merged[k][f2.key()] = *f2;
    } else {
      merged[k] = *it;
    }
  }
  return merged;
}

}  // namespace

Result<Target> load_target(const std::string& path) {
  RKD_ASSIGN(json j, read_profile_json(path, 0));
  const Reader r{path};
  RKD_TRY(r.only_keys(j, "profile",
                      {"schema", "name", "soc", "runtime", "version", "summary", "sources", "npu", "cpu", "gpu", "boundary", "custom_op_devices",
                       "zero_cost_ops", "default", "ops", "calibration", "rkdeploy_lowering"}));
  RKD_ASSIGN(std::string schema, r.str(j, "profile", "schema"));
  if (schema != "rkdeploy-target/1") return r.err("schema", "'" + schema + "' (this build reads rkdeploy-target/1)");
  Target t;
  t.path = path;
  RKD_ASSIGN(t.name, r.str(j, "profile", "name"));
  RKD_ASSIGN(t.soc, r.str(j, "profile", "soc"));
  RKD_ASSIGN(t.runtime, r.str(j, "profile", "runtime"));
  RKD_ASSIGN(t.version, r.str(j, "profile", "version"));
  RKD_ASSIGN(t.summary, r.str(j, "profile", "summary", std::string()));
  RKD_ASSIGN(t.sources, r.strings(j, "profile", "sources"));
  if (j.contains("rkdeploy_lowering")) {
    if (!j["rkdeploy_lowering"].is_boolean()) return r.err("rkdeploy_lowering", "must be true or false");
    t.rkdeploy_lowering = j["rkdeploy_lowering"].get<bool>();
  }
  RKD_TRY(read_soc(path, t.soc, t));
  if (!j.contains("npu")) return r.err("npu", "missing");
  const json& n = j["npu"];
  for (const char* k : {"arch", "macs_per_cycle", "clock_mhz", "utilization", "task_overhead_us", "ddr_gbps"}) {
    if (n.is_object() && n.contains(k)) return r.err(std::string("npu.") + k, "the SoC description " + t.soc_path + " holds the chip's constants");
  }
  RKD_TRY(r.only_keys(n, "npu", {"cores_used", "bytes_per_element", "task_submit_us"}));
  // Every core of the NPU unless the profile says fewer (the device back end splits a
  // convolution's tasks over all of them by default).
  RKD_ASSIGN(double cores, r.num(n, "npu", "cores_used", 1, t.npu.cores, static_cast<double>(t.npu.cores)));
  t.npu.cores_used = static_cast<int>(cores);
  RKD_ASSIGN(t.npu.task_submit_us, r.num(n, "npu", "task_submit_us", 0, 1e6, 0.0));
  RKD_ASSIGN(double bpe, r.num(n, "npu", "bytes_per_element", 1, 4));
  t.npu.bytes_per_element = static_cast<int>(bpe);
  for (const char* k : {"cpu", "gpu"}) {
    if (j.contains(k)) return r.err(k, "the SoC description " + t.soc_path + " holds the chip's constants");
  }
  if (!j.contains("boundary")) return r.err("boundary", "missing");
  for (const char* k : {"layout_us_per_mb", "copy_gbps"}) {
    if (j["boundary"].is_object() && j["boundary"].contains(k))
      return r.err(std::string("boundary.") + k, "the SoC description " + t.soc_path + " holds the chip's constants");
  }
  RKD_TRY(r.only_keys(j["boundary"], "boundary", {"sync_us"}));
  RKD_ASSIGN(t.boundary.sync_us, r.num(j["boundary"], "boundary", "sync_us", 0, 1e7));
  RKD_ASSIGN(t.custom_op_devices, read_devices(r, j, "profile", "custom_op_devices"));
  RKD_ASSIGN(auto zc, r.strings(j, "profile", "zero_cost_ops"));
  t.zero_cost_ops.insert(zc.begin(), zc.end());
  if (!j.contains("default")) return r.err("default", "missing");
  RKD_ASSIGN(t.default_rule, read_rule(r, j["default"], "default", false));
  t.default_rule.op = "*";
  if (!j.contains("ops") || !j["ops"].is_array()) return r.err("ops", "missing or not an array");
  for (size_t i = 0; i < j["ops"].size(); ++i) {
    RKD_ASSIGN(OpRule o, read_rule(r, j["ops"][i], "ops[" + std::to_string(i) + "]", true));
    if (o.device == Device::gpu && !t.gpu.present)
      return r.err("ops[" + std::to_string(i) + "].device", "gpu, but the SoC description has no gpu section");
    t.ops.push_back(std::move(o));
  }
  if (j.contains("calibration")) {
    RKD_TRY(r.only_keys(j["calibration"], "calibration", {"free"}));
    RKD_ASSIGN(t.free_parameters, r.strings(j["calibration"], "calibration", "free"));
    for (const auto& p : t.free_parameters) {
      if (!get_parameter(t, p).ok()) return r.err("calibration.free", "unknown parameter '" + p + "'");
    }
  }
  return t;
}

namespace {

Status read_soc_file(const std::string& profile_path, const std::string& soc, Target& t) {
  std::string lower = soc;
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (lower.empty() || lower.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789-_") != std::string::npos)
    return invalid("'" + soc + "' is not a SoC name (letters, digits, '-', '_')");
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::path path = fs::path(profile_path).parent_path() / "soc" / (lower + ".json");
  if (!fs::exists(path, ec)) path = fs::path(default_targets_dir()) / "soc" / (lower + ".json");
  if (!fs::exists(path, ec))
    return invalid("no SoC description " + lower + ".json in soc/ beside the profile or in " + default_targets_dir() + "/soc");
  t.soc_path = path.string();
  auto text = read_file_bytes(t.soc_path);
  if (!text.ok()) return text.error();
  json j;
  try {
    j = json::parse(*text);
  } catch (const json::exception& e) {
    return invalid(t.soc_path + ": not valid JSON: " + e.what());
  }
  const Reader r{t.soc_path};
  RKD_TRY(r.only_keys(j, "soc description", {"schema", "soc", "summary", "sources", "npu", "cpu", "gpu", "boundary"}));
  RKD_ASSIGN(const std::string schema, r.str(j, "soc description", "schema"));
  if (schema != "rkdeploy-soc/1") return r.err("schema", "'" + schema + "' (this build reads rkdeploy-soc/1)");
  RKD_ASSIGN(const std::string name, r.str(j, "soc description", "soc"));
  if (name != soc) return r.err("soc", "'" + name + "', but the profile " + profile_path + " names '" + soc + "'");
  RKD_ASSIGN(const auto sources, r.strings(j, "soc description", "sources"));
  t.sources.insert(t.sources.end(), sources.begin(), sources.end());
  if (!j.contains("npu")) return r.err("npu", "missing");
  const json& n = j["npu"];
  RKD_TRY(r.only_keys(n, "npu", {"arch", "cores", "macs_per_cycle", "clock_mhz", "utilization", "task_overhead_us", "ddr_gbps"}));
  if (n.contains("arch")) {
    // The lowering's own description (src/npu/arch/rk3588.json): cores, MAC rate and clock.
    RKD_ASSIGN(const std::string arch, r.str(n, "npu", "arch"));
    if (arch != npu::arch::kRk3588.name) return r.err("npu.arch", "'" + arch + "': the one NPU description is " + npu::arch::kRk3588.name);
    for (const char* k : {"cores", "macs_per_cycle", "clock_mhz"}) {
      if (n.contains(k)) return r.err(std::string("npu.") + k, "given with npu.arch: the arch description holds it");
    }
    const auto& a = npu::arch::kRk3588;
    t.npu.cores = static_cast<int>(a.cores);
    t.npu.macs_per_cycle = static_cast<double>(a.int8_macs_per_cycle_per_core);
    t.npu.clock_mhz = static_cast<double>(a.clock_hz) / 1e6;
  } else {
    RKD_ASSIGN(const double cores, r.num(n, "npu", "cores", 1, 64));
    t.npu.cores = static_cast<int>(cores);
    RKD_ASSIGN(t.npu.macs_per_cycle, r.num(n, "npu", "macs_per_cycle", 1, 1e6));
    RKD_ASSIGN(t.npu.clock_mhz, r.num(n, "npu", "clock_mhz", 1, 1e5));
  }
  RKD_ASSIGN(t.npu.utilization, r.num(n, "npu", "utilization", 1e-4, 1));
  RKD_ASSIGN(t.npu.task_overhead_us, r.num(n, "npu", "task_overhead_us", 0, 1e6));
  RKD_ASSIGN(t.npu.ddr_gbps, r.num(n, "npu", "ddr_gbps", 1e-3, 1e4));
  if (!j.contains("cpu")) return r.err("cpu", "missing");
  RKD_TRY(r.only_keys(j["cpu"], "cpu", {"name", "cores", "host_factor"}));
  RKD_ASSIGN(t.cpu.name, r.str(j["cpu"], "cpu", "name"));
  RKD_ASSIGN(double cpu_cores, r.num(j["cpu"], "cpu", "cores", 1, 64));
  t.cpu.cores = static_cast<int>(cpu_cores);
  RKD_ASSIGN(t.cpu.host_factor, r.num(j["cpu"], "cpu", "host_factor", 1e-3, 1e3));
  if (j.contains("gpu")) {
    RKD_TRY(r.only_keys(j["gpu"], "gpu", {"name", "host_factor", "op_overhead_us"}));
    t.gpu.present = true;
    RKD_ASSIGN(t.gpu.name, r.str(j["gpu"], "gpu", "name"));
    RKD_ASSIGN(t.gpu.host_factor, r.num(j["gpu"], "gpu", "host_factor", 1e-3, 1e3));
    RKD_ASSIGN(t.gpu.op_overhead_us, r.num(j["gpu"], "gpu", "op_overhead_us", 0, 1e6));
  }
  if (!j.contains("boundary")) return r.err("boundary", "missing");
  RKD_TRY(r.only_keys(j["boundary"], "boundary", {"layout_us_per_mb", "copy_gbps"}));
  RKD_ASSIGN(t.boundary.layout_us_per_mb, r.num(j["boundary"], "boundary", "layout_us_per_mb", 0, 1e7));
  RKD_ASSIGN(t.boundary.copy_gbps, r.num(j["boundary"], "boundary", "copy_gbps", 1e-3, 1e4));
  return {};
}

}  // namespace

// Every error names the profile, then the SoC file and its field.
Status read_soc(const std::string& profile_path, const std::string& soc, Target& t) {
  const Status s = read_soc_file(profile_path, soc, t);
  if (!s.ok()) return s.error().with_context(profile_path + ": soc");
  return {};
}

std::string default_targets_dir() {
  if (const char* e = std::getenv("RKDEPLOY_TARGETS"); e && *e) return e;
  std::error_code ec;
#ifdef RKD_TARGETS_DIR
  if (std::filesystem::is_directory(RKD_TARGETS_DIR, ec)) return RKD_TARGETS_DIR;  // the source tree this binary was built from
#endif
  // An installed binary: PREFIX/bin/rkdeploy beside PREFIX/share/rkdeploy/targets.
  const auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    const auto installed = exe.parent_path().parent_path() / "share" / "rkdeploy" / "targets";
    if (std::filesystem::is_directory(installed, ec)) return installed.string();
  }
  return "targets";
}

Result<Target> find_target(const std::string& name_or_path, const std::string& dir) {
  if (name_or_path.size() > 5 && name_or_path.substr(name_or_path.size() - 5) == ".json") return load_target(name_or_path);
  const std::filesystem::path p = std::filesystem::path(dir) / (name_or_path + ".json");
  if (!std::filesystem::exists(p)) {
    std::string known;
    auto all = load_targets(dir);
    if (all.ok()) {
      for (const auto& t : *all) known += (known.empty() ? "" : ", ") + t.name;
    }
    return invalid("--target '" + name_or_path + "': no profile " + p.string() + (known.empty() ? "" : " (known: " + known + ")"));
  }
  return load_target(p.string());
}

Result<std::vector<Target>> load_targets(const std::string& dir) {
  std::vector<std::string> files;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    if (e.path().extension() == ".json") files.push_back(e.path().string());
  }
  if (ec) return io_error(dir + ": cannot list the target profiles: " + ec.message());
  std::sort(files.begin(), files.end());
  std::vector<Target> v;
  for (const auto& f : files) {
    RKD_ASSIGN(Target t, load_target(f));
    v.push_back(std::move(t));
  }
  return v;
}

namespace {

double* parameter_slot(Target& t, const std::string& name) {
  if (name == "npu.utilization") return &t.npu.utilization;
  if (name == "npu.task_overhead_us") return &t.npu.task_overhead_us;
  if (name == "npu.ddr_gbps") return &t.npu.ddr_gbps;
  if (name == "npu.task_submit_us") return &t.npu.task_submit_us;
  if (name == "cpu.host_factor") return &t.cpu.host_factor;
  if (name == "gpu.host_factor") return &t.gpu.host_factor;
  if (name == "gpu.op_overhead_us") return &t.gpu.op_overhead_us;
  if (name == "boundary.sync_us") return &t.boundary.sync_us;
  if (name == "boundary.layout_us_per_mb") return &t.boundary.layout_us_per_mb;
  if (name == "boundary.copy_gbps") return &t.boundary.copy_gbps;
  return nullptr;
}

}  // namespace

const std::vector<std::string>& parameter_names() {
  static const std::vector<std::string> n = {"npu.utilization",           "npu.task_overhead_us", "npu.ddr_gbps",       "npu.task_submit_us",
                                             "cpu.host_factor",           "gpu.host_factor",      "gpu.op_overhead_us", "boundary.sync_us",
                                             "boundary.layout_us_per_mb", "boundary.copy_gbps"};
  return n;
}

Result<double> get_parameter(const Target& t, const std::string& name) {
  const double* p = parameter_slot(const_cast<Target&>(t), name);
  if (!p) return invalid("unknown cost parameter '" + name + "'");
  return *p;
}

Status set_parameter(Target& t, const std::string& name, double v) {
  double* p = parameter_slot(t, name);
  if (!p) return invalid("unknown cost parameter '" + name + "'");
  *p = v;
  return {};
}

// ---- placement ----

namespace {

std::string attr_text(const ir::Node& n, const std::string& a, const std::string& fallback) {
  auto it = n.attrs.find(a);
  if (it == n.attrs.end()) return fallback;
  if (auto* i = std::get_if<int64_t>(&it->second)) return std::to_string(*i);
  if (auto* s = std::get_if<std::string>(&it->second)) return *s;
  if (auto* f = std::get_if<float>(&it->second)) {
    std::ostringstream o;
    o << *f;
    return o.str();
  }
  return "?";
}

bool quantized_input(const ir::Value* v) {
  if (!v) return false;
  if (v->dtype && (*v->dtype == DType::i8 || *v->dtype == DType::u8)) return true;
  return v->producer && v->producer->op_type == "DequantizeLinear";
}

const ir::Value* weight_scale(const ir::Node& n) {
  if (n.op_type == "QLinearConv" || n.op_type == "QLinearMatMul") return n.inputs.size() > 4 ? n.inputs[4] : nullptr;
  const ir::Value* w = n.inputs.size() > 1 ? n.inputs[1] : nullptr;
  if (w && w->producer && w->producer->op_type == "DequantizeLinear" && w->producer->inputs.size() > 1) return w->producer->inputs[1];
  return nullptr;
}

// "found (rule: reason)" of the first broken rule, empty when none is.
std::string first_violation(const std::vector<npu::lower::Violation>& v) {
  return v.empty() ? "" : v[0].found + " (" + v[0].rule + ": " + v[0].reason + ")";
}

// A Conv / QLinearConv's geometry as npu/lower/constraints.h reads it (types and quantization
// are other checks: a float Conv of a QDQ graph is placed as the int8 convolution it becomes).
std::string npu_conv_geometry_violation(const ir::Node& n) {
  auto g = npu_conv_geometry(n);
  if (!g.ok()) return g.error().message;
  // A patch embedding runs as the 1 x 1 convolution after a space-to-depth on the CPU.
  const auto patch = npu_patch_embedding_as_1x1(*g);
  return first_violation(npu::lower::check_conv(patch ? *patch : *g));
}

// A MatMul / Gemm / QLinearMatMul of a constant B as the 1 x 1 convolution over A's rows the
// runtime lowers (npu_matmul_geometry).
std::string npu_matmul_geometry_violation(const ir::Node& n) {
  auto g = npu_matmul_geometry(n);
  return g.ok() ? first_violation(npu::lower::check_conv(*g)) : g.error().message;
}

// A MaxPool's window and map as npu/lower/constraints.h's pool rules read them.
std::string npu_pool_geometry_violation(const ir::Node& n) {
  auto g = npu_pool_geometry(n);
  return g.ok() ? first_violation(npu::lower::check_pool(*g)) : g.error().message;
}

// A static [N, C, H, W] shape as the element-wise rules read a map.
npu::lower::EltwiseGeometry map_of(const Shape& s) {
  npu::lower::EltwiseGeometry g;
  g.batch = s[0];
  g.C = s[1];
  g.H = s[2];
  g.W = s[3];
  return g;
}

// A Pad that adds channels at the end of a [N, C, H, W] map only (constant pads), its output as
// constraints.h's element-wise rules read it.
std::string npu_channel_pad_violation(const ir::Node& n) {
  const auto ys = ir::static_shape(n.outputs.empty() ? nullptr : n.outputs[0]);
  if (!ys || ys->size() != 4) return "not a Pad of a static [N, C, H, W] map";
  if (n.attr_string("mode", "constant").value_or("") != "constant") return "mode " + n.attr_string("mode", "constant").value_or("?");
  const ir::Value* p = n.inputs.size() > 1 ? n.inputs[1] : nullptr;
  if (!p || !p->constant || p->constant->numel() != 8) return "pads that are not a constant of 8 values";
  for (int64_t i = 0; i < 8; ++i) {
    if (i != 5 && p->constant->get_as_double(i) != 0) return "padding other than at the channels' end";
  }
  npu::lower::EltwiseGeometry g = map_of(*ys);
  return first_violation(npu::lower::check_eltwise(g));
}

// A depthwise convolution of the channels of a static [N, C, H, W] shape (its batch and
// channels) over an H x W map as constraints.h's convolution rules read it: "found (rule:
// reason)" of the first broken rule, empty when none is.
std::string depthwise_violation(const Shape& xs, int64_t H, int64_t W, int64_t KH, int64_t KW, int64_t stride_h, int64_t stride_w,
                                int64_t pad_top = 0, int64_t pad_left = 0) {
  npu::lower::ConvGeometry c;
  c.batch = xs[0];
  c.C = c.OC = c.groups = xs[1];
  c.H = H;
  c.W = W;
  c.KH = KH;
  c.KW = KW;
  c.stride_h = stride_h;
  c.stride_w = stride_w;
  c.pad_top = pad_top;
  c.pad_left = pad_left;
  return first_violation(npu::lower::check_conv(c));
}

// A nearest, or half-pixel or asymmetric linear, Resize of a [N, C, H, W] map to [N, C, 2 H,
// 2 W], its output as constraints.h's element-wise rules read it (linear: and its depthwise
// convolution as the convolution rules do), or a half-pixel linear one by 1/2 as a depthwise
// 2 x 2 stride-2 convolution. (Whether a nearest one's coordinate transformation and rounding repeat each cell -
// the kernel's nearest sources i / 2 - is the runtime's check: the as-run variant.)
std::string npu_upsample2_violation(const ir::Node& n) {
  const auto xs = ir::static_shape(n.inputs.empty() ? nullptr : n.inputs[0]);
  const auto ys = ir::static_shape(n.outputs.empty() ? nullptr : n.outputs[0]);
  if (!xs || !ys || xs->size() != 4 || ys->size() != 4) return "not a Resize of a static [N, C, H, W] map";
  const std::string mode = n.attr_string("mode", "nearest").value_or("?");
  if (mode == "linear" && ir::resize_is_average2(n)) {
    // By 1/2: the 2 x 2 mean, a depthwise 2 x 2 stride-2 convolution (quant/qlinear_lut.h).
    std::string v = depthwise_violation(*xs, (*xs)[2], (*xs)[3], 2, 2, 2, 2);
    return v.empty() ? v : "its 2 x 2 mean as a depthwise convolution: " + v;
  }
  if (mode == "linear") {
    if (!ir::resize_is_bilinear2(n) && !ir::resize_is_asymmetric_bilinear2(n))
      return "linear, but not x2 in height and width with half-pixel or asymmetric taps";
  } else if (mode != "nearest") {
    return "mode " + mode;
  }
  if (n.attr_string("coordinate_transformation_mode", "half_pixel").value_or("") == "tf_crop_and_resize") return "tf_crop_and_resize";
  if ((*ys)[1] != (*xs)[1] || (*ys)[2] != 2 * (*xs)[2] || (*ys)[3] != 2 * (*xs)[3]) return "not x2 in height and width";
  npu::lower::EltwiseGeometry g = map_of(*ys);
  if (std::string v = first_violation(npu::lower::check_eltwise(g)); !v.empty() || mode != "linear") return v;
  // Linear: a depthwise 3 x 3 convolution over the edge-replicated nearest map (eltwise.h).
  if (std::string v = depthwise_violation(*xs, 2 * (*xs)[2] + 2, 2 * (*xs)[3] + 2, 3, 3, 1, 1); !v.empty()) return "its depthwise convolution: " + v;
  return "";
}

// A ConvTranspose that qdq-to-qlinear makes a 1 x 1 convolution of 4 OC outputs and a
// DepthToSpace (2 x 2 kernel, stride 2, no padding, group 1): that convolution as the
// convolution rules read it, the interleaving as the element-wise rules read its output.
std::string npu_conv_transpose2_violation(const ir::Node& n) {
  const auto xs = ir::static_shape(n.inputs.empty() ? nullptr : n.inputs[0]);
  const auto ws = ir::static_shape(n.inputs.size() > 1 ? n.inputs[1] : nullptr);
  const auto ys = ir::static_shape(n.outputs.empty() ? nullptr : n.outputs[0]);
  if (!xs || !ws || !ys || xs->size() != 4 || ws->size() != 4 || ys->size() != 4) return "not a 2-D ConvTranspose with static shapes";
  if (!ir::conv_transpose_is_2x2_stride2(n)) return "not a 2 x 2 ConvTranspose of stride 2 without padding, group 1";
  npu::lower::ConvGeometry c;
  c.batch = (*xs)[0];
  c.C = (*xs)[1];
  c.H = (*xs)[2];
  c.W = (*xs)[3];
  c.OC = 4 * (*ws)[1];
  if (std::string v = first_violation(npu::lower::check_conv(c)); !v.empty()) return "its 1 x 1 convolution: " + v;
  npu::lower::EltwiseGeometry g = map_of(*ys);
  g.unaligned_part_offset = npu::lower::unaligned_part_offset(std::vector<int64_t>(4, (*ws)[1]));
  if (std::string v = first_violation(npu::lower::check_eltwise(g)); !v.empty()) return "its interleaving: " + v;
  return "";
}

// An AveragePool, GlobalAveragePool or ReduceMean over height and width that qdq-to-qlinear
// makes one depthwise convolution of weights 1 (ir::average_window), that convolution as the
// convolution rules read it.
std::string npu_average_as_conv_violation(const ir::Node& n) {
  const auto xs = ir::static_shape(n.inputs.empty() ? nullptr : n.inputs[0]);
  if (!xs || xs->size() != 4) return "not an average over a static [N, C, H, W] map";
  const auto w = ir::average_window(n);
  if (!w) {
    return n.op_type == "ReduceMean" ? "not a mean over height and width (axes 2, 3)"
                                     : "padding without count_include_pad, ceil mode or dilation (no one convolution has those windows)";
  }
  std::string v = depthwise_violation(*xs, (*xs)[2], (*xs)[3], w->kh, w->kw, w->sh, w->sw, w->pads[0], w->pads[1]);
  return v.empty() ? v : "its depthwise convolution: " + v;
}

// An Add / Sub / Max / Min / Mul (or its rkdeploy.QLinear form) of two maps, or a channel Concat or Split of maps, as npu/lower/constraints.h's
// element-wise rules read it.
std::string npu_eltwise_geometry_violation(const ir::Node& n) {
  auto g = n.op_type == "Concat" || n.op_type == "Split" ? npu_parts_geometry(n) : npu_binary_geometry(n);
  return g.ok() ? first_violation(npu::lower::check_eltwise(*g)) : g.error().message;
}

// Empty when the constraint holds; else what was found.
std::string violation(const Constraint& c, const ir::Node& n) {
  const ir::Value* x = n.inputs.empty() ? nullptr : n.inputs[0];
  const ir::Value* y = n.outputs.empty() ? nullptr : n.outputs[0];
  if (c.check == "max_rank") {
    const size_t r = x && x->shape ? x->shape->size() : 0;
    return static_cast<int64_t>(r) > c.value ? "rank " + std::to_string(r) : "";
  }
  if (c.check == "attr_in") {
    const std::string v = attr_text(n, c.attr, c.attr_default);
    return std::find(c.values.begin(), c.values.end(), v) == c.values.end() ? c.attr + " = " + v : "";
  }
  if (c.check == "max_kernel" || c.check == "max_stride") {
    const bool kernel = c.check == "max_kernel";
    std::vector<int64_t> v;
    if (auto it = n.attrs.find(kernel ? "kernel_shape" : "strides"); it != n.attrs.end()) {
      if (auto* p = std::get_if<std::vector<int64_t>>(&it->second)) v = *p;
    } else if (kernel && n.inputs.size() > 1) {
      if (auto s = ir::static_shape(n.inputs[n.op_type == "QLinearConv" ? 3 : 1]); s && s->size() > 2) v.assign(s->begin() + 2, s->end());
    }
    for (int64_t e : v) {
      if (e > c.value) return std::string(kernel ? "kernel " : "stride ") + std::to_string(e);
    }
    return "";
  }
  if (c.check == "groups") {
    const int64_t g = n.attr_int("group", 1).ok() ? *n.attr_int("group", 1) : 1;
    std::string kind = "dense";
    if (g > 1) {
      auto xs = ir::static_shape(x);
      kind = xs && xs->size() > 1 && (*xs)[1] == g ? "depthwise" : "grouped";
    }
    return std::find(c.values.begin(), c.values.end(), kind) == c.values.end() ? kind + " (" + std::to_string(g) + " groups)" : "";
  }
  if (c.check == "const_input") {
    const size_t i = static_cast<size_t>(c.value);
    const bool constant = weight_constant(i < n.inputs.size() ? n.inputs[i] : nullptr);
    return constant ? "" : "input " + std::to_string(i) + " is computed at run time";
  }
  if (c.check == "max_dim") {
    for (const ir::Value* v : {x, y}) {
      if (auto s = ir::static_shape(v)) {
        for (int64_t d : *s) {
          if (d > c.value) return "dim " + std::to_string(d);
        }
      }
    }
    return "";
  }
  if (c.check == "dtype_in") {
    const std::string t = x && x->dtype ? dtype_name(*x->dtype) : "unknown";
    return std::find(c.values.begin(), c.values.end(), t) == c.values.end() ? t + " input" : "";
  }
  if (c.check == "npu_conv_geometry") return npu_conv_geometry_violation(n);
  if (c.check == "npu_matmul_geometry") return npu_matmul_geometry_violation(n);
  if (c.check == "npu_eltwise_geometry") return npu_eltwise_geometry_violation(n);
  if (c.check == "npu_pool_geometry") return npu_pool_geometry_violation(n);
  if (c.check == "npu_channel_pad") return npu_channel_pad_violation(n);
  if (c.check == "npu_upsample2") return npu_upsample2_violation(n);
  if (c.check == "npu_conv_transpose2") return npu_conv_transpose2_violation(n);
  if (c.check == "npu_average_as_conv") return npu_average_as_conv_violation(n);
  if (c.check == "quantized") return quantized_input(x) ? "" : "float input";
  if (c.check == "per_tensor_quant") {
    if (!quantized_input(x)) return "float input";
    const ir::Value* s = weight_scale(n);
    if (s && s->constant && s->constant->numel() > 1) return std::to_string(s->constant->numel()) + " weight scales (per channel)";
    return "";
  }
  return "unknown check";
}

}  // namespace

Placement place(const Target& t, const ir::Node& n) {
  const std::string op = n.domain.empty() || n.domain == "ai.onnx" ? n.op_type : n.domain + "." + n.op_type;
  Placement p;
  if (t.zero_cost_ops.count(op)) {
    p.zero_cost = true;
    p.reason = "no work of its own (a view, or quantization the converter folds into its neighbours)";
    return p;
  }
  const auto rules = t.rules_for(op);
  if (rules.empty()) {
    p.device = t.default_rule.device;
    p.reason = t.default_rule.reason;
    p.custom_op = t.default_rule.custom_op;
    p.lowered = t.default_rule.lowered;
    return p;
  }
  std::string first_failure;
  const OpRule* failed = nullptr;
  for (const OpRule* r : rules) {
    std::string why;
    for (const Constraint& c : r->requirements) {
      const std::string v = violation(c, n);
      if (!v.empty()) {
        why = v + ": " + c.reason;
        break;
      }
    }
    if (why.empty()) {
      p.device = r->device;
      p.reason = r->reason;
      p.custom_op = r->custom_op;
      p.lowered = r->lowered;
      return p;
    }
    if (!failed) {
      failed = r;
      first_failure = why;
    }
  }
  p.device = failed->fallback;
  p.reason = first_failure;
  p.custom_op = failed->custom_op;
  return p;
}

// ---- docs/SUPPORTED_OPS.md ----

namespace {

std::string constraint_text(const Constraint& c) {
  std::string s = c.check;
  if (c.check == "attr_in" || c.check == "groups" || c.check == "dtype_in") {
    s = (c.check == "attr_in" ? c.attr : c.check == "groups" ? std::string("groups") : std::string("dtype")) + " in {";
    for (size_t i = 0; i < c.values.size(); ++i) s += (i ? ", " : "") + c.values[i];
    s += "}";
  } else if (c.check == "npu_conv_geometry") {
    s = "the NPU's convolution geometry (" + std::to_string(npu::lower::conv_limits().max_kernel_w) + "x" +
        std::to_string(npu::lower::conv_limits().max_kernel_h) + " kernels, strides to " + std::to_string(npu::lower::conv_limits().max_stride_w) +
        ", width to " + std::to_string(npu::lower::conv_limits().max_width) + ", height to " + std::to_string(npu::lower::conv_limits().max_height) +
        ", dense or depthwise, batch 1)";
  } else if (c.check == "npu_matmul_geometry") {
    s = "a constant B: the 1 x 1 convolution over A's rows (folded into an H x W map) within the NPU's convolution geometry";
  } else if (c.check == "npu_eltwise_geometry") {
    s = "the NPU's element-wise geometry (";
    const auto rules = npu::lower::eltwise_rules();
    for (size_t i = 1; i < rules.size(); ++i) s += (i > 1 ? ", " : "") + rules[i].first;  // the type is another check
    s += ")";
  } else if (c.check == "npu_conv_transpose2") {
    s = "a 2 x 2 ConvTranspose of stride 2 without padding, the NPU's 1 x 1 convolution and element-wise geometry";
  } else if (c.check == "npu_upsample2") {
    s = "a nearest, half-pixel or asymmetric linear x2 Resize in height and width, the NPU's element-wise geometry (linear: and a depthwise "
        "convolution's), or a half-pixel linear x1/2 one (a depthwise 2 x 2 stride-2 convolution)";
  } else if (c.check == "npu_channel_pad") {
    s = "channels added at the end only, the NPU's element-wise geometry";
  } else if (c.check == "npu_average_as_conv") {
    s = "windows of one depthwise convolution (AveragePool without padding or with count_include_pad, floor mode; GlobalAveragePool; "
        "ReduceMean over height and width) within the NPU's convolution geometry";
  } else if (c.check == "npu_pool_geometry") {
    s = "the NPU's pooling geometry (";
    const auto rules = npu::lower::pool_rules();
    for (size_t i = 1; i < rules.size(); ++i) s += (i > 1 ? ", " : "") + rules[i].first;  // the type is another check
    s += ")";
  } else if (c.check != "quantized" && c.check != "per_tensor_quant") {
    s += " " + std::to_string(c.value);
  }
  return s;
}

std::string rule_cell(const OpRule& r) {
  std::string s = device_name(r.device);
  if (!r.lowered) s += " (not lowered yet)";
  if (!r.requirements.empty()) {
    s += " if ";
    for (size_t i = 0; i < r.requirements.size(); ++i) s += (i ? ", " : "") + constraint_text(r.requirements[i]);
    s += std::string(", else ") + device_name(r.fallback);
  }
  if (!r.custom_op.empty()) {
    s += "; custom op:";
    for (Device d : r.custom_op) s += std::string(" ") + device_name(d);
  }
  return s;
}

}  // namespace

std::string supported_ops_markdown(const std::vector<Target>& targets) {
  std::set<std::string> ops;
  for (const auto& t : targets) {
    for (const auto& r : t.ops) ops.insert(r.op);
  }
  std::string s =
      "# Supported operators per target\n\n"
      "Generated by `rkdeploy plan --supported-ops` from `targets/*.json` (do not edit: the test\n"
      "`supported_ops_doc` fails when this file and the profiles disagree). A cell says where the\n"
      "runtime puts the op and under which conditions; `none` means the runtime accepts the model\n"
      "but fails when it runs the op. Ops not listed for a target take its default row.\n\n";
  s += "| op |";
  for (const auto& t : targets) s += " " + t.name + " |";
  s += "\n|---|";
  for (size_t i = 0; i < targets.size(); ++i) s += "---|";
  s += "\n";
  auto row = [&](const std::string& name, auto cell) {
    s += "| ";
    s += name;
    s += " |";
    for (const auto& t : targets) {
      s += " ";
      s += cell(t);
      s += " |";
    }
    s += "\n";
  };
  for (const auto& op : ops) {
    row(op, [&](const Target& t) {
      if (t.zero_cost_ops.count(op)) return std::string("view (free)");
      const auto rules = t.rules_for(op);
      if (rules.empty()) return std::string("default");
      std::string c;
      for (const OpRule* r : rules) c += (c.empty() ? "" : "; or ") + rule_cell(*r);
      return c;
    });
  }
  row("*(default)*", [&](const Target& t) { return rule_cell(t.default_rule); });
  s += "\n## Reasons\n";
  for (const auto& t : targets) {
    s += "\n### " + t.name + "\n\n" + t.soc + ", " + t.runtime + " " + t.version + ". " + t.summary + "\n\n";
    for (const auto& r : t.ops) {
      std::string line = "- **" + r.op + "** (" + device_name(r.device) + "): " + (r.reason.empty() ? "-" : r.reason);
      for (const auto& c : r.requirements) line += " Requires " + constraint_text(c) + ": " + c.reason + ".";
      s += line + "\n";
    }
    s += "- *default* (" + std::string(device_name(t.default_rule.device)) + "): " + t.default_rule.reason + "\n";
    if (!t.sources.empty()) {
      s += "\nSources:\n";
      for (const auto& src : t.sources) s += "- " + src + "\n";
    }
  }
  return s;
}

}  // namespace rkd::plan
