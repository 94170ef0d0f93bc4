#include "runtime/detector_config.h"

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <set>
#include <vector>

#include "core/npy.h"

namespace rkd::runtime {

Result<DetectorConfig> read_config(const std::string& path) {
  RKD_ASSIGN(std::string text, read_file_bytes(path));
  return parse_config(text, path);
}

Result<DetectorConfig> parse_config(const std::string& text, const std::string& path) {
  nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return invalid(path + ": not a JSON object");
  DetectorConfig c;
  static const std::set<std::string> known = {"input", "width", "height", "resize", "pad_value", "scale", "mean", "std",
                                              "channel_order", "layout", "dtype", "output", "score_threshold", "nms_iou", "max_detections"};
  for (const auto& [k, v] : j.items()) {
    if (!known.count(k)) return invalid(path + ": unknown field '" + k + "'");
  }
  try {
    c.input = j.value("input", c.input);
    c.width = j.value("width", c.width);
    c.height = j.value("height", c.height);
    c.resize = j.value("resize", c.resize);
    c.pad_value = j.value("pad_value", c.pad_value);
    c.scale = j.value("scale", c.scale);
    for (const char* key : {"mean", "std"}) {
      if (!j.contains(key)) continue;
      auto arr = j[key].get<std::vector<float>>();
      if (arr.size() != 3) return invalid(path + ": field '" + key + "' needs 3 values (R, G, B)");
      std::copy(arr.begin(), arr.end(), std::string(key) == "mean" ? c.mean : c.std);
    }
    c.channel_order = j.value("channel_order", c.channel_order);
    c.layout = j.value("layout", c.layout);
    c.dtype = j.value("dtype", c.dtype);
    c.output = j.value("output", c.output);
    c.score_threshold = j.value("score_threshold", c.score_threshold);
    c.nms_iou = j.value("nms_iou", c.nms_iou);
    c.max_detections = j.value("max_detections", c.max_detections);
  } catch (const nlohmann::json::exception& e) {
    return invalid(path + ": " + e.what());
  }
  if (c.width < 1 || c.height < 1 || c.width > 8192 || c.height > 8192) return invalid(path + ": width/height must be 1..8192");
  if (c.resize != "stretch" && c.resize != "letterbox") return invalid(path + ": field 'resize' must be stretch or letterbox");
  if (c.channel_order != "rgb" && c.channel_order != "bgr") return invalid(path + ": field 'channel_order' must be rgb or bgr");
  if (c.output != "deim" && c.output != "yolo" && c.output != "gfl" && c.output != "none") {
    return invalid(path + ": field 'output' must be deim, yolo, gfl or none");
  }
  if (c.layout != "nchw" && c.layout != "nhwc") return invalid(path + ": field 'layout' must be nchw or nhwc");
  if (c.dtype != "float32" && c.dtype != "int32") return invalid(path + ": field 'dtype' must be float32 or int32");
  for (float s : c.std) {
    if (!(s > 0) || !std::isfinite(s)) return invalid(path + ": field 'std' must be positive and finite");
  }
  for (float m : c.mean) {
    if (!std::isfinite(m)) return invalid(path + ": field 'mean' must be finite");
  }
  if (!std::isfinite(c.scale) || c.scale == 0) return invalid(path + ": field 'scale' must be finite and non-zero");
  if (!std::isfinite(c.pad_value)) return invalid(path + ": field 'pad_value' must be finite");
  if (!(c.score_threshold >= 0 && c.score_threshold <= 1)) return invalid(path + ": field 'score_threshold' must be in [0, 1]");
  if (!(c.nms_iou >= 0 && c.nms_iou <= 1)) return invalid(path + ": field 'nms_iou' must be in [0, 1]");
  if (c.max_detections < 1 || c.max_detections > 100000) return invalid(path + ": field 'max_detections' must be 1..100000");
  return c;
}

}  // namespace rkd::runtime
