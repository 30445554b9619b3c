package rexd

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rexconsole/rex/internal/protocol"
)

// TestAdmittedRequestBytesAreBounded: the requests a connection runs on
// their own hold at most maxOutstandingBytes between them, not only
// maxOutstanding of them. With fs.write requests of 15 MiB each held in
// their handlers, the reader admits four (60 MiB), then waits for bytes
// before the fifth: the session.info sent after it is not answered while
// the four are held (nothing is answered at all). Once they are let go,
// all five writes and the session.info are answered and the files are
// written whole: back-pressure, nothing refused.
func TestAdmittedRequestBytesAreBounded(t *testing.T) {
	const (
		writes = 5
		size   = 15 << 20
	)
	admitted := maxOutstandingBytes / (size + 1024) // the writes that fit (each line is a little over size)
	if admitted >= writes || admitted < 1 {
		t.Fatalf("the test needs the budget (%d bytes) to hold between 1 and %d of its writes, not %d", maxOutstandingBytes, writes-1, admitted)
	}
	entered := make(chan struct{}, writes)
	release := make(chan struct{})
	waiting := make(chan struct{}, 1)
	ls := serveLines(t, func(ctx context.Context, method string) {
		switch method {
		case admitWaitBytes:
			select {
			case waiting <- struct{}{}:
			default:
			}
		case protocol.MethodFSWrite:
			entered <- struct{}{}
			select { // held until the test lets go (or the connection ends)
			case <-release:
			case <-ctx.Done():
			}
		}
	})
	defer func() {
		select {
		case <-release:
		default:
			close(release) // a failed test must not leave handlers held
		}
	}()

	var open protocol.SessionOpenResult
	m := ls.call(protocol.MethodSessionOpen, protocol.SessionOpenParams{ClientName: "test"})
	if m.Error != nil || json.Unmarshal(m.Result, &open) != nil {
		t.Fatalf("session.open: %v", m.Error)
	}

	// The lines go from a goroutine: once rexd stops reading, the pipe
	// holds the writer.
	content := strings.Repeat("a", size)
	var lines [][]byte
	for i := range writes {
		req, err := protocol.NewRequest(int64(100+i), protocol.MethodFSWrite,
			protocol.FSWriteParams{SessionID: open.SessionID, Path: fmt.Sprintf("f%d", i), Content: content})
		if err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal(req)
		lines = append(lines, append(b, '\n'))
	}
	req, _ := protocol.NewRequest(200, protocol.MethodSessionInfo, protocol.SessionRef{SessionID: open.SessionID})
	b, _ := json.Marshal(req)
	lines = append(lines, append(b, '\n'))
	sent := make(chan error, 1)
	go func() {
		for _, l := range lines {
			if _, err := ls.in.Write(l); err != nil {
				sent <- err
				return
			}
		}
		sent <- nil
	}()

	// A bound for a stalled test, not a speed goal.
	stall := time.NewTimer(60 * time.Second)
	defer stall.Stop()
	select {
	case <-waiting:
	case m := <-ls.msgs:
		t.Fatalf("request %s was answered while every fs.write was held: rexd admitted more than %d bytes of requests", m.ID, maxOutstandingBytes)
	case <-stall.C:
		t.Fatal("the reader never waited for bytes of held requests to be given back")
	}
	for i := range admitted {
		select {
		case <-entered:
		case <-stall.C:
			t.Fatalf("only %d of the %d admitted fs.write requests reached their handler", i, admitted)
		}
	}
	// The reader waits and every admitted request is held: nothing can
	// have been answered or have entered since.
	select {
	case m := <-ls.msgs:
		t.Fatalf("request %s was answered while the reader waited for bytes", m.ID)
	case <-entered:
		t.Fatalf("more than %d fs.write requests of %d bytes were admitted", admitted, size)
	default:
	}

	close(release)
	got := map[string]bool{}
	for range writes + 1 {
		select {
		case m := <-ls.msgs:
			if m.Error != nil {
				t.Errorf("request %s: %v", m.ID, m.Error)
			}
			got[string(m.ID)] = true
		case <-stall.C:
			t.Fatalf("after the held requests were let go, only these were answered: %v", got)
		}
	}
	if !got["200"] {
		t.Errorf("session.info was not answered; answers: %v", got)
	}
	if err := <-sent; err != nil {
		t.Fatalf("write the requests: %v", err)
	}
	for i := range writes {
		fi, err := os.Stat(filepath.Join(ls.root, fmt.Sprintf("f%d", i)))
		if err != nil || fi.Size() != size {
			t.Errorf("f%d after its fs.write: %v, %v", i, fi, err)
		}
	}
}

// TestByteBudgetAdmitsALargeRequestAlone: what fits is taken; a request
// larger than what is free waits, unless nothing is held, when it is taken
// alone (even past max), so that no single request can be refused.
func TestByteBudgetAdmitsALargeRequestAlone(t *testing.T) {
	tests := []struct {
		name string
		held []int64 // taken first, in order
		n    int64
		want bool
	}{
		{"fits in an empty budget", nil, 10, true},
		{"fills it exactly", []int64{60}, 40, true},
		{"one byte past what is free", []int64{60}, 41, false},
		{"larger than max, nothing held", nil, 250, true},
		{"larger than max, something held", []int64{1}, 250, false},
		{"anything after one larger than max", []int64{250}, 1, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := &byteBudget{max: 100}
			for _, h := range tt.held {
				if !b.tryTake(h) {
					t.Fatalf("setup: could not take %d", h)
				}
			}
			if got := b.tryTake(tt.n); got != tt.want {
				t.Fatalf("tryTake(%d) with %v held = %v, want %v", tt.n, tt.held, got, tt.want)
			}
		})
	}
}

// TestByteBudgetWaiterTakesOnceGivenBack: a take that does not fit waits
// until bytes are given back, then takes them; a cancelled one gives up
// and takes nothing.
func TestByteBudgetWaiterTakesOnceGivenBack(t *testing.T) {
	b := &byteBudget{max: 100}
	b.tryTake(80)
	took := make(chan bool, 1)
	go func() { took <- b.take(context.Background(), 50) }()
	b.give(80) // whether or not it waits yet, it takes once these are back
	if !<-took {
		t.Fatal("take gave up with its context still live")
	}
	if b.tryTake(51) {
		t.Fatal("the waiter's 50 bytes were not counted")
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if b.take(ctx, 60) {
		t.Fatal("a cancelled take took bytes that are not free")
	}
	b.give(50)
	if !b.tryTake(100) {
		t.Fatal("bytes held after every take was given back")
	}
}
