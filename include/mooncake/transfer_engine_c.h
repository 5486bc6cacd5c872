/* Upstream's header name; includes the real one so upstream C programs build unchanged. */
#include "mooncake/transfer_engine.h"
