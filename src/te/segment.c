/* Remote segment descriptors: decoding (total: any malformed field rejects the whole descriptor),
 * lookup of the buffer covering a range, and reference counting. */
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "common/alloc.h"
#include "common/log.h"
#include "te/engine_internal.h"
#include "te/rdma_logic.h"

static int cmp_rbuf(const void *a, const void *b) {
  const struct mc_rbuf *x = a, *y = b;
  return x->addr < y->addr ? -1 : x->addr > y->addr;
}

static char *dup_str(json_t *o, const char *k, const char *def) {
  json_t *v = json_object_get(o, k);
  return json_is_string(v) ? mc_strdup(json_string_value(v)) : (def ? mc_strdup(def) : NULL);
}

static int get_u64(json_t *o, const char *k, uint64_t *out) {
  json_t *v = json_object_get(o, k);
  if (!json_is_integer(v) || json_integer_value(v) < 0) return -1;
  *out = (uint64_t)json_integer_value(v);
  return 0;
}

static int decode_buffers(struct mc_desc *d, json_t *arr) {
  if (!arr) return 0;
  if (!json_is_array(arr)) return -1;
  d->nbuf = json_array_size(arr);
  d->bufs = mc_calloc(d->nbuf, sizeof(*d->bufs));
  for (size_t i = 0; i < d->nbuf; i++) {
    json_t *b = json_array_get(arr, i), *fd;
    struct mc_rbuf *r = &d->bufs[i];
    r->shm_fd = -1;
    if (!json_is_object(b) || get_u64(b, "addr", &r->addr) || get_u64(b, "length", &r->len)) return -1;
    r->name = dup_str(b, "name", NULL);
    if (!r->name || !*r->name || !r->addr || !r->len || r->addr + r->len < r->addr) return -1;
    if ((fd = json_object_get(b, "shm_fd")) && json_is_integer(fd)) r->shm_fd = (int)json_integer_value(fd);
  }
  qsort(d->bufs, d->nbuf, sizeof(*d->bufs), cmp_rbuf);
  for (size_t i = 1; i < d->nbuf; i++)
    if (d->bufs[i - 1].addr + d->bufs[i - 1].len > d->bufs[i].addr) return -1;
  return 0;
}

static char *canonical(json_t *root) {
  json_t *c = json_deep_copy(root);
  json_object_del(c, "timestamp");
  char *s = json_dumps(c, JSON_COMPACT | JSON_SORT_KEYS);
  json_decref(c);
  return s;
}

struct mc_desc *mc_desc_decode(const char *text) {
  json_error_t err;
  json_t *root = json_loads(text, 0, &err);
  if (!json_is_object(root)) {
    LOG_WARN("segment descriptor is not a JSON object: %s", root ? "wrong type" : err.text);
    json_decref(root);
    return NULL;
  }
  struct mc_desc *d = mc_calloc(1, sizeof(*d));
  atomic_init(&d->refs, 1);
  pthread_mutex_init(&d->shm_mu, NULL);
  uint64_t v;
  json_t *proto = json_object_get(root, "protocol");
  d->name = dup_str(root, "name", NULL);
  if (json_is_array(proto)) proto = json_array_get(proto, 0);
  d->protocol = json_is_string(proto) ? mc_strdup(json_string_value(proto)) : NULL;
  d->host_id = dup_str(root, "host_id", "");
  d->ip = dup_str(root, "ip_or_host_name", "");
  d->tcp_proto_version = get_u64(root, "tcp_proto_version", &v) ? 1 : (int)v;
  if (!get_u64(root, "tcp_data_port", &v) && v <= 65535) d->tcp_data_port = (uint16_t)v;
  if (!get_u64(root, "rpc_port", &v) && v <= 65535) d->rpc_port = (uint16_t)v;
  if (!get_u64(root, "pid", &v) && v < (1u << 31)) d->pid = (int)v;
  d->shm_registry_fd = !get_u64(root, "shm_registry_fd", &v) && v < (1u << 31) ? (int)v : -1;
  int bad = !d->name || !d->protocol || decode_buffers(d, json_object_get(root, "buffers"));
  if (!bad && json_object_get(root, "devices")) { /* an RDMA peer: every rdma field checked (docs/rdma.md) */
    char err[256];
    d->rdma = mc_calloc(1, sizeof(*d->rdma));
    if (mc_rdma_desc_decode(root, d->rdma, err, sizeof(err))) {
      LOG_WARN("segment descriptor for '%s': %s", d->name, err);
      bad = 1;
    }
  }
  if (!bad) d->canon = canonical(root);
  json_decref(root);
  if (bad) {
    LOG_WARN("rejecting malformed segment descriptor for '%s'", d->name ? d->name : "?");
    mc_desc_unref(d);
    return NULL;
  }
  d->shm_maps = mc_calloc(d->nbuf ? d->nbuf : 1, sizeof(void *));
  d->shm_warm = mc_calloc(d->nbuf ? d->nbuf : 1, sizeof(*d->shm_warm));
  return d;
}

const struct mc_rbuf *mc_desc_find(const struct mc_desc *d, uint64_t addr, uint64_t len) {
  size_t lo = 0, hi = d->nbuf;
  while (lo < hi) { /* last buffer with start <= addr */
    size_t mid = (lo + hi) / 2;
    if (d->bufs[mid].addr <= addr) lo = mid + 1;
    else hi = mid;
  }
  if (lo == 0) return NULL;
  const struct mc_rbuf *b = &d->bufs[lo - 1];
  uint64_t off = addr - b->addr;
  if (len == 0 || off >= b->len || len > b->len - off) return NULL;
  return b;
}

void mc_desc_ref(struct mc_desc *d) { atomic_fetch_add(&d->refs, 1); }

void mc_desc_unref(struct mc_desc *d) {
  if (!d || atomic_fetch_sub(&d->refs, 1) != 1) return;
  for (size_t i = 0; i < d->nbuf; i++) {
    if (d->shm_maps && d->shm_maps[i]) munmap(d->shm_maps[i], d->bufs[i].len);
    if (d->shm_warm) mc_free(d->shm_warm[i]);
    mc_free(d->bufs[i].name);
  }
  mc_free(d->shm_maps);
  mc_free(d->shm_warm);
  if (d->rdma) mc_rdma_desc_free(d->rdma);
  mc_free(d->rdma);
  if (d->shm_registry) munmap(d->shm_registry, d->shm_registry_len);
  mc_free(d->bufs);
  mc_free(d->name);
  mc_free(d->protocol);
  mc_free(d->host_id);
  mc_free(d->ip);
  free(d->canon); /* from jansson (malloc) */
  pthread_mutex_destroy(&d->shm_mu);
  mc_free(d);
}
