/* Fuzz target: what the RDMA transport decodes from peers (src/te/rdma_logic.h; docs/rdma.md). Byte 0
 * picks the decoder, the rest is its text:
 *   0: a Connection handshake (mc_rdma_hs_decode) — what decodes is encoded again and must decode to the
 *      same fields;
 *   1: the rdma fields of a segment descriptor (mc_rdma_desc_decode) — what decodes has 1..64 devices with
 *      usable names, buffers sorted without overlap or wrap, each with one rkey and one lkey per device,
 *      and a matrix naming only its devices; then every matrix row is asked for a NIC at several retry
 *      counts, and the answer must be one of the row's devices;
 *   2: a NIC priority matrix (mc_rdma_matrix_parse) — written and parsed again, with the same rows;
 *   3: a GID, a NIC path and a device-name list query. */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_common.h"
#include "te/rdma_logic.h"

static void handshake(const char *t, size_t n) {
  struct mc_rdma_hs h, again;
  char err[256];
  if (mc_rdma_hs_decode(t, n, &h, err, sizeof(err))) return;
  if (h.reply_msg[0]) return; /* a rejection: nothing else decoded */
  if (h.nqp < 1 || h.nqp > MC_RDMA_MAX_QP_PER_EP) abort();
  char *txt = mc_rdma_hs_encode(&h);
  if (!txt || mc_rdma_hs_decode(txt, strlen(txt), &again, err, sizeof(err)) || memcmp(&h, &again, sizeof(h))) abort();
  free(txt);
}

static void descriptor(const char *t, size_t n) {
  json_t *o = json_loadb(t, n, 0, NULL);
  struct mc_rdma_desc d;
  char err[256];
  if (!o) return;
  if (mc_rdma_desc_decode(o, &d, err, sizeof(err))) {
    if (d.ndev || d.nbuf || d.devs || d.bufs || d.matrix.n) abort(); /* rejected whole */
    json_decref(o);
    return;
  }
  json_decref(o);
  if (d.ndev < 1 || d.ndev > MC_RDMA_MAX_DEVICES) abort();
  for (size_t i = 0; i < d.ndev; i++) {
    if (!mc_rdma_dev_name_ok(d.devs[i].name) || mc_rdma_desc_dev_index(&d, d.devs[i].name) != (int)i) abort();
  }
  for (size_t i = 0; i < d.nbuf; i++) {
    const struct mc_rdma_desc_buf *b = &d.bufs[i];
    if (!b->addr || !b->len || b->addr + b->len < b->addr || !b->rkey || !b->lkey) abort();
    if (i && d.bufs[i - 1].addr + d.bufs[i - 1].len > b->addr) abort();
    volatile uint32_t sum = 0;
    for (size_t k = 0; k < d.ndev; k++) sum += b->rkey[k] + b->lkey[k]; /* (ASan: the arrays hold ndev keys) */
    (void)sum;
  }
  for (size_t i = 0; i < d.matrix.n; i++) {
    const struct mc_rdma_row *r = &d.matrix.rows[i];
    for (int retry = 0; retry < 5; retry++) {
      const char *name = mc_rdma_select(r, retry, (uint32_t)(retry * 2654435761u), NULL, NULL);
      if ((r->npref + r->nother) != 0 && (!name || mc_rdma_desc_dev_index(&d, name) < 0)) abort();
    }
  }
  mc_rdma_desc_free(&d);
}

static int same_rows(const struct mc_rdma_matrix *a, const struct mc_rdma_matrix *b) {
  if (a->n != b->n) return 0;
  for (size_t i = 0; i < a->n; i++) {
    const struct mc_rdma_row *x = &a->rows[i], *y = mc_rdma_matrix_row(b, a->rows[i].location);
    if (!y || strcmp(x->location, y->location) || x->npref != y->npref || x->nother != y->nother) return 0;
    for (size_t k = 0; k < x->npref; k++)
      if (strcmp(x->pref[k], y->pref[k])) return 0;
    for (size_t k = 0; k < x->nother; k++)
      if (strcmp(x->other[k], y->other[k])) return 0;
  }
  return 1;
}

static void matrix(const char *t) {
  struct mc_rdma_matrix m, again;
  char err[256];
  if (mc_rdma_matrix_parse(t, &m, err, sizeof(err))) {
    if (m.n || m.rows) abort();
    return;
  }
  json_t *j = mc_rdma_matrix_to_json(&m);
  char *txt = json_dumps(j, JSON_COMPACT);
  json_decref(j);
  if (!txt || mc_rdma_matrix_parse(txt, &again, err, sizeof(err)) || !same_rows(&m, &again)) abort();
  free(txt);
  mc_rdma_matrix_free(&again);
  mc_rdma_matrix_free(&m);
}

static void small(const char *t) {
  uint8_t gid[16];
  char out[48];
  if (!mc_rdma_gid_parse(t, gid)) {
    mc_rdma_gid_format(gid, out);
    if (strcasecmp(out, t)) abort();
  }
  size_t off;
  if (!mc_rdma_nic_path_split(t, &off) && (!off || !mc_rdma_dev_name_ok(t + off))) abort();
  const char *comma = strchr(t, ',');
  if (comma && comma[1] && mc_rdma_dev_name_ok(comma + 1) && !mc_rdma_name_listed(t, comma + 1)) abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  fz_quiet();
  if (!size) return 0;
  size_t n = size - 1;
  char *t = malloc(n + 1);
  memcpy(t, data + 1, n);
  t[n] = 0;
  switch (data[0] % 4) {
    case 0: handshake(t, n); break;
    case 1: descriptor(t, n); break;
    case 2: matrix(t); break;
    default: small(t); break;
  }
  free(t);
  return 0;
}
