# Optional CUDA parts: the CUDA language (for the CUDA backend's kernels,
# runtime/backend/cuda), the CUDA runtime and cuBLAS (CUDAToolkit), and NCCL.
#
# Sets, for the rest of the build:
#   PARTITION_HAVE_CUDA  ON when the CUDA compiler and toolkit were found and
#                        the CUDA language is enabled (targets
#                        CUDA::cudart_static, CUDA::cublas, CUDA::cublasLt
#                        exist).
#   PARTITION_HAVE_NCCL  ON when, in addition, NCCL >= 2.18 was found
#                        (imported target partition::nccl, which brings
#                        CUDA::cudart_static with it: one CUDA runtime in
#                        every binary, linked statically).
# A machine without CUDA or NCCL configures and builds everything else; the
# CUDA parts are then skipped with one status line saying why.
#
# Never link CUDA::cuda_driver: its stub makes binaries fail to load where
# there is no driver, and everything must still run (CPU path) there.

# Default ON: the parts are built whenever the toolkit and NCCL are found.
# (An ON default that depends on nothing keeps a cache configured before CUDA
# was installed from disabling them for good.)
option(PARTITION_ENABLE_CUDA
  "Build the CUDA/NCCL parts when the CUDA toolkit and NCCL are found" ON)

set(PARTITION_HAVE_CUDA OFF)
set(PARTITION_HAVE_NCCL OFF)

# Joins its arguments (long lines split in pieces) into one status line; no
# semicolons in them (CMake would take them for list separators).
function(partition_cuda_status)
  list(JOIN ARGV "" text)
  message(STATUS "CUDA backend parts: ${text}")
endfunction()

if(NOT PARTITION_ENABLE_CUDA)
  partition_cuda_status("not built (PARTITION_ENABLE_CUDA=OFF)")
  return()
endif()

include(CheckLanguage)
check_language(CUDA)
if(NOT CMAKE_CUDA_COMPILER)
  partition_cuda_status("not built (no CUDA compiler found: put nvcc on PATH "
                        "or set CMAKE_CUDA_COMPILER)")
  return()
endif()
find_package(CUDAToolkit QUIET)
if(NOT CUDAToolkit_FOUND)
  partition_cuda_status("not built (nvcc found but not the CUDA toolkit)")
  return()
endif()

# Ampere and Hopper (A100, H100/H200) unless the user chose.
if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES OR CMAKE_CUDA_ARCHITECTURES STREQUAL "")
  set(CMAKE_CUDA_ARCHITECTURES 80 90 CACHE STRING "CUDA architectures")
endif()
if(CCACHE_PROGRAM)
  set(CMAKE_CUDA_COMPILER_LAUNCHER ${CCACHE_PROGRAM})
endif()
enable_language(CUDA)
set(CMAKE_CUDA_STANDARD 17)
set(CMAKE_CUDA_STANDARD_REQUIRED ON)
set(PARTITION_HAVE_CUDA ON)

# NCCL has no CMake package: look next to the toolkit, then under NCCL_HOME
# (or NCCL_ROOT), then the system paths.
find_path(NCCL_INCLUDE_DIR nccl.h
  HINTS ${CUDAToolkit_INCLUDE_DIRS} ENV NCCL_HOME ENV NCCL_ROOT
  PATH_SUFFIXES include)
find_library(NCCL_LIBRARY nccl
  HINTS ${CUDAToolkit_LIBRARY_DIR} ENV NCCL_HOME ENV NCCL_ROOT
  PATH_SUFFIXES lib lib64)

set(_partition_nccl_version "")
if(NCCL_INCLUDE_DIR AND EXISTS "${NCCL_INCLUDE_DIR}/nccl.h")
  file(STRINGS "${NCCL_INCLUDE_DIR}/nccl.h" _partition_nccl_defines
       REGEX "^#define NCCL_(MAJOR|MINOR|PATCH) +[0-9]+")
  foreach(part MAJOR MINOR PATCH)
    set(_partition_nccl_${part} 0)
    foreach(line IN LISTS _partition_nccl_defines)
      if(line MATCHES "^#define NCCL_${part} +([0-9]+)")
        set(_partition_nccl_${part} ${CMAKE_MATCH_1})
      endif()
    endforeach()
  endforeach()
  set(_partition_nccl_version
      "${_partition_nccl_MAJOR}.${_partition_nccl_MINOR}.${_partition_nccl_PATCH}")
endif()

string(REPLACE ";" "," _partition_cuda_archs "${CMAKE_CUDA_ARCHITECTURES}")
set(_partition_cuda_what
    "CUDA ${CUDAToolkit_VERSION}, architectures ${_partition_cuda_archs}")
if(NOT NCCL_INCLUDE_DIR OR NOT NCCL_LIBRARY OR NOT EXISTS "${NCCL_LIBRARY}")
  partition_cuda_status("CUDA parts built (${_partition_cuda_what}), NCCL "
                        "parts not built (nccl.h or libnccl not found: set "
                        "NCCL_HOME)")
  return()
endif()
# ncclCommSplit is 2.18; non-blocking communicators and ncclAvg are older.
if(_partition_nccl_version VERSION_LESS 2.18)
  partition_cuda_status("CUDA parts built (${_partition_cuda_what}), NCCL "
                        "parts not built (NCCL ${_partition_nccl_version} at "
                        "${NCCL_INCLUDE_DIR} is older than 2.18)")
  return()
endif()

if(NOT TARGET partition::nccl)
  add_library(partition::nccl UNKNOWN IMPORTED GLOBAL)
  set_target_properties(partition::nccl PROPERTIES
    IMPORTED_LOCATION "${NCCL_LIBRARY}"
    INTERFACE_INCLUDE_DIRECTORIES "${NCCL_INCLUDE_DIR}"
    INTERFACE_LINK_LIBRARIES CUDA::cudart_static)
endif()
set(PARTITION_HAVE_NCCL ON)
partition_cuda_status("built (${_partition_cuda_what}, NCCL "
                      "${_partition_nccl_version} at ${NCCL_LIBRARY})")
