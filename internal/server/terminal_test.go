package server

import (
	"bufio"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/creack/pty"
)

// TestAttachTerminalHandsTheTerminalBack attaches a real terminal to a
// server and detaches it, again and again: each time, the bytes the
// terminal sends next reach whoever reads it after rex. A reader of rex's
// left waiting (two times in three before Attach waited for it) would take
// them: the reply to a colour query, the shell's first keystrokes.
func TestAttachTerminalHandsTheTerminalBack(t *testing.T) {
	serve(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	master, tty, err := pty.Open()
	if err != nil {
		t.Fatal(err)
	}
	defer master.Close()
	defer tty.Close()
	pty.Setsize(master, &pty.Winsize{Cols: 100, Rows: 30})
	screen := bufio.NewReader(master)
	// readScreen reads the terminal's screen up to a line holding want.
	readScreen := func(want string) {
		t.Helper()
		for {
			line, err := screen.ReadString('\n')
			if err != nil {
				t.Fatalf("waiting for %q on the screen: %v", want, err)
			}
			if strings.Contains(line, want) {
				return
			}
		}
	}
	for i := range 10 {
		c, err := Dial(ctx, "test")
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() {
			_, err := AttachTerminal(ctx, c, tty, tty)
			done <- err
		}()
		readScreen("hello 100x30")
		master.WriteString("detach\n")
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("attachment %d: %v", i, err)
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("attachment %d never ended: the detach typed never reached it (a reader of an earlier attachment took it?)", i)
		}
		c.Close()
		// The terminal is back in its mode: a line typed now is read by
		// the next reader, here the test.
		got := make(chan string, 1)
		go func() {
			b := make([]byte, 64)
			n, _ := tty.Read(b)
			got <- string(b[:n])
		}()
		line := "after-" + string(rune('a'+i)) + "\n"
		master.WriteString(line)
		select {
		case s := <-got:
			if s != line {
				t.Fatalf("after attachment %d the next reader got %q, want %q", i, s, line)
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("after attachment %d the line typed next never reached the next reader: a reader of the attachment took it", i)
		}
	}
}
