/* Readiness for the service manager (deploy/systemd, docs/packaging.md): the daemons send sd_notify(3)
 * messages -- READY=1 once they serve, STOPPING=1 when they begin to shut down -- through libsystemd when
 * the build has it (cmake/systemd.cmake defines MC_HAVE_SYSTEMD); without it, sd_notify does nothing. */
#ifndef MC_TOOLS_SERVICE_NOTIFY_H
#define MC_TOOLS_SERVICE_NOTIFY_H

#ifdef MC_HAVE_SYSTEMD
#include <systemd/sd-daemon.h>
#else
static inline int sd_notify(int unset_environment, const char *state) {
  (void)unset_environment, (void)state;
  return 0;
}
#endif

#endif
