# The cachestore library target, its generated headers and its installed package.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)
include(${CMAKE_CURRENT_LIST_DIR}/CachestoreTorchOps.cmake)

set(CACHESTORE_GENERATED_INCLUDE_DIR "${PROJECT_BINARY_DIR}/include")
configure_file("${PROJECT_SOURCE_DIR}/cmake/version.h.in"
               "${CACHESTORE_GENERATED_INCLUDE_DIR}/cachestore/version.h" @ONLY)

# One set of objects: the library (static, or shared with BUILD_SHARED_LIBS) and, for the
# tests of a static build, a shared library from the same objects (symbol check, ctypes, C).
# One translation unit per layout or cache type (src/instantiations/): a layout added there is
# built without touching this list, and a 2-core build compiles two layouts at a time.
file(GLOB CACHESTORE_INSTANTIATIONS CONFIGURE_DEPENDS "${PROJECT_SOURCE_DIR}/src/instantiations/*.cu")
# The host side alone, every launcher refusing (src/no_kernels.cpp): for the Python package test
# on machines without an NVIDIA driver, where no kernel could run; never an installed build.
option(CACHESTORE_HOST_ONLY "Build without kernels (testing the host side without a GPU)" OFF)
if(CACHESTORE_HOST_ONLY)
  set(CACHESTORE_INSTANTIATIONS "${PROJECT_SOURCE_DIR}/src/no_kernels.cpp")
endif()
add_library(cachestore_objects OBJECT
  src/arch.cu
  src/c_api.cpp
  src/c_api_tables.cpp
  src/check.cpp
  src/check_index_k.cpp
  src/check_mla.cpp
  src/check_move.cpp
  src/check_paged_kv.cpp
  src/status.cpp
  src/stores.cpp
  ${CACHESTORE_INSTANTIATIONS})
target_include_directories(cachestore_objects
  PUBLIC
    "$<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/include>"
    "$<BUILD_INTERFACE:${CACHESTORE_GENERATED_INCLUDE_DIR}>"
  PRIVATE
    "${PROJECT_SOURCE_DIR}/src")
target_link_libraries(cachestore_objects PUBLIC CUDA::cudart)
target_compile_features(cachestore_objects PUBLIC cxx_std_17)
target_compile_options(cachestore_objects PRIVATE
  $<$<COMPILE_LANGUAGE:CUDA>:-lineinfo --expt-relaxed-constexpr -Xptxas=-warn-spills,-warn-lmem-usage>
  $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra>)
set_target_properties(cachestore_objects PROPERTIES
  POSITION_INDEPENDENT_CODE ON
  CXX_VISIBILITY_PRESET hidden
  CUDA_VISIBILITY_PRESET hidden
  VISIBILITY_INLINES_HIDDEN ON
  CUDA_SEPARABLE_COMPILATION OFF)

function(cachestore_finish_library target)
  target_include_directories(${target} PUBLIC
    "$<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/include>"
    "$<BUILD_INTERFACE:${CACHESTORE_GENERATED_INCLUDE_DIR}>"
    "$<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>")
  target_compile_features(${target} PUBLIC cxx_std_17)
  target_link_libraries(${target} PUBLIC CUDA::cudart)
  set_target_properties(${target} PROPERTIES
    VERSION ${PROJECT_VERSION}
    SOVERSION ${PROJECT_VERSION_MAJOR}
    LINKER_LANGUAGE CXX
    CUDA_RUNTIME_LIBRARY Shared)
  get_target_property(type ${target} TYPE)
  if(type STREQUAL "SHARED_LIBRARY")
    # Export exactly the API: nothing from the archives linked into the .so.
    target_link_options(${target} PRIVATE "LINKER:--exclude-libs,ALL")
  endif()
endfunction()

add_library(cachestore $<TARGET_OBJECTS:cachestore_objects>)
add_library(cachestore::cachestore ALIAS cachestore)
cachestore_finish_library(cachestore)

if(BUILD_SHARED_LIBS)
  set(CACHESTORE_SHARED_TARGET cachestore)
elseif(CACHESTORE_BUILD_TESTS)
  add_library(cachestore_shared SHARED $<TARGET_OBJECTS:cachestore_objects>)
  cachestore_finish_library(cachestore_shared)
  set_target_properties(cachestore_shared PROPERTIES
    OUTPUT_NAME cachestore
    LIBRARY_OUTPUT_DIRECTORY "${PROJECT_BINARY_DIR}/shared")
  set(CACHESTORE_SHARED_TARGET cachestore_shared)
endif()
# A development build's native torch ops, beside its shared library (only when asked for:
# -DCACHESTORE_TORCH_OPS=ON; the Python package builds its own below).
if(CACHESTORE_TORCH_OPS STREQUAL "ON" AND CACHESTORE_SHARED_TARGET AND NOT SKBUILD)
  get_target_property(shared_dir ${CACHESTORE_SHARED_TARGET} LIBRARY_OUTPUT_DIRECTORY)
  if(NOT shared_dir)
    set(shared_dir "${PROJECT_BINARY_DIR}")
  endif()
  cachestore_add_torch_ops(${CACHESTORE_SHARED_TARGET} "${shared_dir}")
endif()

# The Python package's library (pyproject.toml, scikit-build-core sets SKBUILD): the same objects
# as a shared library with the CUDA runtime linked statically, so that the wheel needs only the
# driver (libcuda.so.1) and works next to any PyTorch build whatever CUDA runtime it bundles.
# Exports exactly the C ABI (--exclude-libs); installed as cachestore/libcachestore.so.
if(SKBUILD)
  add_library(cachestore_python SHARED $<TARGET_OBJECTS:cachestore_objects>)
  target_link_libraries(cachestore_python PRIVATE CUDA::cudart_static)
  set_target_properties(cachestore_python PROPERTIES
    OUTPUT_NAME cachestore
    LINKER_LANGUAGE CXX
    CUDA_RUNTIME_LIBRARY Static
    LIBRARY_OUTPUT_DIRECTORY "${PROJECT_BINARY_DIR}/python")
  target_link_options(cachestore_python PRIVATE "LINKER:--exclude-libs,ALL" "LINKER:--as-needed")
  install(TARGETS cachestore_python LIBRARY DESTINATION cachestore)
  cachestore_add_torch_ops(cachestore_python "${PROJECT_BINARY_DIR}/python")
  if(TARGET cachestore_torch)
    install(TARGETS cachestore_torch LIBRARY DESTINATION cachestore)
  endif()
  return()  # the wheel holds the Python package only: no headers, archives or CMake files
endif()

install(TARGETS cachestore EXPORT cachestoreTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(DIRECTORY include/cachestore DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(DIRECTORY "${CACHESTORE_GENERATED_INCLUDE_DIR}/cachestore"
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(EXPORT cachestoreTargets
  NAMESPACE cachestore::
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/cachestore)
configure_package_config_file(cmake/cachestoreConfig.cmake.in
  "${PROJECT_BINARY_DIR}/cachestoreConfig.cmake"
  INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/cachestore)
write_basic_package_version_file("${PROJECT_BINARY_DIR}/cachestoreConfigVersion.cmake"
  COMPATIBILITY SameMinorVersion)
install(FILES
  "${PROJECT_BINARY_DIR}/cachestoreConfig.cmake"
  "${PROJECT_BINARY_DIR}/cachestoreConfigVersion.cmake"
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/cachestore)
