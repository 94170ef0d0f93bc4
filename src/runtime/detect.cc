#include "runtime/detect.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>

#include "core/npy.h"

#include <stb/stb_image.h>
#include <stb/stb_image_write.h>
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"
#pragma GCC diagnostic ignored "-Wsign-compare"
#pragma GCC diagnostic ignored "-Wconversion"
#include <stb/stb_easy_font.h>
#pragma GCC diagnostic pop

namespace rkd::runtime {

Result<Image> load_image(const std::string& path) {
  RKD_ASSIGN(std::string bytes, read_file_bytes(path));
  if (bytes.size() > static_cast<size_t>(std::numeric_limits<int>::max())) return invalid(path + ": file too large");
  int w = 0, h = 0, c = 0;
  if (!stbi_info_from_memory(reinterpret_cast<const stbi_uc*>(bytes.data()), static_cast<int>(bytes.size()), &w, &h, &c)) {
    return invalid(path + ": not an image stb_image can read (" + std::string(stbi_failure_reason()) + ")");
  }
  if (static_cast<int64_t>(w) * h > (int64_t{1} << 28)) {
    return invalid(path + ": " + std::to_string(w) + "x" + std::to_string(h) + " pixels is more than this tool accepts");
  }
  stbi_uc* p = stbi_load_from_memory(reinterpret_cast<const stbi_uc*>(bytes.data()), static_cast<int>(bytes.size()), &w, &h, &c, 3);
  if (!p) return invalid(path + ": cannot decode (" + std::string(stbi_failure_reason()) + ")");
  Image img;
  img.width = w;
  img.height = h;
  img.rgb.assign(p, p + static_cast<size_t>(w) * static_cast<size_t>(h) * 3);
  stbi_image_free(p);
  return img;
}

Result<std::vector<std::string>> list_photos(const std::string& dir) {
  std::error_code ec;
  const auto st = std::filesystem::status(dir, ec);
  if (st.type() == std::filesystem::file_type::not_found) return io_error(dir + ": no such folder");
  if (ec) return io_error(dir + ": " + ec.message());
  if (st.type() != std::filesystem::file_type::directory) return invalid(dir + ": not a folder of photos");
  std::vector<std::string> photos;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    std::string ext = e.path().extension().string();
    std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    if (ext != ".png" && ext != ".jpg" && ext != ".jpeg" && ext != ".bmp") continue;
    // A link that loops or leads nowhere is named, not thrown as a filesystem exception.
    std::error_code fe;
    const bool regular = e.is_regular_file(fe);
    if (fe) return io_error(e.path().string() + ": " + fe.message());
    if (regular) photos.push_back(e.path().string());
  }
  if (ec) return io_error(dir + ": " + ec.message());
  std::sort(photos.begin(), photos.end());
  if (photos.empty()) return invalid(dir + ": no .png/.jpg/.jpeg/.bmp photos in the folder");
  return photos;
}

Status write_png(const std::string& path, const Image& img) {
  std::vector<uint8_t> png;
  auto sink = [](void* ctx, void* data, int size) {
    auto* v = static_cast<std::vector<uint8_t>*>(ctx);
    v->insert(v->end(), static_cast<uint8_t*>(data), static_cast<uint8_t*>(data) + size);
  };
  if (!stbi_write_png_to_func(sink, &png, static_cast<int>(img.width), static_cast<int>(img.height), 3, img.rgb.data(),
                              static_cast<int>(img.width * 3))) {
    return io_error(path + ": PNG encoding failed");
  }
  return write_file_atomic(path, png);
}

bool takes_target_sizes(const ir::Graph& g) {
  return std::any_of(g.inputs.begin(), g.inputs.end(), [](const ir::Value* v) { return v->name == "orig_target_sizes"; });
}

DetectorConfig default_config(const ir::Graph& g) {
  DetectorConfig c;
  const bool deim = takes_target_sizes(g);
  for (const ir::Value* v : g.inputs) {
    if (v->name == "orig_target_sizes" || !v->shape || v->shape->size() != 4) continue;
    c.input = v->name;
    const ir::Dims& d = *v->shape;
    // NHWC (TensorFlow) when the last dimension holds the 3 colour channels and the second does not.
    const bool nhwc = d[3].is_static() && d[3].value == 3 && !(d[1].is_static() && d[1].value == 3);
    c.layout = nhwc ? "nhwc" : "nchw";
    if (d[nhwc ? 1 : 2].is_static()) c.height = d[nhwc ? 1 : 2].value;
    if (d[nhwc ? 2 : 3].is_static()) c.width = d[nhwc ? 2 : 3].value;
    if (v->dtype == DType::i32) c.dtype = "int32";
  }
  c.output = deim ? "deim" : "yolo";
  c.resize = deim ? "stretch" : "letterbox";
  return c;
}

Result<DetectorConfig> detector_config(const ir::Graph& g, const std::string& config_path) {
  const DetectorConfig defaults = default_config(g);
  if (config_path.empty()) {
    if (auto it = g.metadata.find(std::string(kArtifactConfigKey)); it != g.metadata.end()) {
      return parse_config(it->second, "the artifact's detector config", defaults);
    }
    return defaults;
  }
  return read_config(config_path, defaults);
}

Result<Prepared> preprocess(const Image& img, const DetectorConfig& cfg, bool with_target_sizes) {
  Prepared p;
  const int64_t W = cfg.width, H = cfg.height;
  const bool nhwc = cfg.layout == "nhwc", as_int = cfg.dtype == "int32";
  const Shape shape = nhwc ? Shape{1, H, W, 3} : Shape{1, 3, H, W};
  const DType dtype = as_int ? DType::i32 : DType::f32;
  const std::string what = "input '" + cfg.input + "' " + shape_to_string(shape) + " for a photo";
  RKD_ASSIGN(const uint64_t bytes, checked_shape_bytes(shape, dtype, what));
  RKD_TRY(check_memory_estimate(bytes, what));
  RKD_ASSIGN(Tensor t, Tensor::uninitialized(dtype, shape));
  float gx = static_cast<float>(W) / static_cast<float>(img.width);
  float gy = static_cast<float>(H) / static_cast<float>(img.height);
  if (cfg.resize == "letterbox") {
    const float g = std::min(gx, gy);
    gx = gy = g;
    p.pad_x = (static_cast<float>(W) - static_cast<float>(img.width) * g) / 2.f;
    p.pad_y = (static_cast<float>(H) - static_cast<float>(img.height) * g) / 2.f;
  }
  p.gain_x = gx;
  p.gain_y = gy;
  // Bilinear sampling at pixel centres (half-pixel mapping, edges clamped).
  for (int64_t y = 0; y < H; ++y) {
    for (int64_t x = 0; x < W; ++x) {
      const float sx = (static_cast<float>(x) + 0.5f - p.pad_x) / gx - 0.5f;
      const float sy = (static_cast<float>(y) + 0.5f - p.pad_y) / gy - 0.5f;
      float rgb[3];
      const bool outside = sx < -0.5f || sy < -0.5f || sx > static_cast<float>(img.width) - 0.5f || sy > static_cast<float>(img.height) - 0.5f;
      if (outside) {
        rgb[0] = rgb[1] = rgb[2] = cfg.pad_value;
      } else {
        const float cx = std::clamp(sx, 0.f, static_cast<float>(img.width - 1));
        const float cy = std::clamp(sy, 0.f, static_cast<float>(img.height - 1));
        const int64_t x0 = static_cast<int64_t>(cx), y0 = static_cast<int64_t>(cy);
        const int64_t x1 = std::min(x0 + 1, img.width - 1), y1 = std::min(y0 + 1, img.height - 1);
        const float fx = cx - static_cast<float>(x0), fy = cy - static_cast<float>(y0);
        for (int k = 0; k < 3; ++k) {
          auto px = [&](int64_t xx, int64_t yy) { return static_cast<float>(img.rgb[static_cast<size_t>((yy * img.width + xx) * 3 + k)]); };
          rgb[k] = (px(x0, y0) * (1 - fx) + px(x1, y0) * fx) * (1 - fy) + (px(x0, y1) * (1 - fx) + px(x1, y1) * fx) * fy;
        }
      }
      for (int k = 0; k < 3; ++k) {
        const int src = cfg.channel_order == "rgb" ? k : 2 - k;
        const float v = (rgb[src] * cfg.scale - cfg.mean[src]) / cfg.std[src];
        const int64_t at = nhwc ? (y * W + x) * 3 + k : (k * H + y) * W + x;
        if (as_int) {
          t.data<int32_t>()[at] = static_cast<int32_t>(std::clamp(std::nearbyint(v), -2147483648.f, 2147483520.f));
        } else {
          t.data<float>()[at] = v;
        }
      }
    }
  }
  p.inputs[cfg.input] = t;
  if (with_target_sizes) {
    Tensor s = Tensor::empty(DType::i64, {1, 2});
    s.data<int64_t>()[0] = img.width;
    s.data<int64_t>()[1] = img.height;
    p.inputs["orig_target_sizes"] = s;
  }
  return p;
}

float box_iou(const Detection& a, const Detection& b) {
  const float ix = std::max(0.f, std::min(a.x1, b.x1) - std::max(a.x0, b.x0));
  const float iy = std::max(0.f, std::min(a.y1, b.y1) - std::max(a.y0, b.y0));
  const float inter = ix * iy;
  const float ua = (a.x1 - a.x0) * (a.y1 - a.y0) + (b.x1 - b.x0) * (b.y1 - b.y0) - inter;
  return ua > 0 ? inter / ua : 0.f;
}

namespace {

// Input pixels -> photo pixels, clamped to the photo.
Detection to_photo(int64_t label, float score, float x0, float y0, float x1, float y1, const Prepared& prep, const Image& img) {
  auto unx = [&](float v) { return std::clamp((v - prep.pad_x) / prep.gain_x, 0.f, static_cast<float>(img.width)); };
  auto uny = [&](float v) { return std::clamp((v - prep.pad_y) / prep.gain_y, 0.f, static_cast<float>(img.height)); };
  return Detection{label, score, unx(x0), uny(y0), unx(x1), uny(y1)};
}

// NanoDet's GFL head (contract in detect.h): candidates above the threshold, input pixels.
Result<std::vector<Detection>> decode_gfl(const std::map<std::string, Tensor>& outputs, const DetectorConfig& cfg, const Prepared& prep,
                                          const Image& img) {
  // Pair each level's class output with its distribution output by their cell count.
  std::map<int64_t, std::vector<const Tensor*>> by_cells;
  for (const auto& [name, t] : outputs) {
    if (t.rank() != 3 || t.dim(0) != 1 || t.dtype() != DType::f32)
      return invalid("output kind gfl: output '" + name + "' is not [1, cells, n] float32");
    by_cells[t.dim(1)].push_back(&t);
  }
  std::vector<Detection> cand;
  for (const auto& [cells, ts] : by_cells) {
    const int64_t g = static_cast<int64_t>(std::llround(std::sqrt(static_cast<double>(cells))));
    if (ts.size() != 2 || g * g != cells || cfg.width % g != 0) {
      return invalid("output kind gfl: level of " + std::to_string(cells) + " cells needs a square grid dividing the input and two outputs");
    }
    // The distribution output has 4 * bins columns, the class output the other count.
    const bool first_is_dist = ts[0]->dim(2) % 4 == 0 && (ts[1]->dim(2) % 4 != 0 || ts[0]->dim(2) < ts[1]->dim(2));
    const Tensor cls = (first_is_dist ? ts[1] : ts[0])->contiguous(), dist = (first_is_dist ? ts[0] : ts[1])->contiguous();
    if (dist.dim(2) % 4 != 0) return invalid("output kind gfl: no [1, cells, 4 * bins] output for " + std::to_string(cells) + " cells");
    const int64_t C = cls.dim(2), bins = dist.dim(2) / 4;
    const float stride = static_cast<float>(cfg.width) / static_cast<float>(g);
    for (int64_t i = 0; i < cells; ++i) {
      const float* sc = cls.data<float>() + i * C;
      const int64_t best = std::max_element(sc, sc + C) - sc;
      if (sc[best] < cfg.score_threshold) continue;
      float d[4];
      for (int side = 0; side < 4; ++side) {
        const float* v = dist.data<float>() + (i * 4 + side) * bins;
        const float m = *std::max_element(v, v + bins);
        double sum = 0, ex = 0;
        for (int64_t b = 0; b < bins; ++b) {
          const double e = std::exp(static_cast<double>(v[b] - m));
          sum += e;
          ex += e * static_cast<double>(b);
        }
        d[side] = static_cast<float>(ex / sum) * stride;
      }
      const float cx = (static_cast<float>(i % g) + 0.5f) * stride, cy = (static_cast<float>(i / g) + 0.5f) * stride;
      cand.push_back(to_photo(best, sc[best], cx - d[0], cy - d[1], cx + d[2], cy + d[3], prep, img));
    }
  }
  return cand;
}

// "detections": one output [1, K, 6] of x0, y0, x1, y1 (input pixels), score, class.
Result<std::vector<Detection>> decode_detections(const std::map<std::string, Tensor>& outputs, const DetectorConfig& cfg, const Prepared& prep,
                                                 const Image& img) {
  const Tensor* found = nullptr;
  for (const auto& [name, t] : outputs) {
    if (t.rank() == 3 && t.dim(0) == 1 && t.dim(2) == 6 && dtype_is_float(t.dtype())) {
      if (found) return invalid("output kind detections: more than one output is [1, K, 6]");
      found = &t;
    }
  }
  if (!found) return invalid("output kind detections: no output [1, K, 6] (x0, y0, x1, y1, score, class)");
  std::vector<Detection> cand;
  const Tensor t = found->contiguous();
  for (int64_t k = 0; k < t.dim(1); ++k) {
    auto v = [&](int64_t i) { return static_cast<float>(t.get_as_double(k * 6 + i)); };
    const float score = v(4), cls = v(5);
    if (!(score >= cfg.score_threshold) || !std::isfinite(cls) || cls < 0 || cls > 1e6f) continue;
    cand.push_back(to_photo(static_cast<int64_t>(cls), score, v(0), v(1), v(2), v(3), prep, img));
  }
  return cand;
}

// "anchors": MediaPipe's SSD heads (BlazeFace, the palm/hand detector). The anchors of level l
// lie on a ceil(H / stride) x ceil(W / stride) grid, `per cell` of them at each cell centre
// ((x + 0.5) stride, (y + 0.5) stride), in the order level, y, x, anchor. Per anchor a score
// logit and regressors [dx, dy, w, h, keypoints...] in input pixels: centre = anchor + (dx, dy),
// size (w, h); score = sigmoid(logit); one class (label 0). The outputs are one [1, A, 1 + R]
// (score first) or, per level, [1, A_l, 1] and [1, A_l, R] (R >= 4), matched by A_l.
Result<std::vector<Detection>> decode_anchors(const std::map<std::string, Tensor>& outputs, const DetectorConfig& cfg, const Prepared& prep,
                                              const Image& img) {
  struct Level {
    int64_t gw, gh, per_cell, count;
    float stride_x, stride_y;
  };
  std::vector<Level> levels;
  int64_t total = 0;
  for (const auto& [stride, per_cell] : cfg.anchors) {
    Level l{(cfg.width + stride - 1) / stride, (cfg.height + stride - 1) / stride, per_cell, 0, 0.f, 0.f};
    l.count = l.gw * l.gh * per_cell;
    l.stride_x = static_cast<float>(cfg.width) / static_cast<float>(l.gw);
    l.stride_y = static_cast<float>(cfg.height) / static_cast<float>(l.gh);
    total += l.count;
    levels.push_back(l);
  }
  for (const auto& [name, t] : outputs) {
    if (t.rank() != 3 || t.dim(0) != 1 || !dtype_is_float(t.dtype()))
      return invalid("output kind anchors: output '" + name + "' is not [1, A, n] float");
  }
  // Per level: (scores, column of the score, regressors, first regressor column).
  struct Source {
    Tensor scores, regs;
    int64_t score_col = 0, reg_col = 0;
  };
  std::vector<Source> src(levels.size());
  if (outputs.size() == 1) {
    const Tensor t = outputs.begin()->second.contiguous();
    if (t.dim(1) != total || t.dim(2) < 5) {
      return invalid("output kind anchors: the anchors config gives " + std::to_string(total) + " anchors; output '" + outputs.begin()->first +
                     "' is " + shape_to_string(t.shape()) + " (expected [1, " + std::to_string(total) + ", 1 + regressors])");
    }
    int64_t start = 0;
    for (size_t l = 0; l < levels.size(); ++l) {
      RKD_ASSIGN(Tensor part, t.slice(1, start, start + levels[l].count));
      const Tensor level = part.contiguous();
      src[l] = Source{level, level, 0, 1};
      start += levels[l].count;
    }
  } else {
    for (size_t l = 0; l < levels.size(); ++l) {
      const Tensor* sc = nullptr;
      const Tensor* rg = nullptr;
      for (const auto& [name, t] : outputs) {
        if (t.dim(1) != levels[l].count) continue;
        if (t.dim(2) == 1 && !sc) sc = &t;
        else if (t.dim(2) >= 4 && !rg) rg = &t;
      }
      if (!sc || !rg) {
        return invalid("output kind anchors: no [1, " + std::to_string(levels[l].count) + ", 1] score output and [1, " +
                       std::to_string(levels[l].count) + ", R] regressor output for level " + std::to_string(l) + " (stride " +
                       std::to_string(cfg.anchors[l][0]) + ")");
      }
      src[l] = Source{sc->contiguous(), rg->contiguous(), 0, 0};
    }
  }
  std::vector<Detection> cand;
  for (size_t l = 0; l < levels.size(); ++l) {
    const Level& lv = levels[l];
    const Source& s = src[l];
    const int64_t sw = s.scores.dim(2), rw = s.regs.dim(2);
    for (int64_t i = 0; i < lv.count; ++i) {
      const double logit = s.scores.get_as_double(i * sw + s.score_col);
      const float score = static_cast<float>(1.0 / (1.0 + std::exp(-logit)));
      if (!(score >= cfg.score_threshold)) continue;
      const int64_t cell = i / lv.per_cell;
      const float ax = (static_cast<float>(cell % lv.gw) + 0.5f) * lv.stride_x, ay = (static_cast<float>(cell / lv.gw) + 0.5f) * lv.stride_y;
      auto r = [&](int64_t k) { return static_cast<float>(s.regs.get_as_double(i * rw + s.reg_col + k)); };
      const float cx = ax + r(0), cy = ay + r(1), w = r(2), h = r(3);
      cand.push_back(to_photo(0, score, cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2, prep, img));
    }
  }
  return cand;
}

}  // namespace

Result<std::vector<Detection>> postprocess(const std::map<std::string, Tensor>& outputs, const DetectorConfig& cfg, const Prepared& prep,
                                           const Image& img) {
  std::vector<Detection> dets;
  if (cfg.output == "none") return dets;
  if (cfg.output == "deim") {
    for (const char* name : {"labels", "boxes", "scores"}) {
      if (!outputs.count(name)) return invalid(std::string("output kind deim: the model has no output '") + name + "'");
    }
    const Tensor& l = outputs.at("labels");
    const Tensor& b = outputs.at("boxes");
    const Tensor& s = outputs.at("scores");
    if (l.rank() != 2 || s.shape() != l.shape() || b.rank() != 3 || b.dim(1) != l.dim(1) || b.dim(2) != 4) {
      return invalid("output kind deim: expected labels [N,K], boxes [N,K,4], scores [N,K]");
    }
    for (int64_t k = 0; k < l.dim(1); ++k) {
      const float score = static_cast<float>(s.get_as_double(k));
      if (score < cfg.score_threshold) continue;
      dets.push_back(Detection{static_cast<int64_t>(l.get_as_double(k)), score, static_cast<float>(b.get_as_double(k * 4)),
                               static_cast<float>(b.get_as_double(k * 4 + 1)), static_cast<float>(b.get_as_double(k * 4 + 2)),
                               static_cast<float>(b.get_as_double(k * 4 + 3))});
    }
  } else {
    std::vector<Detection> cand;
    if (cfg.output == "gfl") {
      RKD_ASSIGN(cand, decode_gfl(outputs, cfg, prep, img));
    } else if (cfg.output == "detections") {
      RKD_ASSIGN(cand, decode_detections(outputs, cfg, prep, img));
    } else if (cfg.output == "anchors") {
      RKD_ASSIGN(cand, decode_anchors(outputs, cfg, prep, img));
    } else {
      // The default for a model without orig_target_sizes: say how to describe any other head.
      auto not_yolo = [&](const std::string& seen) {
        return invalid("output kind yolo: expected one output [N, 4 + classes, anchors], the model has " + seen +
                       "; a detector with another head (NanoDet's gfl: one class and one box output per level) needs --config CFG.json "
                       "naming its \"output\" kind (docs/detector-config.md; scripts/models/human/configs/nanodet.json is one)");
      };
      if (outputs.size() != 1) return not_yolo(std::to_string(outputs.size()) + " outputs");
      const Tensor y = outputs.begin()->second.contiguous();
      if (y.rank() != 3 || y.dim(1) < 5) return not_yolo("'" + outputs.begin()->first + "' " + shape_to_string(y.shape()));
      const int64_t C = y.dim(1) - 4, A = y.dim(2);
      const float* p = y.data<float>();
      for (int64_t a = 0; a < A; ++a) {
        int64_t best = 0;
        float bs = -1;
        for (int64_t c = 0; c < C; ++c) {
          const float v = p[(4 + c) * A + a];
          if (v > bs) {
            bs = v;
            best = c;
          }
        }
        if (bs < cfg.score_threshold) continue;
        const float cx = p[a], cy = p[A + a], w = p[2 * A + a], h = p[3 * A + a];
        cand.push_back(to_photo(best, bs, cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2, prep, img));
      }
    }
    std::stable_sort(cand.begin(), cand.end(), [](const Detection& a, const Detection& b) { return a.score > b.score; });
    for (const Detection& d : cand) {
      bool keep = true;
      for (const Detection& k : dets) keep = keep && !(k.label == d.label && box_iou(k, d) > cfg.nms_iou);
      if (keep) dets.push_back(d);
      if (static_cast<int64_t>(dets.size()) >= cfg.max_detections) break;
    }
  }
  std::stable_sort(dets.begin(), dets.end(), [](const Detection& a, const Detection& b) { return a.score > b.score; });
  if (static_cast<int64_t>(dets.size()) > cfg.max_detections) dets.resize(static_cast<size_t>(cfg.max_detections));
  if (cfg.clip_boxes) {
    const float w = static_cast<float>(img.width), h = static_cast<float>(img.height);
    for (Detection& d : dets) {
      d.x0 = std::clamp(d.x0, 0.f, w);
      d.x1 = std::clamp(d.x1, 0.f, w);
      d.y0 = std::clamp(d.y0, 0.f, h);
      d.y1 = std::clamp(d.y1, 0.f, h);
    }
  }
  return dets;
}

namespace {

// Ultralytics' annotation palette (ultralytics/utils/plotting.py Colors): one saturated colour
// per class, label modulo 20.
constexpr uint8_t kPalette[20][3] = {{0xFF, 0x38, 0x38}, {0xFF, 0x9D, 0x97}, {0xFF, 0x70, 0x1F}, {0xFF, 0xB2, 0x1D}, {0xCF, 0xD2, 0x31},
                                     {0x48, 0xF9, 0x0A}, {0x92, 0xCC, 0x17}, {0x3D, 0xDB, 0x86}, {0x1A, 0x93, 0x34}, {0x00, 0xD4, 0xBB},
                                     {0x2C, 0x99, 0xA8}, {0x00, 0xC2, 0xFF}, {0x34, 0x45, 0x93}, {0x64, 0x73, 0xFF}, {0x00, 0x18, 0xEC},
                                     {0x84, 0x38, 0xFF}, {0x52, 0x00, 0x85}, {0xCB, 0x38, 0xFF}, {0xFF, 0x95, 0xC8}, {0xFF, 0x37, 0xC7}};

void fill_rect(Image& img, int64_t x0, int64_t y0, int64_t x1, int64_t y1, const uint8_t* col) {  // [x0, x1) x [y0, y1), clipped
  x0 = std::max<int64_t>(x0, 0), y0 = std::max<int64_t>(y0, 0);
  x1 = std::min<int64_t>(x1, img.width), y1 = std::min<int64_t>(y1, img.height);
  for (int64_t y = y0; y < y1; ++y)
    for (int64_t x = x0; x < x1; ++x) std::memcpy(&img.rgb[static_cast<size_t>((y * img.width + x) * 3)], col, 3);
}

// stb_easy_font's glyphs of `text` as rectangles in font units ({x0, y0, x1, y1}; stb's quads,
// whose first and third vertices are opposite corners). Characters outside printable ASCII
// (which stb's table does not cover) become '?'.
std::vector<std::array<float, 4>> text_rects(const std::string& text) {
  std::vector<char> t;
  for (char c : text) t.push_back(c >= 32 && c < 127 ? c : '?');
  t.push_back(0);
  std::vector<uint8_t> buf(t.size() * 1024);  // stb_easy_font: 64 bytes a quad, under 16 quads a glyph
  const int quads = stb_easy_font_print(0, 0, t.data(), nullptr, buf.data(), static_cast<int>(buf.size()));
  std::vector<std::array<float, 4>> rects(static_cast<size_t>(quads));
  for (size_t q = 0; q < rects.size(); ++q) {
    std::memcpy(&rects[q][0], &buf[q * 64], 8);
    std::memcpy(&rects[q][2], &buf[q * 64 + 32], 8);
  }
  return rects;
}

}  // namespace

DrawStyle draw_style(int64_t width, int64_t height) {
  DrawStyle st;
  st.line = std::max<int64_t>(2, std::llround(static_cast<double>(width + height) / 2 * 0.003));
  st.font = std::max<int64_t>(2, st.line * 2 / 3);
  return st;
}

std::array<uint8_t, 3> class_colour(int64_t label) {
  const auto& c = kPalette[static_cast<size_t>(((label % 20) + 20) % 20)];
  return {c[0], c[1], c[2]};
}

std::string detection_label(const Detection& d, const std::vector<std::string>& names) {
  char score[16];
  std::snprintf(score, sizeof score, "%.2f", static_cast<double>(d.score));
  const std::string name =
      d.label >= 0 && d.label < static_cast<int64_t>(names.size()) ? names[static_cast<size_t>(d.label)] : "class " + std::to_string(d.label);
  return name + " " + score;
}

void draw_detections(Image& img, const std::vector<Detection>& dets, const std::vector<std::string>& names) {
  const DrawStyle st = draw_style(img.width, img.height);
  auto px = [](float v, int64_t hi) { return std::isfinite(v) ? std::clamp<int64_t>(static_cast<int64_t>(std::lround(v)), 0, hi) : int64_t{0}; };
  // Boxes first, then every label over them (a label is never hidden by another box), the best
  // detection's last (on top where labels overlap).
  for (const Detection& d : dets) {
    const auto col = class_colour(d.label);
    const int64_t x0 = px(d.x0, img.width), x1 = px(d.x1, img.width), y0 = px(d.y0, img.height), y1 = px(d.y1, img.height);
    fill_rect(img, x0, y0, x1, y0 + st.line, col.data());
    fill_rect(img, x0, y1 - st.line, x1, y1, col.data());
    fill_rect(img, x0, y0, x0 + st.line, y1, col.data());
    fill_rect(img, x1 - st.line, y0, x1, y1, col.data());
  }
  for (auto it = dets.rbegin(); it != dets.rend(); ++it) {
    const Detection& d = *it;
    const auto col = class_colour(d.label);
    const auto rects = text_rects(detection_label(d, names));
    float w = 0, h = 0;
    for (const auto& r : rects) w = std::max(w, r[2]), h = std::max(h, r[3]);
    const int64_t pad = st.font, s = st.font;
    const int64_t tw = static_cast<int64_t>(std::ceil(w)) * s + 2 * pad, th = static_cast<int64_t>(std::ceil(h)) * s + 2 * pad;
    const int64_t x0 = px(d.x0, img.width), y0 = px(d.y0, img.height);
    // Above the box where there is room, else inside its top edge.
    const int64_t ly = y0 - th >= 0 ? y0 - th : y0;
    const int64_t lx = std::min(x0, std::max<int64_t>(0, img.width - tw));
    fill_rect(img, lx, ly, lx + tw, ly + th, col.data());
    // Dark text on a light colour, white on a dark one (ITU-R BT.601 luma).
    const bool light = 0.299 * col[0] + 0.587 * col[1] + 0.114 * col[2] > 150;
    const uint8_t ink[3] = {static_cast<uint8_t>(light ? 0 : 255), static_cast<uint8_t>(light ? 0 : 255), static_cast<uint8_t>(light ? 0 : 255)};
    for (const auto& r : rects) {
      fill_rect(img, lx + pad + std::lround(r[0] * static_cast<float>(s)), ly + pad + std::lround(r[1] * static_cast<float>(s)),
                lx + pad + std::lround(r[2] * static_cast<float>(s)), ly + pad + std::lround(r[3] * static_cast<float>(s)), ink);
    }
  }
}

const std::vector<std::string>& coco_class_names() {
  static const std::vector<std::string> names = {
      "person",         "bicycle",    "car",           "motorcycle",    "airplane",     "bus",           "train",
      "truck",          "boat",       "traffic light", "fire hydrant",  "stop sign",    "parking meter", "bench",
      "bird",           "cat",        "dog",           "horse",         "sheep",        "cow",           "elephant",
      "bear",           "zebra",      "giraffe",       "backpack",      "umbrella",     "handbag",       "tie",
      "suitcase",       "frisbee",    "skis",          "snowboard",     "sports ball",  "kite",          "baseball bat",
      "baseball glove", "skateboard", "surfboard",     "tennis racket", "bottle",       "wine glass",    "cup",
      "fork",           "knife",      "spoon",         "bowl",          "banana",       "apple",         "sandwich",
      "orange",         "broccoli",   "carrot",        "hot dog",       "pizza",        "donut",         "cake",
      "chair",          "couch",      "potted plant",  "bed",           "dining table", "toilet",        "tv",
      "laptop",         "mouse",      "remote",        "keyboard",      "cell phone",   "microwave",     "oven",
      "toaster",        "sink",       "refrigerator",  "book",          "clock",        "vase",          "scissors",
      "teddy bear",     "hair drier", "toothbrush"};
  return names;
}

Status check_detector_inputs(const std::map<std::string, Tensor>& inputs) {
  auto it = inputs.find("orig_target_sizes");
  if (it == inputs.end()) return {};
  const Tensor& t = it->second;
  const std::string what = "input 'orig_target_sizes' ([w, h] of the original image per batch item)";
  if (t.dtype() != DType::i64 && t.dtype() != DType::i32) {
    return invalid(what + ": must be int64 or int32, got " + dtype_name(t.dtype()));
  }
  if (t.rank() != 2 || t.dim(1) != 2) return invalid(what + ": shape must be [N, 2], got " + shape_to_string(t.shape()));
  for (int64_t i = 0; i < t.numel(); ++i) {
    const double v = t.get_as_double(i);
    if (v <= 0) {
      return invalid(what + ": row " + std::to_string(i / 2) + " holds " + std::to_string(static_cast<int64_t>(v)) + " for the " +
                     (i % 2 ? "height" : "width") + "; sizes must be positive, otherwise every box would be scaled to zero");
    }
    if (v > static_cast<double>(kMaxImageSide)) {
      return invalid(what + ": row " + std::to_string(i / 2) + " holds " + std::to_string(static_cast<int64_t>(v)) + ", more than " +
                     std::to_string(kMaxImageSide) + " pixels");
    }
  }
  return {};
}

Status check_finite_inputs(const std::map<std::string, Tensor>& inputs, const std::string& what) {
  for (const auto& [name, t] : inputs) {
    if (t.dtype() != DType::f32 && t.dtype() != DType::f16 && t.dtype() != DType::bf16) continue;
    int64_t bad = 0, first = -1;
    double value = 0;
    for (int64_t i = 0; i < t.numel(); ++i) {
      const double v = t.get_as_double(i);
      if (std::isfinite(v)) continue;
      if (bad++ == 0) first = i, value = v;
    }
    if (!bad) continue;
    std::string index;
    int64_t rem = first;
    for (int d = t.rank() - 1; d >= 0; --d) {
      index = std::to_string(rem % t.dim(d)) + (index.empty() ? "" : ", ") + index;
      rem /= t.dim(d);
    }
    return invalid(what + " '" + name + "': element [" + index + "] is " +
                   (std::isnan(value) ? "NaN"
                    : value > 0       ? "+inf"
                                      : "-inf") +
                   (bad > 1 ? " (" + std::to_string(bad) + " non-finite values in all)" : "") +
                   "; inputs must be finite (--allow-nonfinite runs with them, IEEE semantics in every kernel)");
  }
  return {};
}

Status check_run_inputs(const std::map<std::string, Tensor>& inputs, bool allow_nonfinite) {
  RKD_TRY(check_detector_inputs(inputs));
  if (!allow_nonfinite) RKD_TRY(check_finite_inputs(inputs));
  return {};
}

}  // namespace rkd::runtime
