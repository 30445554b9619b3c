package tui

import (
	"context"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"

	"github.com/rexconsole/rex/internal/commands"
	"github.com/rexconsole/rex/internal/fanout"
	"github.com/rexconsole/rex/internal/protocol"
	"github.com/rexconsole/rex/themes"
)

// termOutputSample is what a busy terminal prints: coloured log lines of
// about 80 bytes, as `ls --color`, compilers and `journalctl` write them.
func termOutputSample(size int) []byte {
	var b strings.Builder
	for i := 0; b.Len() < size; i++ {
		fmt.Fprintf(&b, "\x1b[32m2025-06-01 12:00:%02d\x1b[m \x1b[1;34mINFO\x1b[m worker %3d: processed batch %6d in %3dms\r\n", i%60, i%128, i, i%997)
	}
	return []byte(b.String()[:size])
}

// BenchmarkPTYPaneThroughput measures a terminal pane taking output: one
// op writes 32 KiB through the emulator (the connection goroutine's
// work) and draws the pane (a frame's), so MB/s is output written and
// shown. frame-us is the drawing alone. Most of the time is the emulator
// scrolling: x/vt moves every cell of the screen for each new line at the
// bottom, so a bigger pane takes output more slowly.
func BenchmarkPTYPaneThroughput(b *testing.B) {
	for _, sz := range []struct{ w, h int }{{96, 38}, {48, 19}, {176, 48}} {
		b.Run(fmt.Sprintf("%dx%d", sz.w-2, sz.h-2), func(b *testing.B) {
			keys := DefaultKeyMap()
			task := &termTask{command: "bench"}
			p := newPTYPane(context.Background(), 1, fanout.Target{Name: "h"}, task, &keys, 2000, nil)
			defer p.shutdown()
			p.SetSize(sz.w, sz.h)
			out := &termOutput{p: p, gen: p.gen}
			st := NewStyles(themes.MustDefault(), 1, false)
			c := &paneCtx{st: st, focused: true, now: time.Now()}
			chunk := termOutputSample(32 << 10)
			// Fill the history first: the steady state drops its oldest
			// lines.
			for range DefaultScrollback/400 + 1 {
				out.Write(chunk)
			}
			var frames time.Duration
			b.SetBytes(int64(len(chunk)))
			b.ResetTimer()
			for range b.N {
				out.Write(chunk)
				t0 := time.Now()
				_ = p.View(c)
				frames += time.Since(t0)
			}
			b.ReportMetric(float64(frames.Microseconds())/float64(b.N), "frame-us")
		})
	}
}

// echoTerm is a remote terminal in echo mode, in process: what is typed
// comes back as output, as a tty's line discipline sends it. It measures
// the console's own part of a keystroke's round trip.
type echoTerm struct {
	out  io.Writer
	done chan struct{}
}

func (e *echoTerm) Write(_ context.Context, b []byte) error {
	go e.out.Write(append([]byte(nil), b...))
	return nil
}
func (e *echoTerm) Resize(context.Context, int, int) error { return nil }
func (e *echoTerm) Close(context.Context) error {
	select {
	case <-e.done:
	default:
		close(e.done)
	}
	return nil
}
func (e *echoTerm) Done() <-chan struct{} { return e.done }
func (e *echoTerm) Wait(context.Context) (*protocol.ExitEvent, error) {
	<-e.done
	return &protocol.ExitEvent{}, nil
}

// benchEcho types b.N keys into a terminal pane opened with open and
// measures each from the key press to the frame that shows its echo.
func benchEcho(b *testing.B, open openTermFunc, cmd string) {
	dir := b.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	m := newModel(ctx, Options{ConfigDir: filepath.Join(dir, "config"), StateDir: filepath.Join(dir, "state")},
		func(context.Context, []fanout.Target, fanout.Task, fanout.Options) *fanout.Summary {
			return &fanout.Summary{}
		}, time.Now)
	m.openTerm = open
	m.Update(tea.WindowSizeMsg{Width: 120, Height: 40})
	for _, r := range "/attach local -- " + cmd {
		m.Update(tea.KeyPressMsg{Code: r, Text: string(r)})
	}
	m.Update(tea.KeyPressMsg{Code: tea.KeyEnter})
	p := m.focusedTerm()
	if p == nil {
		b.Fatalf("no terminal pane: %v", m.msg.lines)
	}
	defer p.shutdown()
	deadline := time.Now().Add(30 * time.Second)
	for p.phase() != termLive {
		if time.Now().After(deadline) {
			text, _ := p.notice()
			b.Fatalf("the terminal never opened: %s", text)
		}
		time.Sleep(time.Millisecond)
	}
	time.Sleep(100 * time.Millisecond) // let the program settle

	cursor := func() (int, int) {
		p.mu.Lock()
		defer p.mu.Unlock()
		c := p.emu.CursorPosition()
		return c.X, c.Y
	}
	// waitMove waits until the echo has moved the cursor.
	waitMove := func(x, y int) {
		deadline := time.Now().Add(10 * time.Second)
		for {
			if nx, ny := cursor(); nx != x || ny != y {
				return
			}
			if time.Now().After(deadline) {
				b.Fatal("a keystroke was never echoed")
			}
			runtime.Gosched()
		}
	}
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := range b.N {
		if i%40 == 39 {
			// A new line before the edge: not measured.
			b.StopTimer()
			x, y := cursor()
			m.Update(tea.KeyPressMsg{Code: tea.KeyEnter})
			waitMove(x, y)
			time.Sleep(5 * time.Millisecond)
			b.StartTimer()
		}
		x, y := cursor()
		r := rune('a' + i%26)
		t0 := time.Now()
		m.Update(tea.KeyPressMsg{Code: r, Text: string(r)})
		waitMove(x, y)
		m.Update(frameMsg(time.Now()))
		v := m.View()
		lat = append(lat, time.Since(t0))
		if !strings.Contains(v.Content, string(r)) {
			b.Fatalf("the frame after the echo does not show %q", r)
		}
	}
	b.StopTimer()
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-echo-us")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-echo-us")
}

// BenchmarkPTYKeystrokeEcho measures keystroke in to echoed cell shown
// in the next frame, through the console alone (an in-process echoing
// terminal): key encoding, the input sender, the emulator and the frame.
func BenchmarkPTYKeystrokeEcho(b *testing.B) {
	benchEcho(b, func(ctx context.Context, t fanout.Target, p protocol.PTYOpenParams, out io.Writer) (remoteTerm, func(), error) {
		return &echoTerm{out: out, done: make(chan struct{})}, func() {}, nil
	}, "echo")
}

// BenchmarkPTYKeystrokeEchoRexd measures the same through a real local
// rexd and PTY running cat: the tty echoes, rexd reads and sends it back.
func BenchmarkPTYKeystrokeEchoRexd(b *testing.B) {
	rexd := filepath.Join(b.TempDir(), "rexd")
	build := exec.Command("go", "build", "-o", rexd, "github.com/rexconsole/rex/cmd/rexd")
	build.Env = append(build.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		b.Fatalf("go build rexd: %v\n%s", err, out)
	}
	pool := fanout.NewPool(fanout.LocalConnector(rexd, fanout.OperatorLimits()...), fanout.PoolOptions{})
	defer pool.Close()
	open := poolTerminals(pool)
	benchEcho(b, func(ctx context.Context, _ fanout.Target, p protocol.PTYOpenParams, out io.Writer) (remoteTerm, func(), error) {
		return open(ctx, commands.LocalTarget(), p, out)
	}, "cat")
}
