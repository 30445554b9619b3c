package tui_test

import (
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rexconsole/rex/internal/sshtest"
)

// paneBox finds the pane whose top border starts "╭─ title " on the
// screen and returns its body rows (the text between its side borders)
// and its outer width; ok is false when no such pane shows.
func paneBox(screen, title string) (body []string, width int, ok bool) {
	lines := strings.Split(screen, "\n")
	for i, l := range lines {
		idx := strings.Index(l, "╭─ "+title+" ")
		if idx < 0 {
			continue
		}
		row := []rune(l)
		col := len([]rune(l[:idx]))
		end := col + 1
		for end < len(row) && row[end] != '╮' {
			end++
		}
		if end >= len(row) {
			return nil, 0, false
		}
		for _, b := range lines[i+1:] {
			r := []rune(b)
			if len(r) <= end || r[col] == '╰' {
				break
			}
			body = append(body, string(r[col+1:end]))
		}
		return body, end - col + 1, true
	}
	return nil, 0, false
}

// waitPane polls the screen until the pane titled title satisfies cond,
// and returns its body.
func (c *console) waitPane(title, what string, cond func(body []string) bool) []string {
	c.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		s := c.screen()
		if body, _, ok := paneBox(s, title); ok && cond(body) {
			return body
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("the pane %s never showed %s:\n%s", title, what, s)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// tryPane is waitPane for at most d; it reports whether cond held.
func (c *console) tryPane(title string, d time.Duration, cond func(body []string) bool) bool {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if body, _, ok := paneBox(c.screen(), title); ok && cond(body) {
			return true
		}
		time.Sleep(50 * time.Millisecond)
	}
	return false
}

// bodyLine reports whether a body row, trimmed, is want.
func bodyLine(want string) func([]string) bool {
	return func(body []string) bool {
		for _, l := range body {
			if strings.TrimSpace(l) == want {
				return true
			}
		}
		return false
	}
}

func bodyHas(want string) func([]string) bool {
	return func(body []string) bool { return strings.Contains(strings.Join(body, "\n"), want) }
}

// on is the console as seen by subtest t.
func (c *console) on(t *testing.T) *console {
	cc := *c
	cc.t = t
	return &cc
}

// checkTerminal drives one terminal pane the way an operator does: a
// command, vi and back, a window resize seen by stty inside the pane, the
// detach key and back to the same shell, the program's exit.
func checkTerminal(t *testing.T, c *console, title, attach string) {
	c.run(attach, "╭─ "+title+" · login shell", "typing here")
	c.sendLine("export PS1='PTY> ' MARK=alive-$((40+2))")
	c.waitPane(title, "the prompt", bodyHas("PTY>"))

	c.sendLine("echo $((6*7))")
	c.waitPane(title, "42 on a line of its own", bodyLine("42"))

	// A paste reaches the program whole, bracketed when it asked for
	// bracketed paste (cat -v shows the brackets), and is not run before
	// enter.
	c.tmux(nil, "set-buffer", "-b", "rexpaste", "echo pasted-$((3*3))")
	c.tmux(nil, "paste-buffer", "-p", "-b", "rexpaste", "-t", "rex")
	c.waitPane(title, "the pasted line", bodyHas("PTY> echo pasted-$((3*3))"))
	if c.tryPane(title, 300*time.Millisecond, bodyLine("pasted-9")) {
		t.Fatalf("the paste ran before enter:\n%s", c.screen())
	}
	c.keys("Enter")
	c.waitPane(title, "the pasted command's output", bodyLine("pasted-9"))
	// head reads the 32 bytes of the bracketed paste and stops by itself.
	c.sendLine(`printf '\033[?2004h'; echo ready-for-paste; head -c 32 | cat -v; echo`)
	// Bracketed paste is on once the pane shows the line printed after
	// asking for it (output arrives in order); head reads whenever the
	// paste lands, the terminal holds it until then.
	c.waitPane(title, "the reader ready", bodyLine("ready-for-paste"))
	c.tmux(nil, "paste-buffer", "-p", "-b", "rexpaste", "-t", "rex")
	c.keys("Enter")
	c.waitPane(title, "the paste in brackets", bodyLine("^[[200~echo pasted-$((3*3))^[[201~"))

	// The pane's size, not the window's, is the terminal's size.
	c.tmux(nil, "resize-window", "-t", "rex", "-x", "100", "-y", "30")
	var rows, cols int
	deadline := time.Now().Add(30 * time.Second)
	for {
		body, w, ok := paneBox(c.screen(), title)
		if ok && w < 100 && len(body) < 30 {
			rows, cols = len(body), w-2
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the pane never took the new window size:\n%s", c.screen())
		}
		time.Sleep(50 * time.Millisecond)
	}
	if rows == 30 || cols == 100 {
		t.Fatalf("pane body %dx%d is the window's size", cols, rows)
	}
	// The remote side is resized a moment after the pane (the resize is
	// debounced): ask again until it has been. The pane is measured again
	// each time: the first frame after the resize may have been laid out
	// before the whole window's size was known.
	want := fmt.Sprintf("%d %d", rows, cols)
	for try := 0; ; try++ {
		if body, w, ok := paneBox(c.screen(), title); ok {
			want = fmt.Sprintf("%d %d", len(body), w-2)
		}
		c.sendLine("clear; stty size")
		if c.tryPane(title, time.Second, bodyLine(want)) {
			break
		}
		if try == 10 {
			t.Fatalf("stty size in the pane never said %q:\n%s", want, c.screen())
		}
	}
	c.tmux(nil, "resize-window", "-t", "rex", "-x", "120", "-y", "40")

	// ctrl+] gives the command line the keys; the shell lives on.
	c.keys("C-]")
	c.waitFor("enter types in " + title)
	c.keys("-l", "zz-typed")
	s := c.waitFor("❯ zz-typed")
	if body, _, _ := paneBox(s, title); bodyHas("zz-typed")(body) {
		t.Fatalf("typing after ctrl+] reached the terminal:\n%s", s)
	}
	c.keys("C-u")
	c.keys("Enter") // an empty line: back into the pane
	c.waitFor("every key goes to " + title)
	c.sendLine("echo still-$MARK")
	c.waitPane(title, "the variable set before ctrl+]", bodyLine("still-alive-42"))

	// The program's exit shows in the header; the pane closes.
	c.sendLine("exit 3")
	c.waitFor("exit 3 ─", "enter reopens the terminal on "+title)
	c.run("/close", "closed "+title)
}

// TestTerminalPaneLocalE2E drives terminal panes of the real console
// binary under tmux on `local`, and hands the real terminal to one.
func TestTerminalPaneLocalE2E(t *testing.T) {
	if _, err := exec.LookPath("tmux"); err != nil {
		t.Fatal("the console's end-to-end tests drive tmux; install tmux")
	}
	t.Parallel()
	bin := buildConsole(t)
	// Full screen hands this process's terminal to the pane: the console
	// runs in it (in the rex server, ctrl+t says it cannot).
	c := startConsoleWith(t, bin, "", 120, 40, "--no-server")

	t.Run("terminal", func(t *testing.T) { checkTerminal(t, c.on(t), "local", "/attach") })

	t.Run("fullscreen", func(t *testing.T) {
		c := c.on(t)
		c.run("/attach local", "╭─ local · login shell", "typing here")
		c.sendLine("export PS1='PTY> ' MARK=fs-$((1+1))")
		c.waitPane("local", "the prompt", bodyHas("PTY>"))
		c.keys("C-]")
		c.waitFor("enter types in local")
		c.keys("C-t")
		// The whole window is the terminal now: no borders, the shell's
		// screen painted, the window's size.
		deadline := time.Now().Add(30 * time.Second)
		for s := c.screen(); strings.Contains(s, "╭─") || !strings.Contains(s, "PTY>"); s = c.screen() {
			if time.Now().After(deadline) {
				t.Fatalf("the terminal never went full screen:\n%s", s)
			}
			time.Sleep(50 * time.Millisecond)
		}
		c.sendLine("stty size; echo full-$((2+3))")
		s := c.waitFor("full-5")
		if !strings.Contains(s, "\n40 120\n") || strings.Contains(s, "╭─") {
			t.Fatalf("full screen: want the window's size and no console:\n%s", s)
		}
		c.keys("C-]")
		c.waitPane("local", "the pane back with what happened full screen", bodyLine("full-5"))
		c.waitFor("enter types in local", "local ❯")
		c.keys("Enter")
		c.sendLine("clear; echo same-$MARK")
		c.waitPane("local", "the same shell", bodyLine("same-fs-2"))
		body, w, _ := paneBox(c.screen(), "local")
		want := fmt.Sprintf("%d %d", len(body), w-2)
		for try := 0; ; try++ {
			c.sendLine("clear; stty size")
			if c.tryPane("local", time.Second, bodyLine(want)) {
				break
			}
			if try == 10 {
				t.Fatalf("back in the pane, stty size never said the pane's %q:\n%s", want, c.screen())
			}
		}
		c.keys("C-]")
	})
	c.quit()
}

// startHosts starts n loopback sshd hosts, each with its own identity in
// REX_HOST (the hosts are all this machine).
func startHosts(t *testing.T, n int, key *sshtest.Key) []*sshtest.Server {
	var hosts []*sshtest.Server
	for i := range n {
		hosts = append(hosts, sshtest.Start(t, sshtest.Options{
			Authorized: []*sshtest.Key{key},
			Env:        map[string]string{"REX_HOST": fmt.Sprintf("h%d", i+1)},
		}))
	}
	return hosts
}

// dropConnections ends the connection handlers of one sshd (processes
// the test started, below the server it started): its clients see the
// connection drop while the server keeps listening.
func dropConnections(t *testing.T, s *sshtest.Server) {
	n := 0
	for _, pid := range s.Descendants() {
		if comm, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/comm"); strings.TrimSpace(string(comm)) == "sshd" {
			if syscall.Kill(pid, syscall.SIGTERM) == nil {
				n++
			}
		}
	}
	if n == 0 {
		t.Fatalf("no connection of %s to drop", s.Addr)
	}
}

// TestTerminalPaneSSHE2E drives terminal panes on loopback sshd hosts:
// one terminal, broadcast into three, and a dropped connection resumed.
func TestTerminalPaneSSHE2E(t *testing.T) {
	if _, err := exec.LookPath("tmux"); err != nil {
		t.Fatal("the console's end-to-end tests drive tmux; install tmux")
	}
	t.Parallel()
	bin := buildConsole(t)
	key := sshtest.NewKey(t, "ed25519")
	hosts := startHosts(t, 3, key)
	c := startConsole(t, bin, 120, 40)
	for i, s := range hosts {
		c.run(fmt.Sprintf("/device add h%d %s@%s --key %s", i+1, s.User, s.Addr, key.Path), fmt.Sprintf("added device h%d", i+1))
	}
	c.run("/device group create fleet", "created group fleet")
	c.run("/device group add fleet h1 h2 h3", "added h1, h2, h3 to group fleet")

	t.Run("terminal", func(t *testing.T) { checkTerminal(t, c.on(t), "h1", "/attach h1") })

	t.Run("broadcast", func(t *testing.T) {
		c := c.on(t)
		c.run("/attach fleet", "╭─ h1 ", "╭─ h2 ", "╭─ h3 ")
		for _, h := range []string{"h1", "h2", "h3"} {
			c.waitPane(h, "a shell prompt", func(b []string) bool { return strings.TrimSpace(strings.Join(b, "")) != "" })
		}
		c.keys("C-]")
		c.run("/broadcast", "BROADCAST: keys go to 3 terminals", "⇶ broadcast to 3 terminals")
		c.sendLine(`echo "id=$REX_HOST"`)
		for _, h := range []string{"h1", "h2", "h3"} {
			body := c.waitPane(h, "its own identity", bodyLine("id="+h))
			for _, other := range []string{"h1", "h2", "h3"} {
				if other != h && bodyLine("id="+other)(body) {
					t.Errorf("the pane of %s shows %s's identity:\n%s", h, other, strings.Join(body, "\n"))
				}
			}
		}
		// Zoomed, h1's terminal takes the whole main area, remote side too.
		c.keys("C-]")
		c.run("/broadcast", "broadcast off")
		_, before, _ := paneBox(c.screen(), "h1")
		c.keys("C-o")
		var rows, cols int
		deadline := time.Now().Add(30 * time.Second)
		for {
			body, w, ok := paneBox(c.screen(), "h1")
			if ok && w > before {
				rows, cols = len(body), w-2
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("h1 never zoomed:\n%s", c.screen())
			}
			time.Sleep(50 * time.Millisecond)
		}
		c.keys("Enter")
		want := fmt.Sprintf("%d %d", rows, cols)
		for try := 0; ; try++ {
			c.sendLine("clear; stty size")
			if c.tryPane("h1", time.Second, bodyLine(want)) {
				break
			}
			if try == 10 {
				t.Fatalf("zoomed, stty size in h1 never said %q:\n%s", want, c.screen())
			}
		}
		c.keys("C-]")
		c.keys("C-o")
		c.run("/broadcast", "BROADCAST: keys go to 3 terminals")

		// Every terminal ends at once.
		c.sendLine("exit")
		c.waitFor("enter reopens the terminal on h1")
		for _, h := range []string{"h1", "h2", "h3"} {
			c.waitPane(h, "its shell ended", bodyHas("login shell ended (exit 0)"))
		}
		c.run("/broadcast", "broadcast off")
		c.run("/close all", "closed 3 panes")
		if s := c.screen(); strings.Contains(s, "╭─ h") {
			t.Errorf("terminal panes left after exit and /close all:\n%s", s)
		}
	})

	t.Run("resume", func(t *testing.T) {
		// The console's sessions are resumable (resume_grace): a dropped
		// connection is dialled again and the same shell carries on.
		c := c.on(t)
		c.run("/attach h2", "╭─ h2 · login shell", "typing here")
		c.sendLine("export PS1='PTY> ' KEPT=same-$((40+2)); echo first-$REX_HOST")
		c.waitPane("h2", "the first shell", bodyLine("first-h2"))
		dropConnections(t, hosts[1])
		// Typed at once: the keys wait for the connection to come back.
		c.sendLine("echo again-$REX_HOST-$KEPT")
		body := c.waitPane("h2", "the same shell over a new connection", bodyLine("again-h2-same-42"))
		if !bodyLine("first-h2")(body) {
			t.Errorf("the first shell's output is gone after the connection came back:\n%s", strings.Join(body, "\n"))
		}
		if s := c.screen(); strings.Contains(s, "connection lost") {
			t.Errorf("the terminal was lost with its connection:\n%s", s)
		}
		c.keys("C-]")
	})
	c.quit()
}
