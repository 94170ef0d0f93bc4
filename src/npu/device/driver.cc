#include "npu/device/driver.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "npu/device/rknpu.h"
#include "npu/device/rocket.h"
#include "npu/device/rocket_uapi.h"

namespace rkd::npu::device {

namespace {
// "ENOENT" (glibc's name), or the number where it has none.
std::string errno_name(int e) {
  const char* n = strerrorname_np(e);
  return n ? n : "errno " + std::to_string(e);
}
}  // namespace

std::string hex(uint64_t v) {
  char b[24];
  std::snprintf(b, sizeof b, "0x%llx", static_cast<unsigned long long>(v));
  return b;
}

int ioctl_errno(int fd, unsigned long request, void* arg) {
  int r;
  do {
    r = ::ioctl(fd, request, arg);
  } while (r < 0 && (errno == EINTR || errno == EAGAIN));
  return r < 0 ? errno : 0;
}

std::string errno_meaning(const std::string& call, int err) {
  std::string what = errno_name(err) + " (" + std::strerror(err) + ")";
  std::string means;
  if (call == "open") {
    if (err == ENOENT || err == ENXIO || err == ENODEV)
      means =
          "no NPU device node: a mainline kernel >= 6.18 with the rocket driver (CONFIG_DRM_ACCEL_ROCKET, /dev/accel/accel0) or a vendor "
          "kernel with the rknpu driver (/dev/dri/card1 or similar) is needed (docs/device.md), or give --device PATH";
    else if (err == EACCES || err == EPERM)
      means = "permission denied: add the user to the node's group (ls -l the node; usually 'render') or adjust the udev rule (docs/device.md)";
  } else if (call == "DRM_IOCTL_ROCKET_PREP_BO") {
    if (err == ETIMEDOUT || err == EBUSY)
      means =
          "the NPU did not finish the job that writes this buffer in time (a job that never reached a core: see dmesg for 'NPU job "
          "timed out' and resets)";
    else if (err == ENOENT) means = "no buffer object with this handle in this file";
    else if (err == EINVAL) means = "the kernel rejected the request (its reserved field must be zero)";
  } else if (call == "DRM_IOCTL_ROCKET_FINI_BO") {
    if (err == ENOENT) means = "no buffer object with this handle in this file";
    else if (err == EINVAL) means = "the kernel rejected the request (its reserved field must be zero)";
  } else if (call == "DRM_IOCTL_ROCKET_SUBMIT") {
    if (err == EINVAL) means = "the kernel rejected the submission (a job struct size below 40 bytes or a non-zero reserved field)";
    else if (err == EFAULT) means = "the kernel could not read the job array";
  } else if (call == "DRM_IOCTL_ROCKET_CREATE_BO") {
    if (err == ENOMEM) means = "the kernel could not allocate or map the buffer (out of memory or NPU address space)";
    else if (err == EINVAL) means = "the kernel rejected the buffer size";
  } else if (call == "DRM_IOCTL_RKNPU_SUBMIT") {
    if (err == ETIMEDOUT) means = "the NPU did not finish the job in time: the driver reset the core (see dmesg for 'job timeout' and 'soft reset')";
    else if (err == EINVAL) means = "the driver rejected the submission (a task range outside the task buffer, or no tasks)";
    else if (err == EFAULT) means = "the driver could not read the submission";
  } else if (call == "DRM_IOCTL_RKNPU_MEM_CREATE") {
    if (err == ENOMEM) means = "the driver could not allocate or map the buffer (out of memory or NPU address space)";
    else if (err == EINVAL) means = "the driver rejected the buffer size or flags";
  } else if (call == "DRM_IOCTL_RKNPU_MEM_MAP" || call == "DRM_IOCTL_RKNPU_MEM_SYNC" || call == "DRM_IOCTL_RKNPU_MEM_DESTROY") {
    if (err == EINVAL) means = "the driver knows no such buffer object in this file, or the range lies outside it";
  } else if (call == "DRM_IOCTL_VERSION") {
    if (err == ENOTTY || err == EINVAL) means = "not a DRM device node (the vendor's misc device /dev/rknpu is not supported: use its /dev/dri node)";
  }
  if (err == ENOTTY && means.empty()) means = "the file is not a device of this driver (another driver, or not a device node)";
  return what + (means.empty() ? "" : ": " + means);
}

Result<std::string> drm_driver_name(int fd, const std::string& path) {
  char name[64] = {};
  rkd_drm_version v{};
  v.name = name;
  v.name_len = sizeof name - 1;
  if (const int e = ioctl_errno(fd, RKD_DRM_IOCTL_VERSION, &v)) {
    return invalid("NPU device " + path + ": DRM_IOCTL_VERSION: " + errno_meaning("DRM_IOCTL_VERSION", e));
  }
  return std::string(name, std::min(v.name_len, sizeof name - 1));
}

Result<std::unique_ptr<Driver>> open_driver(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) {
    const int e = errno;
    return invalid("NPU device " + path + ": open: " + errno_meaning("open", e));
  }
  auto name = drm_driver_name(fd, path);
  ::close(fd);
  if (!name.ok()) return name.error();
  if (*name == "rocket") {
    RKD_ASSIGN(auto r, Rocket::open(path));
    return std::unique_ptr<Driver>(std::move(r));
  }
  if (*name == "rknpu") {
    RKD_ASSIGN(auto r, Rknpu::open(path));
    return std::unique_ptr<Driver>(std::move(r));
  }
  return unsupported("NPU device " + path + ": its driver is '" + *name + "'; rkdeploy speaks to 'rocket' (mainline) and 'rknpu' (vendor kernels)");
}

std::string find_default_device() {
  struct stat st {};
  if (::stat(kDefaultDevice, &st) == 0) return kDefaultDevice;
  std::vector<std::string> cards;
  if (DIR* d = ::opendir("/dev/dri")) {
    while (const dirent* e = ::readdir(d))
      if (std::strncmp(e->d_name, "card", 4) == 0) cards.push_back(std::string("/dev/dri/") + e->d_name);
    ::closedir(d);
  }
  std::sort(cards.begin(), cards.end());
  for (const std::string& c : cards) {
    const int fd = ::open(c.c_str(), O_RDWR | O_CLOEXEC);
    if (fd < 0) continue;
    auto name = drm_driver_name(fd, c);
    ::close(fd);
    if (name.ok() && *name == "rknpu") return c;
  }
  return kDefaultDevice;
}

}  // namespace rkd::npu::device
