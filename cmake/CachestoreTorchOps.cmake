# The native torch ops (src/torch/): torch.ops.cachestore.* registered from C++ through PyTorch's
# stable ABI with TORCH_TARGET_VERSION 2.10, so that one build loads in every torch >= 2.10. It
# needs torch's headers, and libtorch_cpu / libtorch_cuda by their sonames (whichever torch the
# process imported provides them at load time; no RPATH to the build's torch). Plain C++: the
# kernels stay in libcachestore.so, found beside it ($ORIGIN).
#
# CACHESTORE_TORCH_OPS: AUTO (the default: built for the Python package when the build's Python
# has torch >= 2.10, else skipped with a message), ON (required), OFF.
set(CACHESTORE_TORCH_OPS AUTO CACHE STRING "Build the native torch ops: AUTO, ON or OFF")
set_property(CACHE CACHESTORE_TORCH_OPS PROPERTY STRINGS AUTO ON OFF)

function(cachestore_add_torch_ops library output_dir)
  if(CACHESTORE_TORCH_OPS STREQUAL "OFF")
    return()
  endif()
  find_package(Python3 COMPONENTS Interpreter)
  set(torch_version "")
  if(Python3_FOUND)
    execute_process(
      COMMAND "${Python3_EXECUTABLE}" -c
        "import os, torch; print(torch.__version__.split('+')[0]); print(os.path.dirname(torch.__file__))"
      OUTPUT_VARIABLE torch_info RESULT_VARIABLE torch_rc ERROR_QUIET
      OUTPUT_STRIP_TRAILING_WHITESPACE)
    if(torch_rc EQUAL 0)
      string(REPLACE "\n" ";" torch_info "${torch_info}")
      list(GET torch_info 0 torch_version)
      list(GET torch_info 1 torch_dir)
    endif()
  endif()
  if(torch_version STREQUAL "" OR torch_version VERSION_LESS 2.10)
    set(why "the build's Python (${Python3_EXECUTABLE}) has no torch >= 2.10 (found '${torch_version}')")
    if(CACHESTORE_TORCH_OPS STREQUAL "ON")
      message(FATAL_ERROR "CACHESTORE_TORCH_OPS=ON: ${why}")
    endif()
    message(STATUS "cachestore: native torch ops skipped: ${why}; cachestore.torch uses its "
                   "Python ops (pip install --no-build-isolation with torch installed builds them)")
    return()
  endif()
  message(STATUS "cachestore: native torch ops against torch ${torch_version} (${torch_dir}), "
                 "stable ABI target 2.10")
  file(GLOB sources CONFIGURE_DEPENDS "${PROJECT_SOURCE_DIR}/src/torch/*.cpp")
  add_library(cachestore_torch SHARED ${sources})
  target_include_directories(cachestore_torch SYSTEM PRIVATE "${torch_dir}/include")
  target_include_directories(cachestore_torch PRIVATE
    "${PROJECT_SOURCE_DIR}/include" "${CACHESTORE_GENERATED_INCLUDE_DIR}")
  target_compile_definitions(cachestore_torch PRIVATE
    USE_CUDA TORCH_TARGET_VERSION=0x020a000000000000)
  target_compile_options(cachestore_torch PRIVATE -Wall -Wextra)
  target_link_libraries(cachestore_torch PRIVATE ${library}
    "${torch_dir}/lib/libtorch_cpu.so" "${torch_dir}/lib/libtorch_cuda.so")
  target_link_options(cachestore_torch PRIVATE "LINKER:--no-undefined")
  set_target_properties(cachestore_torch PROPERTIES
    CXX_VISIBILITY_PRESET hidden
    VISIBILITY_INLINES_HIDDEN ON
    LIBRARY_OUTPUT_DIRECTORY "${output_dir}"
    BUILD_WITH_INSTALL_RPATH ON
    INSTALL_RPATH "$ORIGIN")
endfunction()
