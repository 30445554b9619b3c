# Shared by the rex/ops tools; sourced, never run. POSIX sh: it runs under
# dash, bash and BusyBox ash. Output is JSON when REX_OUTPUT=json, text for
# people otherwise; awk (BusyBox's too) renders both.

OPS_TOOL=${OPS_TOOL:-rex/ops}

ops_json() { [ "${REX_OUTPUT:-}" = json ]; }

have() { command -v "$1" >/dev/null 2>&1; }

# warn prints one line for people on stderr.
warn() { printf '%s: %s\n' "$OPS_TOOL" "$*" >&2; }

# die says what happened and what to do, and exits with $1.
die() {
	code=$1
	shift
	warn "$*"
	exit "$code"
}

# remote_path turns a path parameter into an absolute one the way rex reads
# remote paths: ~/ and relative paths start at the target user's home.
remote_path() {
	case $1 in
	/*) printf '%s' "$1" ;;
	"~") printf '%s' "$HOME" ;;
	"~/"*) printf '%s/%s' "$HOME" "${1#"~/"}" ;;
	*) printf '%s/%s' "$HOME" "$1" ;;
	esac
}

# is_true reads a boolean parameter.
is_true() {
	case "$1" in
	true | 1 | yes) return 0 ;;
	esac
	return 1
}

# is_uint reads a non-negative integer parameter.
is_uint() {
	case "$1" in
	'' | *[!0-9]*) return 1 ;;
	esac
	return 0
}

# OPS_AWK holds awk functions every tool's awk program starts with:
# js(s) quotes a JSON string, jn(s) a JSON number (null when s is not one),
# jb(s) a JSON boolean.
OPS_AWK='
function js(s) {
	gsub(/\\/, "\\\\", s); gsub(/"/, "\\\"", s)
	gsub(/\t/, "\\t", s); gsub(/\r/, "\\r", s); gsub(/\n/, "\\n", s)
	gsub(/[\001-\010\013\014\016-\037\177]/, "", s)
	return "\"" s "\""
}
function jn(s) { return (s ~ /^-?[0-9]+(\.[0-9]+)?$/) ? s : "null" }
function jb(s) { return (s == "true" || s == "1" || s == "yes") ? "true" : "false" }
function trim(s) { sub(/^[ \t]+/, "", s); sub(/[ \t]+$/, "", s); return s }
'
