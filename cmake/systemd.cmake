# Readiness notification (docs/packaging.md, "systemd"): mooncake_master, mooncake_store_node and mooncake_client tell the
# service manager READY=1 once they serve and STOPPING=1 when they begin to shut down, through
# sd_notify(3) of libsystemd (Debian libsystemd-dev, installed by scripts/install-deps.sh); the units in
# deploy/systemd are Type=notify. Without the library the programs build and run the same but never notify:
# such a build needs Type=simple in the units (configure prints a warning; MC_SYSTEMD=OFF asks for it).
option(MC_SYSTEMD "Notify systemd of readiness (sd_notify, libsystemd)" ON)
set(MC_HAVE_SYSTEMD OFF CACHE INTERNAL "the daemons link libsystemd and send sd_notify messages")
if(MC_SYSTEMD)
  pkg_check_modules(SYSTEMD IMPORTED_TARGET libsystemd)
  if(SYSTEMD_FOUND)
    foreach(t mooncake_master mooncake_store_node mooncake_client)
      target_link_libraries(${t} PRIVATE PkgConfig::SYSTEMD)
      target_compile_definitions(${t} PRIVATE MC_HAVE_SYSTEMD=1)
    endforeach()
    set(MC_HAVE_SYSTEMD ON CACHE INTERNAL "the daemons link libsystemd and send sd_notify messages")
  else()
    message(WARNING "libsystemd not found (Debian: libsystemd-dev): mooncake_master and mooncake_store_node will "
                    "not send sd_notify readiness; run them with Type=simple units (docs/packaging.md)")
  endif()
endif()
