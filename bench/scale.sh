#!/usr/bin/env bash
# scale.sh [HOSTS] - what one rex process costs per host, as inputs for docs/scale.md:
# a cold `rex run --concurrency HOSTS all-bench -- BARRIER` where every host's command waits
# until all have started, so that every connection is open at once. Prints rex's wall time,
# CPU seconds (user+sys) and peak RSS, per host too. Default 254 (the shared fleet's most).
# CONNECT_TIMEOUT (default 120s) is given to every rex: 254 bootstraps at once on the 2
# shared cores of this machine outlast rex's default 10 s (the last run lost 130 hosts so).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd -P)
SHARED=${SHARED_BENCH:-$ROOT/../shared/bench}
N=${1:-254}
CT=${CONNECT_TIMEOUT:-120s}
WORK=$(mktemp -d /tmp/rexscale.XXXXXX)
chmod 755 "$WORK"
FLEET=$WORK/fleet
trap '"$SHARED/fleet.sh" down "$FLEET" >/dev/null 2>&1 || true; rm -rf "$WORK"' EXIT
ulimit -n "$(ulimit -Hn)"
make -s build
REX=$ROOT/bin/rex
"$SHARED/fleet.sh" up "$FLEET" "$N" >/dev/null
H=$WORK/home
mkdir -p "$H/.config/rex" "$H/.ssh" "$WORK/barrier"
chmod 1777 "$WORK/barrier"
cp "$FLEET/devices.json" "$H/.config/rex/devices.json"
cp "$FLEET/known_hosts" "$H/.ssh/known_hosts"
ENV=(env HOME="$H" XDG_CONFIG_HOME="$H/.config" XDG_CACHE_HOME="$H/.cache" XDG_STATE_HOME="$H/.state")
"${ENV[@]}" "$REX" device prepare --connect-timeout "$CT" all-bench >/dev/null 2>"$WORK/prepare.err" || { echo "device prepare failed:"; tail -5 "$WORK/prepare.err"; }
B=$WORK/barrier
barrier="touch $B/\$REX_TARGET; i=0; while [ \$(ls $B | wc -l) -lt $N ] && [ \$i -lt 1200 ]; do i=\$((i+1)); sleep 0.1; done"
run() { # label, args...
	local label=$1
	shift
	/usr/bin/time -f '%e %U %S %M' -o "$WORK/time" "${ENV[@]}" "$REX" run --connect-timeout "$CT" all-bench "$@" >/dev/null 2>"$WORK/err" || { tail -3 "$WORK/err" >&2; echo "| $label | $N | failed: $(grep -c . "$WORK/err") lines of errors, the last: $(tail -1 "$WORK/err") |"; return 0; }
	read -r wall u s rss <"$WORK/time"
	awk -v l="$label" -v n="$N" -v w="$wall" -v c="$(echo "$u + $s" | bc)" -v r="$rss" \
		'BEGIN {printf "| %s | %d | %.2f | %.2f | %.1f | %.0f | %.0f |\n", l, n, w, c, 1000*c/n, r/1024, r/n}'
}
echo "$(nproc) cores, $(date -u +%Y-%m-%d), load $(cut -d' ' -f1-3 /proc/loadavg)"
echo
echo "| run | hosts | wall s | rex CPU s | CPU ms/host | peak RSS MB | RSS KB/host |"
echo "|---|---:|---:|---:|---:|---:|---:|"
run "every connection open at once (--concurrency $N, barrier)" --concurrency "$N" -- "$barrier"
rm -f "$B"/*
run "true, --concurrency $N" --concurrency "$N" -- true
run "true, default --concurrency 64" -- true
