package rexd

import (
	"bufio"
	"fmt"
	"io"
	"os/exec"
	"os/signal"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// A rexd that is killed outright (SIGKILL, the OOM killer) gets no
// chance to stop what it started, and a command that neither reads nor
// writes (a sleep, a server) would run on for good. A guard process
// stops them then: rexd tells it, over a pipe, which process groups are
// live; when the pipe ends without rexd's word that it is leaving on
// purpose, the guard sends those groups TERM, then KILL after the
// grace. It is the rexd executable itself (GuardFlag), started with the
// first process, in a process group of its own so that a signal to
// rexd's group does not stop it first; it ignores TERM, INT and HUP,
// which would end it with rexd and leave nobody to clean up.

// GuardFlag, as the first argument of the rexd executable, makes it the
// guard process (RunGuard); the second is the grace in milliseconds.
const GuardFlag = "--guard"

// guard is rexd's side of its guard process.
type guard struct {
	exe   string        // the rexd executable; "" runs no guard
	grace time.Duration // between TERM and KILL

	mu       sync.Mutex
	w        io.WriteCloser // the guard's input, once started
	starting bool           // a start is due or under way
	off      bool           // released, or the guard could not start or went away
	live     map[int]bool   // groups to tell it once started
}

// guardDelay is how long the first process runs before the guard is
// started: a command that ends sooner (most of a fan-out's) costs no
// process start, at the price of no guard in its first moments.
const guardDelay = 100 * time.Millisecond

// watch has the guard stop process group pgid should rexd die.
func (g *guard) watch(pgid int) { g.say('+', pgid) }

// forget takes pgid off the guard's list: its leader has been reaped,
// and the number may soon name another group.
func (g *guard) forget(pgid int) { g.say('-', pgid) }

func (g *guard) say(op byte, pgid int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.exe == "" || g.off {
		return
	}
	if g.w != nil {
		if _, err := fmt.Fprintf(g.w, "%c%d\n", op, pgid); err != nil {
			g.off = true // it went away: processes go unguarded, as before
		}
		return
	}
	if op == '-' {
		delete(g.live, pgid)
		return
	}
	if g.live == nil {
		g.live = map[int]bool{}
	}
	g.live[pgid] = true
	if !g.starting {
		g.starting = true
		time.AfterFunc(guardDelay, g.start)
	}
}

func (g *guard) start() {
	g.mu.Lock()
	if g.off || len(g.live) == 0 {
		g.starting = false // every process ended first
		g.mu.Unlock()
		return
	}
	g.mu.Unlock()
	cmd := exec.Command(g.exe, GuardFlag, strconv.FormatInt(g.grace.Milliseconds(), 10))
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	w, err := cmd.StdinPipe()
	if err == nil {
		err = cmd.Start()
	}
	if err == nil {
		go cmd.Wait()
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if err != nil || g.off {
		g.off = true
		if err == nil {
			io.WriteString(w, "q\n") // released while it started
			w.Close()
		}
		return
	}
	g.w = w
	for pgid := range g.live {
		if _, err := fmt.Fprintf(w, "+%d\n", pgid); err != nil {
			g.off = true
			break
		}
	}
	g.live = nil
}

// release lets the guard go without stopping anything: rexd is leaving
// on purpose, and what it leaves running (detached processes) it leaves
// so.
func (g *guard) release() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.off = true
	if g.w != nil {
		io.WriteString(g.w, "q\n")
		g.w.Close()
		g.w = nil
	}
}

// RunGuard is the guard process: it reads "+PGID" and "-PGID" lines
// from in until "q" (rexd leaves on purpose: nothing to do) or the end
// of in (rexd died: the groups still listed are stopped).
func RunGuard(in io.Reader, grace time.Duration) {
	nameGuard()
	signal.Ignore(syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	live := map[int]bool{}
	sc := bufio.NewScanner(in)
	for sc.Scan() {
		line := sc.Text()
		if line == "q" {
			return
		}
		if len(line) < 2 {
			continue
		}
		pgid, err := strconv.Atoi(line[1:])
		if err != nil || pgid <= 1 {
			continue
		}
		switch line[0] {
		case '+':
			live[pgid] = true
		case '-':
			delete(live, pgid)
		}
	}
	stopGroups(live, grace)
}

// stopGroups sends each group TERM, waits up to grace for them to end,
// and sends KILL to what is left.
func stopGroups(groups map[int]bool, grace time.Duration) {
	for g := range groups {
		syscall.Kill(-g, syscall.SIGTERM)
	}
	const step = 20 * time.Millisecond
	for waited := time.Duration(0); waited < grace && anyAlive(groups); waited += step {
		time.Sleep(step)
	}
	for g := range groups {
		syscall.Kill(-g, syscall.SIGKILL)
	}
}

func anyAlive(groups map[int]bool) bool {
	for g := range groups {
		if syscall.Kill(-g, 0) == nil {
			return true
		}
	}
	return false
}

// ParseGuardGrace reads the guard's grace argument.
func ParseGuardGrace(s string) (time.Duration, error) {
	ms, err := strconv.ParseInt(s, 10, 64)
	if err != nil || ms < 0 {
		return 0, fmt.Errorf("guard: grace %q is not a number of milliseconds", s)
	}
	return time.Duration(ms) * time.Millisecond, nil
}
