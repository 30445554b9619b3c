package fanout

import (
	"context"
	"io"
	"testing"
	"time"
)

// TestBroadcastStreamsPartialInput: stdin that comes a little at a time
// (`tail -f log | rex run web 'grep ERR'`, a program driving a remote one
// line by line) reaches the commands as it comes, not once 32 KiB have
// piled up or the input ended.
func TestBroadcastStreamsPartialInput(t *testing.T) {
	pr, pw := io.Pipe()
	defer pw.Close()
	b := newBroadcast(pr, 1)
	sub, err := b.subscribe()
	if err != nil {
		t.Fatal(err)
	}
	defer sub.close()
	go pw.Write([]byte("ping\n"))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	c, err := sub.next(ctx)
	if err != nil {
		t.Fatalf("a line of stdin did not reach the command within 2 s (the writer keeps the pipe open): %v", err)
	}
	if string(c) != "ping\n" {
		t.Fatalf("got %q, want %q", c, "ping\n")
	}
}
