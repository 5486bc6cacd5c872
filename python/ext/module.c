/* mooncake._mooncake: the native part of the mooncake package (types Store, Engine, BufferHandle, P2PStore, MsgServer,
 * MsgClient and the store error names). Loaded by mooncake/store.py and mooncake/engine.py. */
#include "mcpy.h"

static PyObject *err_name(PyObject *m, PyObject *args) {
  int code;
  if (!PyArg_ParseTuple(args, "i", &code)) return NULL;
  return PyUnicode_FromString(mooncake_store_err_name(code));
}

static PyMethodDef mod_methods[] = {
    {"err_name", err_name, METH_VARARGS, "Name of a store ErrorCode (-704 -> 'OBJECT_NOT_FOUND')."}, {NULL}};

static struct PyModuleDef mod = {PyModuleDef_HEAD_INIT, "mooncake._mooncake", NULL, -1, mod_methods};

PyMODINIT_FUNC PyInit__mooncake(void) {
  if (PyType_Ready(&McpyStoreType) || PyType_Ready(&McpyEngineType) || PyType_Ready(&McpyBufferHandleType) ||
      PyType_Ready(&McpyP2PType) || PyType_Ready(&McpyMsgServerType) || PyType_Ready(&McpyMsgClientType))
    return NULL;
  PyObject *m = PyModule_Create(&mod);
  if (!m) return NULL;
  PyModule_AddObjectRef(m, "Store", (PyObject *)&McpyStoreType);
  PyModule_AddObjectRef(m, "Engine", (PyObject *)&McpyEngineType);
  PyModule_AddObjectRef(m, "BufferHandle", (PyObject *)&McpyBufferHandleType);
  PyModule_AddObjectRef(m, "P2PStore", (PyObject *)&McpyP2PType);
  PyModule_AddObjectRef(m, "MsgServer", (PyObject *)&McpyMsgServerType);
  PyModule_AddObjectRef(m, "MsgClient", (PyObject *)&McpyMsgClientType);
  return m;
}
