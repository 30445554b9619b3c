package tui_test

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/charmbracelet/x/ansi"

	"github.com/rexconsole/rex/internal/sshtest"
)

// paneBodies returns the body rows of every pane titled title on the
// screen, in screen order (left to right, top to bottom).
func paneBodies(screen, title string) [][]string {
	lines := strings.Split(screen, "\n")
	var out [][]string
	for i, l := range lines {
		for from := 0; ; {
			idx := strings.Index(l[from:], "╭─ "+title+" ")
			if idx < 0 {
				break
			}
			idx += from
			row := []rune(l)
			col := len([]rune(l[:idx]))
			end := col + 1
			for end < len(row) && row[end] != '╮' {
				end++
			}
			var body []string
			for _, b := range lines[i+1:] {
				r := []rune(b)
				if len(r) <= end || r[col] == '╰' {
					break
				}
				body = append(body, string(r[col+1:end]))
			}
			out = append(out, body)
			from = idx + len("╭─ ")
		}
	}
	return out
}

// commandLines are the rows of a pane body that head a command.
func commandLines(body []string) []string {
	var out []string
	for _, l := range body {
		if t := strings.TrimSpace(l); strings.HasPrefix(t, "❯ ") {
			out = append(out, t)
		}
	}
	return out
}

// sgrRed matches text drawn red: the SGR sequences right before it set
// the foreground to ANSI red (31, or 91, or palette colour 1).
var sgrRed = regexp.MustCompile(`\x1b\[([0-9;:]*)m(?:\x1b\[[0-9;:]*m)*red`)

func drawnRed(line string) bool {
	for _, m := range sgrRed.FindAllStringSubmatch(line, -1) {
		ps := strings.Split(m[1], ";")
		for i := 0; i < len(ps); i++ {
			switch p := ps[i]; {
			case (p == "38" || p == "48") && i+1 < len(ps) && ps[i+1] == "5":
				if p == "38" && i+2 < len(ps) && (ps[i+2] == "1" || ps[i+2] == "9") {
					return true
				}
				i += 2
			case (p == "38" || p == "48") && i+1 < len(ps) && ps[i+1] == "2":
				i += 4
			case p == "31" || p == "91":
				return true
			}
		}
	}
	return false
}

// TestConsoleWorkingDayE2E drives the real console under tmux against
// four loopback sshd hosts through what an operator's day holds: three
// commands on a group leave one pane per host, each reading like that
// host's history; /tasks lists them and opens the first again; ctrl+q
// with a task running asks first; a device added from another shell
// shows in the sidebar; /device check of a dead host leaves it
// unreachable; a program's red stays red.
func TestConsoleWorkingDayE2E(t *testing.T) {
	if _, err := exec.LookPath("tmux"); err != nil {
		t.Fatal("the console's end-to-end tests drive tmux; install tmux")
	}
	bin := buildConsole(t)
	key := sshtest.NewKey(t, "ed25519")
	fleet := sshtest.Fleet(t, 4, sshtest.Options{Authorized: []*sshtest.Key{key}})
	down := sshtest.RefusingAddr(t)
	c := startConsole(t, bin, 160, 50)

	for i, s := range fleet[:3] {
		c.run(fmt.Sprintf("/device add h%d %s@%s --key %s", i+1, s.User, s.Addr, key.Path), fmt.Sprintf("added device h%d", i+1))
	}
	// Another shell adds h4: the console's sidebar shows it by itself.
	added := time.Now()
	other := exec.Command(filepath.Join(bin, "rex"), "device", "add", "h4", fleet[3].User+"@"+fleet[3].Addr, "--key", key.Path)
	other.Env = c.env
	if out, err := other.CombinedOutput(); err != nil {
		t.Fatalf("rex device add in another shell: %v\n%s", err, out)
	}
	s := c.waitFor("DEVICES 4", " h4 ")
	t.Logf("a device added in another shell showed after %v", time.Since(added).Round(time.Millisecond))
	if strings.Contains(s, "added device h4") {
		t.Errorf("the console claims to have added h4 itself:\n%s", s)
	}

	c.run("/device group create fleet", "created group fleet")
	c.run("/device group add fleet h1 h2 h3 h4", "to group fleet")
	c.run("/target fleet", "target fleet")

	// Three commands on the group: four panes, each with the three.
	c.run("echo one", "echo one — 4 ok")
	c.run("echo two-$HOME", "echo two-$HOME — 4 ok")
	c.run(`printf '\033[31mred\033[0m\n'`, `printf '\033[31mred\033[0m\n' — 4 ok`)
	s = c.screen()
	if n := strings.Count(s, "╭─ h"); n != 4 {
		t.Errorf("%d panes after three commands on 4 hosts, want 4:\n%s", n, s)
	}
	for i, h := range []string{"h1", "h2", "h3", "h4"} {
		bodies := paneBodies(s, h)
		if len(bodies) != 1 {
			t.Errorf("%d panes for %s, want 1:\n%s", len(bodies), h, s)
			continue
		}
		heads := commandLines(bodies[0])
		if len(heads) != 3 || !strings.HasPrefix(heads[0], "❯ echo one · ") || !strings.HasPrefix(heads[1], "❯ echo two-$HOME · ") || !strings.HasPrefix(heads[2], "❯ printf ") {
			t.Errorf("%s's headers %q, want the three commands in order:\n%s", h, heads, s)
		}
		body := strings.Join(bodies[0], "\n")
		if !strings.Contains(body, "two-"+fleet[i].Home) || strings.Count(body, "✓ exit 0") != 3 {
			t.Errorf("%s's pane lacks its own output or a status line:\n%s", h, body)
		}
	}
	// The program's colour reaches the terminal.
	colour := c.tmux(nil, "capture-pane", "-p", "-e", "-t", "rex")
	red := 0
	for _, l := range strings.Split(colour, "\n") {
		if strings.Contains(ansi.Strip(l), "│red ") && drawnRed(l) {
			red++
		}
	}
	if red == 0 {
		t.Errorf("no pane draws \"red\" in red:\n%q", colour)
	}

	// /tasks lists the three, newest first; the oldest opens again.
	s = c.run("/tasks", "Tasks this session (3)", "#3", "#2", "#1")
	if i1, i3 := strings.Index(s, "#1 "), strings.Index(s, "#3 "); i3 > i1 {
		t.Errorf("the task list is not newest first:\n%s", s)
	}
	c.keys("End")
	c.keys("Enter")
	s = c.waitFor("task #1: echo one on fleet (4 targets)", "8 panes")
	opened := 0
	for _, h := range []string{"h1", "h2", "h3", "h4"} {
		for _, body := range paneBodies(s, h) {
			if len(commandLines(body)) == 0 && bodyLine("one")(body) {
				opened++
			}
		}
	}
	if opened != 4 {
		t.Errorf("%d panes show task #1's output alone, want 4:\n%s", opened, s)
	}

	// ctrl+q with a task running asks, naming it; staying keeps it.
	c.run("/close all", "closed 8 panes")
	c.run("sleep 30", "1 running")
	c.keys("C-q")
	c.waitFor("Leave the console?", "1 task is running: sleep 30 on fleet (4 targets).", "Stay (n)")
	c.keys("n")
	deadline := time.Now().Add(30 * time.Second)
	for strings.Contains(c.screen(), "Leave the console?") {
		if time.Now().After(deadline) {
			t.Fatalf("the dialog did not close:\n%s", c.screen())
		}
		time.Sleep(50 * time.Millisecond)
	}
	if s := c.screen(); !strings.Contains(s, "1 running") {
		t.Fatalf("keep working stopped the task:\n%s", s)
	}
	c.keys("C-c")
	c.waitFor("sleep 30 — cancelled")

	// A dead host, checked: unreachable in the sidebar, not connecting.
	c.run("/device add down1 "+down, "added device down1")
	c.run("/device check down1", "refused")
	row := regexp.MustCompile(`✗ down1 +unreachable`)
	deadline = time.Now().Add(30 * time.Second)
	for !row.MatchString(c.screen()) {
		if time.Now().After(deadline) {
			t.Fatalf("the sidebar does not show down1 unreachable:\n%s", c.screen())
		}
		time.Sleep(50 * time.Millisecond)
	}
	if s := c.screen(); strings.Contains(s, "◌") {
		t.Errorf("something still says connecting after every dial ended:\n%s", s)
	}
	c.quit()
}
