# tools/package/install.cmake — what `cmake --install` puts under a prefix, and the .deb CPack
# makes of it (docs/build.md):
#   bin/bareyolo, bin/bareyolo-export           the programs (static but for libonnx, CUDA)
#   share/bareyolo/models/*.yaml                 the model yamls, found relative to bin/
#   include/bareyolo/{kernels,engine,data,models}/**.h   the headers the C++ API includes
#   lib/libbareyolo_*.a                          the layers' static libraries
#   lib/cmake/bareyolo/                          find_package(bareyolo): bareyolo::bareyolo
#   lib/pkgconfig/bareyolo.pc                    the same link line for pkg-config
# Included by the top CMakeLists.txt after the libraries and programs are defined.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)
# Installing (and so cpack) takes the build as it is instead of building every target first:
# the package's ctest then costs seconds, not a rebuild check of the whole tree. Build first.
set(CMAKE_SKIP_INSTALL_ALL_DEPENDENCY TRUE)
set(BAREYOLO_SUMMARY "YOLOv5-family detectors trained and run without a framework (C++20/CUDA)")

install(TARGETS bareyolo RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
if(TARGET bareyolo-export)
  install(TARGETS bareyolo-export RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
endif()
file(GLOB BAREYOLO_MODEL_YAMLS ${PROJECT_SOURCE_DIR}/models/*.yaml)
install(FILES ${BAREYOLO_MODEL_YAMLS} DESTINATION ${CMAKE_INSTALL_DATADIR}/bareyolo/models)
# Every header of the layers the API links; export/ needs libonnx's headers and is left out.
install(DIRECTORY ${PROJECT_SOURCE_DIR}/kernels ${PROJECT_SOURCE_DIR}/engine
                  ${PROJECT_SOURCE_DIR}/data ${PROJECT_SOURCE_DIR}/models
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/bareyolo
        FILES_MATCHING PATTERN "*.h"
        PATTERN "export" EXCLUDE)

# One imported target for users, bareyolo::bareyolo: the API's library, which carries every
# layer below it and their third-party libraries (yaml-cpp, TurboJPEG and libcrypto static,
# threads, the CUDA libraries in a CUDA build) as its link interface.
add_library(bareyolo_package INTERFACE)
target_link_libraries(bareyolo_package INTERFACE bareyolo_api)
set_target_properties(bareyolo_package PROPERTIES EXPORT_NAME bareyolo)
set(BAREYOLO_LAYERS bareyolo_api bareyolo_train bareyolo_models bareyolo_data bareyolo_engine
                    bareyolo_kernels)
install(TARGETS bareyolo_package bareyolo_flags ${BAREYOLO_LAYERS}
        EXPORT bareyoloTargets ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
set(BAREYOLO_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/bareyolo)
install(EXPORT bareyoloTargets NAMESPACE bareyolo:: DESTINATION ${BAREYOLO_CMAKE_DIR})
configure_package_config_file(${CMAKE_CURRENT_LIST_DIR}/bareyoloConfig.cmake.in
                              ${CMAKE_CURRENT_BINARY_DIR}/bareyoloConfig.cmake
                              INSTALL_DESTINATION ${BAREYOLO_CMAKE_DIR})
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/bareyoloConfigVersion.cmake
                                 COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/bareyoloConfig.cmake
              ${CMAKE_CURRENT_BINARY_DIR}/bareyoloConfigVersion.cmake
        DESTINATION ${BAREYOLO_CMAKE_DIR})

# pkg-config: the same link line written out, the layers from the top down, then what they use.
set(BAREYOLO_PC_LIBS)
foreach(layer IN LISTS BAREYOLO_LAYERS)
  string(REPLACE "bareyolo_" "-lbareyolo_" flag ${layer})
  string(APPEND BAREYOLO_PC_LIBS " ${flag}")
endforeach()
string(APPEND BAREYOLO_PC_LIBS " ${YAMLCPP_STATIC} ${TURBOJPEG_STATIC} ${OPENSSL_CRYPTO_LIBRARY}")
set(BAREYOLO_PC_CFLAGS "-std=c++20")
if(BAREYOLO_CUDA)
  string(APPEND BAREYOLO_PC_LIBS " -L${CUDAToolkit_LIBRARY_DIR} -lcublas -lcudart_static"
                                 " ${CUDNN_LIBRARY} ${NCCL_LIBRARY} -lrt")
  string(APPEND BAREYOLO_PC_CFLAGS " -DBAREYOLO_WITH_CUDA=1 -I${CUDNN_INCLUDE_DIR}")
endif()
string(APPEND BAREYOLO_PC_LIBS " -ldl -pthread")
configure_file(${CMAKE_CURRENT_LIST_DIR}/bareyolo.pc.in ${CMAKE_CURRENT_BINARY_DIR}/bareyolo.pc
               @ONLY)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/bareyolo.pc
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)

# `cpack -G DEB` in the build folder: bareyolo_VERSION_amd64.deb, installing under /usr. Its
# shared-library dependencies (libonnx, libprotobuf for bareyolo-export) come from
# dpkg-shlibdeps where it is installed (dpkg-dev); the CUDA libraries are NVIDIA's, not
# Debian's, so a CUDA build's package leaves them to the machine.
set(CPACK_PACKAGE_NAME bareyolo)
set(CPACK_PACKAGE_VENDOR bareyolo)
set(CPACK_PACKAGE_CONTACT "bareyolo maintainers <bareyolo@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY ${BAREYOLO_SUMMARY})
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION science)
find_program(BAREYOLO_DPKG_SHLIBDEPS dpkg-shlibdeps)
if(BAREYOLO_DPKG_SHLIBDEPS AND NOT BAREYOLO_CUDA)
  set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
endif()
include(CPack)
