package chain

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// The rex/ops tools run for real on Debian in cmd/rex (loopback sshd hosts,
// --json parsed). Here they run on the two other userlands they support,
// made from real parts where this machine has them: Alpine is BusyBox (every
// command but apk, rc-service and rc-update is a real BusyBox applet),
// RHEL is coreutils with rpm, dnf, systemctl, journalctl and ss answering
// with outputs recorded from those systems. Files the tools read (os-release,
// passwd, /run/systemd) are bind-mounted in a private mount namespace, so the
// tools run exactly as shipped.

const opsDir = "system/.ai/tools/rex/ops"

// fixture is what a command prints for one argument list, and its exit.
type fixture struct {
	out  string
	code int
}

// shim writes an executable that answers each argument list with its
// fixture, and fails loudly on any other.
func shim(t *testing.T, dir, name string, cases map[string]fixture) {
	t.Helper()
	var b strings.Builder
	b.WriteString("#!/bin/sh\ncase \"$*\" in\n")
	keys := make([]string, 0, len(cases))
	for k := range cases {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		f := cases[k]
		b.WriteString(shellQuote(k) + ")\n")
		if f.out != "" {
			b.WriteString("cat <<'REX_FIXTURE_END'\n" + f.out + "\nREX_FIXTURE_END\n")
		}
		b.WriteString("exit " + itoa(f.code) + " ;;\n")
	}
	b.WriteString("esac\necho \"" + name + ": no fixture for: $*\" >&2\nexit 99\n")
	if err := os.WriteFile(filepath.Join(dir, name), []byte(b.String()), 0o755); err != nil {
		t.Fatal(err)
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

// userland is a PATH for one distribution and the files it binds.
type userland struct {
	name  string
	bin   string            // the only directory in PATH
	sh    string            // the shell that runs the tools
	binds map[string]string // target path → content
	dirs  []string          // directories to create under a fresh /run
}

// busyboxLand is an Alpine-like userland: every applet of the real BusyBox.
func busyboxLand(t *testing.T) *userland {
	t.Helper()
	bb, err := exec.LookPath("busybox")
	if err != nil {
		t.Fatal("busybox is needed for the Alpine tests (.ci/run installs it)")
	}
	out, err := exec.Command(bb, "--list").Output()
	if err != nil {
		t.Fatal(err)
	}
	bin := t.TempDir()
	for _, a := range strings.Fields(string(out)) {
		if a == "busybox" || strings.Contains(a, "/") {
			continue
		}
		if err := os.Symlink(bb, filepath.Join(bin, a)); err != nil {
			t.Fatal(err)
		}
	}
	return &userland{name: "alpine", bin: bin, sh: filepath.Join(bin, "sh"), binds: map[string]string{
		"/etc/os-release": "NAME=\"Alpine Linux\"\nID=alpine\nVERSION_ID=3.20.3\nPRETTY_NAME=\"Alpine Linux v3.20\"\nHOME_URL=\"https://alpinelinux.org/\"\n",
		"/etc/passwd":     "root:x:0:0:root:/root:/bin/ash\nbin:x:1:1:bin:/bin:/sbin/nologin\nsshd:x:22:22:sshd:/dev/null:/sbin/nologin\nnobody:x:65534:65534:nobody:/:/sbin/nologin\nalice:x:1000:1000:Alice,,,:/home/alice:/bin/ash\n",
	}}
}

// coreLand is a RHEL-like userland: the host's coreutils and friends, no
// Debian package tools.
func coreLand(t *testing.T) *userland {
	t.Helper()
	bin := t.TempDir()
	for _, c := range []string{"sh", "bash", "awk", "sed", "grep", "cat", "head", "tail", "sort", "tr", "uname", "df", "ls", "who", "getent", "printf", "cut", "wc", "id"} {
		p, err := exec.LookPath(c)
		if err != nil {
			t.Fatalf("%s is needed for the RHEL tests", c)
		}
		if c == "sh" {
			// RHEL's sh is bash.
			if p, err = exec.LookPath("bash"); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.Symlink(p, filepath.Join(bin, c)); err != nil {
			t.Fatal(err)
		}
	}
	return &userland{name: "rhel", bin: bin, sh: filepath.Join(bin, "sh"), binds: map[string]string{
		"/etc/os-release": "NAME=\"Rocky Linux\"\nVERSION=\"9.4 (Blue Onyx)\"\nID=\"rocky\"\nID_LIKE=\"rhel centos fedora\"\nVERSION_ID=\"9.4\"\nPRETTY_NAME=\"Rocky Linux 9.4 (Blue Onyx)\"\n",
		"/etc/passwd":     "root:x:0:0:root:/root:/bin/bash\nbin:x:1:1:bin:/bin:/sbin/nologin\nsshd:x:74:74:Privilege-separated SSH:/usr/share/empty.sshd:/sbin/nologin\nnobody:x:65534:65534:Kernel Overflow User:/:/sbin/nologin\nbob:x:1001:1001:Bob:/home/bob:/bin/bash\n",
	}, dirs: []string{"systemd/system", "systemd/journal"}}
}

// bindScript runs in a private mount namespace: it binds each file given
// as a pair of arguments, mounts a fresh /run with the directories listed,
// then execs the rest with PATH set to its first argument.
const bindScript = `set -e
toolpath=$1; shift
n=$1; shift
while [ "$n" -gt 0 ]; do mount --bind "$1" "$2"; shift 2; n=$((n-1)); done
d=$1; shift
if [ "$d" -gt 0 ]; then mount -t tmpfs tmpfs /run; fi
while [ "$d" -gt 0 ]; do mkdir -p "/run/$1"; shift; d=$((d-1)); done
PATH=$toolpath; export PATH
exec "$@"`

// run runs an ops tool in the userland with params; it returns stdout,
// stderr and the exit code.
func (u *userland) run(t *testing.T, tool string, params map[string]string, asJSON bool) (string, string, int) {
	t.Helper()
	files := t.TempDir()
	args := []string{"--mount", "--propagation", "private", "--", "/bin/sh", "-c", bindScript, "sh", u.bin, itoa(len(u.binds))}
	targets := make([]string, 0, len(u.binds))
	for k := range u.binds {
		targets = append(targets, k)
	}
	sort.Strings(targets)
	for i, target := range targets {
		src := filepath.Join(files, itoa(i))
		if err := os.WriteFile(src, []byte(u.binds[target]), 0o644); err != nil {
			t.Fatal(err)
		}
		args = append(args, src, target)
	}
	args = append(args, itoa(len(u.dirs)))
	args = append(args, u.dirs...)
	tp, err := filepath.Abs(filepath.Join(opsDir, tool+".sh"))
	if err != nil {
		t.Fatal(err)
	}
	args = append(args, u.sh, tp)
	cmd := exec.Command("unshare", args...)
	cmd.Env = []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "LANG=C", "HOME=" + t.TempDir()}
	if asJSON {
		cmd.Env = append(cmd.Env, "REX_OUTPUT=json")
	}
	for k, v := range params {
		cmd.Env = append(cmd.Env, "REX_PARAM_"+strings.ToUpper(k)+"="+v)
	}
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err = cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(errb.String(), "no fixture for") || strings.Contains(errb.String(), "unshare:") || strings.Contains(errb.String(), "mount:") {
		t.Fatalf("%s %s: %s", u.name, tool, errb.String())
	}
	return out.String(), errb.String(), code
}

// runJSON runs a tool for JSON and decodes its one object.
func (u *userland) runJSON(t *testing.T, tool string, params map[string]string, wantCode int) map[string]any {
	t.Helper()
	out, errOut, code := u.run(t, tool, params, true)
	if code != wantCode {
		t.Fatalf("%s %s %v: exit %d, want %d\nstdout %s\nstderr %s", u.name, tool, params, code, wantCode, out, errOut)
	}
	var v map[string]any
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		t.Fatalf("%s %s: output is not one JSON object: %v\n%s", u.name, tool, err, out)
	}
	return v
}

func field(t *testing.T, v any, path ...any) any {
	t.Helper()
	cur := v
	for _, p := range path {
		switch k := p.(type) {
		case string:
			m, ok := cur.(map[string]any)
			if !ok {
				t.Fatalf("%v: not an object at %q", v, k)
			}
			cur = m[k]
		case int:
			a, ok := cur.([]any)
			if !ok || k >= len(a) {
				t.Fatalf("%v: no item %d", v, k)
			}
			cur = a[k]
		}
	}
	return cur
}

func wantField(t *testing.T, v any, want any, path ...any) {
	t.Helper()
	got := field(t, v, path...)
	if jg, jw := jsonText(got), jsonText(want); jg != jw {
		t.Errorf("%v: %s, want %s", path, jg, jw)
	}
}

func TestOpsAlpine(t *testing.T) {
	u := busyboxLand(t)
	shim(t, u.bin, "apk", map[string]fixture{
		"list --installed busybox": {out: "busybox-1.36.1-r29 x86_64 {busybox} (GPL-2.0-only) [installed]"},
		"list --installed nginx":   {},
		"version -l <": {out: "Installed:                                Available:\n" +
			"busybox-1.36.1-r29                      < 1.36.1-r30\n" +
			"libcrypto3-3.3.2-r0                     < 3.3.2-r1"},
	})
	shim(t, u.bin, "rc-service", map[string]fixture{
		"-e sshd":       {code: 0},
		"sshd status":   {out: " * status: started"},
		"-e nginx":      {code: 0},
		"nginx status":  {out: " * status: stopped", code: 3},
		"nginx start":   {out: " * Starting nginx ... [ ok ]"},
		"-e nope":       {code: 1},
		"crond status":  {out: " * status: crashed", code: 32},
		"-e crond":      {code: 0},
		"sshd restart":  {out: " * Stopping sshd ... [ ok ]\n * Starting sshd ... [ ok ]"},
		"nginx restart": {out: " * ERROR: nginx failed to start", code: 1},
	})
	shim(t, u.bin, "rc-update", map[string]fixture{
		"show -v": {out: "                 sshd |      default\n                nginx |                                 \n                crond |      default"},
	})

	v := u.runJSON(t, "sysinfo", nil, 0)
	wantField(t, v, "Alpine Linux v3.20", "os")
	wantField(t, v, "alpine", "os_id")
	wantField(t, v, "3.20.3", "os_version")
	if c, ok := field(t, v, "cpus").(float64); !ok || c < 1 {
		t.Errorf("cpus %v", field(t, v, "cpus"))
	}
	if m, ok := field(t, v, "mem_total_kb").(float64); !ok || m <= 0 {
		t.Errorf("mem_total_kb %v", field(t, v, "mem_total_kb"))
	}

	v = u.runJSON(t, "packages", map[string]string{"names": "busybox,nginx"}, 1)
	wantField(t, v, "apk", "manager")
	wantField(t, v, "1.36.1-r29", "packages", 0, "installed")
	wantField(t, v, "1.36.1-r30", "packages", 0, "available")
	wantField(t, v, nil, "packages", 1, "installed")
	wantField(t, v, 1, "missing")
	wantField(t, v, 2, "pending")
	wantField(t, v, map[string]any{"name": "libcrypto3", "installed": "3.3.2-r0", "available": "3.3.2-r1"}, "updates", 1)

	v = u.runJSON(t, "service", map[string]string{"name": "sshd"}, 0)
	wantField(t, v, "openrc", "manager")
	wantField(t, v, "active", "active")
	wantField(t, v, "enabled", "enabled")
	v = u.runJSON(t, "service", map[string]string{"name": "nginx"}, 3)
	wantField(t, v, "inactive", "active")
	wantField(t, v, "disabled", "enabled")
	v = u.runJSON(t, "service", map[string]string{"name": "crond"}, 3)
	wantField(t, v, "failed", "active")
	u.runJSON(t, "service", map[string]string{"name": "nope"}, 4)
	v = u.runJSON(t, "service", map[string]string{"name": "sshd", "action": "restart"}, 0)
	wantField(t, v, "restart", "action")
	_, errOut, code := u.run(t, "service", map[string]string{"name": "nginx", "action": "restart"}, true)
	if code != 1 || !strings.Contains(errOut, "restart nginx failed under openrc") || !strings.Contains(errOut, "nginx failed to start") {
		t.Errorf("a failed restart: exit %d, stderr %q", code, errOut)
	}

	v = u.runJSON(t, "users", nil, 0)
	wantField(t, v, 2, "count")
	wantField(t, v, "root", "users", 0, "name")
	wantField(t, v, map[string]any{"name": "alice", "uid": 1000, "gid": 1000, "comment": "Alice", "home": "/home/alice", "shell": "/bin/ash", "login": true, "sessions": 0}, "users", 1)
	v = u.runJSON(t, "users", map[string]string{"all": "true"}, 0)
	wantField(t, v, 5, "count")

	// BusyBox df and netstat are real: the tools parse them.
	v = u.runJSON(t, "disk", map[string]string{"path": "/", "threshold": "100"}, 0)
	wantField(t, v, "/", "mounts", 0, "mount")
	if p, ok := field(t, v, "mounts", 0, "use_pct").(float64); !ok || p < 0 || p > 100 {
		t.Errorf("use_pct %v", p)
	}
	v = u.runJSON(t, "ports", nil, 0)
	if s := field(t, v, "source"); s != "netstat" {
		t.Errorf("ports on BusyBox came from %v, want netstat", s)
	}

	// No journal on OpenRC: one sentence that says what to pass instead.
	_, errOut, code = u.run(t, "logs", map[string]string{"unit": "sshd"}, true)
	if code != 2 || !strings.Contains(errOut, "no systemd journal here for sshd; pass --param file=/var/log/messages") {
		t.Errorf("logs of a unit on Alpine: exit %d %q", code, errOut)
	}
	log := filepath.Join(t.TempDir(), "messages")
	os.WriteFile(log, []byte("one\ntwo \"quoted\"\nthree\n"), 0o644)
	v = u.runJSON(t, "logs", map[string]string{"file": log, "lines": "2"}, 0)
	wantField(t, v, []any{"two \"quoted\"", "three"}, "lines")

	// A missing command degrades with a sentence, not a stack of errors.
	os.Remove(filepath.Join(u.bin, "df"))
	_, errOut, code = u.run(t, "disk", nil, false)
	if code != 127 || strings.TrimSpace(errOut) != "rex/ops/disk: df is not installed here; install coreutils (or busybox) to check disks" {
		t.Errorf("disk without df: exit %d %q", code, errOut)
	}
}

func TestOpsRHEL(t *testing.T) {
	u := coreLand(t)
	rpmQF := "-q --qf %{NAME}\\t%|EPOCH?{%{EPOCH}:}:{}|%{VERSION}-%{RELEASE}\\n -- "
	shim(t, u.bin, "rpm", map[string]fixture{
		rpmQF + "bash openssl nope": {out: "bash\t5.1.8-9.el9\nopenssl\t1:3.0.7-27.el9\npackage nope is not installed", code: 1},
		"-qa --qf %{NAME}\\t%|EPOCH?{%{EPOCH}:}:{}|%{VERSION}-%{RELEASE}\\n": {out: "bash\t5.1.8-9.el9\nopenssl\t1:3.0.7-27.el9\nkernel\t5.14.0-427.13.1.el9_4"},
	})
	shim(t, u.bin, "dnf", map[string]fixture{
		"-q -C check-update": {code: 100, out: "\nbash.x86_64                     5.1.8-10.el9                baseos\nopenssl.x86_64                  1:3.0.7-28.el9              baseos\nkernel.x86_64                   5.14.0-427.16.1.el9_4       baseos\nObsoleting Packages\ngrub2-tools.x86_64              1:2.06-80.el9               baseos"},
	})
	showProps := "show -p LoadState,ActiveState,SubState,UnitFileState,Description,MainPID,ActiveEnterTimestamp -- "
	shim(t, u.bin, "systemctl", map[string]fixture{
		showProps + "sshd":  {out: "MainPID=812\nLoadState=loaded\nActiveState=active\nSubState=running\nUnitFileState=enabled\nDescription=OpenSSH server daemon\nActiveEnterTimestamp=Mon 2026-01-12 09:00:01 UTC"},
		showProps + "httpd": {out: "MainPID=0\nLoadState=loaded\nActiveState=failed\nSubState=failed\nUnitFileState=disabled\nDescription=The Apache HTTP Server\nActiveEnterTimestamp="},
		showProps + "nope":  {out: "MainPID=0\nLoadState=not-found\nActiveState=inactive\nSubState=dead\nUnitFileState=\nDescription=nope.service\nActiveEnterTimestamp="},
		"stop -- sshd":      {},
	})
	shim(t, u.bin, "journalctl", map[string]fixture{
		"--no-pager -q -o short-iso -n 3 -u sshd --since 1 hour ago": {out: "2026-01-12T09:00:01+0000 rocky sshd[812]: Server listening on 0.0.0.0 port 22.\n2026-01-12T09:00:01+0000 rocky sshd[812]: Server listening on :: port 22.\n2026-01-12T09:14:22+0000 rocky sshd[1290]: Accepted publickey for bob from 10.0.0.5 port 50522 ssh2"},
	})
	shim(t, u.bin, "ss", map[string]fixture{
		"-lntup": {out: "Netid State  Recv-Q Send-Q Local Address:Port  Peer Address:PortProcess\n" +
			"udp   UNCONN 0      0          127.0.0.1:323        0.0.0.0:*    users:((\"chronyd\",pid=701,fd=5))\n" +
			"udp   UNCONN 0      0              [::1]:323           [::]:*    users:((\"chronyd\",pid=701,fd=6))\n" +
			"tcp   LISTEN 0      128          0.0.0.0:22         0.0.0.0:*    users:((\"sshd\",pid=812,fd=3))\n" +
			"tcp   LISTEN 0      128             [::]:22            [::]:*    users:((\"sshd\",pid=812,fd=4))\n" +
			"tcp   LISTEN 0      511    192.168.1.10%eth0:443      0.0.0.0:*"},
	})

	v := u.runJSON(t, "sysinfo", nil, 0)
	wantField(t, v, "Rocky Linux 9.4 (Blue Onyx)", "os")
	wantField(t, v, "rocky", "os_id")

	v = u.runJSON(t, "packages", map[string]string{"names": "bash openssl nope"}, 1)
	wantField(t, v, "dnf", "manager")
	wantField(t, v, map[string]any{"name": "bash", "installed": "5.1.8-9.el9", "available": "5.1.8-10.el9"}, "packages", 0)
	wantField(t, v, map[string]any{"name": "openssl", "installed": "1:3.0.7-27.el9", "available": "1:3.0.7-28.el9"}, "packages", 1)
	wantField(t, v, map[string]any{"name": "nope", "installed": nil, "available": nil}, "packages", 2)
	wantField(t, v, 3, "pending") // obsoleted packages are not updates

	v = u.runJSON(t, "service", map[string]string{"name": "sshd"}, 0)
	wantField(t, v, map[string]any{"service": "sshd", "manager": "systemd", "action": "status", "found": true, "active": "active", "state": "running",
		"enabled": "enabled", "description": "OpenSSH server daemon", "pid": 812, "since": "Mon 2026-01-12 09:00:01 UTC"})
	v = u.runJSON(t, "service", map[string]string{"name": "httpd"}, 3)
	wantField(t, v, "failed", "active")
	u.runJSON(t, "service", map[string]string{"name": "nope"}, 4)
	// stop succeeds when the unit is down afterwards; the fixture says it
	// still runs, so the tool says the stop did not take.
	_, _, code := u.run(t, "service", map[string]string{"name": "sshd", "action": "stop"}, true)
	if code != 1 {
		t.Errorf("stop of a unit that stays active: exit %d, want 1", code)
	}
	out, _, code := u.run(t, "service", map[string]string{"name": "sshd"}, false)
	if code != 0 || out != "sshd (systemd): active (running), enabled, pid 812 - OpenSSH server daemon\n" {
		t.Errorf("readable status: %d %q", code, out)
	}

	v = u.runJSON(t, "logs", map[string]string{"unit": "sshd", "lines": "3", "since": "1 hour ago"}, 0)
	wantField(t, v, "journal:sshd", "source")
	wantField(t, v, 3, "count")

	v = u.runJSON(t, "ports", nil, 0)
	wantField(t, v, "ss", "source")
	wantField(t, v, 5, "count")
	wantField(t, v, map[string]any{"proto": "tcp", "address": "0.0.0.0", "port": 22, "program": "sshd"}, "listening", 0)
	wantField(t, v, map[string]any{"proto": "tcp", "address": "::", "port": 22, "program": "sshd"}, "listening", 1)
	wantField(t, v, map[string]any{"proto": "udp", "address": "127.0.0.1", "port": 323, "program": "chronyd"}, "listening", 2)
	wantField(t, v, map[string]any{"proto": "udp", "address": "::1", "port": 323, "program": "chronyd"}, "listening", 3)
	wantField(t, v, map[string]any{"proto": "tcp", "address": "192.168.1.10", "port": 443, "program": nil}, "listening", 4)

	v = u.runJSON(t, "users", nil, 0)
	wantField(t, v, 2, "count")
	wantField(t, v, "root", "users", 0, "name")
	wantField(t, v, "bob", "users", 1, "name")
}
