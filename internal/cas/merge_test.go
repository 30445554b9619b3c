package cas

import (
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// with returns spec with changes applied; a value of "-" deletes the path.
func with(spec fileSpec, changes fileSpec) fileSpec {
	out := maps.Clone(spec)
	for k, v := range changes {
		if v == "-" {
			delete(out, k)
			continue
		}
		out[k] = v
	}
	return out
}

func TestMergeTreesRules(t *testing.T) {
	base := fileSpec{
		"keep":      "unchanged\n",
		"text":      "one\ntwo\nthree\nfour\nfive\nsix\n",
		"bin":       "\x00binary\x00",
		"tool":      "#!/bin/sh\n",
		"link":      "->keep",
		"dir/a":     "a\n",
		"dir/b":     "b\n",
		"dir/sub/c": "c\n",
	}
	type want struct {
		tree      fileSpec
		conflicts []string // "path kind" (+" markers")
	}
	tests := []struct {
		name         string
		ours, theirs fileSpec
		want         want
	}{
		{"both agree", fileSpec{"keep": "same edit\n"}, fileSpec{"keep": "same edit\n"},
			want{tree: fileSpec{"keep": "same edit\n"}}},
		{"only ours changed", fileSpec{"keep": "ours\n", "new": "added\n"}, nil,
			want{tree: fileSpec{"keep": "ours\n", "new": "added\n"}}},
		{"only theirs changed", nil, fileSpec{"dir/b": "-", "link": "->tool"},
			want{tree: fileSpec{"dir/b": "-", "link": "->tool"}}},
		{"both deleted", fileSpec{"text": "-"}, fileSpec{"text": "-"},
			want{tree: fileSpec{"text": "-"}}},
		{"ours deleted, theirs modified", fileSpec{"keep": "-"}, fileSpec{"keep": "modified\n"},
			want{tree: fileSpec{"keep": "modified\n"}, conflicts: []string{"keep modify/delete"}}},
		{"ours modified, theirs deleted", fileSpec{"keep": "modified\n"}, fileSpec{"keep": "-"},
			want{tree: fileSpec{"keep": "modified\n"}, conflicts: []string{"keep modify/delete"}}},
		{"add/add same", fileSpec{"new": "same\n"}, fileSpec{"new": "same\n"},
			want{tree: fileSpec{"new": "same\n"}}},
		{"add/add different text", fileSpec{"new": "one\n"}, fileSpec{"new": "two\n"},
			want{tree: fileSpec{"new": "<<<<<<< ours\none\n=======\ntwo\n>>>>>>> theirs\n"}, conflicts: []string{"new add/add markers"}}},
		{"add/add different binary", fileSpec{"new": "\x00one"}, fileSpec{"new": "\x00two"},
			want{tree: fileSpec{"new": "\x00one"}, conflicts: []string{"new add/add"}}},
		{"file vs directory", fileSpec{"x": "file\n"}, fileSpec{"x/inner": "dir\n"},
			want{tree: fileSpec{"x": "file\n"}, conflicts: []string{"x file/directory"}}},
		{"directory vs file", fileSpec{"keep": "-", "keep/inner": "dir\n"}, fileSpec{"keep": "changed\n"},
			want{tree: fileSpec{"keep": "-", "keep/inner": "dir\n"}, conflicts: []string{"keep file/directory"}}},
		{"both modified text apart", fileSpec{"text": "ONE\ntwo\nthree\nfour\nfive\nsix\n"}, fileSpec{"text": "one\ntwo\nthree\nfour\nfive\nSIX\n"},
			want{tree: fileSpec{"text": "ONE\ntwo\nthree\nfour\nfive\nSIX\n"}}},
		{"both modified text adjacent", fileSpec{"text": "one\nTWO\nthree\nfour\nfive\nsix\n"}, fileSpec{"text": "one\ntwo\nTHREE\nfour\nfive\nsix\n"},
			want{tree: fileSpec{"text": "one\n<<<<<<< ours\nTWO\nthree\n=======\ntwo\nTHREE\n>>>>>>> theirs\nfour\nfive\nsix\n"}, conflicts: []string{"text content markers"}}},
		{"both modified binary", fileSpec{"bin": "\x00ours"}, fileSpec{"bin": "\x00theirs"},
			want{tree: fileSpec{"bin": "\x00ours"}, conflicts: []string{"bin binary"}}},
		{"both modified not UTF-8", fileSpec{"text": "one\xff\n"}, fileSpec{"text": "two\xff\n"},
			want{tree: fileSpec{"text": "one\xff\n"}, conflicts: []string{"text binary"}}},
		{"exec bit and content from each side", fileSpec{"tool": "x:#!/bin/sh\n"}, fileSpec{"tool": "#!/bin/sh\necho\n"},
			want{tree: fileSpec{"tool": "x:#!/bin/sh\necho\n"}}},
		{"exec bit and text merge", fileSpec{"text": "x:ONE\ntwo\nthree\nfour\nfive\nsix\n"}, fileSpec{"text": "one\ntwo\nthree\nfour\nfive\nSIX\n"},
			want{tree: fileSpec{"text": "x:ONE\ntwo\nthree\nfour\nfive\nSIX\n"}}},
		{"symlinks changed differently", fileSpec{"link": "->tool"}, fileSpec{"link": "->text"},
			want{tree: fileSpec{"link": "->tool"}, conflicts: []string{"link symlink"}}},
		{"symlink vs file", fileSpec{"link": "now a file\n"}, fileSpec{"link": "->text"},
			want{tree: fileSpec{"link": "now a file\n"}, conflicts: []string{"link symlink"}}},
		{"directory deleted, untouched other side", fileSpec{"dir/a": "-", "dir/b": "-", "dir/sub/c": "-"}, fileSpec{"keep": "x\n"},
			want{tree: fileSpec{"dir/a": "-", "dir/b": "-", "dir/sub/c": "-", "keep": "x\n"}}},
		{"directory deleted, file inside modified", fileSpec{"dir/a": "-", "dir/b": "-", "dir/sub/c": "-"}, fileSpec{"dir/sub/c": "changed\n"},
			want{tree: fileSpec{"dir/a": "-", "dir/b": "-", "dir/sub/c": "changed\n"}, conflicts: []string{"dir/sub/c modify/delete"}}},
		{"directory changed on both sides", fileSpec{"dir/a": "A\n", "dir/new1": "1\n"}, fileSpec{"dir/sub/c": "C\n", "dir/new2": "2\n"},
			want{tree: fileSpec{"dir/a": "A\n", "dir/new1": "1\n", "dir/sub/c": "C\n", "dir/new2": "2\n"}}},
		{"directories added on both sides", fileSpec{"fresh/x": "x\n"}, fileSpec{"fresh/y": "y\n"},
			want{tree: fileSpec{"fresh/x": "x\n", "fresh/y": "y\n"}}},
		{"file replaced by directory, other side deleted it", fileSpec{"keep": "-", "keep/in": "i\n"}, fileSpec{"keep": "-"},
			want{tree: fileSpec{"keep": "-", "keep/in": "i\n"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := newStore(t)
			b := ingestSpec(t, s, base)
			o := ingestSpec(t, s, with(base, tt.ours))
			th := ingestSpec(t, s, with(base, tt.theirs))
			res, err := s.MergeTrees(t.Context(), b, o, th, MergeOptions{})
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, c := range res.Conflicts {
				line := c.Path + " " + string(c.Kind)
				if c.Markers {
					line += " markers"
				}
				got = append(got, line)
			}
			if !slices.Equal(got, tt.want.conflicts) {
				t.Errorf("conflicts = %q, want %q", got, tt.want.conflicts)
			}
			if res.Clean() != (len(tt.want.conflicts) == 0) {
				t.Errorf("Clean() = %v", res.Clean())
			}
			out := filepath.Join(t.TempDir(), "merged")
			if err := s.Materialize(t.Context(), res.Tree, out); err != nil {
				t.Fatal(err)
			}
			wantTree := with(base, tt.want.tree)
			gotTree := readSpec(t, out)
			for k, v := range wantTree {
				if gotTree[k] != v {
					t.Errorf("%s = %q, want %q", k, gotTree[k], v)
				}
			}
			for k := range gotTree {
				if _, ok := wantTree[k]; !ok {
					t.Errorf("unexpected %s = %q", k, gotTree[k])
				}
			}
		})
	}
}

func TestMergeTreesConflictDetails(t *testing.T) {
	s := newStore(t)
	b := ingestSpec(t, s, fileSpec{"f": "base\n"})
	o := ingestSpec(t, s, fileSpec{})
	th := ingestSpec(t, s, fileSpec{"f": "theirs\n"})
	res, err := s.MergeTrees(t.Context(), b, o, th, MergeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Conflicts) != 1 {
		t.Fatalf("conflicts = %+v", res.Conflicts)
	}
	c := res.Conflicts[0]
	if c.Base == nil || c.Base.Digest != DigestOf([]byte("base\n")) || c.Ours != nil || c.Theirs == nil || c.Theirs.Digest != DigestOf([]byte("theirs\n")) {
		t.Fatalf("conflict sides = %+v / %+v / %+v", c.Base, c.Ours, c.Theirs)
	}
}

func TestMergeTreesLabelsAndLimits(t *testing.T) {
	s := newStore(t)
	b := ingestSpec(t, s, fileSpec{"f": "a\n"})
	o := ingestSpec(t, s, fileSpec{"f": "b\n"})
	th := ingestSpec(t, s, fileSpec{"f": "c\n"})

	res, err := s.MergeTrees(t.Context(), b, o, th, MergeOptions{OursLabel: "local", TheirsLabel: "build-server"})
	if err != nil {
		t.Fatal(err)
	}
	tr, _ := s.ReadTree(res.Tree)
	e, _ := tr.Lookup("f")
	data, _ := s.Read(e.Digest)
	if string(data) != "<<<<<<< local\nb\n=======\nc\n>>>>>>> build-server\n" {
		t.Fatalf("merged = %q", data)
	}

	// Above the size limit a text file is not merged.
	res, err = s.MergeTrees(t.Context(), b, o, th, MergeOptions{MaxTextSize: 1})
	if err != nil || len(res.Conflicts) != 1 || res.Conflicts[0].Kind != ConflictBinary {
		t.Fatalf("over the limit: %+v, %v", res.Conflicts, err)
	}
	if _, err := s.MergeTrees(t.Context(), b, o, th, MergeOptions{OursLabel: "two\nlines"}); err == nil {
		t.Fatal("a multi-line label was accepted")
	}
}

// TestMergeTreesLargeTextIsNotMerged uses the real 1 MB limit.
func TestMergeTreesLargeTextIsNotMerged(t *testing.T) {
	s := newStore(t)
	big := strings.Repeat("a line of text\n", MaxTextMergeSize/15+1)
	b := ingestSpec(t, s, fileSpec{"f": big})
	o := ingestSpec(t, s, fileSpec{"f": "ours\n" + big})
	th := ingestSpec(t, s, fileSpec{"f": big + "theirs\n"})
	res, err := s.MergeTrees(t.Context(), b, o, th, MergeOptions{})
	if err != nil || len(res.Conflicts) != 1 || res.Conflicts[0].Kind != ConflictBinary {
		t.Fatalf("large file: %+v, %v", res.Conflicts, err)
	}
}

func TestMergeTreeWithItselfIsClean(t *testing.T) {
	s := newStore(t)
	x := ingestSpec(t, s, projectSpec())
	for i, base := range []Digest{EmptyTree(), x, ingestSpec(t, s, fileSpec{"top00.txt": "other\n"})} {
		res, err := s.MergeTrees(t.Context(), base, x, x, MergeOptions{})
		if err != nil || !res.Clean() || res.Tree != x {
			t.Fatalf("base %d: %+v, %v", i, res, err)
		}
	}
}

func BenchmarkMergeTrees(b *testing.B) {
	s := newStore(b)
	base := fileSpec{}
	for i := range 500 {
		base[fmt.Sprintf("d%d/f%d", i%20, i)] = strings.Repeat(fmt.Sprintf("line %d\n", i), 20)
	}
	ours, theirs := maps.Clone(base), maps.Clone(base)
	ours["d1/f1"] = "ours\n" + base["d1/f1"]
	theirs["d1/f1"] = base["d1/f1"] + "theirs\n"
	theirs["d2/f2"] = "changed\n"
	bd, od, td := ingestSpec(b, s, base), ingestSpec(b, s, ours), ingestSpec(b, s, theirs)
	for b.Loop() {
		if _, err := s.MergeTrees(b.Context(), bd, od, td, MergeOptions{}); err != nil {
			b.Fatal(err)
		}
	}
}

// A merge keeps the modes of what it merges: a private directory whose
// files both sides changed stays 0700, a 0600 file both sides edited stays
// 0600, and the bits each side changed are taken, bit by bit (ours took
// o-r from 0644, theirs made it 0755: 0751), the executable bit as before. A mode lost here is a chmod a pull does to local files.
func TestMergeKeepsModes(t *testing.T) {
	s := newStore(t)
	tree := func(spec fileSpec, modes map[string]fs.FileMode) Digest {
		t.Helper()
		dir := t.TempDir()
		writeSpec(t, dir, spec)
		for p, m := range modes {
			if err := os.Chmod(filepath.Join(dir, p), m); err != nil {
				t.Fatal(err)
			}
		}
		d, problems, err := s.Ingest(t.Context(), dir)
		if err != nil || len(problems) > 0 {
			t.Fatal(err, problems)
		}
		return d
	}
	text := "one\ntwo\nthree\nfour\nfive\nsix\n"
	private := map[string]fs.FileMode{"private": 0o700, "private/key": 0o600}
	base := tree(fileSpec{"private/a": "a\n", "private/key": text, "tool": "t\n"}, private)
	ours := tree(fileSpec{"private/a": "a ours\n", "private/key": "ONE\n" + text[4:], "tool": "t\n"},
		map[string]fs.FileMode{"private": 0o700, "private/key": 0o600, "tool": 0o640})
	theirs := tree(fileSpec{"private/a": "a\n", "private/b": "b\n", "private/key": text[:len(text)-4] + "SIX\n", "tool": "t\n"},
		map[string]fs.FileMode{"private": 0o700, "private/key": 0o600, "tool": 0o755})
	res, err := s.MergeTrees(t.Context(), base, ours, theirs, MergeOptions{})
	if err != nil || !res.Clean() {
		t.Fatalf("merge: %v %+v", err, res.Conflicts)
	}
	flat, err := s.Flatten(t.Context(), res.Tree)
	if err != nil {
		t.Fatal(err)
	}
	for p, want := range map[string]fs.FileMode{"private": 0o700, "private/key": 0o600, "private/b": 0o644, "tool": 0o751} {
		if got := flat[p].Perm(); got != want {
			t.Errorf("%s: mode %#o after the merge, want %#o", p, got, want)
		}
	}
}
