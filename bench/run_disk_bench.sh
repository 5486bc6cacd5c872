#!/usr/bin/env bash
# The local-disk object store (bench/disk_bench.c) beside fio on the same directory, block size and thread
# count: put (durable per object) against fio's O_DIRECT sequential writes with an fdatasync after every
# block, get against fio's O_DIRECT random reads at queue depth 1 per thread (one get at a time per thread).
#   bench/run_disk_bench.sh [BUILD_DIR] [DIR]     (DIR: a directory on the file system to measure; /var/tmp)
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
B=${1:-build}
PARENT=${2:-/var/tmp}
THREADS=${THREADS:-4}
need_cmds fio
cmake --build "$B" --target disk_bench >/dev/null
need_bins "$B" "$B/tools/disk_bench"
WORK=$(mktemp -d "$PARENT/mc_disk_bench.XXXXXX")
trap 'rm -rf "$WORK"' EXIT

fio_mbps() { # fio_mbps RW BS SIZE_PER_JOB EXTRA...: the aggregate MB/s (10^6) of an fio run in $WORK/fio
  local rw=$1 bs=$2 size=$3
  shift 3
  mkdir -p "$WORK/fio"
  fio --name=ref --directory="$WORK/fio" --rw="$rw" --bs="$bs" --size="$size" --numjobs="$THREADS" \
      --direct=1 --ioengine=io_uring --iodepth=1 --group_reporting --output-format=json "$@" |
    python3 -c 'import json,sys; j=json.load(sys.stdin)["jobs"][0]
print("%.1f" % ((j["read"]["bw_bytes"] + j["write"]["bw_bytes"]) / 1e6))'
}

for spec in "64KiB 2048" "1MiB 256"; do
  set -- $spec
  size=$1 n=$2
  rm -rf "$WORK/store" "$WORK/fio"
  out=$(MC_LOG_LEVEL=ERROR "$B/tools/disk_bench" "$WORK/store" "$size" "$n" "$THREADS")
  echo "$out"
  per_job=$(python3 -c "import sys; s={'64KiB':65536,'1MiB':1048576}['$size']; print(s*$n//$THREADS)")
  fw=$(fio_mbps write "${size%iB}" "$per_job" --fdatasync=1)
  fr=$(fio_mbps randread "${size%iB}" "$per_job")
  pw=$(echo "$out" | awk '/op=put/ {split($6,a,"="); print a[2]}')
  pg=$(echo "$out" | awk '/op=get/ {split($6,a,"="); print a[2]}')
  echo "FIO size=$size threads=$THREADS write_fdatasync_MBps=$fw randread_qd1_MBps=$fr"
  python3 -c "print('RATIO size=$size put/fio_write=%.2f get/fio_read=%.2f' % ($pw/$fw, $pg/$fr))"
done
