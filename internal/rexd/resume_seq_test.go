package rexd

import (
	"testing"

	"github.com/rexconsole/rex/internal/protocol"
)

// TestResumeSeqNotWrittenIsAhead: a resume's last_seq counts as what the
// client has, and the events up to it are dropped as acknowledged. Events
// numbered but never written to any connection (the sender was blocked on
// a slow client when the connection dropped) cannot be the client's: a
// last_seq among them is refused as seq_ahead, as session.ack is clamped
// to what was written, rather than losing them.
func TestResumeSeqNotWrittenIsAhead(t *testing.T) {
	l := newEventLog(1 << 20)
	for range 3 {
		l.append("p_1", 2, func(seq uint64) []byte { return []byte("{}\n") })
	}
	old := &conn{}
	l.attach(old) // its sender never wrote a line
	l.detach(old) // the connection dropped
	_, perr := l.resume(&conn{}, 3, "s_1-00")
	if perr == nil {
		t.Fatal("a resume from event 3, never written, was accepted: events 1 to 3 are dropped unseen")
	}
	var r protocol.ResumeRefusal
	jsonUnmarshal(perr.Data, &r)
	if r.Reason != protocol.ResumeAheadSeq || r.NextSeq != 1 {
		t.Fatalf("refusal %+v (%s), want seq_ahead with next_seq 1", r, perr.Message)
	}
	if _, perr := l.resume(&conn{}, 0, "s_1-00"); perr != nil {
		t.Fatalf("the resume from 0: %s", perr.Message)
	}
}
