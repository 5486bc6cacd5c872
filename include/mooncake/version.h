/* The version of the Mooncake libraries and the mark of what they export.
 *
 * MOONCAKE_VERSION_* is the version of the headers a program is built with; mooncake_version() (mooncake/runtime.h)
 * is the version of the library it runs with. The shared libraries carry SONAME libmooncake_te.so.<MAJOR> and
 * libmooncake_store.so.<MAJOR>: MAJOR changes when a function is removed or changes meaning, or a struct
 * of these headers changes layout (fields are only ever appended). CMake, setup.py and the Python package
 * read the numbers from this file (docs/architecture.md, "Versions and symbols").
 *
 * Every function and variable of the public headers is marked MC_API; the libraries are built with
 * hidden visibility, so nothing else is exported (tests/check_exports.py compares `nm -D` with the
 * headers). */
#ifndef MOONCAKE_VERSION_H
#define MOONCAKE_VERSION_H

#define MOONCAKE_VERSION_MAJOR 0
#define MOONCAKE_VERSION_MINOR 1
#define MOONCAKE_VERSION_PATCH 0
#define MOONCAKE_VERSION_STRING "0.1.0"
/* For comparisons: MOONCAKE_VERSION >= MOONCAKE_VERSION_AT(0, 2, 0). */
#define MOONCAKE_VERSION_AT(major, minor, patch) ((major) * 10000 + (minor) * 100 + (patch))
#define MOONCAKE_VERSION \
  MOONCAKE_VERSION_AT(MOONCAKE_VERSION_MAJOR, MOONCAKE_VERSION_MINOR, MOONCAKE_VERSION_PATCH)

#if defined(__GNUC__)
#define MC_API __attribute__((visibility("default")))
#else
#define MC_API
#endif

#endif
