package tui_test

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rexconsole/rex/internal/server"
	"github.com/rexconsole/rex/internal/sshtest"
)

// consoleMain is the package built as `rex` for these tests: the real one.
const consoleMain = "github.com/rexconsole/rex/cmd/rex"

// buildConsole builds rex and rexd into one directory, as `make build`
// lays them out: rex finds rexd next to itself, for `local` and to upload
// to SSH targets.
func buildConsole(t testing.TB) string {
	t.Helper()
	dir := t.TempDir()
	builds := []struct {
		out, pkg string
		cgo      bool
	}{
		{"rex", consoleMain, true},
		{"rexd", "github.com/rexconsole/rex/cmd/rexd", false},
		{"flood", "./testdata/flood", false},
	}
	for _, b := range builds {
		cmd := exec.Command("go", "build", "-o", filepath.Join(dir, b.out), b.pkg)
		cmd.Env = os.Environ()
		if !b.cgo {
			cmd.Env = append(cmd.Env, "CGO_ENABLED=0")
		}
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go build %s: %v\n%s", b.pkg, err, out)
		}
	}
	return dir
}

// console is a shell in a private tmux server, in which rex runs.
type console struct {
	t      testing.TB
	socket string
	home   string
	env    []string // the shell's environment, rex's too
	bin    string
}

// shellPrompt is sh's prompt in the tests; capture-pane drops its
// trailing blank, so promptMark is what to look for.
const (
	shellPrompt = "rex-e2e$ "
	promptMark  = "rex-e2e$"
)

// startConsole starts a tmux server of its own (its own socket, no
// configuration) running sh in a w×h window, with HOME and the XDG
// directories in a temporary directory, then starts rex in it.
func startConsole(t testing.TB, bin string, w, h int) *console {
	t.Helper()
	return startConsoleIn(t, bin, "", w, h)
}

// startConsoleIn is startConsole with rex started in dir ("" for the
// test's own working directory).
func startConsoleIn(t testing.TB, bin, dir string, w, h int) *console {
	t.Helper()
	return startConsoleWith(t, bin, dir, w, h)
}

// startConsoleWith is startConsoleIn with more arguments for rex
// (--no-server). The console runs in a rex server of the test's own (its
// XDG_RUNTIME_DIR is private), stopped by pid when the test ends.
func startConsoleWith(t testing.TB, bin, dir string, w, h int, args ...string) *console {
	t.Helper()
	c := newConsoleShell(t, bin, dir, w, h)
	c.sendLine(strings.Join(append([]string{filepath.Join(bin, "rex")}, args...), " "))
	c.waitFor("local ❯")
	return c
}

// newConsoleShell starts the tmux server and its shell, without rex.
func newConsoleShell(t testing.TB, bin, dir string, w, h int) *console {
	t.Helper()
	var rnd [6]byte
	rand.Read(rnd[:])
	c := &console{t: t, socket: "rex-e2e-" + hex.EncodeToString(rnd[:]), home: sshtest.TempDir(t)}
	c.bin = bin
	run := filepath.Join(c.home, "run")
	if err := os.Mkdir(run, 0o700); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stopServer(t, run) })
	c.env = []string{
		"XDG_RUNTIME_DIR=" + run,
		"HOME=" + c.home,
		"XDG_CONFIG_HOME=" + filepath.Join(c.home, ".config"),
		"XDG_STATE_HOME=" + filepath.Join(c.home, ".local", "state"),
		"XDG_CACHE_HOME=" + filepath.Join(c.home, ".cache"),
		"PATH=" + os.Getenv("PATH"),
		"TERM=xterm-256color",
		"LANG=C.UTF-8",
		"LC_ALL=C.UTF-8",
		"PS1=" + shellPrompt,
		"SHELL=/bin/sh",
	}
	// Measuring the rex server: its profiling endpoint and the runtime's
	// traces (docs/benchmarks.md).
	for _, k := range []string{server.PprofEnv, "GODEBUG"} {
		if v, ok := os.LookupEnv(k); ok {
			c.env = append(c.env, k+"="+v)
		}
	}
	t.Cleanup(func() {
		// Only this test's server, by its socket.
		exec.Command("tmux", "-L", c.socket, "kill-server").Run()
	})
	args := []string{"-f", "/dev/null", "-u", "new-session", "-d", "-s", "rex", "-x", fmt.Sprint(w), "-y", fmt.Sprint(h)}
	if dir != "" {
		args = append(args, "-c", dir)
	}
	c.tmux(c.env, append(args, "/bin/sh")...)
	c.waitFor(promptMark)
	return c
}

// stopServer stops the rex server a test started (by the pid in its
// server.json), waiting for it to stop its tasks and end.
func stopServer(t testing.TB, run string) {
	b, err := os.ReadFile(filepath.Join(run, "rex", "server.json"))
	if err != nil {
		return // none ran, or it stopped
	}
	var info struct {
		Pid int `json:"pid"`
	}
	if json.Unmarshal(b, &info) != nil || info.Pid <= 0 {
		return
	}
	syscall.Kill(info.Pid, syscall.SIGTERM)
	deadline := time.Now().Add(20 * time.Second)
	for syscall.Kill(info.Pid, 0) == nil && !zombie(info.Pid) {
		if time.Now().After(deadline) {
			syscall.Kill(info.Pid, syscall.SIGKILL)
			t.Errorf("the rex server (pid %d) did not end on SIGTERM within 20s", info.Pid)
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// zombie reports whether pid has ended and waits to be reaped.
func zombie(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	i := strings.LastIndexByte(string(b), ')')
	f := strings.Fields(string(b[i+1:]))
	return len(f) > 0 && f[0] == "Z"
}

func (c *console) tmux(env []string, args ...string) string {
	c.t.Helper()
	cmd := exec.Command("tmux", append([]string{"-L", c.socket}, args...)...)
	if env != nil {
		cmd.Env = env
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		c.t.Fatalf("tmux %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// sendLine types text literally and presses enter.
func (c *console) sendLine(text string) {
	c.t.Helper()
	c.tmux(nil, "send-keys", "-t", "rex", "-l", text)
	c.tmux(nil, "send-keys", "-t", "rex", "Enter")
}

func (c *console) keys(names ...string) {
	c.t.Helper()
	c.tmux(nil, append([]string{"send-keys", "-t", "rex"}, names...)...)
}

func (c *console) screen() string {
	c.t.Helper()
	return c.tmux(nil, "capture-pane", "-p", "-t", "rex")
}

// waitFor polls the screen until every part shows, and returns it.
func (c *console) waitFor(parts ...string) string {
	c.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		s := c.screen()
		missing := ""
		for _, p := range parts {
			if !strings.Contains(s, p) {
				missing = p
				break
			}
		}
		if missing == "" {
			return s
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("the screen never showed %q:\n%s", missing, s)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// run submits a command line and waits for what it should show.
func (c *console) run(line string, want ...string) string {
	c.t.Helper()
	c.sendLine(line)
	return c.waitFor(want...)
}

// quit leaves the console — answering yes when it asks because work
// still runs — and checks that the terminal is the shell's again: its
// prompt back, the alternate screen gone.
func (c *console) quit() {
	c.t.Helper()
	c.sendLine("/quit")
	deadline := time.Now().Add(15 * time.Second)
	answered := false
	for {
		s := c.screen()
		if !answered && strings.Contains(s, "Quit rex?") {
			c.keys("y")
			answered = true
		}
		if !answered && strings.Contains(s, "Leave the console?") {
			c.keys("q") // quit, not detach: stop everything
			answered = true
		}
		alt := strings.TrimSpace(c.tmux(nil, "display-message", "-p", "-t", "rex", "#{alternate_on}"))
		if alt == "0" && strings.Contains(s, promptMark) && !strings.Contains(s, "local ❯") && !strings.Contains(s, "╭─") {
			break
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("after /quit: alternate screen %s, screen:\n%s", alt, s)
		}
		time.Sleep(50 * time.Millisecond)
	}
	// The shell answers again: the terminal is back in cooked mode.
	c.sendLine("echo back-$((40+2))")
	c.waitFor("back-42")
}

// TestConsoleE2E drives the real console binary under tmux against
// `local` and a loopback sshd fleet.
func TestConsoleE2E(t *testing.T) {
	if _, err := exec.LookPath("tmux"); err != nil {
		t.Fatal("the console's end-to-end tests drive tmux; install tmux")
	}
	bin := buildConsole(t)

	t.Run("local", func(t *testing.T) {
		c := startConsole(t, bin, 120, 40)
		down := sshtest.RefusingAddr(t)

		// A fresh install: local works at once, no device is registered.
		c.run("echo hi-from-$((6*7))", "hi-from-42", "exit 0 ·")
		c.run("/device list", "no devices yet")
		c.run("/device add web1 root@10.0.0.5", "added device web1")
		s := c.run("/device list", "root@10.0.0.5")
		if !strings.Contains(s, "DEVICES 1") {
			t.Errorf("the sidebar does not list the new device:\n%s", s)
		}
		c.run("/target local", "target local")

		// A failing command shows its exit code.
		c.run("/close all", "closed")
		c.run("echo to-stderr >&2; exit 3", "to-stderr", "exit 3 ·")

		// Several targets: one pane each, with output and exit status;
		// the unreachable one says why in its pane.
		c.run("/device add down1 "+down, "added device down1")
		c.run("/close all", "closed")
		s = c.run("/run local,down1 -- echo two", "─ local · echo two", "─ down1 · echo two", "unreachable", "refused", "1 ok, 1 unreachable")
		if !strings.Contains(s, "two") || !strings.Contains(s, "exit 0") {
			t.Errorf("the local pane lacks its output or status:\n%s", s)
		}

		// Bad input is answered in one line; the console stays.
		c.run("/nosuch", "unknown command /nosuch")
		c.run("/target nosuch", "/target nosuch:")

		c.quit()
	})

	t.Run("fleet", func(t *testing.T) {
		key := sshtest.NewKey(t, "ed25519")
		fleet := sshtest.Fleet(t, 3, sshtest.Options{Authorized: []*sshtest.Key{key}})
		down := sshtest.RefusingAddr(t)
		c := startConsole(t, bin, 120, 40)

		for i, s := range fleet {
			c.run(fmt.Sprintf("/device add h%d %s@%s --key %s", i+1, s.User, s.Addr, key.Path), fmt.Sprintf("added device h%d", i+1))
		}
		c.run("/device add down1 "+down, "added device down1")
		c.run("/device group create fleet", "created group fleet")
		c.run("/device group add fleet h1 h2 h3", "added h1, h2, h3 to group fleet")
		// The verbs that need SSH run too.
		s := c.run("/device check fleet", fleet[0].Addr, fleet[1].Addr, fleet[2].Addr, "handshake")
		if n := strings.Count(s, "ok "); n < 3 {
			t.Errorf("/device check: %d hosts ok, want 3:\n%s", n, s)
		}

		// One host: its own output (each server has its own HOME).
		c.run("/target h1", "target h1")
		s = c.run("echo $HOME", fleet[0].Home, "exit 0")
		for _, other := range fleet[1:] {
			if strings.Contains(s, other.Home) {
				t.Errorf("h1's command showed %s's home:\n%s", other.Addr, s)
			}
		}
		if !strings.Contains(s, "● h1") || !strings.Contains(s, "ready") {
			t.Errorf("the sidebar does not show h1 ready:\n%s", s)
		}

		// A group: one pane per host, each with its own output and status.
		c.run("/close all", "closed")
		c.run("/layout rows", "layout rows")
		s = c.run("/run fleet -- 'echo $HOME; exit 0'", "─ h1 ·", "─ h2 ·", "─ h3 ·", fleet[0].Home, fleet[1].Home, fleet[2].Home, "3 ok")
		if n := strings.Count(s, "exit 0 ·"); n != 3 {
			t.Errorf("%d panes say exit 0, want 3:\n%s", n, s)
		}

		// A plain line on a group target runs on every member.
		c.run("/close all", "closed")
		c.run("/target fleet", "target fleet")
		c.run("test $HOME = "+fleet[1].Home+" && exit 5; echo fine", "exit 5 ·", "2 ok, 1 failed")

		// An unreachable host shows its error in its pane; the others run.
		c.run("/close all", "closed")
		s = c.run("/run h2,down1 -- 'echo $HOME'", fleet[1].Home, "unreachable", "refused", "1 ok, 1 unreachable")
		if path := os.Getenv("REX_CONSOLE_CAPTURE"); path != "" {
			// For the README: what the console looks like.
			c.run("/close all", "closed")
			c.run("/layout grid", "layout grid")
			c.run("/device group add fleet down1", "down1")
			c.run("/target fleet", "target fleet")
			c.run("uptime", "uptime — 3 ok, 1 unreachable")
			c.run("echo $HOME", "echo $HOME — 3 ok, 1 unreachable")
			os.WriteFile(path, []byte(c.screen()), 0o644)
		}
		_ = s
		c.quit()
	})
}

// BenchmarkConsoleKeystrokeTmux measures, on the real binary under tmux,
// how long a typed character takes to appear on the screen while 16
// panes each receive 1 MB/s from local commands, the console in the rex
// server (rex attached to it). One op is one keystroke;
// the time includes tmux's own send-keys and capture-pane round trips,
// which idle-key-ms measures with no output flowing.
func BenchmarkConsoleKeystrokeTmux(b *testing.B) { benchKeystrokeTmux(b) }

// BenchmarkConsoleKeystrokeTmuxNoServer is the same with the console in
// rex's own process (rex --no-server), for the rex server's cost.
func BenchmarkConsoleKeystrokeTmuxNoServer(b *testing.B) { benchKeystrokeTmux(b, "--no-server") }

func benchKeystrokeTmux(b *testing.B, args ...string) {
	bin := buildConsole(b)
	c := startConsoleWith(b, bin, "", 200, 50, args...)
	measure := func(n int) []time.Duration {
		var lat []time.Duration
		for i := range n {
			mark := fmt.Sprintf("K%dk", i)
			start := time.Now()
			c.keys("-l", mark)
			for !strings.Contains(c.screen(), mark) {
				if time.Since(start) > 10*time.Second {
					b.Fatalf("keystroke %s never showed", mark)
				}
			}
			lat = append(lat, time.Since(start))
			c.keys("C-u")
		}
		return lat
	}
	idle := measure(10)
	for range 16 {
		c.sendLine(filepath.Join(bin, "flood") + " -rate 1048576")
	}
	c.waitFor("16 running")
	c.waitFor(strings.Repeat("x", 40)) // the floods' lines are on the screen
	b.ResetTimer()
	profiled := profileServer(b, c, len(args) == 0, "keys-cpu.pprof")
	lat := measure(b.N)
	b.StopTimer()
	<-profiled
	slices.Sort(idle)
	slices.Sort(lat)
	b.ReportMetric(ms(idle[len(idle)/2]), "idle-key-ms")
	b.ReportMetric(ms(lat[len(lat)/2]), "p50-key-ms")
	b.ReportMetric(ms(lat[len(lat)*99/100]), "p99-key-ms")
	c.quit()
}

// profileServer takes a 10 s CPU profile of the rex server into
// $REX_BENCH_PROFILES/name while the benchmark runs, when that is set
// (with REX_SERVER_PPROF=1); the channel closes when it is saved.
func profileServer(b *testing.B, c *console, inServer bool, name string) <-chan struct{} {
	done := make(chan struct{})
	dir := os.Getenv("REX_BENCH_PROFILES")
	if !inServer || dir == "" {
		close(done)
		return done
	}
	go func() {
		defer close(done)
		resp, err := server.PprofClient(c.serverDir()).Get("http://rex/debug/pprof/profile?seconds=10")
		if err != nil {
			b.Error(err)
			return
		}
		defer resp.Body.Close()
		f, err := os.Create(filepath.Join(dir, name))
		if err != nil {
			b.Error(err)
			return
		}
		defer f.Close()
		io.Copy(f, resp.Body)
	}()
	return done
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
