#!/usr/bin/env bash
# fanout.sh [SIZES...] - rex beside pdsh, parallel-ssh, clush and plain parallel ssh on a
# fleet of real loopback sshd hosts (../shared/bench), in one run, medians of REPS.
#
#   rex-first the first `rex run all-bench -- true` on a fresh fleet: rexd uploaded to every
#             host (once per size, `true` only)
#   rex-cold  a fresh `rex run all-bench -- CMD` process (rexd already on the hosts)
#   rex-warm  a second run in one process (pooled connections, as in the console)
#   rex-cpu-s / rex-rss-MB  user+system CPU seconds and peak RSS of the rex-cold process
#
# Then one host streams STREAM_MB MiB (default 256; 0 skips it) of text with `cat FILE` to a file:
# `ssh h1 cat` (same key exchange and cipher) beside `rex run h1 -- cat` and `rex run h1 -N -- cat`
# (no prefix: the same bytes as ssh's), REPS times each,
# medians of MiB/s and of each client's own CPU seconds per 100 MiB of output.
#
# The shared fleet has at most 254 hosts (127.0.1.1-254): a size above is run at 254.
# The open-file limit is raised to the hard limit here, for the peers (rex raises its own).
# The peers get the key exchange and cipher x/crypto/ssh negotiates (curve25519-sha256,
# aes128-gcm) so the race is fair. Results: bench/results/fanout.md (and .tsv).
#
# Environment: SHARED_BENCH (default ../shared/bench), REPS (default 3),
# CMDS (default "true uname out10mb"), PEERS (default "pdsh pssh clush ssh-par"), STREAM_MB,
# and for sizes above 64 hosts REPS_BIG (default REPS) and CMDS_BIG (default CMDS), e.g.
#   REPS_BIG=1 CMDS_BIG="true uname" bench/fanout.sh 8 32 128 256
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd -P)
SHARED=${SHARED_BENCH:-$ROOT/../shared/bench}
SIZES=("$@")
[[ ${#SIZES[@]} -gt 0 ]] || SIZES=(8 32)
REPS=${REPS:-3}
CMDS=${CMDS:-true uname out10mb}
REPS_BIG=${REPS_BIG:-$REPS}
CMDS_BIG=${CMDS_BIG:-$CMDS}
ulimit -n "$(ulimit -Hn)"
for i in "${!SIZES[@]}"; do ((SIZES[i] > 254)) && SIZES[i]=254; done
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
	TIMEFORMAT=%3R
	t=$({ time "${ENV[@]}" "$REX" run all-bench -- true >/dev/null 2>"$WORK/first.err"; } 2>&1) &&
		printf '%s\ttrue\trex-first\t%s\n' "$n" "$t" >>"$OUT/fanout.tsv" ||
		{ echo "first run on $n hosts failed:" >&2; tail -3 "$WORK/first.err" >&2; }
	"${ENV[@]}" "$REX" device prepare all-bench >/dev/null
	cmds=$CMDS reps=$REPS
	((n > 64)) && cmds=$CMDS_BIG reps=$REPS_BIG
	for label in $cmds; do
		cmd=${REMOTE[$label]}
		for rep in $(seq 1 "$reps"); do
			PEERS="$PEERS" "$SHARED/peers.sh" "$FLEET" "$cmd" | while read -r peer _ wall rc; do
				[[ $rc == 0 ]] && printf '%s\t%s\t%s\t%s\n' "$n" "$label" "$peer" "$wall" >>"$OUT/fanout.tsv"
			done
			if /usr/bin/time -f '%e %U %S %M' -o "$WORK/time" "${ENV[@]}" "$REX" run all-bench -- "$cmd" >/dev/null 2>"$WORK/cold.err"; then
				read -r t u sy rss <"$WORK/time"
				printf '%s\t%s\trex-cold\t%s\n' "$n" "$label" "$t" >>"$OUT/fanout.tsv"
				printf '%s\t%s\trex-cpu-s\t%s\n' "$n" "$label" "$(echo "$u + $sy" | bc)" >>"$OUT/fanout.tsv"
				printf '%s\t%s\trex-rss-MB\t%s\n' "$n" "$label" $((rss / 1024)) >>"$OUT/fanout.tsv"
			else
				echo "rex run on $n hosts failed ($label):" >&2
				tail -3 "$WORK/cold.err" >&2
			fi
			"${ENV[@]}" "$WORK/warm" -reps 1 all-bench -- "$cmd" | awk -v n="$n" -v l="$label" '$1 == "warm" {printf "%s\t%s\trex-warm\t%s\n", n, l, $2}' >>"$OUT/fanout.tsv"
		done
		echo "done: $n hosts, $label" >&2
	done
done

# One host, one big stream: the wire's pace, and what each client spends on it.
STREAM_MB=${STREAM_MB:-256}
if ((STREAM_MB > 0)); then
	"$SHARED/fleet.sh" down "$FLEET" >/dev/null 2>&1 || true
	"$SHARED/fleet.sh" up "$FLEET" 1 >/dev/null
	H=$WORK/home-stream
	mkdir -p "$H/.config/rex" "$H/.ssh"
	cp "$FLEET/devices.json" "$H/.config/rex/devices.json"
	cp "$FLEET/known_hosts" "$H/.ssh/known_hosts"
	ENV=(env HOME="$H" XDG_CONFIG_HOME="$H/.config" XDG_CACHE_HOME="$H/.cache" XDG_STATE_HOME="$H/.state")
	"${ENV[@]}" "$REX" device prepare h1 >/dev/null
	BIG=$WORK/stream.txt
	# yes ends on SIGPIPE when head has enough: not a failure here.
	(
		set +o pipefail
		yes "2026-11-22T10:00:00Z host-17 service[1234]: request handled in 12ms status=200 path=/api/v1/items" |
			head -c $((STREAM_MB << 20)) >"$BIG"
	)
	chmod 644 "$BIG"
	printf 'client\tMB_s\tcpu_s_per_100MB\n' >"$OUT/stream.tsv"
	# record CLIENT CMD...: one run to $WORK/stream.out, its MB/s and CPU per 100 MB.
	record() {
		local client=$1
		shift
		/usr/bin/time -f '%e %U %S' -o "$WORK/time" "$@" >"$WORK/stream.out" 2>"$WORK/stream.err" || {
			echo "$client: stream failed:" >&2
			tail -3 "$WORK/stream.err" >&2
			return
		}
		read -r t u sy <"$WORK/time"
		printf '%s\t%s\t%s\n' "$client" "$(echo "scale=1; $STREAM_MB / $t" | bc)" \
			"$(echo "scale=3; ($u + $sy) * 100 / $STREAM_MB" | bc)" >>"$OUT/stream.tsv"
		rm -f "$WORK/stream.out"
	}
	for rep in $(seq 1 "$REPS"); do
		# shellcheck disable=SC2086
		record ssh ssh -F "$FLEET/ssh_config" $SSH_EXTRA -n h1 cat "$BIG"
		record rex "${ENV[@]}" "$REX" run h1 -- cat "$BIG"
		# -N: the same bytes as ssh writes, no "h1: " before each line.
		record rex-N "${ENV[@]}" "$REX" run h1 -N -- cat "$BIG"
	done
	echo "done: one host, $STREAM_MB MiB" >&2
fi

{
	echo "Fan-out on loopback sshd hosts, medians of $REPS runs, seconds (lower is better)."
	echo "Peers with SSH_EXTRA=\"$SSH_EXTRA\". $(nproc) cores, $(date -u +%Y-%m-%d), load at the end $(cut -d' ' -f1-3 /proc/loadavg)."
	echo "Above 64 hosts: REPS_BIG=$REPS_BIG, CMDS_BIG=\"$CMDS_BIG\" (- where not run)."
	for label in $CMDS; do
		echo
		echo "### $label (\`${REMOTE[$label]}\`)"
		echo
		printf '| peer |'; for n in "${SIZES[@]}"; do printf ' %s hosts |' "$n"; done; echo
		printf '|---|'; for n in "${SIZES[@]}"; do printf -- '---:|'; done; echo
		for peer in rex-first rex-cold rex-warm $PEERS rex-cpu-s rex-rss-MB; do
			[[ $peer == rex-first && $label != true ]] && continue
			printf '| %s |' "$peer"
			for n in "${SIZES[@]}"; do
				m=$(awk -F'\t' -v n="$n" -v l="$label" -v p="$peer" '$1==n && $2==l && $3==p {print $4}' "$OUT/fanout.tsv" | median)
				printf ' %s |' "$m"
			done
			echo
		done
	done
	if ((STREAM_MB > 0)); then
		echo
		echo "### one host, \`cat\` of $STREAM_MB MiB of text to a file (medians of $REPS)"
		echo
		echo "| client | MiB/s | own CPU s per 100 MiB |"
		echo "|---|---:|---:|"
		for client in ssh rex rex-N; do
			mbs=$(awk -F'\t' -v c="$client" '$1==c {print $2}' "$OUT/stream.tsv" | median)
			cpu=$(awk -F'\t' -v c="$client" '$1==c {print $3}' "$OUT/stream.tsv" | median)
			echo "| $client | $mbs | $cpu |"
		done
	fi
} >"$OUT/fanout.md"
cat "$OUT/fanout.md"
