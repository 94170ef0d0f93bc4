/* The vendor rknpu driver's user interface (Rockchip's kernel, drivers/rknpu/include/
   rknpu_ioctl.h; facts: rk3588-npu.md section 6), the parts the capture reads, written from
   the facts sheet's and the header's field orders. */
#ifndef RKD_INTERCEPT_RKNPU_UAPI_H
#define RKD_INTERCEPT_RKNPU_UAPI_H

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

#endif
