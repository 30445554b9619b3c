package commands

import (
	"bytes"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rexconsole/rex/internal/fanout"
)

// TestGatherMemoryBoundedWhenSpillFails: when the spill file cannot be
// made (no usable $TMPDIR, a full /tmp), output past the memory budget is
// not kept: memory stays within it, the cut targets are marked in the
// output and one sentence says why and what to do.
func TestGatherMemoryBoundedWhenSpillFails(t *testing.T) {
	t.Setenv("TMPDIR", filepath.Join(t.TempDir(), "missing"))
	var out, errOut bytes.Buffer
	g := newGatherSink(IO{Out: &out, Err: &errOut})
	g.memCap = 1 << 20
	var sum fanout.Summary
	for h := 0; h < 8; h++ {
		name := fmt.Sprintf("h%d", h)
		var b bytes.Buffer
		for i := 0; b.Len() < 2<<20; i++ {
			fmt.Fprintf(&b, "%s line %09d\n", name, i)
		}
		g.event(fanout.Event{Target: name, Kind: fanout.EventStdout, Data: b.Bytes()})
		sum.Results = append(sum.Results, &fanout.Result{Target: name})
	}
	if g.inMem > g.memCap {
		t.Fatalf("the spill failed (%v) and %d bytes of chunks are in memory over a budget of %d", g.spillErr, g.inMem, g.memCap)
	}
	g.finish(&sum)
	if n := strings.Count(out.String(), "[output cut: no memory or disk left to gather it"); n != 8 {
		t.Errorf("%d targets marked cut, want 8 (each printed 2 MiB against a 1 MiB budget)", n)
	}
	if !strings.Contains(out.String(), "h0 line 000000000\n") {
		t.Error("what was kept of h0 is not printed")
	}
	if e := errOut.String(); strings.Count(e, "\n") != 1 || !strings.Contains(e, "could not be spilled") || !strings.Contains(e, "8 target(s) is cut") || !strings.Contains(e, "TMPDIR") {
		t.Errorf("stderr %q, want one sentence saying the output of 8 targets is cut and what to do", e)
	}
}
