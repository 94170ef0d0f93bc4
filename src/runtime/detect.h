// Detector pre- and post-processing around the executor: photo in, detections out.
//
// Contract:
//  - load_image(): PNG/JPEG/BMP through stb_image, as 8-bit RGB [H, W, 3]; errors name the file.
//  - DetectorConfig (docs/detector-config.md) says how to feed and read a model:
//      input size, resize "stretch" (DEIM/D-FINE/RT-DETR exporters) or "letterbox"
//      (Ultralytics: aspect kept, padded with pad_value, centred), pixel scale, mean/std
//      per RGB channel, channel order, and the output kind:
//        "deim": outputs labels [N,K], boxes [N,K,4] (xyxy in original-image pixels,
//                already scaled by orig_target_sizes = [w, h] of the photo), scores [N,K]:
//                already post-processed, only the score threshold applies;
//        "yolo": one output [N, 4 + classes, anchors], xywh in input pixels and class
//                scores: best class per anchor, score threshold, per-class NMS, boxes
//                mapped back through the letterbox to photo pixels.
//        "gfl":  NanoDet's generalized-focal-loss head: per level of g x g cells (stride =
//                input width / g) one output [N, g*g, classes] of class probabilities and
//                one [N, g*g, 4 * bins] of distance distributions (left, top, right,
//                bottom; softmax over the bins, expectation times the stride), centre of
//                cell (x, y) at ((x + 0.5) stride, (y + 0.5) stride); then as yolo.
//      Boxes map back to photo pixels through the resize (stretch or letterbox).
//    default_config() picks "deim" when the model has an `orig_target_sizes` input.
//  - draw_detections() draws each box in its class's colour (class_colour: Ultralytics'
//    palette), lines draw_style().line pixels wide (2, or 0.3 % of the image's mean side), and
//    over the boxes a filled label in that colour with the class name and score
//    (detection_label: "person 0.87"; a label past `names`, COCO's by default, "class N") in stb_easy_font's
//    glyphs draw_style().font pixels a unit, above the box or inside its top when there is no
//    room. write_png() is atomic (temporary file, then rename).
#pragma once

#include <array>
#include <map>
#include <string>
#include <vector>

#include "core/result.h"
#include "core/tensor.h"
#include "ir/ir.h"
#include "runtime/detector_config.h"

namespace rkd::runtime {

// The largest photo side (and orig_target_sizes value) accepted, in pixels.
inline constexpr int64_t kMaxImageSide = 1 << 16;

struct Image {
  int64_t width = 0, height = 0;
  std::vector<uint8_t> rgb;  // row-major, 3 bytes per pixel
};

Result<Image> load_image(const std::string& path);
// The photos of a folder (.png/.jpg/.jpeg/.bmp, any case), sorted by name; an error naming
// the folder when it is not one or holds none (calibration, eval).
Result<std::vector<std::string>> list_photos(const std::string& dir);
Status write_png(const std::string& path, const Image& img);

// From the graph's inputs (size of the image input, deim vs yolo).
DetectorConfig default_config(const ir::Graph& g);
// The config a photo run uses: default_config(g), with the fields of the JSON file
// `config_path` over it; without a file, those of the JSON text an artifact's graph carries
// under the metadata key kArtifactConfigKey (import_model puts its config there), if any.
inline constexpr const char* kArtifactConfigKey = "rkdeploy.detector_config";
Result<DetectorConfig> detector_config(const ir::Graph& g, const std::string& config_path);
// A DEIM/D-FINE/RT-DETR-style export: the graph has an `orig_target_sizes` input.
bool takes_target_sizes(const ir::Graph& g);

struct Detection {
  int64_t label = 0;
  float score = 0.f;
  float x0 = 0, y0 = 0, x1 = 0, y1 = 0;  // photo pixels
};

// Intersection over union of two boxes (0 when the union is empty).
float box_iou(const Detection& a, const Detection& b);

struct Prepared {
  std::map<std::string, Tensor> inputs;
  float gain_x = 1.f, gain_y = 1.f, pad_x = 0.f, pad_y = 0.f;  // input = photo * gain + pad
};

Result<Prepared> preprocess(const Image& img, const DetectorConfig& cfg, bool with_target_sizes);
Result<std::vector<Detection>> postprocess(const std::map<std::string, Tensor>& outputs, const DetectorConfig& cfg, const Prepared& prep,
                                           const Image& img);

const std::vector<std::string>& coco_class_names();  // the 80 COCO class names, index = label
struct DrawStyle {
  int64_t line = 2, font = 2;
};
DrawStyle draw_style(int64_t width, int64_t height);
std::array<uint8_t, 3> class_colour(int64_t label);
// `names`: the class names labels index (run --classes ids passes none: "class N").
std::string detection_label(const Detection& d, const std::vector<std::string>& names = coco_class_names());
void draw_detections(Image& img, const std::vector<Detection>& dets, const std::vector<std::string>& names = coco_class_names());

// The checks on a model's inputs, one for every caller (the command line, the C API, Python):
//  - check_detector_inputs(): for a DEIM/D-FINE/RT-DETR-style model (an input named
//    `orig_target_sizes`), that input must be integer [N, 2] holding [width, height] of the
//    original image, both in [1, kMaxImageSide]; [0, 0] or negatives are refused with an error
//    saying that every box would be scaled to zero.
//  - check_finite_inputs(): the trust boundary for values (docs/cli.md, "Non-finite values"):
//    every floating-point input element finite, or an invalid Error naming the input (`what`:
//    "input", "calibration sample 3"), the first offending element's index and value and how
//    many there are. The kernels keep IEEE semantics for NaN and infinities (--allow-nonfinite
//    passes them).
//  - check_run_inputs(): what every run applies: both, the second unless allow_nonfinite.
Status check_detector_inputs(const std::map<std::string, Tensor>& inputs);
Status check_finite_inputs(const std::map<std::string, Tensor>& inputs, const std::string& what = "input");
Status check_run_inputs(const std::map<std::string, Tensor>& inputs, bool allow_nonfinite);

}  // namespace rkd::runtime
