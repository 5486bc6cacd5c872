/* Fuzz target: control RPC frame headers. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "net/ctrl_rpc.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  uint8_t hdr[9] = {0};
  memcpy(hdr, data, size < 9 ? size : 9);
  int type, legacy;
  uint64_t len;
  if (mc_rpc_decode_header(hdr, 1 << 20, &type, &len, &legacy) == 0) {
    if (type < 0 || type > 3 || len > (1 << 20)) abort();
  }
  return 0;
}
