/* mooncake._mooncake.Store: the data methods of MooncakeDistributedStore (docs/python.md, "What is there") over
 * libmooncake_store. The Python subclass (mooncake/store.py) adds setup's argument forms and the P2
 * names. Failures are return values; the GIL is released around every library call (docs/python.md, "Conventions"); the
 * library handle lives as long as the object, so close() never frees memory another thread may use. */
#include <stdlib.h>
#include <string.h>

#include "mcpy.h"

typedef struct {
  PyObject_HEAD mooncake_store_t h;
  int ready;        /* setup succeeded and close() not called since (the library's own state may differ
                       after an atexit teardown: it then answers with its not-initialized values) */
  PyObject *engine; /* the engine object a setup(engine=...) borrowed, kept alive while set up */
  PyObject *weak;
} StoreObj;

#define NOT_INIT MC_INVALID_PARAMS
#define KW(...) static char *kwl[] = {__VA_ARGS__, NULL}

static PyObject *Store_new(PyTypeObject *t, PyObject *a, PyObject *k) {
  StoreObj *self = (StoreObj *)t->tp_alloc(t, 0);
  if (!self) return NULL;
  self->h = mooncake_store_create();
  if (!self->h) {
    Py_DECREF(self);
    return PyErr_NoMemory();
  }
  return (PyObject *)self;
}

static void Store_dealloc(StoreObj *self) {
  if (self->weak) PyObject_ClearWeakRefs((PyObject *)self);
  mooncake_store_t h = self->h;
  self->h = NULL;
  Py_BEGIN_ALLOW_THREADS mooncake_store_destroy(h);
  Py_END_ALLOW_THREADS Py_CLEAR(self->engine);
  Py_TYPE(self)->tp_free((PyObject *)self);
}

/* ------------------------------------------------------------------ lifecycle */

/* _setup(local_hostname, metadata_server, global_segment_size, local_buffer_size, protocol,
 *        rdma_devices, master_server_addr, engine=None, engine_ptr=0, zone=None,
 *        enable_client_http_server=False, client_http_port=9300, tenant_id=None, ssd_path=None,
 *        ssd_quota=0) -> int */
static PyObject *Store_setup(StoreObj *self, PyObject *args, PyObject *kw) {
  KW("local_hostname", "metadata_server", "global_segment_size", "local_buffer_size", "protocol", "rdma_devices",
     "master_server_addr", "engine", "engine_ptr", "zone", "enable_client_http_server", "client_http_port",
     "tenant_id", "ssd_path", "ssd_quota");
  const char *host, *meta, *proto, *dev, *master, *zone = NULL, *tenant = NULL, *ssd = NULL;
  PyObject *gss_o, *lbs_o, *engine = Py_None, *eptr_o = NULL, *quota_o = NULL;
  uint64_t gss, lbs, eptr = 0, quota = 0;
  int http = 0, http_port = 9300;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "ssOOsss|OOzpizzO", kwl, &host, &meta, &gss_o, &lbs_o, &proto, &dev,
                                   &master, &engine, &eptr_o, &zone, &http, &http_port, &tenant, &ssd, &quota_o))
    return NULL;
  if (mcpy_u64(gss_o, &gss, "global_segment_size") || mcpy_u64(lbs_o, &lbs, "local_buffer_size") ||
      (eptr_o && mcpy_u64(eptr_o, &eptr, "engine_ptr")) || (quota_o && mcpy_u64(quota_o, &quota, "ssd_quota")))
    return NULL;
  mc_store_config_t c = {host, meta,      gss,    lbs, proto, dev, master, zone, (void *)(uintptr_t)eptr,
                         http, http_port, tenant, ssd, quota};
  int rc;
  Py_BEGIN_ALLOW_THREADS rc = mc_store_setup(self->h, &c);
  Py_END_ALLOW_THREADS self->ready = rc == 0;
  Py_CLEAR(self->engine);
  if (!rc && eptr) {
    Py_INCREF(engine);
    self->engine = engine;
  }
  return PyLong_FromLong(rc);
}

/* _setup_dummy(mem_pool_size, local_buffer_size, server_address) -> int (docs/standalone.md): every later
 * call of this object goes to the real client process through the library's standalone mode. */
static PyObject *Store_setup_dummy(StoreObj *self, PyObject *args, PyObject *kw) {
  KW("mem_pool_size", "local_buffer_size", "server_address");
  PyObject *pool_o, *lbs_o;
  const char *addr;
  uint64_t pool, lbs;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "OOs", kwl, &pool_o, &lbs_o, &addr) ||
      mcpy_u64(pool_o, &pool, "mem_pool_size") || mcpy_u64(lbs_o, &lbs, "local_buffer_size"))
    return NULL;
  int rc;
  Py_BEGIN_ALLOW_THREADS rc = mc_store_setup_dummy(self->h, pool, lbs, addr);
  Py_END_ALLOW_THREADS if (!rc) { /* a failure leaves the object as it was */
    self->ready = 1;
    Py_CLEAR(self->engine);
  }
  return PyLong_FromLong(rc);
}

static PyObject *Store_alloc_from_mem_pool(StoreObj *self, PyObject *args, PyObject *kw) {
  KW("size");
  PyObject *n_o;
  uint64_t n;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "O", kwl, &n_o) || mcpy_u64(n_o, &n, "size")) return NULL;
  return PyLong_FromUnsignedLongLong(mc_store_alloc_from_mem_pool(self->h, (size_t)n));
}

static PyObject *Store_close(StoreObj *self, PyObject *unused) {
  Py_BEGIN_ALLOW_THREADS mc_store_close(self->h);
  Py_END_ALLOW_THREADS self->ready = 0;
  Py_CLEAR(self->engine);
  return PyLong_FromLong(0);
}

static PyObject *Store_health_check(StoreObj *self, PyObject *unused) {
  int rc;
  Py_BEGIN_ALLOW_THREADS rc = mooncake_store_health_check(self->h);
  Py_END_ALLOW_THREADS return PyLong_FromLong(rc);
}

static PyObject *Store_get_hostname(StoreObj *self, PyObject *unused) {
  char buf[512] = "";
  if (mooncake_store_get_hostname(self->h, buf, sizeof(buf))) buf[0] = 0;
  return PyUnicode_FromString(buf);
}

/* ------------------------------------------------------------------ writes */

/* A contiguous buffer-protocol object; TypeError otherwise. */
static int get_value(PyObject *o, Py_buffer *v, const char *what) {
  if (PyObject_GetBuffer(o, v, PyBUF_ANY_CONTIGUOUS) == 0) return 0;
  PyErr_Clear();
  PyErr_Format(PyExc_TypeError, "%s: expected a contiguous bytes-like object, got %s", what, Py_TYPE(o)->tp_name);
  return -1;
}

static PyObject *write_copy(StoreObj *self, PyObject *args, PyObject *kw, int flags) {
  KW("key", "value", "config");
  PyObject *key_o, *val_o, *cfg_o = Py_None;
  const char *key;
  Py_buffer v;
  struct mcpy_config c;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "OO|O", kwl, &key_o, &val_o, &cfg_o) || mcpy_str(key_o, &key, "key") ||
      get_value(val_o, &v, "value"))
    return NULL;
  if (mcpy_config(cfg_o, 0, &c)) {
    PyBuffer_Release(&v);
    return NULL;
  }
  int rc = c.bad;
  if (!rc) {
    Py_BEGIN_ALLOW_THREADS rc = mc_store_write(self->h, key, v.buf, (size_t)v.len, &c.c, flags | MC_WRITE_COPY);
    Py_END_ALLOW_THREADS
  }
  mcpy_config_free(&c);
  PyBuffer_Release(&v);
  return PyLong_FromLong(rc);
}

static PyObject *Store_put(StoreObj *self, PyObject *a, PyObject *k) { return write_copy(self, a, k, 0); }
static PyObject *Store_upsert(StoreObj *self, PyObject *a, PyObject *k) { return write_copy(self, a, k, MC_WRITE_UPSERT); }

static PyObject *write_from(StoreObj *self, PyObject *args, PyObject *kw, int flags) {
  KW("key", "buffer_ptr", "size", "config");
  PyObject *key_o, *p_o, *n_o, *cfg_o = Py_None;
  const char *key;
  uint64_t p, n;
  struct mcpy_config c;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "OOO|O", kwl, &key_o, &p_o, &n_o, &cfg_o) || mcpy_str(key_o, &key, "key") ||
      mcpy_u64(p_o, &p, "buffer_ptr") || mcpy_u64(n_o, &n, "size") || mcpy_config(cfg_o, 0, &c))
    return NULL;
  int rc = c.bad;
  if (!rc && !p && n) rc = MC_INVALID_PARAMS;
  if (!rc) {
    Py_BEGIN_ALLOW_THREADS rc = mc_store_write(self->h, key, (void *)(uintptr_t)p, (size_t)n, &c.c, flags);
    Py_END_ALLOW_THREADS
  }
  mcpy_config_free(&c);
  return PyLong_FromLong(rc);
}

static PyObject *Store_put_from(StoreObj *self, PyObject *a, PyObject *k) { return write_from(self, a, k, 0); }
static PyObject *Store_upsert_from(StoreObj *self, PyObject *a, PyObject *k) { return write_from(self, a, k, MC_WRITE_UPSERT); }

/* Runs a batch write of n keys (ptrs/sizes parallel), results into r. A NULL pointer with a size fails
 * the whole call in the library: every key -600. */
static void batch_write(StoreObj *self, const struct mcpy_strs *keys, const void *const *ptrs, const size_t *sizes,
                        const struct mcpy_config *c, int flags, int *r) {
  size_t n = keys->n;
  int rc = c->bad;
  if (!rc) {
    const char *const *g = c->groups.n == n ? (const char *const *)c->groups.v : NULL; /* docs/master.md, "Key groups" */
    Py_BEGIN_ALLOW_THREADS rc = mc_store_batch_write_grouped(self->h, keys->v, ptrs, sizes, n, &c->c, g, flags, r);
    Py_END_ALLOW_THREADS if (rc) rc = MC_INVALID_PARAMS;
  }
  for (size_t i = 0; rc && i < n; i++) r[i] = rc;
}

/* batch_put_from / batch_upsert_from(keys, buffer_ptrs, sizes, config=None) -> list[int] */
static PyObject *batch_from(StoreObj *self, PyObject *args, PyObject *kw, int flags) {
  KW("keys", "buffer_ptrs", "sizes", "config");
  PyObject *k_o, *p_o, *s_o, *cfg_o = Py_None, *res = NULL;
  struct mcpy_strs keys;
  struct mcpy_u64s ptrs, sizes;
  struct mcpy_config c;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "OOO|O", kwl, &k_o, &p_o, &s_o, &cfg_o)) return NULL;
  if (mcpy_strs(k_o, &keys, "keys")) return NULL;
  if (mcpy_u64s(p_o, &ptrs, "buffer_ptrs")) goto out_k;
  if (mcpy_u64s(s_o, &sizes, "sizes")) goto out_p;
  if (mcpy_config(cfg_o, keys.n, &c)) goto out_s;
  if (ptrs.n != keys.n || sizes.n != keys.n) {
    res = mcpy_const_list(MC_INVALID_PARAMS, keys.n);
  } else {
    int *r = PyMem_Calloc(keys.n ? keys.n : 1, sizeof(int));
    batch_write(self, &keys, (const void *const *)ptrs.v, (const size_t *)sizes.v, &c, flags, r);
    res = mcpy_int_list(r, keys.n);
    PyMem_Free(r);
  }
  mcpy_config_free(&c);
out_s:
  mcpy_u64s_free(&sizes);
out_p:
  mcpy_u64s_free(&ptrs);
out_k:
  mcpy_strs_free(&keys);
  return res;
}

static PyObject *Store_batch_put_from(StoreObj *self, PyObject *a, PyObject *k) { return batch_from(self, a, k, 0); }
static PyObject *Store_batch_upsert_from(StoreObj *self, PyObject *a, PyObject *k) {
  return batch_from(self, a, k, MC_WRITE_UPSERT);
}

/* put_batch / upsert_batch(keys, values, config=None) -> status (first failing key's code) */
static PyObject *batch_copy(StoreObj *self, PyObject *args, PyObject *kw, int flags) {
  KW("keys", "values", "config");
  PyObject *k_o, *v_o, *cfg_o = Py_None, *vf = NULL;
  struct mcpy_strs keys;
  struct mcpy_config c;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "OO|O", kwl, &k_o, &v_o, &cfg_o) || mcpy_strs(k_o, &keys, "keys")) return NULL;
  if (v_o == Py_None || !PySequence_Check(v_o) || !(vf = PySequence_Fast(v_o, "values"))) {
    PyErr_Clear();
    mcpy_strs_free(&keys);
    return PyErr_Format(PyExc_TypeError, "values: expected a list of bytes-like objects");
  }
  size_t n = keys.n, nv = (size_t)PySequence_Fast_GET_SIZE(vf), got = 0;
  int rc = 0;
  if (mcpy_config(cfg_o, n, &c)) {
    Py_DECREF(vf);
    mcpy_strs_free(&keys);
    return NULL;
  }
  Py_buffer *views = PyMem_Calloc(nv ? nv : 1, sizeof(Py_buffer));
  for (; got < nv; got++)
    if (get_value(PySequence_Fast_GET_ITEM(vf, (Py_ssize_t)got), &views[got], "values")) break;
  if (got < nv) {
    rc = -1;
  } else if (nv != n) {
    rc = MC_INVALID_PARAMS;
  } else if (n) {
    const void **p = PyMem_Calloc(n, sizeof(void *));
    size_t *z = PyMem_Calloc(n, sizeof(size_t));
    int *r = PyMem_Calloc(n, sizeof(int));
    for (size_t i = 0; i < n; i++) p[i] = views[i].buf ? views[i].buf : "", z[i] = (size_t)views[i].len;
    batch_write(self, &keys, p, z, &c, flags | MC_WRITE_COPY, r);
    for (size_t i = 0; i < n && !rc; i++) rc = r[i];
    PyMem_Free(r);
    PyMem_Free(z);
    PyMem_Free(p);
  }
  for (size_t i = 0; i < got; i++) PyBuffer_Release(&views[i]);
  PyMem_Free(views);
  mcpy_config_free(&c);
  Py_DECREF(vf);
  mcpy_strs_free(&keys);
  return rc == -1 ? NULL : PyLong_FromLong(rc);
}

static PyObject *Store_put_batch(StoreObj *self, PyObject *a, PyObject *k) { return batch_copy(self, a, k, 0); }
static PyObject *Store_upsert_batch(StoreObj *self, PyObject *a, PyObject *k) { return batch_copy(self, a, k, MC_WRITE_UPSERT); }

/* Converts keys + nested ptrs/sizes; 1 when the shapes match, 0 on mismatch, -1 on TypeError. */
struct multi {
  struct mcpy_strs keys;
  struct mcpy_u64s ptrs, sizes;
  size_t *np, *ns, rp, rs;
};

static int multi_args(PyObject *k_o, PyObject *p_o, PyObject *s_o, struct multi *m) {
  memset(m, 0, sizeof(*m));
  if (mcpy_strs(k_o, &m->keys, "keys")) return -1;
  if (mcpy_u64_rows(p_o, &m->ptrs, &m->np, &m->rp, "all_buffer_ptrs") ||
      mcpy_u64_rows(s_o, &m->sizes, &m->ns, &m->rs, "all_sizes"))
    return -1;
  if (m->rp != m->keys.n || m->rs != m->keys.n) return 0;
  for (size_t i = 0; i < m->rp; i++)
    if (m->np[i] != m->ns[i]) return 0;
  for (size_t j = 0; j < m->ptrs.n; j++)
    if (!m->ptrs.v[j] && m->sizes.v[j]) return 0;
  return 1;
}

static void multi_free(struct multi *m) {
  mcpy_strs_free(&m->keys);
  mcpy_u64s_free(&m->ptrs);
  mcpy_u64s_free(&m->sizes);
  PyMem_Free(m->np);
  PyMem_Free(m->ns);
}

static PyObject *Store_batch_put_from_multi_buffers(StoreObj *self, PyObject *args, PyObject *kw) {
  KW("keys", "all_buffer_ptrs", "all_sizes", "config");
  PyObject *k_o, *p_o, *s_o, *cfg_o = Py_None, *res = NULL;
  struct multi m;
  struct mcpy_config c;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "OOO|O", kwl, &k_o, &p_o, &s_o, &cfg_o)) return NULL;
  int ok = multi_args(k_o, p_o, s_o, &m);
  if (ok >= 0 && !mcpy_config(cfg_o, m.keys.n, &c)) {
    size_t n = m.keys.n;
    if (!ok || c.bad) {
      res = mcpy_const_list(ok ? c.bad : MC_INVALID_PARAMS, n);
    } else {
      int *r = PyMem_Calloc(n ? n : 1, sizeof(int)), rc = 0;
      const char *const *g = c.groups.n == n ? (const char *const *)c.groups.v : NULL; /* key groups */
      Py_BEGIN_ALLOW_THREADS rc = mc_store_batch_write_multi_grouped(self->h, m.keys.v, (const void *const *)m.ptrs.v,
                                                                     (const size_t *)m.sizes.v, m.np, n, &c.c, g, 0, r);
      Py_END_ALLOW_THREADS if (rc) for (size_t i = 0; i < n; i++) r[i] = MC_INVALID_PARAMS;
      res = mcpy_int_list(r, n);
      PyMem_Free(r);
    }
    mcpy_config_free(&c);
  }
  multi_free(&m);
  return res;
}

/* ------------------------------------------------------------------ reads */

static PyObject *Store_get(StoreObj *self, PyObject *args, PyObject *kw) {
  KW("key");
  PyObject *key_o;
  const char *key;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "O", kwl, &key_o) || mcpy_str(key_o, &key, "key")) return NULL;
  void *v = NULL;
  int64_t n;
  Py_BEGIN_ALLOW_THREADS n = mc_store_get(self->h, key, &v);
  Py_END_ALLOW_THREADS PyObject *r = PyBytes_FromStringAndSize(n > 0 ? v : "", n > 0 ? (Py_ssize_t)n : 0);
  free(v);
  return r;
}

/* Copy-out reads of every key, GIL released once: vals[i]/lens[i] (lens < 0 = failed). */
static void get_many(StoreObj *self, const struct mcpy_strs *keys, void **vals, int64_t *lens) {
  Py_BEGIN_ALLOW_THREADS for (size_t i = 0; i < keys->n; i++) lens[i] = mc_store_get(self->h, keys->v[i], &vals[i]);
  Py_END_ALLOW_THREADS
}

/* The one argument `keys` (a list of str): 0, or -1 with an exception. */
static int keys_arg(PyObject *args, PyObject *kw, struct mcpy_strs *keys) {
  KW("keys");
  PyObject *k_o;
  return !PyArg_ParseTupleAndKeywords(args, kw, "O", kwl, &k_o) || mcpy_strs(k_o, keys, "keys") ? -1 : 0;
}

static PyObject *get_list(StoreObj *self, PyObject *args, PyObject *kw, int handles) {
  struct mcpy_strs keys;
  if (keys_arg(args, kw, &keys)) return NULL;
  size_t n = keys.n;
  if (!handles && (!n || !self->ready)) { /* upstream quirk (docs/python.md): no result at all -> [b""] */
    mcpy_strs_free(&keys);
    return Py_BuildValue("[y]", "");
  }
  void **vals = PyMem_Calloc(n ? n : 1, sizeof(void *));
  int64_t *lens = PyMem_Calloc(n ? n : 1, sizeof(int64_t));
  get_many(self, &keys, vals, lens);
  PyObject *l = PyList_New((Py_ssize_t)n);
  for (size_t i = 0; i < n; i++) {
    PyObject *it;
    if (handles && lens[i] > 0) it = mcpy_buffer_handle(vals[i], (size_t)lens[i]), vals[i] = NULL;
    else if (handles) it = Py_NewRef(Py_None);
    else it = PyBytes_FromStringAndSize(lens[i] > 0 ? vals[i] : "", lens[i] > 0 ? (Py_ssize_t)lens[i] : 0);
    free(vals[i]);
    PyList_SET_ITEM(l, (Py_ssize_t)i, it);
  }
  PyMem_Free(lens);
  PyMem_Free(vals);
  mcpy_strs_free(&keys);
  return l;
}

static PyObject *Store_get_batch(StoreObj *self, PyObject *a, PyObject *k) { return get_list(self, a, k, 0); }
static PyObject *Store_batch_get_buffer(StoreObj *self, PyObject *a, PyObject *k) { return get_list(self, a, k, 1); }

static PyObject *Store_get_buffer(StoreObj *self, PyObject *args, PyObject *kw) {
  KW("key");
  PyObject *key_o;
  const char *key;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "O", kwl, &key_o) || mcpy_str(key_o, &key, "key")) return NULL;
  void *v = NULL;
  int64_t n;
  Py_BEGIN_ALLOW_THREADS n = mc_store_get(self->h, key, &v);
  Py_END_ALLOW_THREADS if (n > 0) return mcpy_buffer_handle(v, (size_t)n);
  free(v);
  Py_RETURN_NONE;
}

static PyObject *Store_get_into(StoreObj *self, PyObject *args, PyObject *kw) {
  KW("key", "buffer_ptr", "size");
  PyObject *key_o, *p_o, *n_o;
  const char *key;
  uint64_t p, n;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "OOO", kwl, &key_o, &p_o, &n_o) || mcpy_str(key_o, &key, "key") ||
      mcpy_u64(p_o, &p, "buffer_ptr") || mcpy_u64(n_o, &n, "size"))
    return NULL;
  int64_t rc = MC_INVALID_PARAMS;
  if (p || !n) {
    Py_BEGIN_ALLOW_THREADS rc = mooncake_store_get_into(self->h, key, (void *)(uintptr_t)p, (size_t)n);
    Py_END_ALLOW_THREADS
  }
  return PyLong_FromLongLong(rc);
}

static PyObject *Store_batch_get_into(StoreObj *self, PyObject *args, PyObject *kw) {
  KW("keys", "buffer_ptrs", "sizes");
  PyObject *k_o, *p_o, *s_o, *res = NULL;
  struct mcpy_strs keys;
  struct mcpy_u64s ptrs, sizes;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "OOO", kwl, &k_o, &p_o, &s_o) || mcpy_strs(k_o, &keys, "keys")) return NULL;
  if (mcpy_u64s(p_o, &ptrs, "buffer_ptrs")) goto out_k;
  if (mcpy_u64s(s_o, &sizes, "sizes")) goto out_p;
  size_t n = keys.n;
  int shape_ok = ptrs.n == n && sizes.n == n;
  for (size_t i = 0; shape_ok && i < n; i++) shape_ok = ptrs.v[i] || !sizes.v[i];
  if (!shape_ok) {
    res = mcpy_const_list(MC_INVALID_PARAMS, n);
  } else {
    int64_t *r = PyMem_Calloc(n ? n : 1, sizeof(int64_t));
    int rc = 0;
    Py_BEGIN_ALLOW_THREADS rc = mooncake_store_batch_get_into(self->h, keys.v, (void **)ptrs.v, (const size_t *)sizes.v, n, r);
    Py_END_ALLOW_THREADS if (rc) for (size_t i = 0; i < n; i++) r[i] = MC_INVALID_PARAMS;
    res = mcpy_i64_list(r, n);
    PyMem_Free(r);
  }
  mcpy_u64s_free(&sizes);
out_p:
  mcpy_u64s_free(&ptrs);
out_k:
  mcpy_strs_free(&keys);
  return res;
}

static PyObject *Store_batch_get_into_multi_buffers(StoreObj *self, PyObject *args, PyObject *kw) {
  KW("keys", "all_buffer_ptrs", "all_sizes", "prefer_alloc_in_same_node");
  PyObject *k_o, *p_o, *s_o, *res = NULL;
  int same_node = 0;
  struct multi m;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "OOO|p", kwl, &k_o, &p_o, &s_o, &same_node)) return NULL;
  int ok = multi_args(k_o, p_o, s_o, &m);
  size_t n = m.keys.n;
  if (ok == 0) {
    res = mcpy_const_list(MC_INVALID_PARAMS, n);
  } else if (ok > 0) {
    int64_t *r = PyMem_Calloc(n ? n : 1, sizeof(int64_t));
    int rc = 0;
    Py_BEGIN_ALLOW_THREADS rc = mc_store_batch_get_into_multi(self->h, m.keys.v, (void *const *)m.ptrs.v,
                                                              (const size_t *)m.sizes.v, m.np, n, r);
    Py_END_ALLOW_THREADS if (rc) for (size_t i = 0; i < n; i++) r[i] = MC_INVALID_PARAMS;
    res = mcpy_i64_list(r, n);
    PyMem_Free(r);
  }
  multi_free(&m);
  return res;
}

/* ------------------------------------------------------------------ layer-wise sessions */

/* keys -> list[int] of a session call (start / end / revoke / get start); docs/python.md, "Sessions". */
static PyObject *session_keys(StoreObj *self, PyObject *args, PyObject *kw, int which) {
  struct mcpy_strs keys;
  if (keys_arg(args, kw, &keys)) return NULL;
  size_t n = keys.n;
  int *r = PyMem_Calloc(n ? n : 1, sizeof(int)), rc = 0;
  Py_BEGIN_ALLOW_THREADS
  if (which == 2) rc = mc_store_get_session_start(self->h, keys.v, n, r);
  else rc = mc_store_put_session_end(self->h, keys.v, n, which, r);
  Py_END_ALLOW_THREADS
  for (size_t i = 0; rc && i < n; i++) r[i] = MC_INVALID_PARAMS;
  PyObject *res = mcpy_int_list(r, n);
  PyMem_Free(r);
  mcpy_strs_free(&keys);
  return res;
}

static PyObject *Store_batch_put_session_end(StoreObj *self, PyObject *a, PyObject *k) { return session_keys(self, a, k, 0); }
static PyObject *Store_batch_put_session_revoke(StoreObj *self, PyObject *a, PyObject *k) {
  return session_keys(self, a, k, 1);
}
static PyObject *Store_batch_get_session_start(StoreObj *self, PyObject *a, PyObject *k) {
  return session_keys(self, a, k, 2);
}

static PyObject *Store_batch_get_session_end(StoreObj *self, PyObject *args, PyObject *kw) {
  struct mcpy_strs keys;
  if (keys_arg(args, kw, &keys)) return NULL;
  Py_BEGIN_ALLOW_THREADS mc_store_get_session_end(self->h, keys.v, keys.n);
  Py_END_ALLOW_THREADS mcpy_strs_free(&keys);
  return PyLong_FromLong(0);
}

/* batch_put_session_start(keys, sizes, config=None) -> list[int] */
static PyObject *Store_batch_put_session_start(StoreObj *self, PyObject *args, PyObject *kw) {
  KW("keys", "sizes", "config");
  PyObject *k_o, *s_o, *cfg_o = Py_None, *res = NULL;
  struct mcpy_strs keys;
  struct mcpy_u64s sizes;
  struct mcpy_config c;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "OO|O", kwl, &k_o, &s_o, &cfg_o) || mcpy_strs(k_o, &keys, "keys"))
    return NULL;
  if (mcpy_u64s(s_o, &sizes, "sizes")) goto out_k;
  if (mcpy_config(cfg_o, keys.n, &c)) goto out_s;
  size_t n = keys.n;
  int *r = PyMem_Calloc(n ? n : 1, sizeof(int)), rc = sizes.n != n ? MC_INVALID_PARAMS : c.bad;
  if (!rc) {
    const char *const *g = c.groups.n == n ? (const char *const *)c.groups.v : NULL;
    Py_BEGIN_ALLOW_THREADS rc = mc_store_put_session_start(self->h, keys.v, (const size_t *)sizes.v, n, &c.c, g, r);
    Py_END_ALLOW_THREADS if (rc) rc = MC_INVALID_PARAMS;
  }
  for (size_t i = 0; rc && i < n; i++) r[i] = rc;
  res = mcpy_int_list(r, n);
  PyMem_Free(r);
  mcpy_config_free(&c);
out_s:
  mcpy_u64s_free(&sizes);
out_k:
  mcpy_strs_free(&keys);
  return res;
}

/* The ranged calls: keys, rows of buffer pointers, sizes and offsets. Row counts other than the number of
 * keys: every key -600; a key whose three rows differ in length (or a null pointer with a size): that key
 * -600, the others go ahead (as upstream). */
static PyObject *session_ranges(StoreObj *self, PyObject *args, PyObject *kw, int put) {
  static char *kw_put[] = {"keys", "all_buffer_ptrs", "all_sizes", "all_dst_offsets", NULL};
  static char *kw_get[] = {"keys", "all_buffer_ptrs", "all_sizes", "all_src_offsets", NULL};
  PyObject *k_o, *p_o, *s_o, *o_o, *res = NULL;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "OOOO", put ? kw_put : kw_get, &k_o, &p_o, &s_o, &o_o)) return NULL;
  const char *what = put ? "all_dst_offsets" : "all_src_offsets";
  struct mcpy_strs keys = {0};
  struct mcpy_u64s p = {0}, z = {0}, o = {0};
  size_t *np = NULL, *nz = NULL, *no = NULL, rp = 0, rz = 0, ro = 0;
  if (mcpy_strs(k_o, &keys, "keys") || mcpy_u64_rows(p_o, &p, &np, &rp, "all_buffer_ptrs") ||
      mcpy_u64_rows(s_o, &z, &nz, &rz, "all_sizes") || mcpy_u64_rows(o_o, &o, &no, &ro, what))
    goto out;
  size_t n = keys.n, m = 0, at = 0, f = 0;
  int64_t *r = PyMem_Calloc(n ? n : 1, sizeof(int64_t));
  for (size_t i = 0; i < n; i++) r[i] = MC_INVALID_PARAMS;
  if (rp == n && rz == n && ro == n) {
    const char **k = PyMem_Calloc(n ? n : 1, sizeof(char *));
    size_t *nb = PyMem_Calloc(n ? n : 1, sizeof(size_t)), *idx = PyMem_Calloc(n ? n : 1, sizeof(size_t));
    for (size_t i = 0; i < n; at += np[i], i++) { /* compacts the well-formed keys' ranges in place */
      int ok = np[i] == nz[i] && np[i] == no[i];
      for (size_t j = at; ok && j < at + np[i]; j++) ok = p.v[j] || !z.v[j];
      if (!ok) continue;
      for (size_t j = at; j < at + np[i]; j++, f++) p.v[f] = p.v[j], z.v[f] = z.v[j], o.v[f] = o.v[j];
      k[m] = keys.v[i], nb[m] = np[i], idx[m++] = i;
    }
    int64_t *r2 = PyMem_Calloc(m ? m : 1, sizeof(int64_t));
    int rc = 0;
    Py_BEGIN_ALLOW_THREADS
    if (put) rc = mc_store_put_session_write(self->h, k, (const void *const *)p.v, (const size_t *)z.v,
                                             (const size_t *)o.v, nb, m, r2);
    else rc = mc_store_get_session_read(self->h, k, (void *const *)p.v, (const size_t *)z.v, (const size_t *)o.v, nb,
                                        m, r2);
    Py_END_ALLOW_THREADS
    for (size_t q = 0; q < m; q++) r[idx[q]] = rc ? MC_INVALID_PARAMS : r2[q];
    PyMem_Free(r2);
    PyMem_Free(idx);
    PyMem_Free(nb);
    PyMem_Free(k);
  }
  res = mcpy_i64_list(r, n);
  PyMem_Free(r);
out:
  mcpy_strs_free(&keys);
  mcpy_u64s_free(&p);
  mcpy_u64s_free(&z);
  mcpy_u64s_free(&o);
  PyMem_Free(np);
  PyMem_Free(nz);
  PyMem_Free(no);
  return res;
}

static PyObject *Store_batch_put_from_multi_buffer_ranges(StoreObj *self, PyObject *a, PyObject *k) {
  return session_ranges(self, a, k, 1);
}
static PyObject *Store_batch_get_into_multi_buffer_ranges(StoreObj *self, PyObject *a, PyObject *k) {
  return session_ranges(self, a, k, 0);
}

/* ------------------------------------------------------------------ keyed queries and removal */

/* One key -> int64: get_size, is_exist. */
static PyObject *key_call(StoreObj *self, PyObject *args, PyObject *kw, int which) {
  KW("key");
  PyObject *key_o;
  const char *key;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "O", kwl, &key_o) || mcpy_str(key_o, &key, "key")) return NULL;
  int64_t rc;
  Py_BEGIN_ALLOW_THREADS rc = which ? mooncake_store_is_exist(self->h, key) : mooncake_store_get_size(self->h, key);
  Py_END_ALLOW_THREADS return PyLong_FromLongLong(rc);
}

static PyObject *Store_get_size(StoreObj *self, PyObject *a, PyObject *k) { return key_call(self, a, k, 0); }
static PyObject *Store_is_exist(StoreObj *self, PyObject *a, PyObject *k) { return key_call(self, a, k, 1); }

static PyObject *Store_remove(StoreObj *self, PyObject *args, PyObject *kw) {
  KW("key", "force");
  PyObject *key_o;
  const char *key;
  int force = 0;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "O|p", kwl, &key_o, &force) || mcpy_str(key_o, &key, "key")) return NULL;
  int rc;
  Py_BEGIN_ALLOW_THREADS rc = mooncake_store_remove(self->h, key, force);
  Py_END_ALLOW_THREADS return PyLong_FromLong(rc);
}

/* batch_is_exist(keys) (force < 0) / batch_remove(keys, force=False) */
static PyObject *keys_call(StoreObj *self, PyObject *args, PyObject *kw, int remove) {
  static char *kw_rm[] = {"keys", "force", NULL}, *kw_ex[] = {"keys", NULL};
  PyObject *k_o;
  int force = 0;
  struct mcpy_strs keys;
  if (!PyArg_ParseTupleAndKeywords(args, kw, remove ? "O|p" : "O", remove ? kw_rm : kw_ex, &k_o, &force) ||
      mcpy_strs(k_o, &keys, "keys"))
    return NULL;
  size_t n = keys.n;
  int *r = PyMem_Calloc(n ? n : 1, sizeof(int)), rc;
  Py_BEGIN_ALLOW_THREADS rc = remove ? mc_store_batch_remove(self->h, keys.v, n, force, r)
                                     : mooncake_store_batch_is_exist(self->h, keys.v, n, r);
  Py_END_ALLOW_THREADS if (rc) for (size_t i = 0; i < n; i++) r[i] = MC_INVALID_PARAMS;
  PyObject *res = mcpy_int_list(r, n);
  PyMem_Free(r);
  mcpy_strs_free(&keys);
  return res;
}

static PyObject *Store_batch_is_exist(StoreObj *self, PyObject *a, PyObject *k) { return keys_call(self, a, k, 0); }
static PyObject *Store_batch_remove(StoreObj *self, PyObject *a, PyObject *k) { return keys_call(self, a, k, 1); }

/* _batch_replica_clear(keys, segment_name) -> list of cleared keys ([] on error) */
static PyObject *Store_batch_replica_clear(StoreObj *self, PyObject *args, PyObject *kw) {
  KW("keys", "segment_name");
  PyObject *k_o;
  const char *seg = "";
  struct mcpy_strs keys;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "O|s", kwl, &k_o, &seg) || mcpy_strs(k_o, &keys, "keys")) return NULL;
  size_t n = keys.n;
  int *r = PyMem_Calloc(n ? n : 1, sizeof(int)), rc;
  Py_BEGIN_ALLOW_THREADS rc = mc_store_batch_replica_clear(self->h, keys.v, n, seg, r);
  Py_END_ALLOW_THREADS PyObject *res = PyList_New(0);
  for (size_t i = 0; res && rc > 0 && i < n; i++) {
    if (!r[i]) continue;
    PyObject *k = PySequence_GetItem(k_o, (Py_ssize_t)i);
    if (!k || PyList_Append(res, k)) Py_CLEAR(res);
    Py_XDECREF(k);
  }
  PyMem_Free(r);
  mcpy_strs_free(&keys);
  return res;
}

static PyObject *Store_remove_by_regex(StoreObj *self, PyObject *args, PyObject *kw) {
  KW("regex_pattern", "force");
  PyObject *re_o;
  const char *re;
  int force = 0;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "O|p", kwl, &re_o, &force) || mcpy_str(re_o, &re, "regex_pattern"))
    return NULL;
  int64_t rc;
  Py_BEGIN_ALLOW_THREADS rc = mooncake_store_remove_by_regex(self->h, re, force);
  Py_END_ALLOW_THREADS return PyLong_FromLongLong(rc);
}

static PyObject *Store_remove_all(StoreObj *self, PyObject *args, PyObject *kw) {
  KW("force");
  int force = 0;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "|p", kwl, &force)) return NULL;
  int64_t rc;
  Py_BEGIN_ALLOW_THREADS rc = mooncake_store_remove_all(self->h, force);
  Py_END_ALLOW_THREADS return PyLong_FromLongLong(rc);
}

/* ------------------------------------------------------------------ registered memory, replicas */

static PyObject *Store_register_buffer(StoreObj *self, PyObject *args, PyObject *kw) {
  KW("buffer_ptr", "size");
  PyObject *p_o, *n_o;
  uint64_t p, n;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "OO", kwl, &p_o, &n_o) || mcpy_u64(p_o, &p, "buffer_ptr") ||
      mcpy_u64(n_o, &n, "size"))
    return NULL;
  int rc = MC_INVALID_PARAMS;
  if (p && n) {
    Py_BEGIN_ALLOW_THREADS rc = mooncake_store_register_buffer(self->h, (void *)(uintptr_t)p, (size_t)n);
    Py_END_ALLOW_THREADS
  }
  return PyLong_FromLong(rc);
}

static PyObject *Store_unregister_buffer(StoreObj *self, PyObject *args, PyObject *kw) {
  KW("buffer_ptr");
  PyObject *p_o;
  uint64_t p;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "O", kwl, &p_o) || mcpy_u64(p_o, &p, "buffer_ptr")) return NULL;
  int rc = MC_INVALID_PARAMS;
  if (p) {
    Py_BEGIN_ALLOW_THREADS rc = mooncake_store_unregister_buffer(self->h, (void *)(uintptr_t)p);
    Py_END_ALLOW_THREADS
  }
  return PyLong_FromLong(rc);
}

/* _replica_desc(key) -> [(status, size, address, endpoint, segment_name)] or a negative int */
static PyObject *Store_replica_desc(StoreObj *self, PyObject *args) {
  const char *key;
  if (!PyArg_ParseTuple(args, "s", &key)) return NULL;
  mc_replica_desc_t *d = NULL;
  int n;
  Py_BEGIN_ALLOW_THREADS n = mc_store_get_replica_desc(self->h, key, &d);
  Py_END_ALLOW_THREADS if (n < 0) return PyLong_FromLong(n);
  PyObject *l = PyList_New(n);
  for (int i = 0; l && i < n; i++)
    PyList_SET_ITEM(l, i, Py_BuildValue("iKKss", d[i].status, (unsigned long long)d[i].size,
                                        (unsigned long long)d[i].address, d[i].endpoint, d[i].segment_name));
  mc_store_replica_desc_free(d, n);
  return l;
}

/* Copy and move tasks (docs/python.md, "Copy and move tasks"); the Python layer checks the argument types.
 * _create_copy_task(key, [target, ...]) / _create_move_task(key, source, target) -> (hi, lo, rc) */
static PyObject *task_id_result(int rc, mc_task_id_t id) {
  return Py_BuildValue("KKi", (unsigned long long)id.hi, (unsigned long long)id.lo, rc);
}

static PyObject *Store_create_copy_task(StoreObj *self, PyObject *args) {
  const char *key;
  PyObject *lst;
  if (!PyArg_ParseTuple(args, "sO!", &key, &PyList_Type, &lst)) return NULL;
  Py_ssize_t n = PyList_GET_SIZE(lst);
  const char **t = PyMem_Calloc(n ? (size_t)n : 1, sizeof(*t));
  if (!t) return PyErr_NoMemory();
  for (Py_ssize_t i = 0; i < n; i++)
    if (!(t[i] = PyUnicode_AsUTF8(PyList_GET_ITEM(lst, i)))) {
      PyMem_Free(t);
      return NULL;
    }
  mc_task_id_t id;
  int rc;
  Py_BEGIN_ALLOW_THREADS rc = mc_store_create_copy_task(self->h, key, t, (size_t)n, &id);
  Py_END_ALLOW_THREADS PyMem_Free(t);
  return task_id_result(rc, id);
}

static PyObject *Store_create_move_task(StoreObj *self, PyObject *args) {
  const char *key, *src, *dst;
  if (!PyArg_ParseTuple(args, "sss", &key, &src, &dst)) return NULL;
  mc_task_id_t id;
  int rc;
  Py_BEGIN_ALLOW_THREADS rc = mc_store_create_move_task(self->h, key, src, dst, &id);
  Py_END_ALLOW_THREADS return task_id_result(rc, id);
}

/* _query_task(hi, lo) -> (hi, lo, type, status, created_ms, updated_ms, client, message) or a negative int */
static PyObject *Store_query_task(StoreObj *self, PyObject *args) {
  unsigned long long hi, lo;
  if (!PyArg_ParseTuple(args, "KK", &hi, &lo)) return NULL;
  mc_task_info_t t;
  int rc;
  Py_BEGIN_ALLOW_THREADS rc = mc_store_query_task(self->h, (mc_task_id_t){hi, lo}, &t);
  Py_END_ALLOW_THREADS if (rc) return PyLong_FromLong(rc);
  return Py_BuildValue("KKiiKKss", (unsigned long long)t.id.hi, (unsigned long long)t.id.lo, t.type, t.status,
                       (unsigned long long)t.created_at_ms_epoch, (unsigned long long)t.last_updated_at_ms_epoch,
                       t.assigned_client, t.message);
}

/* _is_registered(ptr, length) -> bool */
static PyObject *Store_is_registered(StoreObj *self, PyObject *args) {
  unsigned long long p, n;
  if (!PyArg_ParseTuple(args, "KK", &p, &n)) return NULL;
  return PyBool_FromLong(mc_store_is_registered(self->h, (void *)(uintptr_t)p, (size_t)n) == 1);
}

static PyObject *Store_ready(StoreObj *self, void *unused) { return PyBool_FromLong(self->ready); }

/* _mount_extra(path or None, offset, size, location) -> (status, segment id or "") */
static PyObject *Store_mount_extra(StoreObj *self, PyObject *args) {
  PyObject *path_o, *off_o, *size_o;
  const char *loc, *path = NULL;
  uint64_t off, size;
  char id[40] = "";
  if (!PyArg_ParseTuple(args, "OOOs", &path_o, &off_o, &size_o, &loc) || mcpy_u64(off_o, &off, "offset") ||
      mcpy_u64(size_o, &size, "size") || (path_o != Py_None && mcpy_str(path_o, &path, "path")))
    return NULL;
  int rc;
  Py_BEGIN_ALLOW_THREADS rc = mc_store_mount_extra_segment(self->h, path, off, size, loc, id, sizeof(id));
  Py_END_ALLOW_THREADS return Py_BuildValue("(is)", rc, id);
}

/* _unmount_extra(segment id, grace_ms, free) -> status */
static PyObject *Store_unmount_extra(StoreObj *self, PyObject *args) {
  const char *id;
  unsigned long long grace;
  int free_memory, rc;
  if (!PyArg_ParseTuple(args, "sKp", &id, &grace, &free_memory)) return NULL;
  Py_BEGIN_ALLOW_THREADS rc = mc_store_unmount_extra_segment(self->h, id, grace, free_memory);
  Py_END_ALLOW_THREADS return PyLong_FromLong(rc);
}

/* _get_pyclient_capsule() -> a PyCapsule named "mooncake_store_t" holding the native handle (store.h), for C
 * code in other extensions; it keeps this store object alive (docs/python.md, "Native handle"). */
static void capsule_done(PyObject *cap) { Py_XDECREF((PyObject *)PyCapsule_GetContext(cap)); }

static PyObject *Store_get_pyclient_capsule(StoreObj *self, PyObject *unused) {
  PyObject *cap = PyCapsule_New(self->h, "mooncake_store_t", capsule_done);
  if (!cap) return NULL;
  Py_INCREF(self);
  PyCapsule_SetContext(cap, self);
  return cap;
}

/* Docstrings: the contract in brief (docs/python.md has the details). */
#define M(name, flags, doc) {#name, (PyCFunction)(void (*)(void))Store_##name, flags, doc}
#define MK(name, doc) M(name, METH_VARARGS | METH_KEYWORDS, doc)
static PyMethodDef Store_methods[] = {
    {"_setup", (PyCFunction)(void (*)(void))Store_setup, METH_VARARGS | METH_KEYWORDS, NULL},
    {"_batch_replica_clear", (PyCFunction)(void (*)(void))Store_batch_replica_clear, METH_VARARGS | METH_KEYWORDS,
     NULL},
    {"_replica_desc", (PyCFunction)Store_replica_desc, METH_VARARGS, NULL},
    {"_is_registered", (PyCFunction)Store_is_registered, METH_VARARGS, NULL},
    {"_setup_dummy", (PyCFunction)(void (*)(void))Store_setup_dummy, METH_VARARGS | METH_KEYWORDS, NULL},
    {"_alloc_from_mem_pool", (PyCFunction)(void (*)(void))Store_alloc_from_mem_pool, METH_VARARGS | METH_KEYWORDS, NULL},
    {"_create_copy_task", (PyCFunction)Store_create_copy_task, METH_VARARGS, NULL},
    {"_create_move_task", (PyCFunction)Store_create_move_task, METH_VARARGS, NULL},
    {"_query_task", (PyCFunction)Store_query_task, METH_VARARGS, NULL},
    {"_mount_extra", (PyCFunction)Store_mount_extra, METH_VARARGS, NULL},
    {"_unmount_extra", (PyCFunction)Store_unmount_extra, METH_VARARGS, NULL},
    {"_get_pyclient_capsule", (PyCFunction)Store_get_pyclient_capsule, METH_NOARGS,
     "_get_pyclient_capsule() -> PyCapsule \"mooncake_store_t\" of the native store handle (keeps the store alive)."},
    M(close, METH_NOARGS,
      "close() -> 0\n\nTears the client down (idempotent): unregisters buffers, unmounts this client's segments (objects "
      "only there are gone), stops its threads. setup() may be called again."),
    M(health_check, METH_NOARGS, "health_check() -> int\n\n0 healthy, 1 not set up or closed, 2 master unreachable."),
    M(get_hostname, METH_NOARGS,
      "get_hostname() -> str\n\nThis client's segment name \"host:port\" (usable as preferred_segment); \"\" before "
      "setup."),
    MK(put, "put(key, value, config=None) -> int\n\nCopies value (any bytes-like object) through the staging buffer "
            "and stores it. 0, also when the key exists (value kept); -600 no staging room; -200 no space."),
    MK(upsert, "upsert(key, value, config=None) -> int\n\nInsert or replace through the staging buffer; never -705."),
    MK(put_from, "put_from(key, buffer_ptr, size, config=None) -> int\n\nZero-copy put from caller memory (size 0: "
                 "0, nothing stored). 0 or a negative ErrorCode."),
    MK(upsert_from, "upsert_from(key, buffer_ptr, size, config=None) -> int\n\nZero-copy insert or replace."),
    MK(put_batch, "put_batch(keys, values, config=None) -> int\n\nCopying batch put: 0, or the first failing key's "
                  "code; length mismatch -600. config.group_ids groups the keys."),
    MK(upsert_batch, "upsert_batch(keys, values, config=None) -> int\n\nCopying batch upsert: 0 or the first error."),
    MK(batch_put_from, "batch_put_from(keys, buffer_ptrs, sizes, config=None) -> list[int]\n\nZero-copy batch put, "
                       "one status per key; mismatched lengths: every key -600. config.group_ids (one per key, \"\" = "
                       "none) groups keys: they share a segment and are evicted together."),
    MK(batch_upsert_from, "batch_upsert_from(keys, buffer_ptrs, sizes, config=None) -> list[int]\n\nZero-copy batch "
                          "insert or replace, one status per key."),
    MK(batch_put_from_multi_buffers,
       "batch_put_from_multi_buffers(keys, all_buffer_ptrs, all_sizes, config=None) -> list[int]\n\nObject i is the "
       "concatenation of its buffers; a shape mismatch gives every key -600."),
    MK(get, "get(key) -> bytes\n\nThe whole value through the staging buffer, or b\"\" on any failure."),
    MK(get_batch, "get_batch(keys) -> list[bytes]\n\nPer key the value or b\"\" ([b\"\"] when there is no result at "
                  "all, as upstream)."),
    MK(get_buffer, "get_buffer(key) -> BufferHandle or None\n\nThe value copied into the staging buffer, exposed "
                   "zero-copy (buffer protocol, ptr(), size())."),
    MK(batch_get_buffer, "batch_get_buffer(keys) -> list\n\nget_buffer per key (None for a failed key)."),
    MK(get_into, "get_into(key, buffer_ptr, size) -> int\n\nReads the object into caller memory: its size, or "
                 "negative (-600 buffer too small, -704 missing, -703 being written)."),
    MK(batch_get_into, "batch_get_into(keys, buffer_ptrs, sizes) -> list[int]\n\nget_into per key; mismatched "
                       "lengths: every key -600."),
    MK(batch_get_into_multi_buffers,
       "batch_get_into_multi_buffers(keys, all_buffer_ptrs, all_sizes, prefer_alloc_in_same_node=False) -> "
       "list[int]\n\nScatters object i over its buffers in order: bytes read, or negative (-600 buffers too small)."),
    MK(get_size, "get_size(key) -> int\n\nThe object's size, or -704 / -703. Grants a read lease."),
    MK(is_exist, "is_exist(key) -> int\n\n1 when a complete replica exists, 0 when not, negative on error. A 1 grants "
                 "a read lease."),
    MK(batch_is_exist, "batch_is_exist(keys) -> list[int]\n\nis_exist per key."),
    MK(remove, "remove(key, force=False) -> int\n\n0, -704 missing, -706 leased (unless force), -703 being written "
               "(even with force: force bypasses the read lease only)."),
    MK(batch_remove, "batch_remove(keys, force=False) -> list[int]\n\nremove per key; force bypasses read leases "
                     "only. A key repeated in the batch: first 0, later -704."),
    MK(remove_by_regex, "remove_by_regex(regex_pattern, force=False) -> int\n\nRemoves the keys the pattern matches "
                        "anywhere (search semantics): the count, or -600 for an invalid pattern."),
    MK(remove_all, "remove_all(force=False) -> int\n\nRemoves every object (leased ones only with force): the count."),
    MK(batch_put_session_start,
       "batch_put_session_start(keys, sizes, config=None) -> list[int]\n\nLayer-wise put, step 1: PutStart for each "
       "key (sizes[i] bytes), nothing written yet. Per key 0, -600 (bad key or size, a session already open), -705 "
       "(exists) or the master's code. config.group_ids groups the keys."),
    MK(batch_put_from_multi_buffer_ranges,
       "batch_put_from_multi_buffer_ranges(keys, all_buffer_ptrs, all_sizes, all_dst_offsets) -> list[int]\n\n"
       "Layer-wise put, step 2: writes each buffer (inside registered memory) at its offset of the key's started "
       "object, to every replica. Per key the bytes written, or -600 (no open session, a range outside the object "
       "or the registered memory, mismatched row lengths)."),
    MK(batch_put_session_end, "batch_put_session_end(keys) -> list[int]\n\nLayer-wise put, step 3: PutEnd, the "
                              "objects become readable. Per key 0, or negative (-600 no session)."),
    MK(batch_put_session_revoke, "batch_put_session_revoke(keys) -> list[int]\n\nAbandons started objects "
                                 "(PutRevoke): nothing is left. Per key 0, or negative (-600 no session)."),
    MK(batch_get_session_start, "batch_get_session_start(keys) -> list[int]\n\nLayer-wise get, step 1: looks the "
                                "replicas up once (a read lease each). Per key 0, -704 missing, -702 no complete "
                                "replica."),
    MK(batch_get_into_multi_buffer_ranges,
       "batch_get_into_multi_buffer_ranges(keys, all_buffer_ptrs, all_sizes, all_src_offsets) -> list[int]\n\n"
       "Layer-wise get, step 2: reads each range (object offset, size) into its buffer (inside registered memory) "
       "from the replica batch_get_session_start chose, without asking the master. Per key bytes read, -600 (no "
       "session, range outside the object or registered memory), -707 (the lease ended)."),
    MK(batch_get_session_end, "batch_get_session_end(keys) -> 0\n\nDrops the keys' get sessions."),
    MK(register_buffer, "register_buffer(buffer_ptr, size) -> int\n\nRegisters caller memory for zero-copy calls; "
                        "-600 on null/zero size, overlap or transport failure."),
    MK(unregister_buffer, "unregister_buffer(buffer_ptr) -> int\n\nbuffer_ptr must start a registered range, else "
                          "-600."),
    {NULL}};

static PyGetSetDef Store_getset[] = {{"_ready", (getter)Store_ready, NULL, NULL, NULL}, {NULL}};

PyTypeObject McpyStoreType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "mooncake._mooncake.Store",
    .tp_basicsize = sizeof(StoreObj),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
    .tp_new = Store_new,
    .tp_dealloc = (destructor)Store_dealloc,
    .tp_methods = Store_methods,
    .tp_getset = Store_getset,
    .tp_weaklistoffset = offsetof(StoreObj, weak),
};

/* ------------------------------------------------------------------ BufferHandle */

typedef struct {
  PyObject_HEAD void *data;
  Py_ssize_t size;
  Py_ssize_t exports;
} BufObj;

PyObject *mcpy_buffer_handle(void *data, size_t size) {
  BufObj *b = PyObject_New(BufObj, &McpyBufferHandleType);
  if (!b) {
    free(data);
    return NULL;
  }
  b->data = data;
  b->size = (Py_ssize_t)size;
  b->exports = 0;
  return (PyObject *)b;
}

static void Buf_dealloc(BufObj *b) {
  free(b->data);
  PyObject_Free(b);
}

static int Buf_getbuffer(BufObj *b, Py_buffer *v, int flags) {
  int rc = PyBuffer_FillInfo(v, (PyObject *)b, b->data, b->size, 0, flags);
  if (!rc) {
    if (flags & PyBUF_FORMAT) v->format = "b";
    b->exports++;
  }
  return rc;
}

static void Buf_releasebuffer(BufObj *b, Py_buffer *v) { b->exports--; }

static PyBufferProcs Buf_as_buffer = {(getbufferproc)Buf_getbuffer, (releasebufferproc)Buf_releasebuffer};

static PyObject *Buf_ptr(BufObj *b, PyObject *u) { return PyLong_FromUnsignedLongLong((uintptr_t)b->data); }
static PyObject *Buf_size(BufObj *b, PyObject *u) { return PyLong_FromSsize_t(b->size); }
static Py_ssize_t Buf_len(BufObj *b) { return b->size; }

static PyMethodDef Buf_methods[] = {{"ptr", (PyCFunction)Buf_ptr, METH_NOARGS, "Address of the bytes."},
                                    {"size", (PyCFunction)Buf_size, METH_NOARGS, "Number of bytes."},
                                    {NULL}};
static PySequenceMethods Buf_as_seq = {.sq_length = (lenfunc)Buf_len};

PyTypeObject McpyBufferHandleType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "mooncake.store.BufferHandle",
    .tp_basicsize = sizeof(BufObj),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Bytes of one object read by get_buffer(); buffer protocol: 1-D, format 'b', writable.",
    .tp_dealloc = (destructor)Buf_dealloc,
    .tp_as_buffer = &Buf_as_buffer,
    .tp_as_sequence = &Buf_as_seq,
    .tp_methods = Buf_methods,
};
