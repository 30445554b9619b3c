package commands

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rexconsole/rex/internal/secrets"
	"github.com/rexconsole/rex/internal/sudo"
)

// TestReviewLocalSudoGetsNoPassphrase: the local rexd started through
// sudo (--sudo on local, a local device with "become") does not inherit
// REX_SECRETS_PASSPHRASE, as the plain local rexd does not: sudo keeps
// any variable sudoers lets through (env_keep, !env_reset, SETENV), and
// rexd as root would hand it to every process it starts. A stand-in sudo
// on PATH records the environment it was given.
func TestReviewLocalSudoGetsNoPassphrase(t *testing.T) {
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
