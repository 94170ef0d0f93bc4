/* Detects objects in a photo with a model compiled by `rkdeploy compile MODEL -o MODEL.rkd`,
 * through rkdeploy's embeddable runtime.
 *   detect MODEL.rkd PHOTO [--device [NODE]] [--cores N] [--dump DIR]
 * --device runs the NPU tasks on the board's NPU (default: the simulator); --dump writes each
 * output's bytes to DIR/NAME.bin, NAME the output's name with every character but letters,
 * digits, '-', '_' and inner '.' made '_' (ONNX names hold '/': nothing is written outside DIR).
 * Prints one line per detection: class, score, box in pixels. */
#include <rkdeploy/rkdeploy.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int fail(const char* what, rkd_model* model) {
  fprintf(stderr, "detect: %s: %s\n", what, rkd_last_error());
  rkd_close(model);
  return 1;
}

static int dump_outputs(const rkd_model* model, const char* dir) {
  for (size_t i = 0; i < rkd_output_count(model); ++i) {
    rkd_tensor_info info;
    const void* data;
    size_t bytes;
    if (rkd_output_info(model, i, &info) != RKD_OK || rkd_output(model, i, &data, &bytes) != RKD_OK) return 1;
    char name[256], path[4096];
    size_t n = 0;
    for (const char* c = info.name; *c && n + 1 < sizeof name; ++c, ++n) {
      const int keep =
          (*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') || *c == '-' || *c == '_' || (*c == '.' && n > 0);
      name[n] = keep ? *c : '_';
    }
    name[n] = 0;
    snprintf(path, sizeof path, "%s/%s.bin", dir, n ? name : "_");
    FILE* f = fopen(path, "wb");
    if (!f || fwrite(data, 1, bytes, f) != bytes || fclose(f) != 0) {
      fprintf(stderr, "detect: cannot write %s\n", path);
      return 1;
    }
  }
  return 0;
}

int main(int argc, char** argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: detect MODEL.rkd PHOTO [--device [NODE]] [--cores N] [--dump DIR]\n");
    return 2;
  }
  rkd_options options;
  rkd_options_init(&options);
  const char* dump = NULL;
  for (int i = 3; i < argc; ++i) {
    if (strcmp(argv[i], "--device") == 0) {
      options.backend = RKD_BACKEND_DEVICE;
      if (i + 1 < argc && argv[i + 1][0] != '-') options.device = argv[++i];
    } else if (strcmp(argv[i], "--cores") == 0 && i + 1 < argc) {
      options.cores = atoi(argv[++i]);
    } else if (strcmp(argv[i], "--dump") == 0 && i + 1 < argc) {
      dump = argv[++i];
    } else {
      fprintf(stderr, "detect: unknown option %s\n", argv[i]);
      return 2;
    }
  }
  rkd_model* model = NULL;
  if (rkd_open(argv[1], &options, &model) != RKD_OK) return fail("open", NULL);
  if (rkd_set_image_file(model, argv[2]) != RKD_OK) return fail("photo", model);
  if (rkd_run(model) != RKD_OK) return fail("run", model);
  if (dump && dump_outputs(model, dump) != 0) return fail("dump", model);
  size_t count = 0;
  rkd_detection dets[100];
  if (rkd_detections(model, dets, 100, &count) != RKD_OK) return fail("detections", model);
  for (size_t i = 0; i < count && i < 100; ++i) {
    const char* name = rkd_class_name(dets[i].label);
    printf("%-14s %.3f  [%.1f, %.1f, %.1f, %.1f]\n", name ? name : "?", dets[i].score, dets[i].x0, dets[i].y0, dets[i].x1, dets[i].y1);
  }
  printf("%zu detection(s)\n", count);
  rkd_close(model);
  return 0;
}
