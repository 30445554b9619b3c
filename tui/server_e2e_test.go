package tui_test

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rexconsole/rex/internal/sshtest"
)

// These tests drive the console through its rex server: each `rex` in a
// tmux window is a client; closing the window or detaching leaves the
// console (and what runs in it) in the server, which the next `rex`
// attaches to.

// again starts another terminal (a tmux server of its own) with c's
// environment, and rex attached in it: a second client of the same
// server.
func (c *console) again(t *testing.T, w, h int, args ...string) *console {
	t.Helper()
	d := c.terminal(t, w, h)
	d.sendLine(strings.Join(append([]string{filepath.Join(c.bin, "rex")}, args...), " "))
	return d
}

// terminal starts another terminal with c's environment: a shell, with
// rex on its PATH.
func (c *console) terminal(t *testing.T, w, h int) *console {
	t.Helper()
	var rnd [6]byte
	rand.Read(rnd[:])
	env := append(append([]string(nil), c.env...), "PATH="+c.bin+":"+os.Getenv("PATH"))
	d := &console{t: t, socket: "rex-e2e-" + hex.EncodeToString(rnd[:]), home: c.home, env: env, bin: c.bin}
	t.Cleanup(func() { exec.Command("tmux", "-L", d.socket, "kill-server").Run() })
	d.tmux(d.env, "-f", "/dev/null", "-u", "new-session", "-d", "-s", "rex", "-x", fmt.Sprint(w), "-y", fmt.Sprint(h), "/bin/sh")
	d.waitFor(promptMark)
	return d
}

// shell runs a command line in a shell with the console's environment
// and returns its output (stdout and stderr) and exit status.
func (c *console) shell(line string) (string, int) {
	c.t.Helper()
	cmd := exec.Command("/bin/sh", "-c", line)
	cmd.Env = append(c.env, "PATH="+c.bin+":"+os.Getenv("PATH"))
	out, err := cmd.CombinedOutput()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		c.t.Fatalf("%s: %v", line, err)
	}
	return string(out), code
}

// serverPid is the pid in the rex server's server.json, 0 without one.
// serverDir is the directory of the test's rex server (its socket,
// server.json, the profiling socket).
func (c *console) serverDir() string { return filepath.Join(c.home, "run", "rex") }

func (c *console) serverPid() int {
	b, err := os.ReadFile(filepath.Join(c.serverDir(), "server.json"))
	if err != nil {
		return 0
	}
	var info struct {
		Pid int `json:"pid"`
	}
	json.Unmarshal(b, &info)
	return info.Pid
}

// detach leaves the console by ctrl+q → detach and waits for the shell.
func (c *console) detach() {
	c.t.Helper()
	c.keys("C-q")
	c.waitFor("Leave the console?", "Detach (tasks keep running)")
	c.keys("d")
	c.waitFor("[detached from the console: it runs on in the rex server", promptMark)
}

// waitGone waits until no process runs with marker in its command line.
func waitGone(t *testing.T, marker string, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for running(t, marker) {
		if time.Now().After(deadline) {
			out, _ := exec.Command("pgrep", "-a", "-f", marker).Output()
			t.Fatalf("still running after %s:\n%s", within, out)
		}
		time.Sleep(50 * time.Millisecond) // the hosts are processes here: polling /proc
	}
}

// waitRunning waits until a process with marker in its command line runs.
func waitRunning(t *testing.T, marker string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !running(t, marker) {
		if time.Now().After(deadline) {
			t.Fatalf("no process runs with %s", marker)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// lastLine is the highest N of line-N on the screen.
func lastLine(s string) int {
	n := 0
	for _, m := range regexp.MustCompile(`line-(\d+)`).FindAllStringSubmatch(s, -1) {
		if v, _ := strconv.Atoi(m[1]); v > n {
			n = v
		}
	}
	return n
}

// serverFleet is a console in its rex server with hosts h1..hN in group
// fleet, and the target on the group.
func serverFleet(t *testing.T, n int) (*console, []*sshtest.Server) {
	t.Helper()
	if _, err := exec.LookPath("tmux"); err != nil {
		t.Fatal("the console's end-to-end tests drive tmux; install tmux")
	}
	if _, err := exec.LookPath("pgrep"); err != nil {
		t.Fatal("these tests look for remote processes with pgrep; install procps")
	}
	bin := buildConsole(t)
	key := sshtest.NewKey(t, "ed25519")
	hosts := sshtest.Fleet(t, n, sshtest.Options{Authorized: []*sshtest.Key{key}})
	c := startConsole(t, bin, 140, 40)
	names := []string{}
	for i, h := range hosts {
		name := fmt.Sprintf("h%d", i+1)
		c.run(fmt.Sprintf("/device add %s %s@%s --key %s", name, h.User, h.Addr, key.Path), "added device "+name)
		names = append(names, name)
	}
	c.run("/device group create fleet", "created group fleet")
	c.run("/device group add fleet "+strings.Join(names, " "), "to group fleet")
	c.run("/target fleet", "target fleet")
	return c, hosts
}

// slowLoop prints line-1..line-n, one every 0.3 s, with marker in its
// command line so that the hosts can be asked whether it still runs.
func slowLoop(marker string, n int) string {
	return fmt.Sprintf(`sh -c 'i=0; while [ $i -lt %d ]; do i=$((i+1)); echo line-$i; sleep 0.3; done' %s`, n, marker)
}

func newMarker(prefix string) string {
	var rnd [6]byte
	rand.Read(rnd[:])
	return prefix + hex.EncodeToString(rnd[:])
}

// TestServerDetachReattachE2E: a slow loop on a group survives a detach
// by key and a closed window (the hosts still run it); rex from a new
// terminal attaches to the same panes, with the lines that arrived
// meanwhile; two clients attached at once both show new output; quit
// stops everything, on the hosts and here.
func TestServerDetachReattachE2E(t *testing.T) {
	c, _ := serverFleet(t, 2)
	marker := newMarker("rex-srv-")
	c.run(slowLoop(marker, 1000), "line-3")
	waitRunning(t, marker)
	pid := c.serverPid()
	if pid == 0 {
		t.Fatal("no server.json: the console is not in a rex server")
	}

	// Detach by key: the loop runs on.
	seen := lastLine(c.screen())
	c.detach()
	if !running(t, marker) {
		t.Fatal("the loop stopped when the client detached")
	}
	out, code := c.shell("rex ls")
	if code != 0 || !strings.Contains(out, fmt.Sprintf("rex server pid %d", pid)) || !regexp.MustCompile(`task +sh -c .* +on h1,h2 +2 running`).MatchString(out) {
		t.Fatalf("rex ls (status %d):\n%s", code, out)
	}

	// A new terminal attaches to the same panes, lines that came while
	// nobody was attached included.
	c2 := c.again(t, 140, 40)
	c2.waitFor(fmt.Sprintf("line-%d", seen+3), "fleet (2) ❯")
	// Closing that window (tmux gone: SIGHUP) detaches too.
	c2.tmux(nil, "kill-server")
	deadline := time.Now().Add(30 * time.Second)
	for {
		out, _ := c.shell("rex ls")
		if strings.Contains(out, "0 clients attached") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the closed window is still attached:\n%s", out)
		}
		time.Sleep(50 * time.Millisecond) // the server notices the end of the connection
	}
	if !running(t, marker) {
		t.Fatal("the loop stopped when the window closed")
	}
	if c.serverPid() != pid {
		t.Fatalf("the server changed: pid %d, was %d", c.serverPid(), pid)
	}

	// Two clients at once, of different sizes: both show new output.
	a := c.again(t, 140, 40)
	a.waitFor("fleet (2) ❯")
	b := c.again(t, 100, 30)
	b.waitFor("fleet (2) ❯")
	a.run("echo both-$((6*7))", "both-42")
	b.waitFor("both-42")
	out, _ = c.shell("rex ls")
	if !strings.Contains(out, "2 clients attached") {
		t.Fatalf("rex ls with two clients:\n%s", out)
	}

	// Quit from one: both are told, and everything stops.
	a.keys("C-q")
	a.waitFor("Leave the console?", "1 task is running")
	a.keys("q")
	a.waitFor("[the console quit", promptMark)
	b.waitFor("[the console quit", promptMark)
	waitGone(t, marker, 30*time.Second)
	deadline = time.Now().Add(30 * time.Second)
	for syscall.Kill(pid, 0) == nil && !zombie(pid) {
		if time.Now().After(deadline) {
			t.Fatalf("the rex server (pid %d) runs on after quit", pid)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if _, err := os.Stat(filepath.Join(c.home, "run", "rex", "server.json")); !os.IsNotExist(err) {
		t.Fatalf("server.json left after a clean quit: %v", err)
	}
}

// TestServerTerminalSurvivesDetachE2E: vi in a terminal pane keeps
// running while no client is attached and is drawn again, from its
// emulator, on reattach; it still takes keys.
func TestServerTerminalSurvivesDetachE2E(t *testing.T) {
	c, hosts := serverFleet(t, 1)
	if _, err := exec.LookPath("vi"); err != nil {
		t.Fatal("this test edits a file with vi on the host; install vim-tiny")
	}
	file := filepath.Join(hosts[0].Home, "notes.txt")
	c.run("/attach h1 -- vi "+file, "typing here")
	c.waitFor("~")
	c.keys("i")
	c.tmux(nil, "send-keys", "-t", "rex", "-l", "kept-by-the-server")
	c.keys("Escape")
	c.waitFor("kept-by-the-server")
	deadline := time.Now().Add(30 * time.Second)
	for strings.Contains(c.screen(), "-- INSERT --") {
		if time.Now().After(deadline) {
			t.Fatalf("vi did not leave insert mode:\n%s", c.screen())
		}
		time.Sleep(50 * time.Millisecond)
	}
	c.tmux(nil, "kill-server") // the window closes
	d := c.again(t, 140, 40)
	d.waitFor("kept-by-the-server", "~", "notes.txt")
	// The terminal still has the keys: save and quit vi.
	d.tmux(nil, "send-keys", "-t", "rex", "-l", ":wq")
	d.keys("Enter")
	deadline = time.Now().Add(30 * time.Second)
	for {
		b, _ := os.ReadFile(file)
		if strings.Contains(string(b), "kept-by-the-server") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("vi did not save after the reattach:\n%s", d.screen())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestServerStopAsksE2E: rex server stop with a task running says what
// runs and asks; no keeps it running, yes stops it all and says what it
// ended (with --force nothing else would).
func TestServerStopAsksE2E(t *testing.T) {
	c, _ := serverFleet(t, 1)
	marker := newMarker("rex-stop-")
	c.run(slowLoop(marker, 1000), "line-2")
	waitRunning(t, marker)
	pid := c.serverPid()

	sh := c.terminal(t, 240, 30) // the line that says what stopped is long
	sh.sendLine("clear; rex server stop; echo status=$?")
	sh.waitFor("task", "on h1", "Stop the rex server and all of this? [y/N]")
	sh.sendLine("n")
	sh.waitFor("ex server runs on: work is running in it", "status=1")
	if !running(t, marker) {
		t.Fatal("no stopped the task")
	}
	sh.sendLine("clear; rex server stop; echo status=$?")
	sh.waitFor("Stop the rex server and all of this? [y/N]")
	sh.sendLine("y")
	sh.waitFor(fmt.Sprintf("stopped the rex server (pid %d), ending task \"", pid), "on h1 (1 running)", "status=0")
	c.waitFor("[the console quit", promptMark)
	waitGone(t, marker, 30*time.Second)
}

// TestServerKilledE2E: a rex server killed with SIGKILL leaves nothing
// running on the hosts once rexd's resume grace (3 s here) has run out,
// and the next rex says in one sentence that it was gone before starting
// a fresh one.
func TestServerKilledE2E(t *testing.T) {
	c, hosts := serverFleet(t, 1)
	marker := newMarker("rex-kill-")
	// The session of that rexd expires 3 s after its connection drops.
	cfg := filepath.Join(c.home, ".config", "rex", "config.toml")
	if err := os.WriteFile(cfg, []byte("resume_grace = \"3s\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// The console reads config.toml when it starts: a fresh one.
	c.quit()
	c.sendLine(filepath.Join(c.bin, "rex"))
	c.waitFor("local ❯")
	c.run("/target h1", "target h1")
	c.run(slowLoop(marker, 1000), "line-2")
	waitRunning(t, marker)
	pid := c.serverPid()
	syscall.Kill(pid, syscall.SIGKILL)
	c.waitFor(fmt.Sprintf("ex server (pid %d) closed the connection unexpectedly", pid), promptMark)
	// rexd keeps the session for its grace, then stops the loop.
	waitGone(t, marker, 60*time.Second)
	audit, _ := os.ReadFile(filepath.Join(hosts[0].Home, ".local", "state", "rexd", "audit.log"))
	if !strings.Contains(string(audit), "not resumed within the resume grace of 3s, so rexd stopped 1 process") {
		t.Fatalf("h1's audit log does not say why the loop stopped:\n%s", audit)
	}
	c.sendLine("clear; " + filepath.Join(c.bin, "rex"))
	// The fresh server's console says it in its message area: what rex
	// printed before the console took the screen is covered at once.
	gone := fmt.Sprintf("rex: the rex server (pid %d, started", pid)
	c.waitFor(gone, "local ❯")
	if p := c.serverPid(); p == 0 || p == pid {
		t.Fatalf("no fresh server: pid %d (the dead one was %d)", p, pid)
	}
	// And the terminal has it once the console leaves the screen.
	c.detach()
	c.waitFor(gone)
}

// TestServerIdleGivesMemoryBackE2E: once the last client has detached,
// the server hands back the pages of rex's binary that its start mapped
// (most of its resident set when idle) and goes on working: a client
// attaches again and runs a command on the host.
func TestServerIdleGivesMemoryBackE2E(t *testing.T) {
	c, _ := serverFleet(t, 1)
	c.run("echo before-$((6*7))", "before-42")
	pid := c.serverPid()
	if pid == 0 {
		t.Fatal("no server.json: the console is not in a rex server")
	}
	attached := statusKB(t, pid, "RssFile:")
	c.detach()
	deadline := time.Now().Add(30 * time.Second)
	for {
		idle := statusKB(t, pid, "RssFile:")
		if idle < attached/2 {
			t.Logf("the server's pages of files: %d kB attached, %d kB idle", attached, idle)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the idle server still has %d kB of files' pages mapped (%d kB while attached)", idle, attached)
		}
		time.Sleep(100 * time.Millisecond) // polling /proc for the server's trim
	}
	c2 := c.again(t, 140, 40)
	c2.waitFor("fleet ❯")
	c2.run("echo after-$((6*7))", "after-42")
}

// TestServerVersionMismatchE2E: a rex of another version does not attach
// to the server that runs: it says which version runs and offers to stop
// it; no leaves it, yes replaces it.
func TestServerVersionMismatchE2E(t *testing.T) {
	c, _ := serverFleet(t, 1)
	other := filepath.Join(t.TempDir(), "rex")
	build := exec.Command("go", "build", "-ldflags", "-X github.com/rexconsole/rex/internal/version.Version=9.9.9", "-o", other, consoleMain)
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build rex 9.9.9: %v\n%s", err, out)
	}
	for _, name := range []string{"rexd"} { // it finds rexd beside itself
		b, _ := os.ReadFile(filepath.Join(c.bin, name))
		os.WriteFile(filepath.Join(filepath.Dir(other), name), b, 0o755)
	}
	pid := c.serverPid()
	c.detach()
	c.sendLine("clear; " + other + "; echo status=$?")
	c.waitFor(fmt.Sprintf("the rex server that runs (pid %d) is rex 0.1.0", pid), "this is rex 9.9.9", "Stop it", "[y/N]")
	c.sendLine("n")
	c.waitFor("status=2")
	if c.serverPid() != pid {
		t.Fatal("no stopped the server")
	}
	c.sendLine("clear; " + other)
	c.waitFor("Stop it", "[y/N]")
	c.sendLine("y")
	c.waitFor("local ❯")
	out, _ := c.shell(other + " ls")
	if !strings.Contains(out, "rex 9.9.9") || c.serverPid() == pid {
		t.Fatalf("the new server:\n%s", out)
	}
}

// TestNoServerE2E: rex --no-server runs the console in its own process:
// no rex server starts.
func TestNoServerE2E(t *testing.T) {
	bin := buildConsole(t)
	c := startConsoleWith(t, bin, "", 100, 30, "--no-server")
	c.run("echo in-process", "in-process")
	if _, err := os.Stat(filepath.Join(c.home, "run", "rex", "server.json")); !os.IsNotExist(err) {
		t.Fatalf("a rex server started under --no-server: %v", err)
	}
	c.quit()
}

// cutLoop prints n-1..n-40, one every 0.6 s, each also into cut.log in
// the host's home (what the process did, seen from the host), with
// marker in its command line.
func cutLoop(marker string) string {
	return fmt.Sprintf(`sh -c 'i=0; while [ $i -lt 40 ]; do i=$((i+1)); echo n-$i; echo n-$i >> cut.log; sleep 0.6; done' %s`, marker)
}

// numbers are the N of every n-N in lines, in order.
func numbers(lines []string) []int {
	var out []int
	for _, m := range regexp.MustCompile(`\bn-(\d+)\b`).FindAllStringSubmatch(strings.Join(lines, "\n"), -1) {
		v, _ := strconv.Atoi(m[1])
		out = append(out, v)
	}
	return out
}

// oneToForty reports whether ns is 1..40, each once, in order.
func oneToForty(ns []int) bool {
	if len(ns) != 40 {
		return false
	}
	for i, v := range ns {
		if v != i+1 {
			return false
		}
	}
	return true
}

// waitForty waits until the pane titled title shows n-1..n-40, each
// once, in order: the 40th line comes, and then any gap or repeat fails.
func waitForty(t *testing.T, c *console, title string) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		body, _, ok := paneBox(c.screen(), title)
		ns := numbers(body)
		if ok && len(ns) > 0 && ns[len(ns)-1] == 40 {
			if !oneToForty(ns) {
				t.Fatalf("%s's pane does not show n-1..n-40 once each: %v\n%s", title, ns, c.screen())
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s's pane never showed n-40: %v\n%s", title, ns, c.screen())
		}
		time.Sleep(100 * time.Millisecond) // the console draws on its own
	}
}

// TestServerNetworkLossE2E: a task streams on two hosts through the rex
// server; h1's network is cut (its proxy drops the connection and turns
// new ones away) for 20 s, then restored. With the default grace the
// pane says reconnecting…, then shows every line exactly once and the
// process never stopped; with resume_grace = "5s" the same cut ends in
// the process stopped, with rexd's sentence in the pane and its audit
// log, while h2 finishes.
func TestServerNetworkLossE2E(t *testing.T) {
	if _, err := exec.LookPath("tmux"); err != nil {
		t.Fatal("the console's end-to-end tests drive tmux; install tmux")
	}
	bin := buildConsole(t)
	key := sshtest.NewKey(t, "ed25519")
	hosts := sshtest.Fleet(t, 2, sshtest.Options{Authorized: []*sshtest.Key{key}})
	proxies := []*sshtest.Proxy{sshtest.NewProxy(t, hosts[0].Addr), sshtest.NewProxy(t, hosts[1].Addr)}
	c := startConsole(t, bin, 200, 100)
	for i, h := range hosts {
		name := fmt.Sprintf("h%d", i+1)
		c.run(fmt.Sprintf("/device add %s %s@%s --key %s", name, h.User, proxies[i].Addr, key.Path), "added device "+name)
	}
	c.run("/device group create fleet", "created group fleet")
	c.run("/device group add fleet h1 h2", "to group fleet")
	c.run("/target fleet", "target fleet")

	cut := func(marker string) {
		t.Helper()
		c.run(cutLoop(marker), "n-3")
		waitRunning(t, marker)
		proxies[0].Cut()
		c.waitFor("reconnecting…")
		// 20 s without a network, as the operator's Wi-Fi drops.
		time.Sleep(20 * time.Second)
		proxies[0].Restore()
	}

	t.Run("resumed", func(t *testing.T) {
		c := c.on(t)
		marker := newMarker("rex-cut-")
		cut(marker)
		if !running(t, marker) {
			t.Fatal("the loop on h1 stopped during the cut")
		}
		waitForty(t, c, "h1")
		waitForty(t, c, "h2")
		// The process never stopped: it wrote every line itself.
		b, _ := os.ReadFile(filepath.Join(hosts[0].Home, "cut.log"))
		if !oneToForty(numbers(strings.Split(string(b), "\n"))) {
			t.Fatalf("h1's cut.log:\n%s", b)
		}
		os.Remove(filepath.Join(hosts[0].Home, "cut.log"))
		os.Remove(filepath.Join(hosts[1].Home, "cut.log"))
	})

	t.Run("grace runs out", func(t *testing.T) {
		c := c.on(t)
		cfg := filepath.Join(c.home, ".config", "rex", "config.toml")
		if err := os.WriteFile(cfg, []byte("resume_grace = \"5s\"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		// The console reads config.toml when it starts: a fresh one.
		c.run("/close all", "closed")
		c.quit()
		c.sendLine(filepath.Join(c.bin, "rex"))
		c.waitFor("local ❯")
		c.run("/target fleet", "target fleet")
		marker := newMarker("rex-cut5-")
		cut(marker)
		c.waitFor("not resumed within the resume grace of 5s")
		waitGone(t, marker, 30*time.Second) // rexd stopped it (TERM, then KILL)
		audit, _ := os.ReadFile(filepath.Join(hosts[0].Home, ".local", "state", "rexd", "audit.log"))
		if !strings.Contains(string(audit), "not resumed within the resume grace of 5s, so rexd stopped 1 process") {
			t.Fatalf("h1's audit log does not say why the loop stopped:\n%s", audit)
		}
		waitForty(t, c, "h2")
	})
	c.quit()
}

// TestServerTerminalFollowsActiveClientE2E: two clients of different
// sizes attached at once; a terminal pane's PTY on the host takes the
// size of the client that attached, typed or resized last (tmux's
// window-size latest). The pane runs a script that writes `stty size` to
// a log on the host at start and at every SIGWINCH.
func TestServerTerminalFollowsActiveClientE2E(t *testing.T) {
	c, hosts := serverFleet(t, 1) // 140×40
	log := filepath.Join(hosts[0].Home, "sizes.log")
	script := filepath.Join(hosts[0].Home, "sizes.sh")
	body := "trap 'stty size >> " + log + "' WINCH\nstty size >> " + log + "\nwhile :; do sleep 0.1; done\n"
	if err := os.WriteFile(script, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	c.run("/attach h1 -- sh "+script, "typing here")
	// last waits until the log's last size satisfies ok and returns it
	// as rows, cols.
	last := func(what string, ok func(rows, cols int) bool) (int, int) {
		t.Helper()
		deadline := time.Now().Add(60 * time.Second)
		for {
			b, _ := os.ReadFile(log)
			lines := strings.Fields(strings.TrimSpace(string(b)))
			if n := len(lines); n >= 2 {
				rows, _ := strconv.Atoi(lines[n-2])
				cols, _ := strconv.Atoi(lines[n-1])
				if rows > 0 && cols > 0 && ok(rows, cols) {
					return rows, cols
				}
			}
			if time.Now().After(deadline) {
				t.Fatalf("the pane's PTY never took %s; sizes the host saw:\n%s", what, b)
			}
			time.Sleep(50 * time.Millisecond) // the host writes the log
		}
	}
	_, ac := last("a size", func(int, int) bool { return true })

	// A second, smaller client attaches: the pane follows it.
	b := c.again(t, 100, 30)
	// The columns tell the clients apart (the rows also move by a line
	// when the console shows a message, as when a client attaches).
	_, bc := last("the second, narrower client's width", func(r, cc int) bool { return cc < ac })

	// The first client types: the pane is its width again.
	c.tmux(nil, "send-keys", "-t", "rex", "-l", "x")
	last("the first client's width again", func(r, cc int) bool { return cc == ac })

	// The second client resizes its window to 120 columns: the pane
	// follows that, between the two.
	b.tmux(nil, "resize-window", "-t", "rex", "-x", "120", "-y", "34")
	last(fmt.Sprintf("a width between %d and %d after the resize", bc, ac), func(r, cc int) bool { return cc > bc && cc < ac })
}

// TestServerRelativePathsFollowClientE2E: the rex server was started in
// one directory; a rex attached from another pushes and pulls relative
// paths from its own directory, as a shell there would, not from the
// server's, and lists that directory's project tools; a client from the
// first directory gets the first again.
func TestServerRelativePathsFollowClientE2E(t *testing.T) {
	if _, err := exec.LookPath("tmux"); err != nil {
		t.Fatal("the console's end-to-end tests drive tmux; install tmux")
	}
	bin := buildConsole(t)
	root := sshtest.TempDir(t)
	dirs := map[string]string{}
	for _, name := range []string{"first", "second"} {
		dirs[name] = filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Join(dirs[name], "site"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dirs[name], "site", name+".txt"), []byte(name+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	c := startConsoleIn(t, bin, dirs["first"], 140, 40)
	c.detach()
	for name, dir := range dirs {
		if out, code := c.shell("cd " + dir + " && rex tool new walk/" + name); code != 0 {
			t.Fatalf("rex tool new in %s: %d %s", dir, code, out)
		}
	}

	for i, name := range []string{"second", "first"} {
		d := c.terminal(t, 140, 40)
		d.sendLine("cd " + dirs[name] + " && rex")
		d.waitFor("local ❯")
		dest := filepath.Join(root, fmt.Sprintf("dest%d", i))
		d.run("/push site "+dest, "push site "+dest+" — 1 ok")
		entries, err := os.ReadDir(dest)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, e := range entries {
			got = append(got, e.Name())
		}
		if len(got) != 1 || got[0] != name+".txt" {
			t.Errorf("/push site from a rex started in %s wrote %v, want [%s.txt]", dirs[name], got, name)
		}
		d.run("/pull "+dest+" back", "pull "+dest+" back — 1 ok")
		if _, err := os.Stat(filepath.Join(dirs[name], "back", name+".txt")); err != nil {
			t.Errorf("/pull into a relative LOCAL from a rex started in %s: %v", dirs[name], err)
		}
		other := map[string]string{"first": "second", "second": "first"}[name]
		if scr := d.run("/tool list", "walk/"+name); strings.Contains(scr, "walk/"+other) {
			t.Errorf("/tool list from a rex started in %s lists walk/%s, %s's project tool:\n%s", dirs[name], other, dirs[other], scr)
		}
		d.detach()
	}
}
