// The mainline `rocket` accel driver's user interface (Linux >= 6.18,
// include/uapi/drm/rocket_accel.h; facts: rk3588-npu.md section 6), written from the facts
// sheet's field orders and sizes. Plain C layout: the production client (rocket.cc), the test
// double (tests/npu/fake_rocket) and the capture tool (tools/intercept, C) share it.
#ifndef RKD_NPU_DEVICE_ROCKET_UAPI_H
#define RKD_NPU_DEVICE_ROCKET_UAPI_H

#include <stddef.h>
#include <stdint.h>
#include <sys/ioctl.h>

#ifdef __cplusplus
extern "C" {
#endif

/* CREATE_BO: size in; handle, device (IOVA) address and the mmap offset out. */
struct rkd_rocket_create_bo {
  uint32_t size;
  uint32_t handle;
  uint64_t dma_address;
  uint64_t offset;
};

/* One task: the device address of its register commands and their count (64-bit words). The
   kernel programs PC_BASE_ADDRESS = regcmd, PC_REGISTER_AMOUNTS = (regcmd_count + 1) / 2 - 1
   and kicks it alone (TASK_NUMBER 1). */
struct rkd_rocket_task {
  uint32_t regcmd;
  uint32_t regcmd_count;
};

/* One job: its tasks run in order on one core. in_bo_handles: buffers it waits for (the last
   job that wrote them); out_bo_handles: buffers it writes (it waits for their last writer and
   becomes it). */
struct rkd_rocket_job {
  uint64_t tasks;
  uint64_t in_bo_handles;
  uint64_t out_bo_handles;
  uint32_t task_count;
  uint32_t task_struct_size;
  uint32_t in_bo_handle_count;
  uint32_t out_bo_handle_count;
};

struct rkd_rocket_submit {
  uint64_t jobs;
  uint32_t job_count;
  uint32_t job_struct_size;
  uint64_t reserved;
};

/* PREP_BO: wait (absolute CLOCK_MONOTONIC deadline in ns) for the buffer's last writer and make
   it coherent for the CPU. */
struct rkd_rocket_prep_bo {
  uint32_t handle;
  uint32_t reserved;
  int64_t timeout_ns;
};

/* FINI_BO: the CPU is done writing; make the buffer coherent for the device. */
struct rkd_rocket_fini_bo {
  uint32_t handle;
  uint32_t reserved;
};

#define RKD_DRM_COMMAND_BASE 0x40
#define RKD_ROCKET_IOCTL_CREATE_BO _IOWR('d', RKD_DRM_COMMAND_BASE + 0x00, struct rkd_rocket_create_bo)
#define RKD_ROCKET_IOCTL_SUBMIT _IOW('d', RKD_DRM_COMMAND_BASE + 0x01, struct rkd_rocket_submit)
#define RKD_ROCKET_IOCTL_PREP_BO _IOW('d', RKD_DRM_COMMAND_BASE + 0x02, struct rkd_rocket_prep_bo)
#define RKD_ROCKET_IOCTL_FINI_BO _IOW('d', RKD_DRM_COMMAND_BASE + 0x03, struct rkd_rocket_fini_bo)
/* DRM_IOCTL_GEM_CLOSE (drm.h: _IOW('d', 0x09, struct drm_gem_close {u32 handle; u32 pad;})). */
struct rkd_drm_gem_close {
  uint32_t handle;
  uint32_t pad;
};
#define RKD_DRM_IOCTL_GEM_CLOSE _IOW('d', 0x09, struct rkd_drm_gem_close)
/* DRM_IOCTL_VERSION (drm.h): the driver's name tells rocket from rknpu (driver.h). 64 bytes on LP64. */
struct rkd_drm_version {
  int version_major;
  int version_minor;
  int version_patchlevel;
  size_t name_len;
  char* name;
  size_t date_len;
  char* date;
  size_t desc_len;
  char* desc;
};
#define RKD_DRM_IOCTL_VERSION _IOWR('d', 0x00, struct rkd_drm_version)

#ifdef __cplusplus
}
#endif

#endif
