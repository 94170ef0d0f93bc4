#include "runtime/detector_config.h"

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <set>
#include <vector>

#include "core/json_fields.h"
#include "core/npy.h"

namespace rkd::runtime {

Result<DetectorConfig> read_config(const std::string& path, const DetectorConfig& base) {
  RKD_ASSIGN(std::string text, read_file_bytes(path));
  return parse_config(text, path, base);
}

Result<DetectorConfig> parse_config(const std::string& text, const std::string& path, const DetectorConfig& base) {
  nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded()) return invalid(path + ": not valid JSON (or a number beyond double's range)");
  if (!j.is_object()) return invalid(path + ": not a JSON object");
  DetectorConfig c = base;
  static const std::set<std::string> known = {
      "input",  "width", "height", "resize",          "pad_value", "scale",          "mean",    "std",       "channel_order",
      "layout", "dtype", "output", "score_threshold", "nms_iou",   "max_detections", "anchors", "clip_boxes"};
  for (const auto& [k, v] : j.items()) {
    if (!known.count(k)) return invalid(path + ": unknown field '" + k + "'");
  }
  // Typed reads (core/json_fields.h): a field of the wrong type, or an integer field holding
  // 1e30, is an error naming the field.
  auto name = [&](const char* key) { return path + ": field '" + key + "'"; };
  auto str = [&](const char* key, std::string& into) { return json_string(j, key, into, name(key)); };
  auto num = [&](const char* key, float& into) { return json_number(j, key, into, name(key)); };
  auto integer = [&](const char* key, int64_t& into) { return json_integer(j, key, into, name(key)); };
  RKD_TRY(str("input", c.input));
  RKD_TRY(integer("width", c.width));
  RKD_TRY(integer("height", c.height));
  RKD_TRY(str("resize", c.resize));
  RKD_TRY(num("pad_value", c.pad_value));
  RKD_TRY(num("scale", c.scale));
  for (const char* key : {"mean", "std"}) {
    if (!j.contains(key)) continue;
    const auto& arr = j[key];
    if (!arr.is_array() || arr.size() != 3) return invalid(path + ": field '" + key + "' needs 3 values (R, G, B)");
    for (size_t k = 0; k < 3; ++k) {
      if (!arr[k].is_number()) return invalid(path + ": field '" + key + "' needs 3 numbers (R, G, B)");
      (std::string(key) == "mean" ? c.mean : c.std)[k] = static_cast<float>(arr[k].get<double>());
    }
  }
  if (j.contains("anchors")) {
    const auto& arr = j["anchors"];
    const std::string bad = path + ": field 'anchors' must be a list of [stride, anchors per cell] pairs (stride 1..8192, 1..64 per cell)";
    if (!arr.is_array() || arr.empty() || arr.size() > 16) return invalid(bad);
    c.anchors.clear();
    for (const auto& lv : arr) {
      if (!lv.is_array() || lv.size() != 2 || !lv[0].is_number_integer() || !lv[1].is_number_integer()) return invalid(bad);
      const int64_t stride = lv[0].get<int64_t>(), per_cell = lv[1].get<int64_t>();
      if (stride < 1 || stride > 8192 || per_cell < 1 || per_cell > 64) return invalid(bad);
      c.anchors.push_back({stride, per_cell});
    }
  }
  RKD_TRY(str("channel_order", c.channel_order));
  RKD_TRY(str("layout", c.layout));
  RKD_TRY(str("dtype", c.dtype));
  RKD_TRY(str("output", c.output));
  RKD_TRY(num("score_threshold", c.score_threshold));
  RKD_TRY(num("nms_iou", c.nms_iou));
  RKD_TRY(integer("max_detections", c.max_detections));
  RKD_TRY(json_bool(j, "clip_boxes", c.clip_boxes, name("clip_boxes")));
  if (c.width < 1 || c.height < 1 || c.width > 8192 || c.height > 8192) return invalid(path + ": width/height must be 1..8192");
  if (c.resize != "stretch" && c.resize != "letterbox") return invalid(path + ": field 'resize' must be stretch or letterbox");
  if (c.channel_order != "rgb" && c.channel_order != "bgr") return invalid(path + ": field 'channel_order' must be rgb or bgr");
  if (c.output != "deim" && c.output != "yolo" && c.output != "gfl" && c.output != "detections" && c.output != "anchors" && c.output != "none") {
    return invalid(path + ": field 'output' must be deim, yolo, gfl, detections, anchors or none");
  }
  if (c.output == "anchors" && c.anchors.empty()) return invalid(path + ": output 'anchors' needs the field 'anchors' ([[stride, per cell], ...])");
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
