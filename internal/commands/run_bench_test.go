package commands

import (
	"bytes"
	"fmt"
	"sync"
	"testing"

	"github.com/rexconsole/rex/internal/fanout"
)

// BenchmarkPrefixSink measures `rex run`'s printer on big output: 32
// targets at once, each handing it events of 64 KiB of 100-byte lines (what
// `fold -w 100` streams), printed with prefixes to a discarding writer.
func BenchmarkPrefixSink(b *testing.B) {
	const hosts = 32
	line := append(bytes.Repeat([]byte("a"), 99), '\n')
	data := bytes.Repeat(line, 64<<10/len(line))
	var targets []fanout.Target
	for i := range hosts {
		targets = append(targets, fanout.Target{Name: fmt.Sprintf("h%d", i+1)})
	}
	var out countingWriter
	p := newPrefixSink(IO{Out: &out, Lock: &sync.Mutex{}}, targets)
	b.SetBytes(int64(hosts * len(data)))
	b.ResetTimer()
	for range b.N {
		var wg sync.WaitGroup
		for _, t := range targets {
			wg.Add(1)
			go func() {
				defer wg.Done()
				p.event(fanout.Event{Target: t.Name, Kind: fanout.EventStdout, Data: data})
			}()
		}
		wg.Wait()
	}
	b.StopTimer()
	// "hN: " (padded to "h32"'s width) and the line: every byte printed.
	if want := int64(b.N) * hosts * int64(len(data)/len(line)) * int64(len("h10: ")+len(line)); int64(out) != want {
		b.Fatalf("printed %d bytes, want %d", out, want)
	}
}

type countingWriter int64

func (c *countingWriter) Write(p []byte) (int, error) {
	*c += countingWriter(len(p))
	return len(p), nil
}
