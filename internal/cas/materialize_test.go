package cas

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// materializeFixture is a root directory holding out/ with old content.
func materializeFixture(t *testing.T) (*os.Root, string) {
	t.Helper()
	dir := t.TempDir()
	writeSpec(t, dir, fileSpec{"out/old.txt": "keep me\n"})
	root, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { root.Close() })
	return root, dir
}

// assertUntouched checks out/ still holds only the old content and no
// staging or old directories were left beside it.
func assertUntouched(t *testing.T, dir string) {
	t.Helper()
	got := readSpec(t, dir)
	if len(got) != 1 || got["out/old.txt"] != "keep me\n" {
		t.Fatalf("destination changed: %v", got)
	}
}

func TestMaterializeRefusesBadEntries(t *testing.T) {
	tests := map[string]struct {
		tree  map[string]any // the root tree, or…
		inner map[string]any // …a tree placed at sub/ (and sub/deeper/ when deep)
		deep  bool
		want  error
	}{
		"absolute name":             {tree: rawTree(rawFile("/etc")), want: ErrInvalidTree},
		"dot-dot name":              {tree: rawTree(rawFile("..")), want: ErrInvalidTree},
		"dot name":                  {tree: rawTree(rawDir(".")), want: ErrInvalidTree},
		"empty name":                {tree: rawTree(rawFile("")), want: ErrInvalidTree},
		"slash in name":             {tree: rawTree(rawFile("a/b")), want: ErrInvalidTree},
		"NUL in name":               {tree: rawTree(rawFile("a\x00b")), want: ErrInvalidTree},
		"file/dir clash":            {tree: rawTree(rawFile("a"), rawDir("a")), want: ErrInvalidTree},
		"write through symlink":     {tree: rawTree(rawLink("a", "real"), rawDir("a"), rawDir("real")), want: ErrInvalidTree},
		"absolute symlink":          {tree: rawTree(rawLink("l", "/etc/passwd")), want: ErrInvalidTree},
		"escaping symlink":          {tree: rawTree(rawLink("l", "../outside")), want: ErrInvalidTree},
		"escaping symlink deeper":   {inner: rawTree(rawLink("l", "../../outside")), want: ErrInvalidTree},
		"escaping symlink deepest":  {inner: rawTree(rawLink("l", "../../../x")), deep: true, want: ErrInvalidTree},
		"dot-dot after a name":      {inner: rawTree(rawLink("l", "x/../../y")), want: ErrInvalidTree},
		"bad name in a nested tree": {inner: rawTree(rawFile("..")), deep: true, want: ErrInvalidTree},
		"missing blob": {tree: rawTree(map[string]any{"name": "f", "type": "file", "exec": false,
			"digest": digestJSON(DigestOf([]byte("never stored")))}), want: ErrNotFound},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s := newStore(t)
			var d Digest
			if tt.inner != nil {
				d = putRaw(t, s, tt.inner)
				if tt.deep {
					d = putRaw(t, s, rawTree(map[string]any{"name": "deeper", "type": "dir", "digest": digestJSON(d)}))
				}
				d = putRaw(t, s, rawTree(rawFile("ok"), map[string]any{"name": "sub", "type": "dir", "digest": digestJSON(d)}))
			} else {
				d = putRaw(t, s, tt.tree)
			}
			mustAdd(t, s, "x") // the blob rawFile points at
			root, dir := materializeFixture(t)
			err := s.MaterializeIn(t.Context(), root, "out", d)
			if !errors.Is(err, tt.want) {
				t.Fatalf("MaterializeIn = %v, want %v", err, tt.want)
			}
			assertUntouched(t, dir)
		})
	}
}

func TestMaterializeAllowsLinksThatStayInside(t *testing.T) {
	s := newStore(t)
	inner := putRaw(t, s, rawTree(rawLink("down", "x/y"), rawLink("self", ".."), rawLink("up", "../ok")))
	d := putRaw(t, s, rawTree(rawFile("ok"), map[string]any{"name": "sub", "type": "dir", "digest": digestJSON(inner)}))
	mustAdd(t, s, "x")
	root, dir := materializeFixture(t)
	if err := s.MaterializeIn(t.Context(), root, "out", d); err != nil {
		t.Fatal(err)
	}
	got := readSpec(t, filepath.Join(dir, "out"))
	want := fileSpec{"ok": "x", "sub/up": "->../ok", "sub/self": "->..", "sub/down": "->x/y"}
	if len(got) != len(want) {
		t.Fatalf("got %v", got)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %q, want %q", k, got[k], v)
		}
	}
}

func TestMaterializeReplacesExistingDestination(t *testing.T) {
	s := newStore(t)
	d := ingestSpec(t, s, fileSpec{"new.txt": "new\n", "bin/tool": "x:#!/bin/sh\n", "bin/alias": "->tool", "empty/": ""})
	root, dir := materializeFixture(t)
	if err := s.MaterializeIn(t.Context(), root, "out", d); err != nil {
		t.Fatal(err)
	}
	got := readSpec(t, dir)
	want := fileSpec{"out/new.txt": "new\n", "out/bin/tool": "x:#!/bin/sh\n", "out/bin/alias": "->tool", "out/empty/": ""}
	if len(got) != len(want) {
		t.Fatalf("after swap: %v", got)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %q, want %q", k, got[k], v)
		}
	}
	// A nested destination gets its parents.
	if err := s.MaterializeIn(t.Context(), root, "a/b/c", d); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "a/b/c/new.txt")); err != nil {
		t.Fatal(err)
	}
}

func TestMaterializeRefusesBadDestinations(t *testing.T) {
	s := newStore(t)
	d := ingestSpec(t, s, fileSpec{"f": "content\n"})
	outside := t.TempDir()
	tests := map[string]struct {
		setup func(dir string)
		dest  string
	}{
		"destination is a symlink": {func(dir string) {
			os.Symlink("elsewhere", filepath.Join(dir, "link"))
			os.Mkdir(filepath.Join(dir, "elsewhere"), 0o755)
		}, "link"},
		"destination is a file":                  {func(dir string) { os.WriteFile(filepath.Join(dir, "file"), nil, 0o644) }, "file"},
		"path through a symlink out of the root": {func(dir string) { os.Symlink(outside, filepath.Join(dir, "escape")) }, "escape/out"},
		"absolute":                               {func(string) {}, "/tmp/x"},
		"dot-dot":                                {func(string) {}, "../x"},
		"the root":                               {func(string) {}, "."},
		"empty":                                  {func(string) {}, ""},
		"climbs after":                           {func(string) {}, "a/../../x"},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			root, dir := materializeFixture(t)
			tt.setup(dir)
			if err := s.MaterializeIn(t.Context(), root, tt.dest, d); err == nil {
				t.Fatalf("MaterializeIn(%q) succeeded", tt.dest)
			}
			entries, _ := os.ReadDir(outside)
			if len(entries) != 0 {
				t.Fatalf("something was written outside the root: %v", entries)
			}
			if _, err := os.Stat(filepath.Join(dir, "elsewhere", "f")); err == nil {
				t.Fatal("wrote through the destination symlink")
			}
			assertNoStaging(t, dir)
		})
	}
}

func assertNoStaging(t *testing.T, dir string) {
	t.Helper()
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".rex-") {
			t.Fatalf("left behind %s", e.Name())
		}
	}
}

func TestMaterializeCorruptBlobLeavesDestinationAlone(t *testing.T) {
	s := newStore(t)
	d := ingestSpec(t, s, fileSpec{"a": "aaaa\n", "b": "bbbb\n"})
	tamper(t, s, DigestOf([]byte("bbbb\n")), []byte("BBBB\n"))
	root, dir := materializeFixture(t)
	if err := s.MaterializeIn(t.Context(), root, "out", d); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("MaterializeIn = %v, want ErrCorrupt", err)
	}
	assertUntouched(t, dir)
	assertNoStaging(t, dir)
}

// TestMaterializeRefusesTreeBombs: a small DAG that names a huge number of
// paths is refused before anything is written.
func TestMaterializeRefusesTreeBombs(t *testing.T) {
	s := newStore(t)
	d := EmptyTree()
	for range 24 { // 2^24 directories
		d = putRaw(t, s, rawTree(
			map[string]any{"name": "a", "type": "dir", "digest": digestJSON(d)},
			map[string]any{"name": "b", "type": "dir", "digest": digestJSON(d)},
		))
	}
	root, dir := materializeFixture(t)
	if err := s.MaterializeIn(t.Context(), root, "out", d); !errors.Is(err, ErrInvalidTree) {
		t.Fatalf("MaterializeIn = %v, want ErrInvalidTree", err)
	}
	assertUntouched(t, dir)
}
