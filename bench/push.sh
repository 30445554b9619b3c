#!/usr/bin/env bash
# push.sh [HOSTS] - `rex push` beside rsync (one rsync per host, all at once) on a fleet of
# real loopback sshd hosts (../shared/bench), in one run: a first push of FILES files
# totalling MB megabytes, then an unchanged re-push, then a push after one file changed.
# rsync gets the key exchange and cipher x/crypto/ssh negotiates. Medians of REPS runs go to
# bench/results/push.md.
#
# Environment: SHARED_BENCH (default ../shared/bench), FILES (10000), MB (100), REPS (3).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd -P)
SHARED=${SHARED_BENCH:-$ROOT/../shared/bench}
N=${1:-8}
FILES=${FILES:-10000}
MB=${MB:-100}
REPS=${REPS:-3}
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
	for k in $(seq 1 "$N"); do rm -rf "$FLEET/h$k/home/pushed" "$FLEET/h$k/home/rsynced" "$FLEET/h$k/home/.cache/rexd/cas"; done
	rm -rf "$H/.cache/rex/cas"
}
rsync_all() {
	local pids=() rc=0
	# Each host's own HOME (an exec's cwd is the shared account's real home).
	for k in $(seq 1 "$N"); do
		rsync -a -e "ssh -F $FLEET/ssh_config $SSH_EXTRA" "$SRC/" "h$k:$FLEET/h$k/home/rsynced/" & pids+=($!)
	done
	for p in "${pids[@]}"; do wait "$p" || rc=$?; done
	return $rc
}
rexpush() { "${ENV[@]}" "$REX" push "$SRC" pushed all-bench >/dev/null; }

printf 'step\ttool\twall_s\n' >"$OUT/push.tsv"
for rep in $(seq 1 "$REPS"); do
	clean_remote
	t=$({ time rexpush; } 2>&1); printf 'first\trex\t%s\n' "$t" >>"$OUT/push.tsv"
	t=$({ time rexpush; } 2>&1); printf 'unchanged\trex\t%s\n' "$t" >>"$OUT/push.tsv"
	t=$({ time rsync_all; } 2>&1); printf 'first\trsync\t%s\n' "$t" >>"$OUT/push.tsv"
	t=$({ time rsync_all; } 2>&1); printf 'unchanged\trsync\t%s\n' "$t" >>"$OUT/push.tsv"
	head -c 100 /dev/urandom >>"$SRC/d07/f00007.bin"
	t=$({ time rexpush; } 2>&1); printf 'one-changed\trex\t%s\n' "$t" >>"$OUT/push.tsv"
	t=$({ time rsync_all; } 2>&1); printf 'one-changed\trsync\t%s\n' "$t" >>"$OUT/push.tsv"
	echo "rep $rep done" >&2
done

median() { sort -n | awk '{a[NR]=$1} END {if (NR % 2) print a[(NR+1)/2]; else printf "%.3f\n", (a[NR/2]+a[NR/2+1])/2}'; }
{
	echo "$FILES files, $MB MB, to $N loopback sshd hosts at once; medians of $REPS runs, seconds."
	echo "rex's first push includes reading the tree into the local store. $(nproc) cores, $(date -u +%Y-%m-%d)."
	echo
	echo "| step | rex push | rsync ×$N |"
	echo "|---|---:|---:|"
	for step in first unchanged one-changed; do
		r=$(awk -F'\t' -v s="$step" '$1==s && $2=="rex" {print $3}' "$OUT/push.tsv" | median)
		y=$(awk -F'\t' -v s="$step" '$1==s && $2=="rsync" {print $3}' "$OUT/push.tsv" | median)
		echo "| $step | $r | $y |"
	done
} >"$OUT/push.md"
cat "$OUT/push.md"
