/* The C extension mooncake._mooncake: shared argument conversion (docs/python.md, "Conventions": only TypeError,
 * naming the argument) and the types it defines. The extension never raises anything else: failures
 * are return values. Every call that can block runs with the GIL released. */
#ifndef MCPY_H
#define MCPY_H
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

#include "mooncake/store.h"
#include "mooncake/transfer_engine.h"

/* Borrowed strings from a sequence of str, kept alive by refs (owned references). */
struct mcpy_strs {
  PyObject **refs;
  const char **v;
  size_t n;
};
/* Unsigned 64-bit ints from a sequence. */
struct mcpy_u64s {
  uint64_t *v;
  size_t n;
};

/* A non-negative int below 2^64 (anything with __index__); else TypeError naming `what`. 0 / -1. */
int mcpy_u64(PyObject *o, uint64_t *out, const char *what);
/* A str as UTF-8 (borrowed from o); else TypeError. 0 / -1. */
int mcpy_str(PyObject *o, const char **out, const char *what);
/* A list/tuple (any sequence; not None, str or bytes) of str / of unsigned ints. 0 / -1 (TypeError). */
int mcpy_strs(PyObject *o, struct mcpy_strs *out, const char *what);
void mcpy_strs_free(struct mcpy_strs *s);
int mcpy_u64s(PyObject *o, struct mcpy_u64s *out, const char *what);
void mcpy_u64s_free(struct mcpy_u64s *s);
/* A sequence of sequences of unsigned ints, flattened; counts[i] = length of row i. rows = number of
 * rows. 0 / -1 (TypeError). */
int mcpy_u64_rows(PyObject *o, struct mcpy_u64s *flat, size_t **counts, size_t *rows, const char *what);

/* A list of n Python ints. NULL (with an exception) only when out of memory. */
PyObject *mcpy_int_list(const int *v, size_t n);
PyObject *mcpy_i64_list(const int64_t *v, size_t n);
PyObject *mcpy_const_list(long v, size_t n);

/* A ReplicateConfig (or None = defaults) as the native config. The Python-only rules (group_ids length,
 * NoF/DFS counts, prefer_alloc_in_same_node) give *bad (a store ErrorCode for every key). */
struct mcpy_config {
  mc_replicate_config_t c;
  struct mcpy_strs prefs;
  const char *pref1;
  struct mcpy_strs groups; /* group_ids, one per key (n = 0: none) */
  int bad;
};
int mcpy_config(PyObject *o, size_t nkeys, struct mcpy_config *out);
void mcpy_config_free(struct mcpy_config *c);

extern PyTypeObject McpyStoreType, McpyEngineType, McpyBufferHandleType, McpyP2PType, McpyMsgServerType,
    McpyMsgClientType;
/* A BufferHandle owning `data` (malloc'ed, freed with the handle). */
PyObject *mcpy_buffer_handle(void *data, size_t size);

#endif
