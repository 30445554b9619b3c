package rexd_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rexconsole/rex/internal/protocol"
)

// TestAllowedNameIsNotTakenOverThroughTheRoots: a bare name in
// allow_commands ("true") stands for what rexd's PATH finds for it. When
// rexd's PATH holds a directory inside the roots ahead of the system's
// (~/.local/bin or ~/bin in a user's PATH, with the home directory as the
// root, rexd's default), a client could write its own "true" there with
// fs.write: such directories are left out of the PATH allow_commands uses,
// and a name found only there is refused, saying why.
func TestAllowedNameIsNotTakenOverThroughTheRoots(t *testing.T) {
	root := t.TempDir()
	if r, err := filepath.EvalSymlinks(root); err == nil {
		root = r
	}
	bin := filepath.Join(root, ".local", "bin")
	if err := os.MkdirAll(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(t.TempDir(), "config.toml")
	if err := os.WriteFile(cfg, []byte("[security]\nallow_commands = [\"true\"]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	h := startEnv(t, []string{"HOME=" + root, "PATH=" + bin + ":" + os.Getenv("PATH")}, "--root", root, "--config", cfg)
	sid := h.open()
	// The operator's "true" runs.
	h.run(sid, protocol.ExecStartParams{Argv: []string{"true"}})
	marker := filepath.Join(root, "PWNED")
	h.ok(protocol.MethodFSWrite, protocol.FSWriteParams{SessionID: sid, Path: filepath.Join(bin, "true"), Perm: "0755",
		Content: "#!/bin/sh\ntouch " + marker + "\n"}, nil)
	m := h.call(protocol.MethodExecStart, protocol.ExecStartParams{SessionID: sid, Argv: []string{"true"}})
	if m.Error != nil {
		return // refused: fine
	}
	var res protocol.ExecStartResult
	json.Unmarshal(m.Result, &res)
	h.exitOf(res.ProcessID, 30*time.Second)
	if _, err := os.Stat(marker); err == nil {
		t.Fatalf("allow_commands = [\"true\"] ran the client's own %s, written with fs.write", filepath.Join(bin, "true"))
	}
}

// A bare name in allow_commands that only a directory the client can write
// provides is refused, with the reason.
func TestAllowedNameOnlyInAWritableDirectoryIsRefused(t *testing.T) {
	root := t.TempDir()
	if r, err := filepath.EvalSymlinks(root); err == nil {
		root = r
	}
	bin := filepath.Join(root, ".local", "bin")
	os.MkdirAll(bin, 0o755)
	os.WriteFile(filepath.Join(bin, "rex-own-tool"), []byte("#!/bin/sh\n"), 0o755)
	cfg := filepath.Join(t.TempDir(), "config.toml")
	os.WriteFile(cfg, []byte("[security]\nallow_commands = [\"rex-own-tool\"]\n"), 0o644)
	h := startEnv(t, []string{"HOME=" + root, "PATH=" + bin + ":" + os.Getenv("PATH")}, "--root", root, "--config", cfg)
	sid := h.open()
	m := h.call(protocol.MethodExecStart, protocol.ExecStartParams{SessionID: sid, Argv: []string{"rex-own-tool"}})
	if m.Error == nil || m.Error.Code != protocol.CodeUnauthorized || !strings.Contains(m.Error.Message, "clients can write") {
		t.Fatalf("exec of a name found only in %s: %+v; want it refused as writable by clients", bin, m.Error)
	}
}

// Under allow_commands the processes get the same PATH as the check: an
// allowed script's `#!/usr/bin/env NAME` cannot find a program a client
// wrote into the roots.
func TestAllowedProcessesGetTheTrustedPath(t *testing.T) {
	root := t.TempDir()
	if r, err := filepath.EvalSymlinks(root); err == nil {
		root = r
	}
	bin := filepath.Join(root, ".local", "bin")
	os.MkdirAll(bin, 0o755)
	cfg := filepath.Join(t.TempDir(), "config.toml")
	os.WriteFile(cfg, []byte("[security]\nallow_commands = [\"printenv\"]\n"), 0o644)
	h := startEnv(t, []string{"HOME=" + root, "PATH=" + bin + ":" + os.Getenv("PATH")}, "--root", root, "--config", cfg)
	sid := h.open()
	out, _, exit := h.run(sid, protocol.ExecStartParams{Argv: []string{"printenv", "PATH"}})
	if exit.ExitCode == nil || *exit.ExitCode != 0 || strings.Contains(out, bin) || !strings.Contains(out, "/") {
		t.Fatalf("PATH of an allowed process: %q (exit %+v); want rexd's without %s", out, exit, bin)
	}
	// Python's user site-packages (their .pth files run code) are in the home
	// directory a client can write: left out.
	out, _, _ = h.run(sid, protocol.ExecStartParams{Argv: []string{"printenv", "PYTHONNOUSERSITE"}})
	if out != "1\n" {
		t.Fatalf("PYTHONNOUSERSITE of an allowed process: %q, want 1", out)
	}
}
