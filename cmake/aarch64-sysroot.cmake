# Cross-compiling the whole toolkit for the boards' Cortex-A76/A55: Debian's
# g++-aarch64-linux-gnu against an arm64 Debian sysroot that holds the :arm64 -dev packages
# (made by scripts/arm64-sysroot.sh with mmdebstrap --variant=extract: several of them, e.g.
# libdnnl-dev and libonnx-dev, are not co-installable with their amd64 versions, so multiarch
# cannot hold both). protoc and flatc are the host's (same Debian versions). Tests run under
# qemu-user with the sysroot as its library root, emulating the boards' Cortex-A76 (no SVE:
# qemu's default "max" CPU has SVE-512, on which oneDNN would run SVE kernels the boards do not
# have; on the A76 model it runs what they run). Correctness only, not timing.
#   cmake -DCMAKE_TOOLCHAIN_FILE=cmake/aarch64-sysroot.cmake -DRKD_ARM64_SYSROOT=DIR ...
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)
if(NOT RKD_ARM64_SYSROOT)
  set(RKD_ARM64_SYSROOT "$ENV{RKD_ARM64_SYSROOT}")
endif()
if(NOT RKD_ARM64_SYSROOT OR NOT EXISTS "${RKD_ARM64_SYSROOT}/usr/include/oneapi/dnnl/dnnl.hpp")
  message(FATAL_ERROR "RKD_ARM64_SYSROOT='${RKD_ARM64_SYSROOT}' is not an arm64 sysroot made by scripts/arm64-sysroot.sh")
endif()
# try_compile projects see the toolchain file again without the cache: pass the path on.
list(APPEND CMAKE_TRY_COMPILE_PLATFORM_VARIABLES RKD_ARM64_SYSROOT)
set(CMAKE_SYSROOT "${RKD_ARM64_SYSROOT}")
set(CMAKE_FIND_ROOT_PATH "${RKD_ARM64_SYSROOT}")
set(CMAKE_LIBRARY_ARCHITECTURE aarch64-linux-gnu)
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)
set(ENV{PKG_CONFIG_LIBDIR} "${RKD_ARM64_SYSROOT}/usr/lib/aarch64-linux-gnu/pkgconfig:${RKD_ARM64_SYSROOT}/usr/share/pkgconfig")
set(ENV{PKG_CONFIG_SYSROOT_DIR} "${RKD_ARM64_SYSROOT}")
set(CMAKE_CROSSCOMPILING_EMULATOR qemu-aarch64 -cpu cortex-a76 -L "${RKD_ARM64_SYSROOT}")
