package devices

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gofrs/flock"
)

// saveStages names the points at which Store.write calls its step hook.
var saveStages = []string{"create", "write-half", "write", "sync", "close", "rename", "sync-dir"}

// TestMain lets the test binary double as a helper process, so tests can
// run real concurrent writers and kill one mid-save.
func TestMain(m *testing.M) {
	if mode := os.Getenv("REX_DEVICES_HELPER"); mode != "" {
		os.Exit(helperMain(mode))
	}
	os.Exit(m.Run())
}

// helperMain adds the device REX_HELPER_NAME to the registry at
// REX_HELPER_PATH. In mode "kill" it SIGKILLs itself when the save reaches
// stage REX_HELPER_STAGE.
func helperMain(mode string) int {
	s := NewStore(os.Getenv("REX_HELPER_PATH"))
	if mode == "kill" {
		want := os.Getenv("REX_HELPER_STAGE")
		s.step = func(stage string) {
			if stage == want {
				if p, err := os.FindProcess(os.Getpid()); err == nil {
					_ = p.Kill() // SIGKILL: no deferred code, no flush
				}
				select {} // the signal is on its way
			}
		}
	}
	name := os.Getenv("REX_HELPER_NAME")
	err := s.Update(context.Background(), func(r *Registry) error {
		d, err := NewDevice(name, "root@"+name+".lan", 22, "", "")
		if err != nil {
			return err
		}
		_, err = r.Add(d, false)
		return err
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

func helperCmd(t *testing.T, mode, path, name, stage string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(),
		"REX_DEVICES_HELPER="+mode,
		"REX_HELPER_PATH="+path,
		"REX_HELPER_NAME="+name,
		"REX_HELPER_STAGE="+stage,
	)
	return cmd
}

func TestDefaultPath(t *testing.T) {
	tests := []struct {
		name, xdgConfig, home, want string
	}{
		{"xdg set", "/cfg", "/home/u", "/cfg/rex/devices.json"},
		{"xdg relative is ignored", "cfg", "/home/u", "/home/u/.config/rex/devices.json"},
		{"xdg with tilde", "~/cfg", "/home/u", "/home/u/cfg/rex/devices.json"},
		{"home only", "", "/home/u", "/home/u/.config/rex/devices.json"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("XDG_CONFIG_HOME", tt.xdgConfig)
			t.Setenv("HOME", tt.home)
			got, err := DefaultPath()
			if err != nil || got != tt.want {
				t.Errorf("DefaultPath() = %q, %v; want %q", got, err, tt.want)
			}
		})
	}
	got, err := pathFromEnv(func(string) string { return "" })
	if err == nil && !filepath.IsAbs(got) {
		t.Errorf("with no environment: %q, want an absolute path or an error", got)
	}
}

func addDevice(name, host string) func(*Registry) error {
	return func(r *Registry) error {
		d, err := NewDevice(name, host, 0, "", "")
		if err != nil {
			return err
		}
		_, err = r.Add(d, false)
		return err
	}
}

func TestStoreFirstSaveModes(t *testing.T) {
	path := filepath.Join(t.TempDir(), "config", "rex", "devices.json")
	s := NewStore(path)
	r, err := s.Load()
	if err != nil || len(r.Devices()) != 0 {
		t.Fatalf("Load of a missing file = %v, %v; want an empty registry", r, err)
	}
	if _, err := os.Stat(filepath.Dir(path)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("Load created the directory: %v", err)
	}
	if err := s.Update(context.Background(), addDevice("web1", "root@10.0.0.5")); err != nil {
		t.Fatal(err)
	}
	for p, want := range map[string]os.FileMode{
		filepath.Dir(path): 0o700 | os.ModeDir,
		path:               0o600,
		s.LockPath():       0o600,
	} {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode() != want {
			t.Errorf("%s has mode %v, want %v", p, fi.Mode(), want)
		}
	}
	r, err = s.Load()
	if err != nil {
		t.Fatal(err)
	}
	if d, ok := r.Device("web1"); !ok || d.Host != "root@10.0.0.5" {
		t.Errorf("after save: %+v, %v", d, ok)
	}
	// A file someone loosened to 0644 is written back as 0600.
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := s.Update(context.Background(), addDevice("web2", "h")); err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(path); fi.Mode() != 0o600 {
		t.Errorf("mode after rewrite = %v", fi.Mode())
	}
	if left, _ := filepath.Glob(filepath.Join(filepath.Dir(path), ".*.tmp")); len(left) != 0 {
		t.Errorf("temporary files left behind: %v", left)
	}
}

func TestStoreMalformedIsNeverOverwritten(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "devices.json")
	bad := []byte("{\n  \"devices\": {\n    \"web1\": {\"host\": \"a\"},\n  }\n}\n")
	if err := os.WriteFile(path, bad, 0o600); err != nil {
		t.Fatal(err)
	}
	s := NewStore(path)
	check := func(what string, err error) {
		t.Helper()
		var fe *FormatError
		if !errors.As(err, &fe) {
			t.Fatalf("%s: error %v, want a *FormatError", what, err)
		}
		if fe.Path != path || fe.Line != 4 || fe.Column != 3 {
			t.Errorf("%s: at %s:%d:%d, want %s:4:3", what, fe.Path, fe.Line, fe.Column, path)
		}
		if !strings.HasPrefix(err.Error(), path+":4:3: ") {
			t.Errorf("%s: message %q does not start with path:line:col", what, err)
		}
		got, rerr := os.ReadFile(path)
		if rerr != nil || !bytes.Equal(got, bad) {
			t.Fatalf("%s: the malformed file changed:\n%s", what, got)
		}
	}
	_, err := s.Load()
	check("Load", err)
	called := false
	err = s.Update(context.Background(), func(r *Registry) error { called = true; return nil })
	check("Update", err)
	if called {
		t.Error("Update called fn on a malformed file")
	}
	err = s.Update(context.Background(), addDevice("web2", "h"))
	check("second Update", err)
	if left, _ := filepath.Glob(filepath.Join(dir, ".*.tmp")); len(left) != 0 {
		t.Errorf("temporary files left behind: %v", left)
	}
}

func TestStoreUnchangedFileKeepsItsFormatting(t *testing.T) {
	path := filepath.Join(t.TempDir(), "devices.json")
	hand := []byte(designExample)
	if err := os.WriteFile(path, hand, 0o600); err != nil {
		t.Fatal(err)
	}
	s := NewStore(path)
	// A failing change and a change that changes nothing both leave the
	// file as the person wrote it.
	err := s.Update(context.Background(), addDevice("build-server", "x"))
	if err == nil {
		t.Fatal("adding an existing device succeeded")
	}
	if err := s.Update(context.Background(), func(r *Registry) error { return nil }); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(path); !bytes.Equal(got, hand) {
		t.Errorf("file rewritten:\n%s", got)
	}
}

func TestStoreWritesThroughSymlink(t *testing.T) {
	dir := t.TempDir()
	dotfiles := filepath.Join(dir, "dotfiles")
	if err := os.Mkdir(dotfiles, 0o700); err != nil {
		t.Fatal(err)
	}
	real := filepath.Join(dotfiles, "devices.json")
	if err := os.WriteFile(real, []byte(designExample), 0o600); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "devices.json")
	if err := os.Symlink("dotfiles/devices.json", link); err != nil {
		t.Fatal(err)
	}
	if err := NewStore(link).Update(context.Background(), addDevice("web1", "h")); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Lstat(link)
	if err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Fatalf("the symlink was replaced: %v %v", fi, err)
	}
	r, err := Parse(mustRead(t, real))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := r.Device("web1"); !ok {
		t.Error("the link target was not updated")
	}
}

// TestStoreLockIsSharedThroughSymlinks: two paths to one registry (a
// dotfiles link and the file itself, or two links) must exclude each
// other, or two saves lose one another's change and one deletes the
// other's temporary file as stale.
func TestStoreLockIsSharedThroughSymlinks(t *testing.T) {
	dir := t.TempDir()
	real := filepath.Join(dir, "dotfiles", "devices.json")
	if err := os.MkdirAll(filepath.Dir(real), 0o700); err != nil {
		t.Fatal(err)
	}
	link1 := filepath.Join(dir, "a", "devices.json")
	link2 := filepath.Join(dir, "b", "devices.json")
	for _, l := range []string{link1, link2} {
		if err := os.MkdirAll(filepath.Dir(l), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(real, l); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct{ name, holder, other string }{
		{"link and link", link1, link2},
		{"link and file", link1, real},
		{"file and link", real, link2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			unlock, err := NewStore(tt.holder).lock(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			defer unlock()
			s := NewStore(tt.other)
			s.lockTimeout = 50 * time.Millisecond
			err = s.Update(context.Background(), addDevice(strings.ReplaceAll(tt.name, " ", "-"), "h"))
			if err == nil || !strings.Contains(err.Error(), "another rex process") {
				t.Errorf("Update through %s while %s holds the lock = %v; want it to wait for the lock", tt.other, tt.holder, err)
			}
		})
	}
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestStoreRemovesStaleTempFiles(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "devices.json")
	stale := filepath.Join(dir, ".devices.json.12345.tmp")
	if err := os.WriteFile(stale, []byte("{half"), 0o600); err != nil {
		t.Fatal(err)
	}
	other := filepath.Join(dir, ".other.tmp")
	if err := os.WriteFile(other, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := NewStore(path).Update(context.Background(), addDevice("a", "h")); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(stale); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("stale temp file kept: %v", err)
	}
	if _, err := os.Stat(other); err != nil {
		t.Errorf("unrelated file removed: %v", err)
	}
}

func TestStoreLockTimeout(t *testing.T) {
	path := filepath.Join(t.TempDir(), "devices.json")
	s := NewStore(path)
	s.lockTimeout = 50 * time.Millisecond
	held := flock.New(s.LockPath())
	if err := held.Lock(); err != nil {
		t.Fatal(err)
	}
	defer held.Unlock()
	err := s.Update(context.Background(), addDevice("a", "h"))
	if err == nil || !strings.Contains(err.Error(), "another rex process") {
		t.Errorf("Update under a held lock = %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := s.Update(ctx, addDevice("a", "h")); !errors.Is(err, context.Canceled) {
		t.Errorf("Update with a cancelled context = %v", err)
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a file was written without the lock: %v", err)
	}
}

// TestStoreConcurrentProcesses runs 20 processes that each add a device at
// the same moment; all 20 must survive.
func TestStoreConcurrentProcesses(t *testing.T) {
	path := filepath.Join(t.TempDir(), "rex", "devices.json")
	const n = 20
	cmds := make([]*exec.Cmd, n)
	outs := make([]*bytes.Buffer, n)
	for i := range n {
		cmds[i] = helperCmd(t, "add", path, fmt.Sprintf("dev%02d", i), "")
		outs[i] = new(bytes.Buffer)
		cmds[i].Stdout, cmds[i].Stderr = outs[i], outs[i]
		if err := cmds[i].Start(); err != nil {
			t.Fatal(err)
		}
	}
	for i, c := range cmds {
		if err := c.Wait(); err != nil {
			t.Errorf("helper %d: %v: %s", i, err, outs[i])
		}
	}
	r, err := NewStore(path).Load()
	if err != nil {
		t.Fatal(err)
	}
	if got := len(r.Devices()); got != n {
		t.Errorf("%d devices after %d concurrent adds, want %d", got, n, n)
	}
}

// TestStoreKilledMidSave kills a writer at every stage of a save and checks
// that the registry is then exactly the old file or exactly the new one,
// and that the next save works.
func TestStoreKilledMidSave(t *testing.T) {
	for _, stage := range saveStages {
		t.Run(stage, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "devices.json")
			old := []byte(designExample)
			if err := os.WriteFile(path, old, 0o600); err != nil {
				t.Fatal(err)
			}
			want, err := Parse(old)
			if err != nil {
				t.Fatal(err)
			}
			if err := addDevice("victim", "root@victim.lan:22")(want); err != nil {
				t.Fatal(err)
			}
			newBytes, err := want.Bytes()
			if err != nil {
				t.Fatal(err)
			}

			cmd := helperCmd(t, "kill", path, "victim", stage)
			out, err := cmd.CombinedOutput()
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
				t.Fatalf("helper was not killed at %s: %v: %s", stage, err, out)
			}
			got := mustRead(t, path)
			isOld, isNew := bytes.Equal(got, old), bytes.Equal(got, newBytes)
			if !isOld && !isNew {
				t.Fatalf("after a kill at %s the file is neither old nor new:\n%s", stage, got)
			}
			// Up to the rename the old file stands; from it on, the new one.
			afterRename := stage == "rename" || stage == "sync-dir"
			if isNew != afterRename {
				t.Errorf("kill at %s left the new file = %v", stage, isNew)
			}
			// The next writer cleans up and succeeds.
			if err := NewStore(path).Update(context.Background(), addDevice("next", "h")); err != nil {
				t.Fatal(err)
			}
			if left, _ := filepath.Glob(filepath.Join(dir, ".*.tmp")); len(left) != 0 {
				t.Errorf("temporary files left after the next save: %v", left)
			}
		})
	}
}
