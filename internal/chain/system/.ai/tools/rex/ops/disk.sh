#!/bin/sh
# rex: executor_id: rex/core/runtimes/sh/sh
# rex: version: "1.0.0"
# rex: description: "Disk usage per mounted file system; exits 1 when one is fuller than the threshold"
# rex: files: [lib/ops.sh]
# rex: config_schema:
# rex:   type: object
# rex:   properties:
# rex:     threshold: {type: integer, minimum: 0, maximum: 100, default: 90, description: "use% above which a file system counts as full (exit 1)"}
# rex:     path: {type: string, description: "check only the file system that holds this path (relative: from the home directory)"}
# rex:     all: {type: boolean, default: false, description: "include pseudo file systems (tmpfs, devtmpfs, overlay layers...)"}
# rex:   additionalProperties: false
OPS_TOOL=rex/ops/disk
case $0 in */*) OPS_DIR=${0%/*} ;; *) OPS_DIR=. ;; esac
. "$OPS_DIR/lib/ops.sh"

threshold=${REX_PARAM_THRESHOLD:-90}
is_uint "$threshold" && [ "$threshold" -le 100 ] || die 2 "threshold must be a whole number from 0 to 100, not '$threshold'"
all=0
is_true "${REX_PARAM_ALL:-false}" && all=1
if [ -n "${REX_PARAM_PATH:-}" ]; then
	p=$(remote_path "$REX_PARAM_PATH")
	[ -e "$p" ] || die 2 "$p does not exist here"
	set -- "$p"
	all=1
else
	set --
fi
have df || die 127 "df is not installed here; install coreutils (or busybox) to check disks"

# -P: POSIX format, one line per file system; -k: 1024-byte blocks; -T
# adds the type where df has it (GNU, BusyBox); without it the type is
# guessed from the source name.
if out=$(df -PkT "$@" 2>/dev/null); then
	typed=1
elif out=$(df -Pk "$@"); then
	typed=0
else
	die 2 "df could not read the file systems"
fi
json=0
ops_json && json=1

printf '%s\n' "$out" | awk -v json="$json" -v typed="$typed" -v threshold="$threshold" -v all="$all" "$OPS_AWK"'
function pseudo(src, type) {
	if (type ~ /^(tmpfs|devtmpfs|devfs|proc|sysfs|cgroup2?|securityfs|pstore|bpf|debugfs|tracefs|configfs|fusectl|mqueue|hugetlbfs|autofs|squashfs|ramfs|nsfs|efivarfs|binfmt_misc|rpc_pipefs|overlay|shm)$/) return 1
	if (type == "" && src ~ /^(tmpfs|devtmpfs|udev|none|shm|run|cgroup|overlay|proc|sysfs)$/) return 1
	return 0
}
NR == 1 { next }
{
	src = $1
	if (typed) { type = $2; o = 3 } else { type = ""; o = 2 }
	size = $o; used = $(o + 1); avail = $(o + 2); cap = $(o + 3); sub(/%$/, "", cap)
	mnt = $(o + 4)
	for (i = o + 5; i <= NF; i++) mnt = mnt " " $i
	if (!all && (pseudo(src, type) || size == 0)) next
	if (cap !~ /^[0-9]+$/) cap = (size > 0 ? int((used * 100 + size - 1) / size) : 0)
	n++; M[n] = mnt; S[n] = src; T[n] = type; Z[n] = size; U[n] = used; A[n] = avail; P[n] = cap
	if (cap + 0 > threshold + 0) { over = over (over == "" ? "" : " ") n; full++ }
	if (cap + 0 > maxp) { maxp = cap + 0; maxm = mnt }
}
END {
	if (json) {
		printf "{\"threshold\":%d,\"full\":%d,\"max_use_pct\":%d,\"max_use_mount\":%s,\"over\":[", threshold, full, maxp, js(maxm)
		k = split(over, idx, " ")
		for (i = 1; i <= k; i++) printf "%s%s", (i > 1 ? "," : ""), js(M[idx[i]])
		printf "],\"mounts\":["
		for (i = 1; i <= n; i++) {
			printf "%s{\"mount\":%s,\"source\":%s,\"type\":%s,\"size_kb\":%s,\"used_kb\":%s,\"avail_kb\":%s,\"use_pct\":%s}", (i > 1 ? "," : ""), js(M[i]), js(S[i]), (T[i] == "" ? "null" : js(T[i])), jn(Z[i]), jn(U[i]), jn(A[i]), jn(P[i])
		}
		printf "]}\n"
	} else {
		printf "%-5s %9s %9s %9s  %-10s %s\n", "USE%", "SIZE", "USED", "AVAIL", "TYPE", "MOUNT"
		for (i = 1; i <= n; i++) {
			mark = (P[i] + 0 > threshold + 0) ? "!" : " "
			printf "%4d%%%s%9s %9s %9s  %-10s %s\n", P[i], mark, human(Z[i]), human(U[i]), human(A[i]), (T[i] == "" ? "-" : T[i]), M[i]
		}
		if (full > 0) printf "%d file system(s) above %d%%\n", full, threshold
	}
	exit (full > 0 ? 1 : 0)
}
function human(kb) {
	if (kb >= 1073741824) return sprintf("%.1fT", kb / 1073741824)
	if (kb >= 1048576) return sprintf("%.1fG", kb / 1048576)
	if (kb >= 1024) return sprintf("%.1fM", kb / 1024)
	return kb "K"
}'
