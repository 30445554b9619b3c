package engine

import (
	"context"
	"fmt"
	"hash/maphash"
	"strings"
	"testing"
	"time"

	"github.com/rexconsole/rex/internal/fanout"
)

var t0 = time.Date(2026, 5, 4, 14, 2, 11, 0, time.UTC)

// startOn puts a command on the list and, for each host, in its
// transcript.
func startOn(l *Tasks, trs map[string]*Transcript, cmd string, at time.Time) *Task {
	hosts := make([]string, 0, len(trs))
	for _, h := range []string{"h1", "h2"} {
		if trs[h] != nil {
			hosts = append(hosts, h)
		}
	}
	t := l.New(context.Background(), cmd, "web", hosts, at, 100, maphash.MakeSeed(), nil)
	for _, r := range t.Runs {
		trs[r.Target].Add(r)
	}
	return t
}

func exit(code int, d time.Duration) *fanout.Result {
	return &fanout.Result{ExitCode: &code, Duration: d}
}

func lines(tr *Transcript) []string {
	rd := tr.Read()
	defer rd.Done()
	var out []string
	for i := range rd.Len() {
		out = append(out, rd.Line(i).Text)
	}
	return out
}

// TestTranscript: commands read like a terminal's history, each under
// its header and closed by its status; a command still running keeps its
// later output under its own header.
func TestTranscript(t *testing.T) {
	var l Tasks
	trs := map[string]*Transcript{"h1": NewTranscript("web", "h1", 100)}
	slow := startOn(&l, trs, "sleep 3; echo late", t0)
	fast := startOn(&l, trs, "free -m", t0.Add(time.Second))
	fast.Run("h1").Buf.Write(false, []byte("Mem: 1024\n"))
	fast.Run("h1").SetResult(exit(0, 40*time.Millisecond))
	slow.Run("h1").Buf.Write(false, []byte("late\n"))
	want := []string{
		"❯ sleep 3; echo late · 14:02:11", "late",
		"❯ free -m · 14:02:12", "Mem: 1024", "✓ exit 0 · 40ms",
	}
	if got := lines(trs["h1"]); strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("transcript:\n%q\nwant\n%q", got, want)
	}
	slow.Run("h1").SetResult(exit(3, 3*time.Second))
	if got := lines(trs["h1"]); got[2] != "✗ exit 3 · 3.0s" {
		t.Errorf("the slow command's status: %q", got)
	}
	if trs["h1"].Latest() != fast.Run("h1") {
		t.Error("Latest is not the newest command")
	}
}

// TestTranscriptTrim: a transcript keeps within its limit by dropping
// its oldest commands that ended (whole, then lines of the oldest), and
// says so at its top; a reopened task sees the same.
func TestTranscriptTrim(t *testing.T) {
	var l Tasks
	trs := map[string]*Transcript{"h1": NewTranscript("web", "h1", 20)}
	var tasks []*Task
	for i := range 5 {
		tk := startOn(&l, trs, fmt.Sprintf("seq %d", i), t0)
		for j := range 6 {
			tk.Run("h1").Buf.Write(false, fmt.Appendf(nil, "%d-%d\n", i, j))
		}
		tk.Run("h1").SetResult(exit(0, time.Second))
		tasks = append(tasks, tk)
	}
	got := lines(trs["h1"])
	if len(got) > 22 || len(got) < 18 {
		t.Errorf("%d lines kept, limit 20:\n%q", len(got), got)
	}
	if !strings.HasPrefix(got[0], "… ") || !strings.HasSuffix(got[0], " earlier lines dropped") {
		t.Errorf("first line %q, want the marker", got[0])
	}
	if got[len(got)-1] != "✓ exit 0 · 1.0s" || got[len(got)-2] != "4-5" {
		t.Errorf("the newest command is not whole at the end: %q", got)
	}
	// The first command went whole: its buffer was not touched, the
	// transcript just stopped showing it.
	if r := trs["h1"].Runs(); r[0].Task == tasks[0] {
		t.Error("the oldest command is still in the transcript")
	}
	// A command still running is never dropped.
	trs2 := map[string]*Transcript{"h1": NewTranscript("web", "h1", 5)}
	run := startOn(&l, trs2, "tail -f", t0)
	for i := range 10 {
		run.Run("h1").Buf.Write(false, fmt.Appendf(nil, "%d\n", i))
	}
	startOn(&l, trs2, "uptime", t0).Run("h1").SetResult(exit(0, time.Second))
	if got := lines(trs2["h1"]); got[0] != "❯ tail -f · 14:02:11" {
		t.Errorf("a running command was trimmed: %q", got)
	}
}

// TestTasksRetain: finished tasks' output is kept newest first within
// the budget, older output let go unless a pane shows it; running tasks
// keep theirs.
func TestTasksRetain(t *testing.T) {
	var l Tasks
	var tasks []*Task
	for i := range 4 {
		tk := l.New(context.Background(), fmt.Sprint("cmd ", i), "h1", []string{"h1"}, t0, 100, maphash.MakeSeed(), nil)
		tk.Run("h1").Buf.Write(false, []byte(strings.Repeat("line\n", 10)))
		if i < 3 {
			tk.Start(func(ctx context.Context, on func(fanout.Event)) *fanout.Summary { return &fanout.Summary{} }, time.Now, nil)
			<-tk.Exited()
		}
		tasks = append(tasks, tk)
	}
	l.Retain(15, func(tk *Task) bool { return tk == tasks[0] })
	for i, want := range []bool{false, true, false, false} {
		if got := tasks[i].Released(); got != want {
			t.Errorf("task %d released %v, want %v", i, got, want)
		}
	}
	if tasks[1].Run("h1").Buf.Len() != 0 || tasks[3].Run("h1").Buf.Len() != 10 {
		t.Error("released output is still held, or running output was dropped")
	}
	if got := len(l.List()); got != 4 {
		t.Errorf("%d tasks listed, want all 4 (their status stays)", got)
	}
}
