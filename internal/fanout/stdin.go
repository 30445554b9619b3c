package fanout

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
)

// Stdin streaming: one local reader feeds the stdin of every target's
// command. Reading waits for the slowest running command (backpressure):
// the reader stays at most stdinWindow chunks ahead of it. Targets that
// start later (a rolling run, a slow connection, more targets than the
// concurrency) replay what they missed from memory, which is bounded by
// MaxStdinReplay; past that a late target fails instead of getting half
// its input.

// stdinChunk is how much of stdin one exec.input carries.
const stdinChunk = 32 << 10

// stdinWindow is how many chunks the reader may run ahead of the slowest
// running command.
const stdinWindow = 4

// MaxStdinReplay bounds the stdin kept for targets that have not started.
const MaxStdinReplay = 64 << 20

// errStdinLost is a late target's failure when its stdin was not kept.
var errStdinLost = fmt.Errorf("stdin was more than %d MiB before this target started, more than rex keeps for targets that start late; run on fewer targets at once or send the data as a file (rex push)", MaxStdinReplay>>20)

// broadcast streams one reader to many subscribers.
type broadcast struct {
	r io.Reader

	mu      sync.Mutex
	changed chan struct{} // closed and replaced on every change
	chunks  [][]byte      // chunks[i] is chunk number base+i
	base    int
	kept    int // bytes in chunks
	eof     bool
	err     error // a read error other than EOF
	pending int   // targets that may still subscribe
	subs    map[*subscriber]bool
	lost    bool // a chunk a pending target needs was dropped
	reading bool

	onWait func() // test hook: the reader waits for a slow subscriber
}

func newBroadcast(r io.Reader, targets int) *broadcast {
	return &broadcast{r: r, pending: targets, subs: map[*subscriber]bool{}, changed: make(chan struct{})}
}

func (b *broadcast) notifyLocked() {
	close(b.changed)
	b.changed = make(chan struct{})
}

// subscriber is one target's position in the stream.
type subscriber struct {
	b   *broadcast
	pos int // the next chunk number
}

// subscribe registers a target whose command has started; its stream
// starts at the beginning.
func (b *broadcast) subscribe() (*subscriber, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.pending--
	if b.lost {
		b.trimLocked()
		b.notifyLocked()
		return nil, errStdinLost
	}
	s := &subscriber{b: b, pos: 0}
	b.subs[s] = true
	b.startLocked()
	b.notifyLocked()
	return s, nil
}

// skip tells the broadcast that a target will never subscribe.
func (b *broadcast) skip() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.pending--
	b.trimLocked()
	b.notifyLocked()
}

// close ends a subscription (the command ended).
func (s *subscriber) close() {
	b := s.b
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.subs, s)
	b.trimLocked()
	b.notifyLocked()
}

// next returns the subscriber's next chunk, io.EOF at the end of the
// stream, or the read error.
func (s *subscriber) next(ctx context.Context) ([]byte, error) {
	b := s.b
	for {
		b.mu.Lock()
		if i := s.pos - b.base; i < len(b.chunks) {
			c := b.chunks[i]
			s.pos++
			b.trimLocked()
			b.notifyLocked()
			b.mu.Unlock()
			return c, nil
		}
		if b.eof {
			err := b.err
			b.mu.Unlock()
			if err == nil {
				err = io.EOF
			}
			return nil, err
		}
		changed := b.changed
		b.mu.Unlock()
		select {
		case <-changed:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// startLocked starts the reader once the first command is there to read.
func (b *broadcast) startLocked() {
	if !b.reading {
		b.reading = true
		go b.read()
	}
}

// read copies the reader into chunks, waiting for the slowest subscriber.
// It stops when the reader ends or no target can want more.
func (b *broadcast) read() {
	for {
		b.mu.Lock()
		for {
			if len(b.subs) == 0 && b.pending == 0 {
				b.mu.Unlock()
				return // nobody left to read for
			}
			end := b.base + len(b.chunks)
			behind := false
			for s := range b.subs {
				if end-s.pos >= stdinWindow {
					behind = true
				}
			}
			if !behind && (len(b.subs) > 0 || b.kept < MaxStdinReplay) {
				break
			}
			changed := b.changed
			b.mu.Unlock()
			if b.onWait != nil {
				b.onWait()
			}
			<-changed
			b.mu.Lock()
		}
		b.mu.Unlock()

		// What one read gives goes out at once: input that comes a
		// little at a time (a pipe from a program still writing) is
		// streamed, not held until a whole chunk piled up.
		buf := make([]byte, stdinChunk)
		n, err := b.r.Read(buf)
		for n == 0 && err == nil {
			n, err = b.r.Read(buf)
		}
		b.mu.Lock()
		if n > 0 {
			chunk := buf[:n:n]
			if n < stdinChunk/2 {
				// A short read keeps only its bytes, not the whole buffer,
				// while late targets may still replay it.
				chunk = append([]byte(nil), buf[:n]...)
			}
			b.chunks = append(b.chunks, chunk)
			b.kept += n
		}
		if err != nil {
			b.eof = true
			if !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
				b.err = fmt.Errorf("read stdin: %w", err)
			}
		}
		b.trimLocked()
		b.notifyLocked()
		done := b.eof
		b.mu.Unlock()
		if done {
			return
		}
	}
}

// trimLocked drops the chunks nobody will read again: those every running
// command has read when no target is still to start; else the oldest
// ones once more than MaxStdinReplay is kept (the late targets then fail).
func (b *broadcast) trimLocked() {
	low := b.base + len(b.chunks)
	for s := range b.subs {
		low = min(low, s.pos)
	}
	if b.pending > 0 {
		for b.kept > MaxStdinReplay && len(b.chunks) > 0 && b.base < low {
			b.drop()
			b.lost = true
		}
		return
	}
	for b.base < low {
		b.drop()
	}
}

func (b *broadcast) drop() {
	b.kept -= len(b.chunks[0])
	b.chunks[0] = nil
	b.chunks = b.chunks[1:]
	b.base++
}
