package tui_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rexconsole/rex/internal/server"
	"github.com/rexconsole/rex/internal/sshtest"
	"github.com/rexconsole/rex/tui"
)

// BenchmarkServerCost measures what the rex server costs (issue 17):
// its RSS and CPU while idle with 32 pooled SSH connections, and the time
// from dialling its socket to the first frame of an attach when 16 panes
// hold 10,000 lines each. The 32 devices are 8 loopback sshd hosts under
// 4 names each (32 connections, 32 rexd).
//
//	go test -run='^$' -bench=ServerCost -benchtime=20x ./tui/
func BenchmarkServerCost(b *testing.B) {
	bin := buildConsole(b)
	key := sshtest.NewKey(b, "ed25519")
	hosts := sshtest.Fleet(b, 8, sshtest.Options{Authorized: []*sshtest.Key{key}})
	c := newConsoleShell(b, bin, "", 200, 60)
	devs := map[string]any{}
	var all, sixteen []string
	for i := range 32 {
		h := hosts[i%len(hosts)]
		name := fmt.Sprintf("n%02d", i+1)
		host, port, _ := strings.Cut(h.Addr, ":")
		p, _ := strconv.Atoi(port)
		devs[name] = map[string]any{"host": h.User + "@" + host, "port": p, "ssh_key": key.Path}
		all = append(all, name)
		if i < 16 {
			sixteen = append(sixteen, name)
		}
	}
	reg, _ := json.Marshal(map[string]any{"devices": devs, "groups": map[string][]string{"all32": all, "s16": sixteen}})
	cfg := filepath.Join(c.home, ".config", "rex")
	os.MkdirAll(cfg, 0o700)
	if err := os.WriteFile(filepath.Join(cfg, "devices.json"), reg, 0o600); err != nil {
		b.Fatal(err)
	}
	os.MkdirAll(filepath.Join(c.home, ".ssh"), 0o700)
	sshtest.WriteKnownHosts(b, filepath.Join(c.home, ".ssh", "known_hosts"), false, hosts...)
	c.sendLine(filepath.Join(bin, "rex"))
	c.waitFor("local ❯")
	rss0 := rssKB(b, c.serverPid()) // the server with no connection
	c.run("/target all32", "target all32")
	c.run("true", "32 ok")
	c.run("/close all", "closed")
	pid := c.serverPid()
	c.detach()

	// Idle with 32 connections: RSS, and CPU over 10 s, nobody attached,
	// once the server has given memory back after the detach.
	b.Setenv("XDG_RUNTIME_DIR", filepath.Join(c.home, "run"))
	time.Sleep(tui.TrimAfter + time.Second)
	cpu0 := cpuTicks(b, pid)
	t0 := time.Now()
	if dir := os.Getenv("REX_BENCH_PROFILES"); dir != "" {
		// The idle span is a CPU profile of the server (REX_SERVER_PPROF).
		fetchProfile(b, c, "profile?seconds=10", filepath.Join(dir, "idle-cpu.pprof"))
	} else {
		time.Sleep(10 * time.Second) // the span over which idle CPU is measured
	}
	idleCPU := float64(cpuTicks(b, pid)-cpu0) / 100 / time.Since(t0).Seconds()
	rss := rssKB(b, pid)
	anon := statusKB(b, pid, "RssAnon:")
	if dir := os.Getenv("REX_BENCH_PROFILES"); dir != "" {
		fetchProfile(b, c, "heap", filepath.Join(dir, "idle-heap.pprof"))
		fetchProfile(b, c, "goroutine?debug=1", filepath.Join(dir, "idle-goroutines.txt"))
		st, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
		os.WriteFile(filepath.Join(dir, "idle-status.txt"), st, 0o644)
	}

	// 16 panes of 10,000 lines each.
	c.sendLine(filepath.Join(bin, "rex"))
	c.waitFor("all32 (32) ❯")
	c.run("/target s16", "target s16")
	c.run("seq 10000", "16 ok")
	c.detach()
	// Idle again: the server gives memory back once a detach has settled.
	time.Sleep(tui.TrimAfter + time.Second)
	rss16 := rssKB(b, pid)

	// Attach: dial, hello, attach, until the first frame has the prompt.
	var firsts []time.Duration
	b.ResetTimer()
	for range b.N {
		firsts = append(firsts, attachOnce(b))
	}
	b.StopTimer()
	slices.Sort(firsts)
	b.ReportMetric(float64(rss0)/1024, "start-rss-MB")
	b.ReportMetric(float64(rss)/1024, "idle-rss-MB")
	b.ReportMetric(float64(anon)/1024, "idle-anon-MB")
	b.ReportMetric(float64(rss16)/1024, "rss-16x10k-MB")
	b.ReportMetric(idleCPU*100, "idle-cpu-%")
	b.ReportMetric(ms(firsts[len(firsts)/2]), "p50-attach-ms")
	b.ReportMetric(ms(firsts[len(firsts)-1]), "max-attach-ms")
}

// fetchProfile saves one of the pprof endpoints of c's server (which runs
// with REX_SERVER_PPROF=1) to path.
func fetchProfile(b *testing.B, c *console, what, path string) {
	if os.Getenv(server.PprofEnv) != "1" {
		b.Fatalf("REX_BENCH_PROFILES needs %s=1 (the server's profiles)", server.PprofEnv)
	}
	resp, err := server.PprofClient(c.serverDir()).Get("http://rex/debug/pprof/" + what)
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	if _, err := io.Copy(f, resp.Body); err != nil {
		b.Fatal(err)
	}
}

// frameWriter notes when the first whole frame (the prompt drawn) came.
type frameWriter struct {
	mu   sync.Mutex
	seen strings.Builder
	done chan struct{}
	once sync.Once
}

func (w *frameWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.seen.Write(p)
	if strings.Contains(w.seen.String(), "s16 (16) ❯") {
		w.once.Do(func() { close(w.done) })
	}
	return len(p), nil
}

// attachOnce attaches a client and returns the time to its first frame;
// it then detaches.
func attachOnce(b *testing.B) time.Duration {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	start := time.Now()
	cl, err := server.Dial(ctx, "bench")
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	w := &frameWriter{done: make(chan struct{})}
	keys, in := io.Pipe()
	ended := make(chan struct{})
	go func() {
		cl.Attach(ctx, server.Window{In: keys, Out: w, Size: func() (int, int) { return 200, 60 }})
		close(ended)
	}()
	select {
	case <-w.done:
	case <-ctx.Done():
		b.Fatalf("no first frame:\n%s", w.seen.String())
	}
	d := time.Since(start)
	in.Write([]byte("\x11")) // ctrl+q
	in.Write([]byte("d"))    // detach
	<-ended
	return d
}

// rssKB is a process's resident set, from /proc.
func rssKB(b testing.TB, pid int) int { return statusKB(b, pid, "VmRSS:") }

// statusKB is a field of /proc/PID/status in kB: VmRSS (all resident
// pages), RssAnon (the process's own memory; the rest is the rex
// binary's pages, shared).
func statusKB(b testing.TB, pid int, field string) int {
	s, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		b.Fatal(err)
	}
	for _, l := range strings.Split(string(s), "\n") {
		if v, ok := strings.CutPrefix(l, field); ok {
			n, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), " kB"))
			return n
		}
	}
	b.Fatal("no " + field)
	return 0
}

// cpuTicks is a process's user and system time, in clock ticks (1/100 s).
func cpuTicks(b *testing.B, pid int) int {
	s, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		b.Fatal(err)
	}
	f := strings.Fields(string(s)[strings.LastIndexByte(string(s), ')')+2:])
	u, _ := strconv.Atoi(f[11])
	st, _ := strconv.Atoi(f[12])
	return u + st
}
