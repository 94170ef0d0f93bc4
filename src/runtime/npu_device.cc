#include "runtime/npu_device.h"

#include "npu/memory.h"

namespace rkd::runtime {

Result<std::shared_ptr<NpuDevice>> NpuDevice::open(const NpuDeviceOptions& o) {
  const auto& arch = npu::arch::kRk3588;
  if (o.cores < 1 || o.cores > arch.cores)
    return invalid("--cores " + std::to_string(o.cores) + ": the " + arch.name + " has 1 to " + std::to_string(arch.cores) + " NPU cores");
  auto d = std::shared_ptr<NpuDevice>(new NpuDevice());
  d->opt_ = o;
  if (d->opt_.path.empty()) d->opt_.path = npu::device::find_default_device();
  RKD_ASSIGN(d->driver_, npu::device::open_driver(d->opt_.path));
  return d;
}

uint32_t NpuDevice::base() const { return arena_ ? static_cast<uint32_t>(arena_->dma_address) : npu::DeviceMemory::kDefaultBase; }

Status NpuDevice::make_arena(size_t bytes) {
  if (arena_ && arena_->size >= bytes) return {};
  if (bytes > 0xffff0000u)
    return invalid("the NPU nodes need " + std::to_string(bytes) + " bytes of device memory: more than one buffer object holds");
  if (arena_) RKD_TRY(driver_->destroy_bo(*arena_));
  arena_.reset();
  const uint32_t size = static_cast<uint32_t>((bytes + 65535) / 65536 * 65536);
  RKD_ASSIGN(npu::device::Bo b, driver_->create_bo(size));
  arena_ = b;
  return {};
}

Result<npu::device::Bo> NpuDevice::token() { return driver_->create_bo(4096); }

}  // namespace rkd::runtime
