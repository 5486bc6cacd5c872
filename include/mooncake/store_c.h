/* Compatibility header: upstream Mooncake's name for the store client C API (docs/store-client.md, "C API"). */
#ifndef MOONCAKE_STORE_C_H
#define MOONCAKE_STORE_C_H
#include "mooncake/store.h"
#endif
