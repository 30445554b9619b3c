#!/usr/bin/env bash
# push.sh [HOSTS] - `rex push` beside rsync (one `rsync -a` per host, all at once) on a fleet
# of real loopback sshd hosts (../shared/bench), in one run, four steps:
#   first        a first push of FILES files totalling MB megabytes
#   unchanged    the same again, nothing changed
#   one-changed  after one file changed
#   other-dir    the same tree to another directory of hosts that already hold it
# rex runs every step as a new `rex push` process (cold: it dials every host). The unchanged
# and one-changed steps are also timed as later pushes of one process (warm: pooled
# connections, as the console's /push runs them; bench/pushwarm). rsync gets the key exchange
# and cipher x/crypto/ssh negotiates. Medians of REPS runs go to bench/results/push.md, with
# the file bytes each tool put on the wire in the other-dir step.
#
# Each rep gets a fleet of new hosts and a new client home, and nothing is deleted before the
# end. On ext4 without a journal (as on this machine) a new inode skips every inode freed in
# the last 60 s, or 360 s once its inode table block is dirty again (fs/ext4/ialloc.c,
# recently_deleted), and reads each one's table block. A first push 70 s after the previous
# rep's trees were removed spent a third of the machine's CPU in that scan (perf), and rsync,
# which ran later, a tenth. Run it 6 minutes or more after deleting big trees.
#
# Environment: SHARED_BENCH (default: shared/bench beside the main checkout), FILES (10000),
# MB (100), REPS (3), FLEET_PORT (2422, so the fleet does not meet another on the default port),
# WARM (5: warm pushes timed per step and rep), PUSHWARM_BEFORE (a pushwarm built from another
# commit, e.g. `go build -o /tmp/pw-old ./bench/pushwarm` in its checkout: its warm steps are
# timed too, in the same reps, as tool rex-warm-before).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd -P)
# shared/bench sits beside the main checkout, also when this is a worktree of it.
SHARED=${SHARED_BENCH:-$(cd "$(git rev-parse --git-common-dir)/../.." && pwd -P)/shared/bench}
[[ -x $SHARED/fleet.sh ]] || { echo "push.sh: no fleet.sh in $SHARED; set SHARED_BENCH" >&2; exit 1; }
N=${1:-8}
FILES=${FILES:-10000}
MB=${MB:-100}
REPS=${REPS:-3}
WARM=${WARM:-5}
BEFORE=${PUSHWARM_BEFORE:-}
export FLEET_PORT=${FLEET_PORT:-2422}
SSH_EXTRA="-o KexAlgorithms=curve25519-sha256 -o Ciphers=aes128-gcm@openssh.com"
WORK=$(mktemp -d /tmp/rexpush.XXXXXX)
chmod 755 "$WORK" # the fleet's sshd run as another user
OUT=$ROOT/bench/results
mkdir -p "$OUT"
FLEET=
down() { if [[ -n $FLEET ]]; then "$SHARED/fleet.sh" down "$FLEET" >/dev/null 2>&1 || true; fi; }
trap 'down; rm -rf "$WORK"' EXIT

make -s build
REX=$ROOT/bin/rex
go build -o "$WORK/pushwarm" ./bench/pushwarm

# FILES files of MB/FILES each, in 100 directories, random content.
SRC=$WORK/src
python3 - "$SRC" "$FILES" "$MB" <<'PY'
import os, sys
src, files, mb = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
size = mb * 1000 * 1000 // files
for i in range(files):
    d = os.path.join(src, "d%02d" % (i % 100))
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "f%05d.bin" % i), "wb") as f:
        f.write(os.urandom(size))
PY
chmod -R a+rX "$SRC"

# fleet REP: a fleet of N new hosts for rep REP, rexd already on them, and a new client home.
fleet() {
	FLEET=$WORK/fleet$1
	"$SHARED/fleet.sh" up "$FLEET" "$N" >/dev/null
	H=$WORK/home$1
	mkdir -p "$H/.config/rex" "$H/.ssh"
	cp "$FLEET/devices.json" "$H/.config/rex/devices.json"
	cp "$FLEET/known_hosts" "$H/.ssh/known_hosts"
	ENV=(env HOME="$H" XDG_CONFIG_HOME="$H/.config" XDG_CACHE_HOME="$H/.cache" XDG_STATE_HOME="$H/.state")
	"${ENV[@]}" "$REX" device prepare all-bench >/dev/null
}

TIMEFORMAT=%3R
# rsync_all DIR: one rsync per host into DIR of its home, all at once; the file bytes it
# sent ("Total bytes sent") are summed into $WORK/rsync.bytes.
rsync_all() {
	local pids=() rc=0
	for k in $(seq 1 "$N"); do
		rsync -a --stats -e "ssh -F $FLEET/ssh_config $SSH_EXTRA" "$SRC/" "h$k:$FLEET/h$k/home/$1/" >"$WORK/rsync.$k" & pids+=($!)
	done
	for p in "${pids[@]}"; do wait "$p" || rc=$?; done
	cat "$WORK"/rsync.[0-9]* | awk -F': ' '/^Total bytes sent/ {gsub(/,/, "", $2); s += $2} END {print s+0}' >"$WORK/rsync.bytes"
	return $rc
}
# rexpush DIR: rex push to DIR on every host; its output is kept for the bytes it sent.
rexpush() { "${ENV[@]}" "$REX" push "$SRC" "$1" all-bench >"$WORK/rex.out"; }
# rex_bytes: the bytes rex put on the wire (requests and answers, all hosts).
rex_bytes() { python3 -c '
import re, sys
units = {"B": 1, "KiB": 1024, "MiB": 1 << 20, "GiB": 1 << 30}
total = 0
for line in open(sys.argv[1]):
    m = re.search(r"\(\d+ quer(?:y|ies), ([\d.]+) (\S+) out", line)
    if m:
        total += float(m.group(1)) * units[m.group(2)]
print(int(total))' "$WORK/rex.out"; }
# step NAME TOOL CMD...: time CMD as step NAME of TOOL.
step() {
	local name=$1 tool=$2 t
	shift 2
	t=$({ time "$@" 2>>"$WORK/stderr"; } 2>&1) # only time's line: a tool's own stderr is not a time
	printf '%s\t%s\t%s\n' "$name" "$tool" "$t" >>"$OUT/push.tsv"
}
# warm NAME TOOL: one more push by the warm process (coprocess W), timed as step NAME of TOOL.
warm() {
	local t
	echo >&"${W[1]}"
	read -r t <&"${W[0]}" || { echo "push.sh: pushwarm failed" >&2; exit 1; }
	printf '%s\t%s\t%s\n' "$1" "$2" "$t" >>"$OUT/push.tsv"
}
change() { head -c 100 /dev/urandom >>"$SRC/d07/f00007.bin"; }
# warmsteps PUSHWARM TOOL: a warm process dials every host (not timed), then WARM unchanged
# pushes and WARM pushes of one changed file each, timed as TOOL.
warmsteps() {
	coproc W { "${ENV[@]}" "$1" "$SRC" pushed all-bench; }
	echo >&"${W[1]}" && read -r _ <&"${W[0]}"
	for _ in $(seq 1 "$WARM"); do warm unchanged "$2"; done
	for _ in $(seq 1 "$WARM"); do change; warm one-changed "$2"; done
	eval "exec ${W[1]}>&-"
	wait "$W_PID"
}

printf 'step\ttool\twall_s\n' >"$OUT/push.tsv"
printf 'tool\tother_dir_bytes_out\n' >"$OUT/push-bytes.tsv"
LOAD0=$(cut -d' ' -f1-3 /proc/loadavg)
for rep in $(seq 1 "$REPS"); do
	fleet "$rep"
	# Each first push starts with no dirty pages: the other's writeback is not on its bill.
	sync
	step first rex rexpush pushed
	step unchanged rex rexpush pushed
	sync
	step first rsync rsync_all rsynced
	step unchanged rsync rsync_all rsynced
	warmsteps "$WORK/pushwarm" rex-warm
	if [[ -n $BEFORE ]]; then warmsteps "$BEFORE" rex-warm-before; fi
	change # rsync sees this file changed once since its last push, as rex's cold push does
	step one-changed rex rexpush pushed
	step one-changed rsync rsync_all rsynced
	step other-dir rex rexpush pushed2
	printf 'rex\t%s\n' "$(rex_bytes)" >>"$OUT/push-bytes.tsv"
	grep -q 'sent 0 files\|nothing sent' "$WORK/rex.out" || { echo "rex sent file bytes in the other-dir step:" >&2; cat "$WORK/rex.out" >&2; }
	step other-dir rsync rsync_all rsynced2
	printf 'rsync\t%s\n' "$(cat "$WORK/rsync.bytes")" >>"$OUT/push-bytes.tsv"
	down # the hosts stop; their files stay until the end (see above)
	FLEET=
	echo "rep $rep done" >&2
done

median() { sort -n | awk '{a[NR]=$1} END {if (NR == 0) exit; if (NR % 2) print a[(NR+1)/2]; else printf "%.3f\n", (a[NR/2]+a[NR/2+1])/2}'; }
med() { awk -F'\t' -v s="$1" -v t="$2" '$1==s && $2==t {print $3}' "$OUT/push.tsv" | median; }
ratio() { if [[ -n $1 ]]; then awk -v a="$1" -v b="$2" 'BEGIN {printf "%.2f", a / b}'; fi; }
{
	echo "$FILES files, $MB MB, to $N loopback sshd hosts at once; medians of $REPS runs, seconds."
	echo "rex's first push includes reading the tree into the local store. $(nproc) cores, $(date -u +%Y-%m-%d);"
	echo "load average (1, 5, 15 min) $LOAD0 at the start, $(cut -d' ' -f1-3 /proc/loadavg) at the end."
	echo
	echo "Warm: the median of $WARM pushes per rep of one process, over all reps${BEFORE:+; before: $BEFORE}."
	echo
	echo "| step | rex push (cold) | rex, warm | rsync -a ×$N | cold / rsync | warm / rsync |${BEFORE:+ warm before | before / rsync |}"
	echo "|---|---:|---:|---:|---:|---:|${BEFORE:+---:|---:|}"
	for s in first unchanged one-changed other-dir; do
		r=$(med "$s" rex) w=$(med "$s" rex-warm) y=$(med "$s" rsync) b=$(med "$s" rex-warm-before)
		echo "| $s | $r | ${w:-} | $y | $(ratio "$r" "$y") | $(ratio "$w" "$y") |${BEFORE:+ ${b:-} | $(ratio "$b" "$y") |}"
	done
	echo
	rb=$(awk -F'\t' '$1=="rex" {print $2}' "$OUT/push-bytes.tsv" | median)
	yb=$(awk -F'\t' '$1=="rsync" {print $2}' "$OUT/push-bytes.tsv" | median)
	echo "other-dir, bytes on the wire from the client, all hosts: rex $rb (requests only, no file), rsync $yb."
} >"$OUT/push.md"
cat "$OUT/push.md"
