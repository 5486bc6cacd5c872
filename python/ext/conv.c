/* Argument conversion for the extension: Python objects -> C values, with TypeError (naming the
 * argument) as the only failure (docs/python.md, "Conventions"). */
#include "mcpy.h"

#include <string.h>

int mcpy_u64(PyObject *o, uint64_t *out, const char *what) {
  PyObject *i = (o && !PyFloat_Check(o)) ? PyNumber_Index(o) : NULL;
  if (!i) {
    PyErr_Clear();
    PyErr_Format(PyExc_TypeError, "%s: expected a non-negative int, got %s", what, o ? Py_TYPE(o)->tp_name : "nothing");
    return -1;
  }
  int overflow = 0;
  long long sv = PyLong_AsLongLongAndOverflow(i, &overflow);
  unsigned long long v = 0;
  int bad = overflow < 0 || (!overflow && sv < 0);
  if (!bad && overflow > 0) {
    v = PyLong_AsUnsignedLongLong(i);
    bad = v == (unsigned long long)-1 && PyErr_Occurred();
    PyErr_Clear();
  } else if (!bad) {
    v = (unsigned long long)sv;
  }
  Py_DECREF(i);
  if (bad) {
    PyErr_Format(PyExc_TypeError, "%s: expected an int in [0, 2^64), got %R", what, o);
    return -1;
  }
  *out = v;
  return 0;
}

int mcpy_str(PyObject *o, const char **out, const char *what) {
  if (!o || !PyUnicode_Check(o)) {
    PyErr_Format(PyExc_TypeError, "%s: expected str, got %s", what, o ? Py_TYPE(o)->tp_name : "nothing");
    return -1;
  }
  *out = PyUnicode_AsUTF8(o);
  if (!*out) {
    PyErr_Clear();
    PyErr_Format(PyExc_TypeError, "%s: string is not encodable as UTF-8", what);
    return -1;
  }
  return 0;
}

/* A fast sequence of o, or NULL with TypeError (None, str, bytes and non-sequences are refused). */
static PyObject *seq(PyObject *o, const char *what) {
  if (o && o != Py_None && !PyUnicode_Check(o) && !PyBytes_Check(o) && PySequence_Check(o)) {
    PyObject *f = PySequence_Fast(o, what);
    if (f) return f;
    PyErr_Clear();
  }
  PyErr_Format(PyExc_TypeError, "%s: expected a list, got %s", what, o ? Py_TYPE(o)->tp_name : "nothing");
  return NULL;
}

int mcpy_strs(PyObject *o, struct mcpy_strs *out, const char *what) {
  memset(out, 0, sizeof(*out));
  PyObject *f = seq(o, what);
  if (!f) return -1;
  size_t n = (size_t)PySequence_Fast_GET_SIZE(f);
  out->refs = PyMem_Calloc(n ? n : 1, sizeof(PyObject *));
  out->v = PyMem_Calloc(n ? n : 1, sizeof(char *));
  for (size_t i = 0; i < n; i++) {
    PyObject *it = PySequence_Fast_GET_ITEM(f, (Py_ssize_t)i);
    Py_INCREF(it);
    out->refs[out->n++] = it;
    if (mcpy_str(it, &out->v[i], what)) {
      Py_DECREF(f);
      mcpy_strs_free(out);
      return -1;
    }
  }
  Py_DECREF(f);
  return 0;
}

void mcpy_strs_free(struct mcpy_strs *s) {
  for (size_t i = 0; i < s->n; i++) Py_XDECREF(s->refs[i]);
  PyMem_Free(s->refs);
  PyMem_Free((void *)s->v);
  memset(s, 0, sizeof(*s));
}

int mcpy_u64s(PyObject *o, struct mcpy_u64s *out, const char *what) {
  memset(out, 0, sizeof(*out));
  PyObject *f = seq(o, what);
  if (!f) return -1;
  size_t n = (size_t)PySequence_Fast_GET_SIZE(f);
  out->v = PyMem_Calloc(n ? n : 1, sizeof(uint64_t));
  out->n = n;
  for (size_t i = 0; i < n; i++)
    if (mcpy_u64(PySequence_Fast_GET_ITEM(f, (Py_ssize_t)i), &out->v[i], what)) {
      Py_DECREF(f);
      mcpy_u64s_free(out);
      return -1;
    }
  Py_DECREF(f);
  return 0;
}

void mcpy_u64s_free(struct mcpy_u64s *s) {
  PyMem_Free(s->v);
  memset(s, 0, sizeof(*s));
}

int mcpy_u64_rows(PyObject *o, struct mcpy_u64s *flat, size_t **counts, size_t *rows, const char *what) {
  memset(flat, 0, sizeof(*flat));
  *counts = NULL;
  PyObject *f = seq(o, what);
  if (!f) return -1;
  size_t n = (size_t)PySequence_Fast_GET_SIZE(f), cap = 16;
  *rows = n;
  *counts = PyMem_Calloc(n ? n : 1, sizeof(size_t));
  flat->v = PyMem_Calloc(cap, sizeof(uint64_t));
  for (size_t i = 0; i < n; i++) {
    struct mcpy_u64s row;
    if (mcpy_u64s(PySequence_Fast_GET_ITEM(f, (Py_ssize_t)i), &row, what)) {
      Py_DECREF(f);
      mcpy_u64s_free(flat);
      PyMem_Free(*counts);
      *counts = NULL;
      return -1;
    }
    if (flat->n + row.n > cap) {
      while (flat->n + row.n > cap) cap *= 2;
      flat->v = PyMem_Realloc(flat->v, cap * sizeof(uint64_t));
    }
    memcpy(flat->v + flat->n, row.v, row.n * sizeof(uint64_t));
    flat->n += row.n;
    (*counts)[i] = row.n;
    mcpy_u64s_free(&row);
  }
  Py_DECREF(f);
  return 0;
}

PyObject *mcpy_int_list(const int *v, size_t n) {
  PyObject *l = PyList_New((Py_ssize_t)n);
  for (size_t i = 0; l && i < n; i++) PyList_SET_ITEM(l, (Py_ssize_t)i, PyLong_FromLong(v[i]));
  return l;
}

PyObject *mcpy_i64_list(const int64_t *v, size_t n) {
  PyObject *l = PyList_New((Py_ssize_t)n);
  for (size_t i = 0; l && i < n; i++) PyList_SET_ITEM(l, (Py_ssize_t)i, PyLong_FromLongLong(v[i]));
  return l;
}

PyObject *mcpy_const_list(long v, size_t n) {
  PyObject *l = PyList_New((Py_ssize_t)n);
  for (size_t i = 0; l && i < n; i++) PyList_SET_ITEM(l, (Py_ssize_t)i, PyLong_FromLong(v));
  return l;
}

/* ------------------------------------------------------------------ ReplicateConfig */

/* Attribute `name` of o as u64 (missing = def). */
static int attr_u64(PyObject *o, const char *name, uint64_t def, uint64_t *out) {
  PyObject *a = PyObject_GetAttrString(o, name);
  if (!a) {
    PyErr_Clear();
    *out = def;
    return 0;
  }
  int rc = a == Py_None ? (*out = def, 0) : mcpy_u64(a, out, name);
  Py_DECREF(a);
  return rc;
}

static int attr_bool(PyObject *o, const char *name) {
  PyObject *a = PyObject_GetAttrString(o, name);
  if (!a) {
    PyErr_Clear();
    return 0;
  }
  int t = PyObject_IsTrue(a);
  Py_DECREF(a);
  if (t < 0) PyErr_Clear();
  return t > 0;
}

int mcpy_config(PyObject *o, size_t nkeys, struct mcpy_config *out) {
  memset(out, 0, sizeof(*out));
  out->c.replica_num = 1;
  out->c.soft_pin_ttl_ms = -1;
  if (!o || o == Py_None) return 0;
  uint64_t rn, nof, dfs, act, ttl;
  if (attr_u64(o, "replica_num", 1, &rn) || attr_u64(o, "nof_replica_num", 0, &nof) ||
      attr_u64(o, "dfs_replica_num", 0, &dfs) || attr_u64(o, "soft_pin_action", 0, &act) ||
      attr_u64(o, "soft_pin_ttl_ms", UINT64_MAX, &ttl))
    return -1;
  out->c.replica_num = (size_t)rn;
  out->c.soft_pin_action = act > 2 ? -1 : (int)act;
  out->c.soft_pin_ttl_ms = ttl > INT64_MAX ? -1 : (int64_t)ttl;
  out->c.with_hard_pin = attr_bool(o, "with_hard_pin");
  if (!rn && !nof && !dfs) out->bad = MC_INVALID_PARAMS;
  else if (dfs > 1) out->bad = MC_INVALID_PARAMS;
  else if (!rn) out->bad = MC_NOT_SUPPORTED; /* NoF / DFS replicas only: no such tier here */
  if (attr_bool(o, "prefer_alloc_in_same_node")) out->bad = MC_INVALID_PARAMS;
  PyObject *g = PyObject_GetAttrString(o, "group_ids");
  if (!g) PyErr_Clear();
  else if (g != Py_None && nkeys && PyObject_Length(g) != (Py_ssize_t)nkeys) out->bad = MC_INVALID_PARAMS;
  else if (g != Py_None && nkeys && mcpy_strs(g, &out->groups, "group_ids")) {
    Py_DECREF(g);
    return -1;
  }
  if (PyErr_Occurred()) PyErr_Clear();
  Py_XDECREF(g);
  PyObject *one = PyObject_GetAttrString(o, "preferred_segment");
  if (!one) PyErr_Clear();
  if (one && PyUnicode_Check(one) && PyUnicode_GetLength(one) > 0) {
    out->pref1 = PyUnicode_AsUTF8(one);
    out->prefs.refs = PyMem_Calloc(1, sizeof(PyObject *));
    out->prefs.v = PyMem_Calloc(1, sizeof(char *));
    out->prefs.refs[0] = one, out->prefs.v[0] = out->pref1, out->prefs.n = 1;
    one = NULL;
  } else {
    PyObject *l = PyObject_GetAttrString(o, "preferred_segments");
    if (!l) PyErr_Clear();
    int rc = (l && l != Py_None) ? mcpy_strs(l, &out->prefs, "preferred_segments") : 0;
    Py_XDECREF(l);
    if (rc) {
      Py_XDECREF(one);
      return -1;
    }
  }
  Py_XDECREF(one);
  out->c.preferred_segments = out->prefs.v;
  out->c.preferred_segments_count = out->prefs.n;
  return 0;
}

void mcpy_config_free(struct mcpy_config *c) {
  mcpy_strs_free(&c->prefs);
  mcpy_strs_free(&c->groups);
}
