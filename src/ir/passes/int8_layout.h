// The layout of int8 activations on the CPU executor.
#pragma once

#include "ir/pass.h"

namespace rkd::ir {

// int8-channels-last : the CPU QLinearConvs take and give [N, H, W, C]
// (attributes rkd_input_channels_last, rkd_output_channels_last), Transposes inserted around
// them, moved below layout-free int8 ops (Identity, QLinearAdd, QLinearLut) and cancelled in
// pairs; a Transpose left next to a convolution goes into the convolution's own conversion.
// Chains of int8 convolutions convert layouts only at their ends. Outputs are unchanged bit
// for bit.
Pass int8_channels_last_pass();

}  // namespace rkd::ir
