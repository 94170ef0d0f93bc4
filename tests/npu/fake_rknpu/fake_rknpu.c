/* fake_rknpu: a small LD_PRELOAD double of the vendor rknpu driver, below the capture tool in
   its tests (tools/intercept). It claims RKD_FAKE_RKNPU_DEVICE (default /dev/dri/card1) and
   answers MEM_CREATE (page-rounded buffers at device addresses from 0x80000000, a fake kernel
   object address each), MEM_MAP (an mmap offset into a memfd that backs every buffer),
   MEM_DESTROY, ACTION (0) and SUBMIT, which it checks - the task table inside the buffer
   task_obj_addr names, each task's register commands (regcfg_amount + 4 words) inside one
   buffer - and does not execute. A malformed submit is EINVAL; other requests ENOTTY. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

#include "rknpu_uapi.h"
#include "npu/preload_open.h"

#define EXPORT __attribute__((visibility("default")))
#define MAXBO 4096

struct fbo {
  uint32_t handle;
  uint64_t size, dma, obj, offset;
};
static int g_fd = -1;
static struct fbo g_bos[MAXBO];
static int g_n;
static uint32_t g_next_handle = 1;
static uint64_t g_next_off = 0;

static int claims(const char* path) {
  const char* d = getenv("RKD_FAKE_RKNPU_DEVICE");
  return path && !strcmp(path, d && *d ? d : "/dev/dri/card1");
}
static int make_fd(void) {
  if (g_fd < 0) g_fd = memfd_create("fake-rknpu", 0);
  return g_fd < 0 ? -1 : dup(g_fd);
}
static int is_ours(int fd) {
  char link[64], target[256];
  snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
  ssize_t n = readlink(link, target, sizeof target - 1);
  if (n < 0) return 0;
  target[n] = 0;
  return strstr(target, "memfd:fake-rknpu") != NULL;
}
static struct fbo* by_handle(uint32_t h) {
  for (int i = 0; i < g_n; ++i)
    if (g_bos[i].handle == h) return &g_bos[i];
  return NULL;
}
static struct fbo* by_dma(uint64_t lo, uint64_t hi) {
  for (int i = 0; i < g_n; ++i)
    if (lo >= g_bos[i].dma && hi <= g_bos[i].dma + g_bos[i].size) return &g_bos[i];
  return NULL;
}
static struct fbo* by_obj(uint64_t obj) {
  for (int i = 0; i < g_n; ++i)
    if (g_bos[i].obj == obj) return &g_bos[i];
  return NULL;
}

static int dispatch(unsigned long req, void* arg) {
  if (req == _IOWR('d', 0x40, uint64_t) || req == _IOWR('r', 0x00, uint64_t)) {
    ((uint32_t*)arg)[1] = 0;
    return 0;
  }
  if (req == RKD_RKNPU_MEM_CREATE_D || req == RKD_RKNPU_MEM_CREATE_R) {
    struct rkd_rknpu_mem_create* c = arg;
    if (c->size == 0 || g_n == MAXBO) return -EINVAL;
    const uint64_t size = (c->size + 4095) / 4096 * 4096;
    struct fbo* b = &g_bos[g_n++];
    b->handle = g_next_handle++;
    b->size = size;
    b->offset = g_next_off;
    b->dma = 0x80000000u + g_next_off;
    b->obj = 0xffffff8000100000ull + (uint64_t)b->handle * 0x1000;
    g_next_off += size + 4096;
    if (ftruncate(g_fd, (off_t)g_next_off) != 0) return -ENOMEM;
    c->handle = b->handle;
    c->obj_addr = b->obj;
    c->dma_addr = b->dma;
    return 0;
  }
  if (req == RKD_RKNPU_MEM_MAP_D || req == RKD_RKNPU_MEM_MAP_R) {
    struct rkd_rknpu_mem_map* m = arg;
    struct fbo* b = by_handle(m->handle);
    if (!b) return -EINVAL;
    m->offset = b->offset;
    return 0;
  }
  if (req == RKD_RKNPU_MEM_DESTROY_D || req == RKD_RKNPU_MEM_DESTROY_R) {
    struct rkd_rknpu_mem_destroy* d = arg;
    struct fbo* b = by_handle(d->handle);
    if (!b) return -EINVAL;
    *b = g_bos[--g_n];
    return 0;
  }
  if (req == RKD_RKNPU_SUBMIT_D || req == RKD_RKNPU_SUBMIT_R) {
    struct rkd_rknpu_submit* s = arg;
    struct fbo* t = by_obj(s->task_obj_addr);
    if (!t) return -EINVAL;
    uint8_t* v = mmap(NULL, (size_t)t->size, PROT_READ, MAP_SHARED, g_fd, (off_t)t->offset);
    if (v == MAP_FAILED) return -ENOMEM;
    int bad = 0;
    for (int c = 0; c < 5; ++c) {
      const uint32_t a = c == 0 && s->subcore_task[0].task_number == 0 ? s->task_start : s->subcore_task[c].task_start;
      const uint32_t n = c == 0 && s->subcore_task[0].task_number == 0 ? s->task_number : s->subcore_task[c].task_number;
      if ((uint64_t)(a + n) * sizeof(struct rkd_rknpu_task) > t->size) bad = 1;
      for (uint32_t i = a; !bad && i < a + n; ++i) {
        struct rkd_rknpu_task k;
        memcpy(&k, v + (size_t)i * sizeof k, sizeof k);
        if (!by_dma(k.regcmd_addr, k.regcmd_addr + ((uint64_t)k.regcfg_amount + RKD_RKNPU_PC_EXTRA_WORDS) * 8)) bad = 1;
      }
    }
    munmap(v, (size_t)t->size);
    if (bad) return -EINVAL;
    s->hw_elapse_time = 1000;
    return 0;
  }
  return -ENOTTY;
}

EXPORT int open(const char* path, int flags, ...) {
  OPEN_MODE(mode, flags);
  if (claims(path)) return make_fd();
  return ((int (*)(const char*, int, ...))dlsym(RTLD_NEXT, "open"))(path, flags, mode);
}
EXPORT int open64(const char* path, int flags, ...) {
  OPEN_MODE(mode, flags);
  if (claims(path)) return make_fd();
  return ((int (*)(const char*, int, ...))dlsym(RTLD_NEXT, "open64"))(path, flags, mode);
}
EXPORT int ioctl(int fd, unsigned long req, ...) {
  va_list ap;
  va_start(ap, req);
  void* arg = va_arg(ap, void*);
  va_end(ap);
  if (g_fd >= 0 && is_ours(fd)) {
    const int r = dispatch(req, arg);
    if (r < 0) {
      errno = -r;
      return -1;
    }
    return 0;
  }
  return ((int (*)(int, unsigned long, void*))dlsym(RTLD_NEXT, "ioctl"))(fd, req, arg);
}
