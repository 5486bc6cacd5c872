/* The RDMA transport's pure logic (src/te/rdma_logic.h; docs/rdma.md), on a host with no RDMA device:
 * GIDs, names and NIC paths, the NIC priority matrix (parsing, writing, building from devices, choosing a
 * NIC), slicing, the rail pause rule, the Connection handshake and the rdma fields of a descriptor. */
#include <stdlib.h>
#include <string.h>

#include "lib/test.h"
#include "te/rdma_logic.h"

static void test_gid(void) {
  uint8_t g[16];
  const char *s = "00:00:00:00:00:00:00:00:00:00:ff:ff:0a:00:00:02";
  REQUIRE(!mc_rdma_gid_parse(s, g));
  CHECK_EQ(g[10], 0xff);
  CHECK_EQ(g[12], 0x0a);
  CHECK_EQ(g[15], 2);
  char out[48];
  mc_rdma_gid_format(g, out);
  CHECK_STR(out, s);
  REQUIRE(!mc_rdma_gid_parse("FE:80:00:00:00:00:00:00:02:1A:2B:FF:FE:3C:4D:5E", g));
  CHECK_EQ(g[0], 0xfe);
  const char *bad[] = {"", "00:00", "00:00:00:00:00:00:00:00:00:00:ff:ff:0a:00:00:0",
                       "00:00:00:00:00:00:00:00:00:00:ff:ff:0a:00:00:02:", "00-00-00-00-00-00-00-00-00-00-ff-ff-0a-00-00-02",
                       "0g:00:00:00:00:00:00:00:00:00:ff:ff:0a:00:00:02", "000:0:00:00:00:00:00:00:00:00:ff:ff:0a:00:00:02"};
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) CHECK_EQ(mc_rdma_gid_parse(bad[i], g), -1);
  CHECK_EQ(mc_rdma_gid_parse(NULL, g), -1);
}

static void test_names(void) {
  CHECK(mc_rdma_dev_name_ok("mlx5_0"));
  CHECK(mc_rdma_dev_name_ok("rxe0"));
  CHECK(!mc_rdma_dev_name_ok(""));
  CHECK(!mc_rdma_dev_name_ok("mlx5 0"));
  CHECK(!mc_rdma_dev_name_ok("../etc"));
  char big[80];
  memset(big, 'a', sizeof(big) - 1);
  big[79] = 0;
  CHECK(!mc_rdma_dev_name_ok(big));
  CHECK(mc_rdma_name_listed(NULL, "x"));
  CHECK(mc_rdma_name_listed("", "x"));
  CHECK(mc_rdma_name_listed("mlx5_0,mlx5_1", "mlx5_1"));
  CHECK(mc_rdma_name_listed(" mlx5_0 , rxe0 ", "rxe0"));
  CHECK(!mc_rdma_name_listed("mlx5_0,mlx5_1", "mlx5_"));
  CHECK(!mc_rdma_name_listed("mlx5_10", "mlx5_1"));
  size_t off = 0;
  REQUIRE(!mc_rdma_nic_path_split("node1:12345@mlx5_0", &off));
  CHECK_STR("node1:12345@mlx5_0" + off, "mlx5_0");
  CHECK(!mc_rdma_nic_path_split("a@b@rxe0", &off));
  CHECK_EQ(off, 4u);
  CHECK_EQ(mc_rdma_nic_path_split("node1", &off), -1);
  CHECK_EQ(mc_rdma_nic_path_split("@rxe0", &off), -1);
  CHECK_EQ(mc_rdma_nic_path_split("node1@", &off), -1);
  CHECK_EQ(mc_rdma_nic_path_split("node1@rx e0", &off), -1);
  CHECK_EQ(mc_rdma_nic_path_split("no\nde@rxe0", &off), -1);
}

static void test_matrix_parse(void) {
  struct mc_rdma_matrix m;
  char err[256];
  REQUIRE(!mc_rdma_matrix_parse("{\"cpu:0\": [[\"mlx5_0\",\"mlx5_1\"], [\"mlx5_2\"]], \"cuda:0\": [[\"mlx5_2\"]]}", &m,
                                err, sizeof(err)));
  CHECK_EQ(m.n, 2u);
  const struct mc_rdma_row *r = mc_rdma_matrix_row(&m, "cpu:0");
  REQUIRE(r);
  CHECK_EQ(r->npref, 2u);
  CHECK_EQ(r->nother, 1u);
  CHECK_STR(r->other[0], "mlx5_2");
  r = mc_rdma_matrix_row(&m, "cuda:0");
  REQUIRE(r);
  CHECK_EQ(r->npref, 1u);
  CHECK_EQ(r->nother, 0u);
  CHECK(!mc_rdma_matrix_row(&m, "cpu:1")); /* no "*" row */
  /* written and read back: the same rows */
  json_t *j = mc_rdma_matrix_to_json(&m);
  char *txt = json_dumps(j, JSON_COMPACT);
  json_decref(j);
  struct mc_rdma_matrix m2;
  REQUIRE(!mc_rdma_matrix_parse(txt, &m2, err, sizeof(err)));
  free(txt);
  CHECK_EQ(m2.n, 2u);
  CHECK_STR(mc_rdma_matrix_row(&m2, "cpu:0")->pref[1], "mlx5_1");
  mc_rdma_matrix_free(&m2);
  mc_rdma_matrix_free(&m);
  const char *bad[] = {
      "[]",
      "{\"cpu:0\": []}",
      "{\"cpu:0\": [[\"a\"], [\"b\"], [\"c\"]]}",
      "{\"cpu:0\": [[\"a\", \"a\"]]}",
      "{\"cpu:0\": [[\"a\"], [\"a\"]]}",
      "{\"cpu:0\": [[\"a b\"]]}",
      "{\"cpu:0\": [[1]]}",
      "{\"cpu:0\": [\"a\"]}",
      "{\"\": [[\"a\"]]}",
      "{\"cpu:0\": [[\"a\"]], \"cpu:0\": [[\"b\"]]}",
      "not json",
  };
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    err[0] = 0;
    CHECK_EQ(mc_rdma_matrix_parse(bad[i], &m, err, sizeof(err)), -1);
    CHECK(err[0]);
    CHECK_EQ(m.n, 0u);
  }
  /* more devices in a row than a host can have */
  char big[4096] = "{\"cpu:0\": [[";
  for (int i = 0; i <= MC_RDMA_MAX_DEVICES; i++)
    snprintf(big + strlen(big), sizeof(big) - strlen(big), "%s\"d%d\"", i ? "," : "", i);
  strcat(big, "]]}");
  CHECK_EQ(mc_rdma_matrix_parse(big, &m, err, sizeof(err)), -1);
}

static void test_matrix_build_and_select(void) {
  struct mc_rdma_dev_info devs[] = {{"mlx5_0", 0}, {"mlx5_1", 0}, {"mlx5_2", 1}, {"mlx5_3", -1}};
  int numa[] = {0, 1};
  struct mc_rdma_matrix m;
  REQUIRE(!mc_rdma_matrix_build(devs, 4, numa, 2, NULL, &m));
  CHECK_EQ(m.n, 3u);
  const struct mc_rdma_row *r0 = mc_rdma_matrix_row(&m, "cpu:0"), *r1 = mc_rdma_matrix_row(&m, "cpu:1");
  const struct mc_rdma_row *star = mc_rdma_matrix_row(&m, "cuda:7"); /* unknown location: the "*" row */
  REQUIRE(r0 && r1 && star);
  CHECK_EQ(r0->npref, 2u);
  CHECK_EQ(r0->nother, 2u);
  CHECK_EQ(r1->npref, 1u);
  CHECK_STR(r1->pref[0], "mlx5_2");
  CHECK_STR(star->location, "*");
  CHECK_EQ(star->npref, 4u);
  /* retry 0: a preferred device, by the random number */
  CHECK_STR(mc_rdma_select(r0, 0, 0, NULL, NULL), "mlx5_0");
  CHECK_STR(mc_rdma_select(r0, 0, 3, NULL, NULL), "mlx5_1");
  /* retry k: preferred then other, (k - 1) mod total */
  CHECK_STR(mc_rdma_select(r0, 1, 99, NULL, NULL), "mlx5_0");
  CHECK_STR(mc_rdma_select(r0, 3, 99, NULL, NULL), "mlx5_2");
  CHECK_STR(mc_rdma_select(r0, 4, 99, NULL, NULL), "mlx5_3");
  CHECK_STR(mc_rdma_select(r0, 5, 99, NULL, NULL), "mlx5_0");
  mc_rdma_matrix_free(&m);
  /* a filter keeps only the named devices; a filter naming none gives no matrix */
  REQUIRE(!mc_rdma_matrix_build(devs, 4, numa, 2, "mlx5_2, mlx5_3", &m));
  r0 = mc_rdma_matrix_row(&m, "cpu:0");
  CHECK_EQ(r0->npref, 0u);
  CHECK_EQ(r0->nother, 2u);
  /* nothing preferred: retry 0 picks among the others */
  CHECK_STR(mc_rdma_select(r0, 0, 1, NULL, NULL), "mlx5_3");
  mc_rdma_matrix_free(&m);
  CHECK_EQ(mc_rdma_matrix_build(devs, 4, numa, 2, "rxe9", &m), -1);
  CHECK_EQ(mc_rdma_matrix_build(devs, 0, numa, 2, NULL, &m), -1);
}

static int not_paused(void *arg, const char *name) { return strcmp(name, (const char *)arg) != 0; }
static int none(void *arg, const char *name) {
  (void)arg, (void)name;
  return 0;
}

static void test_select_skips(void) {
  struct mc_rdma_matrix m;
  char err[128];
  REQUIRE(!mc_rdma_matrix_parse("{\"*\": [[\"a\", \"b\"], [\"c\"]]}", &m, err, sizeof(err)));
  const struct mc_rdma_row *r = mc_rdma_matrix_row(&m, "cpu:0");
  REQUIRE(r);
  CHECK_STR(mc_rdma_select(r, 0, 0, not_paused, "a"), "b"); /* "a" paused: the next of the walk */
  CHECK_STR(mc_rdma_select(r, 2, 0, not_paused, "b"), "c");
  CHECK_STR(mc_rdma_select(r, 3, 0, not_paused, "c"), "a"); /* around once */
  CHECK(!mc_rdma_select(r, 1, 0, none, NULL));
  CHECK(!mc_rdma_select(NULL, 0, 0, NULL, NULL));
  mc_rdma_matrix_free(&m);
}

static void test_slicing(void) {
  const uint64_t S = 65536;
  CHECK_EQ(mc_rdma_next_slice(10, S, 4), 10u);
  CHECK_EQ(mc_rdma_next_slice(S, S, 4), S);
  CHECK_EQ(mc_rdma_next_slice(S + S / 4, S, 4), S + S / 4); /* no tiny tail */
  CHECK_EQ(mc_rdma_next_slice(S + S / 4 + 1, S, 4), S);
  CHECK_EQ(mc_rdma_next_slice(5 * S, 0, 4), 5 * S);
  /* the count agrees with cutting slice by slice, and the slices add up */
  uint64_t lens[] = {1, S - 1, S, S + 1, S + S / 4, S + S / 4 + 1, 2 * S, 2 * S + S / 4 + 1, 64ull << 20,
                     (64ull << 20) + 12345, 3 * S + 7};
  for (size_t i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
    uint64_t left = lens[i], n = 0, sum = 0, smallest = UINT64_MAX;
    while (left) {
      uint64_t s = mc_rdma_next_slice(left, S, 4);
      REQUIRE(s && s <= left);
      smallest = s < smallest ? s : smallest;
      sum += s, left -= s, n++;
    }
    CHECK_EQ(sum, lens[i]);
    CHECK_EQ(mc_rdma_slice_count(lens[i], S, 4), n);
    if (lens[i] > S) CHECK(smallest > S / 4); /* no slice of a cut request is a tiny tail */
  }
  CHECK_EQ(mc_rdma_slice_count(0, S, 4), 0u);
  CHECK_EQ(mc_rdma_slice_count(1ull << 40, S, 4), (1ull << 40) / S);
}

static void test_rails(void) {
  const uint64_t SEC = 1000000000ull, PAUSE = 30 * SEC;
  struct mc_rdma_rail r = {0};
  uint64_t t = 100 * SEC;
  CHECK(mc_rdma_rail_usable(&r, t));
  /* no alternative: the fifth error within 5 s pauses */
  for (int i = 0; i < 4; i++) CHECK_EQ(mc_rdma_rail_error(&r, t + (uint64_t)i * SEC, 0, PAUSE), 0);
  CHECK(mc_rdma_rail_usable(&r, t + 4 * SEC));
  CHECK_EQ(mc_rdma_rail_error(&r, t + 4 * SEC, 0, PAUSE), 1);
  CHECK(!mc_rdma_rail_usable(&r, t + 5 * SEC));
  CHECK(!mc_rdma_rail_usable(&r, t + 33 * SEC));
  CHECK(mc_rdma_rail_usable(&r, t + 34 * SEC)); /* recovered, with a fresh window */
  CHECK_EQ(mc_rdma_rail_error(&r, t + 35 * SEC, 0, PAUSE), 0);
  /* errors spread wider than the window never pause */
  struct mc_rdma_rail s = {0};
  for (int i = 0; i < 20; i++) CHECK_EQ(mc_rdma_rail_error(&s, t + (uint64_t)i * 6 * SEC, 0, PAUSE), 0);
  /* with an alternative: the first error pauses */
  struct mc_rdma_rail a = {0};
  CHECK_EQ(mc_rdma_rail_error(&a, t, 1, PAUSE), 1);
  CHECK(!mc_rdma_rail_usable(&a, t + 1));
  CHECK_EQ(mc_rdma_rail_error(&a, t + 2, 1, PAUSE), 0); /* errors while paused change nothing */
  CHECK(mc_rdma_rail_usable(&a, t + PAUSE));
}

static struct mc_rdma_hs sample_hs(void) {
  struct mc_rdma_hs h;
  memset(&h, 0, sizeof(h));
  strcpy(h.local_nic_path, "10.0.0.1:15001@rxe0");
  strcpy(h.peer_nic_path, "10.0.0.2:15002@rxe0");
  h.lid = 7;
  mc_rdma_gid_parse("00:00:00:00:00:00:00:00:00:00:ff:ff:0a:00:00:01", h.gid);
  h.nqp = 2;
  h.qpn[0] = 17;
  h.qpn[1] = 0xfffffe;
  h.mtu = 4096;
  h.ready_ack = 1;
  return h;
}

static void test_handshake(void) {
  struct mc_rdma_hs h = sample_hs(), d;
  char err[256];
  char *txt = mc_rdma_hs_encode(&h);
  REQUIRE(txt);
  REQUIRE(!mc_rdma_hs_decode(txt, strlen(txt), &d, err, sizeof(err)));
  CHECK(!memcmp(&h, &d, sizeof(h)));
  free(txt);
  /* an upstream peer's shape: no mtu, no ready_ack, extra fields */
  const char *up = "{\"local_nic_path\":\"h:1@mlx5_0\",\"local_lid\":0,\"local_gid\":"
                   "\"fe:80:00:00:00:00:00:00:02:1a:2b:ff:fe:3c:4d:5e\",\"peer_nic_path\":\"g:2@mlx5_1\","
                   "\"qp_num\":[100,101],\"reply_msg\":\"\",\"payload\":\"\"}";
  REQUIRE(!mc_rdma_hs_decode(up, strlen(up), &d, err, sizeof(err)));
  CHECK_EQ(d.nqp, 2u);
  CHECK_EQ(d.mtu, 0u);
  CHECK_EQ(d.ready_ack, -1);
  /* a rejection */
  const char *rej = "{\"reply_msg\":\"no such device\"}";
  REQUIRE(!mc_rdma_hs_decode(rej, strlen(rej), &d, err, sizeof(err)));
  CHECK_STR(d.reply_msg, "no such device");
  /* lies: each is refused with a reason, and nothing of it is kept */
  const char *bad[] = {
      "[]",
      "{\"local_nic_path\":\"h:1@mlx5_0\",\"local_lid\":0,\"local_gid\":\"00:00:00:00:00:00:00:00:00:00:ff:ff:0a:00:00:01\","
      "\"peer_nic_path\":\"g:2@mlx5_1\",\"qp_num\":[]}",
      "{\"local_nic_path\":\"h:1@mlx5_0\",\"local_lid\":70000,\"local_gid\":\"00:00:00:00:00:00:00:00:00:00:ff:ff:0a:00:00:01\","
      "\"peer_nic_path\":\"g:2@mlx5_1\",\"qp_num\":[1]}",
      "{\"local_nic_path\":\"h:1@mlx5_0\",\"local_lid\":0,\"local_gid\":\"00:00\","
      "\"peer_nic_path\":\"g:2@mlx5_1\",\"qp_num\":[1]}",
      "{\"local_nic_path\":\"h:1\",\"local_lid\":0,\"local_gid\":\"00:00:00:00:00:00:00:00:00:00:ff:ff:0a:00:00:01\","
      "\"peer_nic_path\":\"g:2@mlx5_1\",\"qp_num\":[1]}",
      "{\"local_nic_path\":\"h:1@mlx5_0\",\"local_lid\":0,\"local_gid\":\"00:00:00:00:00:00:00:00:00:00:ff:ff:0a:00:00:01\","
      "\"peer_nic_path\":\"g:2@mlx5_1\",\"qp_num\":[16777216]}",
      "{\"local_nic_path\":\"h:1@mlx5_0\",\"local_lid\":0,\"local_gid\":\"00:00:00:00:00:00:00:00:00:00:ff:ff:0a:00:00:01\","
      "\"peer_nic_path\":\"g:2@mlx5_1\",\"qp_num\":[1],\"mtu\":1000}",
      "{\"local_nic_path\":\"h:1@mlx5_0\",\"local_lid\":0,\"local_gid\":\"00:00:00:00:00:00:00:00:00:00:ff:ff:0a:00:00:01\","
      "\"peer_nic_path\":\"g:2@mlx5_1\",\"qp_num\":[1],\"ready_ack\":\"yes\"}",
      "{\"local_nic_path\":\"h:1@mlx5_0\",\"local_lid\":0,\"local_gid\":\"00:00:00:00:00:00:00:00:00:00:ff:ff:0a:00:00:01\","
      "\"peer_nic_path\":\"g:2@mlx5_1\",\"qp_num\":[1],\"reply_msg\":5}",
  };
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    err[0] = 0;
    CHECK_EQ(mc_rdma_hs_decode(bad[i], strlen(bad[i]), &d, err, sizeof(err)), -1);
    CHECK(err[0]);
    CHECK_EQ(d.nqp, 0u);
  }
  /* more QPs than an endpoint may have */
  char many[2048] = "{\"local_nic_path\":\"h:1@mlx5_0\",\"local_lid\":0,\"local_gid\":"
                    "\"00:00:00:00:00:00:00:00:00:00:ff:ff:0a:00:00:01\",\"peer_nic_path\":\"g:2@mlx5_1\",\"qp_num\":[";
  for (int i = 0; i <= MC_RDMA_MAX_QP_PER_EP; i++) snprintf(many + strlen(many), sizeof(many) - strlen(many), "%s%d", i ? "," : "", i + 1);
  strcat(many, "]}");
  CHECK_EQ(mc_rdma_hs_decode(many, strlen(many), &d, err, sizeof(err)), -1);
  /* a length that stops inside the text is what is decoded */
  txt = mc_rdma_hs_encode(&h);
  CHECK_EQ(mc_rdma_hs_decode(txt, strlen(txt) - 1, &d, err, sizeof(err)), -1);
  free(txt);
}

static json_t *desc_json(const char *text) {
  json_error_t e;
  json_t *o = json_loads(text, 0, &e);
  if (!o) fprintf(stderr, "test json: %s\n", e.text);
  return o;
}

static void test_descriptor(void) {
  const char *good =
      "{\"name\":\"n\",\"protocol\":\"rdma\",\"devices\":[{\"name\":\"rxe0\",\"lid\":0,\"gid\":"
      "\"00:00:00:00:00:00:00:00:00:00:ff:ff:0a:00:00:01\"},{\"name\":\"rxe1\",\"lid\":1,\"gid\":"
      "\"00:00:00:00:00:00:00:00:00:00:ff:ff:0a:00:00:02\"}],\"buffers\":[{\"name\":\"cpu:0\",\"addr\":8192,"
      "\"length\":4096,\"rkey\":[11,12],\"lkey\":[21,22]},{\"name\":\"cpu:0\",\"addr\":4096,\"length\":4096,"
      "\"rkey\":[1,2],\"lkey\":[3,4]}],\"priority_matrix\":{\"cpu:0\":[[\"rxe1\"],[\"rxe0\"]]}}";
  struct mc_rdma_desc d;
  char err[256];
  json_t *o = desc_json(good);
  REQUIRE(!mc_rdma_desc_decode(o, &d, err, sizeof(err)));
  json_decref(o);
  CHECK_EQ(d.ndev, 2u);
  CHECK_EQ(d.nbuf, 2u);
  CHECK_EQ(d.bufs[0].addr, 4096u); /* sorted */
  CHECK_EQ(d.bufs[1].rkey[1], 12u);
  /* the matrix's NICs map to the descriptor's devices by name, not by position */
  const struct mc_rdma_row *r = mc_rdma_matrix_row(&d.matrix, "cpu:0");
  REQUIRE(r);
  CHECK_EQ(mc_rdma_desc_dev_index(&d, r->pref[0]), 1);
  CHECK_EQ(mc_rdma_desc_dev_index(&d, "mlx5_9"), -1);
  mc_rdma_desc_free(&d);
  /* each lie rejects the whole descriptor */
  const char *bad[] = {
      /* 64 keys for 2 devices is not accepted as "at least" */
      "{\"devices\":[{\"name\":\"rxe0\",\"lid\":0,\"gid\":\"00:00:00:00:00:00:00:00:00:00:ff:ff:0a:00:00:01\"}],"
      "\"buffers\":[{\"name\":\"cpu:0\",\"addr\":4096,\"length\":1,\"rkey\":[1,2],\"lkey\":[1,2]}]}",
      "{\"devices\":[{\"name\":\"rxe0\",\"lid\":0,\"gid\":\"00:00:00:00:00:00:00:00:00:00:ff:ff:0a:00:00:01\"}],"
      "\"buffers\":[{\"name\":\"cpu:0\",\"addr\":4096,\"length\":1,\"rkey\":[1],\"lkey\":[]}]}",
      "{\"devices\":[{\"name\":\"rxe0\",\"lid\":0,\"gid\":\"00:00:00:00:00:00:00:00:00:00:ff:ff:0a:00:00:01\"},"
      "{\"name\":\"rxe0\",\"lid\":0,\"gid\":\"00:00:00:00:00:00:00:00:00:00:ff:ff:0a:00:00:01\"}]}",
      "{\"devices\":[]}",
      "{\"devices\":[{\"name\":\"rxe0\",\"lid\":0,\"gid\":\"00:00:00:00:00:00:00:00:00:00:ff:ff:0a:00:00:01\"}],"
      "\"buffers\":[{\"name\":\"cpu:0\",\"addr\":4096,\"length\":8192,\"rkey\":[1],\"lkey\":[1]},"
      "{\"name\":\"cpu:0\",\"addr\":8192,\"length\":8,\"rkey\":[1],\"lkey\":[1]}]}",
      "{\"devices\":[{\"name\":\"rxe0\",\"lid\":0,\"gid\":\"00:00:00:00:00:00:00:00:00:00:ff:ff:0a:00:00:01\"}],"
      "\"buffers\":[{\"name\":\"cpu:0\",\"addr\":-1,\"length\":8,\"rkey\":[1],\"lkey\":[1]}]}",
      "{\"devices\":[{\"name\":\"rxe0\",\"lid\":0,\"gid\":\"00:00:00:00:00:00:00:00:00:00:ff:ff:0a:00:00:01\"}],"
      "\"buffers\":[{\"name\":\"cpu:0\",\"addr\":4096,\"length\":8,\"rkey\":[4294967296],\"lkey\":[1]}]}",
      "{\"devices\":[{\"name\":\"rxe0\",\"lid\":0,\"gid\":\"00:00:00:00:00:00:00:00:00:00:ff:ff:0a:00:00:01\"}],"
      "\"priority_matrix\":{\"cpu:0\":[[\"mlx5_0\"]]}}",
      "{\"devices\":[{\"name\":\"rxe0\",\"lid\":99999,\"gid\":\"00:00:00:00:00:00:00:00:00:00:ff:ff:0a:00:00:01\"}]}",
  };
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    o = desc_json(bad[i]);
    REQUIRE(o);
    err[0] = 0;
    CHECK_EQ(mc_rdma_desc_decode(o, &d, err, sizeof(err)), -1);
    CHECK(err[0]);
    CHECK_EQ(d.ndev, 0u);
    CHECK_EQ(d.nbuf, 0u);
    json_decref(o);
  }
}

TEST_MAIN(TEST_CASE(test_gid), TEST_CASE(test_names), TEST_CASE(test_matrix_parse),
          TEST_CASE(test_matrix_build_and_select), TEST_CASE(test_select_skips), TEST_CASE(test_slicing),
          TEST_CASE(test_rails), TEST_CASE(test_handshake), TEST_CASE(test_descriptor))
