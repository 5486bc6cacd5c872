/* mooncake._mooncake.P2PStore: the P2P store (include/mooncake/p2p_store.h; docs/p2p-store.md) for
 * mooncake/p2p.py. Failures are return values (negative MC_P2P_* codes); only wrong argument types raise
 * (TypeError). Every call that can block runs with the GIL released. */
#include "mcpy.h"

#include "mooncake/p2p_store.h"

typedef struct {
  PyObject_HEAD mc_p2p_store_t *s; /* NULL before a successful init() and after close() */
} P2PObj;

static void close_store(P2PObj *self) {
  mc_p2p_store_t *s = self->s;
  self->s = NULL;
  if (s) {
    Py_BEGIN_ALLOW_THREADS mc_p2p_store_close(s);
    Py_END_ALLOW_THREADS
  }
}

static void P2P_dealloc(P2PObj *self) {
  close_store(self);
  Py_TYPE(self)->tp_free((PyObject *)self);
}

/* init(metadata_conn, local_server_name, nic_priority_matrix) -> 0 or -1 */
static PyObject *p2p_init(P2PObj *self, PyObject *args) {
  PyObject *a, *b, *c;
  const char *meta, *name, *matrix;
  if (!PyArg_ParseTuple(args, "OOO", &a, &b, &c) || mcpy_str(a, &meta, "metadata_conn") ||
      mcpy_str(b, &name, "local_server_name") || mcpy_str(c, &matrix, "nic_priority_matrix"))
    return NULL;
  close_store(self);
  mc_p2p_store_t *s;
  Py_BEGIN_ALLOW_THREADS s = mc_p2p_store_new(meta, name, matrix);
  Py_END_ALLOW_THREADS self->s = s;
  return PyLong_FromLong(s ? 0 : -1);
}

static PyObject *p2p_close(P2PObj *self, PyObject *unused) {
  (void)unused;
  close_store(self);
  Py_RETURN_NONE;
}

static PyObject *p2p_local_name(P2PObj *self, PyObject *unused) {
  (void)unused;
  return PyUnicode_FromString(self->s ? mc_p2p_local_server_name(self->s) : "");
}

/* name, addr_list, size_list converted; 0 / -1 (TypeError). */
static int buffers(PyObject *n, PyObject *a, PyObject *z, const char **name, struct mcpy_u64s *addrs,
                   struct mcpy_u64s *sizes) {
  if (mcpy_str(n, name, "name") || mcpy_u64s(a, addrs, "addr_list")) return -1;
  if (mcpy_u64s(z, sizes, "size_list")) {
    mcpy_u64s_free(addrs);
    return -1;
  }
  return 0;
}

/* register(name, addr_list, size_list, max_shard_size, location, force_create) -> code */
static PyObject *p2p_register(P2PObj *self, PyObject *args) {
  PyObject *n, *a, *z, *loc;
  unsigned long long shard;
  int force;
  const char *name, *location;
  struct mcpy_u64s addrs, sizes;
  if (!PyArg_ParseTuple(args, "OOOKOp", &n, &a, &z, &shard, &loc, &force) || mcpy_str(loc, &location, "location") ||
      buffers(n, a, z, &name, &addrs, &sizes))
    return NULL;
  int rc = MC_P2P_INVALID_ARGUMENT;
  if (self->s && addrs.n == sizes.n) {
    Py_BEGIN_ALLOW_THREADS rc = mc_p2p_register(self->s, name, (void *const *)addrs.v, (const size_t *)sizes.v, addrs.n,
                                                shard, location, force);
    Py_END_ALLOW_THREADS
  }
  mcpy_u64s_free(&addrs);
  mcpy_u64s_free(&sizes);
  return PyLong_FromLong(rc);
}

typedef int (*fetch_fn)(mc_p2p_store_t *, const char *, void *const *, const size_t *, size_t);

/* get_replica / get_copy (name, addr_list, size_list) -> code */
static PyObject *fetch_into(P2PObj *self, PyObject *args, fetch_fn fn) {
  PyObject *n, *a, *z;
  const char *name;
  struct mcpy_u64s addrs, sizes;
  if (!PyArg_ParseTuple(args, "OOO", &n, &a, &z) || buffers(n, a, z, &name, &addrs, &sizes)) return NULL;
  int rc = MC_P2P_INVALID_ARGUMENT;
  if (self->s && addrs.n == sizes.n) {
    Py_BEGIN_ALLOW_THREADS rc = fn(self->s, name, (void *const *)addrs.v, (const size_t *)sizes.v, addrs.n);
    Py_END_ALLOW_THREADS
  }
  mcpy_u64s_free(&addrs);
  mcpy_u64s_free(&sizes);
  return PyLong_FromLong(rc);
}

static PyObject *p2p_get_replica(P2PObj *self, PyObject *args) { return fetch_into(self, args, mc_p2p_get_replica); }
/* (mc_p2p_get_copy: this node never becomes a holder, docs/p2p-store.md "Operations") */
static PyObject *p2p_get_copy(P2PObj *self, PyObject *args) { return fetch_into(self, args, mc_p2p_get_copy); }

/* unregister(name) / delete_replica(name) -> code */
static PyObject *by_name(P2PObj *self, PyObject *args, int (*fn)(mc_p2p_store_t *, const char *)) {
  PyObject *n;
  const char *name;
  if (!PyArg_ParseTuple(args, "O", &n) || mcpy_str(n, &name, "name")) return NULL;
  int rc = MC_P2P_INVALID_ARGUMENT;
  if (self->s) {
    Py_BEGIN_ALLOW_THREADS rc = fn(self->s, name);
    Py_END_ALLOW_THREADS
  }
  return PyLong_FromLong(rc);
}

static PyObject *p2p_unregister(P2PObj *self, PyObject *args) { return by_name(self, args, mc_p2p_unregister); }
static PyObject *p2p_delete_replica(P2PObj *self, PyObject *args) { return by_name(self, args, mc_p2p_delete_replica); }

/* list(prefix) -> [{"Name", "MaxShardSize", "TotalSize", "SizeList"}], or a negative code */
static PyObject *p2p_list(P2PObj *self, PyObject *args) {
  PyObject *p;
  const char *prefix;
  if (!PyArg_ParseTuple(args, "O", &p) || mcpy_str(p, &prefix, "name_prefix")) return NULL;
  mc_p2p_payload_info_t *l = NULL;
  size_t n = 0;
  int rc = MC_P2P_INVALID_ARGUMENT;
  if (self->s) {
    Py_BEGIN_ALLOW_THREADS rc = mc_p2p_list(self->s, prefix, &l, &n);
    Py_END_ALLOW_THREADS
  }
  if (rc) return PyLong_FromLong(rc);
  PyObject *out = PyList_New((Py_ssize_t)n);
  for (size_t i = 0; out && i < n; i++) {
    PyObject *sl = PyList_New((Py_ssize_t)l[i].size_count);
    for (size_t j = 0; sl && j < l[i].size_count; j++)
      PyList_SET_ITEM(sl, (Py_ssize_t)j, PyLong_FromUnsignedLongLong(l[i].size_list[j]));
    PyObject *d = sl ? Py_BuildValue("{s:s, s:K, s:K, s:N}", "Name", l[i].name, "MaxShardSize",
                                     (unsigned long long)l[i].max_shard_size, "TotalSize",
                                     (unsigned long long)l[i].total_size, "SizeList", sl)
                     : NULL;
    if (!d) {
      Py_CLEAR(out);
      break;
    }
    PyList_SET_ITEM(out, (Py_ssize_t)i, d);
  }
  mc_p2p_list_free(l, n);
  return out;
}

static PyObject *p2p_strerror(PyObject *unused, PyObject *args) {
  (void)unused;
  int code;
  if (!PyArg_ParseTuple(args, "i", &code)) return NULL;
  return PyUnicode_FromString(mc_p2p_strerror(code));
}

static PyMethodDef P2P_methods[] = {
    {"init", (PyCFunction)p2p_init, METH_VARARGS, "init(metadata_conn, local_server_name, nic_priority_matrix)"},
    {"close", (PyCFunction)p2p_close, METH_NOARGS, "close()"},
    {"get_local_server_name", (PyCFunction)p2p_local_name, METH_NOARGS, "the engine's ip:port"},
    {"register", (PyCFunction)p2p_register, METH_VARARGS, "register(name, addrs, sizes, max_shard, location, force)"},
    {"unregister", (PyCFunction)p2p_unregister, METH_VARARGS, "unregister(name)"},
    {"list", (PyCFunction)p2p_list, METH_VARARGS, "list(name_prefix)"},
    {"get_replica", (PyCFunction)p2p_get_replica, METH_VARARGS, "get_replica(name, addrs, sizes)"},
    {"get_copy", (PyCFunction)p2p_get_copy, METH_VARARGS, "get_copy(name, addrs, sizes)"},
    {"delete_replica", (PyCFunction)p2p_delete_replica, METH_VARARGS, "delete_replica(name)"},
    {"strerror", (PyCFunction)p2p_strerror, METH_VARARGS | METH_STATIC, "the error text of a code"},
    {NULL}};

PyTypeObject McpyP2PType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "mooncake._mooncake.P2PStore",
    .tp_basicsize = sizeof(P2PObj),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
    .tp_new = PyType_GenericNew,
    .tp_dealloc = (destructor)P2P_dealloc,
    .tp_methods = P2P_methods,
};
