/* Configuration table engine (see config.h). Knows option types, not what the options mean. */
#include "common/config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/alloc.h"
#include "common/log.h"
#include "common/util.h"
#include "common/version.h"

#define FIELD(obj, opt, T) ((T *)((char *)(obj) + (opt)->offset))

static const struct mc_cfg_opt *find(const struct mc_cfg_opt *tab, const char *name, size_t len) {
  for (; tab->name; tab++)
    if (strlen(tab->name) == len && !strncmp(tab->name, name, len)) return tab;
  return NULL;
}

static int parse_bool(const char *v, int *out) {
  if (!strcasecmp(v, "1") || !strcasecmp(v, "true") || !strcasecmp(v, "yes") || !strcasecmp(v, "on")) {
    *out = 1;
    return 0;
  }
  if (!strcasecmp(v, "0") || !strcasecmp(v, "false") || !strcasecmp(v, "no") || !strcasecmp(v, "off")) {
    *out = 0;
    return 0;
  }
  return -1;
}

static int out_of_bounds(const struct mc_cfg_opt *o, double v) {
  return o->min <= o->max && (v < o->min || v > o->max);
}

static int set_opt(const struct mc_cfg_opt *o, void *obj, const char *v, char *err, size_t errlen) {
  char *end;
  errno = 0;
  switch (o->type) {
    case MC_CFG_BOOL: {
      int b;
      if (parse_bool(v, &b)) break;
      *FIELD(obj, o, int) = b;
      return 0;
    }
    case MC_CFG_INT: {
      long long x = strtoll(v, &end, 10);
      if (errno || end == v || *end || out_of_bounds(o, (double)x)) break;
      *FIELD(obj, o, int64_t) = x;
      return 0;
    }
    case MC_CFG_DOUBLE: {
      double x = strtod(v, &end);
      if (errno || end == v || *end || out_of_bounds(o, x)) break;
      *FIELD(obj, o, double) = x;
      return 0;
    }
    case MC_CFG_SIZE: {
      uint64_t x;
      if (mc_parse_size(v, &x) || out_of_bounds(o, (double)x)) break;
      *FIELD(obj, o, uint64_t) = x;
      return 0;
    }
    case MC_CFG_STRING:
      mc_free(*FIELD(obj, o, char *));
      *FIELD(obj, o, char *) = mc_strdup(v);
      return 0;
  }
  if (o->min <= o->max && o->type != MC_CFG_BOOL)
    snprintf(err, errlen, "invalid value '%s' for --%s (allowed %g..%g)", v, o->name, o->min, o->max);
  else
    snprintf(err, errlen, "invalid value '%s' for --%s", v, o->name);
  return -1;
}

int mc_cfg_defaults(const struct mc_cfg_opt *tab, void *obj) {
  char err[256];
  for (const struct mc_cfg_opt *o = tab; o->name; o++) {
    if (o->type == MC_CFG_STRING) *FIELD(obj, o, char *) = NULL;
    if (set_opt(o, obj, o->def ? o->def : "", err, sizeof(err)) && o->type != MC_CFG_STRING) {
      LOG_ERROR("bad default for %s: %s", o->name, err);
      abort();
    }
  }
  return 0;
}

int mc_cfg_set(const struct mc_cfg_opt *tab, void *obj, const char *name, const char *value, char *err,
               size_t errlen) {
  const struct mc_cfg_opt *o = find(tab, name, strlen(name));
  if (!o) {
    snprintf(err, errlen, "unknown flag --%s", name);
    return -1;
  }
  return set_opt(o, obj, value, err, errlen);
}

int mc_cfg_json_text(json_t *v, char *buf, size_t len, const char **text) {
  *text = buf;
  if (json_is_string(v)) *text = json_string_value(v);
  else if (json_is_boolean(v)) *text = json_is_true(v) ? "true" : "false";
  else if (json_is_integer(v)) snprintf(buf, len, "%lld", (long long)json_integer_value(v));
  else if (json_is_real(v)) snprintf(buf, len, "%.17g", json_real_value(v));
  else return -1;
  return 0;
}

int mc_cfg_apply_json(const struct mc_cfg_opt *tab, void *obj, json_t *root, char *err, size_t errlen) {
  if (!json_is_object(root)) {
    snprintf(err, errlen, "configuration file must hold a JSON object");
    return -1;
  }
  const char *k;
  json_t *v;
  json_object_foreach(root, k, v) {
    char buf[64];
    const char *text;
    if (mc_cfg_json_text(v, buf, sizeof(buf), &text)) {
      snprintf(err, errlen, "configuration key '%s' has an unsupported type", k);
      return -1;
    }
    if (mc_cfg_set(tab, obj, k, text, err, errlen)) return -1;
  }
  return 0;
}

static int load_config_file(const struct mc_cfg_opt *tab, void *obj, const char *path) {
  json_error_t jerr;
  char err[512];
  json_t *root = json_load_file(path, 0, &jerr);
  if (!root) {
    fprintf(stderr, "cannot read config %s: %s (line %d)\n", path, jerr.text, jerr.line);
    return -1;
  }
  int rc = mc_cfg_apply_json(tab, obj, root, err, sizeof(err));
  json_decref(root);
  if (rc) fprintf(stderr, "config %s: %s\n", path, err);
  return rc;
}

/* -v, -v2, -vN, --v=N, --v N (the last handled by the caller loop). Returns 1 if consumed. */
static int parse_verbosity(const char *a) {
  if (!strcmp(a, "-v")) {
    mc_log_set_verbosity(1);
    return 1;
  }
  if (a[0] == '-' && a[1] == 'v' && a[2] >= '0' && a[2] <= '9') {
    mc_log_set_verbosity(atoi(a + 2));
    return 1;
  }
  if (!strncmp(a, "--v=", 4) || !strncmp(a, "-v=", 3)) {
    mc_log_set_verbosity(atoi(strchr(a, '=') + 1));
    return 1;
  }
  return 0;
}

int mc_cfg_parse_argv(const struct mc_cfg_opt *tab, void *obj, int argc, char **argv, const char *usage,
                      char ***rest) {
  char err[512];
  size_t nrest = 0;
  if (rest) *rest = mc_calloc(argc + 1, sizeof(char *));
  const char *prog = argc > 0 ? argv[0] : "mooncake";
  /* --config_path is applied first so that command-line flags override the file. */
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (!strncmp(a, "--config_path=", 14) && load_config_file(tab, obj, a + 14)) return -1;
    if (!strcmp(a, "--config_path") && i + 1 < argc && load_config_file(tab, obj, argv[++i])) return -1;
  }
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (a[0] != '-' || !a[1]) {
      if (!rest) {
        fprintf(stderr, "%s: unexpected argument '%s'\n", prog, a);
        return -1;
      }
      (*rest)[nrest++] = argv[i];
      continue;
    }
    if (!strcmp(a, "--help") || !strcmp(a, "-h") || !strcmp(a, "-help")) {
      mc_cfg_print_help(tab, prog, usage);
      return 1;
    }
    if (!strcmp(a, "--version") || !strcmp(a, "-version")) {
      const char *base = strrchr(prog, '/');
      printf("%s version %s\n", base ? base + 1 : prog, MC_STORE_VERSION);
      return 1;
    }
    if (parse_verbosity(a)) continue;
    if (!strcmp(a, "--v") && i + 1 < argc) {
      mc_log_set_verbosity(atoi(argv[++i]));
      continue;
    }
    if (!strcmp(a, "--config_path")) {
      i++;
      continue;
    }
    if (!strncmp(a, "--config_path=", 14)) continue;
    const char *name = a + (a[1] == '-' ? 2 : 1);
    const char *eq = strchr(name, '=');
    size_t nlen = eq ? (size_t)(eq - name) : strlen(name);
    const struct mc_cfg_opt *o = find(tab, name, nlen);
    if (!o && !eq && nlen > 2 && !strncmp(name, "no", 2)) {
      const struct mc_cfg_opt *neg = find(tab, name + 2, nlen - 2);
      if (neg && neg->type == MC_CFG_BOOL) {
        *FIELD(obj, neg, int) = 0;
        continue;
      }
    }
    if (!o) {
      fprintf(stderr, "%s: unknown flag '%.*s' (see --help)\n", prog, (int)(nlen + (name - a)), a);
      return -1;
    }
    const char *val;
    if (eq)
      val = eq + 1;
    else if (o->type == MC_CFG_BOOL) {
      int b;
      /* "--flag false" is accepted like gflags' "--flag=false" only for explicit boolean words. */
      if (i + 1 < argc && !parse_bool(argv[i + 1], &b)) val = argv[++i];
      else val = "true";
    } else if (i + 1 < argc)
      val = argv[++i];
    else {
      fprintf(stderr, "%s: flag --%s needs a value\n", prog, o->name);
      return -1;
    }
    if (set_opt(o, obj, val, err, sizeof(err))) {
      fprintf(stderr, "%s: %s\n", prog, err);
      return -1;
    }
  }
  return 0;
}

static const char *type_name(int t) {
  static const char *names[] = {"bool", "int", "double", "string", "size"};
  return names[t];
}

void mc_cfg_print_help(const struct mc_cfg_opt *tab, const char *prog, const char *usage) {
  printf("Usage: %s %s\n\nFlags:\n", prog, usage ? usage : "[flags]");
  for (const struct mc_cfg_opt *o = tab; o->name; o++)
    printf("  --%s (%s)\n      %s\n      default: \"%s\"\n", o->name, type_name(o->type), o->help,
           o->def ? o->def : "");
  printf("  --config_path (string)\n      JSON file with the same keys as these flags\n"
         "  --v (int)\n      log verbosity: 1 info, 2 debug, 3 trace (also -v, -v2)\n");
}

json_t *mc_cfg_to_json(const struct mc_cfg_opt *tab, const void *obj) {
  json_t *r = json_object();
  for (const struct mc_cfg_opt *o = tab; o->name; o++) {
    json_t *v = NULL;
    switch (o->type) {
      case MC_CFG_BOOL: v = json_boolean(*FIELD(obj, o, int)); break;
      case MC_CFG_INT: v = json_integer(*FIELD(obj, o, int64_t)); break;
      case MC_CFG_DOUBLE: v = json_real(*FIELD(obj, o, double)); break;
      case MC_CFG_SIZE: v = json_integer((json_int_t)*FIELD(obj, o, uint64_t)); break;
      case MC_CFG_STRING: {
        char *s = *FIELD(obj, o, char *);
        v = json_string(s ? s : "");
        break;
      }
    }
    json_object_set_new(r, o->name, v);
  }
  return r;
}

void mc_cfg_free(const struct mc_cfg_opt *tab, void *obj) {
  for (const struct mc_cfg_opt *o = tab; o->name; o++)
    if (o->type == MC_CFG_STRING) {
      mc_free(*FIELD(obj, o, char *));
      *FIELD(obj, o, char *) = NULL;
    }
}
