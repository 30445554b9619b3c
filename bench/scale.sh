#!/usr/bin/env bash
# scale.sh [HOSTS] - what one rex process costs per host, as inputs for docs/scale.md:
# a cold `rex run --concurrency HOSTS all-bench -- BARRIER` where every host's command waits
# until all have started, so that every connection is open at once. Prints rex's wall time,
# CPU seconds (user+sys) and peak RSS, per host too. Default 254 (the shared fleet's most).
# CONNECT_TIMEOUT (default 120s) is given to every rex: 254 bootstraps at once on the 2
# shared cores of this machine outlast rex's default 10 s (the last run lost 130 hosts so).
#
# FIRST=R bench/scale.sh HOSTS measures first contact instead, R times: every host's rexd
# cache and rex's stamps are removed, then `rex run all-bench -- true` (the first run,
# uploading rexd everywhere), a second one (a later cold run), and pdsh and plain parallel
# ssh running `true` in the same round; medians, and first / cold. REX_BEFORE=BINARY adds
# the same two runs of another rex build (e.g. an earlier commit's bin/rex) to every round.
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
[[ -n ${FIRST:-} ]] || "${ENV[@]}" "$REX" device prepare --connect-timeout "$CT" all-bench >/dev/null 2>"$WORK/prepare.err" || { echo "device prepare failed:"; tail -5 "$WORK/prepare.err"; }
if [[ -n ${FIRST:-} ]]; then
	median() { sort -n | awk '{a[NR]=$1} END {if (NR == 0) print "-"; else if (NR % 2) print a[(NR+1)/2]; else printf "%.3f\n", (a[NR/2]+a[NR/2+1])/2}'; }
	TIMEFORMAT=%3R
	first=() cold=() bfirst=() bcold=() peers=()
	load0=$(cut -d' ' -f1-3 /proc/loadavg)
	wipe() { rm -rf "$FLEET"/h*/home/.cache/rexd "$H/.cache/rex/rexd-stamps.json"; }
	t() { { time "${ENV[@]}" "$1" run --connect-timeout "$CT" all-bench -- true >/dev/null 2>>"$WORK/err"; } 2>&1; }
	for _ in $(seq 1 "$FIRST"); do
		wipe
		first+=("$(t "$REX")")
		cold+=("$(t "$REX")")
		if [[ -n ${REX_BEFORE:-} ]]; then
			wipe
			bfirst+=("$(t "$REX_BEFORE")")
			bcold+=("$(t "$REX_BEFORE")")
		fi
		peers+=("$(PEERS="pdsh ssh-par" "$SHARED/peers.sh" "$FLEET" true)")
	done
	f=$(printf '%s\n' "${first[@]}" | median) c=$(printf '%s\n' "${cold[@]}" | median)
	echo "First contact at $N hosts, medians of $FIRST, seconds; $(nproc) cores, $(date -u +%Y-%m-%d), load $load0 at the start, $(cut -d' ' -f1-3 /proc/loadavg) at the end."
	echo
	echo "| run | seconds |"
	echo "|---|---:|"
	echo "| rex first run (rexd uploaded) | $f (all: ${first[*]}) |"
	echo "| rex later cold run | $c (all: ${cold[*]}) |"
	awk -v f="$f" -v c="$c" 'BEGIN {printf "| first / cold | %.2f |\n", f / c}'
	if [[ -n ${REX_BEFORE:-} ]]; then
		f=$(printf '%s\n' "${bfirst[@]}" | median) c=$(printf '%s\n' "${bcold[@]}" | median)
		echo "| REX_BEFORE first run | $f (all: ${bfirst[*]}) |"
		echo "| REX_BEFORE later cold run | $c (all: ${bcold[*]}) |"
		awk -v f="$f" -v c="$c" 'BEGIN {printf "| REX_BEFORE first / cold | %.2f |\n", f / c}'
	fi
	for p in pdsh ssh-par; do
		echo "| $p \`true\` | $(printf '%s\n' "${peers[@]}" | awk -v p="$p" '$1 == p && $4 == 0 {print $3}' | median) |"
	done
	grep -qv ' ok in ' "$WORK/err" 2>/dev/null && { echo; echo "rex said: $(grep -v ' ok in ' "$WORK/err" | sort | uniq -c | sort -rn | head -3)"; }
	exit 0
fi
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
