/* The one parser of "host:port" text (master and etcd/Redis addresses, segment names, --master-admin):
 * every address of the project is split here, so IPv6 and bad ports mean the same everywhere. */
#ifndef MC_COMMON_HOSTPORT_H
#define MC_COMMON_HOSTPORT_H
#include <stddef.h>
#include <stdint.h>

/* Splits "host", "host:port", "[v6]", "[v6]:port" or a raw IPv6 address (two or more colons, no port) into
 * host (without brackets, NUL-terminated) and *port (def_port when none is given). Returns 0, or -1 for
 * empty text, an empty host, a host of hostlen bytes or more, a '[' without ']' or with anything but
 * ":port" after it, or a port that is empty, not plain decimal digits, or outside 1..65535. */
int mc_split_host_port(const char *s, char *host, size_t hostlen, uint16_t *port, uint16_t def_port);

/* host and port as one address text: "[host]:port" when host holds a ':' (IPv6), else "host:port". */
void mc_join_host_port(const char *host, unsigned port, char *out, size_t len);

#endif
