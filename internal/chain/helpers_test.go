package chain

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"testing/fstest"
)

// writeTree writes files (slash paths relative to root) and returns root.
func writeTree(t testing.TB, root string, files map[string]string) string {
	t.Helper()
	for rel, content := range files {
		p := filepath.Join(root, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		mode := os.FileMode(0o644)
		if strings.HasPrefix(content, "#!") {
			mode = 0o755
		}
		if err := os.WriteFile(p, []byte(content), mode); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// project makes a project root with the given files under it.
func project(t testing.TB, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, ".ai", "tools"), 0o755); err != nil {
		t.Fatal(err)
	}
	return writeTree(t, root, files)
}

// mapFS makes a system space from files.
func mapFS(files map[string]string) fstest.MapFS {
	m := fstest.MapFS{}
	for k, v := range files {
		m[k] = &fstest.MapFile{Data: []byte(v), Mode: 0o644}
	}
	return m
}

func newEngine(t testing.TB, opts Options) *Engine {
	t.Helper()
	if opts.SystemDir == "" {
		opts.SystemDir = t.TempDir()
	}
	e, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// testPATH holds the system tools the tests run (sh, bash, python3, node).
func testPATH(t testing.TB) string {
	t.Helper()
	dirs := []string{"/usr/bin", "/bin"}
	for _, prog := range []string{"python3", "bash", "sh", "node"} {
		if p, err := exec.LookPath(prog); err == nil {
			dirs = append(dirs, filepath.Dir(p))
		}
	}
	return strings.Join(dirs, ":")
}

// localTarget is a LocalTarget with a hermetic environment.
func localTarget(t testing.TB, extra map[string]string) *LocalTarget {
	t.Helper()
	env := map[string]string{"PATH": testPATH(t), "HOME": t.TempDir(), "LANG": "C.UTF-8"}
	for k, v := range extra {
		env[k] = v
	}
	return &LocalTarget{Env: env}
}

// fakeTarget is a machine that exists only in memory: its files are a map,
// and it records every probe. Interpreter resolution tests use it to show
// that lookups happen on the target, not on this machine.
type fakeTarget struct {
	env   map[string]string
	files map[string]FileInfo
	run   func(req RunRequest) (RunResult, error)

	mu     sync.Mutex
	probes []string
}

func (f *fakeTarget) Name() string { return "fake" }

func (f *fakeTarget) Environ(context.Context) (map[string]string, error) {
	out := map[string]string{}
	for k, v := range f.env {
		out[k] = v
	}
	return out, nil
}

func (f *fakeTarget) Stat(_ context.Context, p string) (FileInfo, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.probes = append(f.probes, "stat "+p)
	return f.files[p], nil
}

func (f *fakeTarget) LookPath(ctx context.Context, name, pathList string) (string, error) {
	f.mu.Lock()
	f.probes = append(f.probes, "lookpath "+name)
	f.mu.Unlock()
	return LookPathWithStat(ctx, f.Stat, name, pathList)
}

func (f *fakeTarget) Run(_ context.Context, req RunRequest) (RunResult, error) {
	f.mu.Lock()
	f.probes = append(f.probes, "run "+strings.Join(req.Argv, " "))
	f.mu.Unlock()
	if f.run == nil {
		return RunResult{ExitCode: 127}, nil
	}
	return f.run(req)
}

func execFile() FileInfo { return FileInfo{Exists: true, Mode: 0o755} }

// errorContains fails unless err is non-nil and contains every part.
func errorContains(t testing.TB, err error, parts ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("want an error containing %q, got nil", parts)
	}
	for _, p := range parts {
		if !strings.Contains(err.Error(), p) {
			t.Fatalf("error %q does not contain %q", err, p)
		}
	}
}
