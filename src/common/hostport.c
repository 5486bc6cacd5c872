/* "host:port" text (see hostport.h). */
#include "common/hostport.h"

#include <stdio.h>
#include <string.h>

/* "1".."65535" in plain decimal digits: strtol would also take a sign, leading blanks and "0x". */
static int parse_port(const char *s, uint16_t *port) {
  unsigned long v = 0;
  size_t n = strspn(s, "0123456789");
  if (!n || s[n] || n > 5) return -1;
  for (size_t i = 0; i < n; i++) v = v * 10 + (unsigned long)(s[i] - '0');
  if (v < 1 || v > 65535) return -1;
  *port = (uint16_t)v;
  return 0;
}

int mc_split_host_port(const char *s, char *host, size_t hostlen, uint16_t *port, uint16_t def_port) {
  if (!s || !*s) return -1;
  const char *hs = s, *he, *ps = NULL;
  if (*s == '[') {
    hs = s + 1;
    he = strchr(hs, ']');
    if (!he) return -1;
    if (he[1] == ':') ps = he + 2;
    else if (he[1]) return -1;
  } else {
    const char *c = strchr(s, ':');
    if (c && strchr(c + 1, ':')) he = s + strlen(s); /* a raw IPv6 address: no port */
    else if (c) he = c, ps = c + 1;
    else he = s + strlen(s);
  }
  size_t hl = (size_t)(he - hs);
  if (hl == 0 || hl >= hostlen) return -1;
  uint16_t p = def_port;
  if (ps && parse_port(ps, &p)) return -1;
  memcpy(host, hs, hl);
  host[hl] = 0;
  *port = p;
  return 0;
}

void mc_join_host_port(const char *host, unsigned port, char *out, size_t len) {
  snprintf(out, len, strchr(host, ':') ? "[%s]:%u" : "%s:%u", host, port);
}
