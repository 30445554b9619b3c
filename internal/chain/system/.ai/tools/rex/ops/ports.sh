#!/bin/sh
# rex: executor_id: rex/core/runtimes/sh/sh
# rex: version: "1.0.0"
# rex: description: "Listening sockets (TCP listening, UDP bound) with their programs where visible"
# rex: files: [lib/ops.sh]
# rex: config_schema:
# rex:   type: object
# rex:   properties:
# rex:     protocol: {type: string, enum: [all, tcp, udp], default: all, description: "which sockets"}
# rex:   additionalProperties: false
OPS_TOOL=rex/ops/ports
case $0 in */*) OPS_DIR=${0%/*} ;; *) OPS_DIR=. ;; esac
. "$OPS_DIR/lib/ops.sh"

proto=${REX_PARAM_PROTOCOL:-all}
case $proto in all | tcp | udp) ;; *) die 2 "protocol must be all, tcp or udp, not '$proto'" ;; esac
# ss and netstat are always asked for both protocols (ss drops its Netid
# column when asked for one); the report keeps what was asked for.
flags=tu

# Every source is turned into "proto<TAB>address<TAB>port<TAB>program" lines.
# Programs show only for sockets this user may see (all of them as root).
tab=$(printf '\t')
if have ss && out=$(ss -ln"$flags"p 2>/dev/null); then
	source=ss
elif have netstat && out=$(netstat -ln"$flags"p 2>/dev/null || netstat -ln"$flags" 2>/dev/null); then
	source=netstat
elif [ -r /proc/net/tcp ]; then
	source=proc
else
	die 127 "neither ss, netstat nor /proc/net is available here; install iproute2 (or busybox)"
fi

gather() {
	case $source in
	ss)
		printf '%s\n' "$out" | awk '
		NR == 1 && $1 == "Netid" { next }
		{
			local = $5; port = local; sub(/.*:/, "", port); addr = substr(local, 1, length(local) - length(port) - 1)
			gsub(/^\[|\]$/, "", addr); sub(/%.*/, "", addr)
			prog = ""
			if (match($0, /users:\(\("[^"]*"/)) { prog = substr($0, RSTART + 9, RLENGTH - 10) }
			print $1 "\t" addr "\t" port "\t" prog
		}'
		;;
	netstat)
		printf '%s\n' "$out" | awk '
		$1 !~ /^(tcp|udp)/ { next }
		$1 ~ /^tcp/ && $6 != "LISTEN" { next }
		{
			p = $1; sub(/6$/, "", p)
			local = $4; port = local; sub(/.*:/, "", port); addr = substr(local, 1, length(local) - length(port) - 1)
			if (addr == "::" || addr == "") addr = (addr == "" ? "*" : "::")
			prog = $NF
			if (prog ~ /^[0-9]+\//) sub(/^[0-9]+\//, "", prog); else prog = ""
			print p "\t" addr "\t" port "\t" prog
		}'
		;;
	proc)
		for f in tcp tcp6 udp udp6; do
		case $flags in *"$(printf %.1s "$f")"*) ;; *) continue ;; esac
		[ -r "/proc/net/$f" ] || continue
		awk -v p="${f%6}" -v v6="$(case $f in *6) echo 1 ;; esac)" '
			function hex(s,   i, n) { n = 0; s = toupper(s); for (i = 1; i <= length(s); i++) n = n * 16 + index("0123456789ABCDEF", substr(s, i, 1)) - 1; return n }
			function v4(h) { return hex(substr(h, 7, 2)) "." hex(substr(h, 5, 2)) "." hex(substr(h, 3, 2)) "." hex(substr(h, 1, 2)) }
			function v6addr(h,   i, w, out, g) {
				if (h ~ /^0+$/) return "::"
				if (h == "00000000000000000000000001000000") return "::1"
				out = ""
				for (i = 0; i < 4; i++) {
					w = substr(h, i * 8 + 1, 8)
					g = substr(w, 7, 2) substr(w, 5, 2) ":" substr(w, 3, 2) substr(w, 1, 2)
					out = out (i ? ":" : "") g
				}
				return tolower(out)
			}
			NR == 1 { next }
			{
				st = $4
				if (p == "tcp" && st != "0A") next
				if (p == "udp" && st != "07") next
				split($2, a, ":")
				print p "\t" (v6 ? v6addr(a[1]) : v4(a[1])) "\t" hex(a[2]) "\t"
			}' "/proc/net/$f"
		done
		;;
	esac
}

json=0
ops_json && json=1
gather | sort -t "$tab" -k3,3n -k1,1 -k2,2 -u | awk -F "$tab" -v json="$json" -v source="$source" -v want="$proto" "$OPS_AWK"'
want != "all" && $1 != want { next }
$3 !~ /^[0-9]+$/ { next }
{ n++; P[n] = $1; A[n] = $2; N[n] = $3; G[n] = $4 }
END {
	if (json) {
		printf "{\"source\":%s,\"count\":%d,\"listening\":[", js(source), n
		for (i = 1; i <= n; i++) printf "%s{\"proto\":%s,\"address\":%s,\"port\":%s,\"program\":%s}", (i > 1 ? "," : ""), js(P[i]), js(A[i]), jn(N[i]), (G[i] == "" ? "null" : js(G[i]))
		printf "]}\n"
		exit
	}
	printf "%-5s %-6s %-40s %s\n", "PROTO", "PORT", "ADDRESS", "PROGRAM"
	for (i = 1; i <= n; i++) printf "%-5s %-6s %-40s %s\n", P[i], N[i], A[i], (G[i] == "" ? "-" : G[i])
	if (n == 0) printf "nothing is listening (that this user can see)\n"
}'
