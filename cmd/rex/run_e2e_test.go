package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// failureLinesOf maps each `name! …` line of rex run's stderr to its text.
func failureLinesOf(errOut string) map[string][]string {
	m := map[string][]string{}
	for _, l := range strings.Split(errOut, "\n") {
		if name, rest, ok := strings.Cut(l, "! "); ok && !strings.ContainsAny(name, " :") {
			m[name] = append(m[name], strings.TrimSpace(rest))
		}
	}
	return m
}

// waitFor polls cond (bounded) while a remote side gets somewhere.
func waitFor(t *testing.T, what string, limit time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// markerProcs lists the processes on this machine (where every loopback
// host runs) whose command line holds marker.
func markerProcs(marker string) []int {
	var pids []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && bytes.Contains(b, []byte(marker)) && !zombie(pid) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// TestFailuresAreNamed: the end of rex run names every target that did
// not exit 0, on stderr: exit, timeout, unreachable; -q keeps them and
// drops the summary.
func TestFailuresAreNamed(t *testing.T) {
	f := newSSHFleet(t, 3, true)
	script := `case $REX_TARGET in h1) exit 1;; h2) sleep 30;; esac; echo fine`
	out, errOut, code := f.run("run", "h[1-3],refused", "-t", "1", "--", script)
	if code != 255 {
		t.Errorf("exit %d, want 255 (a target was unreachable)", code)
	}
	if strings.Join(strings.Fields(out), " ") != "h3: fine" {
		t.Errorf("stdout %q", out)
	}
	fl := failureLinesOf(errOut)
	want := map[string]string{"h1": "exit 1", "h2": "timed out after 1s", "refused": "unreachable: connect refused (127.0.0.1:"}
	for host, w := range want {
		if len(fl[host]) != 1 || !strings.HasPrefix(fl[host][0], w) {
			t.Errorf("%s: failure lines %q, want one starting %q\n%s", host, fl[host], w, errOut)
		}
	}
	if len(fl["h3"]) != 0 || !strings.Contains(errOut, "rex: 1 ok, 2 failed, 1 unreachable") {
		t.Errorf("stderr:\n%s", errOut)
	}
	// The failure lines come last, in target order, then the summary.
	lines := strings.Split(strings.TrimSpace(errOut), "\n")
	if n := len(lines); n < 4 || !strings.HasPrefix(lines[n-4], "h1!") || !strings.HasPrefix(lines[n-2], "refused!") || !strings.HasPrefix(lines[n-1], "rex: ") {
		t.Errorf("stderr does not end with the failure lines and the summary:\n%s", errOut)
	}

	_, errOut, code = f.run("run", "h1,h3", "-q", "--", script)
	if code != 1 || strings.TrimSpace(errOut) != "h1! exit 1" {
		t.Errorf("-q: exit %d, stderr %q", code, errOut)
	}
}

// TestInterruptWithStdoutBlocked: ctrl+c on a run whose output nobody
// reads exits 130 at once, names each cancelled target once (one that was
// still connecting is cancelled, not unreachable), and leaves no remote
// process behind (checked by a marker in their command lines).
func TestInterruptWithStdoutBlocked(t *testing.T) {
	f := newSSHFleet(t, 3, true)
	marker := fmt.Sprintf("rex-marker-%d", time.Now().UnixNano())
	// Every host floods stdout after saying it started.
	cmd := f.cmd("run", "good,blackhole", "--connect-timeout", "60s", "--", "sh", "-c", `touch "$HOME/started"; exec yes "$0"`, marker)
	pr, pw, err := os.Pipe() // never read: rex's stdout fills and blocks
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	var errOut syncWriter
	cmd.Stdout, cmd.Stderr = pw, &errOut
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pw.Close()
	waitFor(t, "every host to start", 60*time.Second, func() bool {
		for _, h := range f.healthy {
			if _, err := os.Stat(filepath.Join(f.hostHome(h), "started")); err != nil {
				return false
			}
		}
		return len(markerProcs(marker)) >= 3
	})
	cmd.Process.Signal(syscall.SIGINT)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(15 * time.Second):
		cmd.Process.Kill()
		t.Fatal("rex run did not end after SIGINT with its stdout blocked")
	}
	if code := cmd.ProcessState.ExitCode(); code != 130 {
		t.Errorf("exit %d after SIGINT, want 130", code)
	}
	stderr := errOut.String()
	fl := failureLinesOf(stderr)
	for _, h := range append(f.healthy, "blackhole") {
		if len(fl[h]) != 1 || fl[h][0] != "cancelled" {
			t.Errorf("%s: %q, want one \"cancelled\"\n%s", h, fl[h], stderr)
		}
	}
	if strings.Contains(stderr, "unreachable") {
		t.Errorf("cancelled targets counted as unreachable:\n%s", stderr)
	}
	waitFor(t, "the remote processes to end", 10*time.Second, func() bool { return len(markerProcs(marker)) == 0 })
}

// TestTerminateExits143: SIGTERM is a cancel too, with the shell's 143.
func TestTerminateExits143(t *testing.T) {
	f := newSSHFleet(t, 1, false)
	marker := fmt.Sprintf("rex-marker-%d", time.Now().UnixNano())
	cmd := f.cmd("run", "h1", "--", "sh", "-c", `touch "$HOME/started"; exec sh -c 'sleep 60; :' "$0"`, marker)
	var out syncWriter
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "h1 to start", 60*time.Second, func() bool {
		_, err := os.Stat(filepath.Join(f.hostHome("h1"), "started"))
		return err == nil
	})
	cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(15 * time.Second):
		cmd.Process.Kill()
		t.Fatal("rex run did not end after SIGTERM")
	}
	if code := cmd.ProcessState.ExitCode(); code != 143 || !strings.Contains(out.String(), "h1! cancelled") {
		t.Errorf("exit %d, output %q", code, out.String())
	}
	waitFor(t, "the remote process to end", 10*time.Second, func() bool { return len(markerProcs(marker)) == 0 })
}

// syncWriter is a buffer safe to read while a process writes to it.
type syncWriter struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncWriter) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestStdinReachesAllTargets: stdin that is not a terminal is forwarded
// to every target, EOF included; --no-stdin turns it off.
func TestStdinReachesAllTargets(t *testing.T) {
	f := newSSHFleet(t, 3, false)
	payload := strings.Repeat("a line of stdin\n", 20000) // 320 KB
	cmd := f.cmd("run", "good", "--", "cat > f; wc -c < f")
	cmd.Stdin = strings.NewReader(payload)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		t.Fatalf("%v: %s", err, errOut.String())
	}
	for _, h := range f.healthy {
		b, _ := os.ReadFile(filepath.Join(f.hostHome(h), "f"))
		if string(b) != payload {
			t.Errorf("%s got %d bytes of stdin, want %d", h, len(b), len(payload))
		}
	}
	cmd = f.cmd("run", "good", "--no-stdin", "--", "cat > g")
	cmd.Stdin = strings.NewReader("not this")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	for _, h := range f.healthy {
		if b, err := os.ReadFile(filepath.Join(f.hostHome(h), "g")); err != nil || len(b) != 0 {
			t.Errorf("--no-stdin: %s got %q", h, b)
		}
	}
	// A rolling run replays stdin to the later batches.
	cmd = f.cmd("run", "good", "--batch", "1", "--", "cat > h")
	cmd.Stdin = strings.NewReader("once\n")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	for _, h := range f.healthy {
		if b, _ := os.ReadFile(filepath.Join(f.hostHome(h), "h")); string(b) != "once\n" {
			t.Errorf("--batch 1: %s got %q", h, b)
		}
	}
}

// TestRollingRuns: --batch, --max-fail and --canary, checked on the hosts.
func TestRollingRuns(t *testing.T) {
	f := newSSHFleet(t, 6, false)
	dir := t.TempDir()
	log := filepath.Join(dir, "log")
	for _, h := range f.healthy {
		if err := syscall.Mkfifo(filepath.Join(dir, h), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	// Each host logs its start, waits for the test to let it go (a FIFO
	// of its own), and logs its end.
	script := fmt.Sprintf(`echo "start $REX_TARGET" >> %[1]s/log; read x < %[1]s/$REX_TARGET; echo "end $REX_TARGET" >> %[1]s/log`, dir)
	cmd := f.cmd("run", "good", "--batch", "2", "--", script)
	var out syncWriter
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	released := map[string]bool{}
	release := func(host string) {
		released[host] = true
		// Opening for writing waits for the reader: not here.
		go func() {
			if w, err := os.OpenFile(filepath.Join(dir, host), os.O_WRONLY, 0); err == nil {
				w.WriteString("go\n")
				w.Close()
			}
		}()
	}
	peak := 0
	// Hosts are let go only when two run at once: a third that started
	// meanwhile would show.
	waitFor(t, "every host to run", 2*time.Minute, func() bool {
		b, _ := os.ReadFile(log)
		running := map[string]bool{}
		for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			what, host, _ := strings.Cut(l, " ")
			switch what {
			case "start":
				running[host] = true
				peak = max(peak, len(running))
			case "end":
				delete(running, host)
			}
		}
		if len(running) >= 2 {
			for h := range running {
				if !released[h] {
					release(h)
				}
			}
		}
		return strings.Count(string(b), "end ") == 6
	})
	if err := cmd.Wait(); err != nil {
		t.Fatalf("%v: %s", err, out.String())
	}
	if peak != 2 {
		t.Errorf("%d hosts ran at once with --batch 2, want 2:\n%s", peak, readFile(t, log))
	}

	touched := func() []string {
		var hs []string
		for _, h := range f.healthy {
			if _, err := os.Stat(filepath.Join(f.hostHome(h), "touched")); err == nil {
				hs = append(hs, h)
				os.Remove(filepath.Join(f.hostHome(h), "touched"))
			}
		}
		return hs
	}
	touch := `touch "$HOME/touched"; [ "$REX_TARGET" != %s ]`
	for _, tt := range []struct {
		args    []string
		fail    string
		touched string
		skipped []string
	}{
		{[]string{"-f", "1", "--max-fail", "1"}, "h2", "h1,h2", []string{"h3", "h4", "h5", "h6"}},
		{[]string{"--batch", "2", "--max-fail", "1"}, "h2", "h1,h2", []string{"h3", "h4", "h5", "h6"}},
		{[]string{"--batch", "3", "--max-fail", "50%"}, "h2", "h1,h2,h3,h4,h5,h6", nil},
		{[]string{"--canary", "1"}, "h1", "h1", []string{"h2", "h3", "h4", "h5", "h6"}},
		{[]string{"--canary", "1"}, "h3", "h1,h2,h3,h4,h5,h6", nil},
	} {
		args := append(append([]string{"run", "good"}, tt.args...), "--", fmt.Sprintf(touch, tt.fail))
		_, errOut, code := f.run(args...)
		if code != 1 {
			t.Errorf("%v: exit %d, want 1\n%s", tt.args, code, errOut)
		}
		if got := strings.Join(touched(), ","); got != tt.touched {
			t.Errorf("%v: touched %s, want %s", tt.args, got, tt.touched)
		}
		fl := failureLinesOf(errOut)
		for _, h := range tt.skipped {
			if len(fl[h]) != 1 || !strings.HasPrefix(fl[h][0], "skipped: ") {
				t.Errorf("%v: %s: %q, want skipped\n%s", tt.args, h, fl[h], errOut)
			}
		}
		if want := fmt.Sprintf("%d skipped", len(tt.skipped)); len(tt.skipped) > 0 && !strings.Contains(errOut, want) {
			t.Errorf("%v: summary lacks %q:\n%s", tt.args, want, errOut)
		}
	}
}

func readFile(t *testing.T, p string) string {
	b, _ := os.ReadFile(p)
	return string(b)
}

// TestConnectTimeout: a host that accepts TCP and never answers fails at
// the --connect-timeout given, which the message names; without the flag
// ssh_config's ConnectTimeout applies and is named.
func TestConnectTimeout(t *testing.T) {
	f := newSSHFleet(t, 1, true)
	for _, tt := range []struct {
		args  []string
		limit time.Duration
		want  string
	}{
		{[]string{"--connect-timeout", "1s"}, time.Second, "no answer within 1s (--connect-timeout)"},
		{nil, blackholeTimeout, fmt.Sprintf("no answer within %s (ConnectTimeout in %s)", blackholeTimeout, filepath.Join(f.home, ".ssh", "config"))},
	} {
		start := time.Now()
		_, errOut, code := f.run(append(append([]string{"run", "blackhole"}, tt.args...), "--", "true")...)
		took := time.Since(start)
		if code != 255 || !strings.Contains(errOut, "blackhole! unreachable: connect blackhole") || !strings.Contains(errOut, tt.want) {
			t.Errorf("%v: exit %d\n%s\nwant %q", tt.args, code, errOut, tt.want)
		}
		if took < tt.limit || took > tt.limit+20*time.Second {
			t.Errorf("%v: gave up after %s, want %s", tt.args, took.Round(time.Millisecond), tt.limit)
		}
	}
}

// TestOutdirQuietContinuedAndEnv: --outdir writes per-host files; an
// over-long line is cut with the continuation mark; REX_TARGET and
// REX_GROUP reach the command; a connection lost mid-command is
// unreachable in --json.
func TestOutdirQuietContinuedAndEnv(t *testing.T) {
	f := newSSHFleet(t, 2, false)
	dir := filepath.Join(t.TempDir(), "out")
	out, errOut, code := f.run("run", "good", "--outdir", dir, "--", `echo "out $REX_TARGET"; echo "err $REX_GROUP" >&2`)
	if code != 0 || out != "" {
		t.Errorf("--outdir: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	for _, h := range f.healthy {
		if got := readFile(t, filepath.Join(dir, h+".out")); got != "out "+h+"\n" {
			t.Errorf("%s.out = %q", h, got)
		}
		if got := readFile(t, filepath.Join(dir, h+".err")); got != "err good\n" {
			t.Errorf("%s.err = %q", h, got)
		}
	}

	out, _, code = f.run("run", "h1", "--", `head -c 70000 /dev/zero | tr '\0' a; echo; echo next`)
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if code != 0 || len(lines) != 3 || lines[0] != "h1: "+strings.Repeat("a", 65536) ||
		lines[1] != "h1:+"+strings.Repeat("a", 70000-65536) || lines[2] != "h1: next" {
		t.Errorf("a 70000-byte line: exit %d, %d lines, lengths %d", code, len(lines), len(lines[0]))
	}

	out, _, code = f.run("run", "h1", "--json", "--", `kill -9 $PPID; sleep 30`)
	var ev map[string]any
	json.Unmarshal([]byte(strings.TrimSpace(out)), &ev)
	if code != 255 || ev["event"] != "error" || ev["unreachable"] != true {
		t.Errorf("connection lost: exit %d, %s", code, out)
	}
}

// TestNoPrefix: -N prints one target's output byte for byte, as ssh does
// (binary, a last line without a newline), stderr on stderr; with several
// targets, whole lines with no names.
func TestNoPrefix(t *testing.T) {
	f := newSSHFleet(t, 2, false)
	out, errOut, code := f.run("run", "h1", "-N", "-q", "--", `head -c 300000 /dev/urandom > f; cat f; echo oops >&2`)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	want, err := os.ReadFile(filepath.Join(f.hostHome("h1"), "f"))
	if err != nil || len(want) != 300000 {
		t.Fatalf("the host's file: %d bytes, %v", len(want), err)
	}
	if out != string(want) {
		t.Errorf("stdout is %d bytes that differ from the host's %d", len(out), len(want))
	}
	if errOut != "oops\n" {
		t.Errorf("stderr %q, want the command's own", errOut)
	}

	out, errOut, code = f.run("run", "good", "-N", "-q", "--", `i=0; while [ $i -lt 2000 ]; do echo "line $i of $REX_TARGET"; i=$((i+1)); done; printf last`)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	count := map[string]int{}
	for _, l := range lines {
		count[l]++
	}
	for _, h := range f.healthy {
		for _, l := range []string{"line 0 of " + h, "line 1999 of " + h} {
			if count[l] != 1 {
				t.Errorf("%q printed %d times", l, count[l])
			}
		}
	}
	if len(lines) != 2*2001 || count["last"] != 2 || !strings.HasSuffix(out, "\n") {
		t.Errorf("%d lines (want %d, each whole), %d \"last\" lines", len(lines), 2*2001, count["last"])
	}
}
