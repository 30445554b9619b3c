#!/bin/sh
# rex: executor_id: rex/core/runtimes/sh/sh
# rex: version: "1.0.0"
# rex: description: "Accounts (people and root; all with all=true) and who is logged in"
# rex: files: [lib/ops.sh]
# rex: config_schema:
# rex:   type: object
# rex:   properties:
# rex:     all: {type: boolean, default: false, description: "include system accounts (uid below UID_MIN, nobody)"}
# rex:     name: {type: string, pattern: "^[A-Za-z0-9_.][A-Za-z0-9_.-]*[$]?$", description: "report only this account"}
# rex:   additionalProperties: false
OPS_TOOL=rex/ops/users
case $0 in */*) OPS_DIR=${0%/*} ;; *) OPS_DIR=. ;; esac
. "$OPS_DIR/lib/ops.sh"

all=0
is_true "${REX_PARAM_ALL:-false}" && all=1
only=${REX_PARAM_NAME:-}

# Accounts come from getent (so LDAP/SSSD users count) or /etc/passwd.
if have getent && accounts=$(getent passwd 2>/dev/null) && [ -n "$accounts" ]; then
	:
elif [ -r /etc/passwd ]; then
	accounts=$(cat /etc/passwd)
else
	die 127 "neither getent nor /etc/passwd is available here"
fi
uidmin=$(awk '$1 == "UID_MIN" { print $2; exit }' /etc/login.defs 2>/dev/null)
is_uint "$uidmin" || uidmin=1000
sessions=
if have who; then
	sessions=$(who 2>/dev/null)
else
	warn "who is not installed here; logged_in is empty"
fi

json=0
ops_json && json=1
{
	printf '%s\n' "$accounts" | sed 's/^/P:/'
	[ -z "$sessions" ] || printf '%s\n' "$sessions" | sed 's/^/W:/'
} | awk -v json="$json" -v all="$all" -v only="$only" -v uidmin="$uidmin" "$OPS_AWK"'
/^P:/ {
	split(substr($0, 3), f, ":")
	name = f[1]; uid = f[3]
	if (name == "" || uid !~ /^[0-9]+$/) next
	if (only != "" && name != only) next
	if (only == "" && !all && !(uid == 0 || (uid >= uidmin && uid < 65534))) next
	if (name in seen) next
	seen[name] = 1
	n++; N[n] = name; U[n] = uid; G[n] = f[4]; H[n] = f[6]; S[n] = f[7]; C[n] = f[5]
	sub(/,.*/, "", C[n])
	L[n] = (S[n] !~ /(nologin|false|sync|shutdown|halt)$/ && S[n] != "") ? "true" : "false"
	next
}
/^W:/ {
	line = substr($0, 3)
	m = split(line, w, " ")
	# BusyBox who prints a header and USER TTY IDLE TIME(3 words) HOST.
	if (w[1] == "USER" && w[2] == "TTY") { bb = 1; next }
	if (m < 2) next
	from = ""; since = ""
	if (bb) {
		since = w[4] " " w[5] " " w[6]
		if (m >= 7) from = w[7]
	} else {
		if (match(line, /\([^)]*\)$/)) from = substr(line, RSTART + 1, RLENGTH - 2)
		for (i = 3; i <= m; i++) { if (w[i] ~ /^\(/) break; since = since (since == "" ? "" : " ") w[i] }
	}
	k++; WN[k] = w[1]; WT[k] = w[2]; WF[k] = from; WS[k] = since
	sess[w[1]]++
}
END {
	if (json) {
		printf "{\"count\":%d,\"users\":[", n
		for (i = 1; i <= n; i++) printf "%s{\"name\":%s,\"uid\":%s,\"gid\":%s,\"comment\":%s,\"home\":%s,\"shell\":%s,\"login\":%s,\"sessions\":%d}", (i > 1 ? "," : ""), js(N[i]), jn(U[i]), jn(G[i]), js(C[i]), js(H[i]), js(S[i]), L[i], sess[N[i]]
		printf "],\"logged_in\":["
		for (i = 1; i <= k; i++) printf "%s{\"name\":%s,\"tty\":%s,\"from\":%s,\"since\":%s}", (i > 1 ? "," : ""), js(WN[i]), js(WT[i]), (WF[i] == "" ? "null" : js(WF[i])), js(WS[i])
		printf "]}\n"
	} else {
		printf "%-16s %6s %6s  %-24s %-20s %s\n", "NAME", "UID", "GID", "HOME", "SHELL", "SESSIONS"
		for (i = 1; i <= n; i++) printf "%-16s %6s %6s  %-24s %-20s %d\n", N[i], U[i], G[i], H[i], S[i], sess[N[i]]
		if (k > 0) {
			printf "\nlogged in:\n"
			for (i = 1; i <= k; i++) printf "  %-14s %-8s %s%s\n", WN[i], WT[i], WS[i], (WF[i] == "" ? "" : " from " WF[i])
		}
	}
	if (only != "" && n == 0) { printf "rex/ops/users: no account %s here\n", only > "/dev/stderr"; exit 1 }
}'
