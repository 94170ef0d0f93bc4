#include "runtime/model.h"

#include "core/npy.h"
#include "runtime/artifact.h"
#include "runtime/detect.h"
#include "runtime/op_registry.h"

namespace rkd::runtime {

Result<ImportedModel> import_model(const std::string& path, int64_t batch) {
  if (is_artifact_path(path)) {
    RKD_ASSIGN(LoadedArtifact a, read_artifact(path));
    ImportedModel imp;
    imp.graph = std::move(*a.graph);
    carry_artifact_config(a.info, imp.graph);
    return imp;
  }
  return frontends::import_file(path, batch, evaluate_node);
}

Result<LoadedModel> load_model(const std::string& path, const LoadOptions& opt) {
  if (is_artifact_path(path)) return load_artifact(path, opt);
  RKD_ASSIGN(ImportedModel imp, import_model(path, opt.batch > 0 ? opt.batch : 1));
  LoadedModel m;
  m.graph = std::make_unique<ir::Graph>(std::move(imp.graph));
  m.notes = std::move(imp.notes);
  if (opt.inputs) RKD_TRY(check_graph_inputs(*m.graph, *opt.inputs));
  Status s = optimize(*m.graph, opt.compile, &m.fusion);
  if (!s.ok()) return s.error().with_context(path);
  auto e = Executor::create(*m.graph, opt.exec);
  if (!e.ok()) return e.error().with_context(path);
  m.executor = std::move(e).value();
  return m;
}

Result<std::map<std::string, Tensor>> model_inputs(const std::string& model, const std::string& image, const std::string& config,
                                                   const std::vector<std::string>& specs) {
  std::map<std::string, Tensor> inputs;
  if (!image.empty()) {
    if (!specs.empty()) return invalid("--image and --input cannot be combined");
    RKD_ASSIGN(ImportedModel imp, import_model(model, 1));
    RKD_ASSIGN(const DetectorConfig cfg, detector_config(imp.graph, config));
    RKD_ASSIGN(Image img, load_image(image));
    RKD_ASSIGN(Prepared prep, preprocess(img, cfg, takes_target_sizes(imp.graph)));
    return prep.inputs;
  }
  if (specs.empty()) return invalid("give the input: --image PHOTO or --input NAME=FILE.npy");
  for (const std::string& spec : specs) {
    const auto eq = spec.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == spec.size()) return invalid("--input '" + spec + "': expected NAME=FILE.npy");
    const std::string name = spec.substr(0, eq);
    if (inputs.count(name)) return invalid("--input: '" + name + "' given twice");
    RKD_ASSIGN(inputs[name], read_npy(spec.substr(eq + 1)));
  }
  return inputs;
}

Status check_real_inputs(const std::map<std::string, Tensor>& inputs) {
  RKD_TRY(check_detector_inputs(inputs));
  for (const auto& [name, t] : inputs) {
    if (t.numel() < 2 || name == "orig_target_sizes") continue;
    const double first = t.get_as_double(0);
    bool constant = true;
    for (int64_t i = 1; i < t.numel() && constant; ++i) constant = t.get_as_double(i) == first;
    if (constant) {
      return invalid("input '" + name + "': every element is " + std::to_string(first) +
                     "; a measurement needs real data (a photo: --image) because data-dependent ops (TopK, sampling) would take one path");
    }
  }
  return {};
}

}  // namespace rkd::runtime
