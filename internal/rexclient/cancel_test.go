package rexclient_test

import (
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/rexconsole/rex/internal/cas"
	"github.com/rexconsole/rex/internal/protocol"
	"github.com/rexconsole/rex/internal/rexclient"
)

// latch holds whoever passes it while shut.
type latch struct {
	mu      sync.Mutex
	cond    *sync.Cond
	shut    bool
	allow   int  // how many more may pass while shut
	holding bool // someone waits for the latch to open
}

func newLatch() *latch {
	g := &latch{}
	g.cond = sync.NewCond(&g.mu)
	return g
}

// pass returns once the latch is open.
func (g *latch) pass() {
	g.mu.Lock()
	for g.shut && g.allow == 0 {
		g.holding = true
		g.cond.Wait()
	}
	if g.shut {
		g.allow--
	}
	g.holding = false
	g.mu.Unlock()
}

func (g *latch) set(shut bool) {
	g.mu.Lock()
	g.shut, g.allow = shut, 0
	g.cond.Broadcast()
	g.mu.Unlock()
}

// let lets one more pass while shut.
func (g *latch) let() {
	g.mu.Lock()
	g.allow++
	g.cond.Broadcast()
	g.mu.Unlock()
}

// isHolding reports whether someone waits at the latch: for a valve,
// an answer rexd sent and the client has not received.
func (g *latch) isHolding() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.holding
}

// valve passes rexd's output to the client, holding it back while shut:
// it makes a reply arrive after the caller gave up, on a real rexd.
type valve struct {
	*latch
	pr *io.PipeReader
	pw *io.PipeWriter
}

func newValve(r io.Reader) *valve {
	v := &valve{latch: newLatch()}
	v.pr, v.pw = io.Pipe()
	go func() {
		buf := make([]byte, 32<<10)
		for {
			n, err := r.Read(buf)
			if n > 0 {
				v.pass()
				v.pw.Write(buf[:n])
			}
			if err != nil {
				v.pw.CloseWithError(err)
				return
			}
		}
	}()
	return v
}

// valved starts a real rexd whose output goes through a valve and opens
// a session on it.
func valved(t *testing.T) (*rexclient.Session, *valve, string) {
	t.Helper()
	c, v, root := valvedClient(t, nil)
	s, err := c.OpenSession(context.Background(), protocol.SessionOpenParams{ClientName: "t"})
	if err != nil {
		t.Fatal(err)
	}
	return s, v, root
}

// valvedClient starts a real rexd (with env added to its environment and
// args after the usual ones) whose output goes through a valve, open.
func valvedClient(t *testing.T, env []string, args ...string) (*rexclient.Client, *valve, string) {
	t.Helper()
	root := t.TempDir()
	cmd := exec.Command(rexdBin, append([]string{"--stdio", "--root", root, "--no-audit"}, args...)...)
	if env != nil {
		cmd.Env = append(os.Environ(), env...)
	}
	in, _ := cmd.StdinPipe()
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	v := newValve(out)
	c := rexclient.NewConn(v.pr, in, in)
	t.Cleanup(func() { v.set(false); c.Close(); cmd.Wait() })
	return c, v, root
}

// readPid waits until rexd has started the process that writes file, and
// returns its pid.
func readPid(t *testing.T, file string) int {
	t.Helper()
	var pid int
	waitFor(t, func() bool {
		b, err := os.ReadFile(file)
		if err != nil || !strings.HasSuffix(string(b), "\n") {
			return false
		}
		pid, err = strconv.Atoi(strings.TrimSpace(string(b)))
		return err == nil
	})
	return pid
}

// TestCancelledExecKillsTheRemoteProcess (item 1): a caller that gives up
// before exec.start's reply leaves nothing running: the late reply makes
// the client stop the process.
func TestCancelledExecKillsTheRemoteProcess(t *testing.T) {
	s, v, root := valved(t)
	pidFile := filepath.Join(root, "pid")
	v.set(true)
	ctx, cancel := context.WithCancel(context.Background())
	execErr := make(chan error, 1)
	go func() {
		_, err := s.Exec(ctx, protocol.ExecStartParams{Argv: []string{"sh", "-c", "echo $$ > pid; exec sleep 30"}}, rexclient.ExecOptions{})
		execErr <- err
	}()
	readPid(t, pidFile) // rexd started it; its reply is held
	cancel()
	if err := <-execErr; !errors.Is(err, context.Canceled) {
		t.Fatalf("Exec returned %v, want context.Canceled", err)
	}
	v.set(false)
	bg := context.Background()
	info, err := s.SessionInfo(bg)
	if err != nil {
		t.Fatal(err)
	}
	if len(info.Processes) > 1 {
		t.Fatalf("processes %+v", info.Processes)
	}
	if len(info.Processes) == 1 {
		wait := int64(10000)
		var st protocol.ExecWaitResult
		if err := s.Client().Call(bg, protocol.MethodExecWait, protocol.ExecWaitParams{SessionID: s.ID, ProcessID: info.Processes[0].ProcessID, TimeoutMS: &wait}, &st); err != nil {
			t.Fatal(err)
		}
		if st.Status != protocol.StatusKilled {
			t.Fatalf("the abandoned process is %s, want killed", st.Status)
		}
	}
}

// TestCancelledOpenPTYClosesTheTerminal (item 1): the same for pty.open.
func TestCancelledOpenPTYClosesTheTerminal(t *testing.T) {
	s, v, root := valved(t)
	pidFile := filepath.Join(root, "pid")
	v.set(true)
	ctx, cancel := context.WithCancel(context.Background())
	openErr := make(chan error, 1)
	go func() {
		_, err := s.OpenPTY(ctx, protocol.PTYOpenParams{Argv: []string{"sh", "-c", "echo $$ > pid; exec sleep 30"}}, rexclient.ExecOptions{})
		openErr <- err
	}()
	pid := readPid(t, pidFile)
	cancel()
	if err := <-openErr; !errors.Is(err, context.Canceled) {
		t.Fatalf("OpenPTY returned %v, want context.Canceled", err)
	}
	v.set(false)
	waitFor(t, func() bool {
		if err := syscall.Kill(pid, 0); err != nil {
			return true
		}
		st, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		i := strings.LastIndexByte(string(st), ')')
		return i > 0 && len(st) > i+2 && st[i+2] == 'Z'
	})
	// rexd forgets the process once it has reaped it, a moment after
	// the process is a zombie.
	waitFor(t, func() bool {
		info, err := s.SessionInfo(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		return len(info.Processes) == 0
	})
}

// TestCancelledCallTellsRexd: a call whose context ends sends
// $/cancelRequest, and the connection keeps working.
func TestCancelledCallTellsRexd(t *testing.T) {
	s, v, _ := valved(t)
	v.set(true)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := s.Stat(ctx, "."); !errors.Is(err, context.Canceled) {
		t.Fatalf("Stat with a cancelled context: %v", err)
	}
	v.set(false)
	if _, err := s.Stat(context.Background(), "."); err != nil {
		t.Fatalf("the next call: %v", err)
	}
}

// TestCancelledMaterializeAbortsTheLateTxn: a caller that gives up on
// cas.materialize after rexd answered with a txn (the answer still on its
// way) never learns the txn id; the late reply makes the client abort it,
// so no temporary file stays on the target while the session lives.
func TestCancelledMaterializeAbortsTheLateTxn(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir()) // rexd's store
	s, v, root := valved(t)
	bg := context.Background()
	local, err := cas.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	blob := cas.DigestOf([]byte("never sent\n"))
	tree, err := local.PutTree(cas.Tree{Entries: []cas.Entry{{Name: "f", Type: cas.EntryFile, Digest: blob}}})
	if err != nil {
		t.Fatal(err)
	}
	remote := s.CAS()
	if _, err := cas.PushTrees(bg, local, remote, tree, cas.SyncOptions{}); err != nil {
		t.Fatal(err)
	}

	v.set(true)
	ctx, cancel := context.WithCancel(bg)
	matErr := make(chan error, 1)
	go func() {
		_, err := remote.Materialize(ctx, tree, "out", protocol.CASMaterializeParams{})
		matErr <- err
	}()
	waitFor(t, v.isHolding) // rexd answered (with a txn); the answer is held
	cancel()
	if err := <-matErr; !errors.Is(err, context.Canceled) {
		t.Fatalf("Materialize returned %v, want context.Canceled", err)
	}
	if left := leftovers(t, root); len(left) == 0 {
		t.Fatal("the update made no temporary files: the test does not test what it means to")
	}
	v.set(false)
	waitFor(t, func() bool { return len(leftovers(t, root)) == 0 })
	if _, _, err := remote.Needed(bg, "u_1"); protocol.ErrorCode(err) != protocol.CodeInvalidParams {
		t.Errorf("cas.needed of the abandoned txn: %v; it stayed open", err)
	}
}

// leftovers lists rex's temporary files under root.
func leftovers(t *testing.T, root string) []string {
	t.Helper()
	var out []string
	filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err == nil && strings.HasPrefix(d.Name(), ".rex-") {
			out = append(out, p)
		}
		return nil
	})
	return out
}
