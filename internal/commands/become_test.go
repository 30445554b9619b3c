package commands

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rexconsole/rex/internal/secrets"
	"github.com/rexconsole/rex/internal/sudo"
)

// TestLocalSudoGetsNoPassphrase: the local rexd started through
// sudo (--sudo on local, a local device with "become") does not inherit
// REX_SECRETS_PASSPHRASE, as the plain local rexd does not: sudo keeps
// any variable sudoers lets through (env_keep, !env_reset, SETENV), and
// rexd as root would hand it to every process it starts. A stand-in sudo
// on PATH records the environment it was given.
func TestLocalSudoGetsNoPassphrase(t *testing.T) {
	dir := t.TempDir()
	got := filepath.Join(dir, "env")
	script := "#!/bin/sh\nenv > '" + got + "'\necho 'sudo: a password is required' >&2\nexit 1\n"
	if err := os.WriteFile(filepath.Join(dir, "sudo"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", dir+string(os.PathListSeparator)+os.Getenv("PATH"))
	const pass = "correct horse battery staple"
	t.Setenv(secrets.PassphraseEnv, pass)
	_, err := startLocalSudo(context.Background(), filepath.Join(dir, "rexd"), nil, "root", nil)
	if !errors.Is(err, sudo.ErrPasswordRequired) {
		t.Fatalf("the stand-in sudo did not run as sudo: %v", err)
	}
	b, err := os.ReadFile(got)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), "PATH=") {
		t.Fatalf("the stand-in sudo recorded no environment: %q", b)
	}
	if strings.Contains(string(b), secrets.PassphraseEnv) || strings.Contains(string(b), pass) {
		t.Fatalf("sudo (and so the local rexd under it) inherited %s", secrets.PassphraseEnv)
	}
}

// fakeSudo puts a stand-in sudo first on PATH: with -n it says a password
// is required; with -S it asks (the prompt rex gives with -p) and refuses
// whatever it reads, asking again, as sudo does after a wrong password.
func fakeSudo(t *testing.T) {
	t.Helper()
	dir := t.TempDir()
	script := `#!/bin/sh
case "$1" in
-n) echo 'sudo: a password is required' >&2; exit 1;;
esac
printf '%s' "$4" >&2
read -r pw || exit 1
echo 'Sorry, try again.' >&2
printf '%s' "$4" >&2
read -r pw
exit 1
`
	if err := os.WriteFile(filepath.Join(dir, "sudo"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", dir+string(os.PathListSeparator)+os.Getenv("PATH"))
}

// TestRefusedSudoPasswordIsNotReused: a sudo password that sudo
// refused is not given again. SudoPasswords keeps the first answer for
// the life of its Setup, which in the console is the rex server's: after
// one typo every later connection through sudo (each command, each
// reconnect) sends the same wrong password without asking, piling up
// failed attempts (pam_faillock locks the account after a few) and
// leaving --sudo unusable until the server restarts.
func TestRefusedSudoPasswordIsNotReused(t *testing.T) {
	fakeSudo(t)
	asks := 0
	pw := &SudoPasswords{Ask: func(string) ([]byte, error) {
		asks++
		return []byte("typo"), nil
	}}
	for i := 0; i < 2; i++ {
		_, err := connectLocalSudo(t.Context(), "/nonexistent/rexd", nil, "root", pw.Get, pw.Refused)
		if err == nil || !strings.Contains(err.Error(), "refused the password") {
			t.Fatalf("attempt %d: %v, want sudo refusing the password", i+1, err)
		}
	}
	if asks != 2 {
		t.Fatalf("the operator was asked %d time(s) for 2 connections whose sudo refused the password: a refused password was given again", asks)
	}
}

// In the console (Keep set), a declined sudo password stands only for the
// targets of the command it answered, and a password as long as sudo's
// own timestamp: one esc does not decline every later --sudo for the rex
// server's life, nor does a password stay in its memory for days. A CLI
// run (Keep zero) asks once.
func TestConsoleSudoAnswersExpire(t *testing.T) {
	now := time.Unix(1e9, 0)
	asks := 0
	answers := []error{errors.New("the operator declined to give it"), nil, nil}
	p := &SudoPasswords{Keep: ConsoleSudoKeep, now: func() time.Time { return now }, Ask: func(string) ([]byte, error) {
		err := answers[asks]
		asks++
		if err != nil {
			return nil, err
		}
		return []byte("pw"), nil
	}}
	get := func(wantAsks int, wantErr bool) {
		t.Helper()
		pw, err := p.Get("h1", "root")
		if asks != wantAsks || (err != nil) != wantErr || !wantErr && string(pw) != "pw" {
			t.Fatalf("at +%v: asked %d time(s), %q, %v; want %d, an error: %v", now.Sub(time.Unix(1e9, 0)), asks, pw, err, wantAsks, wantErr)
		}
	}
	get(1, true)
	get(1, true) // another target of the same command
	now = now.Add(declineKeep)
	get(2, false) // a later command asks again
	now = now.Add(ConsoleSudoKeep - time.Second)
	get(2, false)
	now = now.Add(time.Second)
	get(3, false)

	asks = 1 // the CLI: one run, one question
	cli := &SudoPasswords{Ask: p.Ask, now: func() time.Time { return now }}
	cli.Get("h1", "root")
	now = now.Add(24 * time.Hour)
	if _, err := cli.Get("h1", "root"); asks != 2 || err != nil {
		t.Fatalf("a CLI run asked %d time(s) (%v); want once", asks-1, err)
	}
}
