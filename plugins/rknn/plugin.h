// The two custom operators' records (rknn_abi.h) with their callbacks (plugin.cc), for the
// plugin libraries' entry points.
#pragma once

#include "plugins/rknn/rknn_abi.h"

namespace rkd::rknn_plugin {

rknn_custom_op* msdeform_attn_op();  // cstMSDeformAttn
rknn_custom_op* grid_sample_op();    // cstGridSample
// The calling thread's last callback error ("cstGridSample: grid: ..."), "" when none.
const char* last_error();

}  // namespace rkd::rknn_plugin
