package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/rexconsole/rex/internal/sshtest"
)

// runIn runs rex in dir with stdin and extra environment, and returns
// stdout, stderr and the exit status.
func (f *sshFleet) runIn(dir, stdin string, env []string, args ...string) (string, string, int) {
	f.t.Helper()
	var out, errOut bytes.Buffer
	cmd := f.cmd(args...)
	cmd.Dir = dir
	cmd.Env = append(append([]string(nil), cmd.Env...), env...)
	cmd.Stdin = strings.NewReader(stdin)
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return out.String(), errOut.String(), ee.ExitCode()
	}
	if err != nil {
		f.t.Fatal(err)
	}
	return out.String(), errOut.String(), 0
}

// jsonLines decodes `tool run --json` output: one object per target.
func jsonLines(t *testing.T, out string) map[string]map[string]any {
	t.Helper()
	res := map[string]map[string]any{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var v map[string]any
		if err := json.Unmarshal([]byte(line), &v); err != nil {
			t.Fatalf("not a JSON line: %q (%v)\n%s", line, err, out)
		}
		res[v["target"].(string)] = v
	}
	return res
}

// TestToolNewCheckRun: `tool new` writes a skeleton for every runtime,
// `tool check` passes it, and it runs on local and on a loopback sshd host,
// readable and as JSON; `tool list` shows tools only, `--all` the rest, and
// running a runtime says what it is.
func TestToolNewCheckRun(t *testing.T) {
	f := newSSHFleet(t, 1, false)
	project := filepath.Join(f.home, "work")
	os.MkdirAll(project, 0o755)
	for _, rt := range []string{"sh", "bash", "python", "node"} {
		id := "my/hello-" + rt
		out, errOut, code := f.runIn(project, "", nil, "tool", "new", id, "--runtime", rt)
		if code != 0 {
			t.Fatalf("tool new %s: %d %s %s", rt, code, out, errOut)
		}
		if rt == "sh" && !strings.Contains(errOut, "no project here yet: starting one in "+project) {
			t.Errorf("the first tool new does not say it starts a project: %q", errOut)
		}
		out, errOut, code = f.runIn(project, "", nil, "tool", "check", id)
		if code != 0 || !strings.Contains(out, "syntax: ") || !strings.Contains(out, id+" looks right") {
			t.Fatalf("tool check %s: %d\n%s%s", rt, code, out, errOut)
		}
		out, errOut, code = f.runIn(project, "", nil, "tool", "run", id, "--param", "name=op", "--target", "local,h1")
		if code != 0 {
			t.Fatalf("tool run %s: %d\n%s%s", rt, code, out, errOut)
		}
		for _, host := range []string{"local", "h1"} {
			want := `hello op from `
			if rt == "python" {
				want = `{"greeting": "hello", "name": "op"`
			}
			if !regexp.MustCompile(`(?m)^` + host + `: +` + regexp.QuoteMeta(want)).MatchString(out) {
				t.Errorf("%s on %s: %q", rt, host, out)
			}
		}
		out, errOut, code = f.runIn(project, "", nil, "tool", "run", id, "--json", "--target", "local,h1")
		if code != 0 {
			t.Fatalf("tool run --json %s: %d\n%s%s", rt, code, out, errOut)
		}
		for host, v := range jsonLines(t, out) {
			r, ok := v["result"].(map[string]any)
			if !ok || r["greeting"] != "hello" || r["name"] != "world" || v["exit_code"] != float64(0) {
				t.Errorf("%s --json on %s: %v", rt, host, v)
			}
		}
	}
	// --user writes into the user space, which every project sees.
	out, errOut, code := f.runIn(project, "", nil, "tool", "new", "my/mine", "--user")
	userFile := filepath.Join(f.home, ".config", "rex", ".ai", "tools", "my", "mine.sh")
	if _, err := os.Stat(userFile); code != 0 || err != nil || !strings.Contains(out, "created "+userFile+" (user space)") {
		t.Errorf("tool new --user: %d %q %q", code, out, errOut)
	}
	if out, _, _ := f.runIn(f.home, "", nil, "tool", "run", "my/mine", "--param", "name=me"); !strings.Contains(out, "local: hello me from ") {
		t.Errorf("the user tool from another directory: %q", out)
	}
	// A second tool new for the same id writes nothing.
	before, _ := os.ReadFile(filepath.Join(project, ".ai/tools/my/hello-sh.sh"))
	_, errOut, code = f.runIn(project, "", nil, "tool", "new", "my/hello-sh", "--runtime", "python")
	after, _ := os.ReadFile(filepath.Join(project, ".ai/tools/my/hello-sh.sh"))
	if code == 0 || !strings.Contains(errOut, "already exists; nothing was written") || !bytes.Equal(before, after) {
		t.Errorf("tool new over an existing tool: %d %q", code, errOut)
	}
	// A broken tool fails its check with the reason.
	os.WriteFile(filepath.Join(project, ".ai/tools/my/broken.sh"), []byte("#!/bin/sh\n# rex: executor_id: rex/core/runtimes/sh/sh\nif then fi\n"), 0o755)
	out, _, code = f.runIn(project, "", nil, "tool", "check", "my/broken")
	if code != 1 || !strings.Contains(out, "FAIL syntax (sh): ") {
		t.Errorf("check of a broken tool: %d %q", code, out)
	}

	out, errOut, _ = f.runIn(project, "", nil, "tool", "list")
	if !strings.Contains(out, "my/hello-python") || !strings.Contains(out, "rex/ops/disk") || strings.Contains(out, "rex/core/runtimes") {
		t.Errorf("tool list: %q", out)
	}
	if !strings.Contains(errOut, "not shown; rex tool list --all lists them") {
		t.Errorf("tool list does not say runtimes are hidden: %q", errOut)
	}
	out, _, _ = f.runIn(project, "", nil, "tool", "list", "--all")
	if !strings.Contains(out, "rex/core/runtimes/bash/bash") || !strings.Contains(out, "rex/core/primitives/execute") {
		t.Errorf("tool list --all: %q", out)
	}
	out, errOut, code = f.runIn(project, "", nil, "tool", "run", "rex/core/runtimes/bash/bash", "--target", "h1")
	if code == 0 || strings.Contains(out+errOut, "command not found") || strings.Count(strings.TrimSpace(errOut), "\n") != 0 ||
		!strings.Contains(errOut, "is a runtime, not a tool") {
		t.Errorf("running a runtime: %d %q %q", code, out, errOut)
	}
	out, errOut, code = f.runIn(project, "", nil, "tool", "run", "rex/core/primitives/execute")
	if code == 0 || !strings.Contains(errOut, "is the primitive that runs the command a runtime builds") {
		t.Errorf("running the primitive: %d %q %q", code, out, errOut)
	}
	out, _, code = f.runIn(project, "", nil, "tool", "show", "rex/ops/service")
	for _, want := range []string{"Status, start, stop or restart a service", "name    string", "action  string  status", "status|start|stop|restart",
		"rex tool run rex/ops/service --param name=NAME", "2. runtime rex/core/runtimes/sh/sh"} {
		if code != 0 || !strings.Contains(out, want) {
			t.Errorf("tool show lacks %q:\n%s", want, out)
		}
	}
}

// TestOpsToolsOnSSH runs every rex/ops tool on two loopback sshd hosts
// (Debian here) with --json and checks what each reports.
func TestOpsToolsOnSSH(t *testing.T) {
	f := newSSHFleet(t, 2, false)
	// A log file the logs tool reads on each host.
	for _, h := range []string{"h1", "h2"} {
		os.WriteFile(filepath.Join(f.hostHome(h), "app.log"), []byte("one\ntwo\nthree "+h+"\n"), 0o644)
	}
	run := func(wantCode int, tool string, params ...string) map[string]map[string]any {
		t.Helper()
		args := []string{"tool", "run", "rex/ops/" + tool, "--json", "--target", "h1,h2"}
		for _, p := range params {
			args = append(args, "--param", p)
		}
		out, errOut, code := f.runIn(f.home, "", nil, args...)
		if code != wantCode {
			t.Fatalf("%s: exit %d, want %d\n%s%s", tool, code, wantCode, out, errOut)
		}
		res := jsonLines(t, out)
		if len(res) != 2 {
			t.Fatalf("%s: %d results:\n%s", tool, len(res), out)
		}
		for h, v := range res {
			if _, ok := v["result"].(map[string]any); !ok {
				t.Fatalf("%s on %s: no JSON result: %v", tool, h, v)
			}
		}
		return res
	}
	result := func(v map[string]any) map[string]any { return v["result"].(map[string]any) }

	for h, v := range run(0, "sysinfo") {
		r := result(v)
		hn, _ := os.Hostname()
		if r["os_id"] != "debian" || r["hostname"] != hn || r["kernel"] == "" || r["cpus"].(float64) < 1 || r["mem_total_kb"].(float64) <= 0 {
			t.Errorf("sysinfo on %s: %v", h, r)
		}
	}
	for h, v := range run(0, "disk", "path="+f.hostHome("h1"), "threshold=100") {
		r := result(v)
		m := r["mounts"].([]any)[0].(map[string]any)
		if len(r["mounts"].([]any)) != 1 || m["size_kb"].(float64) <= 0 || r["full"] != float64(0) {
			t.Errorf("disk on %s: %v", h, r)
		}
	}
	// A threshold of 0 makes every used file system full: exit 1.
	for h, v := range run(1, "disk", "path=/", "threshold=0") {
		if r := result(v); r["full"] != float64(1) || len(r["over"].([]any)) != 1 || v["exit_code"] != float64(1) {
			t.Errorf("disk over the threshold on %s: %v", h, v)
		}
	}
	for h, v := range run(0, "packages", "names=bash,coreutils", "updates=false") {
		r := result(v)
		p := r["packages"].([]any)
		if r["manager"] != "apt" || len(p) != 2 || p[0].(map[string]any)["installed"] == nil || r["missing"] != float64(0) {
			t.Errorf("packages on %s: %v", h, r)
		}
	}
	for h, v := range run(1, "packages", "names=no-such-package-rex", "updates=false") {
		if r := result(v); r["missing"] != float64(1) {
			t.Errorf("a missing package on %s: %v", h, r)
		}
	}
	// Debian here runs no systemd: the SysV script of ssh answers, and
	// the exit status follows LSB (0 running, 3 not).
	out, errOut, code := f.runIn(f.home, "", nil, "tool", "run", "rex/ops/service", "--json", "--target", "h1,h2", "--param", "name=ssh")
	for h, v := range jsonLines(t, out) {
		r, _ := v["result"].(map[string]any)
		want := map[string]float64{"active": 0, "inactive": 3}[r["active"].(string)]
		if r["manager"] != "sysv" || r["service"] != "ssh" || r["found"] != true || v["exit_code"] != want || r["description"] != "OpenBSD Secure Shell server" {
			t.Errorf("service on %s: %v (exit %d %s)", h, v, code, errOut)
		}
	}
	for h, v := range run(4, "service", "name=no-such-service") {
		if r := result(v); r["found"] != false || r["active"] != "unknown" {
			t.Errorf("an unknown service on %s: %v", h, r)
		}
	}
	for h, v := range run(0, "logs", "file=app.log", "lines=2") {
		// A relative path starts at the home directory.
		if r := result(v); jsonText(r["lines"]) != `["two","three `+h+`"]` || r["source"] != "file:"+filepath.Join(f.hostHome(h), "app.log") {
			t.Errorf("logs on %s: %v", h, r)
		}
	}
	// Each host's own sshd is listening.
	for h, v := range run(0, "ports", "protocol=tcp") {
		addr := f.hosts[0].Addr
		if h == "h2" {
			addr = f.hosts[1].Addr
		}
		_, port, _ := strings.Cut(addr, ":")
		found := false
		for _, l := range result(v)["listening"].([]any) {
			l := l.(map[string]any)
			if strconv.Itoa(int(l["port"].(float64))) == port && l["proto"] == "tcp" {
				found = true
			}
		}
		if !found {
			t.Errorf("ports on %s does not list sshd's port %s: %v", h, port, result(v))
		}
	}
	for h, v := range run(0, "users", "all=true") {
		found := false
		for _, u := range result(v)["users"].([]any) {
			if u.(map[string]any)["name"] == f.hosts[0].User {
				found = true
			}
		}
		if !found {
			t.Errorf("users on %s lacks %s: %v", h, f.hosts[0].User, result(v))
		}
	}
}

func jsonText(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// TestSecrets: a secret set from stdin reaches a tool on an sshd host as an
// environment variable and nowhere else: not the host's file system (its
// home, with rexd's cache and audit log), not the trace, not the --json
// output, not rex's own files; its echo is masked. A device's secret joins
// the tool's. Reserved names and values on the command line are refused.
func TestSecrets(t *testing.T) {
	f := newSSHFleet(t, 1, false)
	project := filepath.Join(f.home, "work")
	os.MkdirAll(filepath.Join(project, ".ai", "tools", "my"), 0o755)
	// CI has no Secret Service: the encrypted file is the store.
	env := []string{"REX_SECRETS_BACKEND=file", "REX_SECRETS_PASSPHRASE=correct horse battery"}
	const token, dbpass = "ghp_T0KEN-value-4f9a1c", "db-P4ss-77d2e0"
	for name, v := range map[string]string{"GITHUB_TOKEN": token, "DB_PASSWORD": dbpass} {
		out, errOut, code := f.runIn(project, v+"\n", env, "secret", "set", name)
		if code != 0 || !strings.Contains(out, "stored "+name+" in the encrypted file") {
			t.Fatalf("secret set %s: %d %q %q", name, code, out, errOut)
		}
	}
	out, _, code := f.runIn(project, "", env, "secret", "list")
	if code != 0 || out != "DB_PASSWORD\nGITHUB_TOKEN\n" {
		t.Errorf("secret list: %d %q", code, out)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"secret", "set", "PATH"}, "secret name PATH is refused"},
		{[]string{"secret", "set", "LD_PRELOAD"}, "names starting with LD_ are reserved"},
		{[]string{"secret", "set", "HOME"}, "secret name HOME is refused"},
		{[]string{"secret", "set", "TOKEN", "on-the-command-line"}, "a value on the command line would stay in shell history"},
	} {
		_, errOut, code := f.runIn(project, "x\n", env, c.args...)
		if code == 0 || !strings.Contains(errOut, c.want) {
			t.Errorf("%v: %d %q", c.args, code, errOut)
		}
	}
	// The device declares DB_PASSWORD for every tool run on it.
	reg, _ := os.ReadFile(f.registry())
	var r map[string]map[string]map[string]any
	json.Unmarshal(reg, &r)
	r["devices"]["h1"]["secrets"] = []string{"DB_PASSWORD"}
	b, _ := json.Marshal(r)
	os.WriteFile(f.registry(), b, 0o600)

	os.WriteFile(filepath.Join(project, ".ai/tools/my/deploy.sh"), []byte(`#!/bin/sh
# rex: executor_id: rex/core/runtimes/sh/sh
# rex: description: uses two secrets
# rex: secrets: [GITHUB_TOKEN]
echo "token=$GITHUB_TOKEN"
echo "db=$DB_PASSWORD" >&2
printf '%s' "$GITHUB_TOKEN" | cksum
printf '{"token":"%s","len":%d}\n' "$GITHUB_TOKEN" "${#GITHUB_TOKEN}" >&2
`), 0o755)
	out, errOut, code := f.runIn(project, "", env, "tool", "run", "my/deploy", "--target", "h1", "--trace")
	if code != 0 {
		t.Fatalf("tool run: %d\n%s%s", code, out, errOut)
	}
	sum, _ := exec.Command("sh", "-c", "printf '%s' '"+token+"' | cksum").Output()
	if !strings.Contains(out, "h1: token=***\n") || !strings.Contains(out, "h1: "+strings.TrimSpace(string(sum))) || !strings.Contains(out, "h1! db=***") {
		t.Errorf("the tool did not get the secrets, or their echo is not masked:\n%s", out)
	}
	if !strings.Contains(errOut, "GITHUB_TOKEN, DB_PASSWORD set when the process starts") {
		t.Errorf("trace does not name the secrets:\n%s", errOut)
	}
	jout, jerr, code := f.runIn(project, "", env, "tool", "run", "my/deploy", "--target", "h1", "--json")
	if code != 0 || !strings.Contains(jout, `"stderr":"db=***\n{\"token\":\"***\",\"len\":22}\n"`) {
		t.Errorf("--json: %d %s %s", code, jout, jerr)
	}
	for what, text := range map[string]string{"output": out, "trace": errOut, "--json output": jout + jerr} {
		if strings.Contains(text, token) || strings.Contains(text, dbpass) {
			t.Errorf("a secret's value is in the %s", what)
		}
	}
	// Nothing on the target holds a value: its home holds rexd's cache,
	// the tool's files and rexd's audit log, which must be there.
	audit := filepath.Join(f.hostHome("h1"), ".local", "state", "rexd", "audit.log")
	if b, err := os.ReadFile(audit); err != nil || !bytes.Contains(b, []byte(`"exec.start"`)) || !bytes.Contains(b, []byte(`"GITHUB_TOKEN":"\u003credacted\u003e"`)) {
		t.Errorf("rexd's audit log %s does not record the run with the secret redacted: %v\n%s", audit, err, b)
	}
	for _, dir := range []string{f.hostHome("h1"), f.home} {
		filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
			if err != nil || !d.Type().IsRegular() {
				return nil
			}
			if b, err := os.ReadFile(p); err == nil && (bytes.Contains(b, []byte(token)) || bytes.Contains(b, []byte(dbpass))) {
				t.Errorf("%s holds a secret's value", p)
			}
			return nil
		})
	}
	// A secret the tool needs that is not set: one sentence, nothing runs.
	_, errOut, code = f.runIn(project, "", env, "secret", "rm", "GITHUB_TOKEN")
	if code != 0 {
		t.Fatalf("secret rm: %d %s", code, errOut)
	}
	_, errOut, code = f.runIn(project, "", env, "tool", "run", "my/deploy", "--target", "h1")
	if code == 0 || !strings.Contains(errOut, "tool my/deploy needs the secret GITHUB_TOKEN, which is not set; set it with: rex secret set GITHUB_TOKEN") {
		t.Errorf("a missing secret: %d %q", code, errOut)
	}
	_, errOut, code = f.runIn(project, "", env, "secret", "rm", "GITHUB_TOKEN")
	if code == 0 || !strings.Contains(errOut, "there is no secret GITHUB_TOKEN") {
		t.Errorf("secret rm twice: %d %q", code, errOut)
	}
	// Without the passphrase the store stays shut, and says how to open it.
	_, errOut, code = f.runIn(project, "", []string{"REX_SECRETS_BACKEND=file", "REX_SECRETS_PASSPHRASE=wrong"}, "secret", "list")
	if code == 0 || !strings.Contains(errOut, "the passphrase does not open") {
		t.Errorf("wrong passphrase: %d %q", code, errOut)
	}
}

// TestToolParamsCheckedOnce: a parameter the tool needs and was not given
// is the operator's mistake: said once, as a usage error (exit 2), before
// any target is reached. It was said by every target, each a failure
// (exit 1), after connecting to each.
func TestToolParamsCheckedOnce(t *testing.T) {
	f := newSSHFleet(t, 0, false)
	for _, name := range []string{"down1", "down2"} {
		host, port, _ := strings.Cut(sshtest.RefusingAddr(t), ":")
		p, _ := strconv.Atoi(port)
		f.setDevice(t, name, map[string]any{"host": "nobody@" + host, "port": p})
	}
	out, errOut, code := f.runIn(f.home, "", nil, "tool", "run", "rex/ops/service", "--target", "down1,down2")
	if code != 2 || strings.Count(errOut, "needs parameter name") != 1 || strings.Contains(errOut, "unreachable") || strings.Contains(errOut, "down1") {
		t.Fatalf("a missing parameter: exit %d, want 2 and one sentence before any target\n%s%s", code, out, errOut)
	}
}
