package tui_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// children lists the pids of pid's children named comm, from /proc.
func children(pid int, comm string) []int {
	ents, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range ents {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		st, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		s := string(st)
		open, close := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
		if open < 0 || close < open {
			continue
		}
		f := strings.Fields(s[close+1:])
		if len(f) > 1 && s[open+1:close] == comm && f[0] != "Z" {
			if ppid, _ := strconv.Atoi(f[1]); ppid == pid {
				out = append(out, p)
			}
		}
	}
	return out
}

// TestConsoleReapsIdleConnections (item 2: the idle reaper runs in the
// console): with idle_timeout = "1s" in config.toml, the real console
// closes a target's connection (here local's rexd) once nothing has used
// it for that long, and dials again for the next command.
func TestConsoleReapsIdleConnections(t *testing.T) {
	if _, err := exec.LookPath("tmux"); err != nil {
		t.Fatal("the console's end-to-end tests drive tmux; install tmux")
	}
	bin := buildConsole(t)
	// The first start makes the directories; the second reads the setting.
	c := startConsole(t, bin, 120, 40)
	c.quit()
	cfg := filepath.Join(c.home, ".config", "rex")
	if err := os.MkdirAll(cfg, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(cfg, "config.toml"), []byte("idle_timeout = \"1s\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	c.sendLine(filepath.Join(bin, "rex"))
	c.waitFor("local ❯")
	// The console runs in the test's rex server: local's rexd is its child.
	server := c.serverPid()
	if server == 0 {
		t.Fatal("no server.json: the console is not in a rex server")
	}
	rex := []int{server}
	// rexd starts for the command and is closed a second after it.
	waitRexd := func(want bool, what string) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for (len(children(rex[0], "rexd")) > 0) != want {
			if time.Now().After(deadline) {
				t.Fatalf("%s: rexd children of rex %v\n%s", what, children(rex[0], "rexd"), c.screen())
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	c.run("echo first-$((20+1))", "first-21")
	waitRexd(true, "no rexd for local")
	waitRexd(false, "the idle connection to local was not closed")
	c.run("echo second-$((20+2))", "second-22")
	c.quit()
}
