/* One configuration table per binary drives the command line (gflags syntax), the --config_path
 * JSON file, --help, and the JSON dump of the effective configuration. */
#ifndef MC_CONFIG_H
#define MC_CONFIG_H
#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

enum mc_cfg_type {
  MC_CFG_BOOL,   /* int: 0/1; "--flag", "--flag=true", "--noflag" */
  MC_CFG_INT,    /* int64_t, bounded by min/max */
  MC_CFG_DOUBLE, /* double, bounded by min/max */
  MC_CFG_STRING, /* char * (owned by the object, freed by mc_cfg_free) */
  MC_CFG_SIZE,   /* uint64_t; accepts "512MB", "1GiB", "4096" */
};

struct mc_cfg_opt {
  const char *name;
  int type;
  const char *def; /* default as text */
  double min, max; /* bounds for INT/DOUBLE/SIZE (ignored when min > max) */
  size_t offset;   /* offsetof(target struct, field) */
  const char *help;
};

#define MC_CFG_END {NULL, 0, NULL, 0, 0, 0, NULL}

/* Sets every field to its default. Returns 0. */
int mc_cfg_defaults(const struct mc_cfg_opt *tab, void *obj);
/* Sets one option from text. Returns 0, or -1 with a message in err. */
int mc_cfg_set(const struct mc_cfg_opt *tab, void *obj, const char *name, const char *value, char *err,
               size_t errlen);
/* The text of a JSON scalar (string, boolean, number) as mc_cfg_set takes it: *text points into v or
 * into buf. Returns -1 for null, arrays and objects. */
int mc_cfg_json_text(json_t *v, char *buf, size_t len, const char **text);
/* Applies a JSON object of {name: value} (from --config_path). Unknown keys are errors. */
int mc_cfg_apply_json(const struct mc_cfg_opt *tab, void *obj, json_t *root, char *err, size_t errlen);
/* Parses argv in gflags syntax: --name=value, --name value, -name=value, bare booleans, --noname.
 * Also understood: --help (prints help, returns 1), --config_path=FILE (JSON), --v=N / -v / -vN
 * (log verbosity). Positional arguments are collected in *rest (NULL-terminated, caller frees the
 * array) when rest is non-NULL, otherwise they are errors.
 * --help prints the flags, --version the program's name and MC_STORE_VERSION (common/version.h).
 * Returns 0 ok, 1 help or version printed (caller exits 0), -1 error printed on stderr (caller exits 1). */
int mc_cfg_parse_argv(const struct mc_cfg_opt *tab, void *obj, int argc, char **argv, const char *usage,
                      char ***rest);
void mc_cfg_print_help(const struct mc_cfg_opt *tab, const char *prog, const char *usage);
/* The effective configuration as a JSON object (new reference). */
json_t *mc_cfg_to_json(const struct mc_cfg_opt *tab, const void *obj);
/* Frees string fields. */
void mc_cfg_free(const struct mc_cfg_opt *tab, void *obj);

#endif
