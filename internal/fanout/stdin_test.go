package fanout

import (
	"bytes"
	"context"
	"errors"
	"io"
	"sync"
	"testing"
)

// countingReader is an endless reader that counts what was read.
type countingReader struct {
	mu sync.Mutex
	n  int
}

func (r *countingReader) Read(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.n += len(p)
	return len(p), nil
}

func (r *countingReader) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.n
}

// TestBroadcastBackpressure: with one subscriber that reads nothing, the
// reader stops a bounded distance ahead, however fast the other reads.
func TestBroadcastBackpressure(t *testing.T) {
	r := &countingReader{}
	b := newBroadcast(r, 2)
	waiting := make(chan struct{}, 1)
	b.onWait = func() {
		select {
		case waiting <- struct{}{}:
		default:
		}
	}
	fast, err := b.subscribe()
	if err != nil {
		t.Fatal(err)
	}
	slow, err := b.subscribe()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	fastDone := make(chan int)
	go func() {
		n := 0
		for {
			c, err := fast.next(ctx)
			if err != nil {
				fastDone <- n
				return
			}
			n += len(c)
		}
	}()
	<-waiting // the reader is held back by slow
	if got, max := r.count(), (stdinWindow+1)*stdinChunk; got > max {
		t.Fatalf("read %d bytes ahead of a subscriber that read nothing (bound %d)", got, max)
	}
	// Once slow leaves, reading goes on.
	before := r.count()
	slow.close()
	for r.count() <= before+10*stdinChunk {
		<-waiting
	}
	cancel()
	<-fastDone
	fast.close()
}

// TestBroadcastReplay: a subscriber that comes late gets everything from
// the start; EOF reaches all; nothing is kept once everyone has read it.
func TestBroadcastReplay(t *testing.T) {
	data := bytes.Repeat([]byte("x"), 10*stdinChunk+7)
	b := newBroadcast(bytes.NewReader(data), 2)
	readAll := func(s *subscriber) []byte {
		var out []byte
		for {
			c, err := s.next(context.Background())
			if errors.Is(err, io.EOF) {
				return out
			}
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, c...)
		}
	}
	first, _ := b.subscribe()
	if got := readAll(first); !bytes.Equal(got, data) {
		t.Fatalf("first read %d bytes", len(got))
	}
	late, err := b.subscribe()
	if err != nil {
		t.Fatal(err)
	}
	if got := readAll(late); !bytes.Equal(got, data) {
		t.Fatalf("late read %d bytes", len(got))
	}
	first.close()
	late.close()
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.kept != 0 || len(b.chunks) != 0 {
		t.Errorf("%d bytes kept after everyone read them", b.kept)
	}
}

// TestBroadcastLostReplay: a target that starts after more than
// MaxStdinReplay went by fails rather than getting part of its input.
func TestBroadcastLostReplay(t *testing.T) {
	b := newBroadcast(io.LimitReader(&countingReader{}, MaxStdinReplay+4*stdinChunk), 2)
	first, _ := b.subscribe()
	for {
		if _, err := first.next(context.Background()); err != nil {
			break
		}
	}
	if _, err := b.subscribe(); !errors.Is(err, errStdinLost) {
		t.Fatalf("late subscriber: %v", err)
	}
	first.close()
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.kept != 0 {
		t.Errorf("%d bytes kept after the last target", b.kept)
	}
}
