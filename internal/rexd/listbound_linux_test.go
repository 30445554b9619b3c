//go:build linux

package rexd_test

import (
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/rexconsole/rex/internal/protocol"
)

// TestListMaxEntriesBoundsMemory: fs.list with max_entries (and fs.glob
// with max_matches) reads a huge
// directory in pieces and keeps only what it answers with, instead of
// the whole directory first (40,000 entries of 240-byte names were some
// 25 MB more at its peak). The entries are hard links of one file: quick
// to make. rexd's peak resident memory is
// read from /proc, before and after two listings of it, one recursive.
func TestListMaxEntriesBoundsMemory(t *testing.T) {
	h := start(t)
	sid := h.open()
	dir := filepath.Join(h.root, "huge")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	const n = 40000
	pad := strings.Repeat("x", 230)
	one := filepath.Join(h.root, "one")
	if err := os.WriteFile(one, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if err := os.Link(one, filepath.Join(dir, fmt.Sprintf("%s%09d", pad, (i*7919)%n))); err != nil {
			t.Fatal(err)
		}
	}
	hwm := func() int {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(h.cmd.Process.Pid) + "/status")
		if err != nil {
			t.Fatal(err)
		}
		for l := range strings.Lines(string(b)) {
			if v, ok := strings.CutPrefix(l, "VmHWM:"); ok {
				kb, err := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), " kB"))
				if err != nil {
					t.Fatal(err)
				}
				return kb
			}
		}
		t.Fatal("no VmHWM in /proc/pid/status")
		return 0
	}
	// A first listing, of a directory of 2,000 entries, brings the
	// collector's pace to where a listing keeps it: what grows after
	// that is what the size of the directory listed costs.
	small := filepath.Join(h.root, "small")
	if err := os.Mkdir(small, 0o755); err != nil {
		t.Fatal(err)
	}
	for i := range 2000 {
		if err := os.Link(one, filepath.Join(small, fmt.Sprintf("%s%09d", pad, i))); err != nil {
			t.Fatal(err)
		}
	}
	h.ok(protocol.MethodFSList, protocol.FSListParams{SessionID: sid, Path: "small", Recursive: true, MaxEntries: 3}, nil)
	before := hwm()
	// fs.glob reads directories as fs.list does: what it keeps is what
	// matches (at most max_matches of a directory's own) and the
	// directories a match could lie below.
	for _, c := range []struct {
		pattern string
		want    []string
	}{
		{"huge/*", []string{"000000000", "000000001", "000000002"}},
		{"huge/*0000123?", []string{"000001230", "000001231", "000001232"}},
		{"**/" + pad + "00000001?", []string{"000000010", "000000011", "000000012"}},
	} {
		var g protocol.FSGlobResult
		h.ok(protocol.MethodFSGlob, protocol.FSGlobParams{SessionID: sid, Pattern: c.pattern, MaxMatches: 3}, &g)
		var got []string
		for _, m := range g.Matches {
			got = append(got, strings.TrimPrefix(filepath.Base(m), pad))
		}
		if !slices.Equal(got, c.want) || !g.Truncated {
			t.Errorf("glob %.40q: %v (truncated %v), want %v (truncated)", c.pattern, got, g.Truncated, c.want)
		}
	}
	for _, recursive := range []bool{false, true} {
		var l protocol.FSListResult
		h.ok(protocol.MethodFSList, protocol.FSListParams{SessionID: sid, Path: "huge", Recursive: recursive, MaxEntries: 3}, &l)
		var got []string
		for _, e := range l.Entries {
			got = append(got, strings.TrimPrefix(e.Name, pad))
		}
		if want := []string{"000000000", "000000001", "000000002"}; !slices.Equal(got, want) || !l.Truncated {
			t.Errorf("recursive=%v: listed %v (truncated %v), want %v (truncated)", recursive, got, l.Truncated, want)
		}
	}
	// Read whole, the directory cost 36 MB more at the peak; in pieces,
	// 4-6 MB: garbage the collector lets grow to its 4 MB minimum before
	// it runs (whatever the directory's size).
	if grew := hwm() - before; grew > 14<<10 {
		t.Errorf("rexd's peak memory grew by %d kB listing 3 entries of a %d-entry directory", grew, n)
	}
}

// TestListMaxEntriesKeepsOrder: reading in pieces answers what reading
// everything did: the entries a depth-first walk in name order meets
// first, and truncated exactly when there were more.
func TestListMaxEntriesKeepsOrder(t *testing.T) {
	h := start(t)
	sid := h.open()
	// Names created out of order, a big subdirectory the budget runs out
	// in, and one ("b.txt") that sorts between a directory and its files.
	for _, p := range []string{"t/c/9", "t/b/z", "t/b/a", "t/b.txt", "t/a", "t/c/1", "t/c/5", "t/d", "t/b/m/q"} {
		if err := os.MkdirAll(filepath.Join(h.root, filepath.Dir(p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(h.root, p), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var all []string // what fs.WalkDir meets, in its order
	fs.WalkDir(os.DirFS(filepath.Join(h.root, "t")), ".", func(p string, _ fs.DirEntry, err error) error {
		if err == nil && p != "." {
			all = append(all, p)
		}
		return err
	})
	// fs.glob answers the same way: the matches a walk in name order
	// meets first.
	for _, pat := range []string{"**", "*", "**/?", "c/*", "*/*", "b*"} {
		var want []string
		for _, p := range all {
			if ok, _ := path.Match(pat, p); ok || pat == "**" || pat == "**/?" && len(path.Base(p)) == 1 {
				want = append(want, p)
			}
		}
		for max := 1; max <= len(want)+1; max++ {
			var g protocol.FSGlobResult
			h.ok(protocol.MethodFSGlob, protocol.FSGlobParams{SessionID: sid, Pattern: "t/" + pat, MaxMatches: max}, &g)
			var got []string
			for _, m := range g.Matches {
				rel, _ := filepath.Rel(filepath.Join(h.root, "t"), m)
				got = append(got, filepath.ToSlash(rel))
			}
			w := slices.Clone(want[:min(max, len(want))])
			slices.Sort(w)
			if !slices.Equal(got, w) || g.Truncated != (max < len(want)) {
				t.Errorf("glob %q max=%d: %v truncated=%v, want %v truncated=%v", pat, max, got, g.Truncated, w, max < len(want))
			}
		}
	}
	top := []string{"a", "b", "b.txt", "c", "d"}
	for _, recursive := range []bool{false, true} {
		want := top
		if recursive {
			want = all
		}
		for max := 1; max <= len(want)+1; max++ {
			var l protocol.FSListResult
			h.ok(protocol.MethodFSList, protocol.FSListParams{SessionID: sid, Path: "t", Recursive: recursive, MaxEntries: max}, &l)
			var got []string
			for _, e := range l.Entries {
				rel, _ := filepath.Rel(filepath.Join(h.root, "t"), e.Path)
				got = append(got, filepath.ToSlash(rel))
			}
			w := slices.Clone(want[:min(max, len(want))])
			slices.Sort(w) // answers are sorted by path
			if !slices.Equal(got, w) || l.Truncated != (max < len(want)) {
				t.Errorf("recursive=%v max=%d: %v truncated=%v, want %v truncated=%v", recursive, max, got, l.Truncated, w, max < len(want))
			}
		}
	}
}
