package server

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/charmbracelet/colorprofile"
	"github.com/muesli/cancelreader"
	"golang.org/x/sys/unix"
	"golang.org/x/term"
)

// terminalEnv are the variables that tell how a terminal draws; they go
// to the server with the attachment (the rest of the environment stays
// here).
var terminalEnv = []string{"TERM", "COLORTERM", "TERM_PROGRAM", "TERM_PROGRAM_VERSION", "NO_COLOR", "CLICOLOR_FORCE",
	"LANG", "LC_ALL", "LC_CTYPE", "WT_SESSION", "SSH_TTY", "TMUX", "KITTY_WINDOW_ID", "WEZTERM_PANE", "VTE_VERSION"}

// AttachTerminal attaches the terminal (in, out) to the console: raw
// mode, keystrokes out, frames in, window sizes as they change, until the
// server detaches it. The terminal is restored before it returns.
func AttachTerminal(ctx context.Context, c *Client, in, out *os.File) (Detach, error) {
	fd := int(in.Fd())
	if !term.IsTerminal(fd) {
		return Detach{}, fmt.Errorf("the console needs a terminal: standard input is not one (rex run, rex ls and the other verbs work without)")
	}
	state, err := term.MakeRaw(fd)
	if err != nil {
		return Detach{}, fmt.Errorf("put the terminal in raw mode: %w", err)
	}
	defer term.Restore(fd, state)
	// The server's renderer writes a newline for "next line, first
	// column", as for a terminal that turns \n into \r\n (it has no tty
	// of its own to set): keep that output processing on.
	if t, err := unix.IoctlGetTermios(fd, ioctlGetTermios); err == nil {
		t.Oflag |= unix.OPOST | unix.ONLCR
		unix.IoctlSetTermios(fd, ioctlSetTermios, t)
	}

	winch := make(chan os.Signal, 1)
	signal.Notify(winch, syscall.SIGWINCH)
	defer func() {
		signal.Stop(winch)
		close(winch) // no more sends after Stop: ends the goroutine below
	}()
	resized := make(chan struct{}, 1)
	go func() {
		for range winch {
			select {
			case resized <- struct{}{}:
			default:
			}
		}
	}()
	cr, err := cancelreader.NewReader(in)
	if err != nil {
		return Detach{}, fmt.Errorf("read the terminal: %w", err)
	}
	// Attach cancels the reader and returns once it is gone: closing it
	// under a read in flight would leave that read waiting on the
	// terminal for good, to take the next bytes it sends (the reply to a
	// colour query, the shell's first keystrokes).
	defer cr.Close()

	var env []string
	for _, k := range terminalEnv {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	size := func() (int, int) {
		w, h, err := term.GetSize(int(out.Fd()))
		if err != nil || w <= 0 || h <= 0 {
			return 80, 24
		}
		return w, h
	}
	profile := colorprofile.Detect(out, os.Environ())
	dir, _ := os.Getwd() // none: the server's own stays in force
	d, err := c.Attach(ctx, Window{In: cr, StopIn: func() { cr.Cancel() }, Out: out, Size: size, Resized: resized, Env: env, Profile: profile.String(), Dir: dir})
	if err != nil {
		// The server went away mid-frame (killed): nobody put the
		// terminal back as it was, so this client does.
		out.WriteString(resetTerminal)
	}
	return d, err
}

// resetTerminal undoes what a console's frames may have left on: the
// alternate screen, a hidden cursor, mouse reports, bracketed paste, the
// kitty keyboard protocol, colours.
const resetTerminal = "\x1b[?1049l\x1b[?25h\x1b[?1000l\x1b[?1002l\x1b[?1003l\x1b[?1006l\x1b[?2004l\x1b[<u\x1b[m\r\n"
