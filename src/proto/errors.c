/* Name and message of each store error code (the codes travel on the wire; include/mooncake/store_errors.h
 * is their table). Exported by libmooncake_store. */
#include "mooncake/store_errors.h"

const char *mooncake_store_err_name(int code) {
  switch (code) {
#define X_(name, c, msg) \
  case c: return #name;
    MOONCAKE_STORE_ERRORS(X_)
#undef X_
  }
  return "UNKNOWN_ERROR";
}

const char *mooncake_store_strerror(int code) {
  switch (code) {
#define X_(name, c, msg) \
  case c: return msg;
    MOONCAKE_STORE_ERRORS(X_)
#undef X_
  }
  return "Unknown error";
}
