"""Helpers shared by mooncake.store and mooncake.engine: pybind11-like enums and size strings."""

import enum
import re


class PybindEnum(enum.IntEnum):
    """An IntEnum that also answers `.value`/`.name`/`int()` like pybind11 enums."""

    def __str__(self):
        return "%s.%s" % (type(self).__name__, self.name)


_UNITS = {"": 1, "B": 1, "K": 1 << 10, "KB": 1 << 10, "M": 1 << 20, "MB": 1 << 20,
          "G": 1 << 30, "GB": 1 << 30, "T": 1 << 40, "TB": 1 << 40}
_SIZE_RE = re.compile(r"^([0-9]+(?:\.[0-9]*)?|\.[0-9]+)\s*([A-Za-z]*)$")


def parse_size(text):
    """A size string ("16MB", "1.5 GB", "infinite", "4096") in bytes; None when malformed."""
    s = str(text).strip()
    if s.lower() == "infinite":
        return (1 << 64) - 1
    m = _SIZE_RE.match(s)
    if not m or m.group(2).upper() not in _UNITS:
        return None
    v = int(float(m.group(1)) * _UNITS[m.group(2).upper()]) if "." in m.group(1) \
        else int(m.group(1)) * _UNITS[m.group(2).upper()]
    return v if v < (1 << 64) else None


_TRUE = {"1", "true", "yes", "on", "enable"}
_FALSE = {"0", "false", "no", "off", "disable"}


def parse_bool(text, default):
    """A bool from "1/0, true/false, yes/no, on/off, enable/disable" (any case); default otherwise."""
    s = str(text).strip().lower()
    if s in _TRUE:
        return True
    if s in _FALSE:
        return False
    return default
