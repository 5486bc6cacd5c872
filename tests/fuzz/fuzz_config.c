/* Fuzz target: configuration parsing. Byte 0 picks the parser, the rest is its text:
 *   0: a master config file named *.json (mc_master_cfg_load_file), and the same text as a --config_path
 *      JSON object for the generic table code (mc_cfg_apply_json, common/config.c);
 *   1: a master config file named *.yaml (libyaml, src/master/config_file.c);
 *   2: a command line, one argument per line (mc_cfg_parse_argv over the master's table);
 *   3: a duration and a size (mc_parse_duration_ms, mc_parse_size).
 * A configuration that loads is then validated and described (mc_master_cfg_finalize, _describe), as
 * mooncake_master does at start. Command lines with --help or --config_path are skipped: the first only
 * prints, the second would make the harness open whatever file the input names. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/alloc.h"
#include "common/log.h"
#include "common/util.h"
#include "fuzz_common.h"
#include "master_core/config.h"

#define MAX_ARGS 64

static char dir[64];

static void remove_dir(void) {
  char path[128];
  snprintf(path, sizeof(path), "%s/c.json", dir), unlink(path);
  snprintf(path, sizeof(path), "%s/c.yaml", dir), unlink(path);
  rmdir(dir);
}

static int write_file(const char *path, const char *text, size_t n) {
  FILE *f = fopen(path, "wb");
  if (!f) return -1;
  size_t w = fwrite(text, 1, n, f);
  return fclose(f) || w != n ? -1 : 0;
}

static void finish(struct mc_master_cfg *c) {
  char err[512], line[2048];
  if (!mc_master_cfg_finalize(c, err, sizeof(err))) mc_master_cfg_describe(c, line, sizeof(line));
}

static void from_file(const char *text, size_t n, const char *ext) {
  char path[128], err[512];
  snprintf(path, sizeof(path), "%s/c.%s", dir, ext);
  if (write_file(path, text, n)) abort();
  struct mc_master_cfg c;
  mc_master_cfg_defaults(&c);
  if (!mc_master_cfg_load_file(&c, path, err, sizeof(err))) finish(&c);
  mc_master_cfg_free(&c);
}

static void from_json_object(const char *text, size_t n) {
  char err[512];
  json_t *root = json_loadb(text, n, 0, NULL);
  if (!json_is_object(root)) {
    json_decref(root);
    return;
  }
  struct mc_master_cfg c;
  mc_master_cfg_defaults(&c);
  if (!mc_cfg_apply_json(mc_master_opts, &c, root, err, sizeof(err))) finish(&c);
  mc_master_cfg_free(&c);
  json_decref(root);
}

static void from_argv(char *text) {
  char *argv[MAX_ARGS + 1] = {"mooncake_master"}, *save = NULL;
  int argc = 1;
  for (char *a = strtok_r(text, "\n", &save); a && argc < MAX_ARGS; a = strtok_r(NULL, "\n", &save)) {
    if (strstr(a, "config_path") || !strcmp(a, "--help") || !strcmp(a, "-h") || !strcmp(a, "-help")) return;
    argv[argc++] = a;
  }
  struct mc_master_cfg c;
  mc_master_cfg_defaults(&c);
  char **rest = NULL;
  if (!mc_cfg_parse_argv(mc_master_opts, &c, argc, argv, "", &rest)) finish(&c);
  mc_free(rest);
  mc_master_cfg_free(&c);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (!*dir) {
    snprintf(dir, sizeof(dir), "/tmp/mc-fuzz-config-XXXXXX");
    if (!mkdtemp(dir)) abort();
    atexit(remove_dir);
  }
  fz_quiet();
  if (!size) return 0;
  size_t n = size - 1;
  char *text = malloc(n + 1);
  if (n) memcpy(text, data + 1, n);
  text[n] = 0;
  uint64_t v;
  char why[160];
  switch (data[0] % 4) {
    case 0: from_file(text, n, "json"), from_json_object(text, n); break;
    case 1: from_file(text, n, "yaml"); break;
    case 2: from_argv(text); break;
    case 3: mc_parse_duration_ms(text, &v, why, sizeof(why)), mc_parse_size(text, &v); break;
  }
  free(text);
  return 0;
}
