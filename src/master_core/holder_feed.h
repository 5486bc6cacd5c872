/* The feed of the holder indexes (docs/ha.md, "Holder indexes"): every object the master completes or
 * drops becomes a record, numbered by one sequence, queued for the holder of each replica, and sent to that
 * holder when it polls (a long poll: the poll waits until records come or its time is up). A holder
 * acknowledges the records it has with its next poll; a record is durable once acknowledged, and
 * `durable_seq` is the highest number at or below which every record is.
 *
 * Records on the wire (what a poll's answer carries after its u64 durable_seq and u32 count):
 *   u64 seq, u8 kind (MC_HIDX_PUT | MC_HIDX_DROP, with the MC_HIDX_GROUPED bit on a PUT of a grouped
 *   object), blob key, uuid segment, u64 offset, u64 length (the allocation), u64 size (the object's),
 *   u8 hard_pin, u64 soft_pin_ttl_ms, then only with MC_HIDX_GROUPED: str group (its key group: 1 to
 *   MC_STR_MAX bytes, no NUL; docs/master.md, "Key groups")
 * (a DROP carries zeros after the segment). A record of an ungrouped object is byte for byte what it was
 * before groups travelled.
 *
 * Bounds: a holder's queue holds at most MC_HIDX_QUEUE_MAX bytes. A holder that does not poll (dead, or
 * far behind) and passes it loses its queue and is marked for a resync: its records stop holding
 * durable_seq back (logged), every answer carries the resync flag until the holder acknowledges a record
 * queued after the overflow (it clears its index on the flag), and the master re-sends a PUT record for
 * every complete replica on the holder's segments, one shard of the object table at a time
 * (mc_hidx_dump_next / mc_hidx_dump_done), paced by the holder's polls.
 *
 * Threads and locks: one feed thread answers the polls (when records come for a waiting holder, at most one
 * answer with records per MC_HIDX_BATCH_US window, or when a poll's time is up). h->mu guards a holder's queue and its
 * waiting poll; f->mu the sequence counter, the heap of holders with unacknowledged records (by their
 * oldest: durable_seq in O(1)), the heap of waiting polls (by when each is due) and the holders' lifetimes:
 * an acknowledgement or an answer costs O(log holders), not a walk over all of them. ORDER: h->mu -> f->mu; the answer callback may run with h->mu held (it
 * must not call back into the feed).
 * Appends come from the object table with a shard lock held: shard->mu -> h->mu. */
#ifndef MC_MASTER_CORE_HOLDER_FEED_H
#define MC_MASTER_CORE_HOLDER_FEED_H
#include <stddef.h>
#include <stdint.h>

#include "net/codec.h"
#include "proto/proto.h"

#define MC_HIDX_QUEUE_MAX (64u << 20)
#define MC_HIDX_BATCH_US 10000 /* a waiting poll is answered this long after its first record (docs/ha.md) */
#define MC_HIDX_POLL_MAX_MS 1000 /* the longest a poll waits */
#define MC_HIDX_ANSWER_MAX (4u << 20) /* records per answer, in bytes (at least one record) */

struct mc_hidx_feed;
struct mc_hidx; /* one holder's queue */

/* Answers a waiting poll: body is the answer (the callee takes its buffer). Called once per poll, from the
 * feed thread, or from mc_hidx_follow / mc_hidx_close directly. */
typedef void (*mc_hidx_answer_fn)(void *arg, struct mc_wbuf *body);

/* A feed whose first record gets number first_seq (> 0). NULL if its thread cannot start. */
struct mc_hidx_feed *mc_hidx_feed_start(uint64_t first_seq);
/* Answers every waiting poll (empty), stops the thread, frees the feed. Holders must be closed first. */
void mc_hidx_feed_stop(struct mc_hidx_feed *f);
uint64_t mc_hidx_durable(struct mc_hidx_feed *f);
/* durable_seq as last computed (at the latest acknowledgement): never above the truth, and lock-free —
 * what the writers' witnesses read on every put (docs/ha.md, "Witnesses"). */
uint64_t mc_hidx_durable_cached(struct mc_hidx_feed *f);
/* Appends one record in the wire layout above (also the layout of a writer's witness). */
void mc_hidx_encode(struct mc_wbuf *w, uint64_t seq, uint8_t kind, const void *key, uint32_t klen, struct mc_uuid seg,
                    uint64_t off, uint64_t len, uint64_t size, uint8_t hard_pin, uint64_t ttl, const char *group);
/* The number the next record will get. */
uint64_t mc_hidx_next_seq(struct mc_hidx_feed *f);
/* Numbers the next records from seq on if that is above the next number (a promotion, ha.c). */
void mc_hidx_feed_raise(struct mc_hidx_feed *f, uint64_t seq);

/* A holder's queue (for a client with segments). The feed holds it until mc_hidx_close. */
struct mc_hidx *mc_hidx_open(struct mc_hidx_feed *f, struct mc_uuid client);
/* The holder is gone: its waiting poll is answered empty, its records stop holding durable_seq back; the
 * queue is freed once the last reference (mc_hidx_ref) is dropped. */
void mc_hidx_close(struct mc_hidx *h);
void mc_hidx_ref(struct mc_hidx *h);
/* Every record of h at or below this number is acknowledged (or given up: queue overflow, close). */
uint64_t mc_hidx_acked(const struct mc_hidx *h);
void mc_hidx_unref(struct mc_hidx *h);

/* A slot the discard queue keeps for h (discard.c, under its mutex; -1 until it uses it). */
int *mc_hidx_discard_slot(struct mc_hidx *h);

/* Queues a record for h; returns its seq (0 when h is closed or was reset for overflow). group: the
 * object's key group (NULL or "" = none). copy: when not NULL and a seq is returned, the record's bytes
 * are appended there too (a writer's witness, docs/ha.md "Witnesses": encoded once for both). */
uint64_t mc_hidx_put(struct mc_hidx *h, const void *key, uint32_t klen, struct mc_uuid segment, uint64_t offset,
                     uint64_t length, uint64_t size, uint8_t hard_pin, uint64_t soft_pin_ttl_ms, const char *group,
                     struct mc_wbuf *copy);
uint64_t mc_hidx_drop(struct mc_hidx *h, const void *key, uint32_t klen, struct mc_uuid segment);

/* A poll: drops the records at or below `acked`, then answers at once (through answer) when records are
 * queued or max_wait_ms is 0, else keeps the poll waiting up to max_wait_ms (at most MC_HIDX_POLL_MAX_MS)
 * for records. A poll still waiting is answered empty first. The answer body: u64 durable_seq, u8 flags
 * (1 = resync: the holder's queue overflowed), u32 count, the records. */
void mc_hidx_follow(struct mc_hidx *h, uint64_t acked, uint32_t max_wait_ms, mc_hidx_answer_fn answer, void *arg);
/* The acknowledgement part of a poll alone (a poll acknowledges again: harmless). */
void mc_hidx_ack(struct mc_hidx *h, uint64_t acked);

/* A resync after an overflow: 1 with *shard when the next shard of the object table is due (a resync is under
 * way and less than one answer is queued); the caller queues that shard's records (mc_hidx_put, with the shard
 * lock held, as every append) and says so with mc_hidx_dump_done, which moves on only if no overflow started
 * the resync over meanwhile. `records` is for the log line that ends the resync. */
int mc_hidx_dump_next(struct mc_hidx *h, uint32_t *shard);
void mc_hidx_dump_done(struct mc_hidx *h, uint32_t shard, uint32_t nshards, uint64_t records);
/* 1 while a resync is flagged or being queued. */
int mc_hidx_resyncing(struct mc_hidx *h);

#endif
