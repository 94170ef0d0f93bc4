// librkcst_msdeform_attn.so: the vendor runtime's plugin entry point for cstMSDeformAttn.
#include "plugins/rknn/plugin.h"
#include "plugins/rknn/rkdeploy_rknn_ops.h"

extern "C" {
__attribute__((visibility("default"))) rknn_custom_op* get_rknn_custom_op() { return rkd::rknn_plugin::msdeform_attn_op(); }
__attribute__((visibility("default"))) rknn_custom_op* rkd_rknn_msdeform_attn_op(void) { return rkd::rknn_plugin::msdeform_attn_op(); }
__attribute__((visibility("default"))) const char* rkd_rknn_last_error(void) { return rkd::rknn_plugin::last_error(); }
}
