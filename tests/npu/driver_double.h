// What the LD_PRELOAD driver doubles (fake_rocket, fake_rknpu) share: the libc calls they stand
// in for, a file's device address window (a memfd the production code mmaps buffer objects from,
// reserved in the double's address space so the simulator reads the same bytes), the ranges an
// access must lie in (an IOMMU's view) and the simulator knobs from the environment.
#pragma once

#include <dlfcn.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "npu/device/rocket_uapi.h"
#include "npu/preload_open.h"
#include "npu/sim/sim.h"

namespace rkd::test::driver_double {

template <typename F>
F real(const char* name) {
  return reinterpret_cast<F>(dlsym(RTLD_NEXT, name));
}

inline std::string env(const char* name, const char* def = "") {
  const char* v = std::getenv(name);
  return v ? v : def;
}

// The buffer objects' device address ranges, replaced whole when one is created or destroyed and
// read without a lock by the simulator's mapped-range check.
class AddressRanges {
 public:
  using List = std::vector<std::pair<uint64_t, uint64_t>>;
  void publish(List l) { std::atomic_store(&ranges_, std::shared_ptr<const List>(std::make_shared<List>(std::move(l)))); }
  bool contains(uint64_t lo, uint64_t hi) const {
    auto r = std::atomic_load(&ranges_);
    for (const auto& [a, b] : *r)
      if (lo >= a && hi <= b) return true;
    return false;
  }
  // For npu::DeviceMemory::set_mapped_check (ctx: this).
  static bool check(const void* ctx, uint64_t lo, uint64_t hi) { return static_cast<const AddressRanges*>(ctx)->contains(lo, hi); }

 private:
  std::shared_ptr<const List> ranges_ = std::make_shared<List>();
};

// A memfd of `size` bytes (`name` shows in /proc/PID/fd) and a reserved, inaccessible mapping of
// that size; false when either fails.
inline bool open_window(const char* name, uint64_t size, int& fd, uint8_t*& window) {
  fd = static_cast<int>(syscall(SYS_memfd_create, name, 0));
  if (fd < 0 || ftruncate(fd, static_cast<off_t>(size)) != 0) return false;
  void* w =
      real<void* (*)(void*, size_t, int, int, int, off_t)>("mmap")(nullptr, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (w == MAP_FAILED) return false;
  window = static_cast<uint8_t*>(w);
  return true;
}
// Bytes [off, off + size) of the memfd shared at the same offset of the window, zeroed (fresh
// pages, as the kernels' buffers are); false when the mapping fails.
inline bool map_into_window(int fd, uint8_t* window, uint64_t off, uint64_t size) {
  void* m = real<void* (*)(void*, size_t, int, int, int, off_t)>("mmap")(window + off, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd,
                                                                         static_cast<off_t>(off));
  if (m == MAP_FAILED) return false;
  std::memset(m, 0, size);
  return true;
}
inline void unmap_from_window(uint8_t* window, uint64_t off, uint64_t size) {
  real<void* (*)(void*, size_t, int, int, int, off_t)>("mmap")(window + off, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE,
                                                               -1, 0);
}
inline void close_window(uint8_t* window, uint64_t size) { real<int (*)(void*, size_t)>("munmap")(window, size); }

// Simulator knobs NAME=VALUE;... from the environment variable `var`; a bad one is reported on
// stderr with `who` and skipped.
inline void set_knobs_from_env(npu::sim::Quirks& q, const char* var, const char* who) {
  const std::string knobs = env(var);
  for (size_t at = 0; at < knobs.size();) {
    const size_t end = std::min(knobs.find(';', at), knobs.size());
    if (auto st = npu::sim::set_knob(q, knobs.substr(at, end - at)); !st.ok())
      std::fprintf(stderr, "%s: %s: %s\n", who, var, st.error().to_string().c_str());
    at = end + 1;
  }
}

// DRM_IOCTL_VERSION's answer: the driver `name` (copied up to name_len, which is set to the
// name's length, as drm_copy_field does), no date or description, the version numbers.
inline int answer_drm_version(rkd_drm_version* v, const std::string& name, int major, int minor, int patch) {
  if (v->name && v->name_len) std::memcpy(v->name, name.data(), std::min(v->name_len, name.size()));
  v->name_len = name.size();
  v->date_len = 0;
  v->desc_len = 0;
  v->version_major = major;
  v->version_minor = minor;
  v->version_patchlevel = patch;
  return 0;
}

}  // namespace rkd::test::driver_double

// The libc entry points a double replaces: open/open64/openat/openat64 of the claimed path
// return make_file(); ioctl on one of its files goes to dispatch(file, request, arg) (a negative
// errno is returned as -1 with errno set); close(fd) of one of its files calls close_file(fd)
// first. claims, make_file, file_of, dispatch and close_file are the double's own functions.
#define RKD_DRIVER_DOUBLE_ENTRY_POINTS(claims, make_file, file_of, dispatch, close_file)                              \
  extern "C" __attribute__((visibility("default"))) int open(const char* path, int flags, ...) {                      \
    OPEN_MODE(mode, flags);                                                                                           \
    if (claims(path)) return make_file();                                                                             \
    return rkd::test::driver_double::real<int (*)(const char*, int, ...)>("open")(path, flags, mode);                 \
  }                                                                                                                   \
  extern "C" __attribute__((visibility("default"))) int open64(const char* path, int flags, ...) {                    \
    OPEN_MODE(mode, flags);                                                                                           \
    if (claims(path)) return make_file();                                                                             \
    return rkd::test::driver_double::real<int (*)(const char*, int, ...)>("open64")(path, flags, mode);               \
  }                                                                                                                   \
  extern "C" __attribute__((visibility("default"))) int openat(int dirfd, const char* path, int flags, ...) {         \
    OPEN_MODE(mode, flags);                                                                                           \
    if (claims(path)) return make_file();                                                                             \
    return rkd::test::driver_double::real<int (*)(int, const char*, int, ...)>("openat")(dirfd, path, flags, mode);   \
  }                                                                                                                   \
  extern "C" __attribute__((visibility("default"))) int openat64(int dirfd, const char* path, int flags, ...) {       \
    OPEN_MODE(mode, flags);                                                                                           \
    if (claims(path)) return make_file();                                                                             \
    return rkd::test::driver_double::real<int (*)(int, const char*, int, ...)>("openat64")(dirfd, path, flags, mode); \
  }                                                                                                                   \
  extern "C" __attribute__((visibility("default"))) int ioctl(int fd, unsigned long req, ...) {                       \
    va_list ap;                                                                                                       \
    va_start(ap, req);                                                                                                \
    void* arg = va_arg(ap, void*);                                                                                    \
    va_end(ap);                                                                                                       \
    if (auto f = file_of(fd)) {                                                                                       \
      const int r = dispatch(*f, req, arg);                                                                           \
      if (r < 0) {                                                                                                    \
        errno = -r;                                                                                                   \
        return -1;                                                                                                    \
      }                                                                                                               \
      return r;                                                                                                       \
    }                                                                                                                 \
    return rkd::test::driver_double::real<int (*)(int, unsigned long, void*)>("ioctl")(fd, req, arg);                 \
  }                                                                                                                   \
  extern "C" __attribute__((visibility("default"))) int close(int fd) {                                               \
    if (file_of(fd)) close_file(fd);                                                                                  \
    return rkd::test::driver_double::real<int (*)(int)>("close")(fd);                                                 \
  }
