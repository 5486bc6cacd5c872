/* The product's version: what every program's --version prints and what a store client and its master
 * compare at setup (proto.h). One place, so the two cannot disagree. */
#ifndef MC_COMMON_VERSION_H
#define MC_COMMON_VERSION_H

#define MC_STORE_VERSION "mooncake-c 0.1.0"

#endif
