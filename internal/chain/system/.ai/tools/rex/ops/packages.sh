#!/bin/sh
# rex: executor_id: rex/core/runtimes/sh/sh
# rex: version: "1.0.0"
# rex: description: "Installed versions of packages and pending updates, through apt, dnf/yum or apk"
# rex: files: [lib/ops.sh]
# rex: config_schema:
# rex:   type: object
# rex:   properties:
# rex:     names: {type: string, pattern: "^[A-Za-z0-9_.+:@, -]*$", description: "packages to report, separated by spaces or commas; exit 1 when one is not installed"}
# rex:     updates: {type: boolean, default: true, description: "also list pending updates (from the package manager's cached metadata: nothing is downloaded or changed)"}
# rex:   additionalProperties: false
OPS_TOOL=rex/ops/packages
case $0 in */*) OPS_DIR=${0%/*} ;; *) OPS_DIR=. ;; esac
. "$OPS_DIR/lib/ops.sh"

names=$(printf '%s' "${REX_PARAM_NAMES:-}" | tr ',' ' ')
for n in $names; do
	case $n in -* | *[!A-Za-z0-9_.+:@-]*) die 2 "'$n' is not a package name" ;; esac
done
updates=0
is_true "${REX_PARAM_UPDATES:-true}" && updates=1

if have dpkg-query; then
	mgr=apt
elif have rpm && { have dnf || have yum; }; then
	mgr=dnf
	have dnf || mgr=yum
elif have apk; then
	mgr=apk
else
	die 127 "no package manager rex knows here (apt, dnf, yum, apk)"
fi

# Every line the report is made of is "I<TAB>name<TAB>version" for an
# installed package, "M<TAB>name" for a missing one, "U<TAB>name<TAB>from<TAB>to"
# for a pending update, "E<TAB>message" when updates could not be read.
tab=$(printf '\t')
installed() {
	# shellcheck disable=SC2086 # names are checked words
	case $mgr in
	apt)
		dpkg-query -W -f='${Package}\t${Version}\t${db:Status-Status}\n' -- $names 2>/dev/null |
			awk -F "$tab" '$3 == "installed" { print "I\t" $1 "\t" $2 }'
		;;
	dnf | yum)
		rpm -q --qf '%{NAME}\t%|EPOCH?{%{EPOCH}:}:{}|%{VERSION}-%{RELEASE}\n' -- $names 2>/dev/null |
			awk -F "$tab" 'NF == 2 { print "I\t" $1 "\t" $2 }'
		;;
	apk)
		for n in $names; do
			apk list --installed "$n" 2>/dev/null | awk -v n="$n" 'index($1, n "-") == 1 { print "I\t" n "\t" substr($1, length(n) + 2); exit }'
		done
		;;
	esac
}
pending() {
	case $mgr in
	apt)
		out=$(LC_ALL=C apt-get -s -o Debug::NoLocking=1 dist-upgrade 2>&1) || { printf 'E\t%s\n' "apt-get -s dist-upgrade failed: $(printf '%s' "$out" | tail -n 1)"; return; }
		printf '%s\n' "$out" | awk '$1 == "Inst" { cur = ""; if ($3 ~ /^\[/) { cur = $3; gsub(/[][]/, "", cur); new = $4 } else new = $3; sub(/^\(/, "", new); print "U\t" $2 "\t" cur "\t" new }'
		;;
	dnf | yum)
		out=$($mgr -q -C check-update 2>&1)
		code=$?
		case $code in
		0) return ;;
		100) ;;
		*)
			printf 'E\t%s\n' "$mgr check-update -C failed (exit $code): $(printf '%s' "$out" | tail -n 1); run $mgr makecache"
			return
			;;
		esac
		cur=$(rpm -qa --qf '%{NAME}\t%|EPOCH?{%{EPOCH}:}:{}|%{VERSION}-%{RELEASE}\n' 2>/dev/null)
		printf '%s\n--\n%s\n' "$cur" "$out" | awk -F "$tab" '
			$0 == "--" { body = 1; FS = " "; next }
			!body { v[$1] = $2; next }
			/^Obsoleting/ { exit }
			NF == 3 && $1 ~ /\./ { n = $1; sub(/\.[^.]*$/, "", n); print "U\t" n "\t" v[n] "\t" $2 }'
		;;
	apk)
		out=$(apk version -l '<' 2>&1) || { printf 'E\t%s\n' "apk version failed: $(printf '%s' "$out" | tail -n 1)"; return; }
		printf '%s\n' "$out" | awk '$2 == "<" { n = $1; sub(/-[^-]+-r[0-9]+$/, "", n); print "U\t" n "\t" substr($1, length(n) + 2) "\t" $3 }'
		;;
	esac
}

json=0
ops_json && json=1
{
	[ -z "$names" ] || installed
	for n in $names; do printf 'W\t%s\n' "$n"; done
	[ "$updates" = 0 ] || pending
} | awk -F "$tab" -v json="$json" -v mgr="$mgr" -v updates="$updates" "$OPS_AWK"'
$1 == "I" { inst[$2] = $3; next }
$1 == "W" { if (!($2 in seen)) { seen[$2] = 1; want[++nw] = $2 }; next }
$1 == "U" { nu++; un[nu] = $2; uf[nu] = $3; ut[nu] = $4; avail[$2] = $4; next }
$1 == "E" { uerr = $2; next }
END {
	missing = 0
	for (i = 1; i <= nw; i++) if (!(want[i] in inst)) missing++
	if (uerr != "") printf "rex/ops/packages: %s\n", uerr > "/dev/stderr"
	if (json) {
		printf "{\"manager\":%s,\"packages\":[", js(mgr)
		for (i = 1; i <= nw; i++) {
			n = want[i]
			printf "%s{\"name\":%s,\"installed\":%s,\"available\":%s}", (i > 1 ? "," : ""), js(n), ((n in inst) ? js(inst[n]) : "null"), ((n in avail) ? js(avail[n]) : "null")
		}
		printf "],\"missing\":%d,\"pending\":%s,\"updates\":[", missing, ((updates && uerr == "") ? nu + 0 : "null")
		for (i = 1; i <= nu; i++) printf "%s{\"name\":%s,\"installed\":%s,\"available\":%s}", (i > 1 ? "," : ""), js(un[i]), js(uf[i]), js(ut[i])
		printf "]}\n"
	} else {
		for (i = 1; i <= nw; i++) {
			n = want[i]
			if (!(n in inst)) { printf "%-28s not installed\n", n; continue }
			printf "%-28s %s", n, inst[n]
			if (n in avail) printf "  (update: %s)", avail[n]
			printf "\n"
		}
		if (updates && uerr == "") {
			if (nu == 0) printf "no updates pending (%s)\n", mgr
			else {
				printf "%d update(s) pending (%s):\n", nu, mgr
				for (i = 1; i <= nu; i++) printf "  %-26s %s -> %s\n", un[i], (uf[i] == "" ? "?" : uf[i]), ut[i]
			}
		}
	}
	exit (missing > 0 ? 1 : 0)
}'
