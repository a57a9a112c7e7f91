# Third-party dependencies, found where the project's setup step installed them (scripts/deps.sh):
#   CUTLASS/CuTe headers from the pinned nvidia-cutlass wheel (pip install --no-deps --target .deps)
#   GoogleTest from the system, or its sources (Debian's googletest) copied to .deps/googletest.
set(ATTNKIT_DEPS_DIR "${PROJECT_SOURCE_DIR}/.deps" CACHE PATH "Where scripts/deps.sh installs dependencies")

if(ATTNKIT_WITH_CUDA)
  find_path(ATTNKIT_CUTLASS_INCLUDE_DIR cute/tensor.hpp
    HINTS "${ATTNKIT_DEPS_DIR}/cutlass/cutlass_library/source/include" ENV CUTLASS_INCLUDE_DIR
    NO_DEFAULT_PATH)
  if(NOT ATTNKIT_CUTLASS_INCLUDE_DIR AND NOT DEFINED ENV{CUTLASS_INCLUDE_DIR})
    # A build that did not start from scripts/build.sh (pip install .): install them now.
    message(STATUS "attnkit: CUTLASS headers not in ${ATTNKIT_DEPS_DIR}; running scripts/deps.sh cutlass")
    execute_process(COMMAND bash "${PROJECT_SOURCE_DIR}/scripts/deps.sh" cutlass
                    RESULT_VARIABLE _deps_rc)
    unset(ATTNKIT_CUTLASS_INCLUDE_DIR CACHE)
    find_path(ATTNKIT_CUTLASS_INCLUDE_DIR cute/tensor.hpp
      HINTS "${ATTNKIT_DEPS_DIR}/cutlass/cutlass_library/source/include" NO_DEFAULT_PATH)
  endif()
  if(NOT ATTNKIT_CUTLASS_INCLUDE_DIR)
    message(FATAL_ERROR "CUTLASS/CuTe headers not found. Run scripts/deps.sh (installs the pinned "
                        "nvidia-cutlass wheel into .deps/), or set CUTLASS_INCLUDE_DIR.")
  endif()
  message(STATUS "attnkit: CUTLASS headers in ${ATTNKIT_CUTLASS_INCLUDE_DIR}")
  set(ATTNKIT_CUDA_GENCODE "")
  foreach(arch IN LISTS ATTNKIT_CUDA_ARCHS)
    list(APPEND ATTNKIT_CUDA_GENCODE "-gencode=arch=compute_${arch},code=sm_${arch}")
  endforeach()
  set(ATTNKIT_HAS_SM90A OFF)
  if("90a" IN_LIST ATTNKIT_CUDA_ARCHS)
    set(ATTNKIT_HAS_SM90A ON)
  endif()
endif()

if(ATTNKIT_BUILD_TESTS)
  find_package(GTest QUIET)
  if(NOT GTest_FOUND)
    foreach(src "${ATTNKIT_DEPS_DIR}/googletest" "/usr/src/googletest")
      if(EXISTS "${src}/CMakeLists.txt")
        set(INSTALL_GTEST OFF CACHE BOOL "" FORCE)
        add_subdirectory("${src}" "${CMAKE_BINARY_DIR}/_deps/googletest" EXCLUDE_FROM_ALL)
        add_library(GTest::gtest ALIAS gtest)
        set(GTest_FOUND ON)
        break()
      endif()
    endforeach()
  endif()
  if(NOT GTest_FOUND)
    message(FATAL_ERROR "GoogleTest not found: install libgtest-dev or run scripts/deps.sh")
  endif()
endif()
