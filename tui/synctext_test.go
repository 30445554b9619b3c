package tui

import (
	"errors"
	"github.com/charmbracelet/x/ansi"
	"hash/maphash"
	"strings"
	"testing"

	"github.com/rexconsole/rex/internal/cas"
	"github.com/rexconsole/rex/internal/commands"
	"github.com/rexconsole/rex/internal/fanout"
	"github.com/rexconsole/rex/themes"
	"github.com/rexconsole/rex/tui/engine"
)

// TestSyncStoppedWhere: a push or pull that failed says where it stopped,
// and its bar stays where it was — never complete.
func TestSyncStoppedWhere(t *testing.T) {
	failed := &fanout.Result{Err: errors.New("write srv/site: no space left on device")}
	moving := cas.Progress{Stats: cas.Stats{Blobs: 12, Bytes: 1300 << 10}, TotalObjects: 40, TotalBytes: 3500 << 10}
	tests := []struct {
		name string
		s    engine.SyncState
		r    *fanout.Result
		text string
		frac float64
	}{
		{"mid-way", engine.SyncState{Phase: commands.SyncMoving, Moved: moving}, failed,
			"failed while sending 12/40 objects · 1.3 MiB/3.4 MiB", float64(1300) / 3500},
		{"writing, all sent", engine.SyncState{Phase: commands.SyncWriting, Moved: moving}, failed,
			"failed while writing the tree on web3", maxFailedFrac},
		{"pull merging", engine.SyncState{Pull: true, Phase: commands.SyncMerging}, failed,
			"failed while merging with the local changes", maxFailedFrac},
		{"connecting", engine.SyncState{Phase: commands.SyncConnecting}, &fanout.Result{Err: errors.New("cancelled")},
			"cancelled while connecting to web3", 0},
		{"unreachable", engine.SyncState{Phase: commands.SyncConnecting}, &fanout.Result{Unreachable: true, Err: errors.New("refused")},
			"unreachable", 0},
		{"done", engine.SyncState{Phase: commands.SyncWriting, Moved: moving, End: "done", EndOK: true}, &fanout.Result{},
			"done · sent 12 objects · 1.3 MiB", 1},
	}
	for _, tt := range tests {
		text, frac := syncText(tt.s, "web3", "", true, tt.r)
		if text != tt.text || frac != tt.frac {
			t.Errorf("%s: %q %.3f, want %q %.3f", tt.name, text, frac, tt.text, tt.frac)
		}
	}
}

// TestProgramColours: a line's colour spans are drawn in the program's
// colours with the theme's own kept, mapped to the 16 colours under the
// ansi theme, and left out (bold stays) with NO_COLOR.
func TestProgramColours(t *testing.T) {
	b := engine.NewBuffer(10, maphash.MakeSeed(), nil)
	b.Write(false, []byte("a \x1b[1;38;5;208mwarm\x1b[0m b\n"))
	rd := b.Read()
	line := *rd.Line(0)
	rd.Done()
	for _, tt := range []struct {
		theme   string
		noColor bool
		want    string // the sequence before "warm"
	}{
		{"dark", false, "\x1b[1;38;5;208m"},
		{"ansi", false, "\x1b[1;91m"},
		{"dark", true, "\x1b[1m"},
	} {
		th, err := themes.Load(tt.theme, "")
		if err != nil {
			t.Fatal(err)
		}
		st := NewStyles(th, 1, tt.noColor)
		l := line
		l.Drawn = nil
		row := renderLine(st, &l, 20)[0]
		if !strings.Contains(row, tt.want+"warm"+ansi.ResetStyle) {
			t.Errorf("%s (NO_COLOR %v): %q lacks %q", tt.theme, tt.noColor, row, tt.want+"warm")
		}
		if got := ansi.Strip(row); got != "a warm b            " {
			t.Errorf("%s: text %q", tt.theme, got)
		}
	}
}
