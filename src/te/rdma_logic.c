/* The RDMA transport's pure logic (rdma_logic.h; docs/rdma.md). */
#include "te/rdma_logic.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/alloc.h"

static int fail(char *err, size_t errlen, const char *fmt, ...) {
  if (err && errlen) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
  }
  return -1;
}

/* ---- GIDs ---- */

static int hexval(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

int mc_rdma_gid_parse(const char *s, uint8_t gid[16]) {
  if (!s || strlen(s) != 47) return -1;
  for (int i = 0; i < 16; i++) {
    const char *p = s + 3 * i;
    int hi = hexval(p[0]), lo = hexval(p[1]);
    if (hi < 0 || lo < 0 || (i < 15 && p[2] != ':')) return -1;
    gid[i] = (uint8_t)(hi << 4 | lo);
  }
  return 0;
}

void mc_rdma_gid_format(const uint8_t gid[16], char out[48]) {
  for (int i = 0; i < 16; i++) snprintf(out + 3 * i, 4, i < 15 ? "%02x:" : "%02x", gid[i]);
}

/* ---- names ---- */

/* 1 when s is 1..max bytes without a control character. */
static int text_ok(const char *s, size_t max) {
  size_t n = s ? strlen(s) : 0;
  if (!n || n > max) return 0;
  for (size_t i = 0; i < n; i++)
    if ((unsigned char)s[i] < 0x20 || s[i] == 0x7f) return 0;
  return 1;
}

static int location_ok(const char *s) { return text_ok(s, MC_RDMA_LOCATION_MAX); }

int mc_rdma_dev_name_ok(const char *name) {
  size_t n = name ? strlen(name) : 0;
  if (!n || n > MC_RDMA_DEV_NAME_MAX) return 0;
  for (size_t i = 0; i < n; i++) {
    char c = name[i];
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '.' ||
          c == '-'))
      return 0;
  }
  return 1;
}

int mc_rdma_name_listed(const char *list, const char *name) {
  if (!list) return 1;
  const char *p = list;
  while (*p == ' ' || *p == ',') p++;
  if (!*p) return 1;
  size_t n = strlen(name);
  while (*p) {
    while (*p == ' ' || *p == ',') p++;
    const char *e = p;
    while (*e && *e != ',') e++;
    const char *t = e;
    while (t > p && t[-1] == ' ') t--;
    if ((size_t)(t - p) == n && !memcmp(p, name, n)) return 1;
    p = e;
  }
  return 0;
}

int mc_rdma_nic_path_split(const char *path, size_t *dev_off) {
  if (!text_ok(path, MC_RDMA_NIC_PATH_MAX)) return -1;
  const char *at = strrchr(path, '@');
  if (!at || at == path || !mc_rdma_dev_name_ok(at + 1)) return -1;
  *dev_off = (size_t)(at + 1 - path);
  return 0;
}

/* ---- the NIC priority matrix ---- */

static void row_free(struct mc_rdma_row *r) {
  for (size_t i = 0; i < r->npref; i++) mc_free(r->pref[i]);
  for (size_t i = 0; i < r->nother; i++) mc_free(r->other[i]);
  mc_free(r->pref);
  mc_free(r->other);
  mc_free(r->location);
  memset(r, 0, sizeof(*r));
}

void mc_rdma_matrix_free(struct mc_rdma_matrix *m) {
  if (!m) return;
  for (size_t i = 0; i < m->n; i++) row_free(&m->rows[i]);
  mc_free(m->rows);
  m->rows = NULL;
  m->n = 0;
}

static int in_row(const struct mc_rdma_row *r, const char *name) {
  for (size_t i = 0; i < r->npref; i++)
    if (!strcmp(r->pref[i], name)) return 1;
  for (size_t i = 0; i < r->nother; i++)
    if (!strcmp(r->other[i], name)) return 1;
  return 0;
}

/* One list of a row; names must be new to the row. */
static int parse_list(json_t *a, struct mc_rdma_row *r, int pref, char *err, size_t errlen) {
  if (!json_is_array(a)) return fail(err, errlen, "matrix row \"%s\": a device list is not an array", r->location);
  size_t n = json_array_size(a);
  if (n > MC_RDMA_MAX_DEVICES)
    return fail(err, errlen, "matrix row \"%s\": %zu devices (at most %d)", r->location, n, MC_RDMA_MAX_DEVICES);
  char **v = n ? mc_calloc(n, sizeof(*v)) : NULL;
  if (pref) r->pref = v;
  else r->other = v;
  for (size_t i = 0; i < n; i++) {
    json_t *s = json_array_get(a, i);
    const char *name = json_is_string(s) ? json_string_value(s) : NULL;
    if (!name || !mc_rdma_dev_name_ok(name))
      return fail(err, errlen, "matrix row \"%s\": a device name is not a name", r->location);
    if (in_row(r, name)) return fail(err, errlen, "matrix row \"%s\": device %s listed twice", r->location, name);
    v[i] = mc_strdup(name);
    if (pref) r->npref++;
    else r->nother++;
  }
  return 0;
}

int mc_rdma_matrix_from_json(json_t *o, struct mc_rdma_matrix *m, char *err, size_t errlen) {
  memset(m, 0, sizeof(*m));
  if (!json_is_object(o)) return fail(err, errlen, "the NIC priority matrix is not a JSON object");
  size_t n = json_object_size(o);
  if (n > MC_RDMA_MAX_LOCATIONS)
    return fail(err, errlen, "the NIC priority matrix has %zu locations (at most %d)", n, MC_RDMA_MAX_LOCATIONS);
  m->rows = n ? mc_calloc(n, sizeof(*m->rows)) : NULL;
  const char *loc;
  json_t *v;
  json_object_foreach(o, loc, v) {
    struct mc_rdma_row *r = &m->rows[m->n];
    if (!location_ok(loc)) {
      mc_rdma_matrix_free(m);
      return fail(err, errlen, "the NIC priority matrix has a location that is empty, too long or not text");
    }
    r->location = mc_strdup(loc);
    m->n++;
    size_t k = json_is_array(v) ? json_array_size(v) : 0;
    int rc = !json_is_array(v) || k < 1 || k > 2
                 ? fail(err, errlen, "matrix row \"%s\" is not [[preferred...], [other...]]", loc)
                 : parse_list(json_array_get(v, 0), r, 1, err, errlen);
    if (!rc && k == 2) rc = parse_list(json_array_get(v, 1), r, 0, err, errlen);
    if (rc) {
      mc_rdma_matrix_free(m);
      return -1;
    }
  }
  return 0;
}

int mc_rdma_matrix_parse(const char *json, struct mc_rdma_matrix *m, char *err, size_t errlen) {
  json_error_t je;
  memset(m, 0, sizeof(*m));
  json_t *o = json ? json_loads(json, JSON_REJECT_DUPLICATES, &je) : NULL;
  if (!o) return fail(err, errlen, "the NIC priority matrix is not JSON%s%s", json ? ": " : "", json ? je.text : "");
  int rc = mc_rdma_matrix_from_json(o, m, err, errlen);
  json_decref(o);
  return rc;
}

static json_t *names_json(char *const *v, size_t n) {
  json_t *a = json_array();
  for (size_t i = 0; i < n; i++) json_array_append_new(a, json_string(v[i]));
  return a;
}

json_t *mc_rdma_matrix_to_json(const struct mc_rdma_matrix *m) {
  json_t *o = json_object();
  for (size_t i = 0; i < m->n; i++) {
    const struct mc_rdma_row *r = &m->rows[i];
    json_t *row = json_array();
    json_array_append_new(row, names_json(r->pref, r->npref));
    json_array_append_new(row, names_json(r->other, r->nother));
    json_object_set_new(o, r->location, row);
  }
  return o;
}

const struct mc_rdma_row *mc_rdma_matrix_row(const struct mc_rdma_matrix *m, const char *location) {
  const struct mc_rdma_row *star = NULL;
  for (size_t i = 0; i < m->n; i++) {
    if (location && !strcmp(m->rows[i].location, location)) return &m->rows[i];
    if (!strcmp(m->rows[i].location, "*")) star = &m->rows[i];
  }
  return star;
}

static void row_push(struct mc_rdma_row *r, int pref, const char *name) {
  char ***v = pref ? &r->pref : &r->other;
  size_t *n = pref ? &r->npref : &r->nother;
  *v = mc_realloc(*v, (*n + 1) * sizeof(**v));
  (*v)[(*n)++] = mc_strdup(name);
}

int mc_rdma_matrix_build(const struct mc_rdma_dev_info *devs, size_t ndev, const int *numa_nodes, size_t nnuma,
                         const char *filter, struct mc_rdma_matrix *m) {
  memset(m, 0, sizeof(*m));
  size_t kept = 0;
  for (size_t i = 0; i < ndev && i < MC_RDMA_MAX_DEVICES; i++)
    kept += mc_rdma_dev_name_ok(devs[i].name) && mc_rdma_name_listed(filter, devs[i].name);
  if (!kept) return -1;
  nnuma = nnuma > MC_RDMA_MAX_LOCATIONS - 1 ? MC_RDMA_MAX_LOCATIONS - 1 : nnuma;
  m->rows = mc_calloc(nnuma + 1, sizeof(*m->rows));
  for (size_t k = 0; k <= nnuma; k++) {
    struct mc_rdma_row *r = &m->rows[m->n++];
    char loc[32];
    if (k < nnuma) snprintf(loc, sizeof(loc), "cpu:%d", numa_nodes[k]);
    else snprintf(loc, sizeof(loc), "*");
    r->location = mc_strdup(loc);
    for (size_t i = 0; i < ndev && i < MC_RDMA_MAX_DEVICES; i++) {
      if (!mc_rdma_dev_name_ok(devs[i].name) || !mc_rdma_name_listed(filter, devs[i].name)) continue;
      row_push(r, k == nnuma || devs[i].numa_node == numa_nodes[k], devs[i].name);
    }
  }
  return 0;
}

const char *mc_rdma_select(const struct mc_rdma_row *r, int retry, uint32_t rnd,
                           int (*usable)(void *arg, const char *name), void *arg) {
  if (!r) return NULL;
  size_t total = r->npref + r->nother;
  if (!total) return NULL;
  size_t start;
  if (retry <= 0) start = r->npref ? rnd % r->npref : r->npref + rnd % r->nother;
  else start = (size_t)(retry - 1) % total;
  for (size_t k = 0; k < total; k++) {
    size_t i = (start + k) % total;
    const char *name = i < r->npref ? r->pref[i] : r->other[i - r->npref];
    if (!usable || usable(arg, name)) return name;
  }
  return NULL;
}

/* ---- slicing ---- */

uint64_t mc_rdma_next_slice(uint64_t left, uint64_t slice, unsigned ratio) {
  if (!slice || left <= slice) return left;
  uint64_t tail = ratio ? slice / ratio : 0;
  return left <= slice + tail ? left : slice;
}

uint64_t mc_rdma_slice_count(uint64_t len, uint64_t slice, unsigned ratio) {
  if (!len) return 0;
  uint64_t tail = ratio ? slice / ratio : 0;
  if (!slice || len <= slice + tail) return 1;
  /* k full slices go out while more than slice + tail is left: the least k with len - k * slice <= slice +
   * tail, then the final one */
  return (len - slice - tail + slice - 1) / slice + 1;
}

/* ---- rails ---- */

int mc_rdma_rail_error(struct mc_rdma_rail *r, uint64_t now, int has_alternative, uint64_t pause_ns) {
  if (r->paused_until_ns && now < r->paused_until_ns) return 0;
  if (!r->errors || now - r->window_start_ns > MC_RDMA_RAIL_WINDOW_NS) {
    r->errors = 0;
    r->window_start_ns = now;
  }
  r->errors++;
  if (!has_alternative && r->errors < MC_RDMA_RAIL_ERRORS) return 0;
  r->paused_until_ns = now + (pause_ns ? pause_ns : 1);
  r->errors = 0;
  return 1;
}

int mc_rdma_rail_usable(struct mc_rdma_rail *r, uint64_t now) {
  if (!r->paused_until_ns) return 1;
  if (now < r->paused_until_ns) return 0;
  r->paused_until_ns = 0;
  r->errors = 0;
  return 1;
}

/* ---- the Connection handshake ---- */

char *mc_rdma_hs_encode(const struct mc_rdma_hs *h) {
  char gid[48];
  mc_rdma_gid_format(h->gid, gid);
  json_t *o = json_object(), *q = json_array();
  for (uint32_t i = 0; i < h->nqp && i < MC_RDMA_MAX_QP_PER_EP; i++) json_array_append_new(q, json_integer(h->qpn[i]));
  json_object_set_new(o, "local_nic_path", json_string(h->local_nic_path));
  json_object_set_new(o, "local_lid", json_integer(h->lid));
  json_object_set_new(o, "local_gid", json_string(gid));
  json_object_set_new(o, "peer_nic_path", json_string(h->peer_nic_path));
  json_object_set_new(o, "qp_num", q);
  if (h->mtu) json_object_set_new(o, "mtu", json_integer(h->mtu));
  if (h->ready_ack >= 0) json_object_set_new(o, "ready_ack", json_boolean(h->ready_ack));
  json_object_set_new(o, "reply_msg", json_string(h->reply_msg));
  char *s = json_dumps(o, JSON_COMPACT);
  json_decref(o);
  return s;
}

/* A string field into out (at most max bytes); absent is "" when optional. */
static int get_str(json_t *o, const char *k, char *out, size_t max, int optional, char *err, size_t errlen) {
  json_t *v = json_object_get(o, k);
  if (!v && optional) {
    out[0] = 0;
    return 0;
  }
  if (!json_is_string(v)) return fail(err, errlen, "handshake: \"%s\" is missing or not a string", k);
  size_t n = json_string_length(v);
  if (n > max || strlen(json_string_value(v)) != n) return fail(err, errlen, "handshake: \"%s\" is too long or holds NUL", k);
  memcpy(out, json_string_value(v), n + 1);
  return 0;
}

static int mtu_ok(json_int_t v) { return v >= 256 && v <= 4096 && !(v & (v - 1)); }

int mc_rdma_hs_decode(const char *json, size_t len, struct mc_rdma_hs *h, char *err, size_t errlen) {
  memset(h, 0, sizeof(*h));
  h->ready_ack = -1;
  json_error_t je;
  json_t *o = json ? json_loadb(json, len, JSON_REJECT_DUPLICATES, &je) : NULL;
  if (!json_is_object(o)) {
    json_decref(o);
    return fail(err, errlen, "handshake: not a JSON object");
  }
  int rc = get_str(o, "reply_msg", h->reply_msg, MC_RDMA_REPLY_MSG_MAX, 1, err, errlen);
  if (rc || h->reply_msg[0]) goto out; /* a rejection carries nothing else we use */
  size_t off;
  json_t *lid = json_object_get(o, "local_lid"), *gid = json_object_get(o, "local_gid");
  json_t *q = json_object_get(o, "qp_num"), *mtu = json_object_get(o, "mtu"), *ack = json_object_get(o, "ready_ack");
  if ((rc = get_str(o, "local_nic_path", h->local_nic_path, MC_RDMA_NIC_PATH_MAX, 0, err, errlen)) ||
      (rc = get_str(o, "peer_nic_path", h->peer_nic_path, MC_RDMA_NIC_PATH_MAX, 0, err, errlen)))
    goto out;
  if (mc_rdma_nic_path_split(h->local_nic_path, &off) || mc_rdma_nic_path_split(h->peer_nic_path, &off)) {
    rc = fail(err, errlen, "handshake: a NIC path is not \"<server>@<device>\"");
  } else if (!json_is_integer(lid) || json_integer_value(lid) < 0 || json_integer_value(lid) > 0xffff) {
    rc = fail(err, errlen, "handshake: local_lid is not a 16-bit number");
  } else if (!json_is_string(gid) || mc_rdma_gid_parse(json_string_value(gid), h->gid)) {
    rc = fail(err, errlen, "handshake: local_gid is not 16 hex bytes");
  } else if (!json_is_array(q) || !json_array_size(q) || json_array_size(q) > MC_RDMA_MAX_QP_PER_EP) {
    rc = fail(err, errlen, "handshake: qp_num is not a list of 1 to %d QP numbers", MC_RDMA_MAX_QP_PER_EP);
  } else if (mtu && (!json_is_integer(mtu) || !mtu_ok(json_integer_value(mtu)))) {
    rc = fail(err, errlen, "handshake: mtu is not 256, 512, 1024, 2048 or 4096");
  } else if (ack && !json_is_boolean(ack)) {
    rc = fail(err, errlen, "handshake: ready_ack is not a boolean");
  }
  if (rc) goto out;
  h->lid = (uint16_t)json_integer_value(lid);
  h->nqp = (uint32_t)json_array_size(q);
  for (uint32_t i = 0; i < h->nqp; i++) {
    json_t *v = json_array_get(q, i);
    if (!json_is_integer(v) || json_integer_value(v) <= 0 || json_integer_value(v) >= (1 << 24)) {
      rc = fail(err, errlen, "handshake: qp_num[%u] is not a 24-bit QP number", i);
      goto out;
    }
    h->qpn[i] = (uint32_t)json_integer_value(v);
  }
  h->mtu = mtu ? (uint32_t)json_integer_value(mtu) : 0;
  h->ready_ack = ack ? json_is_true(ack) : -1;
out:
  json_decref(o);
  if (rc) {
    memset(h, 0, sizeof(*h));
    h->ready_ack = -1;
  }
  return rc;
}

/* ---- the rdma fields of a segment descriptor ---- */

void mc_rdma_desc_free(struct mc_rdma_desc *d) {
  if (!d) return;
  for (size_t i = 0; i < d->nbuf; i++) {
    mc_free(d->bufs[i].rkey);
    mc_free(d->bufs[i].lkey);
  }
  mc_free(d->bufs);
  mc_free(d->devs);
  mc_rdma_matrix_free(&d->matrix);
  memset(d, 0, sizeof(*d));
}

int mc_rdma_desc_dev_index(const struct mc_rdma_desc *d, const char *name) {
  for (size_t i = 0; i < d->ndev; i++)
    if (!strcmp(d->devs[i].name, name)) return (int)i;
  return -1;
}

static int get_keys(json_t *b, const char *k, size_t ndev, uint32_t **out) {
  json_t *a = json_object_get(b, k);
  if (!json_is_array(a) || json_array_size(a) != ndev) return -1;
  *out = mc_calloc(ndev ? ndev : 1, sizeof(**out));
  for (size_t i = 0; i < ndev; i++) {
    json_t *v = json_array_get(a, i);
    if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > 0xffffffffll) return -1;
    (*out)[i] = (uint32_t)json_integer_value(v);
  }
  return 0;
}

static int cmp_buf(const void *a, const void *b) {
  const struct mc_rdma_desc_buf *x = a, *y = b;
  return x->addr < y->addr ? -1 : x->addr > y->addr;
}

static int decode_devs(json_t *a, struct mc_rdma_desc *d, char *err, size_t errlen) {
  if (!json_is_array(a) || !json_array_size(a) || json_array_size(a) > MC_RDMA_MAX_DEVICES)
    return fail(err, errlen, "rdma descriptor: devices is not a list of 1 to %d devices", MC_RDMA_MAX_DEVICES);
  d->devs = mc_calloc(json_array_size(a), sizeof(*d->devs));
  for (size_t i = 0; i < json_array_size(a); i++) {
    json_t *o = json_array_get(a, i), *n = json_object_get(o, "name"), *lid = json_object_get(o, "lid");
    json_t *gid = json_object_get(o, "gid");
    struct mc_rdma_desc_dev *v = &d->devs[d->ndev];
    if (!json_is_string(n) || !mc_rdma_dev_name_ok(json_string_value(n)))
      return fail(err, errlen, "rdma descriptor: device %zu has no usable name", i);
    if (mc_rdma_desc_dev_index(d, json_string_value(n)) >= 0)
      return fail(err, errlen, "rdma descriptor: device %s listed twice", json_string_value(n));
    if (!json_is_integer(lid) || json_integer_value(lid) < 0 || json_integer_value(lid) > 0xffff)
      return fail(err, errlen, "rdma descriptor: device %s: lid is not a 16-bit number", json_string_value(n));
    if (!json_is_string(gid) || mc_rdma_gid_parse(json_string_value(gid), v->gid))
      return fail(err, errlen, "rdma descriptor: device %s: gid is not 16 hex bytes", json_string_value(n));
    snprintf(v->name, sizeof(v->name), "%s", json_string_value(n));
    v->lid = (uint16_t)json_integer_value(lid);
    d->ndev++;
  }
  return 0;
}

static int decode_bufs(json_t *a, struct mc_rdma_desc *d, char *err, size_t errlen) {
  if (!a) return 0;
  if (!json_is_array(a) || json_array_size(a) > MC_RDMA_MAX_BUFFERS)
    return fail(err, errlen, "rdma descriptor: buffers is not a list of at most %d buffers", MC_RDMA_MAX_BUFFERS);
  size_t n = json_array_size(a);
  d->bufs = n ? mc_calloc(n, sizeof(*d->bufs)) : NULL;
  for (size_t i = 0; i < n; i++) {
    json_t *b = json_array_get(a, i), *ad = json_object_get(b, "addr"), *ln = json_object_get(b, "length");
    json_t *nm = json_object_get(b, "name");
    struct mc_rdma_desc_buf *v = &d->bufs[d->nbuf++];
    if (!json_is_integer(ad) || !json_is_integer(ln) || json_integer_value(ad) <= 0 || json_integer_value(ln) <= 0)
      return fail(err, errlen, "rdma descriptor: buffer %zu has no positive addr and length", i);
    v->addr = (uint64_t)json_integer_value(ad);
    v->len = (uint64_t)json_integer_value(ln);
    if (v->addr + v->len < v->addr) return fail(err, errlen, "rdma descriptor: buffer %zu wraps around", i);
    if (!json_is_string(nm) || !location_ok(json_string_value(nm)))
      return fail(err, errlen, "rdma descriptor: buffer %zu has no usable location name", i);
    snprintf(v->location, sizeof(v->location), "%s", json_string_value(nm));
    if (get_keys(b, "rkey", d->ndev, &v->rkey) || get_keys(b, "lkey", d->ndev, &v->lkey))
      return fail(err, errlen, "rdma descriptor: buffer %zu does not have one rkey and one lkey per device (%zu)", i,
                  d->ndev);
  }
  if (n > 1) qsort(d->bufs, n, sizeof(*d->bufs), cmp_buf);
  for (size_t i = 1; i < n; i++)
    if (d->bufs[i - 1].addr + d->bufs[i - 1].len > d->bufs[i].addr)
      return fail(err, errlen, "rdma descriptor: buffers overlap");
  return 0;
}

int mc_rdma_desc_decode(json_t *root, struct mc_rdma_desc *out, char *err, size_t errlen) {
  memset(out, 0, sizeof(*out));
  if (!json_is_object(root)) return fail(err, errlen, "rdma descriptor: not a JSON object");
  json_t *pm = json_object_get(root, "priority_matrix");
  int rc = decode_devs(json_object_get(root, "devices"), out, err, errlen);
  if (!rc) rc = decode_bufs(json_object_get(root, "buffers"), out, err, errlen);
  if (!rc && pm) rc = mc_rdma_matrix_from_json(pm, &out->matrix, err, errlen);
  for (size_t i = 0; !rc && i < out->matrix.n; i++) {
    const struct mc_rdma_row *r = &out->matrix.rows[i];
    for (size_t k = 0; k < r->npref + r->nother && !rc; k++) {
      const char *name = k < r->npref ? r->pref[k] : r->other[k - r->npref];
      if (mc_rdma_desc_dev_index(out, name) < 0)
        rc = fail(err, errlen, "rdma descriptor: the matrix names device %s, which is not in devices", name);
    }
  }
  if (rc) mc_rdma_desc_free(out);
  return rc;
}
