#!/usr/bin/env bash
# ab.sh N REPS OLD_REX NEW_REX - two rex builds and the bare-ssh peer, alternated run by run on
# one loopback fleet of N hosts (../shared/bench/fleet.sh, port 2299 so that it can stand
# beside fanout.sh's), with the key exchange and cipher x/crypto/ssh negotiates:
#
#   N = 1: one host's `cat` of 256 MiB of log lines to a file: `ssh h1 cat`, old `rex run`,
#          new `rex run`, new `rex run -N` (the same bytes as ssh's, no "h1: ")
#   N > 1: 10 MB of 100-byte lines per host, cold: ssh-par (peers.sh), old, new
#
# Each run prints "label wall_s user_s sys_s maxRSS" (GNU time); take medians per label.
# Build the old rex in a worktree: git worktree add /tmp/old REV && make -C /tmp/old build.
set -euo pipefail
N=$1 REPS=$2 OLD=$3 NEW=$4
cd "$(dirname "$0")/.."
SHARED=${SHARED_BENCH:-$(pwd -P)/../shared/bench}
W=$(mktemp -d /tmp/rexab.XXXXXX)
chmod 755 "$W" # the fleet's sshd may run as another user
export FLEET_PORT=2299
trap '"$SHARED/fleet.sh" down "$W/fleet" >/dev/null 2>&1 || true; rm -rf "$W"' EXIT
"$SHARED/fleet.sh" up "$W/fleet" "$N" >/dev/null
export SSH_EXTRA="-o KexAlgorithms=curve25519-sha256 -o Ciphers=aes128-gcm@openssh.com"
rexenv() { # rexenv NAME: an env prefix giving one build its own HOME and caches
	local h=$W/home-$1
	mkdir -p "$h/.config/rex" "$h/.ssh"
	cp "$W/fleet/devices.json" "$h/.config/rex/devices.json"
	cp "$W/fleet/known_hosts" "$h/.ssh/known_hosts"
	echo "HOME=$h XDG_CONFIG_HOME=$h/.config XDG_CACHE_HOME=$h/.cache XDG_STATE_HOME=$h/.state"
}
read -ra EOLD <<<"env $(rexenv old) $OLD"
read -ra ENEW <<<"env $(rexenv new) $NEW"
"${EOLD[@]}" device prepare all-bench >/dev/null
"${ENEW[@]}" device prepare all-bench >/dev/null
t() { # t LABEL CMD...: one timed run, output to a file
	local label=$1
	shift
	/usr/bin/time -f "$label %e %U %S %MkB" -o "$W/time" "$@" >"$W/out" 2>/dev/null
	cat "$W/time"
}
if ((N == 1)); then
	BIG=$W/stream.txt
	(
		set +o pipefail # yes ends on SIGPIPE
		yes "2026-11-22T10:00:00Z host-17 service[1234]: request handled in 12ms status=200 path=/api/v1/items" |
			head -c $((256 << 20)) >"$BIG"
	)
	chmod 644 "$BIG"
	for _ in $(seq 1 "$REPS"); do
		# shellcheck disable=SC2086
		t ssh ssh -F "$W/fleet/ssh_config" $SSH_EXTRA -n h1 cat "$BIG"
		t old "${EOLD[@]}" run -q h1 -- cat "$BIG"
		t new "${ENEW[@]}" run -q h1 -- cat "$BIG"
		t new-N "${ENEW[@]}" run -q -N h1 -- cat "$BIG"
	done
else
	CMD="head -c 10000000 /dev/zero | tr '\\0' 'a' | fold -w 100"
	for _ in $(seq 1 "$REPS"); do
		t ssh-par env PEERS=ssh-par "$SHARED/peers.sh" "$W/fleet" "$CMD"
		t old "${EOLD[@]}" run -q all-bench -- "$CMD"
		t new "${ENEW[@]}" run -q all-bench -- "$CMD"
	done
fi
