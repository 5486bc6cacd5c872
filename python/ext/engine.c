/* mooncake._mooncake.Engine: TransferEngine (docs/python.md, "What is there") over libmooncake_te. Before a successful
 * initialize every method returns its failure value (-1, 0, [], b"") instead of touching a NULL engine.
 * Transfers collapse failures to -1 (as upstream's binding does); registrations return the engine's ERR_* codes. */
#include <stdlib.h>
#include <string.h>

#include "mcpy.h"

typedef struct {
  PyObject_HEAD transfer_engine_t e;
  PyObject *weak;
} EngObj;

#define KW(...) static char *kwl[] = {__VA_ARGS__, NULL}
#define NEED_ENGINE(fail)                      \
  if (!self->e) return PyLong_FromLong(fail)

static void Eng_dealloc(EngObj *self) {
  if (self->weak) PyObject_ClearWeakRefs((PyObject *)self);
  transfer_engine_t e = self->e;
  self->e = NULL;
  Py_BEGIN_ALLOW_THREADS destroyTransferEngine(e);
  Py_END_ALLOW_THREADS Py_TYPE(self)->tp_free((PyObject *)self);
}

/* _initialize(local_hostname, metadata_conn, protocol="tcp", device_name="") -> 0 / -1 (the Python layer builds
 * the connection string). "rdma" installs the RDMA transport on device_name's devices (docs/rdma.md; tcp when
 * it cannot be had, logged and counted); any other protocol gets tcp, as before. */
static PyObject *Eng_initialize(EngObj *self, PyObject *args) {
  const char *host, *meta, *proto = "tcp", *dev = "";
  if (!PyArg_ParseTuple(args, "ss|ss", &host, &meta, &proto, &dev)) return NULL;
  if (self->e) return PyLong_FromLong(-1); /* initialized once per object */
  transfer_engine_t e;
  int rdma = !strcmp(proto, "rdma");
  void *targs[2] = {(void *)dev, NULL};
  Py_BEGIN_ALLOW_THREADS e = createTransferEngine(meta, host, NULL, 0, !rdma);
  if (e && rdma && !installTransport(e, "rdma", *dev ? targs : NULL)) {
    destroyTransferEngine(e);
    e = NULL;
  }
  Py_END_ALLOW_THREADS self->e = e;
  return PyLong_FromLong(e ? 0 : -1);
}

static PyObject *Eng_get_rpc_port(EngObj *self, PyObject *u) {
  NEED_ENGINE(-1);
  char buf[300] = "";
  getLocalIpAndPort(self->e, buf, sizeof(buf));
  char *c = strrchr(buf, ':');
  return PyLong_FromLong(c ? atol(c + 1) : -1);
}

static PyObject *Eng_session_id(EngObj *self, PyObject *u) {
  return PyUnicode_FromString(self->e ? mc_te_local_segment_name(self->e) : "");
}

static PyObject *Eng_get_engine_ptr(EngObj *self, PyObject *u) {
  return PyLong_FromUnsignedLongLong((uintptr_t)self->e);
}

/* ------------------------------------------------------------------ memory */

static PyObject *Eng_register_memory(EngObj *self, PyObject *args, PyObject *kw) {
  KW("buffer_addr", "capacity", "location");
  PyObject *a_o, *n_o;
  const char *loc = "*";
  uint64_t a, n;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "OO|s", kwl, &a_o, &n_o, &loc) || mcpy_u64(a_o, &a, "buffer_addr") ||
      mcpy_u64(n_o, &n, "capacity"))
    return NULL;
  NEED_ENGINE(ERR_INVALID_ARGUMENT);
  int rc;
  Py_BEGIN_ALLOW_THREADS rc = registerLocalMemory(self->e, (void *)(uintptr_t)a, (size_t)n, loc, 1);
  Py_END_ALLOW_THREADS return PyLong_FromLong(rc);
}

static PyObject *Eng_unregister_memory(EngObj *self, PyObject *args, PyObject *kw) {
  KW("buffer_addr");
  PyObject *a_o;
  uint64_t a;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "O", kwl, &a_o) || mcpy_u64(a_o, &a, "buffer_addr")) return NULL;
  NEED_ENGINE(ERR_INVALID_ARGUMENT);
  int rc;
  Py_BEGIN_ALLOW_THREADS rc = unregisterLocalMemory(self->e, (void *)(uintptr_t)a);
  Py_END_ALLOW_THREADS return PyLong_FromLong(rc);
}

static PyObject *Eng_batch_register_memory(EngObj *self, PyObject *args, PyObject *kw) {
  KW("buffer_addresses", "capacities", "location");
  PyObject *a_o, *n_o;
  const char *loc = "*";
  struct mcpy_u64s a, n;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "OO|s", kwl, &a_o, &n_o, &loc) || mcpy_u64s(a_o, &a, "buffer_addresses"))
    return NULL;
  if (mcpy_u64s(n_o, &n, "capacities")) {
    mcpy_u64s_free(&a);
    return NULL;
  }
  int rc = ERR_INVALID_ARGUMENT;
  if (self->e && a.n == n.n && a.n) {
    buffer_entry_t *l = PyMem_Calloc(a.n, sizeof(*l));
    for (size_t i = 0; i < a.n; i++) l[i] = (buffer_entry_t){(void *)(uintptr_t)a.v[i], (size_t)n.v[i]};
    Py_BEGIN_ALLOW_THREADS rc = registerLocalMemoryBatch(self->e, l, a.n, loc);
    Py_END_ALLOW_THREADS PyMem_Free(l);
  } else if (self->e && a.n == n.n) {
    rc = 0;
  }
  mcpy_u64s_free(&n);
  mcpy_u64s_free(&a);
  return PyLong_FromLong(rc);
}

static PyObject *Eng_batch_unregister_memory(EngObj *self, PyObject *args, PyObject *kw) {
  KW("buffer_addresses");
  PyObject *a_o;
  struct mcpy_u64s a;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "O", kwl, &a_o) || mcpy_u64s(a_o, &a, "buffer_addresses")) return NULL;
  int rc = self->e ? 0 : ERR_INVALID_ARGUMENT;
  if (self->e && a.n) {
    Py_BEGIN_ALLOW_THREADS rc = unregisterLocalMemoryBatch(self->e, (void **)a.v, a.n);
    Py_END_ALLOW_THREADS
  }
  mcpy_u64s_free(&a);
  return PyLong_FromLong(rc);
}

static PyObject *Eng_allocate_managed_buffer(EngObj *self, PyObject *args, PyObject *kw) {
  KW("length");
  PyObject *n_o;
  uint64_t n;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "O", kwl, &n_o) || mcpy_u64(n_o, &n, "length")) return NULL;
  NEED_ENGINE(0);
  void *p = NULL;
  if (n) {
    Py_BEGIN_ALLOW_THREADS p = mc_te_alloc_shared(self->e, (size_t)n, "cpu:0");
    Py_END_ALLOW_THREADS
  }
  return PyLong_FromUnsignedLongLong((uintptr_t)p);
}

static PyObject *Eng_free_managed_buffer(EngObj *self, PyObject *args, PyObject *kw) {
  KW("buffer_addr", "length");
  PyObject *a_o, *n_o;
  uint64_t a, n;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "OO", kwl, &a_o, &n_o) || mcpy_u64(a_o, &a, "buffer_addr") ||
      mcpy_u64(n_o, &n, "length"))
    return NULL;
  NEED_ENGINE(-1);
  int rc;
  Py_BEGIN_ALLOW_THREADS rc = mc_te_free_shared(self->e, (void *)(uintptr_t)a);
  Py_END_ALLOW_THREADS return PyLong_FromLong(rc ? -1 : 0);
}

static PyObject *Eng_write_bytes_to_buffer(EngObj *self, PyObject *args, PyObject *kw) {
  KW("dest_address", "src_bytes", "length");
  PyObject *a_o, *s_o, *n_o;
  uint64_t a, n;
  Py_buffer v;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "OOO", kwl, &a_o, &s_o, &n_o) || mcpy_u64(a_o, &a, "dest_address") ||
      mcpy_u64(n_o, &n, "length"))
    return NULL;
  if (PyObject_GetBuffer(s_o, &v, PyBUF_ANY_CONTIGUOUS)) {
    PyErr_Clear();
    return PyErr_Format(PyExc_TypeError, "src_bytes: expected a bytes-like object");
  }
  int rc = -1;
  if (a && n <= (uint64_t)v.len) {
    Py_BEGIN_ALLOW_THREADS memcpy((void *)(uintptr_t)a, v.buf, (size_t)n);
    Py_END_ALLOW_THREADS rc = 0;
  }
  PyBuffer_Release(&v);
  return PyLong_FromLong(rc);
}

static PyObject *Eng_read_bytes_from_buffer(EngObj *self, PyObject *args, PyObject *kw) {
  KW("source_address", "length");
  PyObject *a_o, *n_o;
  uint64_t a, n;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "OO", kwl, &a_o, &n_o) || mcpy_u64(a_o, &a, "source_address") ||
      mcpy_u64(n_o, &n, "length"))
    return NULL;
  if (!a || n > PY_SSIZE_T_MAX) return PyBytes_FromStringAndSize("", 0);
  return PyBytes_FromStringAndSize((const char *)(uintptr_t)a, (Py_ssize_t)n);
}

/* ------------------------------------------------------------------ transfers */

static int transfer_timeout_ms(uint64_t total_bytes) {
  const char *v = getenv("MC_TRANSFER_TIMEOUT"); /* listed with every variable in src/common/knobs.h */
  long s = v ? atol(v) : 30;
  if (s < 5) s = 5;
  uint64_t ms = (uint64_t)s * 1000 + total_bytes / 1000000;
  return ms > (1u << 30) ? (1 << 30) : (int)ms;
}

/* Waits for a batch (bounded), observes every task, frees it. 0 when every task completed, else -1. */
static int finish_batch(transfer_engine_t e, batch_id_t b, size_t n, uint64_t total_bytes) {
  int st = mc_te_wait_batch(e, b, transfer_timeout_ms(total_bytes));
  if (st == STATUS_INVALID) return -1;
  for (size_t i = 0; i < n; i++) {
    struct transfer_status ts;
    getTransferStatus(e, b, i, &ts);
  }
  freeBatchID(e, b); /* BatchBusy after a timeout: the engine still owns it; we report the failure */
  return st == STATUS_COMPLETED ? 0 : -1;
}

/* Submits n requests to `target` (optionally with a notification); with wait, finishes the batch.
 * Returns 0 / -1; *id receives the batch id when not waiting. GIL released by the caller. */
static int submit(transfer_engine_t e, const char *target, size_t n, const uint64_t *src, const uint64_t *dst,
                  const uint64_t *len, int opcode, const char *nname, const char *nmsg, int wait, batch_id_t *id) {
  segment_id_t seg = openSegment(e, target);
  if (seg < 0) return -1;
  batch_id_t b = allocateBatchID(e, n);
  if (b == INVALID_BATCH) return -1;
  struct transfer_request *r = malloc(n * sizeof(*r));
  uint64_t total = 0;
  if (!r) {
    freeBatchID(e, b);
    return -1;
  }
  for (size_t i = 0; i < n; i++) {
    r[i] = (struct transfer_request){opcode, (void *)(uintptr_t)src[i], seg, dst[i], len[i]};
    total += len[i];
  }
  int rc = nname ? submitTransferWithNotify(e, b, r, n, (notify_msg_t){(char *)nname, (char *)nmsg})
                 : submitTransfer(e, b, r, n);
  free(r);
  if (rc) {
    freeBatchID(e, b);
    return -1;
  }
  if (!wait) {
    *id = b;
    return 0;
  }
  return finish_batch(e, b, n, total);
}

/* The name/msg of a TransferNotify (None = no notification). 0 / -1 (TypeError). */
static int notify_args(PyObject *o, PyObject **refs, const char **name, const char **msg) {
  *name = *msg = NULL;
  refs[0] = refs[1] = NULL;
  if (!o || o == Py_None) return 0;
  refs[0] = PyObject_GetAttrString(o, "name");
  refs[1] = PyObject_GetAttrString(o, "msg");
  if (!refs[0] || !refs[1] || mcpy_str(refs[0], name, "notify.name") || mcpy_str(refs[1], msg, "notify.msg")) {
    PyErr_Clear();
    Py_XDECREF(refs[0]);
    Py_XDECREF(refs[1]);
    refs[0] = refs[1] = NULL;
    PyErr_SetString(PyExc_TypeError, "notify: expected a TransferNotify (with str name and msg)");
    return -1;
  }
  return 0;
}

/* transfer(target, buffers, peer_addrs, lengths, opcode, notify, wait, batch): the common body of every
 * transfer method; single = scalar arguments. Returns a Python int (status, or batch id / 0 when async). */
static PyObject *transfer(EngObj *self, PyObject *t_o, PyObject *b_o, PyObject *p_o, PyObject *l_o, int opcode,
                          PyObject *notify, int single, int wait) {
  const char *target, *nname, *nmsg;
  struct mcpy_u64s b = {0}, p = {0}, l = {0};
  PyObject *refs[2] = {NULL, NULL}, *res = NULL;
  if (mcpy_str(t_o, &target, "target_hostname")) return NULL;
  if (single) {
    b.v = PyMem_Calloc(1, 8), p.v = PyMem_Calloc(1, 8), l.v = PyMem_Calloc(1, 8);
    b.n = p.n = l.n = 1;
    if (mcpy_u64(b_o, b.v, "buffer") || mcpy_u64(p_o, p.v, "peer_buffer_address") || mcpy_u64(l_o, l.v, "length"))
      goto out;
  } else if (mcpy_u64s(b_o, &b, "buffers") || mcpy_u64s(p_o, &p, "peer_buffer_addresses") ||
             mcpy_u64s(l_o, &l, "lengths")) {
    goto out;
  }
  if (notify_args(notify, refs, &nname, &nmsg)) goto out;
  long rc = -1;
  batch_id_t id = 0;
  if (!self->e || b.n != p.n || b.n != l.n || (opcode != OPCODE_READ && opcode != OPCODE_WRITE)) {
    rc = -1;
  } else if (!b.n) {
    rc = wait ? 0 : -1;
  } else {
    Py_BEGIN_ALLOW_THREADS rc = submit(self->e, target, b.n, b.v, p.v, l.v, opcode, nname, nmsg, wait, &id);
    Py_END_ALLOW_THREADS
  }
  res = wait ? PyLong_FromLong(rc) : PyLong_FromUnsignedLongLong(rc ? 0 : id);
out:
  Py_XDECREF(refs[0]);
  Py_XDECREF(refs[1]);
  mcpy_u64s_free(&b);
  mcpy_u64s_free(&p);
  mcpy_u64s_free(&l);
  return res;
}

static int opcode_arg(PyObject *o, int *op) {
  uint64_t v;
  if (mcpy_u64(o, &v, "opcode")) return -1;
  *op = v > 1 ? -1 : (int)v;
  return 0;
}

/* transfer_sync_write / transfer_sync_read / transfer_submit_write */
#define SINGLE(fn, opcode, wait)                                                                           \
  static PyObject *Eng_##fn(EngObj *self, PyObject *args, PyObject *kw) {                                  \
    KW("target_hostname", "buffer", "peer_buffer_address", "length", "transport_hint");                    \
    PyObject *t, *b, *p, *l;                                                                               \
    const char *hint = "";                                                                                 \
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OOOO|s", kwl, &t, &b, &p, &l, &hint)) return NULL;         \
    return transfer(self, t, b, p, l, opcode, NULL, 1, wait);                                              \
  }
SINGLE(transfer_sync_write, OPCODE_WRITE, 1)
SINGLE(transfer_sync_read, OPCODE_READ, 1)
SINGLE(transfer_submit_write, OPCODE_WRITE, 0)

/* batch_transfer_{sync,async}_{write,read} */
#define BATCH(fn, opcode, wait)                                                                            \
  static PyObject *Eng_##fn(EngObj *self, PyObject *args, PyObject *kw) {                                  \
    KW("target_hostname", "buffers", "peer_buffer_addresses", "lengths", "transport_hint");                \
    PyObject *t, *b, *p, *l;                                                                               \
    const char *hint = "";                                                                                 \
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OOOO|s", kwl, &t, &b, &p, &l, &hint)) return NULL;         \
    return transfer(self, t, b, p, l, opcode, NULL, 0, wait);                                              \
  }
BATCH(batch_transfer_sync_write, OPCODE_WRITE, 1)
BATCH(batch_transfer_sync_read, OPCODE_READ, 1)
BATCH(batch_transfer_async_write, OPCODE_WRITE, 0)
BATCH(batch_transfer_async_read, OPCODE_READ, 0)

/* transfer_sync(target, buffer, peer_addr, length, opcode, notify=None) and the batch forms with opcode */
static PyObject *with_opcode(EngObj *self, PyObject *args, PyObject *kw, int single, int wait) {
  KW("target_hostname", "buffer", "peer_buffer_address", "length", "opcode", "notify", "transport_hint");
  PyObject *t, *b, *p, *l, *op_o, *notify = Py_None;
  const char *hint = "";
  int op;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "OOOOO|Os", kwl, &t, &b, &p, &l, &op_o, &notify, &hint) ||
      opcode_arg(op_o, &op))
    return NULL;
  return transfer(self, t, b, p, l, op, notify, single, wait);
}

static PyObject *Eng_transfer_sync(EngObj *self, PyObject *a, PyObject *k) { return with_opcode(self, a, k, 1, 1); }
static PyObject *Eng_batch_transfer_sync(EngObj *self, PyObject *a, PyObject *k) { return with_opcode(self, a, k, 0, 1); }
static PyObject *Eng_batch_transfer_async(EngObj *self, PyObject *a, PyObject *k) { return with_opcode(self, a, k, 0, 0); }

static PyObject *Eng_get_batch_transfer_status(EngObj *self, PyObject *args, PyObject *kw) {
  KW("batch_ids");
  PyObject *o;
  struct mcpy_u64s ids;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "O", kwl, &o) || mcpy_u64s(o, &ids, "batch_ids")) return NULL;
  int rc = self->e ? 0 : -1;
  if (self->e) {
    Py_BEGIN_ALLOW_THREADS for (size_t i = 0; i < ids.n; i++) if (finish_batch(self->e, ids.v[i], 0, 0)) rc = -1;
    Py_END_ALLOW_THREADS
  }
  mcpy_u64s_free(&ids);
  return PyLong_FromLong(rc);
}

static PyObject *Eng_transfer_check_status(EngObj *self, PyObject *args, PyObject *kw) {
  KW("batch_id");
  PyObject *o;
  uint64_t id;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "O", kwl, &o) || mcpy_u64(o, &id, "batch_id")) return NULL;
  NEED_ENGINE(-1);
  int st = mc_te_batch_status(self->e, id);
  if (st == STATUS_WAITING || st == STATUS_PENDING) return PyLong_FromLong(0);
  if (st == STATUS_INVALID) return PyLong_FromLong(-1);
  struct transfer_status ts;
  for (size_t i = 0; getTransferStatus(self->e, id, i, &ts) == 0; i++) {
  }
  freeBatchID(self->e, id);
  return PyLong_FromLong(st == STATUS_COMPLETED ? 1 : st == STATUS_TIMEOUT ? -2 : -1);
}

/* ------------------------------------------------------------------ segments and notifications */

static PyObject *Eng_segment_json(EngObj *self, PyObject *args) {
  const char *name;
  if (!PyArg_ParseTuple(args, "s", &name)) return NULL;
  if (!self->e) Py_RETURN_NONE;
  char *j = NULL;
  Py_BEGIN_ALLOW_THREADS segment_id_t id = openSegmentNoCache(self->e, name);
  if (id < 0) id = openSegment(self->e, name);
  j = id >= 0 ? mc_te_segment_json(self->e, id) : NULL;
  Py_END_ALLOW_THREADS if (!j) Py_RETURN_NONE;
  PyObject *r = PyUnicode_FromString(j);
  free(j);
  return r;
}

static PyObject *Eng_send_probe(EngObj *self, PyObject *args, PyObject *kw) {
  KW("peer_server_name");
  PyObject *o;
  const char *peer;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "O", kwl, &o) || mcpy_str(o, &peer, "peer_server_name")) return NULL;
  NEED_ENGINE(-1);
  segment_id_t id;
  Py_BEGIN_ALLOW_THREADS id = openSegmentNoCache(self->e, peer);
  Py_END_ALLOW_THREADS return PyLong_FromLong(id >= 0 ? 0 : -1);
}

/* _notifies() -> [(name, msg)] */
static PyObject *Eng_notifies(EngObj *self, PyObject *u) {
  if (!self->e) return PyList_New(0);
  int n = 0;
  notify_msg_t *m = getNotifsFromEngine(self->e, &n);
  PyObject *l = PyList_New(m ? n : 0);
  for (int i = 0; m && l && i < n; i++) PyList_SET_ITEM(l, i, Py_BuildValue("(ss)", m[i].name, m[i].msg));
  if (m) freeNotifsMsgBuf(m, n);
  return l;
}

/* Docstrings: the contract in brief (docs/python.md has the details). */
#define M(name, flags, doc) {#name, (PyCFunction)(void (*)(void))Eng_##name, flags, doc}
#define MK(name, doc) M(name, METH_VARARGS | METH_KEYWORDS, doc)
#define SYNC_DOC(fn, dir) #fn "(target_hostname, buffer, peer_buffer_address, length) -> int\n\n" dir \
  " length bytes between local registered memory at buffer and the peer's absolute address; blocks: 0 or -1."
#define BATCH_DOC(fn, what) #fn "(target_hostname, buffers, peer_buffer_addresses, lengths) -> int\n\n" what
static PyMethodDef Eng_methods[] = {
    {"_initialize", (PyCFunction)Eng_initialize, METH_VARARGS, NULL},
    {"_session_id", (PyCFunction)Eng_session_id, METH_NOARGS, NULL},
    {"_segment_json", (PyCFunction)Eng_segment_json, METH_VARARGS, NULL},
    {"_notifies", (PyCFunction)Eng_notifies, METH_NOARGS, NULL},
    M(get_rpc_port, METH_NOARGS, "get_rpc_port() -> int\n\nThe engine's bound RPC port (-1 before initialize)."),
    M(get_engine_ptr, METH_NOARGS, "get_engine_ptr() -> int\n\nThe native engine handle as an int (0 before "
                                   "initialize)."),
    MK(register_memory, "register_memory(buffer_addr, capacity, location=\"*\") -> int\n\nRegisters memory for "
                        "transfers: 0, or a negative engine code (-1 zero length, -7 overlap)."),
    MK(unregister_memory, "unregister_memory(buffer_addr) -> int\n\n0, or -3 for an address that starts no "
                          "registration."),
    MK(batch_register_memory, "batch_register_memory(buffer_addresses, capacities, location=\"*\") -> int\n\n"
                              "All-or-nothing registration; length mismatch -1."),
    MK(batch_unregister_memory, "batch_unregister_memory(buffer_addresses) -> int\n\nUnregisters each (continuing "
                                "past errors): 0 or the first error."),
    MK(allocate_managed_buffer, "allocate_managed_buffer(length) -> int\n\nAddress of registered memory of at least "
                                "length bytes, or 0."),
    MK(free_managed_buffer, "free_managed_buffer(buffer_addr, length) -> int\n\nReturns a managed buffer: 0 or -1."),
    MK(write_bytes_to_buffer, "write_bytes_to_buffer(dest_address, src_bytes, length) -> int\n\nCopies length bytes "
                              "of src_bytes to dest_address (inside registered memory): 0 or -1."),
    MK(read_bytes_from_buffer, "read_bytes_from_buffer(source_address, length) -> bytes\n\nlength bytes from "
                               "registered memory (b\"\" on error)."),
    MK(transfer_sync_write, SYNC_DOC(transfer_sync_write, "Writes")),
    MK(transfer_sync_read, SYNC_DOC(transfer_sync_read, "Reads")),
    MK(transfer_submit_write, "transfer_submit_write(target_hostname, buffer, peer_buffer_address, length) -> int\n\n"
                              "Submits a write: a batch id for transfer_check_status, or 0."),
    MK(transfer_sync, "transfer_sync(target_hostname, buffer, peer_buffer_address, length, opcode, notify=None) -> "
                      "int\n\nA read or write (TransferOpcode); with a TransferNotify the peer receives it after "
                      "completion. 0 or -1."),
    MK(batch_transfer_sync_write, BATCH_DOC(batch_transfer_sync_write, "All-or-nothing batch write; blocks: 0 or -1.")),
    MK(batch_transfer_sync_read, BATCH_DOC(batch_transfer_sync_read, "All-or-nothing batch read; blocks: 0 or -1.")),
    MK(batch_transfer_sync, "batch_transfer_sync(target_hostname, buffers, peer_buffer_addresses, lengths, opcode, "
                            "notify=None) -> int\n\nBatch read or write; blocks: 0 or -1."),
    MK(batch_transfer_async_write, BATCH_DOC(batch_transfer_async_write, "Submits a batch write: its id, or 0.")),
    MK(batch_transfer_async_read, BATCH_DOC(batch_transfer_async_read, "Submits a batch read: its id, or 0.")),
    MK(batch_transfer_async, "batch_transfer_async(target_hostname, buffers, peer_buffer_addresses, lengths, opcode) "
                             "-> int\n\nSubmits a batch: its id, or 0."),
    MK(get_batch_transfer_status, "get_batch_transfer_status(batch_ids) -> int\n\nWaits for every batch: 0 when all "
                                  "completed, -1 when any failed or timed out; the ids are released."),
    MK(transfer_check_status, "transfer_check_status(batch_id) -> int\n\n1 done, 0 running, -1 failed, -2 timed out "
                              "(the id is released after 1 or -1)."),
    MK(send_probe, "send_probe(peer_server_name) -> int\n\nChecks a peer's RPC port: 0 reachable, else non-zero."),
    {NULL}};

PyTypeObject McpyEngineType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "mooncake._mooncake.Engine",
    .tp_basicsize = sizeof(EngObj),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
    .tp_new = PyType_GenericNew,
    .tp_dealloc = (destructor)Eng_dealloc,
    .tp_methods = Eng_methods,
    .tp_weaklistoffset = offsetof(EngObj, weak),
};
