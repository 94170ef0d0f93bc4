// The detector config (docs/detector-config.md): how to feed a model a photo and how to read
// its outputs. Kept apart from the pre/post-processing (detect.h) so that its reader can be
// fuzzed without the executor.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "core/result.h"

namespace rkd::runtime {

struct DetectorConfig {
  std::string input = "images";
  int64_t width = 640, height = 640;
  std::string resize = "stretch";  // stretch | letterbox
  float pad_value = 114.f;         // letterbox fill, in 0..255 pixel units
  float scale = 1.f / 255.f;       // pixel * scale, then (x - mean) / std
  float mean[3] = {0.f, 0.f, 0.f};
  float std[3] = {1.f, 1.f, 1.f};
  std::string channel_order = "rgb";  // rgb | bgr
  std::string layout = "nchw";        // nchw [1, 3, H, W] | nhwc [1, H, W, 3]
  std::string dtype = "float32";      // float32 | int32 (values rounded, as for integer image inputs)
  std::string output = "deim";        // deim | yolo | gfl | detections | anchors | none (no decoding: quantize, accuracy)
  // output "anchors": per level {stride, anchors per cell}, in the order of the anchors
  std::vector<std::array<int64_t, 2>> anchors;
  float score_threshold = 0.25f;
  float nms_iou = 0.45f;
  int64_t max_detections = 100;
  // Boxes clipped to the photo (x in [0, width], y in [0, height]), as detection tools report
  // them; false keeps what the head computed (a box may reach past the border).
  bool clip_boxes = true;
};

// Reads a JSON config (fields as above; unknown fields are an error naming them). A field the
// file does not give keeps its value in `base` (the model's defaults: detect.h's
// detector_config).
Result<DetectorConfig> read_config(const std::string& path, const DetectorConfig& base = {});
// The same from the file's text; `path` names it in errors.
Result<DetectorConfig> parse_config(const std::string& text, const std::string& path, const DetectorConfig& base = {});

}  // namespace rkd::runtime
