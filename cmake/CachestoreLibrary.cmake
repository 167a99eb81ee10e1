# The cachestore library target, its generated headers and its installed package.
include(GNUInstallDirs)
include(GenerateExportHeader)
include(CMakePackageConfigHelpers)

set(CACHESTORE_GENERATED_INCLUDE_DIR "${PROJECT_BINARY_DIR}/include")
configure_file("${PROJECT_SOURCE_DIR}/cmake/version.h.in"
               "${CACHESTORE_GENERATED_INCLUDE_DIR}/cachestore/version.h" @ONLY)

add_library(cachestore
  src/arch.cu
  src/fused_store_cache.cu
  src/status.cpp
  src/store_index_k.cu
  src/validate.cpp)
add_library(cachestore::cachestore ALIAS cachestore)

generate_export_header(cachestore
  EXPORT_FILE_NAME "${CACHESTORE_GENERATED_INCLUDE_DIR}/cachestore/export.h"
  EXPORT_MACRO_NAME CACHESTORE_EXPORT)

target_include_directories(cachestore
  PUBLIC
    "$<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/include>"
    "$<BUILD_INTERFACE:${CACHESTORE_GENERATED_INCLUDE_DIR}>"
    "$<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>"
  PRIVATE
    "${PROJECT_SOURCE_DIR}/src")
target_compile_features(cachestore PUBLIC cxx_std_17)
target_link_libraries(cachestore PUBLIC CUDA::cudart)
target_compile_options(cachestore PRIVATE
  $<$<COMPILE_LANGUAGE:CUDA>:-lineinfo --expt-relaxed-constexpr -Xptxas=-warn-spills,-warn-lmem-usage>
  $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra>)
set_target_properties(cachestore PROPERTIES
  VERSION ${PROJECT_VERSION}
  SOVERSION ${PROJECT_VERSION_MAJOR}
  POSITION_INDEPENDENT_CODE ON
  CXX_VISIBILITY_PRESET hidden
  CUDA_VISIBILITY_PRESET hidden
  VISIBILITY_INLINES_HIDDEN ON
  CUDA_RUNTIME_LIBRARY Shared
  CUDA_SEPARABLE_COMPILATION OFF)
if(BUILD_SHARED_LIBS)
  # Export exactly the API: nothing from static archives linked into the .so.
  target_link_options(cachestore PRIVATE "LINKER:--exclude-libs,ALL")
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
