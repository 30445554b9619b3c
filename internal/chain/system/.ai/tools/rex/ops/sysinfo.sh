#!/bin/sh
# rex: executor_id: rex/core/runtimes/sh/sh
# rex: version: "1.0.0"
# rex: description: "Operating system, kernel, uptime, load, CPUs and memory"
# rex: files: [lib/ops.sh]
# rex: config_schema:
# rex:   type: object
# rex:   properties: {}
# rex:   additionalProperties: false
OPS_TOOL=rex/ops/sysinfo
case $0 in */*) OPS_DIR=${0%/*} ;; *) OPS_DIR=. ;; esac
. "$OPS_DIR/lib/ops.sh"

osr=/etc/os-release
[ -r "$osr" ] || osr=/usr/lib/os-release
json=0
ops_json && json=1

# One awk program reads the files; uname answers for the kernel. What a
# system does not have (no /proc on a BSD) is left empty and said once.
awk -v json="$json" -v osr="$osr" -v host="$(uname -n 2>/dev/null)" -v kernel="$(uname -r 2>/dev/null)" \
	-v arch="$(uname -m 2>/dev/null)" -v sys="$(uname -s 2>/dev/null)" "$OPS_AWK"'
function readkv(file, sep,   line, k, v, n) {
	n = 0
	while ((getline line < file) > 0) {
		i = index(line, sep)
		if (i == 0) continue
		k = trim(substr(line, 1, i - 1)); v = trim(substr(line, i + 1))
		gsub(/^"|"$/, "", v)
		kv[file, k] = v; n++
	}
	close(file)
	return n
}
function dur(s,   d, h, m, out) {
	d = int(s / 86400); h = int((s % 86400) / 3600); m = int((s % 3600) / 60)
	out = ""
	if (d > 0) out = d "d "
	return out sprintf("%dh %02dm", h, m)
}
BEGIN {
	missing = ""
	if (readkv(osr, "=") == 0) missing = missing " " osr
	os = kv[osr, "PRETTY_NAME"]; if (os == "") os = sys
	osid = kv[osr, "ID"]; osver = kv[osr, "VERSION_ID"]

	up = ""
	if ((getline line < "/proc/uptime") > 0) { split(line, a, " "); up = int(a[1]) } else missing = missing " /proc/uptime"
	close("/proc/uptime")
	l1 = l5 = l15 = ""
	if ((getline line < "/proc/loadavg") > 0) { split(line, a, " "); l1 = a[1]; l5 = a[2]; l15 = a[3] } else missing = missing " /proc/loadavg"
	close("/proc/loadavg")

	cpus = 0; model = ""
	while ((getline line < "/proc/cpuinfo") > 0) {
		if (line ~ /^processor[ \t]*:/) cpus++
		if (model == "" && line ~ /^(model name|Hardware|cpu model)[ \t]*:/) { model = trim(substr(line, index(line, ":") + 1)) }
	}
	close("/proc/cpuinfo")
	if (cpus == 0) { cpus = ""; missing = missing " /proc/cpuinfo" }

	mt = ma = st = sf = ""
	if (readkv("/proc/meminfo", ":") > 0) {
		mt = kv["/proc/meminfo", "MemTotal"]; sub(/ kB$/, "", mt)
		ma = kv["/proc/meminfo", "MemAvailable"]; sub(/ kB$/, "", ma)
		if (ma == "") {
			# kernels before 3.14: free + buffers + cached
			ma = kv["/proc/meminfo", "MemFree"] + kv["/proc/meminfo", "Buffers"] + kv["/proc/meminfo", "Cached"]
		}
		st = kv["/proc/meminfo", "SwapTotal"]; sub(/ kB$/, "", st)
		sf = kv["/proc/meminfo", "SwapFree"]; sub(/ kB$/, "", sf)
	} else missing = missing " /proc/meminfo"
	pct = ""
	if (mt > 0) pct = sprintf("%.1f", (mt - ma) * 100 / mt)
	su = ""
	if (st != "") su = st - sf

	if (missing != "") printf "rex/ops/sysinfo: cannot read%s here; those fields are empty\n", missing > "/dev/stderr"

	if (json) {
		printf "{\"hostname\":%s,\"os\":%s,\"os_id\":%s,\"os_version\":%s,\"kernel\":%s,\"arch\":%s,", js(host), js(os), js(osid), js(osver), js(kernel), js(arch)
		printf "\"uptime_seconds\":%s,\"uptime\":%s,\"load1\":%s,\"load5\":%s,\"load15\":%s,", jn(up), (up == "" ? "null" : js(dur(up))), jn(l1), jn(l5), jn(l15)
		printf "\"cpus\":%s,\"cpu_model\":%s,\"mem_total_kb\":%s,\"mem_available_kb\":%s,\"mem_used_pct\":%s,\"swap_total_kb\":%s,\"swap_used_kb\":%s}\n", jn(cpus), js(model), jn(mt), jn(ma), jn(pct), jn(st), jn(su)
		exit 0
	}
	printf "hostname  %s\nos        %s\nkernel    %s (%s)\n", host, os, kernel, arch
	if (up != "") printf "uptime    %s\n", dur(up)
	if (l1 != "") printf "load      %s %s %s\n", l1, l5, l15
	if (cpus != "") printf "cpus      %s%s\n", cpus, (model == "" ? "" : " × " model)
	if (mt != "") printf "memory    %.1f GiB of %.1f GiB used (%s%%)\n", (mt - ma) / 1048576, mt / 1048576, pct
	if (st > 0) printf "swap      %.1f GiB of %.1f GiB used\n", su / 1048576, st / 1048576
}' </dev/null
