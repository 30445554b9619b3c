package fleettest_test

import (
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"slices"
	"strconv"
	"strings"
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
		// Pushes of fresh files follow one another until this many
		// keystrokes fell during them (a p99 of fewer is their maximum),
		// at most maxPushes per iteration.
		minBusyKeys = 300
		maxPushes   = 40
		files       = 100
		fileMB      = 1
		idleN       = 500 // before the pushes and again after them
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
		if push, err = lease.Bulk(ctx); err != nil {
			b.Fatal(err)
		}
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

	// The control: one byte through a plain local cat over pipes, right
	// after each keystroke. It has no rex, SSH or rexd in its path, so
	// what it loses during the push is the machine's CPU, not rex's.
	ctl := exec.Command("cat")
	ctlIn, _ := ctl.StdinPipe()
	ctlOut, _ := ctl.StdoutPipe()
	if err := ctl.Start(); err != nil {
		b.Fatal(err)
	}
	defer func() { ctlIn.Close(); ctl.Wait() }()
	one := make([]byte, 1)
	control := func() time.Duration {
		t0 := time.Now()
		if _, err := ctlIn.Write([]byte{'x'}); err != nil {
			b.Fatal(err)
		}
		if _, err := io.ReadFull(ctlOut, one); err != nil {
			b.Fatal(err)
		}
		return time.Since(t0)
	}

	// Keystrokes come at a fast typist's pace (100 a second), not flat
	// out: a loop with no pause would take the CPU the push needs.
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	var idle, busy, ctlIdle, ctlBusy []time.Duration
	key := func(keys, ctls *[]time.Duration) {
		<-tick.C
		t0 := time.Now()
		if err := pty.Write(ctx, []byte{'x'}); err != nil {
			b.Fatal(err)
		}
		sent++
		out.waitFor(sent)
		*keys = append(*keys, time.Since(t0))
		*ctls = append(*ctls, control())
	}
	var schedIdle, schedBusy schedHist
	cpuBusy, cpuIdle := map[string]float64{}, map[string]float64{}
	var pushTime, idleTime time.Duration
	var pushed int64
	b.ResetTimer()
	for i := range b.N {
		newRoot := func() cas.Digest {
			b.StopTimer()
			defer b.StartTimer()
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
			return root
		}
		b.StartTimer()
		s0 := readSched()
		c0, t0 := cpuByName(), time.Now()
		for range idleN {
			key(&idle, &ctlIdle)
		}
		schedIdle.add(readSched().sub(s0))
		idleTime += time.Since(t0)
		for name, sec := range cpuByName() {
			cpuIdle[name] += sec - c0[name]
		}
		for k, before := 0, len(busy); len(busy)-before < minBusyKeys && k < maxPushes; k++ {
			root := newRoot()
			done := make(chan error, 1)
			t0 := time.Now()
			s0 := readSched()
			c0 := cpuByName()
			go func() {
				_, _, err := commands.PushTree(ctx, st, push, "h1", root, fmt.Sprintf("pushed-%d-%d", i, k), commands.PushOptions{})
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
					key(&busy, &ctlBusy)
				}
			}
			schedBusy.add(readSched().sub(s0))
			for name, sec := range cpuByName() {
				cpuBusy[name] += sec - c0[name]
			}
			pushTime += time.Since(t0)
			pushed += files * fileMB << 20
		}
		s0 = readSched()
		c0, t0 = cpuByName(), time.Now()
		for range idleN {
			key(&idle, &ctlIdle)
		}
		schedIdle.add(readSched().sub(s0))
		idleTime += time.Since(t0)
		for name, sec := range cpuByName() {
			cpuIdle[name] += sec - c0[name]
		}
	}
	b.StopTimer()
	if len(busy) < 20 {
		b.Fatalf("only %d keystrokes during the push", len(busy))
	}
	for _, l := range [][]time.Duration{idle, busy, ctlIdle, ctlBusy} {
		slices.Sort(l)
	}
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	p := func(l []time.Duration, q int) time.Duration { return l[min(len(l)-1, len(l)*q/100)] }
	b.ReportMetric(ms(p(idle, 50)), "idle-p50-ms")
	b.ReportMetric(ms(p(idle, 99)), "idle-p99-ms")
	b.ReportMetric(ms(p(busy, 50)), "push-p50-ms")
	b.ReportMetric(ms(p(busy, 99)), "push-p99-ms")
	b.ReportMetric(float64(p(busy, 99))/float64(p(idle, 99)), "p99-ratio")
	b.ReportMetric(float64(len(busy)), "keys-during-push")
	b.ReportMetric(float64(pushed)/1e6/pushTime.Seconds(), "push-MB/s")
	// Where the time goes: the control echo (the machine) and how long
	// rex's goroutines waited to run (the client's own scheduler).
	b.ReportMetric(ms(p(ctlIdle, 99)), "ctl-idle-p99-ms")
	b.ReportMetric(ms(p(ctlBusy, 99)), "ctl-push-p99-ms")
	b.ReportMetric(schedIdle.quantile(0.99)*1000, "gosched-idle-p99-ms")
	b.ReportMetric(schedBusy.quantile(0.99)*1000, "gosched-push-p99-ms")
	// Who burns the CPU during the push, in cores (the client is this
	// process; sshd and rexd are every such process, the host's included).
	for _, name := range []string{"self", "sshd", "rexd", "all"} {
		b.ReportMetric(cpuBusy[name]/pushTime.Seconds(), "cpu-"+name+"-cores")
	}
	// What typing alone costs: rexd's CPU per keystroke while no push runs.
	b.ReportMetric(cpuIdle["rexd"]*1e6/float64(len(idle)), "rexd-µs/idle-key")
}

// cpuByName sums the CPU seconds (user and system) used so far by this
// process ("self"), by processes named sshd* and rexd, and by everything
// ("all", from /proc/stat).
func cpuByName() map[string]float64 {
	const hz = 100 // USER_HZ
	out := map[string]float64{}
	read := func(path string) (string, float64, bool) {
		b, err := os.ReadFile(path)
		if err != nil {
			return "", 0, false
		}
		s := string(b)
		open, end := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
		if open < 0 || end < open {
			return "", 0, false
		}
		f := strings.Fields(s[end+2:])
		if len(f) < 13 {
			return "", 0, false
		}
		u, _ := strconv.ParseFloat(f[11], 64)
		k, _ := strconv.ParseFloat(f[12], 64)
		return s[open+1 : end], (u + k) / hz, true
	}
	if _, sec, ok := read("/proc/self/stat"); ok {
		out["self"] = sec
	}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		name, sec, ok := read("/proc/" + e.Name() + "/stat")
		switch {
		case !ok:
		case strings.HasPrefix(name, "sshd"):
			out["sshd"] += sec
		case name == "rexd":
			out["rexd"] += sec
		}
	}
	if b, err := os.ReadFile("/proc/stat"); err == nil {
		line, _, _ := strings.Cut(string(b), "\n")
		f := strings.Fields(line)
		for i, v := range f[1:] {
			if i == 3 || i == 4 { // idle, iowait
				continue
			}
			n, _ := strconv.ParseFloat(v, 64)
			out["all"] += n / hz
		}
	}
	return out
}

// schedHist is the Go runtime's histogram of how long goroutines waited
// to run (/sched/latencies:seconds), as a difference of two readings.
type schedHist struct {
	counts  []uint64
	buckets []float64
}

func readSched() schedHist {
	s := []metrics.Sample{{Name: "/sched/latencies:seconds"}}
	metrics.Read(s)
	h := s[0].Value.Float64Histogram()
	return schedHist{counts: slices.Clone(h.Counts), buckets: h.Buckets}
}

func (h schedHist) sub(o schedHist) schedHist {
	d := schedHist{counts: slices.Clone(h.counts), buckets: h.buckets}
	for i := range d.counts {
		d.counts[i] -= o.counts[i]
	}
	return d
}

func (h *schedHist) add(o schedHist) {
	if h.counts == nil {
		h.counts, h.buckets = make([]uint64, len(o.counts)), o.buckets
	}
	for i := range o.counts {
		h.counts[i] += o.counts[i]
	}
}

// quantile is the upper bound of the bucket holding quantile q.
func (h schedHist) quantile(q float64) float64 {
	var total uint64
	for _, c := range h.counts {
		total += c
	}
	if total == 0 {
		return 0
	}
	want := uint64(q * float64(total))
	var run uint64
	for i, c := range h.counts {
		run += c
		if run > want {
			return h.buckets[i+1]
		}
	}
	return h.buckets[len(h.buckets)-1]
}

// BenchmarkEchoUnderBusyLoops measures the control echo of
// BenchmarkKeystrokeDuringPush (one byte through a local cat over pipes,
// 100 a second) while one busy loop per core runs at nice 0, 10 and 19:
// how much of a keystroke's wait on a saturated machine CPU priority can
// take away at all.
func BenchmarkEchoUnderBusyLoops(b *testing.B) {
	for _, nice := range []string{"idle", "0", "10", "19"} {
		b.Run("nice-"+nice, func(b *testing.B) {
			if nice != "idle" {
				for range runtime.NumCPU() {
					loop := exec.Command("nice", "-n", nice, "sh", "-c", "while :; do :; done")
					if err := loop.Start(); err != nil {
						b.Fatal(err)
					}
					b.Cleanup(func() { loop.Process.Kill(); loop.Wait() })
				}
			}
			ctl := exec.Command("cat")
			in, _ := ctl.StdinPipe()
			out, _ := ctl.StdoutPipe()
			if err := ctl.Start(); err != nil {
				b.Fatal(err)
			}
			defer func() { in.Close(); ctl.Wait() }()
			one := make([]byte, 1)
			tick := time.NewTicker(10 * time.Millisecond)
			defer tick.Stop()
			var l []time.Duration
			b.ResetTimer()
			for range b.N {
				for range 800 {
					<-tick.C
					t0 := time.Now()
					if _, err := in.Write([]byte{'x'}); err != nil {
						b.Fatal(err)
					}
					if _, err := io.ReadFull(out, one); err != nil {
						b.Fatal(err)
					}
					l = append(l, time.Since(t0))
				}
			}
			slices.Sort(l)
			ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
			b.ReportMetric(ms(l[len(l)/2]), "p50-ms")
			b.ReportMetric(ms(l[len(l)*99/100]), "p99-ms")
		})
	}
}
