package rexd_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/rexconsole/rex/internal/protocol"
)

// rexdBin is the real rexd binary, built once for the package's tests.
var rexdBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "rexd-test-bin")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	rexdBin = filepath.Join(dir, "rexd")
	build := exec.Command("go", "build", "-o", rexdBin, "github.com/rexconsole/rex/cmd/rexd")
	build.Stderr = os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "build rexd:", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// harness drives a real `rexd --stdio` line by line.
type harness struct {
	t *testing.T
	*rexdProc
}

// with returns the harness reporting to t (for subtests).
func (h *harness) with(t *testing.T) *harness { return &harness{t: t, rexdProc: h.rexdProc} }

type rexdProc struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	root   string
	audit  string
	nextID int

	mu     sync.Mutex
	msgs   []*protocol.Message // everything received, in order
	cond   *sync.Cond
	eof    bool
	exited chan struct{}
}

// start runs rexd with a fresh temp root (unless args name roots) and
// returns a harness. Extra args are passed through.
func start(t *testing.T, args ...string) *harness {
	t.Helper()
	return startEnv(t, nil, args...)
}

// startEnv is start with env added to rexd's environment. Unless env
// says otherwise, each rexd has a cache (the per-user limits' registry)
// of its own.
func startEnv(t *testing.T, env []string, args ...string) *harness {
	t.Helper()
	h := &harness{t: t, rexdProc: &rexdProc{exited: make(chan struct{})}}
	h.cond = sync.NewCond(&h.mu)
	h.root = t.TempDir()
	if r, err := filepath.EvalSymlinks(h.root); err == nil {
		h.root = r
	}
	h.audit = filepath.Join(t.TempDir(), "audit.log")
	full := []string{"--stdio", "--audit", h.audit}
	hasRoot := false
	for _, a := range args {
		if a == "--root" {
			hasRoot = true
		}
	}
	if !hasRoot {
		full = append(full, "--root", h.root)
	}
	full = append(full, args...)
	h.cmd = exec.Command(rexdBin, full...)
	h.cmd.Env = append(os.Environ(), "HOME="+h.root, "XDG_CACHE_HOME="+t.TempDir())
	h.cmd.Env = append(h.cmd.Env, env...)
	h.cmd.Stderr = os.Stderr
	var err error
	h.stdin, err = h.cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := h.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := h.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 1<<20), 64<<20)
		for sc.Scan() {
			var m protocol.Message
			if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
				t.Errorf("rexd sent a line that is not JSON: %q", sc.Text())
				continue
			}
			h.mu.Lock()
			h.msgs = append(h.msgs, &m)
			h.cond.Broadcast()
			h.mu.Unlock()
		}
		h.mu.Lock()
		h.eof = true
		h.cond.Broadcast()
		h.mu.Unlock()
		h.cmd.Wait()
		close(h.exited)
	}()
	t.Cleanup(func() {
		h.stdin.Close()
		select {
		case <-h.exited:
		case <-time.After(10 * time.Second):
			h.cmd.Process.Kill()
			<-h.exited
		}
	})
	return h
}

// send writes one raw line.
func (h *harness) send(line string) {
	h.t.Helper()
	if _, err := io.WriteString(h.stdin, line+"\n"); err != nil {
		h.t.Fatalf("write to rexd: %v", err)
	}
}

// wait returns the first received message (from index from on) matching
// pred, or fails after timeout.
func (h *harness) wait(timeout time.Duration, pred func(*protocol.Message) bool) *protocol.Message {
	h.t.Helper()
	deadline := time.Now().Add(timeout)
	timer := time.AfterFunc(timeout, func() {
		h.mu.Lock()
		h.cond.Broadcast()
		h.mu.Unlock()
	})
	defer timer.Stop()
	h.mu.Lock()
	defer h.mu.Unlock()
	for i := 0; ; {
		for ; i < len(h.msgs); i++ {
			if pred(h.msgs[i]) {
				return h.msgs[i]
			}
		}
		if h.eof || time.Now().After(deadline) {
			h.t.Fatalf("no matching message from rexd within %s (eof=%v); got %d messages", timeout, h.eof, len(h.msgs))
			return nil
		}
		h.cond.Wait()
	}
}

// response waits for the response with the given raw id.
func (h *harness) response(id string) *protocol.Message {
	h.t.Helper()
	// A bound for an answer that never comes, not a speed goal: 8 MiB
	// fs.read pieces under -race on a loaded machine took more than 10 s.
	return h.wait(60*time.Second, func(m *protocol.Message) bool {
		return m.IsResponse() && string(m.ID) == id
	})
}

// call sends a request and returns its response.
func (h *harness) call(method string, params any) *protocol.Message {
	h.t.Helper()
	h.nextID++
	id := h.nextID + 1000
	req, err := protocol.NewRequest(int64(id), method, params)
	if err != nil {
		h.t.Fatal(err)
	}
	b, _ := json.Marshal(req)
	h.send(string(b))
	return h.response(strconv.Itoa(id))
}

// ok calls and decodes a successful result, failing on an error reply.
func (h *harness) ok(method string, params, result any) {
	h.t.Helper()
	m := h.call(method, params)
	if m.Error != nil {
		h.t.Fatalf("%s: unexpected error %v", method, m.Error)
	}
	if result != nil {
		if err := json.Unmarshal(m.Result, result); err != nil {
			h.t.Fatalf("%s: decode result: %v", method, err)
		}
	}
}

// fails calls and checks the error code.
func (h *harness) fails(method string, params any, code int) *protocol.Error {
	h.t.Helper()
	m := h.call(method, params)
	if m.Error == nil {
		h.t.Fatalf("%s: want error %d, got result %s", method, code, m.Result)
	}
	if m.Error.Code != code {
		h.t.Fatalf("%s: want error %d, got %v", method, code, m.Error)
	}
	return m.Error
}

// open opens a session and returns its id.
func (h *harness) open() string {
	h.t.Helper()
	var res protocol.SessionOpenResult
	h.ok(protocol.MethodSessionOpen, protocol.SessionOpenParams{ClientName: "test"}, &res)
	return res.SessionID
}

// run starts argv and waits for its exit event; it returns stdout,
// stderr and the exit event.
func (h *harness) run(sid string, p protocol.ExecStartParams) (string, string, protocol.ExitEvent) {
	h.t.Helper()
	p.SessionID = sid
	var res protocol.ExecStartResult
	h.ok(protocol.MethodExecStart, p, &res)
	exit := h.exitOf(res.ProcessID, 30*time.Second)
	out, errOut := h.output(res.ProcessID)
	return out, errOut, exit
}

func (h *harness) exitOf(pid string, timeout time.Duration) protocol.ExitEvent {
	h.t.Helper()
	m := h.wait(timeout, func(m *protocol.Message) bool {
		if m.Method != protocol.EventExecExit && m.Method != protocol.EventPTYExit {
			return false
		}
		var e protocol.ExitEvent
		json.Unmarshal(m.Params, &e)
		return e.ProcessID == pid
	})
	var e protocol.ExitEvent
	json.Unmarshal(m.Params, &e)
	return e
}

// events returns the received events of a process with the given method.
func (h *harness) events(pid, method string) []protocol.OutputEvent {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []protocol.OutputEvent
	for _, m := range h.msgs {
		if m.Method != method {
			continue
		}
		var e protocol.OutputEvent
		json.Unmarshal(m.Params, &e)
		if e.ProcessID == pid {
			out = append(out, e)
		}
	}
	return out
}

func (h *harness) output(pid string) (string, string) {
	h.t.Helper()
	join := func(evs []protocol.OutputEvent) string {
		var b strings.Builder
		for _, e := range evs {
			d, err := e.Bytes()
			if err != nil {
				h.t.Fatalf("bad payload: %v", err)
			}
			b.Write(d)
		}
		return b.String()
	}
	return join(h.events(pid, protocol.EventExecStdout)), join(h.events(pid, protocol.EventExecStderr))
}

// errorEvents returns exec.error events of a process.
func (h *harness) errorEvents(pid string) []protocol.ErrorEvent {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []protocol.ErrorEvent
	for _, m := range h.msgs {
		if m.Method != protocol.EventExecError {
			continue
		}
		var e protocol.ErrorEvent
		json.Unmarshal(m.Params, &e)
		if e.ProcessID == pid {
			out = append(out, e)
		}
	}
	return out
}

// pidsAlive reports which of the pids written (one per line) to file are
// still running, checked from outside rexd.
func pidsAlive(t *testing.T, file string) []int {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatalf("read pid file: %v", err)
	}
	var alive []int
	for _, f := range strings.Fields(string(b)) {
		pid, err := strconv.Atoi(f)
		if err != nil {
			continue
		}
		if syscall.Kill(pid, 0) == nil && !isZombie(pid) {
			alive = append(alive, pid)
		}
	}
	return alive
}

func isZombie(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i >= 0 && len(s) > i+2 && s[i+2] == 'Z'
}

// waitPidFile waits until file holds at least n pids.
func waitPidFile(t *testing.T, file string, n int) {
	t.Helper()
	for i := 0; i < 500; i++ {
		if b, err := os.ReadFile(file); err == nil && len(strings.Fields(string(b))) >= n {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("%s never got %d pids", file, n)
}

// noneAliveWithin polls until none of the pids in file run, or fails.
func noneAliveWithin(t *testing.T, file string, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if len(pidsAlive(t, file)) == 0 {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	alive := pidsAlive(t, file)
	for _, p := range alive {
		syscall.Kill(p, syscall.SIGKILL) // do not leave them behind
	}
	t.Fatalf("processes still alive after %s: %v", d, alive)
}

// flipLink switches the symlink link between targets, as fast as it can
// (a new link renamed over it each time), until the test ends: another
// writer in the roots racing a request's check and use of a path.
func flipLink(t *testing.T, link string, targets ...string) {
	t.Helper()
	tmp := link + ".tmp"
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			os.Remove(tmp)
			if os.Symlink(targets[i%len(targets)], tmp) == nil {
				os.Rename(tmp, link)
			}
		}
	}()
	t.Cleanup(func() { close(stop); wg.Wait() })
}
