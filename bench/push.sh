#!/usr/bin/env bash
# push.sh [HOSTS] - `rex push` beside rsync (one `rsync -a` per host, all at once) on a fleet
# of real loopback sshd hosts (../shared/bench), in one run, four steps:
#   first        a first push of FILES files totalling MB megabytes
#   unchanged    the same again, nothing changed
#   one-changed  after one file changed
#   other-dir    the same tree to another directory of hosts that already hold it
# rsync gets the key exchange and cipher x/crypto/ssh negotiates. Medians of REPS runs go to
# bench/results/push.md, with the file bytes each tool put on the wire in the other-dir step.
#
# Environment: SHARED_BENCH (default: shared/bench beside the main checkout), FILES (10000),
# MB (100), REPS (3), FLEET_PORT (2422, so the fleet does not meet another on the default port).
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
export FLEET_PORT=${FLEET_PORT:-2422}
SSH_EXTRA="-o KexAlgorithms=curve25519-sha256 -o Ciphers=aes128-gcm@openssh.com"
WORK=$(mktemp -d /tmp/rexpush.XXXXXX)
chmod 755 "$WORK" # the fleet's sshd run as another user
FLEET=$WORK/fleet
OUT=$ROOT/bench/results
mkdir -p "$OUT"
trap '"$SHARED/fleet.sh" down "$FLEET" >/dev/null 2>&1 || true; rm -rf "$WORK"' EXIT

make -s build
REX=$ROOT/bin/rex
"$SHARED/fleet.sh" up "$FLEET" "$N" >/dev/null
source "$FLEET/fleet.env"
H=$WORK/home
mkdir -p "$H/.config/rex" "$H/.ssh"
cp "$FLEET/devices.json" "$H/.config/rex/devices.json"
cp "$FLEET/known_hosts" "$H/.ssh/known_hosts"
ENV=(env HOME="$H" XDG_CONFIG_HOME="$H/.config" XDG_CACHE_HOME="$H/.cache" XDG_STATE_HOME="$H/.state")
"${ENV[@]}" "$REX" device prepare all-bench >/dev/null

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

TIMEFORMAT=%3R
clean_remote() {
	for k in $(seq 1 "$N"); do
		rm -rf "$FLEET/h$k/home/pushed" "$FLEET/h$k/home/pushed2" "$FLEET/h$k/home/rsynced" "$FLEET/h$k/home/rsynced2" "$FLEET/h$k/home/.cache/rexd/cas"
	done
	rm -rf "$H/.cache/rex/cas"
}
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

# settle: let the file system forget recent deletions before a first push. On ext4 without a
# journal (as on this machine) a new inode skips every inode freed in the last 60 s (300 s
# while its inode table block is dirty; fs/ext4/ialloc.c recently_deleted), reading each
# one's table block: right after clean_remote freed up to 320,000 inodes, the first push's
# file creations scan them (perf: a quarter of a push in recently_deleted/find_inode_bit),
# and the tool that went first paid most of it. sync makes the blocks clean, then 61 s pass;
# both tools get the same before their first push. SETTLE=0 skips the wait.
settle() { sync; sleep "${SETTLE:-61}"; }

printf 'step\ttool\twall_s\n' >"$OUT/push.tsv"
printf 'tool\tother_dir_bytes_out\n' >"$OUT/push-bytes.tsv"
LOAD0=$(cut -d' ' -f1-3 /proc/loadavg)
for rep in $(seq 1 "$REPS"); do
	clean_remote
	settle
	t=$({ time rexpush pushed; } 2>&1); printf 'first\trex\t%s\n' "$t" >>"$OUT/push.tsv"
	t=$({ time rexpush pushed; } 2>&1); printf 'unchanged\trex\t%s\n' "$t" >>"$OUT/push.tsv"
	settle
	t=$({ time rsync_all rsynced; } 2>&1); printf 'first\trsync\t%s\n' "$t" >>"$OUT/push.tsv"
	t=$({ time rsync_all rsynced; } 2>&1); printf 'unchanged\trsync\t%s\n' "$t" >>"$OUT/push.tsv"
	head -c 100 /dev/urandom >>"$SRC/d07/f00007.bin"
	t=$({ time rexpush pushed; } 2>&1); printf 'one-changed\trex\t%s\n' "$t" >>"$OUT/push.tsv"
	t=$({ time rsync_all rsynced; } 2>&1); printf 'one-changed\trsync\t%s\n' "$t" >>"$OUT/push.tsv"
	t=$({ time rexpush pushed2; } 2>&1); printf 'other-dir\trex\t%s\n' "$t" >>"$OUT/push.tsv"
	printf 'rex\t%s\n' "$(rex_bytes)" >>"$OUT/push-bytes.tsv"
	grep -q 'sent 0 files\|nothing sent' "$WORK/rex.out" || { echo "rex sent file bytes in the other-dir step:" >&2; cat "$WORK/rex.out" >&2; }
	t=$({ time rsync_all rsynced2; } 2>&1); printf 'other-dir\trsync\t%s\n' "$t" >>"$OUT/push.tsv"
	printf 'rsync\t%s\n' "$(cat "$WORK/rsync.bytes")" >>"$OUT/push-bytes.tsv"
	echo "rep $rep done" >&2
done

median() { sort -n | awk '{a[NR]=$1} END {if (NR % 2) print a[(NR+1)/2]; else printf "%.3f\n", (a[NR/2]+a[NR/2+1])/2}'; }
{
	echo "$FILES files, $MB MB, to $N loopback sshd hosts at once; medians of $REPS runs, seconds."
	echo "rex's first push includes reading the tree into the local store. $(nproc) cores, $(date -u +%Y-%m-%d);"
	echo "load average (1, 5, 15 min) $LOAD0 at the start, $(cut -d' ' -f1-3 /proc/loadavg) at the end."
	echo
	echo "| step | rex push | rsync -a ×$N | rex / rsync |"
	echo "|---|---:|---:|---:|"
	for step in first unchanged one-changed other-dir; do
		r=$(awk -F'\t' -v s="$step" '$1==s && $2=="rex" {print $3}' "$OUT/push.tsv" | median)
		y=$(awk -F'\t' -v s="$step" '$1==s && $2=="rsync" {print $3}' "$OUT/push.tsv" | median)
		echo "| $step | $r | $y | $(awk -v a="$r" -v b="$y" 'BEGIN {printf "%.2f", a / b}') |"
	done
	echo
	rb=$(awk -F'\t' '$1=="rex" {print $2}' "$OUT/push-bytes.tsv" | median)
	yb=$(awk -F'\t' '$1=="rsync" {print $2}' "$OUT/push-bytes.tsv" | median)
	echo "other-dir, bytes on the wire from the client, all hosts: rex $rb (requests only, no file), rsync $yb."
} >"$OUT/push.md"
cat "$OUT/push.md"
