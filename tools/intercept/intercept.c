/* rkdeploy's ioctl capture: an LD_PRELOAD library that records what a process submits to a
   Rockchip NPU - through the vendor `rknpu` driver (the RKNN runtime) or mainline's `rocket`
   (Mesa's Teflon delegate, rkdeploy's device back end) - into a capture directory that
   `rkdeploy regcmd decode|diff|summary` read (docs/device.md, "Capturing").

   Usage: RKD_CAPTURE_DIR=DIR LD_PRELOAD=librkd_intercept.so PROGRAM ...
   RKD_CAPTURE_BUFFERS=1 also writes the buffers as they are when submitted: rocket, each job's
   in and out buffer objects; rknpu, every live buffer object. RKD_CAPTURE_BUFFERS=all: every
   live buffer object for rocket too (rkdeploy's device back end lists only its small ordering
   buffers in its jobs: its data is in one arena buffer object).

   Per submit it writes DIR/sNNNN/jJJ-tTTTT.regcmd (each task's register-command words, raw
   little-endian 64-bit, read from the process's own view of the buffer at submit time) and
   rewrites DIR/index.json (docs/device.md gives its format): the task table (rocket: the jobs'
   tasks and buffer handles; rknpu: every field of the submit and of its 40-byte task entries),
   the buffer objects created so far. The ioctl is then passed on unchanged.

   C, standalone: it includes only the two drivers' interface headers and links libdl. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "npu/device/rocket_uapi.h"
#include "npu/device/rknpu_uapi.h"

#define EXPORT __attribute__((visibility("default")))

enum { ROCKET = 1, RKNPU = 2 };

struct bo {
  int fd, driver;
  uint32_t handle;
  uint64_t dma, size, mmap_offset, obj_addr;
  int mapped_offset; /* mmap_offset known */
  uint8_t* view;     /* our own read-only mapping, made on first use */
};

static pthread_mutex_t g_m = PTHREAD_MUTEX_INITIALIZER;
static struct bo* g_bos;
static size_t g_nbos, g_capbos;
static char* g_submits; /* the "submits" array's members, comma-separated */
static size_t g_submits_len, g_submits_cap;
static int g_nsubmit;

static int (*real_ioctl)(int, unsigned long, void*);
static const char* g_dir = ""; /* RKD_CAPTURE_DIR while a submit is captured */

static const char* capture_dir(void) {
  const char* d = getenv("RKD_CAPTURE_DIR");
  return d && *d ? d : NULL;
}

static void note(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "rkd_intercept: ");
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
}

/* A growing string. */
struct str {
  char* p;
  size_t n, cap;
};
static void sadd(struct str* s, const char* fmt, ...) {
  va_list ap;
  for (;;) {
    va_start(ap, fmt);
    size_t room = s->cap - s->n;
    int k = vsnprintf(s->p ? s->p + s->n : NULL, room, fmt, ap);
    va_end(ap);
    if (k < 0) return;
    if ((size_t)k < room) {
      s->n += (size_t)k;
      return;
    }
    size_t cap = s->cap ? s->cap * 2 : 4096;
    while (cap < s->n + (size_t)k + 1) cap *= 2;
    char* q = realloc(s->p, cap);
    if (!q) return;
    s->p = q;
    s->cap = cap;
  }
}

static struct bo* find_handle(int fd, int driver, uint32_t handle) {
  for (size_t i = 0; i < g_nbos; ++i)
    if (g_bos[i].fd == fd && g_bos[i].driver == driver && g_bos[i].handle == handle) return &g_bos[i];
  return NULL;
}
static struct bo* find_dma(int fd, int driver, uint64_t lo, uint64_t hi) {
  for (size_t i = 0; i < g_nbos; ++i)
    if (g_bos[i].fd == fd && g_bos[i].driver == driver && lo >= g_bos[i].dma && hi <= g_bos[i].dma + g_bos[i].size) return &g_bos[i];
  return NULL;
}
static struct bo* find_obj(int fd, uint64_t obj) {
  for (size_t i = 0; i < g_nbos; ++i)
    if (g_bos[i].fd == fd && g_bos[i].driver == RKNPU && g_bos[i].obj_addr == obj) return &g_bos[i];
  return NULL;
}
static struct bo* add_bo(void) {
  if (g_nbos == g_capbos) {
    size_t cap = g_capbos ? g_capbos * 2 : 64;
    struct bo* q = realloc(g_bos, cap * sizeof *q);
    if (!q) return NULL;
    g_bos = q;
    g_capbos = cap;
  }
  memset(&g_bos[g_nbos], 0, sizeof g_bos[0]);
  return &g_bos[g_nbos++];
}

/* The buffer's bytes as the process sees them (our own shared mapping of the device file). */
static const uint8_t* view(struct bo* b) {
  if (b->view) return b->view;
  if (!b->mapped_offset) return NULL;
  void* m = mmap(NULL, (size_t)b->size, PROT_READ, MAP_SHARED, b->fd, (off_t)b->mmap_offset);
  if (m == MAP_FAILED) return NULL;
  b->view = m;
  return b->view;
}

static int write_file(const char* path, const void* data, size_t n) {
  char tmp[4200];
  snprintf(tmp, sizeof tmp, "%s.tmp", path);
  FILE* f = fopen(tmp, "wb");
  if (!f) return -1;
  size_t w = n ? fwrite(data, 1, n, f) : 0;
  if (fclose(f) != 0 || w != n) {
    unlink(tmp);
    return -1;
  }
  return rename(tmp, path);
}

/* Writes `words` 64-bit words at device address `addr` of fd's buffers to DIR/sNNNN/NAME;
   appends "file" and "words_captured" to the JSON object being built. */
static void capture_words(struct str* j, int fd, int driver, uint64_t addr, uint64_t words, const char* sub, const char* name) {
  struct bo* b = find_dma(fd, driver, addr, addr + words * 8);
  const uint8_t* v = b ? view(b) : NULL;
  if (!v) {
    sadd(j, ",\"file\":null,\"problem\":\"%s\"", b ? "buffer not mappable" : "no buffer object holds these words");
    return;
  }
  char path[4096];
  snprintf(path, sizeof path, "%s/%s/%s", g_dir, sub, name);
  if (write_file(path, v + (addr - b->dma), (size_t)words * 8) != 0) {
    note("cannot write %s: %s", path, strerror(errno));
    sadd(j, ",\"file\":null,\"problem\":\"write failed\"");
    return;
  }
  sadd(j, ",\"file\":\"%s/%s\"", sub, name);
}

static void capture_bo(struct str* j, struct bo* b, const char* sub) {
  const uint8_t* v = view(b);
  char name[64], path[4096];
  snprintf(name, sizeof name, "bo%u.bin", b->handle);
  snprintf(path, sizeof path, "%s/%s/%s", g_dir, sub, name);
  if (!v || write_file(path, v, (size_t)b->size) != 0) return;
  sadd(j, "%s{\"handle\":%u,\"file\":\"%s/%s\"}", j->n && j->p[j->n - 1] != '[' ? "," : "", b->handle, sub, name);
}

static void write_index(void) {
  struct str s = {0};
  sadd(&s, "{\"format\":\"rkdeploy-capture\",\"version\":1,\"buffer_objects\":[");
  for (size_t i = 0; i < g_nbos; ++i)
    sadd(&s, "%s{\"driver\":\"%s\",\"fd\":%d,\"handle\":%u,\"dma_address\":%" PRIu64 ",\"size\":%" PRIu64 ",\"obj_addr\":%" PRIu64 "}", i ? "," : "",
         g_bos[i].driver == ROCKET ? "rocket" : "rknpu", g_bos[i].fd, g_bos[i].handle, g_bos[i].dma, g_bos[i].size, g_bos[i].obj_addr);
  sadd(&s, "],\"submits\":[%.*s]}\n", (int)g_submits_len, g_submits ? g_submits : "");
  char path[4096];
  snprintf(path, sizeof path, "%s/index.json", g_dir);
  if (write_file(path, s.p, s.n) != 0) note("cannot write %s: %s", path, strerror(errno));
  free(s.p);
}

static void add_submit(struct str* j) {
  if (g_submits_len + j->n + 2 > g_submits_cap) {
    size_t cap = g_submits_cap ? g_submits_cap : 65536;
    while (cap < g_submits_len + j->n + 2) cap *= 2;
    char* q = realloc(g_submits, cap);
    if (!q) return;
    g_submits = q;
    g_submits_cap = cap;
  }
  if (g_submits_len) g_submits[g_submits_len++] = ',';
  memcpy(g_submits + g_submits_len, j->p, j->n);
  g_submits_len += j->n;
  write_index();
}

static int new_submit_dir(char* sub, size_t n) {
  snprintf(sub, n, "s%04d", g_nsubmit);
  char path[4096];
  snprintf(path, sizeof path, "%s/%s", g_dir, sub);
  if (mkdir(path, 0777) != 0 && errno != EEXIST) {
    note("cannot create %s: %s", path, strerror(errno));
    return -1;
  }
  return 0;
}

static void capture_rocket_submit(int fd, const struct rkd_rocket_submit* s) {
  char sub[32];
  if (new_submit_dir(sub, sizeof sub) != 0) return;
  const char* bv = getenv("RKD_CAPTURE_BUFFERS");
  const int buffers = !bv ? 0 : !strcmp(bv, "1") ? 1 : !strcmp(bv, "all") ? 2 : 0;
  struct str j = {0};
  sadd(&j, "{\"index\":%d,\"driver\":\"rocket\",\"fd\":%d,\"job_struct_size\":%u,\"jobs\":[", g_nsubmit, fd, s->job_struct_size);
  for (uint32_t k = 0; k < s->job_count && s->job_struct_size >= sizeof(struct rkd_rocket_job); ++k) {
    struct rkd_rocket_job job;
    memcpy(&job, (const uint8_t*)(uintptr_t)s->jobs + (size_t)k * s->job_struct_size, sizeof job);
    sadd(&j, "%s{\"task_struct_size\":%u,\"tasks\":[", k ? "," : "", job.task_struct_size);
    for (uint32_t t = 0; t < job.task_count && job.task_struct_size >= sizeof(struct rkd_rocket_task); ++t) {
      struct rkd_rocket_task task;
      memcpy(&task, (const uint8_t*)(uintptr_t)job.tasks + (size_t)t * job.task_struct_size, sizeof task);
      sadd(&j, "%s{\"regcmd\":%u,\"regcmd_count\":%u", t ? "," : "", task.regcmd, task.regcmd_count);
      char name[64];
      snprintf(name, sizeof name, "j%02u-t%04u.regcmd", k, t);
      capture_words(&j, fd, ROCKET, task.regcmd, task.regcmd_count, sub, name);
      sadd(&j, "}");
    }
    sadd(&j, "],\"in_bo_handles\":[");
    for (uint32_t i = 0; i < job.in_bo_handle_count; ++i) sadd(&j, "%s%u", i ? "," : "", ((const uint32_t*)(uintptr_t)job.in_bo_handles)[i]);
    sadd(&j, "],\"out_bo_handles\":[");
    for (uint32_t i = 0; i < job.out_bo_handle_count; ++i) sadd(&j, "%s%u", i ? "," : "", ((const uint32_t*)(uintptr_t)job.out_bo_handles)[i]);
    sadd(&j, "]");
    if (buffers == 1) {
      sadd(&j, ",\"buffers\":[");
      for (uint32_t i = 0; i < job.in_bo_handle_count + job.out_bo_handle_count; ++i) {
        const uint32_t h = i < job.in_bo_handle_count ? ((const uint32_t*)(uintptr_t)job.in_bo_handles)[i]
                                                      : ((const uint32_t*)(uintptr_t)job.out_bo_handles)[i - job.in_bo_handle_count];
        struct bo* b = find_handle(fd, ROCKET, h);
        if (b) capture_bo(&j, b, sub);
      }
      sadd(&j, "]");
    }
    sadd(&j, "}");
  }
  sadd(&j, "]");
  if (buffers == 2) {
    sadd(&j, ",\"buffers\":[");
    for (size_t i = 0; i < g_nbos; ++i)
      if (g_bos[i].fd == fd && g_bos[i].driver == ROCKET) capture_bo(&j, &g_bos[i], sub);
    sadd(&j, "]");
  }
  sadd(&j, "}");
  add_submit(&j);
  free(j.p);
  ++g_nsubmit;
}

static void capture_rknpu_submit(int fd, const struct rkd_rknpu_submit* s) {
  char sub[32];
  if (new_submit_dir(sub, sizeof sub) != 0) return;
  struct str j = {0};
  sadd(&j,
       "{\"index\":%d,\"driver\":\"rknpu\",\"fd\":%d,\"flags\":%u,\"timeout\":%u,\"task_start\":%u,\"task_number\":%u,\"task_counter\":%u,"
       "\"priority\":%d,\"task_obj_addr\":%" PRIu64 ",\"iommu_domain_id\":%u,\"task_base_addr\":%" PRIu64
       ",\"core_mask\":%u,\"fence_fd\":%d,"
       "\"subcore_task\":[",
       g_nsubmit, fd, s->flags, s->timeout, s->task_start, s->task_number, s->task_counter, s->priority, s->task_obj_addr, s->iommu_domain_id,
       s->task_base_addr, s->core_mask, s->fence_fd);
  for (int i = 0; i < 5; ++i) sadd(&j, "%s[%u,%u]", i ? "," : "", s->subcore_task[i].task_start, s->subcore_task[i].task_number);
  sadd(&j, "],\"jobs\":[{\"tasks\":[");
  struct bo* tb = find_obj(fd, s->task_obj_addr);
  const uint8_t* tv = tb ? view(tb) : NULL;
  uint32_t first = s->task_start, count = s->task_number;
  /* A multi-core submit lists its tasks per core: the table from the lowest start to the
     highest end. */
  for (int i = 0; i < 5; ++i)
    if (s->subcore_task[i].task_number) {
      const uint32_t a = s->subcore_task[i].task_start, b = a + s->subcore_task[i].task_number;
      if (count == 0 || a < first) {
        count = count ? first + count - a : b - a;
        first = a;
      }
      if (b > first + count) count = b - first;
    }
  if (!tv) {
    sadd(&j, "]}],\"problem\":\"%s\"}", tb ? "task buffer not mappable" : "task_obj_addr names no buffer object of this file");
  } else {
    for (uint32_t t = first; t < first + count && (uint64_t)(t + 1) * sizeof(struct rkd_rknpu_task) <= tb->size; ++t) {
      struct rkd_rknpu_task k;
      memcpy(&k, tv + (size_t)t * sizeof k, sizeof k);
      sadd(&j,
           "%s{\"index\":%u,\"flags\":%u,\"op_idx\":%u,\"enable_mask\":%u,\"int_mask\":%u,\"int_clear\":%u,\"int_status\":%u,"
           "\"regcfg_amount\":%u,\"regcfg_offset\":%u,\"regcmd\":%" PRIu64 ",\"regcmd_count\":%u",
           t > first ? "," : "", t, k.flags, k.op_idx, k.enable_mask, k.int_mask, k.int_clear, k.int_status, k.regcfg_amount, k.regcfg_offset,
           k.regcmd_addr, k.regcfg_amount + RKD_RKNPU_PC_EXTRA_WORDS);
      char name[64];
      snprintf(name, sizeof name, "j00-t%04u.regcmd", t);
      capture_words(&j, fd, RKNPU, k.regcmd_addr, (uint64_t)k.regcfg_amount + RKD_RKNPU_PC_EXTRA_WORDS, sub, name);
      sadd(&j, "}");
    }
    sadd(&j, "]}]");
    char name[64];
    snprintf(name, sizeof name, "tasks.bin");
    char path[4096];
    snprintf(path, sizeof path, "%s/%s/%s", g_dir, sub, name);
    if (write_file(path, tv + (size_t)first * sizeof(struct rkd_rknpu_task), (size_t)count * sizeof(struct rkd_rknpu_task)) == 0)
      sadd(&j, ",\"task_table\":\"%s/%s\"", sub, name);
    if (getenv("RKD_CAPTURE_BUFFERS") && (!strcmp(getenv("RKD_CAPTURE_BUFFERS"), "1") || !strcmp(getenv("RKD_CAPTURE_BUFFERS"), "all"))) {
      sadd(&j, ",\"buffers\":[");
      for (size_t i = 0; i < g_nbos; ++i)
        if (g_bos[i].fd == fd && g_bos[i].driver == RKNPU) capture_bo(&j, &g_bos[i], sub);
      sadd(&j, "]");
    }
    sadd(&j, "}");
  }
  add_submit(&j);
  free(j.p);
  ++g_nsubmit;
}

EXPORT int ioctl(int fd, unsigned long req, ...) {
  va_list ap;
  va_start(ap, req);
  void* arg = va_arg(ap, void*);
  va_end(ap);
  if (!real_ioctl) real_ioctl = (int (*)(int, unsigned long, void*))dlsym(RTLD_NEXT, "ioctl");
  if (!capture_dir() || !arg) return real_ioctl(fd, req, arg);
  pthread_mutex_lock(&g_m);
  g_dir = capture_dir();
  if (req == RKD_ROCKET_IOCTL_SUBMIT) capture_rocket_submit(fd, arg);
  if (req == RKD_RKNPU_SUBMIT_D || req == RKD_RKNPU_SUBMIT_R) capture_rknpu_submit(fd, arg);
  pthread_mutex_unlock(&g_m);
  const int r = real_ioctl(fd, req, arg);
  const int saved = errno;
  if (r == 0) {
    pthread_mutex_lock(&g_m);
    if (req == RKD_ROCKET_IOCTL_CREATE_BO) {
      const struct rkd_rocket_create_bo* c = arg;
      struct bo* b = add_bo();
      if (b) *b = (struct bo){fd, ROCKET, c->handle, c->dma_address, c->size, c->offset, 0, 1, NULL};
    } else if (req == RKD_RKNPU_MEM_CREATE_D || req == RKD_RKNPU_MEM_CREATE_R) {
      const struct rkd_rknpu_mem_create* c = arg;
      struct bo* b = add_bo();
      if (b) *b = (struct bo){fd, RKNPU, c->handle, c->dma_addr, c->size, 0, c->obj_addr, 0, NULL};
    } else if (req == RKD_RKNPU_MEM_MAP_D || req == RKD_RKNPU_MEM_MAP_R) {
      const struct rkd_rknpu_mem_map* m = arg;
      struct bo* b = find_handle(fd, RKNPU, m->handle);
      if (b) {
        b->mmap_offset = m->offset;
        b->mapped_offset = 1;
      }
    } else if (req == RKD_DRM_IOCTL_GEM_CLOSE || req == RKD_RKNPU_MEM_DESTROY_D || req == RKD_RKNPU_MEM_DESTROY_R) {
      const uint32_t h = *(const uint32_t*)arg;
      struct bo* b = find_handle(fd, req == RKD_DRM_IOCTL_GEM_CLOSE ? ROCKET : RKNPU, h);
      if (!b && req == RKD_DRM_IOCTL_GEM_CLOSE) b = find_handle(fd, RKNPU, h);
      if (b) {
        if (b->view) munmap(b->view, (size_t)b->size);
        *b = g_bos[--g_nbos];
      }
    }
    pthread_mutex_unlock(&g_m);
  }
  errno = saved;
  return r;
}
