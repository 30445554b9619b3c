#!/usr/bin/env bash
# wan.sh [RTT_MS] [HOSTS] - cold start behind added round-trip time (../shared/bench/wan.sh):
# one host, `ssh h1 true` beside a cold `rex run h1 -- true` (REPS each, medians), then
# HOSTS hosts with rex beside pdsh, pssh and bare parallel ssh. The difference on one host,
# divided by the RTT, is the round trips rex pays beyond ssh; a first contact with h1 (its
# rexd cache removed) times the upload; `rex --version` times the rex
# process's own start-up (package initialisers) apart. REX_BEFORE=BINARY adds a cold run of
# another rex build (e.g. an earlier commit's bin/rex) to every round. Results:
# bench/results/wan.md. CMD (default: true) is the command every cold run, ssh and the peers
# run, split on spaces (e.g. CMD="uname -a"); the first contact runs true.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd -P)
SHARED=${SHARED_BENCH:-$ROOT/../shared/bench}
RTT=${1:-50}
N=${2:-16}
REPS=${REPS:-5}
read -r -a CMDV <<<"${CMD:-true}"
WORK=$(mktemp -d /tmp/rexwan.XXXXXX)
chmod 755 "$WORK"
FLEET=$WORK/fleet WAN=$WORK/wan OUT=$ROOT/bench/results
mkdir -p "$OUT"
trap '"$SHARED/wan.sh" down "$WAN" >/dev/null 2>&1 || true; "$SHARED/fleet.sh" down "$FLEET" >/dev/null 2>&1 || true; rm -rf "$WORK"' EXIT
export SSH_EXTRA="-o KexAlgorithms=curve25519-sha256 -o Ciphers=aes128-gcm@openssh.com"
make -s build
REX=$ROOT/bin/rex
"$SHARED/fleet.sh" up "$FLEET" "$N" >/dev/null
"$SHARED/wan.sh" up "$FLEET" "$WAN" "$RTT" >/dev/null
H=$WORK/home
mkdir -p "$H/.config/rex" "$H/.ssh"
cp "$WAN/devices.json" "$H/.config/rex/devices.json"
cp "$WAN/known_hosts" "$H/.ssh/known_hosts"
ENV=(env HOME="$H" XDG_CONFIG_HOME="$H/.config" XDG_CACHE_HOME="$H/.cache" XDG_STATE_HOME="$H/.state")
"${ENV[@]}" "$REX" device prepare all-bench >/dev/null
[[ -z ${REX_BEFORE:-} ]] || "${ENV[@]}" "$REX_BEFORE" device prepare all-bench >/dev/null
median() { sort -n | awk '{a[NR]=$1} END {if (NR % 2) print a[(NR+1)/2]; else printf "%.3f\n", (a[NR/2]+a[NR/2+1])/2}'; }
TIMEFORMAT=%3R
ssh1=() rex1=() rexN=() peers=() vers=() before=() first1=() bfirst1=()
# first BINARY: a first contact with h1 (its rexd cache and rex's stamps removed). The
# stamps of the other hosts go with the file, so an untimed run stamps them again: the
# cold runs that follow must find what a cold run finds, not a first contact of 15 hosts.
first() {
	rm -rf "$FLEET/h1/home/.cache/rexd" "$H/.cache/rex/rexd-stamps.json"
	{ time "${ENV[@]}" "$1" run h1 -- true >/dev/null 2>&1; } 2>&1
	"${ENV[@]}" "$1" run all-bench -- true >/dev/null 2>&1
}
for _ in $(seq 1 "$REPS"); do
	vers+=("$({ time "$REX" --version >/dev/null 2>&1; } 2>&1)")
	# shellcheck disable=SC2086
	ssh1+=("$({ time ssh -F "$WAN/ssh_config" $SSH_EXTRA -n h1 "${CMDV[@]}" >/dev/null; } 2>&1)")
	# Each build's cold runs follow its own first contact: a first contact removes h1's
	# whole rexd cache, the other build's copy with it, and the stamps of both.
	first1+=("$(first "$REX")")
	rex1+=("$({ time "${ENV[@]}" "$REX" run h1 -- "${CMDV[@]}" >/dev/null 2>&1; } 2>&1)")
	rexN+=("$({ time "${ENV[@]}" "$REX" run all-bench -- "${CMDV[@]}" >/dev/null 2>&1; } 2>&1)")
	if [[ -n ${REX_BEFORE:-} ]]; then
		bfirst1+=("$(first "$REX_BEFORE")")
		before+=("$({ time "${ENV[@]}" "$REX_BEFORE" run h1 -- "${CMDV[@]}" >/dev/null 2>&1; } 2>&1)")
	fi
	peers+=("$(PEERS="pdsh pssh ssh-par" "$SHARED/peers.sh" "$WAN" "${CMDV[@]}")")
done
{
	echo "Cold start behind +$RTT ms RTT (latency-proxy), \`${CMDV[*]}\`, medians of $REPS, seconds; $(nproc) cores, $(date -u +%Y-%m-%d), load $(cut -d' ' -f1-3 /proc/loadavg)."
	echo
	echo "| case | seconds |"
	echo "|---|---:|"
	s=$(printf '%s\n' "${ssh1[@]}" | median) r=$(printf '%s\n' "${rex1[@]}" | median)
	echo "| \`ssh h1 ${CMDV[*]}\` | $s |"
	echo "| \`rex run h1 -- ${CMDV[*]}\` (cold) | $r |"
	awk -v s="$s" -v r="$r" -v rtt="$RTT" 'BEGIN {printf "| rex - ssh, in round trips | %.1f |\n", (r - s) * 1000 / rtt}'
	[[ -z ${REX_BEFORE:-} ]] || echo "| REX_BEFORE \`rex run h1 -- true\` (cold) | $(printf '%s\n' "${before[@]}" | median) |"
	echo "| \`rex run h1 -- true\`, first contact (rexd uploaded) | $(printf '%s\n' "${first1[@]}" | median) |"
	[[ -z ${REX_BEFORE:-} ]] || echo "| REX_BEFORE, first contact | $(printf '%s\n' "${bfirst1[@]}" | median) |"
	echo "| \`rex --version\` (the process's own start-up) | $(printf '%s\n' "${vers[@]}" | median) |"
	echo "| rex cold, $N hosts | $(printf '%s\n' "${rexN[@]}" | median) |"
	for p in pdsh pssh ssh-par; do
		echo "| $p, $N hosts | $(printf '%s\n' "${peers[@]}" | awk -v p="$p" '$1 == p && $4 == 0 {print $3}' | median) |"
	done
} >"$OUT/wan.md"
cat "$OUT/wan.md"
