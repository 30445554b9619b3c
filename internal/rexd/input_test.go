package rexd

import (
	"io"
	"testing"

	"github.com/rexconsole/rex/internal/protocol"
)

type discard struct{ io.Writer }

func (discard) Close() error { return nil }

// A process's input queue is stopped just before the process is marked
// ended (after its exit event went out); input arriving in between is late
// input to an ended process, not a full queue.
func TestInputAfterStopIsProcessNotFound(t *testing.T) {
	proc := &process{id: "p_1", done: make(chan struct{}), input: newInputQueue(discard{io.Discard})}
	proc.input.stop()
	_, e := (&conn{}).queueInput(&request{}, proc, "late", "", false)
	if e == nil || e.Code != protocol.CodeProcessNotFound {
		t.Fatalf("input after the queue stopped: got %v, want process_not_found (-32005)", e)
	}
}

// Once a process's exit event is about to go out, every view of it says it
// has ended: a client that saw exec.exit and then asks session.info or
// sends input must not find it running.
func TestProcessEndedFromItsExitEvent(t *testing.T) {
	p := &process{id: "p_1", done: make(chan struct{})}
	s := &session{srv: &Server{}}
	s.processEnding(p)
	if !p.ended() {
		t.Fatal("a process whose exit event is being sent still reports running")
	}
}
