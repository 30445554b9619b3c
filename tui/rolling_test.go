package tui

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rexconsole/rex/internal/fanout"
	"github.com/rexconsole/rex/tui/engine"
)

// TestRunRollingFlags: /run takes rex run's rolling flags, and the status
// line says which batch runs (on real rexd processes, a FIFO holding each
// command until the test lets it go).
func TestRunRollingFlags(t *testing.T) {
	e, _ := syncEnv(t)
	pool := e.m.app.Pool
	e.m.run = func(ctx context.Context, targets []fanout.Target, task fanout.Task, o fanout.Options) *fanout.Summary {
		return fanout.Run(ctx, pool, targets, task, o)
	}
	fifo := filepath.Join(t.TempDir(), "gate")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	gate, err := os.OpenFile(fifo, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer gate.Close()

	e.typeText("/run web --batch 1 -- head -n1 " + fifo)
	e.press("enter")
	task := e.m.tasks.List()[len(e.m.tasks.List())-1]
	running := func(name string) {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for {
			if ph, _, _ := task.Run(name).Status(); ph == engine.Running {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s never ran", name)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	for i, name := range []string{"web1", "web2", "web3"} {
		running(name)
		e.m.Update(frameMsg{})
		status := lastLine(e.screen())
		if want := "batch " + string(rune('1'+i)) + "/3 " + name; !strings.Contains(status, want) {
			t.Errorf("status line %q lacks %q", status, want)
		}
		for _, other := range []string{"web1", "web2", "web3"} {
			if ph, _, _ := task.Run(other).Status(); other != name && ph == engine.Running {
				t.Errorf("%s runs beside %s with --batch 1", other, name)
			}
		}
		gate.WriteString("go\n")
	}
	e.settle()
	if status := lastLine(e.screen()); strings.Contains(status, "batch") {
		t.Errorf("the status line still names a batch after the run: %q", status)
	}

	// --canary and --max-fail: a failing canary stops the rest.
	e.submit("/run web --canary 1 --max-fail 1 -- false")
	e.settle()
	e.wantMessage("0 ok, 1 failed, 2 skipped")
	e.submit("/run web --max-fail soon -- true")
	e.wantError(`--max-fail "soon"`)
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return lines[len(lines)-1]
}
