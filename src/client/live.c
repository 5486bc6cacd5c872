/* The store's part of the process lifecycle (common/lifecycle.h; docs/store-client.md, "Process
 * lifecycle: exit and signals"): every handle is in the process's registry from create to destroy, is
 * torn down at exit(), and on SIGINT/SIGTERM/SIGHUP unless an embedded Python interpreter runs (Python's
 * own signal handling stays untouched; its atexit closes the stores). A teardown of the registry takes the
 * handle's life lock for writing, as destroy does, and leaves the handle for destroy to free. */
#include <dlfcn.h>

#include "client/client.h"
#include "common/util.h"

static void store_teardown(struct mc_lifecycle *n) {
  mc_store_drop_backend(mc_container_of(n, struct mc_store, lc));
}

static int python_embedded(void) {
  int (*initialized)(void) = (int (*)(void))dlsym(RTLD_DEFAULT, "Py_IsInitialized");
  return initialized && initialized();
}

void mc_live_add(struct mc_store *s) {
  mc_lifecycle_add(&s->lc, store_teardown);
  mc_lifecycle_watch(&s->lc, MC_LIFECYCLE_AT_EXIT | (python_embedded() ? 0 : MC_LIFECYCLE_ON_SIGNAL));
}

void mc_live_remove(struct mc_store *s) { mc_lifecycle_remove(&s->lc); }
