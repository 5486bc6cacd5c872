/* The project's one libcurl wrapper, used by the HTTP metadata backend, the etcd client and the operator
 * tools' admin requests (tools/cli/admin.c), with libcurl's URL escaper (implemented in metadata_http.c):
 * one request bounded by the metadata timeouts (3 s total, 1.5 s connect) or by bounds of the caller's,
 * the response body captured up to a cap; and a streamed answer read line by
 * line (etcd's watch). Easy handles are pooled so connections are reused. Thread-safe. Internal header. */
#ifndef MC_TE_METADATA_CURL_H
#define MC_TE_METADATA_CURL_H
#include <stddef.h>

struct mc_curl_resp {
  long status; /* HTTP status code */
  char *body;  /* NUL-terminated (also when empty); owned, freed by mc_curl_resp_free */
  size_t len;
  size_t cap;
  size_t max; /* the cap on len this request was made with */
};

/* The bounds of one request (mc_curl_request_o). Both timeouts are required: nothing waits unbounded. */
struct mc_curl_opts {
  long timeout_ms;         /* the whole request */
  long connect_timeout_ms; /* connecting */
  size_t max_body;         /* a longer answer is a transport failure; 0 = 64 MiB */
  int no_proxy;            /* ignore the *_proxy environment (the operator tools talk to the admin port directly) */
  const char *header;      /* one more request header ("Name: value"), or NULL */
};

/* A backend holds one reference while open; the handle pool is drained when the last one goes. */
void mc_curl_ref(void);
void mc_curl_unref(void);
/* Sends method (GET/PUT/POST/DELETE) to url; body (may be NULL) goes out as application/json.
 * Returns 0 when a response arrived (any status, in resp), or -1 on a transport failure (refused,
 * timed out, response over the cap) with the reason in err. resp is always initialised. */
int mc_curl_request(const char *method, const char *url, const char *body, size_t body_len,
                    struct mc_curl_resp *resp, char *err, size_t errlen);
/* The same bounded by timeout_ms in total (the connect by half of it). */
int mc_curl_request_t(const char *method, const char *url, const char *body, size_t body_len, long timeout_ms,
                      struct mc_curl_resp *resp, char *err, size_t errlen);
/* The same with every bound given (docs/operations.md: the `mooncake` tool's requests). */
int mc_curl_request_o(const char *method, const char *url, const char *body, size_t body_len,
                      const struct mc_curl_opts *o, struct mc_curl_resp *resp, char *err, size_t errlen);
void mc_curl_resp_free(struct mc_curl_resp *r);

/* A streamed answer read line by line (newline-delimited JSON and the like). */
struct mc_curl_stream {
  /* Called from mc_curl_stream's thread with each non-empty line of a 200 answer, NUL-terminated,
   * without its "\n" (or "\r\n"). Nonzero ends the transfer. */
  int (*on_line)(void *arg, char *line, size_t len);
  /* Polled at least every 100 ms while the transfer runs; nonzero ends it. */
  int (*should_stop)(void *arg);
  void *arg;
  size_t max_line;         /* a longer line fails the transfer (the peer may send one without end) */
  long connect_timeout_ms; /* there is no total timeout: should_stop bounds the transfer */
  long status;             /* out: the HTTP status (0 before the headers) */
  int stopped;             /* out: 1 when on_line or should_stop ended the transfer */
};
/* Sends method with body (may be NULL) to url and feeds the answer to s until the peer ends it or a
 * callback stops it: 0 (s->status and s->stopped tell which; a non-200 answer's first bytes are in err),
 * or -1 on a transport failure or a line over max_line (the reason in err). */
int mc_curl_stream(const char *method, const char *url, const char *body, size_t body_len,
                   struct mc_curl_stream *s, char *err, size_t errlen);
/* Percent-encodes every byte except RFC 3986 unreserved ones. Caller frees. */
/* s percent-escaped by libcurl (curl_easy_escape: all but A-Z a-z 0-9 - . _ ~) for a URL query value or
 * path segment; mc_malloc'ed (mc_free), never NULL. */
char *mc_curl_escape(const char *s);

#endif
