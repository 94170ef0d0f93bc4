# Debian packages of the build (`cpack` in the build tree; docs/install.md), one per install
# component, following Debian's naming for a shared library:
#   rkdeploy            the command (bin/rkdeploy) and the target profiles (share/rkdeploy)
#   librkdeploy-rt0     the embeddable runtime's shared library (SONAME librkdeploy_rt.so.0)
#   librkdeploy-rt-dev  its headers, the static library, the pkg-config file, the example's source
#   python3-rkdeploy    the Python package (lib/python3.X/dist-packages/rkdeploy), when it is built
#   rkdeploy-rknn-plugins  the vendor runtime's custom-operator plugins (lib/rknpu/op_plugins) and
#                       their header (docs/rknn-custom-op.md)
# Each package's Depends is derived at packaging time from the ELF files it holds (their NEEDED
# entries, cmake/cpack_depends.cmake) through the one map below from a shared library to the
# Debian 12 package that has it; a library missing from the map fails the packaging, naming it.
set(RKD_DEBIAN_SHLIB_PACKAGES
    "ld-linux-x86-64.so.2=libc6" "ld-linux-aarch64.so.1=libc6" "libc.so.6=libc6" "libm.so.6=libc6" "libgcc_s.so.1=libgcc-s1"
    "libstdc++.so.6=libstdc++6" "libgomp.so.1=libgomp1" "libdnnl.so.2=libdnnl2" "libXNNPACK.so.0=libxnnpack0"
    "libpthreadpool.so.0=libpthreadpool0" "libhwy.so.1=libhwy1" "libstb.so.0=libstb0" "libzip.so.4=libzip4" "libcrypto.so.3=libssl3" "libonnx.so.1=libonnx1"
    "libonnx_proto.so.1=libonnx1" "libprotobuf.so.32=libprotobuf32")

if(CMAKE_SYSTEM_PROCESSOR MATCHES "aarch64|arm64")
  set(CPACK_DEBIAN_PACKAGE_ARCHITECTURE arm64)
else()
  set(CPACK_DEBIAN_PACKAGE_ARCHITECTURE amd64)
endif()
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME rkdeploy)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "Detection models on Rockchip NPUs, verified on any Linux host")
set(CPACK_DEBIAN_PACKAGE_MAINTAINER "rkdeploy developers <rkdeploy@localhost>")
set(CPACK_DEBIAN_PACKAGE_SECTION science)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_STRIP_FILES ON)
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS ON)
set(CPACK_COMPONENTS_ALL cli runtime dev rknn_plugins)
set(CPACK_DEBIAN_CLI_PACKAGE_NAME rkdeploy)
set(CPACK_DEBIAN_RUNTIME_PACKAGE_NAME librkdeploy-rt0)
set(CPACK_DEBIAN_RUNTIME_PACKAGE_SECTION libs)
set(CPACK_DEBIAN_DEV_PACKAGE_NAME librkdeploy-rt-dev)
set(CPACK_DEBIAN_DEV_PACKAGE_SECTION libdevel)
set(CPACK_COMPONENT_CLI_DESCRIPTION "rkdeploy command: quantize, evaluate, compile and run detection models for Rockchip NPUs")
set(CPACK_COMPONENT_RUNTIME_DESCRIPTION "rkdeploy embeddable runtime: runs compiled .rkd models on a Rockchip NPU or its simulator")
set(CPACK_DEBIAN_RKNN_PLUGINS_PACKAGE_NAME rkdeploy-rknn-plugins)
set(CPACK_DEBIAN_RKNN_PLUGINS_PACKAGE_SECTION libs)
set(CPACK_COMPONENT_RKNN_PLUGINS_DESCRIPTION "rkdeploy's custom operators for the RKNN runtime: exact fused deformable attention and GridSample on the CPU")
set(CPACK_COMPONENT_DEV_DESCRIPTION "rkdeploy embeddable runtime: C/C++ headers, static library, pkg-config file and example")
# The ELF files of each component, whose NEEDED entries give its Depends.
set(RKD_PACKAGE_ELF_cli $<TARGET_FILE:rkdeploy>)
set(RKD_PACKAGE_ELF_runtime $<TARGET_FILE:rkdeploy_rt>)
set(RKD_PACKAGE_ELF_rknn_plugins "$<TARGET_FILE:rkcst_msdeform_attn>;$<TARGET_FILE:rkcst_grid_sample>")
if(TARGET rkd_py_host)
  list(APPEND CPACK_COMPONENTS_ALL python)
  set(CPACK_DEBIAN_PYTHON_PACKAGE_NAME python3-rkdeploy)
  set(CPACK_DEBIAN_PYTHON_PACKAGE_SECTION python)
  set(CPACK_COMPONENT_PYTHON_DESCRIPTION "rkdeploy for Python: the toolkit's workflows and the embeddable runtime (import rkdeploy)")
  set(RKD_PACKAGE_ELF_python "$<TARGET_FILE:rkd_py_host>;$<TARGET_FILE:rkd_py_rt>")
  # The interpreter the modules were built for (one minor version: CPython's extension ABI).
  string(REGEX MATCH "^[0-9]+" py_major "${RKD_PYTHON_VERSION}")
  string(REGEX MATCH "[0-9]+$" py_minor "${RKD_PYTHON_VERSION}")
  math(EXPR py_next "${py_minor} + 1")
  set(RKD_PYTHON_DEPENDS "python3 (>= ${RKD_PYTHON_VERSION}), python3 (<< ${py_major}.${py_next}), python3-numpy")
endif()
configure_file(${PROJECT_SOURCE_DIR}/cmake/cpack_depends.cmake.in ${CMAKE_BINARY_DIR}/cpack_depends.cmake.gen @ONLY)
file(GENERATE OUTPUT ${CMAKE_BINARY_DIR}/cpack_depends.cmake INPUT ${CMAKE_BINARY_DIR}/cpack_depends.cmake.gen)
set(CPACK_PROJECT_CONFIG_FILE ${CMAKE_BINARY_DIR}/cpack_depends.cmake)
include(CPack)
