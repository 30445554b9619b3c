package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestAttachLocalE2E drives `rex attach local` in a real terminal (tmux):
// a command, vi and back, a window resize, and ctrl+] back to the local
// shell with the terminal as it was.
func TestAttachLocalE2E(t *testing.T) {
	s := newTmux(t, 100, 30)
	s.waitText("LOCAL$")
	before := filepath.Join(s.home, "stty.before")
	after := filepath.Join(s.home, "stty.after")
	s.line("stty -g > " + before + "; clear")
	s.line("rex attach local")
	// The remote side is a login shell; give it a prompt we can see.
	s.line("export PS1='REMOTE> '; clear")
	s.waitText("REMOTE>")

	s.line("echo $((6*7))")
	s.waitFor("42 on a line of its own", func(scr string) bool { return hasLine(scr, "42") })

	s.line("vi")
	s.waitFor("vi's empty buffer", func(scr string) bool { return strings.Count(scr, "\n~") >= 5 })
	s.send("Escape")
	s.line(":q!")
	scr := s.waitFor("the shell screen back after vi", func(scr string) bool {
		return strings.Count(scr, "\n~") == 0 && hasLine(scr, "42")
	})
	if !strings.Contains(scr, "REMOTE>") {
		t.Fatalf("screen after vi:\n%s", scr)
	}

	s.tmux("resize-window", "-t", "main", "-x", "120", "-y", "40")
	s.line("stty size")
	s.waitFor("the new size", func(scr string) bool { return hasLine(scr, "40 120") })

	s.send("C-]")
	scr = s.waitFor("the local prompt after ctrl+]", func(scr string) bool {
		lines := strings.Split(strings.TrimRight(scr, "\n "), "\n")
		return strings.HasPrefix(strings.TrimSpace(lines[len(lines)-1]), "LOCAL$")
	})
	// ctrl+] ended the remote shell: rex says so, since "detach" means
	// a session that lives on to tmux and screen users.
	if !strings.Contains(scr, "rex: ctrl+] closed the terminal on local and ended what ran in it") {
		t.Errorf("no word that ctrl+] ended the remote terminal:\n%s", scr)
	}
	s.line("stty -g > " + after + "; cmp -s " + before + " " + after + " && echo TTY-RESTORED")
	s.waitFor("the terminal settings restored", func(scr string) bool { return hasLine(scr, "TTY-RESTORED") })

	// The exit status is the remote program's.
	s.line("rex attach local -- sh -c 'exit 7'; echo status=$?")
	s.waitFor("status=7", func(scr string) bool { return hasLine(scr, "status=7") })
	b1, _ := os.ReadFile(before)
	if len(b1) == 0 {
		t.Fatal("stty -g wrote nothing")
	}
}

// hasLine reports whether some screen line, trimmed, equals want.
func hasLine(screen, want string) bool {
	for _, l := range strings.Split(screen, "\n") {
		if strings.TrimSpace(l) == want {
			return true
		}
	}
	return false
}
