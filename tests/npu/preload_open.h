/* For the LD_PRELOAD driver doubles (fake_rocket, fake_rknpu): open(2)'s mode argument, present
   after O_CREAT or O_TMPFILE, read from the variadic list into a new variable `mode`. C and C++. */
#ifndef RKD_TESTS_NPU_PRELOAD_OPEN_H
#define RKD_TESTS_NPU_PRELOAD_OPEN_H

#include <fcntl.h>
#include <stdarg.h>
#include <sys/types.h>

#define OPEN_MODE(mode, flags)           \
  mode_t mode = 0;                       \
  if ((flags) & (O_CREAT | O_TMPFILE)) { \
    va_list ap_;                         \
    va_start(ap_, flags);                \
    mode = (mode_t)va_arg(ap_, int);     \
    va_end(ap_);                         \
  }

#endif
