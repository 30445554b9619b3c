package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// tmuxSession is a tmux server of its own (its own socket) running one
// window, for driving rex like an operator's terminal.
type tmuxSession struct {
	t      *testing.T
	socket string
	env    []string
	home   string
}

// newTmux starts a detached tmux server with a plain bash at cols×rows.
// HOME and the XDG directories point into a temp dir.
func newTmux(t *testing.T, cols, rows int) *tmuxSession {
	t.Helper()
	if _, err := exec.LookPath("tmux"); err != nil {
		t.Fatal("tmux is required for the end-to-end tests: apt-get install tmux")
	}
	home := t.TempDir()
	s := &tmuxSession{t: t, socket: fmt.Sprintf("rex-test-%d-%d", os.Getpid(), time.Now().UnixNano()), home: home}
	s.env = []string{"HOME=" + home, "TERM=xterm-256color", "PATH=" + filepath.Dir(rexBin) + ":" + os.Getenv("PATH"),
		"XDG_CONFIG_HOME=" + filepath.Join(home, ".config"), "XDG_STATE_HOME=" + filepath.Join(home, ".local/state"),
		"XDG_CACHE_HOME=" + filepath.Join(home, ".cache"), "XDG_RUNTIME_DIR=" + filepath.Join(home, "run"), "LANG=C.UTF-8"}
	os.Mkdir(filepath.Join(home, "run"), 0o700)
	rc := filepath.Join(home, ".testrc")
	os.WriteFile(rc, []byte("PS1='LOCAL$ '\nunset PROMPT_COMMAND\nHISTFILE=/dev/null\n"), 0o644)
	// The shell starts with exactly this environment, passed as words:
	// no shell parses it.
	args := []string{"-f", "/dev/null", "new-session", "-d", "-s", "main", "-x", fmt.Sprint(cols), "-y", fmt.Sprint(rows), "env", "-i"}
	args = append(args, s.env...)
	args = append(args, "bash", "--noprofile", "--rcfile", rc, "-i")
	s.tmux(args...)
	t.Cleanup(s.kill)
	return s
}

// kill stops the tmux server and waits for every process that ran under it
// to go, so none still writes into the temp HOME when it is removed.
func (s *tmuxSession) kill() {
	var pids []int
	if out, err := exec.Command("tmux", "-L", s.socket, "display", "-p", "-t", "main", "#{pid} #{pane_pid}").Output(); err == nil {
		for _, f := range strings.Fields(string(out)) {
			if p, err := strconv.Atoi(f); err == nil {
				pids = append(pids, p)
			}
		}
	}
	if len(pids) == 2 {
		pids = append(pids, descendants(pids[1])...)
	}
	exec.Command("tmux", "-L", s.socket, "kill-server").Run()
	deadline := time.Now().Add(5 * time.Second)
	for _, p := range pids {
		for syscall.Kill(p, 0) == nil && !zombie(p) && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// descendants lists the processes below pid, from /proc.
func descendants(pid int) []int {
	children := map[int][]int{}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		st := string(b)
		i := strings.LastIndexByte(st, ')')
		if f := strings.Fields(st[i+1:]); len(f) > 2 {
			if pp, err := strconv.Atoi(f[1]); err == nil {
				children[pp] = append(children[pp], p)
			}
		}
	}
	var out []int
	queue := []int{pid}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		for _, c := range children[p] {
			out = append(out, c)
			queue = append(queue, c)
		}
	}
	return out
}

func (s *tmuxSession) tmux(args ...string) string {
	s.t.Helper()
	out, err := exec.Command("tmux", append([]string{"-L", s.socket}, args...)...).CombinedOutput()
	if err != nil {
		s.t.Fatalf("tmux %v: %v\n%s", args, err, out)
	}
	return string(out)
}

// send types keys (tmux key names allowed, e.g. "Enter", "C-]").
func (s *tmuxSession) send(keys ...string) {
	s.t.Helper()
	s.tmux(append([]string{"send-keys", "-t", "main"}, keys...)...)
}

// line types text literally and presses Enter.
func (s *tmuxSession) line(text string) {
	s.t.Helper()
	s.tmux("send-keys", "-t", "main", "-l", text)
	s.send("Enter")
}

func (s *tmuxSession) screen() string {
	s.t.Helper()
	return s.tmux("capture-pane", "-p", "-t", "main")
}

// waitFor waits until the screen satisfies cond, or fails showing it.
func (s *tmuxSession) waitFor(what string, cond func(screen string) bool) string {
	s.t.Helper()
	deadline := time.Now().Add(60 * time.Second) // generous: -race on a loaded machine
	var scr string
	for time.Now().Before(deadline) {
		scr = s.screen()
		if cond(scr) {
			return scr
		}
		time.Sleep(50 * time.Millisecond)
	}
	s.t.Fatalf("timed out waiting for %s; screen:\n%s", what, scr)
	return ""
}

func (s *tmuxSession) waitText(text string) string {
	s.t.Helper()
	return s.waitFor(fmt.Sprintf("%q", text), func(scr string) bool { return strings.Contains(scr, text) })
}
