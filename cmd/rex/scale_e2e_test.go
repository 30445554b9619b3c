package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rexconsole/rex/internal/sshtest"
)

// manyTargets is a rex environment whose registry holds n devices d001…dN
// spread over a few real loopback sshd servers (each device its own SSH
// connection, as separate hosts would have), in a group "many", with rexd
// already installed on every server. It stands in for a fleet of n hosts
// where n sshd servers would cost the test more than it shows.
type manyTargets struct {
	*rexEnv
	n int
}

func newManyTargets(t *testing.T, servers, n int) *manyTargets {
	t.Helper()
	f := &manyTargets{rexEnv: newRexEnv(t, rexBin), n: n}
	key := sshtest.NewKey(t, "ed25519")
	hosts := sshtest.Fleet(t, servers, sshtest.Options{Authorized: []*sshtest.Key{key}})
	known := filepath.Join(f.home, ".ssh", "known_hosts")
	os.MkdirAll(filepath.Dir(known), 0o700)
	sshtest.WriteKnownHosts(t, known, false, hosts...)
	devs := map[string]map[string]any{}
	var group, first []string
	for i := range n {
		h := hosts[i%servers]
		host, port, _ := strings.Cut(h.Addr, ":")
		p, _ := strconv.Atoi(port)
		name := fmt.Sprintf("d%03d", i+1)
		devs[name] = map[string]any{"host": h.User + "@" + host, "port": p, "ssh_key": key.Path}
		group = append(group, name)
		if i < servers {
			first = append(first, name)
		}
	}
	reg := map[string]any{"devices": devs, "groups": map[string][]string{"many": group, "first": first}}
	b, _ := json.MarshalIndent(reg, "", "  ")
	os.MkdirAll(filepath.Dir(f.registry()), 0o700)
	if err := os.WriteFile(f.registry(), b, 0o600); err != nil {
		t.Fatal(err)
	}
	// A generous connect timeout: hundreds of handshakes share two loaded
	// cores with their sshds.
	os.WriteFile(filepath.Join(f.home, ".ssh", "config"), []byte("Host *\n    ConnectTimeout 60\n"), 0o600)
	// rexd goes onto each server once, here, not hundreds of times at once.
	if out, errOut, code := f.run("device", "prepare", "first"); code != 0 {
		t.Fatalf("rex device prepare: exit %d\n%s%s", code, out, errOut)
	}
	return f
}

// runLimited runs `rex ARGS` with the open-file limits a shell sets
// (`ulimit` syntax: "-Sn 1024", "-n 1024"), holding `held` more open
// descriptors from its start (inherited, as from a parent that leaked
// them), so that a run needs more than the limit. $REXPID in an argument
// is rex's own process id.
func (f *manyTargets) runLimited(limit string, held int, args ...string) (string, string, int) {
	f.t.Helper()
	var quoted []string
	for _, a := range args {
		quoted = append(quoted, "'"+strings.ReplaceAll(a, "'", `'\''`)+"'")
	}
	// The shell's pid is rex's once it execs.
	script := "ulimit " + limit + " && REXPID=$$ && exec \"$0\" " + strings.ReplaceAll(strings.Join(quoted, " "), "$REXPID", "'\"$REXPID\"'")
	cmd := exec.Command("/bin/sh", "-c", script, f.bin)
	cmd.Env = f.env
	cmd.Dir = f.home
	if held > 0 {
		null, err := os.Open(os.DevNull)
		if err != nil {
			f.t.Fatal(err)
		}
		defer null.Close()
		for range held {
			cmd.ExtraFiles = append(cmd.ExtraFiles, null)
		}
	}
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Start(); err != nil {
		f.t.Fatalf("rex %s: %v", strings.Join(args, " "), err)
	}
	// Every barrier gives up within its limit and rex then ends. One that
	// does not is a hang: SIGQUIT makes the Go runtime print every
	// goroutine's stack (the shell exec'd rex, so the pid is rex's), and
	// the test says where rex waited instead of running into the
	// package's timeout with nothing kept.
	hung := make(chan struct{})
	watchdog := time.AfterFunc(runLimitedHang, func() {
		close(hung)
		cmd.Process.Signal(syscall.SIGQUIT)
	})
	err := cmd.Wait()
	watchdog.Stop()
	select {
	case <-hung:
		f.t.Fatalf("rex %s had not ended after %v; where it waited:\n%s\nstderr before the dump:\n%s",
			strings.Join(args, " "), runLimitedHang, goroutineSummary(errOut.String()), tail(beforeDump(errOut.String()), 30))
	default:
	}
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		return out.String(), errOut.String(), ee.ExitCode()
	case err != nil:
		f.t.Fatalf("rex %s: %v", strings.Join(args, " "), err)
	}
	return out.String(), errOut.String(), 0
}

// runLimitedHang is how long runLimited waits for rex: past the longest
// barrier (240 s) with room for a loaded machine.
const runLimitedHang = 7 * time.Minute

// beforeDump is stderr up to a Go goroutine dump.
func beforeDump(s string) string {
	if i := strings.Index(s, "SIGQUIT: quit"); i >= 0 {
		return s[:i]
	}
	return s
}

// goroutineSummary condenses a Go goroutine dump: how many goroutines wait
// in each state at each of rex's own innermost frames, most first.
func goroutineSummary(dump string) string {
	counts := map[string]int{}
	for _, g := range strings.Split(dump, "\n\n") {
		head, body, ok := strings.Cut(g, "\n")
		if !ok || !strings.HasPrefix(head, "goroutine ") {
			continue
		}
		// "goroutine 7 [select, 3 minutes]:" is in state select.
		state := head
		if _, st, ok := strings.Cut(head, "["); ok {
			state, _, _ = strings.Cut(st, "]")
			state, _, _ = strings.Cut(state, ",")
		}
		frame := "(no frame of rex)"
		for _, l := range strings.Split(body, "\n") {
			if strings.HasPrefix(l, "github.com/rexconsole/rex/") {
				frame = l[:strings.LastIndex(l, "(")] // its arguments vary
				break
			}
		}
		counts["["+state+"] "+frame]++
	}
	keys := make([]string, 0, len(counts))
	for k := range counts {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		return counts[keys[i]] > counts[keys[j]] || counts[keys[i]] == counts[keys[j]] && keys[i] < keys[j]
	})
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "%5d %s\n", counts[k], k)
	}
	return b.String()
}

// barrier is a remote command that holds its target until every one of n
// targets has started (each leaves a file in dir), so that all their
// connections are open at once; it gives up after about limit seconds.
func barrier(dir string, n, limit int) string {
	// The count is the shell's own (a glob), so that a wait costs one
	// process per step, not four: when a target never comes, 255 waiting
	// loops of ls | wc had the machine at a load of 300 for half an hour.
	return fmt.Sprintf(`touch %[1]s/"$REX_TARGET"; i=0; while set -- %[1]s/*; [ $# -lt %[2]d ]; do i=$((i+1)); [ $i -gt %[3]d ] && echo "barrier: gave up" && exit 1; sleep 0.2; done; echo ok`, dir, n, limit*5)
}

// TestRun256TargetsUnderFdLimit: rex started with a soft limit of 1024
// open files, 800 of them already taken, still runs 256 targets whose
// connections are all open at once (it raises its soft limit to the hard
// one); under a hard limit of 1024 the targets it cannot reach say that rex
// ran out of open files, and nothing about known_hosts.
func TestRun256TargetsUnderFdLimit(t *testing.T) {
	const n, held = 256, 800
	f := newManyTargets(t, 8, n)

	dir := t.TempDir()
	os.Chmod(dir, 0o1777)
	out, errOut, code := f.runLimited("-Sn 1024", held, "run", "many", "--concurrency", "256", "--", barrier(dir, n, 240))
	if code != 0 {
		t.Fatalf("soft limit 1024, %d targets at once: exit %d\nstderr: %s", n, code, tail(errOut, 40))
	}
	if got := strings.Count(out, ": ok\n"); got != n {
		t.Fatalf("%d of %d targets said ok\n%s", got, n, tail(out, 20))
	}
	if !strings.Contains(errOut, fmt.Sprintf("rex: %d ok", n)) {
		t.Errorf("summary: %s", tail(errOut, 3))
	}

	// Under a hard limit of 1024 rex cannot raise it: the targets past it
	// fail, and say why. Only ~60 descriptors are left, and the targets
	// that got one hold it (their barrier never completes) for 20 s: a
	// fast machine cannot finish the early targets and free their
	// descriptors before the late ones need one.
	dir = t.TempDir()
	os.Chmod(dir, 0o1777)
	_, errOut, code = f.runLimited("-n 1024", 960, "run", "many", "--concurrency", "256", "--", barrier(dir, n, 20))
	if code == 0 {
		t.Fatalf("hard limit 1024 with %d descriptors held: %d targets at once all ran", held, n)
	}
	if !strings.Contains(errOut, "rex has run out of open files (limit 1024); lower --concurrency or raise the hard limit") {
		t.Errorf("no target said rex ran out of open files:\n%s", tail(errOut, 30))
	}
	if strings.Contains(errOut, "permission") {
		t.Errorf("running out of open files gave advice about permissions:\n%s", tail(errOut, 30))
	}
}

// TestRunOpenFilesFollowConcurrency: over 64 targets at --concurrency 8,
// every target's command counts rex's open descriptors while it runs; none
// sees more than a small constant plus a few per running target, as each
// target's connection closes when it is done.
func TestRunOpenFilesFollowConcurrency(t *testing.T) {
	const n, conc = 64, 8
	f := newManyTargets(t, 8, n)
	out, errOut, code := f.runLimited("-Sn 1024", 0, "run", "many", "--concurrency", strconv.Itoa(conc), "--",
		"ls /proc/$REXPID/fd | wc -l")
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, tail(errOut, 20))
	}
	counts := map[string]int{}
	most := 0
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		name, v, ok := strings.Cut(l, ": ")
		c, err := strconv.Atoi(strings.TrimSpace(v))
		if !ok || err != nil {
			t.Fatalf("line %q", l)
		}
		counts[strings.TrimSpace(name)] = c
		most = max(most, c)
	}
	if len(counts) != n {
		t.Fatalf("%d targets reported, want %d", len(counts), n)
	}
	// A Go process keeps a handful (std streams, epoll, its wakeup pipe);
	// each running target holds its SSH socket.
	const base, perTarget = 16, 2
	if limit := base + perTarget*conc; most > limit {
		t.Errorf("rex held up to %d open files at --concurrency %d over %d targets, want at most %d (%d + %d per running target); by target: %v",
			most, conc, n, limit, base, perTarget, counts)
	}
	t.Logf("most open files seen: %d (concurrency %d, %d targets)", most, conc, n)
}

// tail is the last n lines of s.
func tail(s string, n int) string {
	l := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(l) > n {
		l = l[len(l)-n:]
	}
	return strings.Join(l, "\n")
}

func TestGoroutineSummary(t *testing.T) {
	dump := `SIGQUIT: quit
PC=0x47a1c1 m=0 sigcode=0

goroutine 0 gp=0x1 m=0 mp=0x2 [idle]:
runtime.futex(0x1)
	/usr/lib/go/src/runtime/sys_linux_amd64.s:557 +0x21

goroutine 1 [select, 4 minutes]:
github.com/rexconsole/rex/internal/fanout.(*Run).Wait({_, _}, {{0x2b17080, 0x2b8}, ...}, ...)
	/src/internal/fanout/run.go:88 +0x1f

goroutine 9 [select]:
golang.org/x/crypto/ssh.(*handshakeTransport).readLoop(0xc0001)
	/go/pkg/x/crypto/ssh/handshake.go:200 +0x2
github.com/rexconsole/rex/internal/sshx.(*Dialer).dial(0xc0002, 0x1)
	/src/internal/sshx/dial.go:120 +0x3

goroutine 10 [select, 2 minutes]:
github.com/rexconsole/rex/internal/sshx.(*Dialer).dial(0xc0003, 0x2)
	/src/internal/sshx/dial.go:120 +0x3
`
	want := "    2 [select] github.com/rexconsole/rex/internal/sshx.(*Dialer).dial\n" +
		"    1 [idle] (no frame of rex)\n" +
		"    1 [select] github.com/rexconsole/rex/internal/fanout.(*Run).Wait\n"
	if got := goroutineSummary(dump); got != want {
		t.Errorf("summary:\n%s\nwant:\n%s", got, want)
	}
	if got := beforeDump("rex: d001: ok\n" + dump); got != "rex: d001: ok\n" {
		t.Errorf("before the dump: %q", got)
	}
}
