/* rkdeploy's embeddable runtime (librkdeploy_rt): runs a model compiled by
 * `rkdeploy compile MODEL -o MODEL.rkd` - its NPU tasks on the NPU simulator or on a board's
 * NPU, the rest of its graph on the CPU - from a C or C++ application. docs/runtime-api.md has
 * the walk-through; this header is the contract.
 *
 * Conventions:
 *  - Every call returns an rkd_status; RKD_OK is 0. On any other status, rkd_last_error()
 *    gives a message naming the cause (the file, tensor, index or device) for the calling
 *    thread, valid until that thread's next call into this library.
 *  - Calls on one model are serialised: a thread that calls while another thread's call on
 *    the same model is running waits for it (rkd_close() excepted: no call may be running).
 *    Writing into rkd_input_buffer()'s memory is the caller's to order with rkd_run().
 *    Different models may run concurrently.
 *  - Indices count from 0. Tensors are dense and row-major, of the dtype and dims their info
 *    gives.
 *  - Pointers the library returns (names, input buffers, outputs) stay valid until
 *    rkd_close() of their model; an output's contents until the model's next rkd_run().
 *  - The ABI: structs the caller passes in begin with a struct_size field, so a library
 *    newer than the header still reads an older caller's struct; RKD_API_VERSION grows
 *    with each added call or field, and rkd_api_version() tells which the library has. */
#ifndef RKDEPLOY_RKDEPLOY_H
#define RKDEPLOY_RKDEPLOY_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define RKD_API_VERSION 2
#define RKD_MAX_DIMS 8

#if defined(__GNUC__)
#define RKD_EXPORT __attribute__((visibility("default")))
#else
#define RKD_EXPORT
#endif

typedef enum rkd_status {
  RKD_OK = 0,
  RKD_ERROR_INVALID = 1,     /* a malformed file, a wrong argument, an input of another size */
  RKD_ERROR_UNSUPPORTED = 2, /* well-formed, but this build or device cannot run it */
  RKD_ERROR_IO = 3,          /* the file system, the OS or the device driver failed */
  RKD_ERROR_INTERNAL = 4     /* a broken invariant inside rkdeploy (a bug: please report it) */
} rkd_status;

typedef enum rkd_backend {
  RKD_BACKEND_SIM = 0,   /* the NPU simulator on this CPU (bit-accurate; no board needed) */
  RKD_BACKEND_DEVICE = 1 /* the board's NPU through its kernel driver */
} rkd_backend;

typedef enum rkd_dtype {
  RKD_FLOAT32 = 0,
  RKD_FLOAT16 = 1,
  RKD_BFLOAT16 = 2,
  RKD_INT8 = 3,
  RKD_UINT8 = 4,
  RKD_INT16 = 5,
  RKD_INT32 = 6,
  RKD_INT64 = 7,
  RKD_BOOL = 8
} rkd_dtype;

typedef struct rkd_options {
  size_t struct_size;  /* sizeof(rkd_options); rkd_options_init() sets it */
  rkd_backend backend; /* RKD_BACKEND_SIM by default */
  const char* device;  /* the device node for RKD_BACKEND_DEVICE; NULL: /dev/accel/accel0 */
  int cores;           /* NPU cores a convolution's tasks are split over; 0: all (3 on RK3588) */
  int threads;         /* CPU threads for the graph's CPU part; 0: every core; at most 1024 */
  /* API version 2: */
  int allow_nonfinite; /* non-zero: NaN and infinities in float inputs pass (IEEE semantics in
                          every kernel); 0: rkd_run() refuses them, naming the input and element */
} rkd_options;

typedef struct rkd_tensor_info {
  const char* name;
  rkd_dtype dtype;
  int rank;
  int64_t dims[RKD_MAX_DIMS];
  size_t bytes; /* element size x every dim */
} rkd_tensor_info;

/* One object a detector found, in the photo's pixels. */
typedef struct rkd_detection {
  int64_t label; /* class index; rkd_class_name() names the COCO ones */
  float score;
  float x0, y0, x1, y1;
} rkd_detection;

typedef struct rkd_model rkd_model;

RKD_EXPORT int rkd_api_version(void);
/* rkdeploy's version ("0.1.0"). */
RKD_EXPORT const char* rkd_version(void);
RKD_EXPORT const char* rkd_last_error(void);
RKD_EXPORT const char* rkd_status_name(rkd_status status);

RKD_EXPORT void rkd_options_init(rkd_options* options);
/* Loads an artifact: every field checked (a damaged or foreign file is refused naming the
 * field), the NPU tasks prepared on the back end. options may be NULL (the defaults). On
 * failure *model is NULL. */
RKD_EXPORT rkd_status rkd_open(const char* path, const rkd_options* options, rkd_model** model);
/* NULL is accepted. */
RKD_EXPORT void rkd_close(rkd_model* model);

RKD_EXPORT size_t rkd_input_count(const rkd_model* model);
RKD_EXPORT size_t rkd_output_count(const rkd_model* model);
RKD_EXPORT rkd_status rkd_input_info(const rkd_model* model, size_t index, rkd_tensor_info* info);
RKD_EXPORT rkd_status rkd_output_info(const rkd_model* model, size_t index, rkd_tensor_info* info);
/* The index of the input or output of that name. */
RKD_EXPORT rkd_status rkd_find_input(const rkd_model* model, const char* name, size_t* index);
RKD_EXPORT rkd_status rkd_find_output(const rkd_model* model, const char* name, size_t* index);

/* The input's buffer, info.bytes long, which rkd_run() reads in place (no copy): write the
 * input there. Its contents stay between runs. */
RKD_EXPORT rkd_status rkd_input_buffer(rkd_model* model, size_t index, void** data);
/* Copies `bytes` (exactly the input's info.bytes) into the input's buffer. */
RKD_EXPORT rkd_status rkd_set_input(rkd_model* model, size_t index, const void* data, size_t bytes);
/* Runs the model on its input buffers. The inputs are checked as `rkdeploy run` checks them:
 * a detector's orig_target_sizes holds positive sizes, float inputs are finite (unless
 * options.allow_nonfinite). */
RKD_EXPORT rkd_status rkd_run(rkd_model* model);
/* The output of the last rkd_run(): its bytes in place (info.bytes of them). */
RKD_EXPORT rkd_status rkd_output(const rkd_model* model, size_t index, const void** data, size_t* bytes);

/* Detectors: a photo fed and the outputs decoded by the detector config the artifact carries
 * (`rkdeploy compile --config`; without one, the defaults for the model's outputs:
 * docs/detector-config.md). rgb: width x height pixels of 3 bytes, row by row. */
RKD_EXPORT rkd_status rkd_set_image(rkd_model* model, const uint8_t* rgb, int width, int height);
/* The same from a PNG, JPEG or BMP file. */
RKD_EXPORT rkd_status rkd_set_image_file(rkd_model* model, const char* path);
/* The detections of the last rkd_run() after rkd_set_image*, best first: up to `capacity` of
 * them written to `out`, how many there are in all to *count. */
RKD_EXPORT rkd_status rkd_detections(const rkd_model* model, rkd_detection* out, size_t capacity, size_t* count);
/* The COCO name of a label ("person"), or NULL past the 80 classes. */
RKD_EXPORT const char* rkd_class_name(int64_t label);

#ifdef __cplusplus
}
#endif

#endif /* RKDEPLOY_RKDEPLOY_H */
