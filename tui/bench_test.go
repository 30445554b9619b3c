package tui

import (
	"context"
	"fmt"
	"hash/maphash"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"

	"github.com/rexconsole/rex/internal/fanout"
	"github.com/rexconsole/rex/themes"
	"github.com/rexconsole/rex/tui/engine"
)

// floodRun feeds every target rate bytes per second of 80-byte lines, in
// chunks every 10 ms, until cancelled: what 16 busy hosts look like.
func floodRun(rate int, fed *atomic.Int64) runFunc {
	return func(ctx context.Context, targets []fanout.Target, _ fanout.Task, opts fanout.Options) *fanout.Summary {
		line := strings.Repeat("0123456789abcdef", 5)[:79] + "\n"
		chunk := []byte(strings.Repeat(line, max(1, rate/100/len(line))))
		done := make(chan struct{})
		for _, tg := range targets {
			go func() {
				defer func() { done <- struct{}{} }()
				opts.OnEvent(fanout.Event{Target: tg.Name, Kind: fanout.EventStart})
				tick := time.NewTicker(10 * time.Millisecond)
				defer tick.Stop()
				for {
					select {
					case <-ctx.Done():
						return
					case <-tick.C:
						opts.OnEvent(fanout.Event{Target: tg.Name, Kind: fanout.EventStdout, Data: chunk})
						fed.Add(int64(len(chunk)))
					}
				}
			}()
		}
		for range targets {
			<-done
		}
		return &fanout.Summary{}
	}
}

// BenchmarkConsoleFlood drives the console with 16 panes each receiving
// 1 MB/s and measures what the operator feels: one op is a keystroke
// handled and the screen drawn (Bubble Tea draws after every update), with
// a frame tick in between as the real program has. It reports the
// keystroke-to-frame latency (ns/op, p50-key-ns, p99-key-ns), the frame
// time alone (frame-ns) and the output rate actually taken in (MB/s-in).
func BenchmarkConsoleFlood(b *testing.B) {
	const panes, rate = 16, 1 << 20
	var fed atomic.Int64
	names := make([]fanout.Target, panes)
	for i := range names {
		names[i] = fanout.Target{Name: fmt.Sprintf("host%02d", i+1)}
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	m := newModel(ctx, Options{Resolver: func(func(string)) func(string) ([]fanout.Target, error) {
		return func(string) ([]fanout.Target, error) { return names, nil }
	}}, floodRun(rate, &fed), time.Now)
	m.Update(tea.WindowSizeMsg{Width: 200, Height: 50})
	for _, r := range "yes | head" {
		m.Update(tea.KeyPressMsg{Code: r, Text: string(r)})
	}
	m.Update(tea.KeyPressMsg{Code: tea.KeyEnter})
	// Measure once the buffers hold output: a fifth of a second's worth
	// fed (the flood's own pace), however long the machine takes.
	for deadline := time.Now().Add(time.Minute); fed.Load() < panes*rate/5; {
		if time.Now().After(deadline) {
			b.Fatalf("the flood fed %d bytes in a minute", fed.Load())
		}
		time.Sleep(10 * time.Millisecond) // polling, bounded
	}

	keys := []tea.KeyPressMsg{{Code: 'x', Text: "x"}, {Code: tea.KeyBackspace}}
	lat := make([]time.Duration, 0, b.N)
	var frames time.Duration
	start := time.Now()
	fed.Store(0)
	b.ResetTimer()
	for i := range b.N {
		t0 := time.Now()
		m.Update(keys[i%2])
		_ = m.View()
		lat = append(lat, time.Since(t0))

		t1 := time.Now()
		m.Update(frameMsg(t1))
		_ = m.View()
		frames += time.Since(t1)
		// The real program draws about 30 frames a second; keep the
		// benchmark's pace near that so output arrives between frames.
		time.Sleep(time.Millisecond)
	}
	b.StopTimer()
	elapsed := time.Since(start)
	cancel()
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Nanoseconds()), "p50-key-ns")
	b.ReportMetric(float64(lat[len(lat)*99/100].Nanoseconds()), "p99-key-ns")
	b.ReportMetric(float64(frames.Nanoseconds())/float64(b.N), "frame-ns")
	b.ReportMetric(float64(fed.Load())/elapsed.Seconds()/1e6, "MB/s-in")
	if p99 := lat[len(lat)*99/100]; p99 > 100*time.Millisecond {
		b.Errorf("p99 keystroke latency %v exceeds 100ms", p99)
	}
}

// BenchmarkPaneView measures drawing one full-screen pane whose lines
// change every frame (the worst case: no cached line to reuse).
func BenchmarkPaneView(b *testing.B) {
	st := NewStyles(themes.MustDefault(), 1, false)
	s := engine.NewBuffer(DefaultScrollback, maphash.MakeSeed(), nil)
	p := newTextPane("host", s, &KeyMap{})
	p.SetSize(200, 48)
	c := &paneCtx{st: st, focused: true, now: time.Now()}
	lines := []byte(strings.Repeat(strings.Repeat("x", 150)+"\n", 48))
	b.ResetTimer()
	for range b.N {
		s.Write(false, lines)
		_ = p.View(c)
	}
}
