# What `cmake --install` puts where, by component, so that a packager (or the Python wheel)
# installs only its part:
#   runtime      libringfeed.so.0 (and its versioned file)         ${CMAKE_INSTALL_LIBDIR}
#   development  the public headers                                ${CMAKE_INSTALL_INCLUDEDIR}
#                libringfeed.so (the link-time name), libringfeed.a ${CMAKE_INSTALL_LIBDIR}
#                the CMake package (ringfeed::ringfeed, ringfeed::ringfeed_static)
#                                                    ${CMAKE_INSTALL_LIBDIR}/cmake/ringfeed
#                ringfeed.pc                         ${CMAKE_INSTALL_LIBDIR}/pkgconfig
#   tools        ringfeed-bench, -pack, -inspect, -gen              ${CMAKE_INSTALL_BINDIR}
# (the tools' rules are in tools/ and datasets/). ctest "install" installs each component and
# builds a consumer against the result.
include(CMakePackageConfigHelpers)
set(RF_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/ringfeed)

install(TARGETS ringfeed EXPORT ringfeedTargets
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT runtime
                NAMELINK_COMPONENT development)
install(TARGETS ringfeed_static EXPORT ringfeedTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT development)
install(FILES include/ringfeed.h include/ringfeed_shards.h
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} COMPONENT development)

install(EXPORT ringfeedTargets NAMESPACE ringfeed:: DESTINATION ${RF_CMAKE_DIR}
        COMPONENT development)
set(RF_PACKAGE_CUDA ${_want_cuda})
set(RF_PACKAGE_CURL ${_want_curl})
configure_package_config_file(cmake/ringfeedConfig.cmake.in
                              ${PROJECT_BINARY_DIR}/ringfeedConfig.cmake
                              INSTALL_DESTINATION ${RF_CMAKE_DIR})
# 0.x: a minor release may change the API and rf_config's size (fields are appended), so a
# consumer asking for 0.1 accepts 0.1.x only; from 1.0 the rule becomes SameMajorVersion.
write_basic_package_version_file(${PROJECT_BINARY_DIR}/ringfeedConfigVersion.cmake
                                 COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/ringfeedConfig.cmake
              ${PROJECT_BINARY_DIR}/ringfeedConfigVersion.cmake
        DESTINATION ${RF_CMAKE_DIR} COMPONENT development)

# ringfeed.pc finds its prefix from its own place (${pcfiledir}), so the file is right wherever
# `cmake --install --prefix` puts it.
file(RELATIVE_PATH RF_PC_PREFIX_FROM_PCDIR ${CMAKE_INSTALL_FULL_LIBDIR}/pkgconfig
     ${CMAKE_INSTALL_PREFIX})
string(REGEX REPLACE "/$" "" RF_PC_PREFIX_FROM_PCDIR "/${RF_PC_PREFIX_FROM_PCDIR}")
set(RF_PC_LIBS_PRIVATE "-lpthread -lm")
# Remote shards (src/io/remote*.c) link libcurl when the build found it: as -lcurl, not
# Requires.private, because `pkg-config --static libcurl` names every library curl itself was
# built with (nghttp2, ssh2, ldap, ...), whose development files Debian does not install with
# libcurl4-openssl-dev; the shared libcurl is what a static libringfeed links.
if(_want_curl)
  string(APPEND RF_PC_LIBS_PRIVATE " -lcurl")
endif()
if(_want_cuda)
  # libringfeed.a's CUDA backend: the static runtime and what it needs, and the C++ runtime
  # for nvcc's host code.
  string(APPEND RF_PC_LIBS_PRIVATE " ${CUDA_cudart_static_LIBRARY} -ldl -lrt -lstdc++")
endif()
configure_file(cmake/ringfeed.pc.in ${PROJECT_BINARY_DIR}/ringfeed.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/ringfeed.pc
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig COMPONENT development)
