# CTest script: installs this build into a scratch prefix, then configures, builds and runs
# examples/consumer against it with find_package(attnkit). Proves the installed package works.
#   cmake -DBUILD_DIR=<build> -DSOURCE_DIR=<source> -P consumer_test.cmake
set(prefix "${BUILD_DIR}/_consumer_test/install")
set(cbuild "${BUILD_DIR}/_consumer_test/build")
file(REMOVE_RECURSE "${BUILD_DIR}/_consumer_test")
function(step)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "consumer test: '${ARGN}' failed (${rc})")
  endif()
endfunction()
step(${CMAKE_COMMAND} --install "${BUILD_DIR}" --prefix "${prefix}")
step(${CMAKE_COMMAND} -S "${SOURCE_DIR}/examples/consumer" -B "${cbuild}" "-DCMAKE_PREFIX_PATH=${prefix}")
step(${CMAKE_COMMAND} --build "${cbuild}")
step("${cbuild}/consumer")
