/* A listening TCP socket served by one thread per accepted connection: the TCP transport's data port
 * (te/transport_tcp.c) and the control RPC server (net/ctrl_rpc.c). One slow client never stalls the
 * others. (The master RPC server is not one of these: a few workers serve all its connections through
 * one epoll set, net/mrpc_server.c.) */
#pragma once

struct mc_conn_server;

/* Serves one connection until it should close (EOF, an error, the owner's stop flag). Afterwards the
 * socket is shut down (the peer learns at once); it is closed when the thread is joined. */
typedef void (*mc_conn_serve_fn)(void *ctx, int fd);
/* Optional per-socket set-up right after accept (TCP_NODELAY is always set before it). */
typedef void (*mc_conn_accept_fn)(void *ctx, int fd);

struct mc_conn_server_opts {
  mc_conn_serve_fn serve;
  mc_conn_accept_fn on_accept; /* may be NULL */
  void *ctx;                   /* passed to both */
  const char *name;            /* for log lines */
  /* > 0: at most this many connections at once. At the cap the oldest connection still waiting for its
   * first byte (see below) is closed to make room; when there is none the new one is closed at once. */
  int max_conns;
  /* > 0: serve() runs only once the peer sent a byte; a connection that sends nothing for this long is
   * closed without it. */
  int first_byte_timeout_ms;
};

/* Takes over listen_fd and starts accepting. Finished connection threads are joined as they finish.
 * Warnings about refused or idle connections are rate-limited (common/log.h). NULL (listen_fd left open)
 * when no thread can be started. */
struct mc_conn_server *mc_conn_server_start_opts(int listen_fd, const struct mc_conn_server_opts *o);
/* mc_conn_server_start_opts without a first-byte timeout: max_conns > 0 caps the connections served at
 * once (one more is closed at once, with a warning naming `name`). */
struct mc_conn_server *mc_conn_server_start(int listen_fd, mc_conn_serve_fn serve, mc_conn_accept_fn on_accept,
                                            void *ctx, int max_conns, const char *name);
/* Stops accepting, closes the listening socket, shuts every connection down and joins every thread: when
 * it returns no serve() runs any more. serve() must return once its socket is shut down. NULL is a no-op. */
void mc_conn_server_stop(struct mc_conn_server *s);
