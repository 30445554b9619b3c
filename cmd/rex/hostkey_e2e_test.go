package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/rexconsole/rex/internal/sshtest"
)

// withSSHConfig puts lines before the fleet's ssh_config (OpenSSH takes
// the first value of each key).
func (f *sshFleet) withSSHConfig(t *testing.T, lines string) {
	t.Helper()
	p := filepath.Join(f.home, ".ssh", "config")
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, append([]byte(lines), b...), 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestHostKeysAsOpenSSHUsersExpect: a key recorded for the first time is
// announced on one line; StrictHostKeyChecking yes refuses an unknown host
// with the line to add; UserKnownHostsFile /dev/null warns once.
func TestHostKeysAsOpenSSHUsersExpect(t *testing.T) {
	f := newSSHFleet(t, 2, false)
	known := filepath.Join(f.home, ".ssh", "known_hosts")
	os.Remove(known)
	ed25519 := func(i int) ssh.PublicKey {
		for _, k := range f.hosts[i].HostKeys {
			if k.Type() == ssh.KeyAlgoED25519 {
				return k
			}
		}
		t.Fatal("no ed25519 host key")
		return nil
	}

	t.Run("yes refuses", func(t *testing.T) {
		f.withSSHConfig(t, "Host *\n    StrictHostKeyChecking yes\n")
		defer f.withoutFirstLines(t, 2)
		out, errOut, code := f.run("run", "h1", "--", "touch", "ran")
		if code != 255 || out != "" {
			t.Errorf("exit %d, stdout %q", code, out)
		}
		wantLine := fmt.Sprintf("[127.0.0.1]:%d ssh-ed25519 ", f.hosts[0].Port)
		if !strings.Contains(errOut, "StrictHostKeyChecking is yes") || !strings.Contains(errOut, "add this line to "+known+": "+wantLine) {
			t.Errorf("stderr:\n%s\nwant the known_hosts line %q…", errOut, wantLine)
		}
		if _, err := os.Stat(filepath.Join(f.hostHome("h1"), "ran")); err == nil {
			t.Error("the command ran on a host refused for its key")
		}
		if _, err := os.Stat(known); err == nil {
			t.Error("known_hosts was written")
		}
	})

	t.Run("new key announced", func(t *testing.T) {
		_, errOut, code := f.run("run", "h1,h2", "--", "true")
		if code != 0 {
			t.Fatalf("exit %d\n%s", code, errOut)
		}
		for i, h := range []string{"h1", "h2"} {
			want := fmt.Sprintf("added %s (127.0.0.1:%d) ED25519 %s to ~/.ssh/known_hosts\n", h, f.hosts[i].Port, ssh.FingerprintSHA256(ed25519(i)))
			if strings.Count(errOut, want) != 1 {
				t.Errorf("stderr lacks %q once:\n%s", want, errOut)
			}
		}
		_, errOut, _ = f.run("run", "h1,h2", "--", "true")
		if strings.Contains(errOut, "added") {
			t.Errorf("a known key announced again:\n%s", errOut)
		}
	})

	t.Run("dev null warns once", func(t *testing.T) {
		f.withSSHConfig(t, "Host *\n    UserKnownHostsFile /dev/null\n")
		defer f.withoutFirstLines(t, 2)
		_, errOut, code := f.run("run", "h1,h2", "--", "true")
		if code != 0 || strings.Count(errOut, "UserKnownHostsFile is /dev/null") != 1 || strings.Contains(errOut, "added") {
			t.Errorf("exit %d, stderr:\n%s", code, errOut)
		}
	})
}

// withoutFirstLines drops the first n lines of the fleet's ssh_config.
func (f *sshFleet) withoutFirstLines(t *testing.T, n int) {
	p := filepath.Join(f.home, ".ssh", "config")
	b, _ := os.ReadFile(p)
	lines := strings.SplitAfterN(string(b), "\n", n+1)
	os.WriteFile(p, []byte(lines[len(lines)-1]), 0o600)
}

// TestHostKeyAsk: StrictHostKeyChecking ask asks on the terminal, as
// OpenSSH does; yes records the key and runs, no refuses; the key's
// fingerprint pasted is a yes, another key's is asked again.
func TestHostKeyAsk(t *testing.T) {
	f := newSSHFleet(t, 3, false)
	known := filepath.Join(f.home, ".ssh", "known_hosts")
	os.Remove(known)
	f.withSSHConfig(t, "Host *\n    StrictHostKeyChecking ask\n")
	s := newTmux(t, 200, 40)
	s.line("export HOME=" + f.home + " XDG_CONFIG_HOME= XDG_CACHE_HOME= XDG_STATE_HOME=")
	s.line("clear; rex run h1 -- echo answered; echo status=$?")
	waitScreen(s, "the question", func(scr string) bool {
		return strings.Contains(scr, "Are you sure you want to continue connecting (yes/no/[fingerprint])?")
	})
	scr := s.screen()
	if !strings.Contains(scr, fmt.Sprintf("The authenticity of host 'h1 (127.0.0.1:%d)' can't be established.", f.hosts[0].Port)) ||
		!strings.Contains(scr, "ED25519 key fingerprint is SHA256:") {
		t.Errorf("the question:\n%s", scr)
	}
	s.line("yes")
	waitScreen(s, "the run", func(scr string) bool { return hasLine(scr, "status=0") })
	scr = s.screen()
	if !strings.Contains(scr, "h1: answered") || !strings.Contains(scr, "added h1 (127.0.0.1:") {
		t.Errorf("after yes:\n%s", scr)
	}
	if b, _ := os.ReadFile(known); !strings.Contains(string(b), fmt.Sprintf("[127.0.0.1]:%d", f.hosts[0].Port)) {
		t.Errorf("known_hosts after yes: %q", b)
	}

	s.line("clear; echo second-run; rex run h2 -- touch ran; echo status=$?")
	// The first run's question may still be on the screen until clear.
	waitScreen(s, "the question", func(scr string) bool {
		i := strings.Index(scr, "second-run")
		return i >= 0 && strings.Contains(scr[i:], "(yes/no/[fingerprint])?")
	})
	s.line("no")
	waitScreen(s, "the refusal", func(scr string) bool { return hasLine(scr, "status=255") })
	if scr := s.screen(); !strings.Contains(scr, "was not accepted") {
		t.Errorf("after no:\n%s", scr)
	}
	if _, err := os.Stat(filepath.Join(f.hostHome("h2"), "ran")); err == nil {
		t.Error("the command ran after the key was refused")
	}

	fingerprint := func(i int) string {
		for _, k := range f.hosts[i].HostKeys {
			if k.Type() == ssh.KeyAlgoED25519 {
				return ssh.FingerprintSHA256(k)
			}
		}
		t.Fatal("no ed25519 host key")
		return ""
	}
	s.line("clear; echo third-run; rex run h3 -- echo pasted; echo status=$?")
	waitScreen(s, "the question", func(scr string) bool {
		i := strings.Index(scr, "third-run")
		return i >= 0 && strings.Contains(scr[i:], "(yes/no/[fingerprint])?")
	})
	s.line(fingerprint(1)) // h2's: not this key
	waitScreen(s, "the question again", func(scr string) bool {
		return strings.Contains(scr, "Please type 'yes', 'no' or the fingerprint:")
	})
	s.line(fingerprint(2))
	waitScreen(s, "the run", func(scr string) bool { return hasLine(scr, "status=0") })
	if scr := s.screen(); !strings.Contains(scr, "h3: pasted") {
		t.Errorf("after the fingerprint:\n%s", scr)
	}
}

// waitScreen is tmuxSession.waitFor with room for a loaded machine: a
// first connection bootstraps rexd.
func waitScreen(s *tmuxSession, what string, cond func(string) bool) {
	s.t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	var scr string
	for time.Now().Before(deadline) {
		if scr = s.screen(); cond(scr) {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	s.t.Fatalf("timed out waiting for %s; screen:\n%s", what, scr)
}

// TestPromptsNeverInterleave: while rex asks for a key's passphrase, the
// output of a target that keeps printing waits: the question stands alone
// on the screen, and the output goes on below it once answered.
func TestPromptsNeverInterleave(t *testing.T) {
	f := newSSHFleet(t, 2, false)
	locked := sshtest.NewEncryptedKey(t, "ed25519", "sesame")
	f.hosts[1].Authorize(t, locked)
	if _, errOut, code := f.run("device", "add", "locked", f.hosts[1].User+"@"+f.hosts[1].Addr, "--key", locked.Path); code != 0 {
		t.Fatal(errOut)
	}
	s := newTmux(t, 160, 40)
	s.line("export HOME=" + f.home + " XDG_CONFIG_HOME= XDG_CACHE_HOME= XDG_STATE_HOME= SSH_AUTH_SOCK=")
	// h1 prints a numbered tick for as long as it runs, and writes the
	// last number to a file: that shows it went on while rex asked.
	count := filepath.Join(f.hostHome("h1"), "count")
	script := `i=0; while [ $i -lt 100000 ]; do i=$((i+1)); echo tick$i; echo $i > "$HOME/count"; sleep 0.02; done`
	s.line("clear; rex run h1,locked -t 120 -- '" + strings.ReplaceAll(script, "'", `'\''`) + "'; echo status=$?")
	// The prompt comes once h1 already prints.
	waitScreen(s, "the passphrase prompt", func(scr string) bool { return strings.Contains(scr, "Enter passphrase for "+locked.Path+":") })
	ticks := func() int {
		b, _ := os.ReadFile(count)
		n, _ := strconv.Atoi(strings.TrimSpace(string(b)))
		return n
	}
	at := ticks()
	waitFor(t, "h1 to go on ticking", 60*time.Second, func() bool { return ticks() >= at+10 })
	scr := strings.TrimRight(s.screen(), " \n")
	lines := strings.Split(scr, "\n")
	last := strings.TrimSpace(lines[len(lines)-1])
	if last != "Enter passphrase for "+locked.Path+":" {
		t.Fatalf("output landed after the prompt while it waited:\n%s", scr)
	}
	s.line("sesame")
	waitScreen(s, "the locked host's output once answered", func(scr string) bool { return strings.Contains(scr, "locked: tick") })
	s.send("C-c")
	waitScreen(s, "the interrupted run", func(scr string) bool { return hasLine(scr, "status=130") })
}
