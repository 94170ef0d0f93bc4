// Detector pre/post-processing (runtime/detect.h) on synthetic images and outputs whose
// answers are known in closed form.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "runtime/detect.h"

namespace rkd {
namespace {

runtime::Image gradient(int64_t w, int64_t h) {
  runtime::Image img;
  img.width = w;
  img.height = h;
  for (int64_t y = 0; y < h; ++y) {
    for (int64_t x = 0; x < w; ++x) {
      img.rgb.push_back(static_cast<uint8_t>(10 * x));
      img.rgb.push_back(static_cast<uint8_t>(10 * y));
      img.rgb.push_back(200);
    }
  }
  return img;
}

TEST(Preprocess, LetterboxPadsAndCentres) {
  runtime::DetectorConfig c;
  c.width = 8;
  c.height = 8;
  c.resize = "letterbox";
  const auto img = gradient(4, 2);  // gain min(8/4, 8/2) = 2: content 8x4, 2 rows of padding above and below
  auto p = runtime::preprocess(img, c, false);
  ASSERT_TRUE(p.ok());
  EXPECT_FLOAT_EQ(p->gain_x, 2.f);
  EXPECT_FLOAT_EQ(p->gain_y, 2.f);
  EXPECT_FLOAT_EQ(p->pad_x, 0.f);
  EXPECT_FLOAT_EQ(p->pad_y, 2.f);
  const Tensor& t = p->inputs.at("images");
  ASSERT_EQ(t.shape(), (Shape{1, 3, 8, 8}));
  auto at = [&](int ch, int y, int x) { return t.data<float>()[(ch * 8 + y) * 8 + x]; };
  EXPECT_FLOAT_EQ(at(0, 0, 3), 114.f / 255.f);  // padding
  EXPECT_FLOAT_EQ(at(2, 7, 0), 114.f / 255.f);
  // Output pixel (x=0.5+.., y=2..5) maps to source ((x+0.5)/2-0.5, (y-2+0.5)/2-0.5): x=3 -> 1.25.
  EXPECT_NEAR(at(0, 3, 3), (10.f * 1.25f) / 255.f, 1e-6);
  EXPECT_NEAR(at(2, 4, 5), 200.f / 255.f, 1e-6);
}

TEST(Preprocess, StretchFeedsTargetSizesAsWidthHeight) {
  runtime::DetectorConfig c;
  c.width = 6;
  c.height = 6;
  c.mean[0] = 0.5f;
  c.std[0] = 0.25f;
  const auto img = gradient(3, 5);
  auto p = runtime::preprocess(img, c, true);
  ASSERT_TRUE(p.ok());
  const Tensor& s = p->inputs.at("orig_target_sizes");
  EXPECT_EQ(s.data<int64_t>()[0], 3);
  EXPECT_EQ(s.data<int64_t>()[1], 5);
  const Tensor& t = p->inputs.at("images");
  // Channel 0 normalised: (v/255 - 0.5) / 0.25 at the top-left pixel (source x = -0.25 clamped to 0 -> v = 0).
  EXPECT_NEAR(t.data<float>()[0], (0.f - 0.5f) / 0.25f, 1e-6);
}

TEST(Postprocess, YoloDecodeNmsAndLetterboxInverse) {
  // 3 anchors, 2 classes: anchors 0 and 1 overlap (same class, NMS keeps the higher),
  // anchor 2 is another class; input 8x8 letterboxed from a 4x2 photo (gain 2, pad_y 2).
  Tensor y = Tensor::empty(DType::f32, {1, 6, 3});
  const float v[6][3] = {{4, 4.2f, 2}, {4, 4, 6}, {2, 2, 2}, {2, 2, 2}, {0.9f, 0.8f, 0.1f}, {0.1f, 0.1f, 0.7f}};
  for (int r = 0; r < 6; ++r) {
    for (int a = 0; a < 3; ++a) y.data<float>()[r * 3 + a] = v[r][a];
  }
  runtime::DetectorConfig c;
  c.output = "yolo";
  runtime::Prepared prep;
  prep.gain_x = prep.gain_y = 2.f;
  prep.pad_y = 2.f;
  runtime::Image img = gradient(4, 2);
  auto d = runtime::postprocess({{"output0", y}}, c, prep, img);
  ASSERT_TRUE(d.ok()) << d.error().to_string();
  ASSERT_EQ(d->size(), 2u);
  EXPECT_EQ((*d)[0].label, 0);
  EXPECT_FLOAT_EQ((*d)[0].score, 0.9f);
  // Anchor 0: centre (4, 4) size 2x2 in input pixels -> x 3..5, y 3..5 -> photo x 1.5..2.5, y 0.5..1.5.
  EXPECT_FLOAT_EQ((*d)[0].x0, 1.5f);
  EXPECT_FLOAT_EQ((*d)[0].x1, 2.5f);
  EXPECT_FLOAT_EQ((*d)[0].y0, 0.5f);
  EXPECT_FLOAT_EQ((*d)[0].y1, 1.5f);
  EXPECT_EQ((*d)[1].label, 1);
  EXPECT_FLOAT_EQ((*d)[1].score, 0.7f);
}

TEST(Postprocess, GflDecodesDistributionsPerLevelAndMapsTheStretch) {
  // One level of 2 x 2 cells on an 8 x 8 input (stride 4), 3 classes, 3 bins per side; the
  // photo is 16 x 8, stretched (gain 0.5 across, 1 down).
  Tensor cls = Tensor::empty(DType::f32, {1, 4, 3}), dist = Tensor::empty(DType::f32, {1, 4, 12});
  std::fill(cls.data<float>(), cls.data<float>() + cls.numel(), 0.05f);
  std::fill(dist.data<float>(), dist.data<float>() + dist.numel(), 0.f);
  cls.data<float>()[3 * 3 + 2] = 0.9f;  // cell (1, 1), class 2
  // Sides left, top, right, bottom: all mass on bin 1, 0, 2, 1 -> distances 4, 0, 8, 4 px.
  const int bin[4] = {1, 0, 2, 1};
  for (int side = 0; side < 4; ++side) dist.data<float>()[(3 * 4 + side) * 3 + bin[side]] = 60.f;
  runtime::DetectorConfig c;
  c.output = "gfl";
  c.width = c.height = 8;
  runtime::Prepared prep;
  prep.gain_x = 0.5f;
  auto d = runtime::postprocess({{"scores", cls}, {"boxes", dist}}, c, prep, gradient(16, 8));
  ASSERT_TRUE(d.ok()) << d.error().to_string();
  ASSERT_EQ(d->size(), 1u);
  EXPECT_EQ((*d)[0].label, 2);
  // Centre (6, 6): x 2..14, y 6..10 in input pixels -> photo x 4..28 clamped to 16, y 6..8 clamped.
  EXPECT_NEAR((*d)[0].x0, 4.f, 1e-4);
  EXPECT_NEAR((*d)[0].x1, 16.f, 1e-4);
  EXPECT_NEAR((*d)[0].y0, 6.f, 1e-4);
  EXPECT_NEAR((*d)[0].y1, 8.f, 1e-4);
  // A level without its partner output is an error naming the cell count.
  auto bad = runtime::postprocess({{"scores", cls}}, c, prep, gradient(16, 8));
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("4 cells"), std::string::npos) << bad.error().message;
}

TEST(Postprocess, DeimOutputsAreOnlyThresholded) {
  Tensor labels = Tensor::empty(DType::i64, {1, 3}), boxes = Tensor::empty(DType::f32, {1, 3, 4}), scores = Tensor::empty(DType::f32, {1, 3});
  for (int i = 0; i < 3; ++i) {
    labels.data<int64_t>()[i] = 5 + i;
    scores.data<float>()[i] = 0.9f - 0.4f * static_cast<float>(i);
    for (int k = 0; k < 4; ++k) boxes.data<float>()[i * 4 + k] = static_cast<float>(10 * i + k);
  }
  runtime::DetectorConfig c;
  c.clip_boxes = false;
  auto d = runtime::postprocess({{"labels", labels}, {"boxes", boxes}, {"scores", scores}}, c, {}, gradient(2, 2));
  ASSERT_TRUE(d.ok());
  ASSERT_EQ(d->size(), 2u);  // 0.9 and 0.5 pass 0.25; 0.1 does not
  EXPECT_EQ((*d)[1].label, 6);
  EXPECT_FLOAT_EQ((*d)[1].x0, 10.f);
  EXPECT_FLOAT_EQ((*d)[1].y1, 13.f);
  // By default (clip_boxes) every box is clipped to the 12 x 11 photo.
  c.clip_boxes = true;
  auto clipped = runtime::postprocess({{"labels", labels}, {"boxes", boxes}, {"scores", scores}}, c, {}, gradient(12, 11));
  ASSERT_TRUE(clipped.ok());
  EXPECT_FLOAT_EQ((*clipped)[1].x0, 10.f);
  EXPECT_FLOAT_EQ((*clipped)[1].y0, 11.f);
  EXPECT_FLOAT_EQ((*clipped)[1].x1, 12.f);
  EXPECT_FLOAT_EQ((*clipped)[1].y1, 11.f);
  EXPECT_FLOAT_EQ((*clipped)[0].x1, 2.f);
  auto missing = runtime::postprocess({{"labels", labels}}, c, {}, gradient(2, 2));
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.error().message.find("'boxes'"), std::string::npos);
}

TEST(Postprocess, AnchorsDecodeMediaPipeHeadsInEitherLayout) {
  // A 32 x 32 input, levels {16, 2 per cell} (2 x 2 cells, 8 anchors) and {32, 1} (1 cell).
  // Anchor 5 = cell 2 (x 0, y 1) of level 0, centre (8, 24); regressors (+2, -1, 10, 6) ->
  // centre (10, 23), box 5..15 x 20..26. Logit 2 -> score 0.8808. Anchor 8 (level 1, centre
  // (16, 16)) has logit -3 (0.047): below the threshold.
  runtime::DetectorConfig c;
  c.output = "anchors";
  c.width = c.height = 32;
  c.anchors = {{16, 2}, {32, 1}};
  Tensor joined = Tensor::empty(DType::f32, {1, 9, 7});
  std::fill(joined.data<float>(), joined.data<float>() + joined.numel(), 0.f);
  for (int i = 0; i < 9; ++i) joined.data<float>()[i * 7] = -10.f;
  const float reg[4] = {2, -1, 10, 6};
  joined.data<float>()[5 * 7] = 2.f;
  for (int k = 0; k < 4; ++k) joined.data<float>()[5 * 7 + 1 + k] = reg[k];
  joined.data<float>()[8 * 7] = -3.f;
  runtime::Prepared prep;  // the photo is the input (gain 1)
  auto d = runtime::postprocess({{"out", joined}}, c, prep, gradient(32, 32));
  ASSERT_TRUE(d.ok()) << d.error().to_string();
  ASSERT_EQ(d->size(), 1u);
  EXPECT_EQ((*d)[0].label, 0);
  EXPECT_NEAR((*d)[0].score, 1.f / (1.f + std::exp(-2.f)), 1e-6);
  EXPECT_NEAR((*d)[0].x0, 5.f, 1e-5);
  EXPECT_NEAR((*d)[0].x1, 15.f, 1e-5);
  EXPECT_NEAR((*d)[0].y0, 20.f, 1e-5);
  EXPECT_NEAR((*d)[0].y1, 26.f, 1e-5);
  // The same as per-level score and regressor outputs (BlazeFace's layout).
  Tensor s0 = Tensor::empty(DType::f32, {1, 8, 1}), r0 = Tensor::empty(DType::f32, {1, 8, 6}), s1 = Tensor::empty(DType::f32, {1, 1, 1}),
         r1 = Tensor::empty(DType::f32, {1, 1, 6});
  for (int i = 0; i < 8; ++i) {
    s0.data<float>()[i] = joined.data<float>()[i * 7];
    for (int k = 0; k < 6; ++k) r0.data<float>()[i * 6 + k] = joined.data<float>()[i * 7 + 1 + k];
  }
  s1.data<float>()[0] = -3.f;
  std::fill(r1.data<float>(), r1.data<float>() + 6, 0.f);
  auto split = runtime::postprocess({{"a", r0}, {"b", s1}, {"c", s0}, {"d", r1}}, c, prep, gradient(32, 32));
  ASSERT_TRUE(split.ok()) << split.error().to_string();
  ASSERT_EQ(split->size(), 1u);
  EXPECT_FLOAT_EQ((*split)[0].x0, (*d)[0].x0);
  EXPECT_FLOAT_EQ((*split)[0].y1, (*d)[0].y1);
  // An anchor count the config does not give is an error naming both.
  c.anchors = {{16, 3}};
  auto bad = runtime::postprocess({{"out", joined}}, c, prep, gradient(32, 32));
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("12 anchors"), std::string::npos) << bad.error().message;
}

TEST(Postprocess, DetectionsAreBoxesScoresAndClasses) {
  // CenterNet's decoded output [1, K, 6]: x0, y0, x1, y1 (input pixels), score, class; a
  // 100 x 50 photo stretched to 50 x 50 (gain 0.5 across).
  Tensor t = Tensor::empty(DType::f32, {1, 3, 6});
  const float rows[3][6] = {{10, 10, 20, 30, 0.9f, 2}, {0, 0, 5, 5, 0.1f, 1}, {30, 5, 40, 15, 0.6f, 7}};
  for (int i = 0; i < 3; ++i) std::copy(rows[i], rows[i] + 6, t.data<float>() + i * 6);
  runtime::DetectorConfig c;
  c.output = "detections";
  c.width = c.height = 50;
  runtime::Prepared prep;
  prep.gain_x = 0.5f;
  auto d = runtime::postprocess({{"tower_0/detections", t}, {"heat", Tensor::empty(DType::f32, {1, 4, 4, 80})}}, c, prep, gradient(100, 50));
  ASSERT_TRUE(d.ok()) << d.error().to_string();
  ASSERT_EQ(d->size(), 2u);
  EXPECT_EQ((*d)[0].label, 2);
  EXPECT_FLOAT_EQ((*d)[0].x0, 20.f);
  EXPECT_FLOAT_EQ((*d)[0].x1, 40.f);
  EXPECT_FLOAT_EQ((*d)[0].y1, 30.f);
  EXPECT_EQ((*d)[1].label, 7);
}

TEST(Config, UnknownFieldsAndBadValuesAreNamed) {
  const std::string dir = ::testing::TempDir();
  auto write = [&](const std::string& name, const std::string& text) {
    std::ofstream(dir + name) << text;
    return dir + name;
  };
  auto ok =
      runtime::read_config(write("ok.json", R"({"width": 320, "height": 256, "resize": "letterbox", "output": "yolo", "mean": [0.1, 0.2, 0.3]})"));
  ASSERT_TRUE(ok.ok()) << ok.error().to_string();
  EXPECT_EQ(ok->width, 320);
  EXPECT_FLOAT_EQ(ok->mean[2], 0.3f);
  EXPECT_TRUE(ok->clip_boxes);
  auto unclipped = runtime::read_config(write("nc.json", R"({"clip_boxes": false})"));
  ASSERT_TRUE(unclipped.ok());
  EXPECT_FALSE(unclipped->clip_boxes);
  auto not_bool = runtime::read_config(write("nb.json", R"({"clip_boxes": 1})"));
  ASSERT_FALSE(not_bool.ok());
  EXPECT_NE(not_bool.error().message.find("field 'clip_boxes': must be true or false"), std::string::npos) << not_bool.error().message;
  auto unknown = runtime::read_config(write("u.json", R"({"widht": 320})"));
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.error().message.find("'widht'"), std::string::npos);
  auto bad = runtime::read_config(write("b.json", R"({"resize": "crop"})"));
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("resize"), std::string::npos);
  auto mean = runtime::read_config(write("m.json", R"({"mean": [1, 2]})"));
  ASSERT_FALSE(mean.ok());
  auto notjson = runtime::read_config(write("n.json", "{"));
  ASSERT_FALSE(notjson.ok());
  EXPECT_NE(notjson.error().message.find("n.json"), std::string::npos);
  // Values a config cannot mean: each an error naming the field (1e30 as an integer was
  // undefined behaviour in the conversion; NaN cannot be written in JSON, 1e999 is a parse error).
  for (const auto& [text, field] : std::vector<std::pair<std::string, std::string>>{{R"({"width": 1e30})", "width"},
                                                                                    {R"({"max_detections": -1e300})", "max_detections"},
                                                                                    {R"({"width": 64.5})", "width"},
                                                                                    {R"({"score_threshold": 1.5})", "score_threshold"},
                                                                                    {R"({"nms_iou": -0.1})", "nms_iou"},
                                                                                    {R"({"scale": 1e999})", "not valid JSON"},
                                                                                    {R"({"mean": [0, 0, "x"]})", "mean"},
                                                                                    {R"({"input": 3})", "input"},
                                                                                    {R"({"max_detections": 0})", "max_detections"}}) {
    auto r = runtime::read_config(write("v.json", text));
    ASSERT_FALSE(r.ok()) << text;
    EXPECT_NE(r.error().message.find(field), std::string::npos) << text << ": " << r.error().message;
  }
}

TEST(Images, PngRoundTripAndBadFiles) {
  const std::string dir = ::testing::TempDir();
  runtime::Image img = gradient(5, 3);
  ASSERT_TRUE(runtime::write_png(dir + "g.png", img).ok());
  auto back = runtime::load_image(dir + "g.png");
  ASSERT_TRUE(back.ok()) << back.error().to_string();
  EXPECT_EQ(back->width, 5);
  EXPECT_EQ(back->height, 3);
  EXPECT_EQ(back->rgb, img.rgb);
  std::ofstream(dir + "junk.png") << "not an image";
  auto junk = runtime::load_image(dir + "junk.png");
  ASSERT_FALSE(junk.ok());
  EXPECT_NE(junk.error().message.find("junk.png"), std::string::npos);
}

// A drawn detection is what a person looks for: the box in its class's colour at the style's
// line width, a filled label of that colour above it holding text in a contrasting ink; a box
// at the top edge gets its label inside; the style grows with the image.
TEST(Images, DrawnDetectionsAreLabelledBoxes) {
  runtime::Image img;
  img.width = 320;
  img.height = 240;
  img.rgb.assign(320 * 240 * 3, 0);
  const runtime::Detection person{0, 0.87f, 50.f, 60.f, 150.f, 160.f};
  const runtime::Detection far{1000, 0.5f, 200.f, 0.f, 300.f, 100.f};
  runtime::draw_detections(img, {person, far});
  EXPECT_EQ(runtime::detection_label(person), "person 0.87");
  EXPECT_EQ(runtime::detection_label(far), "class 1000 0.50");
  EXPECT_EQ(runtime::detection_label(person, {}), "class 0 0.87");  // run --classes ids
  const runtime::DrawStyle st = runtime::draw_style(img.width, img.height);
  EXPECT_EQ(st.line, 2);
  EXPECT_GT(runtime::draw_style(1920, 1080).line, st.line);
  auto at = [&](int64_t x, int64_t y) {
    const uint8_t* p = &img.rgb[static_cast<size_t>((y * img.width + x) * 3)];
    return std::array<uint8_t, 3>{p[0], p[1], p[2]};
  };
  const auto red = runtime::class_colour(0), black = std::array<uint8_t, 3>{0, 0, 0}, white = std::array<uint8_t, 3>{255, 255, 255};
  EXPECT_NE(red, runtime::class_colour(1));
  for (int64_t t = 0; t < st.line; ++t) {
    EXPECT_EQ(at(100, 60 + t), red) << t;   // top edge
    EXPECT_EQ(at(100, 159 - t), red) << t;  // bottom edge
    EXPECT_EQ(at(50 + t, 120), red) << t;   // left edge
  }
  EXPECT_EQ(at(100, 60 + st.line), black);  // inside the box: untouched
  EXPECT_EQ(at(50 + st.line, 120), black);
  // The label above the box: its colour, and white ink (the red is dark).
  int64_t fill = 0, ink = 0;
  for (int64_t y = 0; y < 60; ++y) {
    for (int64_t x = 50; x < 150; ++x) {
      fill += at(x, y) == red;
      ink += at(x, y) == white;
    }
  }
  EXPECT_GT(fill, 300);
  EXPECT_GT(ink, 60);
  // The box touching the top: its label inside, under the top edge.
  int64_t inside = 0;
  for (int64_t y = st.line; y < 40; ++y)
    for (int64_t x = 200; x < 300; ++x) inside += at(x, y) == runtime::class_colour(1000);
  EXPECT_GT(inside, 300);
}

}  // namespace
}  // namespace rkd
