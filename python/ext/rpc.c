/* mooncake._mooncake.MsgServer / MsgClient: the message API of include/mooncake/transfer_engine.h
 * ("Messages", docs/transfer-engine.md) for mooncake/_rpc.py (RpcInterface). Failures are return values;
 * only wrong argument types raise (TypeError). Every call that can block runs with the GIL released; the
 * server's handler takes the GIL on the server's own threads to call the Python handler. */
#include "mcpy.h"

#include "mooncake/store_errors.h"

/* What the C server calls: owns a reference to the Python handler; freed after the server stopped. */
struct msg_target {
  PyObject *handler;
};

typedef struct {
  PyObject_HEAD mc_msg_server_t *srv; /* NULL once stopped */
  struct msg_target *target;
  int port;
} ServerObj;

static int on_msg(void *ctx, uint16_t kind, const uint8_t *body, size_t len) {
  struct msg_target *t = ctx;
  if (!Py_IsInitialized() || _Py_IsFinalizing()) return MC_RPC_FAIL;
  PyGILState_STATE g = PyGILState_Ensure();
  int rc = MC_INVALID_PARAMS;
  PyObject *b = PyBytes_FromStringAndSize((const char *)body, (Py_ssize_t)len);
  PyObject *r = b ? PyObject_CallFunction(t->handler, "iO", (int)kind, b) : NULL;
  if (r && PyLong_Check(r)) {
    long v = PyLong_AsLong(r);
    rc = v <= 0 && v >= INT32_MIN ? (int)v : MC_INVALID_PARAMS;
  }
  if (PyErr_Occurred()) PyErr_WriteUnraisable(t->handler); /* a handler that raised: logged, the sender gets -600 */
  Py_XDECREF(r);
  Py_XDECREF(b);
  PyGILState_Release(g);
  return rc;
}

static void server_stop(ServerObj *self) {
  mc_msg_server_t *s = self->srv;
  struct msg_target *t = self->target;
  self->srv = NULL, self->target = NULL;
  if (s) {
    Py_BEGIN_ALLOW_THREADS mc_msg_server_stop(s); /* waits for running handlers, which take the GIL */
    Py_END_ALLOW_THREADS
  }
  if (t) {
    Py_XDECREF(t->handler);
    PyMem_Free(t);
  }
}

static void Server_dealloc(ServerObj *self) {
  server_stop(self);
  Py_TYPE(self)->tp_free((PyObject *)self);
}

/* MsgServer(bind_ip, port, threads, idle_timeout_s, handler): handler(kind, body bytes) -> status int. */
static int Server_init(ServerObj *self, PyObject *args, PyObject *kw) {
  (void)kw;
  PyObject *ip_o, *handler;
  const char *ip;
  int port, threads, idle;
  if (!PyArg_ParseTuple(args, "OiiiO", &ip_o, &port, &threads, &idle, &handler) || mcpy_str(ip_o, &ip, "bind_ip"))
    return -1;
  if (!PyCallable_Check(handler)) {
    PyErr_SetString(PyExc_TypeError, "handler: expected a callable");
    return -1;
  }
  server_stop(self);
  self->port = -1;
  if (port < 0 || port > 65535 || threads < 0 || idle < 0) return 0; /* not started: port() is -1 */
  struct msg_target *t = PyMem_Malloc(sizeof *t);
  if (!t) return -1;
  Py_INCREF(handler);
  t->handler = handler;
  uint16_t got = 0;
  mc_msg_server_t *s;
  Py_BEGIN_ALLOW_THREADS s = mc_msg_server_start(ip, (uint16_t)port, threads, idle, on_msg, t, &got);
  Py_END_ALLOW_THREADS if (!s) {
    Py_DECREF(handler);
    PyMem_Free(t);
    return 0;
  }
  self->srv = s, self->target = t, self->port = got;
  return 0;
}

static PyObject *server_port(ServerObj *self, PyObject *unused) {
  (void)unused;
  return PyLong_FromLong(self->srv ? self->port : -1);
}

static PyObject *server_stop_m(ServerObj *self, PyObject *unused) {
  (void)unused;
  server_stop(self);
  Py_RETURN_NONE;
}

static PyMethodDef server_methods[] = {
    {"port", (PyCFunction)server_port, METH_NOARGS, "The port listened on; -1 when not listening."},
    {"stop", (PyCFunction)server_stop_m, METH_NOARGS, "Stops listening and waits for running handlers."},
    {NULL}};

PyTypeObject McpyMsgServerType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "mooncake._mooncake.MsgServer",
    .tp_basicsize = sizeof(ServerObj),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A message server (include/mooncake/transfer_engine.h, \"Messages\").",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Server_init,
    .tp_dealloc = (destructor)Server_dealloc,
    .tp_methods = server_methods,
};

typedef struct {
  PyObject_HEAD mc_msg_client_t *c;
  mc_msg_client_t *closing; /* closed while sends ran: freed by the last of them */
  int inflight;             /* sends running without the GIL (changed only with the GIL held) */
} ClientObj;

static void client_free(mc_msg_client_t *c) {
  if (c) {
    Py_BEGIN_ALLOW_THREADS mc_msg_client_free(c);
    Py_END_ALLOW_THREADS
  }
}

static void client_close(ClientObj *self) {
  mc_msg_client_t *c = self->c;
  if (!c) return;
  self->c = NULL;
  if (self->inflight)
    self->closing = c; /* a send still uses it */
  else
    client_free(c);
}

static void Client_dealloc(ClientObj *self) {
  client_close(self);
  Py_TYPE(self)->tp_free((PyObject *)self);
}

/* MsgClient(host, port, timeout_ms) */
static int Client_init(ClientObj *self, PyObject *args, PyObject *kw) {
  (void)kw;
  PyObject *h;
  const char *host;
  int port, tmo;
  if (!PyArg_ParseTuple(args, "Oii", &h, &port, &tmo) || mcpy_str(h, &host, "host")) return -1;
  if (self->inflight) return 0; /* re-initialized while sends run: keeps its target */
  client_close(self);
  if (port > 0 && port <= 65535 && tmo > 0) self->c = mc_msg_client_new(host, (uint16_t)port, tmo);
  return 0;
}

/* send(kind, data) -> status (0, or negative); data: any contiguous buffer. */
static PyObject *client_send(ClientObj *self, PyObject *args) {
  int kind;
  Py_buffer view;
  if (!PyArg_ParseTuple(args, "iy*", &kind, &view)) return NULL;
  int rc = MC_INVALID_PARAMS;
  if (self->c && kind >= 0 && kind <= 65535) {
    mc_msg_client_t *c = self->c;
    self->inflight++;
    Py_BEGIN_ALLOW_THREADS rc = mc_msg_send(c, (uint16_t)kind, view.buf, (size_t)view.len);
    Py_END_ALLOW_THREADS if (--self->inflight == 0 && self->closing) {
      mc_msg_client_t *z = self->closing;
      self->closing = NULL;
      client_free(z);
    }
  }
  PyBuffer_Release(&view);
  return PyLong_FromLong(rc);
}

static PyObject *client_close_m(ClientObj *self, PyObject *unused) {
  (void)unused;
  client_close(self);
  Py_RETURN_NONE;
}

static PyMethodDef client_methods[] = {
    {"send", (PyCFunction)client_send, METH_VARARGS, "send(kind, data) -> the receiver's status or -9xx/-600."},
    {"close", (PyCFunction)client_close_m, METH_NOARGS, "Drops the connections."},
    {NULL}};

PyTypeObject McpyMsgClientType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "mooncake._mooncake.MsgClient",
    .tp_basicsize = sizeof(ClientObj),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A message sender to one host:port (include/mooncake/transfer_engine.h, \"Messages\").",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Client_init,
    .tp_dealloc = (destructor)Client_dealloc,
    .tp_methods = client_methods,
};
