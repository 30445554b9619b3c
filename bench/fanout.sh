#!/usr/bin/env bash
# fanout.sh [SIZES...] - rex beside pdsh, parallel-ssh, clush and plain parallel ssh on a
# fleet of real loopback sshd hosts (../shared/bench), in one run, medians of REPS.
#
#   rex-cold  a fresh `rex run all-bench -- CMD` process (rexd already on the hosts)
#   rex-warm  a second run in one process (pooled connections, as in the console)
#
# The peers get the key exchange and cipher x/crypto/ssh negotiates (curve25519-sha256,
# aes128-gcm) so the race is fair. Results: bench/results/fanout.md (and .tsv).
#
# Environment: SHARED_BENCH (default ../shared/bench), REPS (default 3),
# CMDS (default "true uname out10mb"), PEERS (default "pdsh pssh clush ssh-par").
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd -P)
SHARED=${SHARED_BENCH:-$ROOT/../shared/bench}
SIZES=("$@")
[[ ${#SIZES[@]} -gt 0 ]] || SIZES=(8 32)
REPS=${REPS:-3}
CMDS=${CMDS:-true uname out10mb}
PEERS=${PEERS:-pdsh pssh clush ssh-par}
export SSH_EXTRA="-o KexAlgorithms=curve25519-sha256 -o Ciphers=aes128-gcm@openssh.com"
WORK=$(mktemp -d /tmp/rexfanout.XXXXXX)
chmod 755 "$WORK" # the fleet's sshd run as another user
FLEET=$WORK/fleet
OUT=$ROOT/bench/results
mkdir -p "$OUT"
trap '"$SHARED/fleet.sh" down "$FLEET" >/dev/null 2>&1 || true; rm -rf "$WORK"' EXIT

declare -A REMOTE=(
	[true]='true'
	[uname]='uname -a'
	[out10mb]="head -c 10000000 /dev/zero | tr '\\0' 'a' | fold -w 100"
)

make -s build
go build -o "$WORK/warm" ./bench/warm
REX=$ROOT/bin/rex
median() { sort -n | awk '{a[NR]=$1} END {if (NR == 0) print "-"; else if (NR % 2) print a[(NR+1)/2]; else printf "%.3f\n", (a[NR/2]+a[NR/2+1])/2}'; }

printf 'size\tcmd\tpeer\twall_s\n' >"$OUT/fanout.tsv"
for n in "${SIZES[@]}"; do
	"$SHARED/fleet.sh" down "$FLEET" >/dev/null 2>&1 || true
	"$SHARED/fleet.sh" up "$FLEET" "$n" >/dev/null
	H=$WORK/home$n
	mkdir -p "$H/.config/rex" "$H/.ssh"
	cp "$FLEET/devices.json" "$H/.config/rex/devices.json"
	cp "$FLEET/known_hosts" "$H/.ssh/known_hosts"
	ENV=(env HOME="$H" XDG_CONFIG_HOME="$H/.config" XDG_CACHE_HOME="$H/.cache" XDG_STATE_HOME="$H/.state")
	"${ENV[@]}" "$REX" device prepare all-bench >/dev/null
	for label in $CMDS; do
		cmd=${REMOTE[$label]}
		for rep in $(seq 1 "$REPS"); do
			PEERS="$PEERS" "$SHARED/peers.sh" "$FLEET" "$cmd" | while read -r peer _ wall rc; do
				[[ $rc == 0 ]] && printf '%s\t%s\t%s\t%s\n' "$n" "$label" "$peer" "$wall" >>"$OUT/fanout.tsv"
			done
			TIMEFORMAT=%3R
			t=$({ time "${ENV[@]}" "$REX" run all-bench -- "$cmd" >/dev/null 2>&1; } 2>&1)
			printf '%s\t%s\trex-cold\t%s\n' "$n" "$label" "$t" >>"$OUT/fanout.tsv"
			"${ENV[@]}" "$WORK/warm" -reps 1 all-bench -- "$cmd" | awk -v n="$n" -v l="$label" '$1 == "warm" {printf "%s\t%s\trex-warm\t%s\n", n, l, $2}' >>"$OUT/fanout.tsv"
		done
		echo "done: $n hosts, $label" >&2
	done
done

{
	echo "Fan-out on loopback sshd hosts, medians of $REPS runs, seconds (lower is better)."
	echo "Peers with SSH_EXTRA=\"$SSH_EXTRA\". $(nproc) cores, $(date -u +%Y-%m-%d)."
	for label in $CMDS; do
		echo
		echo "### $label (\`${REMOTE[$label]}\`)"
		echo
		printf '| peer |'; for n in "${SIZES[@]}"; do printf ' %s hosts |' "$n"; done; echo
		printf '|---|'; for n in "${SIZES[@]}"; do printf -- '---:|'; done; echo
		for peer in rex-cold rex-warm $PEERS; do
			printf '| %s |' "$peer"
			for n in "${SIZES[@]}"; do
				m=$(awk -F'\t' -v n="$n" -v l="$label" -v p="$peer" '$1==n && $2==l && $3==p {print $4}' "$OUT/fanout.tsv" | median)
				printf ' %s |' "$m"
			done
			echo
		done
	done
} >"$OUT/fanout.md"
cat "$OUT/fanout.md"
