package commands

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/rexconsole/rex/internal/fanout"
)

func TestParseRun(t *testing.T) {
	tests := []struct {
		args    string
		targets string
		argv    []string
		command string
		json    bool
		gather  bool
		timeout time.Duration
		conc    int
		err     string
	}{
		{args: "web -- uname -a", targets: "web", argv: []string{"uname", "-a"}},
		{args: "--json web -- true", targets: "web", argv: []string{"true"}, json: true},
		{args: "web --gather --timeout 5s --concurrency 8 -- ls", targets: "web", argv: []string{"ls"}, gather: true, timeout: 5 * time.Second, conc: 8},
		{args: "web --timeout=30 -- ls", targets: "web", argv: []string{"ls"}, timeout: 30 * time.Second},
		{args: "web uptime", targets: "web", argv: []string{"uptime"}},
		{args: "web ls -la /", targets: "web", argv: []string{"ls", "-la", "/"}},
		{args: "web -- ls|wc", targets: "web", command: "ls|wc"},
		{args: "", err: "which targets"},
		{args: "web --", err: "no command"},
		{args: "web --bogus -- ls", err: "unknown flag --bogus"},
		{args: "web --json --gather -- ls", err: "pick one"},
		{args: "web -N --json -- ls", err: "--no-prefix"},
		{args: "web --no-prefix --gather -- ls", err: "--no-prefix"},
		{args: "web --timeout soon -- ls", err: "--timeout"},
		{args: "web --concurrency 0 -- ls", err: "--concurrency"},
	}
	for _, tt := range tests {
		args := strings.Fields(tt.args)
		s, err := ParseRun(args)
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("%q: error %v, want %q", tt.args, err, tt.err)
			}
			if ExitCode(err) != 2 {
				t.Errorf("%q: usage errors exit 2, got %d", tt.args, ExitCode(err))
			}
			continue
		}
		if err != nil {
			t.Errorf("%q: %v", tt.args, err)
			continue
		}
		if s.Targets != tt.targets || strings.Join(s.Task.Argv, " ") != strings.Join(tt.argv, " ") || s.Task.Command != tt.command ||
			s.JSON != tt.json || s.Gather != tt.gather || s.Timeout != tt.timeout || s.Concurrency != tt.conc || s.Task.Timeout != tt.timeout {
			t.Errorf("%q: got %+v", tt.args, s)
		}
	}
}

func TestTaskFor(t *testing.T) {
	if tk := TaskFor([]string{"echo $HOME"}); tk.Command != "echo $HOME" || tk.Argv != nil {
		t.Errorf("one word with shell syntax: %+v", tk)
	}
	if tk := TaskFor([]string{"echo", "$HOME"}); tk.Command != "" || len(tk.Argv) != 2 {
		t.Errorf("several words stay an argv: %+v", tk)
	}
	if tk := TaskFor([]string{"uptime"}); tk.Command != "" || tk.Argv[0] != "uptime" {
		t.Errorf("one plain word is an argv: %+v", tk)
	}
}

func code(n int) *int { return &n }

// events is a scripted run: interleaved output, a partial last line, a
// failing host and an unreachable one.
func scriptedRun(sink outputSink) {
	ev := func(t string, k fanout.EventKind, s string) {
		// rex run reuses output buffers (fanout.Options.Reuse): a sink
		// must keep nothing it was given, so the bytes are spoilt after.
		d := []byte(s)
		sink.event(fanout.Event{Target: t, Kind: k, Data: d})
		for i := range d {
			d[i] = '#'
		}
	}
	ev("web1", fanout.EventStart, "")
	ev("db10", fanout.EventStart, "")
	ev("web1", fanout.EventStdout, "Linux web1\nup 3 ")
	ev("db10", fanout.EventStdout, "Linux db\n")
	ev("web1", fanout.EventStdout, "days\n")
	ev("db10", fanout.EventStderr, "warning: disk\n")
	ev("web1", fanout.EventStdout, "no newline")
	results := []*fanout.Result{
		{Target: "web1", ExitCode: code(0), Duration: 1500 * time.Millisecond},
		{Target: "db10", ExitCode: code(2), Duration: 200 * time.Millisecond},
		{Target: "web2", ExitCode: code(0), Duration: 100 * time.Millisecond},
		{Target: "gone", Unreachable: true, Err: errors.New("connect gone (10.0.0.9:22): connection refused; is sshd running there?")},
	}
	ev("web2", fanout.EventStdout, "Linux web1\nup 3 days\nno newline")
	for _, r := range results {
		sink.event(fanout.Event{Target: r.Target, Kind: fanout.EventResult, Result: r})
	}
	sink.finish(&fanout.Summary{Results: results, OK: 2, Failed: 1, Unreachable: 1})
}

func TestPrefixOutput(t *testing.T) {
	var out bytes.Buffer
	ts := []fanout.Target{{Name: "web1"}, {Name: "db10"}, {Name: "web2"}, {Name: "gone"}}
	scriptedRun(newPrefixSink(IO{Out: &out}, ts))
	want := "web1: Linux web1\n" +
		"db10: Linux db\n" +
		"web1: up 3 days\n" +
		"db10! warning: disk\n" +
		"web2: Linux web1\n" +
		"web2: up 3 days\n" +
		"web1: no newline\n" +
		"web2: no newline\n"
	if out.String() != want {
		t.Errorf("prefix output:\n%s\nwant:\n%s", out.String(), want)
	}
}

// -N: several targets' whole lines with no names, stdout and stderr apart,
// a last line without a newline ended when its target ends.
func TestPlainOutput(t *testing.T) {
	var out, errOut bytes.Buffer
	ts := []fanout.Target{{Name: "web1"}, {Name: "db10"}, {Name: "web2"}, {Name: "gone"}}
	scriptedRun(newPlainSink(IO{Out: &out, Err: &errOut}, ts))
	want := "Linux web1\n" +
		"Linux db\n" +
		"up 3 days\n" +
		"Linux web1\nup 3 days\n" +
		"no newline\n" +
		"no newline\n"
	if out.String() != want || errOut.String() != "warning: disk\n" {
		t.Errorf("plain output:\n%q\n%q\nwant:\n%q\n%q", out.String(), errOut.String(), want, "warning: disk\n")
	}
}

// -N with several targets: a line longer than MaxLine goes in pieces, each
// ended by a newline, so another target's line never lands inside it.
func TestPlainOutputLongLine(t *testing.T) {
	var out bytes.Buffer
	p := newPlainSink(IO{Out: &out}, []fanout.Target{{Name: "a"}, {Name: "b"}})
	long := strings.Repeat("x", MaxLine+MaxLine/2)
	p.event(fanout.Event{Target: "a", Kind: fanout.EventStdout, Data: []byte(long[:MaxLine+10])})
	p.event(fanout.Event{Target: "b", Kind: fanout.EventStdout, Data: []byte("b's line\n")})
	p.event(fanout.Event{Target: "a", Kind: fanout.EventStdout, Data: []byte(long[MaxLine+10:] + "\n")})
	want := long[:MaxLine] + "\n" + "b's line\n" + long[MaxLine:] + "\n"
	if out.String() != want {
		t.Fatalf("got %d bytes, want %d: a line of one target ran into another's", out.Len(), len(want))
	}
}

// With several targets, a line over MaxLine goes in the same pieces
// however the host's bytes were chunked into events.
func TestPlainOutputLongLineAnyChunking(t *testing.T) {
	long := strings.Repeat("é", MaxLine/2) + "xyz" // a cut must not split a character
	input := "short\n" + long + "\n" + strings.Repeat("y", 3*MaxLine) + "\nlast\n"
	run := func(sizes []int) string {
		var out bytes.Buffer
		p := newPlainSink(IO{Out: &out}, []fanout.Target{{Name: "a"}, {Name: "b"}})
		rest := input
		for i := 0; len(rest) > 0; i++ {
			n := min(sizes[i%len(sizes)], len(rest))
			p.event(fanout.Event{Target: "a", Kind: fanout.EventStdout, Data: []byte(rest[:n])})
			rest = rest[n:]
		}
		p.flush("a")
		return out.String()
	}
	want := run([]int{len(input)})
	for _, l := range strings.Split(strings.TrimSuffix(want, "\n"), "\n") {
		if len(l) > MaxLine || !utf8.ValidString(l) {
			t.Fatalf("a piece of %d bytes (valid UTF-8: %v)", len(l), utf8.ValidString(l))
		}
	}
	// short; long in 2 pieces; the y's (3 × MaxLine) in 3; last.
	if n := strings.Count(want, "\n"); n != 7 {
		t.Fatalf("%d lines, want 7", n)
	}
	if strings.ReplaceAll(want, "\n", "") != strings.ReplaceAll(input, "\n", "") {
		t.Fatal("bytes were lost or added")
	}
	for _, sizes := range [][]int{{1 << 10}, {7}, {MaxLine}, {MaxLine + 1}, {MaxLine - 1, 3}, {100, MaxLine * 2}} {
		if got := run(sizes); got != want {
			t.Errorf("chunks of %v: %d lines, want %d", sizes, strings.Count(got, "\n"), strings.Count(want, "\n"))
		}
	}
}

// -N with one target: its bytes as they come, as ssh prints them (no
// newline added, none held back).
func TestPlainOutputOneTarget(t *testing.T) {
	var out, errOut bytes.Buffer
	p := newPlainSink(IO{Out: &out, Err: &errOut}, []fanout.Target{{Name: "db1"}})
	chunks := []string{"\x00\xffpart", "ial\nline", "\n", "end"}
	for i, c := range chunks {
		p.event(fanout.Event{Target: "db1", Kind: fanout.EventStdout, Data: []byte(c)})
		if want := strings.Join(chunks[:i+1], ""); out.String() != want {
			t.Fatalf("after chunk %d: %q, want %q", i, out.String(), want)
		}
	}
	p.event(fanout.Event{Target: "db1", Kind: fanout.EventStderr, Data: []byte("oops")})
	p.event(fanout.Event{Target: "db1", Kind: fanout.EventResult, Result: &fanout.Result{Target: "db1", ExitCode: code(0)}})
	p.finish(&fanout.Summary{})
	if out.String() != strings.Join(chunks, "") || errOut.String() != "oops" {
		t.Fatalf("%q %q", out.String(), errOut.String())
	}
}

func TestGatherOutput(t *testing.T) {
	var out bytes.Buffer
	scriptedRun(newGatherSink(IO{Out: &out}))
	want := "---------------\n" +
		"db10 (1) exit 2\n" +
		"---------------\n" +
		"Linux db\nwarning: disk\n" +
		"---------------\n" +
		"gone (1) unreachable: connect gone (10.0.0.9:22): connection refused; is sshd running there?\n" +
		"---------------\n" +
		"---------------\n" +
		"web[1-2] (2)\n" +
		"---------------\n" +
		"Linux web1\nup 3 days\nno newline\n"
	if out.String() != want {
		t.Errorf("gathered output:\n%s\nwant:\n%s", out.String(), want)
	}
}

func TestJSONOutput(t *testing.T) {
	var out bytes.Buffer
	scriptedRun(newJSONSink(IO{Out: &out}))
	want := `{"target":"web1","event":"stdout","data":"Linux web1\nup 3 ","encoding":"utf8"}
{"target":"db10","event":"stdout","data":"Linux db\n","encoding":"utf8"}
{"target":"web1","event":"stdout","data":"days\n","encoding":"utf8"}
{"target":"db10","event":"stderr","data":"warning: disk\n","encoding":"utf8"}
{"target":"web1","event":"stdout","data":"no newline","encoding":"utf8"}
{"target":"web2","event":"stdout","data":"Linux web1\nup 3 days\nno newline","encoding":"utf8"}
{"target":"web1","event":"exit","exit_code":0,"duration_ms":1500}
{"target":"db10","event":"exit","exit_code":2,"duration_ms":200}
{"target":"web2","event":"exit","exit_code":0,"duration_ms":100}
{"target":"gone","event":"error","error":"connect gone (10.0.0.9:22): connection refused; is sshd running there?","unreachable":true}
`
	if out.String() != want {
		t.Errorf("json output:\n%s\nwant:\n%s", out.String(), want)
	}
}

func TestSummaryLine(t *testing.T) {
	s := &fanout.Summary{OK: 7, Failed: 1, Unreachable: 2, Duration: 1234 * time.Millisecond,
		Results: make([]*fanout.Result, 10), Slowest: &fanout.Result{Target: "h3", Duration: 900 * time.Millisecond}}
	if got := SummaryLine(s); got != "rex: 7 ok, 1 failed, 2 unreachable in 1.23s (slowest h3, 900ms)" {
		t.Errorf("summary %q", got)
	}
}

func TestFailureLines(t *testing.T) {
	results := []*fanout.Result{
		{Target: "h1", ExitCode: code(0)},
		{Target: "h2", ExitCode: code(1)},
		{Target: "h3", TimedOut: true, Timeout: time.Second, Signal: "KILL"},
		{Target: "h4", Unreachable: true, Err: errors.New("connect h4 (127.0.0.1:1): connection refused; is sshd running there?")},
		{Target: "h5", Cancelled: true, Err: errors.New("h5: cancelled")},
		{Target: "h6", Skipped: true, Err: errors.New("h6: skipped: 1 target failed (--max-fail 1)")},
		{Target: "h7", Signal: "KILL"},
		{Target: "h8", Unreachable: true, Err: errors.New("h8: connection lost while the command ran")},
		{Target: "web10", ExitCode: code(3)},
	}
	ts := make([]fanout.Target, len(results))
	for i, r := range results {
		ts[i] = fanout.Target{Name: r.Target}
	}
	got := strings.Join(failureLines(fanout.Summarize(results, time.Second), ts, false), "\n")
	want := strings.Join([]string{
		"h2!    exit 1",
		"h3!    timed out after 1s",
		"h4!    unreachable: connect h4 (127.0.0.1:1): connection refused; is sshd running there?",
		"h5!    cancelled",
		"h6!    skipped: 1 target failed (--max-fail 1)",
		"h7!    killed by signal KILL",
		"h8!    unreachable: connection lost while the command ran",
		"web10! exit 3",
	}, "\n")
	if got != want {
		t.Errorf("failure lines:\n%s\nwant:\n%s", got, want)
	}
}

// TestLongLinesContinue: a line longer than MaxLine is cut at the same
// places whatever chunks it arrives in, every piece after the first is
// marked, and joining the pieces gives the line back.
func TestLongLinesContinue(t *testing.T) {
	line := strings.Repeat("abcdefghij", 2*MaxLine/10) + strings.Repeat("é", 100) + "end"
	input := line + "\nshort\n" + line // the last one without a newline
	render := func(chunk int) string {
		var out bytes.Buffer
		ts := []fanout.Target{{Name: "h1"}, {Name: "host2"}}
		p := newPrefixSink(IO{Out: &out}, ts)
		for _, target := range []string{"h1", "host2"} {
			for i := 0; i < len(input); i += chunk {
				p.event(fanout.Event{Target: target, Kind: fanout.EventStderr, Data: []byte(input[i:min(i+chunk, len(input))])})
			}
			p.event(fanout.Event{Target: target, Kind: fanout.EventResult, Result: &fanout.Result{Target: target}})
		}
		p.finish(nil)
		return out.String()
	}
	first := render(len(input))
	for _, chunk := range []int{1 << 10, 4093, MaxLine - 1, MaxLine + 1} {
		if got := render(chunk); got != first {
			t.Fatalf("chunks of %d cut lines elsewhere", chunk)
		}
	}
	// Join: a "name!+" line continues the last line of that host and
	// stream (the pad after the mark belongs to the prefix).
	joined := map[string][]string{}
	for _, l := range strings.Split(strings.TrimSuffix(first, "\n"), "\n") {
		if len(l) > MaxLine+len("host2! ") {
			t.Fatalf("a piece of %d bytes", len(l))
		}
		name, rest, _ := strings.Cut(l, "!")
		if after, ok := strings.CutPrefix(rest, "+"); ok {
			after = strings.TrimLeft(after, " ")
			joined[name][len(joined[name])-1] += after
			continue
		}
		joined[name] = append(joined[name], strings.TrimLeft(rest[1:], " "))
	}
	for _, name := range []string{"h1", "host2"} {
		if got := joined[name]; len(got) != 3 || got[0] != line || got[1] != "short" || got[2] != line {
			t.Errorf("%s joined into %d lines (first %d bytes)", name, len(got), len(got[0]))
		}
	}
	for _, l := range strings.Split(first, "\n") {
		if !utf8.ValidString(l) {
			t.Fatalf("a piece cuts a UTF-8 character: %q", l[len(l)-8:])
		}
	}
}

func TestMaxFailValues(t *testing.T) {
	tests := []struct {
		in      string
		targets int
		want    int
		err     bool
	}{
		{"1", 6, 1, false}, {"3", 100, 3, false}, {"10%", 100, 10, false}, {"10%", 6, 1, false},
		{"50%", 5, 3, false}, {"100%", 7, 7, false}, {"0", 5, 0, true}, {"x", 5, 0, true}, {"150%", 5, 0, true}, {"-1", 5, 0, true},
	}
	for _, tt := range tests {
		var m maxFail
		err := m.Set(tt.in)
		if (err != nil) != tt.err {
			t.Errorf("--max-fail %s: %v", tt.in, err)
			continue
		}
		if err == nil && m.count(tt.targets) != tt.want {
			t.Errorf("--max-fail %s of %d = %d, want %d", tt.in, tt.targets, m.count(tt.targets), tt.want)
		}
	}
}

func TestOutdirSink(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "out")
	s, err := newOutdirSink(dir)
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "h1.out"), []byte("an older run"), 0o644)
	ev := func(target string, k fanout.EventKind, data string) {
		s.event(fanout.Event{Target: target, Kind: k, Data: []byte(data)})
	}
	ev("h1", fanout.EventStart, "")
	ev("../x", fanout.EventStart, "")
	ev("h1", fanout.EventStdout, "one\n")
	ev("h1", fanout.EventStderr, "oops\n")
	if b, _ := os.ReadFile(filepath.Join(dir, "h1.out")); string(b) != "an older run" {
		t.Errorf("h1.out changed before h1 ended: %q", b)
	}
	ev("h1", fanout.EventStdout, "two")
	ev("../x", fanout.EventStdout, "x")
	s.event(fanout.Event{Target: "h1", Kind: fanout.EventResult, Result: &fanout.Result{Target: "h1"}})
	s.event(fanout.Event{Target: "gone", Kind: fanout.EventResult, Result: &fanout.Result{Target: "gone"}})
	s.finish(nil)
	for name, want := range map[string]string{"h1.out": "one\ntwo", "h1.err": "oops\n", "_.._x.out": "x", "_.._x.err": ""} {
		if b, err := os.ReadFile(filepath.Join(dir, name)); err != nil || string(b) != want {
			t.Errorf("%s = %q, %v; want %q", name, b, err, want)
		}
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 4 || s.Err() != nil {
		t.Errorf("%d files in the outdir (temporary ones left?), err %v", len(entries), s.Err())
	}
}

// TestGatherSpillsPastItsMemory: past its memory budget the gather sink
// keeps new chunks in a temporary file that is already unlinked (nothing
// in the temporary directory, ever), still shares identical chunks (read
// back to compare), and prints every byte kept.
func TestGatherSpillsPastItsMemory(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	const size = 3<<20 + 12345
	texts := map[string][]byte{}
	for _, name := range []string{"h1", "h2", "h3", "h4"} {
		var b bytes.Buffer
		for i := 0; b.Len() < size; i++ {
			fmt.Fprintf(&b, "%s line %09d\n", name[:1]+map[string]string{"h1": "x", "h2": "y", "h3": "x", "h4": "z"}[name], i)
		}
		texts[name] = b.Bytes()[:size]
		texts[name][size-1] = '\n'
	}
	// h3 prints what h1 does: its chunks are found among the spilled ones.
	var out bytes.Buffer
	g := newGatherSink(IO{Out: &out})
	g.memCap = 1 << 20 // four chunks in memory, the rest on disk
	var results []*fanout.Result
	for _, name := range []string{"h1", "h2", "h3", "h4"} {
		d := texts[name]
		for len(d) > 0 {
			n := min(len(d), 40000)
			g.event(fanout.Event{Target: name, Kind: fanout.EventStdout, Data: d[:n]})
			d = d[n:]
		}
		results = append(results, &fanout.Result{Target: name, ExitCode: code(0)})
		if entries, _ := os.ReadDir(tmp); len(entries) != 0 {
			t.Fatalf("the spill file is visible in the temporary directory: %v", entries)
		}
	}
	if g.spill == nil || g.inMem > g.memCap {
		t.Fatalf("spill file %v, %d bytes of chunks in memory over a budget of %d", g.spill, g.inMem, g.memCap)
	}
	full := size / gatherChunk
	if want := int64(3*full-4) * gatherChunk; g.spillOff != want {
		t.Errorf("%d bytes spilled, want %d (three distinct outputs, four chunks in memory)", g.spillOff, want)
	}
	spill := g.spill
	g.finish(&fanout.Summary{Results: results})
	head := func(h string) string { return "---------------\n" + h + "\n---------------\n" }
	want := head("h[1,3] (2)") + string(texts["h1"]) + head("h2 (1)") + string(texts["h2"]) + head("h4 (1)") + string(texts["h4"])
	if out.String() != want {
		t.Errorf("gathered output differs from what the targets printed (%d bytes, want %d)", out.Len(), len(want))
	}
	if _, err := spill.Stat(); err == nil {
		t.Errorf("the spill file is still open after the output was printed")
	}
}

// TestGatherBigOutput: each target keeps at most maxGathered bytes, in
// chunks that identical outputs share; what is printed is the kept prefix
// and a note, and outputs that differ only past the cap still group apart.
func TestGatherBigOutput(t *testing.T) {
	const size = 20 << 20
	var lines bytes.Buffer
	for i := 0; lines.Len() < size; i++ {
		fmt.Fprintf(&lines, "line %09d of the output\n", i)
	}
	text := lines.Bytes()[:size]
	other := append([]byte(nil), text...)
	other[1000] = '!' // differs early
	late := append([]byte(nil), text...)
	late[size-10] = '!' // differs past the cap only
	outputs := map[string][]byte{"a1": text, "a2": text, "a3": text, "b1": other, "c1": late}
	var out bytes.Buffer
	g := newGatherSink(IO{Out: &out})
	var results []*fanout.Result
	for _, name := range []string{"a1", "a2", "a3", "b1", "c1"} {
		d := outputs[name]
		// Uneven event sizes, as frames arrive.
		for i, n := 0, 1; len(d) > 0; i++ {
			n = min(len(d), 1+(i*7919)%(96<<10))
			g.event(fanout.Event{Target: name, Kind: fanout.EventStdout, Data: d[:n]})
			d = d[n:]
		}
		results = append(results, &fanout.Result{Target: name, ExitCode: code(0)})
	}
	for name, o := range g.outs {
		held := len(o.tail) + len(o.chunks)*gatherChunk
		if held != maxGathered || !o.truncated {
			t.Errorf("%s keeps %d bytes (truncated %v), want the cap %d", name, held, o.truncated, maxGathered)
		}
	}
	distinct := 0
	for _, cs := range g.chunks {
		distinct += len(cs)
	}
	// a*, c1 share every chunk (c1 differs past the cap); b1 differs in its
	// first chunk only.
	if want := maxGathered/gatherChunk + 1; distinct != want {
		t.Errorf("%d distinct chunks kept, want %d", distinct, want)
	}
	g.finish(&fanout.Summary{Results: results})
	note := "[output truncated: more than 16 MiB]\n"
	head := func(h string) string { return "---------------\n" + h + "\n---------------\n" }
	want := head("a[1-3] (3)") + string(text[:maxGathered]) + "\n" + note +
		head("b1 (1)") + string(other[:maxGathered]) + "\n" + note +
		head("c1 (1)") + string(late[:maxGathered]) + "\n" + note
	if text[maxGathered-1] == '\n' {
		want = head("a[1-3] (3)") + string(text[:maxGathered]) + note +
			head("b1 (1)") + string(other[:maxGathered]) + note +
			head("c1 (1)") + string(late[:maxGathered]) + note
	}
	if out.String() != want {
		t.Errorf("gathered output differs from the kept prefixes (%d bytes, want %d)", out.Len(), len(want))
	}
}
