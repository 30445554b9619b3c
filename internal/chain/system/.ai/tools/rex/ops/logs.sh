#!/bin/sh
# rex: executor_id: rex/core/runtimes/sh/sh
# rex: version: "1.0.0"
# rex: description: "The last lines of a service's journal or of a log file, optionally since a time"
# rex: files: [lib/ops.sh]
# rex: config_schema:
# rex:   type: object
# rex:   properties:
# rex:     unit: {type: string, pattern: "^[A-Za-z0-9_][A-Za-z0-9_.@:-]*$", description: "a systemd unit (its journal); without unit or file, the system's journal or syslog"}
# rex:     file: {type: string, minLength: 1, description: "a log file to read instead of the journal (relative: from the home directory)"}
# rex:     lines: {type: integer, minimum: 1, maximum: 10000, default: 50, description: "how many lines, from the end"}
# rex:     since: {type: string, pattern: "^[A-Za-z0-9 :.+-]+$", description: "only entries since then, as journalctl reads it (\"1 hour ago\", \"2026-01-31 10:00\", today); journal only"}
# rex:   additionalProperties: false
OPS_TOOL=rex/ops/logs
case $0 in */*) OPS_DIR=${0%/*} ;; *) OPS_DIR=. ;; esac
. "$OPS_DIR/lib/ops.sh"

unit=${REX_PARAM_UNIT:-}
file=${REX_PARAM_FILE:-}
[ -z "$file" ] || file=$(remote_path "$file")
lines=${REX_PARAM_LINES:-50}
since=${REX_PARAM_SINCE:-}
is_uint "$lines" && [ "$lines" -ge 1 ] || die 2 "lines must be a whole number from 1, not '$lines'"
[ -z "$unit" ] || [ -z "$file" ] || die 2 "pass unit or file, not both"

# journal reports whether this machine keeps a systemd journal.
journal() {
	have journalctl || return 1
	[ -d /run/systemd/journal ] && return 0
	[ -n "$(ls -A /var/log/journal 2>/dev/null)" ]
}

if [ -n "$file" ]; then
	[ -z "$since" ] || die 2 "since works with the journal only; for a file, use lines"
	[ -r "$file" ] || die 2 "cannot read $file here (missing, or needs --sudo)"
	source="file:$file"
	read_log() { tail -n "$lines" -- "$file"; }
elif journal; then
	set -- --no-pager -q -o short-iso -n "$lines"
	[ -z "$unit" ] || set -- "$@" -u "$unit"
	[ -z "$since" ] || set -- "$@" --since "$since"
	source=journal
	[ -z "$unit" ] || source="journal:$unit"
	read_log() { journalctl "$@"; }
elif [ -n "$unit" ]; then
	die 2 "there is no systemd journal here for $unit; pass --param file=/var/log/messages (or the service's own log file)"
else
	[ -z "$since" ] || die 2 "since works with the journal only, and there is none here; use lines"
	for f in /var/log/syslog /var/log/messages; do
		[ -r "$f" ] && break
	done
	[ -r "$f" ] || die 2 "no journal and no readable /var/log/syslog or /var/log/messages here; pass --param file=PATH"
	file=$f
	source="file:$f"
	read_log() { tail -n "$lines" -- "$file"; }
fi

if ! ops_json; then
	read_log "$@"
	exit
fi
out=$(read_log "$@") || die 1 "could not read $source"
printf '%s\n' "$out" | awk -v source="$source" "$OPS_AWK"'
{ l[++n] = $0 }
END {
	if (n == 1 && l[1] == "") n = 0
	printf "{\"source\":%s,\"count\":%d,\"lines\":[", js(source), n
	for (i = 1; i <= n; i++) printf "%s%s", (i > 1 ? "," : ""), js(l[i])
	printf "]}\n"
}'
