package rexclient_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/rexconsole/rex/internal/protocol"
	"github.com/rexconsole/rex/internal/rexclient"
)

var rexdBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "rexclient-test")
	if err != nil {
		panic(err)
	}
	rexdBin = filepath.Join(dir, "rexd")
	// The rexd processes of these tests count their sessions in a
	// registry of their own, not in the user's (usage.go in rexd).
	os.Setenv("XDG_CACHE_HOME", filepath.Join(dir, "cache"))
	out, err := exec.Command("go", "build", "-o", rexdBin, "github.com/rexconsole/rex/cmd/rexd").CombinedOutput()
	if err != nil {
		fmt.Fprintf(os.Stderr, "build rexd: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

func local(t *testing.T, args ...string) (*rexclient.Client, *rexclient.Session, string) {
	t.Helper()
	root := t.TempDir()
	ctx := context.Background()
	c, err := rexclient.StartLocal(ctx, rexdBin, append([]string{"--root", root, "--no-audit"}, args...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	s, err := c.OpenSession(ctx, protocol.SessionOpenParams{ClientName: "rexclient-test"})
	if err != nil {
		t.Fatal(err)
	}
	return c, s, root
}

func TestExecStreamsAndWaits(t *testing.T) {
	_, s, _ := local(t)
	ctx := context.Background()
	var out, errb bytes.Buffer
	p, err := s.Exec(ctx, protocol.ExecStartParams{Argv: []string{"sh", "-c", "echo out; echo err >&2; exit 4"}},
		rexclient.ExecOptions{Stdout: &out, Stderr: &errb})
	if err != nil {
		t.Fatal(err)
	}
	exit, err := p.Wait(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if *exit.ExitCode != 4 || out.String() != "out\n" || errb.String() != "err\n" {
		t.Errorf("exit %v out %q err %q", exit.ExitCode, out.String(), errb.String())
	}
}

// Many processes at once, each with many lines: every byte arrives at its
// own process, in order.
func TestConcurrentProcessesKeepTheirOrder(t *testing.T) {
	_, s, _ := local(t, "--limit", "max_processes_per_session=64")
	ctx := context.Background()
	const procs, lines = 24, 2000
	var wg sync.WaitGroup
	errs := make(chan error, procs)
	for i := 0; i < procs; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			var out bytes.Buffer
			var seqs []uint64
			p, err := s.Exec(ctx, protocol.ExecStartParams{Argv: []string{"seq", "-f", fmt.Sprintf("p%d-%%g", i), fmt.Sprint(lines)}},
				rexclient.ExecOptions{Stdout: &out, OnEvent: func(ev rexclient.Event) {
					if ev.Kind == rexclient.Stdout {
						seqs = append(seqs, ev.Seq)
					}
				}})
			if err != nil {
				errs <- err
				return
			}
			if _, err := p.Wait(ctx); err != nil {
				errs <- err
				return
			}
			var want strings.Builder
			for j := 1; j <= lines; j++ {
				fmt.Fprintf(&want, "p%d-%d\n", i, j)
			}
			if out.String() != want.String() {
				errs <- fmt.Errorf("process %d: output differs (%d bytes, want %d)", i, out.Len(), want.Len())
			}
			for k, sq := range seqs {
				if sq != uint64(k+1) {
					errs <- fmt.Errorf("process %d: seq %d at %d", i, sq, k)
					return
				}
			}
		}(i)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// A consumer slower than the producer loses nothing: the reader waits.
func TestSlowConsumerLosesNothing(t *testing.T) {
	_, s, _ := local(t)
	ctx := context.Background()
	slow := &slowWriter{}
	p, err := s.Exec(ctx, protocol.ExecStartParams{Argv: []string{"seq", "20000"}}, rexclient.ExecOptions{Stdout: slow})
	if err != nil {
		t.Fatal(err)
	}
	// Meanwhile other calls on the same connection still work.
	if _, err := s.Stat(ctx, "."); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(slow.buf.String()), "\n")
	if len(lines) != 20000 || lines[19999] != "20000" {
		t.Fatalf("got %d lines", len(lines))
	}
}

type slowWriter struct {
	buf bytes.Buffer
	n   int
}

func (w *slowWriter) Write(p []byte) (int, error) {
	w.n++
	if w.n%4 == 0 {
		time.Sleep(time.Millisecond)
	}
	return w.buf.Write(p)
}

func TestConcurrentCallsMatchByID(t *testing.T) {
	_, s, root := local(t)
	ctx := context.Background()
	for i := 0; i < 50; i++ {
		os.WriteFile(filepath.Join(root, fmt.Sprintf("f%d", i)), []byte(strings.Repeat("x", i)), 0o644)
	}
	var wg sync.WaitGroup
	for i := 0; i < 50; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			st, err := s.Stat(ctx, fmt.Sprintf("f%d", i))
			if err != nil || st.Size != int64(i) {
				t.Errorf("stat f%d: size %d err %v", i, st.Size, err)
			}
		}(i)
	}
	wg.Wait()
}

func TestInputKillAndErrors(t *testing.T) {
	_, s, _ := local(t)
	ctx := context.Background()
	var out bytes.Buffer
	p, err := s.Exec(ctx, protocol.ExecStartParams{Argv: []string{"cat"}}, rexclient.ExecOptions{Stdout: &out})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Input(ctx, []byte("abc\xff")); err != nil {
		t.Fatal(err)
	}
	if err := p.CloseInput(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Wait(ctx); err != nil || out.String() != "abc\xff" {
		t.Fatalf("cat: %q %v", out.String(), err)
	}

	p, err = s.Exec(ctx, protocol.ExecStartParams{Argv: []string{"sleep", "30"}}, rexclient.ExecOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Kill(ctx, "KILL"); err != nil {
		t.Fatal(err)
	}
	exit, err := p.Wait(ctx)
	if err != nil || exit.Signal == nil || *exit.Signal != "KILL" {
		t.Fatalf("kill: %+v %v", exit, err)
	}

	_, err = s.ReadFile(ctx, protocol.FSReadParams{Path: "/etc/shadow"})
	if protocol.ErrorCode(err) != protocol.CodeForbiddenPath {
		t.Fatalf("want forbidden_path, got %v", err)
	}
	var pe *protocol.Error
	if !errors.As(err, &pe) || !strings.Contains(pe.Message, "outside allowed roots") {
		t.Fatalf("error %v", err)
	}
}

// Closing the client makes rexd stop the processes; their exit still
// arrives before the connection ends.
func TestCloseStopsProcesses(t *testing.T) {
	c, s, _ := local(t)
	ctx := context.Background()
	p, err := s.Exec(ctx, protocol.ExecStartParams{Argv: []string{"sleep", "30"}}, rexclient.ExecOptions{})
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	exit, err := p.Wait(ctx)
	if err != nil || exit.Signal == nil || *exit.Signal != "TERM" {
		t.Fatalf("Wait after Close: %+v %v", exit, err)
	}
	if _, err := s.Stat(ctx, "."); !errors.Is(err, rexclient.ErrClosed) {
		t.Fatalf("call after close: %v", err)
	}
}

// When rexd dies, waiting processes and calls fail with ErrClosed.
func TestConnectionLoss(t *testing.T) {
	cmd := exec.Command(rexdBin, "--stdio", "--root", t.TempDir(), "--no-audit")
	in, _ := cmd.StdinPipe()
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c := rexclient.NewConn(out, in, in)
	ctx := context.Background()
	s, err := c.OpenSession(ctx, protocol.SessionOpenParams{ClientName: "t"})
	if err != nil {
		t.Fatal(err)
	}
	p, err := s.Exec(ctx, protocol.ExecStartParams{Argv: []string{"sleep", "5"}}, rexclient.ExecOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Kill(-p.Pid, syscall.SIGKILL) }) // the orphaned sleep
	cmd.Process.Kill()
	cmd.Wait()
	if _, err := p.Wait(ctx); !errors.Is(err, rexclient.ErrClosed) {
		t.Fatalf("Wait after rexd died: %v", err)
	}
	if _, err := s.Stat(ctx, "."); !errors.Is(err, rexclient.ErrClosed) {
		t.Fatalf("call after rexd died: %v", err)
	}
	select {
	case <-c.Done():
	default:
		t.Fatal("Done not closed")
	}
	if c.Err() == nil {
		t.Fatal("Err is nil after the connection ended")
	}
}

func TestPTYHandle(t *testing.T) {
	_, s, _ := local(t)
	ctx := context.Background()
	var mu sync.Mutex
	var out bytes.Buffer
	w := writerFunc(func(p []byte) (int, error) { mu.Lock(); defer mu.Unlock(); return out.Write(p) })
	pty, err := s.OpenPTY(ctx, protocol.PTYOpenParams{Argv: []string{"sh"}, Cols: 90, Rows: 33}, rexclient.ExecOptions{Stdout: w})
	if err != nil {
		t.Fatal(err)
	}
	pty.Write(ctx, []byte("stty size\n"))
	waitFor(t, func() bool { mu.Lock(); defer mu.Unlock(); return strings.Contains(out.String(), "33 90") })
	if err := pty.Resize(ctx, 100, 40); err != nil {
		t.Fatal(err)
	}
	pty.Write(ctx, []byte("stty size; exit 3\n"))
	exit, err := pty.Wait(ctx)
	if err != nil || *exit.ExitCode != 3 {
		t.Fatalf("pty exit %+v %v", exit, err)
	}
	if !strings.Contains(out.String(), "40 100") {
		t.Errorf("resize not seen: %q", out.String())
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for i := 0; i < 500; i++ {
		if cond() {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal("condition not met within 5s")
}

// Output read into reused buffers (ExecOptions.Reuse) arrives intact, and
// the buffers are in fact used again; output of a process that did not
// promise to drop its Data stays intact after the run, however long it is
// kept. Both run at once on one connection, as raw frames.
func TestReuseOutputBuffers(t *testing.T) {
	c, _, _ := local(t, "--limit", "max_output_bytes=67108864")
	ctx := context.Background()
	s, err := c.OpenSession(ctx, protocol.SessionOpenParams{ClientName: "t", RequestedCapabilities: []string{protocol.CapOutputRaw}})
	if err != nil {
		t.Fatal(err)
	}
	script := `i=0; while [ $i -lt 40000 ]; do echo "$1 line $i"; i=$((i+1)); done`
	want := func(name string) string {
		var b strings.Builder
		for i := range 40000 {
			fmt.Fprintf(&b, "%s line %d\n", name, i)
		}
		return b.String()
	}
	var reused bytes.Buffer
	seen := map[*byte]int{}
	var kept [][]byte
	pr, err := s.Exec(ctx, protocol.ExecStartParams{Argv: []string{"sh", "-c", script, "sh", "reused"}}, rexclient.ExecOptions{Reuse: true, OnEvent: func(ev rexclient.Event) {
		if ev.Kind == rexclient.Stdout && len(ev.Data) > 0 {
			reused.Write(ev.Data)
			seen[&ev.Data[:1][0]]++
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	pk, err := s.Exec(ctx, protocol.ExecStartParams{Argv: []string{"sh", "-c", script, "sh", "kept"}}, rexclient.ExecOptions{OnEvent: func(ev rexclient.Event) {
		if ev.Kind == rexclient.Stdout {
			kept = append(kept, ev.Data)
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []*rexclient.Process{pr, pk} {
		if ex, err := p.Wait(ctx); err != nil || ex.ExitCode == nil || *ex.ExitCode != 0 {
			t.Fatalf("exit %+v %v", ex, err)
		}
	}
	if got := reused.String(); got != want("reused") {
		t.Errorf("reused buffers: %d bytes that differ from the %d printed", len(got), len(want("reused")))
	}
	if got := string(bytes.Join(kept, nil)); got != want("kept") {
		t.Errorf("kept events: %d bytes that differ from the %d printed (a buffer was reused under them)", len(got), len(want("kept")))
	}
	again := 0
	for _, n := range seen {
		again = max(again, n)
	}
	if again < 2 {
		t.Errorf("%d events in %d buffers: none was used again", len(seen), len(seen))
	}
}

// A rexd that does not know output.raw (an older build beside a rex
// installed over it) refuses the capability; the session opens without
// it, on the second asking.
func TestOpenSessionWithoutRawOutput(t *testing.T) {
	cr, sw := io.Pipe() // rexd → client
	sr, cw := io.Pipe() // client → rexd
	asked := make(chan []string, 2)
	go func() {
		defer sw.Close() // the client's reader ends with the fake rexd
		dec := protocol.NewDecoder(sr, 0)
		enc := protocol.NewEncoder(sw)
		for {
			line, err := dec.ReadLine()
			if err != nil {
				return
			}
			m, _ := protocol.ParseMessage(line)
			var p protocol.SessionOpenParams
			json.Unmarshal(m.Params, &p)
			asked <- p.RequestedCapabilities
			if slices.Contains(p.RequestedCapabilities, protocol.CapOutputRaw) {
				enc.Encode(protocol.NewErrorResponse(m.ID, protocol.Errorf(protocol.CodeUnsupportedCapability, nil, "capability %q is not supported by this rexd", protocol.CapOutputRaw)))
				continue
			}
			res, _ := protocol.NewResponse(m.ID, protocol.SessionOpenResult{SessionID: "s_1", Protocol: protocol.Version})
			enc.Encode(res)
		}
	}()
	c := rexclient.NewConn(cr, cw, cw)
	defer c.Close()
	s, err := c.OpenSession(context.Background(), protocol.SessionOpenParams{ClientName: "t", RequestedCapabilities: []string{protocol.CapCAS, protocol.CapOutputRaw}})
	if err != nil || s.ID != "s_1" {
		t.Fatalf("open: %v", err)
	}
	if first, second := <-asked, <-asked; !slices.Equal(first, []string{protocol.CapCAS, protocol.CapOutputRaw}) || !slices.Equal(second, []string{protocol.CapCAS}) {
		t.Fatalf("asked for %q, then %q", first, second)
	}
}
