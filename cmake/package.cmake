# Files for programs built against the C libraries, and for service managers (docs/packaging.md):
#   <prefix>/lib/pkgconfig/mooncake-store.pc, mooncake-te.pc      pkg-config --cflags --libs mooncake-store
#   <prefix>/lib/cmake/Mooncake/MooncakeConfig.cmake (+ version, targets)   find_package(Mooncake)
#   <prefix>/lib/systemd/system/mooncake-*.service                 deploy/systemd, ExecStart in <prefix>/bin
#   <prefix>/lib/sysusers.d/mooncake.conf                          the service user (deploy/sysusers)
#   <prefix>/share/doc/mooncake/examples/                          the configuration files the units read
# The libraries and headers themselves are installed by src/CMakeLists.txt (EXPORT MooncakeTargets).
include(CMakePackageConfigHelpers)

foreach(pc mooncake-te mooncake-store)
  configure_file(${CMAKE_CURRENT_LIST_DIR}/${pc}.pc.in ${CMAKE_BINARY_DIR}/pkgconfig/${pc}.pc @ONLY)
  install(FILES ${CMAKE_BINARY_DIR}/pkgconfig/${pc}.pc DESTINATION lib/pkgconfig)
endforeach()

set(MC_CMAKE_DIR lib/cmake/Mooncake)
install(EXPORT MooncakeTargets NAMESPACE Mooncake:: DESTINATION ${MC_CMAKE_DIR})
configure_file(${CMAKE_CURRENT_LIST_DIR}/MooncakeConfig.cmake.in ${CMAKE_BINARY_DIR}/cmake/MooncakeConfig.cmake @ONLY)
# 0.x: the SONAME's major is the ABI (include/mooncake/version.h), so any 0.y.z satisfies a request for 0.1
write_basic_package_version_file(${CMAKE_BINARY_DIR}/cmake/MooncakeConfigVersion.cmake VERSION ${MC_VERSION}
  COMPATIBILITY SameMajorVersion)
install(FILES ${CMAKE_BINARY_DIR}/cmake/MooncakeConfig.cmake ${CMAKE_BINARY_DIR}/cmake/MooncakeConfigVersion.cmake
  DESTINATION ${MC_CMAKE_DIR})

# The units name /usr/local/bin (the default prefix); installed, they name <prefix>/bin of this install,
# whatever --prefix or DESTDIR it is given. etcd's units in deploy/systemd are examples for etcd's own
# package, not installed.
option(MC_INSTALL_SYSTEMD_UNITS "Install the systemd units and the sysusers.d entry" ON)
if(MC_INSTALL_SYSTEMD_UNITS)
  file(GLOB MC_UNITS ${CMAKE_SOURCE_DIR}/deploy/systemd/mooncake-*.service)
  foreach(u ${MC_UNITS})
    get_filename_component(n ${u} NAME)
    # (staged under a name of its destination, so that installs into different prefixes never share it)
    install(CODE "
      file(READ \"${u}\" unit)
      string(REPLACE \"/usr/local/bin/\" \"\${CMAKE_INSTALL_PREFIX}/bin/\" unit \"\${unit}\")
      string(SHA1 stage \"\$ENV{DESTDIR}\${CMAKE_INSTALL_PREFIX}\")
      set(stage \"${CMAKE_BINARY_DIR}/systemd/\${stage}\")
      file(WRITE \"\${stage}/${n}\" \"\${unit}\")
      file(INSTALL DESTINATION \"\${CMAKE_INSTALL_PREFIX}/lib/systemd/system\" TYPE FILE FILES \"\${stage}/${n}\")
      file(REMOVE_RECURSE \"\${stage}\")")
  endforeach()
  install(FILES ${CMAKE_SOURCE_DIR}/deploy/sysusers/mooncake.conf DESTINATION lib/sysusers.d)
  install(FILES ${CMAKE_SOURCE_DIR}/deploy/master/master.yaml ${CMAKE_SOURCE_DIR}/deploy/master/master-ha.yaml
    ${CMAKE_SOURCE_DIR}/deploy/master/master-embedded-metadata.json ${CMAKE_SOURCE_DIR}/deploy/storage-node/store-node.json
    ${CMAKE_SOURCE_DIR}/deploy/tmpfiles/mooncake-hugepages.conf
    DESTINATION share/doc/mooncake/examples)
endif()
