#!/usr/bin/env bash
# gather.sh [HOSTS] [MB] - peak RSS of `rex run --gather` over HOSTS loopback
# sshd hosts (../shared/bench) that each print MB megabytes of text: once the
# same text on every host (what --gather is for), once text that differs per
# host (every line names its host). The goal is < 1.5 GB at 64 hosts x 20 MB.
# Results: bench/results/gather.md.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd -P)
SHARED=${SHARED_BENCH:-$ROOT/../shared/bench}
N=${1:-64}
MB=${2:-20}
WORK=$(mktemp -d /tmp/rexgather.XXXXXX)
chmod 755 "$WORK"
FLEET=$WORK/fleet
OUT=$ROOT/bench/results
mkdir -p "$OUT"
trap '"$SHARED/fleet.sh" down "$FLEET" >/dev/null 2>&1 || true; rm -rf "$WORK"' EXIT
ulimit -n "$(ulimit -Hn)"

make -s build
REX=$ROOT/bin/rex
"$SHARED/fleet.sh" up "$FLEET" "$N" >/dev/null
H=$WORK/home
mkdir -p "$H/.config/rex" "$H/.ssh"
cp "$FLEET/devices.json" "$H/.config/rex/devices.json"
cp "$FLEET/known_hosts" "$H/.ssh/known_hosts"
ENV=(env HOME="$H" XDG_CONFIG_HOME="$H/.config" XDG_CACHE_HOME="$H/.cache" XDG_STATE_HOME="$H/.state")
"${ENV[@]}" "$REX" device prepare all-bench >/dev/null

bytes=$((MB * 1000000))
declare -A CMD=(
	[same]="seq 1 100000000 | head -c $bytes"
	[distinct]="seq 1 100000000 | sed \"s/^/\$REX_TARGET /\" | head -c $bytes"
)
{
	echo "\`rex run --gather\` over $N hosts x $MB MB of output each; $(nproc) cores, $(date -u +%Y-%m-%d), load $(cut -d' ' -f1-3 /proc/loadavg)."
	echo
	echo "| output | wall s | rex CPU s (user+sys) | rex peak RSS MB | groups |"
	echo "|---|---:|---:|---:|---:|"
} >"$OUT/gather.md"
for kind in same distinct; do
	/usr/bin/time -f '%e %U %S %M' -o "$WORK/time" "${ENV[@]}" "$REX" run all-bench --gather -- "${CMD[$kind]}" >"$WORK/out" 2>"$WORK/err" || { cat "$WORK/err" >&2; exit 1; }
	read -r wall user sys rss <"$WORK/time"
	groups=$(grep -c '^h.* ([0-9]*)$' "$WORK/out" || true)
	printf '| %s | %s | %.2f | %d | %s |\n' "$kind" "$wall" "$(echo "$user + $sys" | bc)" $((rss / 1024)) "$groups" >>"$OUT/gather.md"
done
cat "$OUT/gather.md"
