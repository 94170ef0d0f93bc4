// Register commands from where they are kept: a regcmd file, a capture directory written by
// tools/intercept (index.json: docs/device.md), or a `rkdeploy compile` directory
// (manifest.json: docs/npu.md), as tasks in order; and the per-layer register summary the
// vendor captures are recorded in (tests/data/npu/vendor_tiling.json's fields).
#pragma once

#include <string>
#include <vector>

#include "core/result.h"
#include "npu/regcmd/regcmd.h"

namespace rkd::npu::regcmd {

struct SourceTask {
  std::string name;  // "s0003/j01-t0002.regcmd", a compile directory's file, or "FILE#N"
  std::vector<uint64_t> words;
};
// A capture directory: every submit's jobs' tasks in submission order; a compile directory:
// every "regcmd" file its manifest names, in the manifest's order; anything else: a regcmd file
// (read_regcmd_file), split into its tasks. Errors name the file and the entry.
Result<std::vector<SourceTask>> read_tasks(const std::string& path);
// The tasks' words one after the other (each task keeps its own trailer): what decode() reads.
std::vector<uint64_t> concatenated(const std::vector<SourceTask>& tasks);

// Consecutive convolution tasks with the same weights (CNA.DCOMP_ADDR0) and geometry as one
// layer: {"tasks": "first-last", "C", "W", "K", "stride", "pad", "depthwise", "weight_bytes",
// "data_banks", "weight_banks", "in_rows": [...], "out_rows": [...]} from the registers (C =
// DATAIN_CHANNEL, W = DATAIN_WIDTH, K = WEIGHT_WIDTH, stride CONV_X_STRIDE, pad PAD_TOP,
// depthwise CONV_MODE 3, banks CBUF_CON0, rows DATAIN_HEIGHT and DPU DATA_CUBE_HEIGHT + 1).
// Other tasks are counted, not summarised.
std::string summary_json(const std::vector<DecodedTask>& tasks, const std::string& source);

}  // namespace rkd::npu::regcmd
