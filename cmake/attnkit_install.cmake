include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

install(TARGETS attnkit attnkit_static EXPORT attnkitTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR}
  INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(DIRECTORY include/attnkit DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
if(ATTNKIT_BUILD_TOOLS)
  install(TARGETS attnkit_cli RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
endif()
install(EXPORT attnkitTargets NAMESPACE attnkit:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/attnkit)
configure_package_config_file(cmake/attnkitConfig.cmake.in
  "${CMAKE_CURRENT_BINARY_DIR}/attnkitConfig.cmake"
  INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/attnkit)
write_basic_package_version_file("${CMAKE_CURRENT_BINARY_DIR}/attnkitConfigVersion.cmake"
  COMPATIBILITY SameMinorVersion)
install(FILES "${CMAKE_CURRENT_BINARY_DIR}/attnkitConfig.cmake"
  "${CMAKE_CURRENT_BINARY_DIR}/attnkitConfigVersion.cmake"
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/attnkit)
