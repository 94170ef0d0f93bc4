// librkcst_grid_sample.so: the vendor runtime's plugin entry point for cstGridSample.
#include "plugins/rknn/plugin.h"
#include "plugins/rknn/rkdeploy_rknn_ops.h"

extern "C" {
__attribute__((visibility("default"))) rknn_custom_op* get_rknn_custom_op() { return rkd::rknn_plugin::grid_sample_op(); }
__attribute__((visibility("default"))) rknn_custom_op* rkd_rknn_grid_sample_op(void) { return rkd::rknn_plugin::grid_sample_op(); }
__attribute__((visibility("default"))) const char* rkd_rknn_last_error(void) { return rkd::rknn_plugin::last_error(); }
}
