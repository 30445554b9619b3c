#!/usr/bin/env bash
# startup.sh REX [REX...] - the fixed cost of one rex process, for each rex binary given
# (e.g. one built from an older commit and one from this one), on HOSTS (8) loopback sshd
# hosts (../shared/bench): medians of R (7) runs, in seconds, of
#   local   rex run local -- true
#   h1      rex run h1 -- true          (rexd cached on h1)
#   all     rex run all-bench -- true   (8 hosts)
#   push    rex push of 200 small files to all-bench, unchanged
#   one     the same after one file changed
# Pass binaries with no rexd beside them (a bin/rex next to bin/rexd runs that one for
# `local`). Results: bench/results/startup.md.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd -P)
SHARED=${SHARED_BENCH:-$(cd "$(git rev-parse --git-common-dir)/../.." && pwd -P)/shared/bench}
[[ -x $SHARED/fleet.sh ]] || { echo "startup.sh: no fleet.sh in $SHARED; set SHARED_BENCH" >&2; exit 1; }
(($#)) || { sed -n '2,11p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
N=${HOSTS:-8}
R=${R:-7}
export FLEET_PORT=${FLEET_PORT:-2431}
WORK=$(mktemp -d /tmp/rexstartup.XXXXXX)
chmod 755 "$WORK"
FLEET=$WORK/fleet
OUT=$ROOT/bench/results
mkdir -p "$OUT"
trap '"$SHARED/fleet.sh" down "$FLEET" >/dev/null 2>&1 || true; rm -rf "$WORK"' EXIT
"$SHARED/fleet.sh" up "$FLEET" "$N" >/dev/null
H=$WORK/home
mkdir -p "$H/.config/rex" "$H/.ssh"
cp "$FLEET/devices.json" "$H/.config/rex/devices.json"
cp "$FLEET/known_hosts" "$H/.ssh/known_hosts"
ENV=(env HOME="$H" XDG_CONFIG_HOME="$H/.config" XDG_CACHE_HOME="$H/.cache" XDG_STATE_HOME="$H/.state")
SRC=$WORK/src
mkdir -p "$SRC"
for i in $(seq 1 200); do head -c 2000 /dev/urandom >"$SRC/f$i"; done
chmod -R a+rX "$SRC"
for b in "$@"; do
	"${ENV[@]}" "$b" device prepare all-bench >/dev/null
	"${ENV[@]}" "$b" push "$SRC" pushed all-bench >/dev/null
done
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
secs() { local s e; s=$(date +%s%N); "$@" >/dev/null 2>&1 || echo "startup.sh: failed: $*" >&2; e=$(date +%s%N); echo "scale=3; ($e - $s) / 1000000000" | bc; }
LOAD0=$(cut -d' ' -f1-3 /proc/loadavg)
{
	echo "| step | $(printf '%s | ' "$@")"
	echo "|---|$(printf -- '---:|%.0s' "$@")"
	for step in local h1 all push one; do
		row="| $step |"
		for b in "$@"; do
			m=$(for r in $(seq 1 "$R"); do
				case $step in
				local) secs "${ENV[@]}" "$b" run local -- true ;;
				h1) secs "${ENV[@]}" "$b" run h1 -- true ;;
				all) secs "${ENV[@]}" "$b" run all-bench -- true ;;
				push) secs "${ENV[@]}" "$b" push "$SRC" pushed all-bench ;;
				one) head -c 2000 /dev/urandom >"$SRC/f1"; secs "${ENV[@]}" "$b" push "$SRC" pushed all-bench ;;
				esac
			done | median)
			row+=" $m |"
		done
		echo "$row"
	done
	echo
	echo "$N hosts, medians of $R runs, seconds; $(nproc) cores, $(date -u +%Y-%m-%d);"
	echo "load average (1, 5, 15 min) $LOAD0 at the start, $(cut -d' ' -f1-3 /proc/loadavg) at the end."
} | tee "$OUT/startup.md"
