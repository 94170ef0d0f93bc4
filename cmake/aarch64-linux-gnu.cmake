# Cross-compiling for the boards' Cortex-A76/A55 with Debian's g++-aarch64-linux-gnu and
# multiarch arm64 libraries; tests run under qemu-user (correctness only, not timing).
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)
set(CMAKE_FIND_ROOT_PATH /usr/aarch64-linux-gnu)
set(CMAKE_LIBRARY_ARCHITECTURE aarch64-linux-gnu)
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY BOTH)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE BOTH)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE BOTH)
set(ENV{PKG_CONFIG_LIBDIR} /usr/lib/aarch64-linux-gnu/pkgconfig:/usr/share/pkgconfig)
# The arm64 multiarch libc (libc6:arm64, pulled in by the :arm64 -dev packages) is found
# through the host loader cache; passing -L /usr/aarch64-linux-gnu instead mixes two
# glibc installations and deadlocks threaded programs under qemu-user 7.2.
set(CMAKE_CROSSCOMPILING_EMULATOR qemu-aarch64)
