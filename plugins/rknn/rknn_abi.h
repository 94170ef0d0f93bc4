/* The part of the vendor runtime's C interface (RKNN runtime 2.x, librknnrt) a CPU custom
 * operator plugin uses: the tensor attribute and memory records (rknn_api.h) and the custom
 * operator records and calls (rknn_custom_op.h). Declared here from the public headers' facts -
 * field order, types, enumerator values - so that rkdeploy builds without the vendor's SDK;
 * the names are the vendor's, so that the layouts can be compared line by line
 * (docs/rknn-custom-op.md). Only the 64-bit layout is declared (the boards' AArch64 and
 * x86-64 test hosts): the vendor's 32-bit ARM build narrows its context types. */
#ifndef RKDEPLOY_RKNN_ABI_H
#define RKDEPLOY_RKNN_ABI_H
#include <stdint.h>
#ifdef __cplusplus
extern "C" {
#endif

#if defined(__arm__)
#error "rkdeploy's RKNN plugin declares the 64-bit ABI only"
#endif

#define RKNN_MAX_DIMS 16
#define RKNN_MAX_NAME_LEN 256

typedef enum _rknn_tensor_type {
  RKNN_TENSOR_FLOAT32 = 0,
  RKNN_TENSOR_FLOAT16,
  RKNN_TENSOR_INT8,
  RKNN_TENSOR_UINT8,
  RKNN_TENSOR_INT16,
  RKNN_TENSOR_UINT16,
  RKNN_TENSOR_INT32,
  RKNN_TENSOR_UINT32,
  RKNN_TENSOR_INT64,
  RKNN_TENSOR_BOOL,
  RKNN_TENSOR_INT4,
  RKNN_TENSOR_BFLOAT16,
  RKNN_TENSOR_TYPE_MAX
} rknn_tensor_type;

typedef enum _rknn_tensor_qnt_type {
  RKNN_TENSOR_QNT_NONE = 0,
  RKNN_TENSOR_QNT_DFP,
  RKNN_TENSOR_QNT_AFFINE_ASYMMETRIC,
  RKNN_TENSOR_QNT_MAX
} rknn_tensor_qnt_type;

typedef enum _rknn_tensor_format {
  RKNN_TENSOR_NCHW = 0,
  RKNN_TENSOR_NHWC,
  RKNN_TENSOR_NC1HWC2,
  RKNN_TENSOR_UNDEFINED,
  RKNN_TENSOR_FORMAT_MAX
} rknn_tensor_format;

typedef struct _rknn_tensor_attr {
  uint32_t index;
  uint32_t n_dims;
  uint32_t dims[RKNN_MAX_DIMS];
  char name[RKNN_MAX_NAME_LEN];
  uint32_t n_elems;
  uint32_t size; /* bytes */
  rknn_tensor_format fmt;
  rknn_tensor_type type;
  rknn_tensor_qnt_type qnt_type;
  int8_t fl;
  int32_t zp;
  float scale;
  uint32_t w_stride;
  uint32_t size_with_stride;
  uint8_t pass_through;
  uint32_t h_stride;
} rknn_tensor_attr;

typedef struct _rknn_tensor_memory {
  void* virt_addr;
  uint64_t phys_addr;
  int32_t fd;
  int32_t offset; /* of the tensor's bytes from virt_addr */
  uint32_t size;
  uint32_t flags;
  void* priv_data;
} rknn_tensor_mem;

typedef enum _rknn_target_type { RKNN_TARGET_TYPE_CPU = 1, RKNN_TARGET_TYPE_GPU = 2, RKNN_TARGET_TYPE_MAX } rknn_target_type;

typedef uint64_t rknn_custom_op_interal_context; /* the vendor's spelling */

typedef struct _rknn_gpu_op_context {
  void* cl_context;
  void* cl_command_queue;
  void* cl_kernel;
} rknn_gpu_op_context;

typedef struct _rknn_custom_op_context {
  rknn_target_type target;
  rknn_custom_op_interal_context internal_ctx;
  rknn_gpu_op_context gpu_ctx;
  void* priv_data; /* the operator's own state */
} rknn_custom_op_context;

typedef struct _rknn_custom_op_tensor {
  rknn_tensor_attr attr;
  rknn_tensor_mem mem;
} rknn_custom_op_tensor;

typedef struct _rknn_custom_op_attr {
  char name[RKNN_MAX_NAME_LEN];
  rknn_tensor_type dtype; /* of each element of data */
  uint32_t n_elems;
  void* data;
} rknn_custom_op_attr;

typedef int (*rknn_custom_op_callback)(rknn_custom_op_context* op_ctx, rknn_custom_op_tensor* inputs, uint32_t n_inputs,
                                       rknn_custom_op_tensor* outputs, uint32_t n_outputs);

typedef struct _rknn_custom_op {
  uint32_t version;
  rknn_target_type target;
  char op_type[RKNN_MAX_NAME_LEN];
  char cl_kernel_name[RKNN_MAX_NAME_LEN];
  char* cl_kernel_source;
  uint64_t cl_source_size;
  char cl_build_options[RKNN_MAX_NAME_LEN];
  rknn_custom_op_callback init;           /* optional */
  rknn_custom_op_callback prepare;        /* optional */
  rknn_custom_op_callback compute;        /* required */
  rknn_custom_op_callback compute_native; /* optional, "not supported now" by the runtime */
  int (*destroy)(rknn_custom_op_context* op_ctx);
} rknn_custom_op;

/* Provided by the runtime: an attribute of the node the context runs. */
void rknn_custom_op_get_op_attr(rknn_custom_op_context* op_ctx, const char* attr_name, rknn_custom_op_attr* op_attr);

#ifdef __cplusplus
}
#endif
#endif /* RKDEPLOY_RKNN_ABI_H */
