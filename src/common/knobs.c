/* The table of environment variables (knobs.h) and its readers. */
#include "common/knobs.h"

#include <stdlib.h>

#include "common/util.h"

#define MC_KNOB_INFO_(name, kind, def, min, max, shown, doc) \
  {"MC_" #name, MC_KNOB_KIND_##kind, (long)(def), (long)(min), (long)(max), shown, doc},
static const struct mc_knob_info table[] = {MC_KNOBS(MC_KNOB_INFO_)};
#undef MC_KNOB_INFO_

const struct mc_knob_info *mc_knob_info(enum mc_knob k) { return k < MC_KNOB_COUNT ? &table[k] : NULL; }

long mc_knob_long_or(enum mc_knob k, long def) {
  const struct mc_knob_info *i = &table[k];
  return mc_env_long(i->name, def, i->min, i->max);
}

long mc_knob_long(enum mc_knob k) { return mc_knob_long_or(k, table[k].def); }

int mc_knob_bool(enum mc_knob k) { return mc_env_bool(table[k].name, (int)table[k].def); }

const char *mc_knob_str(enum mc_knob k) {
  const char *v = getenv(table[k].name);
  return v && *v ? v : NULL;
}
