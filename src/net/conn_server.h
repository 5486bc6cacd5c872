/* A listening TCP socket served by one thread per accepted connection: the master RPC server
 * (net/mrpc.c), the TCP transport's data port (te/transport_tcp.c) and the control RPC server
 * (net/ctrl_rpc.c). One slow client never stalls the others. */
#pragma once

struct mc_conn_server;

/* Serves one connection until it should close (EOF, an error, the owner's stop flag). Afterwards the
 * socket is shut down (the peer learns at once); it is closed when the thread is joined. */
typedef void (*mc_conn_serve_fn)(void *ctx, int fd);
/* Optional per-socket set-up right after accept (TCP_NODELAY is always set before it). */
typedef void (*mc_conn_accept_fn)(void *ctx, int fd);

/* Takes over listen_fd and starts accepting. max_conns > 0 caps the connections served at once (one more
 * is closed at once, with a warning naming `name`). NULL (listen_fd left open) when no thread can be
 * started. */
struct mc_conn_server *mc_conn_server_start(int listen_fd, mc_conn_serve_fn serve, mc_conn_accept_fn on_accept,
                                            void *ctx, int max_conns, const char *name);
/* Stops accepting, closes the listening socket, shuts every connection down and joins every thread: when
 * it returns no serve() runs any more. serve() must return once its socket is shut down. NULL is a no-op. */
void mc_conn_server_stop(struct mc_conn_server *s);
