/* Socket helpers shared by the control RPC and the TCP transport: bounded connects, full reads and
 * writes with a no-progress deadline, listeners on a random port of a range, local address choice.
 * Functions return 0 / an fd on success and a negative errno on failure. */
#ifndef MC_NET_SOCK_H
#define MC_NET_SOCK_H
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include "common/hostport.h" /* mc_split_host_port, for the many callers that came here for it */

/* Resolves host (every address in turn) and connects with a deadline of timeout_ms per address.
 * Returns a blocking fd with TCP_NODELAY, or -errno (-ETIMEDOUT, -ECONNREFUSED, -EHOSTUNREACH...). */
int mc_sock_connect(const char *host, uint16_t port, int timeout_ms);
/* Listens on bind_ip:port (NULL/"" = any address). port 0 = kernel-chosen. Returns fd or -errno. */
int mc_sock_listen(const char *bind_ip, uint16_t port, int backlog);
/* Listens on a random port in [min_port, max_port], up to `attempts` tries; *port_out gets the port. */
int mc_sock_listen_range(const char *bind_ip, int min_port, int max_port, int attempts, int backlog,
                         uint16_t *port_out);
uint16_t mc_sock_local_port(int fd);
/* SO_RCVTIMEO / SO_SNDTIMEO: a blocking call fails with EAGAIN after timeout_ms without progress. */
int mc_sock_set_timeouts(int fd, int rcv_ms, int snd_ms);
/* Reads exactly n bytes. Blocking fd with SO_RCVTIMEO or not. 0, -EPIPE on EOF, -errno otherwise. */
int mc_sock_read_full(int fd, void *buf, size_t n);
int mc_sock_write_full(int fd, const void *buf, size_t n);
/* Drops n sent bytes from the front of iov (moving *iov and trimming the first entry left); returns
 * the number of entries left. */
int mc_iov_advance(struct iovec **iov, int iovcnt, size_t n);
/* writev until all iov bytes are sent (iov is modified). Adds to *sent the bytes written, if non-NULL. */
int mc_sock_writev_full(int fd, struct iovec *iov, int iovcnt, uint64_t *sent);
/* Like read_full, but first polls up to timeout_ms for the first byte (-ETIMEDOUT) and uses poll
 * deadlines throughout; for sockets without SO_RCVTIMEO. */
int mc_sock_read_deadline(int fd, void *buf, size_t n, int timeout_ms);
int mc_sock_write_deadline(int fd, const void *buf, size_t n, int timeout_ms);
/* Sends all of iov (consumed) before the deadline. */
int mc_sock_writev_deadline(int fd, struct iovec *iov, int iovcnt, int timeout_ms);

/* Busy-poll window before a blocking wait for a reply or the next request (MC_SPIN_US, default 50 us,
 * 0 = off). Waking a sleeping thread costs tens of microseconds in a VM, more than a whole loopback
 * round trip; polling for a bounded time with sched_yield() in between hands the CPU to anything else
 * runnable, so a spinning waiter never keeps the peer it waits for off the CPU.
 * Polling is adaptive per waiter (`struct mc_spin`, zero-initialised): a poll that runs out without data
 * makes the next 1, 2, 4, ... 64 waits (doubling while polls keep failing) block at once; a poll that
 * gets data resets that; data already there when a wait starts changes nothing. So a connection whose
 * peer answers within the window polls every time, and one whose waits are mostly long (idle between
 * bursts, or a gap longer than the window every other request) polls rarely. */
struct mc_spin {
  _Atomic unsigned char skip, backoff;
};
uint64_t mc_spin_ns(void);
/* For waiters that poll something else (an epoll set): whether this wait may poll (0 counts a skipped
 * one), and the outcome of a poll that ran (got: it found work) so the adaptation above applies. */
int mc_spin_try(struct mc_spin *sp);
void mc_spin_done(struct mc_spin *sp, int got);
/* recv(MSG_DONTWAIT | flags), polling up to the window unless sp says not to (sp == NULL: one try, no
 * polling). Returns the bytes received (> 0), -EAGAIN when nothing came, -EPIPE on EOF, -errno. */
long mc_sock_spin_recv(int fd, void *buf, size_t n, int flags, struct mc_spin *sp);
/* Polls *pending until it is 0 or the window ends (with the same adaptation); 1 when it reached 0. */
int mc_spin_until_zero(_Atomic int *pending, struct mc_spin *sp);
/* mc_sock_read_deadline with a poll phase first (sp adapts as above). */
int mc_sock_read_deadline_spin(int fd, void *buf, size_t n, int timeout_ms, struct mc_spin *sp);
/* The same for at least min and at most max bytes (*got: how many, also on failure; got may be NULL):
 * whatever is already queued behind the first min bytes comes with the same recv. */
int mc_sock_read_atleast_spin(int fd, void *buf, size_t min, size_t max, size_t *got, int timeout_ms,
                              struct mc_spin *sp);

/* The address the transfer engine's listeners (control RPC, TCP data port) bind: MC_TCP_BIND_ADDRESS when
 * it is an IPv4 address, else NULL (every address; docs/security.md, "Exposure"). Read once. */
const char *mc_te_bind_ip(void);
/* The address this process advertises: MC_TCP_BIND_ADDRESS if set, else the first UP and RUNNING
 * non-loopback IPv4 interface, else 127.0.0.1. */
void mc_local_ip(char *buf, size_t len);
/* The RPC port range from MC_MIN_RPC_PORT / MC_MAX_RPC_PORT with the fallback rule
 * (docs/transfer-engine.md, "Design decisions"): a range below 1024, inverted, or overlapping 32768-60999
 * falls back to 15000-17000. */
void mc_rpc_port_range(int *min_port, int *max_port);

#endif
