/* Encoders/decoders of the shared master protocol records (see proto.h). */
#include "master/proto.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

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

void mc_put_segment(struct mc_wbuf *w, const struct mc_segment_rec *s) {
  mc_put_uuid(w, s->id);
  mc_w_str(w, s->name);
  mc_w_u64(w, s->base);
  mc_w_u64(w, s->size);
  mc_w_str(w, s->te_endpoint);
  mc_w_str(w, s->protocol);
  mc_w_str(w, s->zone);
  mc_w_str(w, s->host_id);
  mc_w_str(w, s->probe_addr);
}

void mc_get_segment(struct mc_rbuf_rd *r, struct mc_segment_rec *s) {
  s->id = mc_get_uuid(r);
  s->name = mc_r_str(r);
  s->base = mc_r_u64(r);
  s->size = mc_r_u64(r);
  s->te_endpoint = mc_r_str(r);
  s->protocol = mc_r_str(r);
  s->zone = mc_r_str(r);
  s->host_id = mc_r_str(r);
  s->probe_addr = mc_r_str(r);
}

void mc_segment_rec_free(struct mc_segment_rec *s) {
  mc_free(s->name);
  mc_free(s->te_endpoint);
  mc_free(s->protocol);
  mc_free(s->zone);
  mc_free(s->host_id);
  mc_free(s->probe_addr);
}

void mc_put_config(struct mc_wbuf *w, const struct mc_put_config *c) {
  mc_w_u32(w, c->replica_num);
  mc_w_u8(w, c->soft_pin_action);
  mc_w_i64(w, c->soft_pin_ttl_ms);
  mc_w_u8(w, c->with_hard_pin);
  mc_w_u32(w, c->n_preferred);
  for (uint32_t i = 0; i < c->n_preferred; i++) mc_w_str(w, c->preferred[i]);
  mc_w_str(w, c->writer_host_id);
  mc_w_str(w, c->writer_zone);
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
}

void mc_put_config_free(struct mc_put_config *c) {
  for (uint32_t i = 0; i < c->n_preferred; i++) mc_free(c->preferred[i]);
  c->n_preferred = 0;
  mc_free(c->writer_host_id);
  mc_free(c->writer_zone);
  c->writer_host_id = c->writer_zone = NULL;
}

void mc_put_replica(struct mc_wbuf *w, const struct mc_replica_rec *rep) {
  mc_w_u8(w, rep->status);
  mc_w_u64(w, rep->size);
  mc_w_u64(w, rep->address);
  mc_w_str(w, rep->te_endpoint);
  mc_w_str(w, rep->segment_name);
  mc_w_str(w, rep->protocol);
  mc_w_str(w, rep->zone);
  mc_w_str(w, rep->host_id);
}

void mc_get_replica(struct mc_rbuf_rd *r, struct mc_replica_rec *rep) {
  rep->status = mc_r_u8(r);
  rep->size = mc_r_u64(r);
  rep->address = mc_r_u64(r);
  rep->te_endpoint = mc_r_str(r);
  rep->segment_name = mc_r_str(r);
  rep->protocol = mc_r_str(r);
  rep->zone = mc_r_str(r);
  rep->host_id = mc_r_str(r);
}

void mc_replica_rec_free(struct mc_replica_rec *rep) {
  mc_free(rep->te_endpoint);
  mc_free(rep->segment_name);
  mc_free(rep->protocol);
  mc_free(rep->zone);
  mc_free(rep->host_id);
}

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

struct mc_uuid mc_uuid_random(void) {
  struct mc_uuid u = {0, 0};
  int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
  if (fd < 0 || read(fd, &u, sizeof(u)) != (ssize_t)sizeof(u)) {
    u.hi = mc_now_ns() ^ ((uint64_t)getpid() << 32);
    u.lo = (uint64_t)rand() << 32 | (uint64_t)rand();
  }
  if (fd >= 0) close(fd);
  u.hi = (u.hi & ~0xF000ull) | 0x4000ull;
  return u;
}

void mc_uuid_str(struct mc_uuid u, char *buf) {
  snprintf(buf, 37, "%08llx-%04llx-%04llx-%04llx-%012llx", (unsigned long long)(u.hi >> 32),
           (unsigned long long)((u.hi >> 16) & 0xffff), (unsigned long long)(u.hi & 0xffff),
           (unsigned long long)(u.lo >> 48), (unsigned long long)(u.lo & 0xffffffffffffull));
}
