/* Encoders/decoders of the shared master protocol records (see proto.h). */
#include "proto/proto.h"

#include <stdio.h>
#include <uuid/uuid.h>

#include "common/util.h"

void mc_put_uuid(struct mc_wbuf *w, struct mc_uuid u) {
  mc_w_u64(w, u.hi);
  mc_w_u64(w, u.lo);
}

struct mc_uuid mc_get_uuid(struct mc_rbuf_rd *r) {
  struct mc_uuid u;
  u.hi = mc_r_u64(r);
  u.lo = mc_r_u64(r);
  return u;
}

/* Per kind of field: how it is written, read and freed (the record lists of proto.h). */
static void put_u8(struct mc_wbuf *w, uint8_t v) { mc_w_u8(w, v); }
static void put_u64(struct mc_wbuf *w, uint64_t v) { mc_w_u64(w, v); }
static void put_str(struct mc_wbuf *w, const char *v) { mc_w_str(w, v); }
#define put_uuid mc_put_uuid
#define get_u8 mc_r_u8
#define get_u64 mc_r_u64
#define get_str mc_r_str
#define get_uuid mc_get_uuid
#define free_u8(v) (void)(v)
#define free_u64(v) (void)(v)
#define free_uuid(v) (void)(v)
#define free_str(v) mc_free(v)
#define PUT_(kind, field) put_##kind(w, rec->field);
#define GET_(kind, field) rec->field = get_##kind(r);
#define FREE_(kind, field) free_##kind(rec->field);

void mc_put_segment(struct mc_wbuf *w, const struct mc_segment_rec *rec) { MC_SEGMENT_FIELDS(PUT_) }
void mc_get_segment(struct mc_rbuf_rd *r, struct mc_segment_rec *rec) { MC_SEGMENT_FIELDS(GET_) }
void mc_segment_rec_free(struct mc_segment_rec *rec) { MC_SEGMENT_FIELDS(FREE_) }

void mc_put_config(struct mc_wbuf *w, const struct mc_put_config *c) {
  mc_w_u32(w, c->replica_num);
  mc_w_u8(w, c->soft_pin_action);
  mc_w_i64(w, c->soft_pin_ttl_ms);
  mc_w_u8(w, c->with_hard_pin);
  mc_w_u32(w, c->n_preferred);
  for (uint32_t i = 0; i < c->n_preferred; i++) mc_w_str(w, c->preferred[i]);
  mc_w_str(w, c->writer_host_id);
  mc_w_str(w, c->writer_zone);
  mc_w_str(w, c->group);
}

void mc_get_config(struct mc_rbuf_rd *r, struct mc_put_config *c) {
  c->replica_num = mc_r_u32(r);
  c->soft_pin_action = mc_r_u8(r);
  c->soft_pin_ttl_ms = mc_r_i64(r);
  c->with_hard_pin = mc_r_u8(r);
  c->n_preferred = mc_r_count(r, 4);
  if (c->n_preferred > MC_MAX_PREFERRED) {
    r->err = 1;
    c->n_preferred = 0;
  }
  for (uint32_t i = 0; i < c->n_preferred; i++) c->preferred[i] = mc_r_str(r);
  c->writer_host_id = mc_r_str(r);
  c->writer_zone = mc_r_str(r);
  c->group = mc_r_str(r);
}

void mc_put_config_free(struct mc_put_config *c) {
  for (uint32_t i = 0; i < c->n_preferred; i++) mc_free(c->preferred[i]);
  c->n_preferred = 0;
  mc_free(c->writer_host_id);
  mc_free(c->writer_zone);
  mc_free(c->group);
  c->writer_host_id = c->writer_zone = c->group = NULL;
}

void mc_put_replica(struct mc_wbuf *w, const struct mc_replica_rec *rec) { MC_REPLICA_FIELDS(PUT_) }
void mc_get_replica(struct mc_rbuf_rd *r, struct mc_replica_rec *rec) { MC_REPLICA_FIELDS(GET_) }
void mc_replica_rec_free(struct mc_replica_rec *rec) { MC_REPLICA_FIELDS(FREE_) }

uint32_t mc_get_replicas(struct mc_rbuf_rd *r, struct mc_replica_rec **out) {
  uint32_t n = mc_r_count(r, 21);
  *out = mc_calloc(n ? n : 1, sizeof(**out));
  for (uint32_t i = 0; i < n; i++) mc_get_replica(r, &(*out)[i]);
  return n;
}

void mc_replicas_free(struct mc_replica_rec *reps, uint32_t n) {
  for (uint32_t i = 0; reps && i < n; i++) mc_replica_rec_free(&reps[i]);
  mc_free(reps);
}

/* A function, not an exported array: the store library and a program may both carry this file. */
uint64_t mc_lat_bound_us(uint32_t i) {
  static const uint64_t bounds[MC_LAT_NBUCKETS - 1] = {
      1,     2,     5,     10,    20,     50,     100,    200,     500,     1000,    2000,
      5000,  10000, 20000, 50000, 100000, 200000, 500000, 1000000, 2000000, 5000000, 10000000};
  return bounds[i < MC_LAT_NBUCKETS - 1 ? i : MC_LAT_NBUCKETS - 2];
}

uint32_t mc_lat_bucket(uint64_t us) {
  uint32_t i = 0;
  while (i < MC_LAT_NBUCKETS - 1 && us > mc_lat_bound_us(i)) i++;
  return i;
}

double mc_lat_quantile_s(const uint64_t *lat, double q) {
  uint64_t total = 0, cum = 0;
  for (uint32_t i = 0; i < MC_LAT_NBUCKETS; i++) total += lat[i];
  if (!total) return 0;
  double rank = q * (double)total;
  for (uint32_t i = 0; i < MC_LAT_NBUCKETS - 1; i++) {
    if ((double)(cum + lat[i]) >= rank && lat[i]) {
      double lo = i ? (double)mc_lat_bound_us(i - 1) : 0, hi = (double)mc_lat_bound_us(i);
      return (lo + (hi - lo) * (rank - (double)cum) / (double)lat[i]) / 1e6;
    }
    cum += lat[i];
  }
  return (double)mc_lat_bound_us(MC_LAT_NBUCKETS - 2) / 1e6;
}

void mc_client_stats_add(struct mc_client_stats *acc, const struct mc_client_stats *d) {
  for (uint32_t i = 0; i < MC_LAT_NBUCKETS; i++) acc->lat[i] += d->lat[i];
  acc->lat_sum_us += d->lat_sum_us;
  acc->bytes_read += d->bytes_read;
  acc->bytes_written += d->bytes_written;
  acc->hits += d->hits;
  acc->misses += d->misses;
}

void mc_put_client_stats(struct mc_wbuf *w, const struct mc_client_stats *st) {
  mc_put_uuid(w, st->client);
  mc_w_u32(w, MC_LAT_NBUCKETS);
  for (uint32_t i = 0; i < MC_LAT_NBUCKETS; i++) mc_w_u64(w, st->lat[i]);
  mc_w_u64(w, st->lat_sum_us);
  mc_w_u64(w, st->bytes_read);
  mc_w_u64(w, st->bytes_written);
  mc_w_u64(w, st->hits);
  mc_w_u64(w, st->misses);
}

void mc_get_client_stats(struct mc_rbuf_rd *r, struct mc_client_stats *st) {
  st->client = mc_get_uuid(r);
  if (mc_r_u32(r) != MC_LAT_NBUCKETS) r->err = 1;
  for (uint32_t i = 0; i < MC_LAT_NBUCKETS; i++) st->lat[i] = mc_r_u64(r);
  st->lat_sum_us = mc_r_u64(r);
  st->bytes_read = mc_r_u64(r);
  st->bytes_written = mc_r_u64(r);
  st->hits = mc_r_u64(r);
  st->misses = mc_r_u64(r);
}

/* libuuid's random (version 4) UUID, its version and variant bits set as RFC 4122 says; bytes 0..7
 * big-endian are hi, 8..15 lo: the order mc_uuid_str prints. */
struct mc_uuid mc_uuid_random(void) {
  uuid_t b;
  uuid_generate_random(b);
  struct mc_uuid u = {0, 0};
  for (int i = 0; i < 8; i++) {
    u.hi = u.hi << 8 | b[i];
    u.lo = u.lo << 8 | b[8 + i];
  }
  return u;
}

void mc_uuid_str(struct mc_uuid u, char *buf) {
  snprintf(buf, 37, "%08llx-%04llx-%04llx-%04llx-%012llx", (unsigned long long)(u.hi >> 32),
           (unsigned long long)((u.hi >> 16) & 0xffff), (unsigned long long)(u.hi & 0xffff),
           (unsigned long long)(u.lo >> 48), (unsigned long long)(u.lo & 0xffffffffffffull));
}
