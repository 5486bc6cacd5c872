/* Name and message of each transfer-engine error and status, generated from the table in
 * include/mooncake/transfer_engine.h. */
#include "mooncake/transfer_engine.h"

const char *mc_te_err_name(int err) {
  switch (err) {
#define X_(n, e, st, sname, msg) \
  case e: return "ERR_" #n;
    MC_TE_ERRORS(X_)
#undef X_
    case 0: return "OK";
  }
  return "UNKNOWN_ERROR";
}

const char *mc_te_strerror(int err) {
  switch (err) {
#define X_(n, e, st, sname, msg) \
  case e: return msg;
    MC_TE_ERRORS(X_)
#undef X_
    case 0: return "success";
  }
  return "unknown error";
}

const char *mc_te_status_name(int status) {
  switch (status) {
#define X_(n, e, st, sname, msg) \
  case st: return #sname;
    MC_TE_ERRORS(X_)
#undef X_
    case 0: return "OK";
    case MC_TE_STATUS_NOT_SUPPORTED_TRANSPORT: return "NotSupportedTransport";
  }
  return "Unknown";
}

const char *mc_te_task_state_name(int state) {
  static const char *names[] = {"WAITING", "PENDING", "INVALID", "CANCELED", "COMPLETED", "TIMEOUT", "FAILED"};
  return state >= 0 && state <= 6 ? names[state] : "UNKNOWN";
}
