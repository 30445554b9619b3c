package engine

import (
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/rexconsole/rex/internal/fanout"
)

// Transcript is one host's history on one target: every command run on
// that target, in the order they were typed, each as a header line
// ("❯ free -m · 14:02:11"), the host's output and a status line once it
// ended — so that the pane reads like that host's terminal history.
//
// A command's output stays in its task's run (a reopened task shows the
// same lines); the transcript keeps the commands it shows within limit
// lines by dropping its oldest ones, and says so at its top.
type Transcript struct {
	Spec string // the target the commands ran on
	Host string

	mu      sync.Mutex
	limit   int
	entries []*entry
	removed int64  // lines of entries dropped whole
	version uint64 // bumped when entries come or go
}

// entry is one command in a transcript.
type entry struct {
	run    *Run
	head   Line
	status Line // made once the run has ended
	ended  bool
}

// NewTranscript returns an empty transcript kept within limit lines.
func NewTranscript(spec, host string, limit int) *Transcript {
	if limit <= 0 {
		limit = DefaultScrollback
	}
	return &Transcript{Spec: spec, Host: host, limit: limit}
}

// Add appends run (this host's part of a new command), headed by its
// command and start time.
func (tr *Transcript) Add(run *Run) {
	text := "❯ " + run.Task.Command + " · " + run.Task.Started.Format(time.TimeOnly)
	e := &entry{run: run, head: Line{Text: text, Width: TextWidth(text), Kind: Command}}
	run.mu.Lock()
	run.tr = tr
	run.mu.Unlock()
	tr.mu.Lock()
	tr.entries = append(tr.entries, e)
	tr.version++
	tr.mu.Unlock()
	tr.Trim()
}

// Runs returns the transcript's commands on its host, oldest first.
func (tr *Transcript) Runs() []*Run {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	out := make([]*Run, len(tr.entries))
	for i, e := range tr.entries {
		out[i] = e.run
	}
	return out
}

// Latest is the newest command's run, or nil.
func (tr *Transcript) Latest() *Run {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	if len(tr.entries) == 0 {
		return nil
	}
	return tr.entries[len(tr.entries)-1].run
}

// entryLines is how many lines an entry shows: header, output (with its
// marker), status.
func entryLines(e *entry) int {
	n := 1 + e.run.Buf.Read().lenDone()
	if e.ended {
		n++
	}
	return n
}

// lenDone is Len, then Done: for counting without holding the lock.
func (r BufferReader) lenDone() int {
	defer r.Done()
	return r.Len()
}

// Trim keeps the transcript within its limit: whole commands go first,
// oldest first, then lines at the top of the oldest that ended. Commands
// still running are passed over, not cut (each buffer bounds itself): one
// left running (a tail -f) must not pin every later command's output. The
// newest command always stays.
func (tr *Transcript) Trim() {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	total := 0
	for _, e := range tr.entries {
		total += entryLines(e)
	}
	for i := 0; total > tr.limit && i < len(tr.entries)-1; {
		e := tr.entries[i]
		if !e.ended {
			i++
			continue
		}
		n := entryLines(e)
		if total-n < tr.limit {
			// Dropping the whole command would leave room: cut lines
			// off its output instead.
			e.run.Buf.DropFront(total - tr.limit)
			break
		}
		rd := e.run.Buf.Read()
		tr.removed += int64(n) + rd.Dropped()
		rd.Done()
		tr.entries = slices.Delete(tr.entries, i, i+1)
		total -= n
		tr.version++
	}
}

// ended closes run's entry with its status line, then trims.
func (tr *Transcript) ended(run *Run, res *fanout.Result) {
	text, ok := ResultText(res)
	kind, mark := StatusFail, "✗ "
	if ok {
		kind, mark = StatusOK, "✓ "
	}
	tr.mu.Lock()
	for _, e := range tr.entries {
		if e.run == run {
			e.status = Line{Text: mark + text, Width: TextWidth(mark + text), Kind: kind}
			e.ended = true
		}
	}
	tr.version++
	tr.mu.Unlock()
	tr.Trim()
}

// Read locks the transcript and the buffers of its commands for reading;
// call Done on the reader when finished.
func (tr *Transcript) Read() *TranscriptReader {
	tr.mu.Lock()
	r := &TranscriptReader{tr: tr, readers: make([]BufferReader, len(tr.entries))}
	for i, e := range tr.entries {
		r.readers[i] = e.run.Buf.Read()
	}
	r.index()
	return r
}

// TranscriptReader reads a locked transcript as one run of lines: a
// marker when commands were dropped, then per command its header, its
// output and its status. Line pointers are valid until Done.
type TranscriptReader struct {
	tr      *Transcript
	readers []BufferReader
	starts  []int // the first line of each entry
	total   int
	marker  Line
}

func (r *TranscriptReader) index() {
	n := 0
	if r.tr.removed > 0 {
		text := fmt.Sprintf("… %s earlier %s dropped", groupDigits(r.tr.removed), pluralWord(r.tr.removed, "line", "lines"))
		r.marker = Line{Text: text, Width: TextWidth(text), Kind: Marker}
		n++
	}
	r.starts = make([]int, len(r.readers))
	for i, rd := range r.readers {
		r.starts[i] = n
		n += 1 + rd.Len()
		if r.tr.entries[i].ended {
			n++
		}
	}
	r.total = n
}

// Len is the number of lines.
func (r *TranscriptReader) Len() int { return r.total }

// Line returns line i.
func (r *TranscriptReader) Line(i int) *Line {
	if r.tr.removed > 0 && i == 0 {
		return &r.marker
	}
	// The entry holding line i: the last that starts at or before it.
	lo, hi := 0, len(r.starts)-1
	for lo < hi {
		mid := (lo + hi + 1) / 2
		if r.starts[mid] <= i {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	if lo < 0 || lo >= len(r.starts) {
		return &Line{}
	}
	e, rd := r.tr.entries[lo], r.readers[lo]
	j := i - r.starts[lo]
	switch {
	case j == 0:
		return &e.head
	case j-1 < rd.Len():
		return rd.Line(j - 1)
	case e.ended:
		return &e.status
	}
	return &Line{}
}

// Dropped is how many lines went before line 0.
func (r *TranscriptReader) Dropped() int64 {
	n := r.tr.removed
	if n > 0 {
		n-- // the marker takes a line
	}
	for _, rd := range r.readers {
		n += rd.Dropped()
	}
	return n
}

// Version changes whenever the lines do.
func (r *TranscriptReader) Version() uint64 {
	v := r.tr.version
	for i, rd := range r.readers {
		v += rd.Version()
		if r.tr.entries[i].ended {
			v += 1 << 40
		}
	}
	return v
}

// Done unlocks the buffers and the transcript.
func (r *TranscriptReader) Done() {
	for _, rd := range r.readers {
		rd.Done()
	}
	r.tr.mu.Unlock()
}

// Clear forgets the commands that ended and empties the output of those
// still running, without a marker: the operator asked for it.
func (tr *Transcript) Clear() {
	tr.mu.Lock()
	kept := tr.entries[:0]
	for _, e := range tr.entries {
		if !e.ended {
			e.run.Buf.Clear()
			kept = append(kept, e)
		}
	}
	for i := len(kept); i < len(tr.entries); i++ {
		tr.entries[i] = nil
	}
	tr.entries = kept
	tr.removed = 0
	tr.version++
	tr.mu.Unlock()
}
