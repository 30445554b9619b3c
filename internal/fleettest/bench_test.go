package fleettest_test

import (
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/rexconsole/rex/internal/cas"
	"github.com/rexconsole/rex/internal/commands"
	"github.com/rexconsole/rex/internal/fleettest"
	"github.com/rexconsole/rex/internal/protocol"
	"github.com/rexconsole/rex/internal/rexclient"
)

func TestMain(m *testing.M) { fleettest.Main(m) }

// echoes counts the bytes a terminal sent back and wakes whoever waits
// for a count.
type echoes struct {
	mu   sync.Mutex
	cond *sync.Cond
	n    int
}

func newEchoes() *echoes {
	e := &echoes{}
	e.cond = sync.NewCond(&e.mu)
	return e
}

func (e *echoes) Write(p []byte) (int, error) {
	e.mu.Lock()
	e.n += len(p)
	e.cond.Broadcast()
	e.mu.Unlock()
	return len(p), nil
}

func (e *echoes) waitFor(n int) {
	e.mu.Lock()
	for e.n < n {
		e.cond.Wait()
	}
	e.mu.Unlock()
}

// BenchmarkKeystrokeDuringPush measures the keystroke round trip in a
// terminal on a host (one byte into `cat` on a remote PTY until it comes
// back) while idle, and while a 100 MB push to that host runs on the same
// SSH connection. "lane" pushes as rex does, over the connection's bulk
// lane (a second channel and rexd); "shared" pushes over the terminal's own
// stream, as before the lane existed, for comparison. The goal is push p99
// ≤ 2× idle p99. Run it with -benchtime=1x: each iteration writes 100 MB of
// fresh random files.
func BenchmarkKeystrokeDuringPush(b *testing.B) {
	for _, lane := range []bool{true, false} {
		name := "lane"
		if !lane {
			name = "shared"
		}
		b.Run(name, func(b *testing.B) { benchKeystrokeDuringPush(b, lane) })
	}
}

func benchKeystrokeDuringPush(b *testing.B, lane bool) {
	const (
		files  = 100
		fileMB = 1
		idleN  = 500 // before the push and again after it
	)
	f := fleettest.New(b, fleettest.Options{Hosts: 1})
	ctx := context.Background()
	targets, err := f.App.Resolve("h1")
	if err != nil {
		b.Fatal(err)
	}
	lease, err := f.App.Pool.Acquire(ctx, targets[0])
	if err != nil {
		b.Fatal(err)
	}
	defer lease.Release()
	push := lease.Session()
	if lane {
		push = lease.Bulk(ctx)
		if push == lease.Session() {
			b.Fatal("no bulk lane")
		}
	}
	st, err := cas.Open(f.App.CASDir)
	if err != nil {
		b.Fatal(err)
	}
	out := newEchoes()
	pty, err := lease.Session().OpenPTY(ctx, protocol.PTYOpenParams{Argv: []string{"sh", "-c", "stty -icanon -echo; echo ready; exec cat"}},
		rexclient.ExecOptions{Stdout: out})
	if err != nil {
		b.Fatal(err)
	}
	defer pty.Close(ctx)
	out.waitFor(len("ready\r\n"))
	sent := len("ready\r\n")
	// Keystrokes come at a fast typist's pace (100 a second), not flat
	// out: a loop with no pause would take the CPU the push needs.
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	key := func() time.Duration {
		<-tick.C
		t0 := time.Now()
		if err := pty.Write(ctx, []byte{'x'}); err != nil {
			b.Fatal(err)
		}
		sent++
		out.waitFor(sent)
		return time.Since(t0)
	}
	var idle, busy []time.Duration
	var pushTime time.Duration
	var pushed int64
	b.ResetTimer()
	for i := range b.N {
		b.StopTimer()
		src := filepath.Join(b.TempDir(), "src")
		buf := make([]byte, fileMB<<20)
		for j := range files {
			rand.Read(buf)
			p := filepath.Join(src, fmt.Sprintf("d%02d", j%10), fmt.Sprintf("f%03d", j))
			os.MkdirAll(filepath.Dir(p), 0o755)
			if err := os.WriteFile(p, buf, 0o644); err != nil {
				b.Fatal(err)
			}
		}
		root, _, err := st.Ingest(ctx, src)
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		for range idleN {
			idle = append(idle, key())
		}
		done := make(chan error, 1)
		t0 := time.Now()
		go func() {
			_, _, err := commands.PushTree(ctx, st, push, "h1", root, fmt.Sprintf("pushed-%d", i), commands.PushOptions{})
			done <- err
		}()
	measure:
		for {
			select {
			case err := <-done:
				if err != nil {
					b.Fatalf("push: %v", err)
				}
				break measure
			default:
				busy = append(busy, key())
			}
		}
		pushTime += time.Since(t0)
		pushed += files * fileMB << 20
		for range idleN {
			idle = append(idle, key())
		}
	}
	b.StopTimer()
	if len(busy) < 20 {
		b.Fatalf("only %d keystrokes during the push", len(busy))
	}
	slices.Sort(idle)
	slices.Sort(busy)
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	p := func(l []time.Duration, q int) time.Duration { return l[min(len(l)-1, len(l)*q/100)] }
	b.ReportMetric(ms(p(idle, 50)), "idle-p50-ms")
	b.ReportMetric(ms(p(idle, 99)), "idle-p99-ms")
	b.ReportMetric(ms(p(busy, 50)), "push-p50-ms")
	b.ReportMetric(ms(p(busy, 99)), "push-p99-ms")
	b.ReportMetric(float64(p(busy, 99))/float64(p(idle, 99)), "p99-ratio")
	b.ReportMetric(float64(len(busy)), "keys-during-push")
	b.ReportMetric(float64(pushed)/1e6/pushTime.Seconds(), "push-MB/s")
}
