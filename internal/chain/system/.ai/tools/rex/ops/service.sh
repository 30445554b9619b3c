#!/bin/sh
# rex: executor_id: rex/core/runtimes/sh/sh
# rex: version: "1.0.0"
# rex: description: "Status, start, stop or restart a service through systemd, OpenRC or SysV init"
# rex: files: [lib/ops.sh]
# rex: config_schema:
# rex:   type: object
# rex:   properties:
# rex:     name: {type: string, pattern: "^[A-Za-z0-9_][A-Za-z0-9_.@:-]*$", description: "the service (ssh, nginx, sshd...)"}
# rex:     action: {type: string, enum: [status, start, stop, restart], default: status, description: "what to do; status changes nothing"}
# rex:   required: [name]
# rex:   additionalProperties: false
OPS_TOOL=rex/ops/service
case $0 in */*) OPS_DIR=${0%/*} ;; *) OPS_DIR=. ;; esac
. "$OPS_DIR/lib/ops.sh"

name=${REX_PARAM_NAME:-}
action=${REX_PARAM_ACTION:-status}
[ -n "$name" ] || die 2 "which service? pass --param name=SERVICE"
case $name in -* | *[!A-Za-z0-9_.@:-]*) die 2 "'$name' is not a service name" ;; esac
case $action in status | start | stop | restart) ;; *) die 2 "action must be status, start, stop or restart, not '$action'" ;; esac

if have systemctl && [ -d /run/systemd/system ]; then
	mgr=systemd
elif have rc-service; then
	mgr=openrc
elif have service || [ -d /etc/init.d ]; then
	mgr=sysv
else
	die 127 "no service manager here (systemctl with a running systemd, rc-service or service); manage $name by hand"
fi

# act runs the action; its own output goes to stderr, so stdout stays the
# report (JSON when asked).
act() {
	case $mgr in
	systemd) systemctl "$action" -- "$name" ;;
	openrc) rc-service "$name" "$action" ;;
	sysv)
		if have service; then
			service "$name" "$action"
		else
			"/etc/init.d/$name" "$action"
		fi
		;;
	esac
}
if [ "$action" != status ]; then
	act >&2 || die 1 "$action $name failed under $mgr (see above)"
fi

# status prints key=value lines the report is made of.
status() {
	case $mgr in
	systemd)
		systemctl show -p LoadState,ActiveState,SubState,UnitFileState,Description,MainPID,ActiveEnterTimestamp -- "$name" 2>/dev/null
		;;
	openrc)
		if ! rc-service -e "$name" 2>/dev/null && ! [ -x "/etc/init.d/$name" ]; then
			echo LoadState=not-found
			return
		fi
		out=$(rc-service "$name" status 2>&1)
		code=$?
		echo "RCStatus=$code"
		printf '%s\n' "$out" | sed -n 's/^.*status: */SubState=/p'
		if have rc-update && rc-update show -v 2>/dev/null | awk -v n="$name" '$1 == n && $3 != "" { f = 1 } END { exit !f }'; then
			echo UnitFileState=enabled
		elif have rc-update; then
			echo UnitFileState=disabled
		fi
		[ -r "/etc/init.d/$name" ] && sed -n 's/^description="\(.*\)"$/Description=\1/p' "/etc/init.d/$name" | head -n 1
		;;
	sysv)
		if ! [ -e "/etc/init.d/$name" ]; then
			echo LoadState=not-found
			return
		fi
		if have service; then
			out=$(service "$name" status 2>&1)
		else
			out=$("/etc/init.d/$name" status 2>&1)
		fi
		code=$?
		echo "RCStatus=$code"
		printf 'SubState=%s\n' "$(printf '%s\n' "$out" | head -n 1)"
		en=
		for f in /etc/rc[2345].d/[SK][0-9][0-9]"$name" /etc/rc[2345].d/[SK]"$name"; do
			[ -e "$f" ] || continue
			case ${f##*/} in S*) en=enabled ;; K*) [ -n "$en" ] || en=disabled ;; esac
		done
		[ -z "$en" ] || echo "UnitFileState=$en"
		sed -n 's/^# Short-Description: *\(.*\)$/Description=\1/p' "/etc/init.d/$name" | head -n 1
		;;
	esac
}

json=0
ops_json && json=1
status | awk -v json="$json" -v name="$name" -v mgr="$mgr" -v action="$action" "$OPS_AWK"'
{ i = index($0, "="); if (i > 0) v[substr($0, 1, i - 1)] = substr($0, i + 1) }
END {
	found = (v["LoadState"] != "not-found")
	sub_ = v["SubState"]
	if (mgr == "systemd") {
		a = v["ActiveState"]
		if (a == "active" || a == "reloading" || a == "activating") active = "active"
		else if (a == "failed") active = "failed"
		else if (a == "inactive" || a == "deactivating") active = "inactive"
		else active = "unknown"
		pid = v["MainPID"]; if (pid == "0") pid = ""
		since = v["ActiveEnterTimestamp"]
	} else if (found) {
		rc = v["RCStatus"]
		if (rc == "0") active = "active"
		else if (mgr == "openrc" && sub_ ~ /crashed/) active = "failed"
		else if (rc == "1" || rc == "2") active = (mgr == "sysv" ? "failed" : "inactive")
		else if (rc == "3") active = "inactive"
		else active = "unknown"
	}
	if (!found) active = "unknown"
	en = v["UnitFileState"]
	if (en == "" || en == "static" || en == "generated" || en == "indirect") en = (en == "" ? "unknown" : en)
	if (json) {
		printf "{\"service\":%s,\"manager\":%s,\"action\":%s,\"found\":%s,\"active\":%s,\"state\":%s,\"enabled\":%s,\"description\":%s,\"pid\":%s,\"since\":%s}\n", js(name), js(mgr), js(action), (found ? "true" : "false"), js(active), js(sub_), js(en), js(trim(v["Description"])), jn(pid), (since == "" ? "null" : js(since))
	} else if (!found) {
		printf "%s: no such service under %s\n", name, mgr
	} else {
		printf "%s (%s): %s", name, mgr, active
		if (sub_ != "" && sub_ != active) printf " (%s)", sub_
		printf ", %s", en
		if (pid != "") printf ", pid %s", pid
		if (trim(v["Description"]) != "") printf " - %s", trim(v["Description"])
		printf "\n"
	}
	# LSB status codes: 0 running, 3 not running, 4 unknown.
	if (!found) exit 4
	if (action == "stop") exit (active == "active" ? 1 : 0)
	if (active == "active") exit 0
	exit (action == "status" ? 3 : 1)
}'
