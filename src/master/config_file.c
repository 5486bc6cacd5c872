/* The master's --config_path file (docs/master.md, "Config files"): JSON through jansson, YAML through
 * libyaml, both applied to the one table (mc_master_opts) by the same key setter, so the two forms accept
 * the same keys and values. A file error names the file and, where the format gives one, the line:
 * "path:line: reason". */
#include <errno.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <yaml.h>

#include "common/alloc.h"
#include "common/log.h"
#include "master_core/config.h"

/* Bounds on hostile files: a config file is a few KiB; these are far above any real one. */
#define FILE_MAX (1u << 20) /* bytes read */
#define DEPTH_MAX 8         /* nested maps */
#define KEY_MAX 256         /* a dotted key path */
#define KEYS_MAX 4096       /* keys in one map */
#define LIST_MAX 4096       /* a list's items joined with ',' */

/* One file being applied. line is the 1-based line of the node at hand, 0 where the format gives none. */
struct cfg_file {
  struct mc_master_cfg *c;
  const char *path;
  char *err;
  size_t errlen;
  int line;
};

static int file_error(struct cfg_file *f, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int file_error(struct cfg_file *f, const char *fmt, ...) {
  char why[384];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(why, sizeof(why), fmt, ap);
  va_end(ap);
  if (f->line > 0) snprintf(f->err, f->errlen, "%s:%d: %s", f->path, f->line, why);
  else snprintf(f->err, f->errlen, "%s: %s", f->path, why);
  return -1;
}

static const struct mc_cfg_opt *find_opt(const char *name) {
  for (const struct mc_cfg_opt *o = mc_master_opts; o->name; o++)
    if (!strcmp(o->name, name)) return o;
  return NULL;
}

/* The one key setter of both forms. client_live_ttl_sec is upstream's file name of client_ttl. Unknown
 * keys are skipped with a warning (upstream's files carry keys of other builds). */
static int set_key(struct cfg_file *f, const char *key, const char *value) {
  if (!strcmp(key, "client_live_ttl_sec")) key = "client_ttl";
  if (!find_opt(key)) {
    if (f->line > 0) LOG_WARN("config %s:%d: ignoring unknown key '%s'", f->path, f->line, key);
    else LOG_WARN("config %s: ignoring unknown key '%s'", f->path, key);
    return 0;
  }
  char why[256];
  if (mc_cfg_set(mc_master_opts, f->c, key, value, why, sizeof(why))) return file_error(f, "%s", why);
  return 0;
}

/* A list value: its items joined with ',' (the separator of the list-valued string keys, e.g.
 * ha_backend_connstring). Only a string key takes one. */
struct list_text {
  char text[LIST_MAX];
  size_t n;
};

static int list_add(struct cfg_file *f, struct list_text *l, const char *key, const char *item) {
  size_t len = strlen(item);
  if (l->n + len + 2 > sizeof(l->text)) return file_error(f, "list of '%s' longer than %d bytes", key, LIST_MAX);
  if (l->n) l->text[l->n++] = ',';
  memcpy(l->text + l->n, item, len + 1);
  l->n += len;
  return 0;
}

static int set_list(struct cfg_file *f, const char *key, const struct list_text *l) {
  const struct mc_cfg_opt *o = find_opt(!strcmp(key, "client_live_ttl_sec") ? "client_ttl" : key);
  if (o && o->type != MC_CFG_STRING) return file_error(f, "'%s' takes a single value, not a list", key);
  return set_key(f, key, l->text);
}

static int join_key(struct cfg_file *f, char *out, const char *prefix, const char *key) {
  int n = snprintf(out, KEY_MAX, "%s%s%s", prefix, *prefix ? "." : "", key);
  if (n < 0 || n >= KEY_MAX) return file_error(f, "key path longer than %d bytes", KEY_MAX - 1);
  return 0;
}

/* ------------------------------------------------------------------ JSON */

static int json_list(struct cfg_file *f, const char *key, json_t *arr) {
  struct list_text l = {.n = 0};
  size_t i;
  json_t *v;
  json_array_foreach(arr, i, v) {
    char num[64];
    const char *text;
    if (mc_cfg_json_text(v, num, sizeof(num), &text)) return file_error(f, "list '%s' may hold only scalars", key);
    if (list_add(f, &l, key, text)) return -1;
  }
  return set_list(f, key, &l);
}

static int json_map(struct cfg_file *f, json_t *obj, const char *prefix, int depth) {
  if (depth > DEPTH_MAX) return file_error(f, "maps nested deeper than %d", DEPTH_MAX);
  const char *k;
  json_t *v;
  json_object_foreach(obj, k, v) {
    char key[KEY_MAX], num[64];
    const char *text;
    if (join_key(f, key, prefix, k)) return -1;
    if (json_is_object(v)) {
      if (json_map(f, v, key, depth + 1)) return -1;
    } else if (json_is_array(v)) {
      if (json_list(f, key, v)) return -1;
    } else if (!json_is_null(v)) {
      if (mc_cfg_json_text(v, num, sizeof(num), &text) || set_key(f, key, text)) return -1;
    }
  }
  return 0;
}

static int load_json(struct cfg_file *f, FILE *in) {
  json_error_t jerr;
  json_t *root = json_loadf(in, JSON_REJECT_DUPLICATES, &jerr);
  if (!root) {
    f->line = jerr.line;
    return file_error(f, "%s", jerr.text);
  }
  int rc = json_is_object(root) ? json_map(f, root, "", 1) : file_error(f, "the top level must be a map");
  json_decref(root);
  return rc;
}

/* ------------------------------------------------------------------ YAML */

/* A map or list being read. A map remembers its keys (a repeated one is an error) and the key whose value
 * comes next; a list gathers its items. */
struct ynode {
  int is_list;
  char path[KEY_MAX]; /* a map: its dotted path; a list: its key */
  char key[KEY_MAX];  /* a map: the key awaiting its value, "" when a key comes next */
  char **keys;
  size_t nkeys;
  struct list_text *list;
};

struct yreader {
  struct cfg_file *f;
  struct ynode stack[DEPTH_MAX];
  int depth, documents;
};

static void ynode_free(struct ynode *n) {
  for (size_t i = 0; i < n->nkeys; i++) mc_free(n->keys[i]);
  mc_free(n->keys);
  mc_free(n->list);
  memset(n, 0, sizeof(*n));
}

static struct ynode *ypush(struct yreader *y, int is_list, const char *path) {
  if (y->depth == DEPTH_MAX) return file_error(y->f, "maps and lists nested deeper than %d", DEPTH_MAX), NULL;
  struct ynode *n = &y->stack[y->depth++];
  memset(n, 0, sizeof(*n));
  n->is_list = is_list;
  snprintf(n->path, sizeof(n->path), "%s", path);
  if (is_list) n->list = mc_calloc(1, sizeof(*n->list));
  return n;
}

/* A key of the map on top: refused when the map already has it. */
static int ykey(struct yreader *y, struct ynode *n, const char *key) {
  if (!*key) return file_error(y->f, "empty key");
  if (strlen(key) >= sizeof(n->key)) return file_error(y->f, "key longer than %d bytes", KEY_MAX - 1);
  for (size_t i = 0; i < n->nkeys; i++)
    if (!strcmp(n->keys[i], key)) return file_error(y->f, "duplicate key '%s'", key);
  if (n->nkeys == KEYS_MAX) return file_error(y->f, "more than %d keys in one map", KEYS_MAX);
  n->keys = mc_realloc(n->keys, (n->nkeys + 1) * sizeof(*n->keys));
  n->keys[n->nkeys++] = mc_strdup(key);
  snprintf(n->key, sizeof(n->key), "%s", key);
  return 0;
}

/* A plain empty, ~ or null scalar: no value (the key keeps its default, as JSON null does). */
static int ynull(const yaml_event_t *e) {
  const char *v = (const char *)e->data.scalar.value;
  return e->data.scalar.style == YAML_PLAIN_SCALAR_STYLE &&
         (!*v || !strcmp(v, "~") || !strcmp(v, "null") || !strcmp(v, "Null") || !strcmp(v, "NULL"));
}

static int yscalar(struct yreader *y, const yaml_event_t *e) {
  const char *v = (const char *)e->data.scalar.value;
  if (!y->depth) return ynull(e) ? 0 : file_error(y->f, "the top level must be a map");
  struct ynode *n = &y->stack[y->depth - 1];
  if (n->is_list) return list_add(y->f, n->list, n->path, v);
  if (!*n->key) return ykey(y, n, v);
  char key[KEY_MAX];
  int rc = join_key(y->f, key, n->path, n->key);
  n->key[0] = 0;
  return rc ? -1 : ynull(e) ? 0 : set_key(y->f, key, v);
}

/* The start of a map or list: at the top level (a map only) or as the value of a key. */
static int ystart(struct yreader *y, int is_list) {
  char path[KEY_MAX] = "";
  if (!y->depth) {
    if (is_list) return file_error(y->f, "the top level must be a map");
  } else {
    struct ynode *n = &y->stack[y->depth - 1];
    if (n->is_list) return file_error(y->f, "list '%s' may hold only scalars", n->path);
    if (!*n->key) return file_error(y->f, "a key must be a scalar");
    if (join_key(y->f, path, n->path, n->key)) return -1;
    n->key[0] = 0;
  }
  return ypush(y, is_list, path) ? 0 : -1;
}

static int yend(struct yreader *y) {
  struct ynode *n = &y->stack[--y->depth];
  int rc = n->is_list ? set_list(y->f, n->path, n->list) : 0;
  ynode_free(n);
  return rc;
}

static const char *anchor_of(const yaml_event_t *e) {
  switch (e->type) {
    case YAML_SCALAR_EVENT: return (const char *)e->data.scalar.anchor;
    case YAML_SEQUENCE_START_EVENT: return (const char *)e->data.sequence_start.anchor;
    case YAML_MAPPING_START_EVENT: return (const char *)e->data.mapping_start.anchor;
    default: return NULL;
  }
}

static int yevent(struct yreader *y, const yaml_event_t *e) {
  y->f->line = (int)e->start_mark.line + 1;
  if (e->type == YAML_ALIAS_EVENT || anchor_of(e)) return file_error(y->f, "anchors and aliases are not supported");
  switch (e->type) {
    case YAML_DOCUMENT_START_EVENT:
      return ++y->documents > 1 ? file_error(y->f, "more than one document") : 0;
    case YAML_SCALAR_EVENT: return yscalar(y, e);
    case YAML_MAPPING_START_EVENT: return ystart(y, 0);
    case YAML_SEQUENCE_START_EVENT: return ystart(y, 1);
    case YAML_MAPPING_END_EVENT:
    case YAML_SEQUENCE_END_EVENT: return yend(y);
    default: return 0;
  }
}

static int load_yaml(struct cfg_file *f, FILE *in) {
  yaml_parser_t p;
  if (!yaml_parser_initialize(&p)) return file_error(f, "out of memory");
  yaml_parser_set_input_file(&p, in);
  struct yreader y = {.f = f};
  int rc = 0, done = 0;
  while (!rc && !done) {
    yaml_event_t e;
    if (!yaml_parser_parse(&p, &e)) {
      f->line = (int)p.problem_mark.line + 1;
      rc = file_error(f, "%s%s%s", p.problem ? p.problem : "invalid YAML", p.context ? " " : "",
                      p.context ? p.context : "");
      break;
    }
    rc = yevent(&y, &e);
    done = e.type == YAML_STREAM_END_EVENT;
    yaml_event_delete(&e);
  }
  while (y.depth) ynode_free(&y.stack[--y.depth]);
  yaml_parser_delete(&p);
  return rc;
}

/* ------------------------------------------------------------------ either */

static int has_ext(const char *path, const char *ext) {
  size_t n = strlen(path), e = strlen(ext);
  return n > e && !strcasecmp(path + n - e, ext);
}

int mc_master_cfg_load_file(struct mc_master_cfg *c, const char *path, char *err, size_t errlen) {
  struct cfg_file f = {.c = c, .path = path, .err = err, .errlen = errlen, .line = 0};
  int yaml = has_ext(path, ".yaml") || has_ext(path, ".yml");
  if (!yaml && !has_ext(path, ".json")) {
    snprintf(err, errlen, "Unsupported config file format: %s", path);
    return -1;
  }
  FILE *in = fopen(path, "rb");
  if (!in) return file_error(&f, "cannot read: %s", strerror(errno));
  struct stat st;
  int rc;
  if (fstat(fileno(in), &st) || !S_ISREG(st.st_mode)) rc = file_error(&f, "not a regular file");
  else if ((unsigned long long)st.st_size > FILE_MAX) rc = file_error(&f, "larger than %u bytes", FILE_MAX);
  else rc = yaml ? load_yaml(&f, in) : load_json(&f, in);
  fclose(in);
  return rc;
}
