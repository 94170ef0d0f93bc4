/* The vendor rknpu driver's user interface (Rockchip's kernel, drivers/rknpu/include/
   rknpu_ioctl.h; facts: rk3588-npu.md section 6), written from the facts sheet's and the
   header's field orders. C: the device back end (rknpu.cc), its test double
   (tests/npu/fake_rknpu) and the capture tool (tools/intercept) share it. */
#ifndef RKD_NPU_DEVICE_RKNPU_UAPI_H
#define RKD_NPU_DEVICE_RKNPU_UAPI_H

#include <stdint.h>
#include <sys/ioctl.h>

struct rkd_rknpu_mem_create { /* 48 bytes */
  uint32_t handle;
  uint32_t flags;
  uint64_t size;
  uint64_t obj_addr; /* the kernel's object: what SUBMIT's task_obj_addr names */
  uint64_t dma_addr;
  uint64_t sram_size;
  int32_t iommu_domain_id;
  uint32_t core_mask;
};
struct rkd_rknpu_mem_map { /* 16 bytes */
  uint32_t handle;
  uint32_t reserved;
  uint64_t offset;
};
struct rkd_rknpu_mem_destroy {
  uint32_t handle;
  uint32_t reserved;
  uint64_t obj_addr;
};
struct rkd_rknpu_task { /* 40 bytes, packed */
  uint32_t flags;
  uint32_t op_idx;
  uint32_t enable_mask;
  uint32_t int_mask;
  uint32_t int_clear;
  uint32_t int_status;
  uint32_t regcfg_amount; /* register-command words before the 4-word PC trailer */
  uint32_t regcfg_offset;
  uint64_t regcmd_addr;
} __attribute__((packed));
struct rkd_rknpu_subcore_task {
  uint32_t task_start;
  uint32_t task_number;
};
struct rkd_rknpu_submit { /* 104 bytes */
  uint32_t flags;
  uint32_t timeout;
  uint32_t task_start;
  uint32_t task_number;
  uint32_t task_counter;
  int32_t priority;
  uint64_t task_obj_addr;
  uint32_t iommu_domain_id;
  uint32_t reserved;
  uint64_t task_base_addr;
  int64_t hw_elapse_time;
  uint32_t core_mask;
  int32_t fence_fd;
  struct rkd_rknpu_subcore_task subcore_task[5];
};
struct rkd_rknpu_mem_sync { /* 32 bytes */
  uint32_t flags;           /* RKD_RKNPU_MEM_SYNC_* */
  uint32_t reserved;
  uint64_t obj_addr;
  uint64_t offset;
  uint64_t size;
};
struct rkd_rknpu_action { /* 8 bytes */
  uint32_t flags;         /* RKD_RKNPU_GET_* / RKD_RKNPU_ACT_* */
  uint32_t value;
};

/* MEM_CREATE flags (e_rknpu_mem_type). */
#define RKD_RKNPU_MEM_CACHEABLE (1u << 1)
#define RKD_RKNPU_MEM_KERNEL_MAPPING (1u << 3)
#define RKD_RKNPU_MEM_IOMMU (1u << 4)
#define RKD_RKNPU_MEM_ZEROING (1u << 5)
/* MEM_SYNC flags (e_rknpu_mem_sync_mode). */
#define RKD_RKNPU_MEM_SYNC_TO_DEVICE (1u << 0)
#define RKD_RKNPU_MEM_SYNC_FROM_DEVICE (1u << 1)
/* SUBMIT flags (e_rknpu_job_mode): PC mode, blocking unless NONBLOCK. */
#define RKD_RKNPU_JOB_PC (1u << 0)
#define RKD_RKNPU_JOB_NONBLOCK (1u << 1)
#define RKD_RKNPU_JOB_PINGPONG (1u << 2)
/* SUBMIT core_mask: one bit per core (0: the driver picks). */
#define RKD_RKNPU_CORE0_MASK 1u
/* ACTION codes (e_rknpu_action). */
#define RKD_RKNPU_GET_HW_VERSION 0u
#define RKD_RKNPU_GET_DRV_VERSION 1u
/* A task's interrupt mask: the interrupt of the last block it runs (its PC completion). The
   values the vendor runtime writes [HW: third-party captures]: a task with the DPU 0x300 (both
   DPU groups), a PPU-only (pooling) task 0xc00; int_clear 0x1ffff. */
#define RKD_RKNPU_INT_DPU 0x300u
#define RKD_RKNPU_INT_PPU 0xc00u
#define RKD_RKNPU_INT_CLEAR_ALL 0x1ffffu

/* The trailer words the vendor driver adds to regcfg_amount (RKNPU_PC_DATA_EXTRA_AMOUNT). */
#define RKD_RKNPU_PC_EXTRA_WORDS 4

/* DRM form (type 'd', DRM_COMMAND_BASE 0x40 + index) and the misc-device form (type 'r'). */
#define RKD_RKNPU_IOCTL(type, nr, s) _IOWR(type, nr, s)
#define RKD_RKNPU_SUBMIT_D RKD_RKNPU_IOCTL('d', 0x41, struct rkd_rknpu_submit)
#define RKD_RKNPU_MEM_CREATE_D RKD_RKNPU_IOCTL('d', 0x42, struct rkd_rknpu_mem_create)
#define RKD_RKNPU_MEM_MAP_D RKD_RKNPU_IOCTL('d', 0x43, struct rkd_rknpu_mem_map)
#define RKD_RKNPU_MEM_DESTROY_D RKD_RKNPU_IOCTL('d', 0x44, struct rkd_rknpu_mem_destroy)
#define RKD_RKNPU_SUBMIT_R RKD_RKNPU_IOCTL('r', 0x01, struct rkd_rknpu_submit)
#define RKD_RKNPU_MEM_CREATE_R RKD_RKNPU_IOCTL('r', 0x02, struct rkd_rknpu_mem_create)
#define RKD_RKNPU_MEM_MAP_R RKD_RKNPU_IOCTL('r', 0x03, struct rkd_rknpu_mem_map)
#define RKD_RKNPU_MEM_DESTROY_R RKD_RKNPU_IOCTL('r', 0x04, struct rkd_rknpu_mem_destroy)
#define RKD_RKNPU_ACTION_D RKD_RKNPU_IOCTL('d', 0x40, struct rkd_rknpu_action)
#define RKD_RKNPU_MEM_SYNC_D RKD_RKNPU_IOCTL('d', 0x45, struct rkd_rknpu_mem_sync)

#endif
