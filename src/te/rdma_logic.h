/* The RDMA transport's pure logic (docs/rdma.md): what it decides without touching a device, so every rule
 * is unit-tested and fuzzed on a host with no RDMA hardware.
 *  - GIDs as the descriptor and the handshake spell them (16 colon-separated hex bytes);
 *  - the NIC priority matrix: parsing and writing its JSON, building it from the discovered devices,
 *    filtering devices by name lists, choosing a NIC for a buffer location and a retry count;
 *  - slicing a request;
 *  - the rail (local NIC -> peer NIC) pause rule;
 *  - the Connection handshake (QP exchange) and the rdma fields of a segment descriptor, both decoded as
 *    hostile input: every count, length and number is bounded, and anything malformed rejects the whole
 *    message with a reason.
 * Nothing here allocates without a bound a peer controls, and nothing keeps global state. */
#ifndef MC_TE_RDMA_LOGIC_H
#define MC_TE_RDMA_LOGIC_H
#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#define MC_RDMA_MAX_DEVICES 64      /* devices in a descriptor, a matrix row, a host */
#define MC_RDMA_DEV_NAME_MAX 64     /* bytes of a device name, without the NUL */
#define MC_RDMA_LOCATION_MAX 128    /* bytes of a location ("cpu:0", "cuda:3", "*") */
#define MC_RDMA_MAX_LOCATIONS 256   /* rows of a matrix */
#define MC_RDMA_NIC_PATH_MAX 320    /* "<server_name>@<device>" */
#define MC_RDMA_MAX_QP_PER_EP 64    /* QPs one endpoint may announce */
#define MC_RDMA_REPLY_MSG_MAX 1024  /* a rejection's text */
#define MC_RDMA_MAX_BUFFERS 65536   /* registered buffers in one descriptor */

/* ---- GIDs ---- */
/* 0 and the 16 bytes, or -1 when s is not exactly 16 two-digit hex bytes joined by ':'. */
int mc_rdma_gid_parse(const char *s, uint8_t gid[16]);
/* "xx:xx:...:xx" (47 characters and the NUL). */
void mc_rdma_gid_format(const uint8_t gid[16], char out[48]);

/* ---- names ---- */
/* 1 when name is a usable device name: 1..MC_RDMA_DEV_NAME_MAX bytes of [A-Za-z0-9_.-]. */
int mc_rdma_dev_name_ok(const char *name);
/* 1 when name is listed in a comma-separated list ("mlx5_0,mlx5_1"; spaces around names are ignored).
 * An empty or NULL list lists every name. */
int mc_rdma_name_listed(const char *list, const char *name);
/* Splits a NIC path "<server>@<device>" (the last '@'): 0 with the device part's offset, -1 when
 * malformed (no '@', empty part, too long, a control character, or a device name that is not usable). */
int mc_rdma_nic_path_split(const char *path, size_t *dev_off);

/* ---- the NIC priority matrix ---- */
struct mc_rdma_row {
  char *location;
  size_t npref, nother;
  char **pref, **other; /* device names */
};
struct mc_rdma_matrix {
  size_t n;
  struct mc_rdma_row *rows;
};
/* Parses {"<location>": [[preferred...], [other...]], ...} (the second list may be absent). A device may
 * appear in only one list of a row; names must be usable device names. 0, or -1 with err set. */
int mc_rdma_matrix_parse(const char *json, struct mc_rdma_matrix *m, char *err, size_t errlen);
int mc_rdma_matrix_from_json(json_t *o, struct mc_rdma_matrix *m, char *err, size_t errlen);
json_t *mc_rdma_matrix_to_json(const struct mc_rdma_matrix *m);
void mc_rdma_matrix_free(struct mc_rdma_matrix *m);
/* The row for a location: an exact match, else the row "*", else NULL. */
const struct mc_rdma_row *mc_rdma_matrix_row(const struct mc_rdma_matrix *m, const char *location);

/* A device as discovery sees it. */
struct mc_rdma_dev_info {
  const char *name;
  int numa_node; /* -1 unknown */
};
/* The matrix the engine publishes when none is given: for each NUMA node in numa_nodes, "cpu:<N>" prefers the
 * devices on that node and has the others as "other"; "*" prefers every device. Devices not listed in
 * filter (mc_rdma_name_listed) are left out. 0, or -1 when no device is left. */
int mc_rdma_matrix_build(const struct mc_rdma_dev_info *devs, size_t ndev, const int *numa_nodes, size_t nnuma,
                         const char *filter, struct mc_rdma_matrix *m);

/* The device a slice goes out on (or to): retry 0 takes preferred[rnd % npref], or other[rnd % nother] when
 * nothing is preferred; retry k > 0 walks preferred then other: index (k - 1) mod (npref + nother). A
 * device for which usable(arg, name) says 0 (a paused rail, a device we do not have) is skipped, trying
 * the next index of the same walk, at most once around. The name, or NULL when none is usable. */
const char *mc_rdma_select(const struct mc_rdma_row *r, int retry, uint32_t rnd,
                           int (*usable)(void *arg, const char *name), void *arg);

/* ---- slicing ---- */
/* The length of the next slice of a request with `left` bytes left: `slice`, except that once
 * left <= slice + slice / ratio the rest goes as one final slice (no tiny tail). slice 0: the whole rest. */
uint64_t mc_rdma_next_slice(uint64_t left, uint64_t slice, unsigned ratio);
/* How many slices mc_rdma_next_slice cuts `len` into. */
uint64_t mc_rdma_slice_count(uint64_t len, uint64_t slice, unsigned ratio);

/* ---- rails ---- */
#define MC_RDMA_RAIL_ERRORS 5          /* errors within the window that pause a rail with no alternative */
#define MC_RDMA_RAIL_WINDOW_NS 5000000000ull
struct mc_rdma_rail {
  uint32_t errors;          /* errors in the current window */
  uint64_t window_start_ns; /* the first error of the window */
  uint64_t paused_until_ns; /* 0: not paused */
};
/* An error on the rail at now: pauses it for pause_ns after MC_RDMA_RAIL_ERRORS errors within
 * MC_RDMA_RAIL_WINDOW_NS, or at once when has_alternative. 1 when this error paused it. */
int mc_rdma_rail_error(struct mc_rdma_rail *r, uint64_t now, int has_alternative, uint64_t pause_ns);
/* 1 when the rail may carry slices at now (a pause that ran out is over, with a fresh window). */
int mc_rdma_rail_usable(struct mc_rdma_rail *r, uint64_t now);

/* ---- the Connection handshake (control RPC type 0) ---- */
struct mc_rdma_hs {
  char local_nic_path[MC_RDMA_NIC_PATH_MAX + 1];
  char peer_nic_path[MC_RDMA_NIC_PATH_MAX + 1];
  uint16_t lid;
  uint8_t gid[16];
  uint32_t nqp;
  uint32_t qpn[MC_RDMA_MAX_QP_PER_EP]; /* each < 2^24 */
  uint32_t mtu;      /* bytes (256..4096, a power of two); 0: not sent (peers that do not send it) */
  int ready_ack;     /* -1 absent, 0, 1 */
  char reply_msg[MC_RDMA_REPLY_MSG_MAX + 1]; /* non-empty: a rejection */
};
/* The JSON text (malloc'ed) of h, in the shape upstream peers read. */
char *mc_rdma_hs_encode(const struct mc_rdma_hs *h);
/* Decodes a Connection request or reply. A rejection (non-empty reply_msg) decodes with only that checked.
 * 0, or -1 with err set. */
int mc_rdma_hs_decode(const char *json, size_t len, struct mc_rdma_hs *h, char *err, size_t errlen);

/* ---- the rdma fields of a segment descriptor ---- */
struct mc_rdma_desc_dev {
  char name[MC_RDMA_DEV_NAME_MAX + 1];
  uint16_t lid;
  uint8_t gid[16];
};
struct mc_rdma_desc_buf {
  uint64_t addr, len;
  char location[MC_RDMA_LOCATION_MAX + 1];
  uint32_t *rkey, *lkey; /* one per device */
};
struct mc_rdma_desc {
  size_t ndev, nbuf;
  struct mc_rdma_desc_dev *devs;
  struct mc_rdma_desc_buf *bufs;
  struct mc_rdma_matrix matrix;
};
/* Decodes devices, buffers (with their keys) and priority_matrix of a descriptor object. The whole
 * descriptor is rejected when any part is malformed: a buffer whose rkey or lkey count is not the number
 * of devices, a device twice, a matrix naming a device the descriptor does not have, overlapping or
 * wrapping buffers. 0, or -1 with err set (out left empty). */
int mc_rdma_desc_decode(json_t *root, struct mc_rdma_desc *out, char *err, size_t errlen);
/* The device index of name in d, or -1 (peer NICs are mapped by name, never by position). */
int mc_rdma_desc_dev_index(const struct mc_rdma_desc *d, const char *name);
void mc_rdma_desc_free(struct mc_rdma_desc *d);
#endif
