package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/rexconsole/rex/internal/sshtest"
)

// sshFleet is a rex environment (its own HOME) with a registry of real
// loopback sshd hosts h1..hN, each with its own HOME, plus hosts that fail
// in the ways operators meet: a closed port, a host that never answers, a
// changed host key and a server that rejects the key.
type sshFleet struct {
	*rexEnv
	hosts   []*sshtest.Server
	key     *sshtest.Key
	healthy []string
}

// connectTimeout is the ssh_config ConnectTimeout of the fleet's hosts. It
// bounds starting rexd too, which takes many seconds on a loaded machine
// under the race detector.
const connectTimeout = 60 * time.Second

// blackholeTimeout is the ssh_config ConnectTimeout of the host that
// accepts TCP and never answers (reached as localhost, so that its own
// Host block applies to it alone).
const blackholeTimeout = 3 * time.Second

func newSSHFleet(t *testing.T, n int, withBad bool) *sshFleet {
	t.Helper()
	f := &sshFleet{rexEnv: newRexEnv(t, rexBin)}
	f.key = sshtest.NewKey(t, "ed25519")
	f.hosts = sshtest.Fleet(t, n, sshtest.Options{Authorized: []*sshtest.Key{f.key}})
	known := filepath.Join(f.home, ".ssh", "known_hosts")
	os.MkdirAll(filepath.Dir(known), 0o700)
	sshtest.WriteKnownHosts(t, known, false, f.hosts...)
	devs := map[string]map[string]any{}
	add := func(name, addr string) {
		host, port, _ := strings.Cut(addr, ":")
		p, _ := strconv.Atoi(port)
		devs[name] = map[string]any{"host": f.hosts[0].User + "@" + host, "port": p, "ssh_key": f.key.Path}
	}
	var group []string
	for i, h := range f.hosts {
		name := fmt.Sprintf("h%d", i+1)
		add(name, h.Addr)
		f.healthy = append(f.healthy, name)
		group = append(group, name)
	}
	if withBad {
		add("refused", sshtest.RefusingAddr(t))
		add("blackhole", sshtest.Blackhole(t))
		devs["blackhole"]["host"] = f.hosts[0].User + "@localhost"
		changed := sshtest.Start(t, sshtest.Options{Authorized: []*sshtest.Key{f.key}})
		sshtest.WriteKnownHosts(t, known+".tmp", false, append(f.hosts, changed)...)
		os.Rename(known+".tmp", known)
		changed = changed.Replace(t)
		add("changedkey", changed.Addr)
		rejects := sshtest.Start(t, sshtest.Options{}) // no authorized keys
		b, _ := os.ReadFile(known)
		os.WriteFile(known, append(b, []byte(strings.Join(rejects.KnownHostsLines(false), "\n")+"\n")...), 0o600)
		add("rejectkey", rejects.Addr)
		group = append(group, "refused", "blackhole", "changedkey", "rejectkey")
	}
	reg := map[string]any{"devices": devs, "groups": map[string][]string{"fleet": group, "good": f.healthy}}
	b, _ := json.MarshalIndent(reg, "", "  ")
	os.MkdirAll(filepath.Dir(f.registry()), 0o700)
	if err := os.WriteFile(f.registry(), b, 0o600); err != nil {
		t.Fatal(err)
	}
	// Ad-hoc hosts find the key through ssh_config, as with OpenSSH.
	cfg := fmt.Sprintf("Host localhost\n    ConnectTimeout %d\nHost *\n    ConnectTimeout %d\n    IdentityFile %s\n",
		int(blackholeTimeout.Seconds()), int(connectTimeout.Seconds()), f.key.Path)
	os.WriteFile(filepath.Join(f.home, ".ssh", "config"), []byte(cfg), 0o600)
	return f
}

func (f *sshFleet) hostHome(name string) string {
	i, _ := strconv.Atoi(strings.TrimPrefix(name, "h"))
	return f.hosts[i-1].Home
}

func TestRunOneSSHHost(t *testing.T) {
	f := newSSHFleet(t, 1, false)
	out, errOut, code := f.run("run", "h1", "--", "sh", "-c", "echo out $HOME; echo err >&2; exit 4")
	if code != 4 {
		t.Fatalf("exit %d, want the remote 4; stderr %q", code, errOut)
	}
	if out != "h1: out "+f.hosts[0].Home+"\nh1! err\n" && out != "h1! err\nh1: out "+f.hosts[0].Home+"\n" {
		t.Errorf("output %q", out)
	}
	if !strings.Contains(errOut, "0 ok, 1 failed") {
		t.Errorf("summary %q", errOut)
	}
	// An ad-hoc target works too, and the second run reuses the cached rexd.
	addr := f.hosts[0].User + "@" + f.hosts[0].Addr
	out, errOut, code = f.run("run", addr, "--", "echo", "adhoc")
	if code != 0 || out != addr+": adhoc\n" {
		t.Fatalf("ad-hoc %s: exit %d %q %q", addr, code, out, errOut)
	}
}

func TestFanOutAcrossAFleet(t *testing.T) {
	f := newSSHFleet(t, 8, true)
	start := time.Now()
	out, errOut, code := f.run("run", "fleet", "--", "echo $HOME; seq 3")
	took := time.Since(start)
	if code != 255 {
		t.Errorf("exit %d, want 255 when hosts are unreachable", code)
	}
	if took > blackholeTimeout+30*time.Second {
		t.Errorf("run took %s with a %s connect timeout on its silent host", took, blackholeTimeout)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	byHost := map[string][]string{}
	for _, l := range lines {
		name, rest, ok := strings.Cut(l, ":")
		if strings.Contains(name, "!") {
			name, rest, ok = strings.Cut(l, "!")
		}
		if !ok {
			t.Fatalf("a line without a host prefix: %q", l)
		}
		byHost[strings.TrimSpace(name)] = append(byHost[strings.TrimSpace(name)], strings.TrimSpace(rest))
	}
	for _, h := range f.healthy {
		want := []string{f.hostHome(h), "1", "2", "3"}
		if strings.Join(byHost[h], "|") != strings.Join(want, "|") {
			t.Errorf("%s printed %q, want %q", h, byHost[h], want)
		}
	}
	reasons := map[string]string{
		"refused":    "refused",
		"blackhole":  "within",
		"changedkey": "host key",
		"rejectkey":  "auth",
	}
	// The failures are named at the end, on stderr, one line each.
	failures := map[string][]string{}
	for _, l := range strings.Split(strings.TrimSpace(errOut), "\n") {
		if name, rest, ok := strings.Cut(l, "!"); ok && !strings.Contains(name, " ") {
			failures[name] = append(failures[name], strings.TrimSpace(rest))
		}
	}
	for host, word := range reasons {
		got := failures[host]
		if len(got) != 1 || !strings.HasPrefix(got[0], "unreachable: ") || !strings.Contains(strings.ToLower(got[0]), word) {
			t.Errorf("%s: want one line mentioning %q, got %q", host, word, got)
		}
		if len(byHost[host]) != 0 {
			t.Errorf("%s printed on stdout: %q", host, byHost[host])
		}
	}
	if !strings.Contains(errOut, "8 ok, 4 unreachable") {
		t.Errorf("summary %q", errOut)
	}
	// Nothing ran behind the changed key: the known_hosts entry stays.
	b, _ := os.ReadFile(filepath.Join(f.home, ".ssh", "known_hosts"))
	if strings.Count(string(b), "\n") < 8 {
		t.Error("known_hosts lost entries")
	}
}

func TestFanOutGatherAndJSON(t *testing.T) {
	f := newSSHFleet(t, 4, false)
	// h1 and h3 print the same; h2 and h4 differ by exit status only.
	script := `case "$HOME" in */h2/*|*/h4/*) echo same; exit 3;; *) echo same;; esac`
	script = strings.NewReplacer("*/h2/*", "*"+filepath.Base(filepath.Dir(f.hostHome("h2")))+"*",
		"*/h4/*", "*"+filepath.Base(filepath.Dir(f.hostHome("h4")))+"*").Replace(script)
	out, _, code := f.run("run", "good", "--gather", "--", script)
	if code != 3 {
		t.Errorf("gather exit %d, want 3", code)
	}
	want := "---------------\nh[1,3] (2)\n---------------\nsame\n" +
		"---------------\nh[2,4] (2) exit 3\n---------------\nsame\n"
	if out != want {
		t.Errorf("--gather printed:\n%s\nwant:\n%s", out, want)
	}

	out, _, code = f.run("run", "h1,h2", "--json", "--", "printf 'a\\nb'")
	if code != 0 {
		t.Fatalf("json exit %d", code)
	}
	var events []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		var e map[string]any
		if err := json.Unmarshal([]byte(l), &e); err != nil {
			t.Fatalf("not JSON: %q", l)
		}
		delete(e, "duration_ms")
		events = append(events, e)
	}
	sort.SliceStable(events, func(i, j int) bool { return events[i]["target"].(string) < events[j]["target"].(string) })
	got, _ := json.Marshal(events)
	wantJSON := `[{"data":"a\nb","encoding":"utf8","event":"stdout","target":"h1"},{"event":"exit","exit_code":0,"target":"h1"},` +
		`{"data":"a\nb","encoding":"utf8","event":"stdout","target":"h2"},{"event":"exit","exit_code":0,"target":"h2"}]`
	if string(got) != wantJSON {
		t.Errorf("--json events:\n%s\nwant:\n%s", got, wantJSON)
	}
}

// SIGINT to `rex run` stops every remote process.
func TestInterruptStopsRemoteProcesses(t *testing.T) {
	f := newSSHFleet(t, 3, false)
	cmd := f.cmd("run", "good", "--", `sleep 60 & echo $! >> "$HOME/pids"; echo $$ >> "$HOME/pids"; echo started; wait`)
	var out lockedBuffer // written by exec's copying goroutine while read here
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Generous: the first run uploads rexd to each host, which takes long
	// on a loaded machine.
	deadline := time.Now().Add(2 * time.Minute)
	for strings.Count(out.String(), "started") < 3 {
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			t.Fatalf("the remote commands did not start: %q", out.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	cmd.Process.Signal(syscall.SIGINT)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		cmd.Process.Kill()
		t.Fatal("rex run did not end after SIGINT")
	}
	if cmd.ProcessState.ExitCode() == 0 {
		t.Error("an interrupted run exited 0")
	}
	var pids []int
	for _, h := range f.healthy {
		b, _ := os.ReadFile(filepath.Join(f.hostHome(h), "pids"))
		for _, s := range strings.Fields(string(b)) {
			p, _ := strconv.Atoi(s)
			pids = append(pids, p)
		}
	}
	if len(pids) != 6 {
		t.Fatalf("want 6 remote pids, got %v", pids)
	}
	deadline = time.Now().Add(30 * time.Second)
	for {
		var alive []int
		for _, p := range pids {
			if syscall.Kill(p, 0) == nil && !zombie(p) {
				alive = append(alive, p)
			}
		}
		if len(alive) == 0 {
			return
		}
		if time.Now().After(deadline) {
			for _, p := range alive {
				syscall.Kill(p, syscall.SIGKILL)
			}
			t.Fatalf("remote processes survived ctrl+c: %v", alive)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func zombie(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i >= 0 && len(s) > i+2 && s[i+2] == 'Z'
}

// rex device check, prepare and clean against real hosts.
func TestDeviceCheckPrepareClean(t *testing.T) {
	f := newSSHFleet(t, 2, false)
	out, errOut, code := f.run("device", "check", "good")
	if code != 0 || !strings.Contains(out, "h1") || !strings.Contains(out, "no rexd cached") || !strings.Contains(out, "linux/") {
		t.Fatalf("check: %d %q %q", code, out, errOut)
	}
	out, _, code = f.run("device", "prepare", "good")
	if code != 0 || strings.Count(out, "uploaded rexd") != 2 {
		t.Fatalf("prepare: %d %q", code, out)
	}
	out, _, _ = f.run("device", "check", "h1")
	if !strings.Contains(out, "rexd 0.") {
		t.Errorf("check after prepare: %q", out)
	}
	out, _, code = f.run("device", "clean", "h1")
	if code != 0 || !strings.Contains(out, "removed") {
		t.Fatalf("clean: %d %q", code, out)
	}
	out, _, code = f.run("device", "check", "h1,refused-nope")
	if code == 0 {
		t.Errorf("check of an unknown name succeeded: %q", out)
	}
}

// TestDeviceVerbsUnreachableExit255: device check, prepare and clean exit
// as rex run does: 255 when a target could not be reached (a closed
// loopback port, a key the server refuses), with its FAIL line, also when
// the other targets were fine.
func TestDeviceVerbsUnreachableExit255(t *testing.T) {
	f := newSSHFleet(t, 1, true)
	for _, tc := range []struct{ verb, targets, failed string }{
		{"check", "refused", "refused"},
		{"check", "h1,refused", "refused"},
		{"prepare", "h1,refused", "refused"},
		{"clean", "refused", "refused"},
		{"check", "rejectkey", "rejectkey"},
	} {
		out, errOut, code := f.run("device", tc.verb, tc.targets)
		if code != 255 {
			t.Errorf("device %s %s: exit %d, want 255\nstdout %q\nstderr %q", tc.verb, tc.targets, code, out, errOut)
		}
		if !regexp.MustCompile(`(?m)^` + tc.failed + ` +FAIL +`).MatchString(out) {
			t.Errorf("device %s %s: no FAIL line for %s: %q", tc.verb, tc.targets, tc.failed, out)
		}
	}
}

func TestAttachOverSSH(t *testing.T) {
	f := newSSHFleet(t, 1, false)
	s := newTmux(t, 100, 30)
	// The tmux shell gets the fleet's HOME so rex sees its registry.
	s.line("export HOME=" + f.home + " XDG_CONFIG_HOME= XDG_CACHE_HOME= XDG_STATE_HOME=")
	s.line("rex attach h1; echo status=$?")
	s.line("export PS1='REMOTE> '; echo \"at:$HOME\"")
	s.waitText("at:" + f.hosts[0].Home)
	s.line("stty size")
	s.waitFor("the terminal size", func(scr string) bool { return hasLine(scr, "30 100") })
	s.line("exit 5")
	s.waitFor("status=5", func(scr string) bool { return hasLine(scr, "status=5") })
}

// lockedBuffer is a bytes.Buffer safe to read while a process writes it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
