/* libcurl plumbing shared by the HTTP and etcd metadata backends (implemented in metadata_http.c):
 * one request bounded by the metadata timeouts (3 s total, 1.5 s connect), the response body captured
 * up to a cap. Easy handles are pooled so connections are reused. Thread-safe. Internal header. */
#ifndef MC_TE_METADATA_CURL_H
#define MC_TE_METADATA_CURL_H
#include <stddef.h>

struct mc_curl_resp {
  long status; /* HTTP status code */
  char *body;  /* NUL-terminated (also when empty); owned, freed by mc_curl_resp_free */
  size_t len;
  size_t cap;
};

/* A backend holds one reference while open; the handle pool is drained when the last one goes. */
void mc_curl_ref(void);
void mc_curl_unref(void);
/* Sends method (GET/PUT/POST/DELETE) to url; body (may be NULL) goes out as application/json.
 * Returns 0 when a response arrived (any status, in resp), or -1 on a transport failure (refused,
 * timed out, response over the cap) with the reason in err. resp is always initialised. */
int mc_curl_request(const char *method, const char *url, const char *body, size_t body_len,
                    struct mc_curl_resp *resp, char *err, size_t errlen);
void mc_curl_resp_free(struct mc_curl_resp *r);
/* Percent-encodes every byte except RFC 3986 unreserved ones. Caller frees. */
char *mc_curl_escape(const char *s);

#endif
