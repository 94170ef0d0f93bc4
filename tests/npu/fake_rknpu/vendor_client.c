/* A stand-in for the vendor runtime, for the capture tool's tests: on the rknpu device
   (RKD_FAKE_RKNPU_DEVICE under tests/npu/fake_rknpu) it places the given register-command
   files (one task each, as `rkdeploy compile` writes them) one after the other in a buffer
   object, writes a 40-byte task entry per task (regcfg_amount = words - 4, enable_mask from the
   trailer's last word) and submits them as one job split over three cores the way the vendor
   driver reads them (subcore_task[2..4]). What it submitted it also writes to EXPECTED_DIR:
   tasks.bin (the entries) and tNNNN.regcmd (each task's words).
   Usage: vendor_client DEVICE EXPECTED_DIR TASK.regcmd... */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

#include "npu/device/rknpu_uapi.h"

static void die(const char* what) {
  perror(what);
  exit(1);
}
static uint8_t* read_all(const char* path, size_t* n) {
  FILE* f = fopen(path, "rb");
  if (!f) die(path);
  fseek(f, 0, SEEK_END);
  *n = (size_t)ftell(f);
  fseek(f, 0, SEEK_SET);
  uint8_t* p = malloc(*n ? *n : 1);
  if (!p || fread(p, 1, *n, f) != *n) die(path);
  fclose(f);
  return p;
}
static void write_all(const char* path, const void* p, size_t n) {
  FILE* f = fopen(path, "wb");
  if (!f || fwrite(p, 1, n, f) != n || fclose(f) != 0) die(path);
}
static uint8_t* create(int fd, uint64_t size, struct rkd_rknpu_mem_create* c) {
  memset(c, 0, sizeof *c);
  c->size = size;
  c->flags = 0x10; /* IOMMU */
  if (ioctl(fd, RKD_RKNPU_MEM_CREATE_D, c) != 0) die("MEM_CREATE");
  struct rkd_rknpu_mem_map m = {c->handle, 0, 0};
  if (ioctl(fd, RKD_RKNPU_MEM_MAP_D, &m) != 0) die("MEM_MAP");
  void* v = mmap(NULL, (size_t)size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, (off_t)m.offset);
  if (v == MAP_FAILED) die("mmap");
  return v;
}

int main(int argc, char** argv) {
  if (argc < 4) {
    fprintf(stderr, "usage: vendor_client DEVICE EXPECTED_DIR TASK.regcmd...\n");
    return 2;
  }
  const int fd = open(argv[1], O_RDWR);
  if (fd < 0) die(argv[1]);
  const int n = argc - 3;
  size_t total = 0, sizes[256];
  uint8_t* words[256];
  if (n > 256) return 2;
  for (int i = 0; i < n; ++i) {
    words[i] = read_all(argv[3 + i], &sizes[i]);
    total += (sizes[i] + 15) / 16 * 16;
  }
  struct rkd_rknpu_mem_create rc, tc;
  uint8_t* rv = create(fd, total, &rc);
  struct rkd_rknpu_task* tv = (struct rkd_rknpu_task*)create(fd, (uint64_t)n * sizeof(struct rkd_rknpu_task), &tc);
  size_t at = 0;
  for (int i = 0; i < n; ++i) {
    memcpy(rv + at, words[i], sizes[i]);
    uint64_t last;
    memcpy(&last, words[i] + sizes[i] - 8, 8);
    struct rkd_rknpu_task t = {0};
    t.flags = 0;
    t.op_idx = 1;
    t.enable_mask = (uint32_t)(last >> 16);
    t.int_mask = 0x300;
    t.int_clear = 0x1ffff;
    t.regcfg_amount = (uint32_t)(sizes[i] / 8) - RKD_RKNPU_PC_EXTRA_WORDS;
    t.regcmd_addr = rc.dma_addr + at;
    memcpy(&tv[i], &t, sizeof t);
    char path[4096];
    snprintf(path, sizeof path, "%s/t%04d.regcmd", argv[2], i);
    write_all(path, words[i], sizes[i]);
    at += (sizes[i] + 15) / 16 * 16;
  }
  char path[4096];
  snprintf(path, sizeof path, "%s/tasks.bin", argv[2]);
  write_all(path, tv, (size_t)n * sizeof(struct rkd_rknpu_task));
  struct rkd_rknpu_submit s;
  memset(&s, 0, sizeof s);
  s.flags = 1 | 4; /* PC, ping-pong */
  s.timeout = 6000;
  s.task_number = (uint32_t)n;
  s.task_obj_addr = tc.obj_addr;
  s.core_mask = 7;
  s.fence_fd = -1;
  /* Three cores: the vendor driver reads subcore_task[2..4]. */
  uint32_t start = 0;
  for (int c = 0; c < 3; ++c) {
    const uint32_t k = (uint32_t)(n / 3 + (c < n % 3 ? 1 : 0));
    s.subcore_task[2 + c].task_start = start;
    s.subcore_task[2 + c].task_number = k;
    start += k;
  }
  if (ioctl(fd, RKD_RKNPU_SUBMIT_D, &s) != 0) die("SUBMIT");
  printf("submitted %d task(s) on 3 cores, hw_elapse_time %lld\n", n, (long long)s.hw_elapse_time);
  return 0;
}
