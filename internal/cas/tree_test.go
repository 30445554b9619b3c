package cas

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
)

// The tree vector: bytes and hash computed independently (see
// canonicalVectors).
const (
	treeVectorBytes = `{"entries":[` +
		`{"digest":{"hash":"5891b5b522d5df086d0ff0b110fbd9d21bb4fc7163af34d08286a2e846f6be03","size":6},"exec":false,"name":"README.md","type":"file"},` +
		`{"digest":{"hash":"e99e2daeea0e0f16c0f30cdc9e972496517dd0f600ea633080acaaed03bd4beb","size":28},"name":"bin","type":"dir"},` +
		`{"name":"link","target":"README.md","type":"symlink"},` +
		`{"digest":{"hash":"a8076d3d28d21e02012b20eaf7dbf75409a6277134439025f282e368e3305abf","size":10},"exec":true,"name":"run.sh","type":"file"}` +
		`],"kind":"tree"}`
	treeVectorHash = "90728625f4ddf96673469c6e28495a85bd258b4437e4b9c316df42bc8b3158ff"
	emptyTreeHash  = "e99e2daeea0e0f16c0f30cdc9e972496517dd0f600ea633080acaaed03bd4beb"
)

func vectorTree() Tree {
	return Tree{Entries: []Entry{
		{Name: "README.md", Type: EntryFile, Digest: DigestOf([]byte("hello\n"))},
		{Name: "bin", Type: EntryDir, Digest: EmptyTree()},
		{Name: "link", Type: EntrySymlink, Target: "README.md"},
		{Name: "run.sh", Type: EntryFile, Digest: DigestOf([]byte("#!/bin/sh\n")), Executable: true},
	}}
}

func TestTreeVector(t *testing.T) {
	if EmptyTree() != (Digest{emptyTreeHash, 28}) {
		t.Fatalf("EmptyTree() = %v", EmptyTree())
	}
	data, err := vectorTree().Encode()
	if err != nil {
		t.Fatal(err)
	}
	if string(data) != treeVectorBytes {
		t.Fatalf("Encode =\n%s\nwant\n%s", data, treeVectorBytes)
	}
	if d := DigestOf(data); d.Hash != treeVectorHash || d.Size != int64(len(treeVectorBytes)) {
		t.Fatalf("digest = %v", d)
	}
	back, err := DecodeTree(data)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(back.Entries, vectorTree().Entries) {
		t.Fatalf("DecodeTree = %+v", back)
	}
	if e, ok := back.Lookup("link"); !ok || e.Target != "README.md" {
		t.Fatalf("Lookup(link) = %+v, %v", e, ok)
	}
	if _, ok := back.Lookup("nope"); ok {
		t.Fatal("Lookup found a missing name")
	}
}

func TestSnapshotVector(t *testing.T) {
	const want = `{"kind":"snapshot","message":"first push","parents":[],"root":{"hash":"e99e2daeea0e0f16c0f30cdc9e972496517dd0f600ea633080acaaed03bd4beb","size":28},"time_unix_ns":1700000000123456789}`
	data, err := Snapshot{Root: EmptyTree(), Time: 1700000000123456789, Message: "first push"}.Encode()
	if err != nil {
		t.Fatal(err)
	}
	if string(data) != want {
		t.Fatalf("Encode = %s", data)
	}
	if d := DigestOf(data); d.Hash != "a26c07eb6efd46b52fc6e1b09798abd0192f1cd72fe571e560c72c3575e21d13" {
		t.Fatalf("digest = %v", d)
	}
	// A float time is refused.
	bad := strings.Replace(want, "1700000000123456789", "1.7e18", 1)
	if _, err := DecodeSnapshot([]byte(bad)); !errors.Is(err, ErrNotCanonical) {
		t.Fatalf("DecodeSnapshot with a float time: %v", err)
	}
}

// rawEntry builds an entry for putRaw / MarshalCanonical without checks.
func rawFile(name string) map[string]any {
	return map[string]any{"name": name, "type": "file", "exec": false, "digest": digestJSON(DigestOf([]byte("x")))}
}

func rawDir(name string) map[string]any {
	return map[string]any{"name": name, "type": "dir", "digest": digestJSON(EmptyTree())}
}

func rawLink(name, target string) map[string]any {
	return map[string]any{"name": name, "type": "symlink", "target": target}
}

func rawTree(entries ...map[string]any) map[string]any {
	list := make([]any, len(entries))
	for i, e := range entries {
		list[i] = e
	}
	return map[string]any{"kind": "tree", "entries": list}
}

// badTrees are structurally invalid trees a hostile peer could send; the
// decoder refuses each one.
var badTrees = map[string]map[string]any{
	"absolute name":          rawTree(rawFile("/etc")),
	"dot-dot name":           rawTree(rawFile("..")),
	"dot name":               rawTree(rawDir(".")),
	"empty name":             rawTree(rawFile("")),
	"slash in name":          rawTree(rawFile("a/b")),
	"NUL in name":            rawTree(rawFile("a\x00b")),
	"long name":              rawTree(rawFile(strings.Repeat("n", MaxNameLen+1))),
	"file/dir clash":         rawTree(rawFile("a"), rawDir("a")),
	"duplicate file":         rawTree(rawFile("a"), rawFile("a")),
	"link over dir":          rawTree(rawLink("a", "b"), rawDir("a")),
	"unsorted":               rawTree(rawFile("b"), rawFile("a")),
	"absolute link":          rawTree(rawLink("l", "/etc/passwd")),
	"dot-dot after a name":   rawTree(rawLink("l", "sub/../../x")),
	"empty link":             rawTree(rawLink("l", "")),
	"NUL in link":            rawTree(rawLink("l", "a\x00")),
	"unknown type":           rawTree(map[string]any{"name": "a", "type": "fifo"}),
	"exec on dir":            rawTree(map[string]any{"name": "a", "type": "dir", "exec": true, "digest": digestJSON(EmptyTree())}),
	"target on file":         rawTree(map[string]any{"name": "a", "type": "file", "exec": false, "target": "x", "digest": digestJSON(EmptyTree())}),
	"file without exec":      rawTree(map[string]any{"name": "a", "type": "file", "digest": digestJSON(EmptyTree())}),
	"uppercase digest":       rawTree(map[string]any{"name": "a", "type": "file", "exec": false, "digest": map[string]any{"hash": strings.ToUpper(emptyTreeHash), "size": int64(28)}}),
	"digest with extra":      rawTree(map[string]any{"name": "a", "type": "file", "exec": false, "digest": map[string]any{"hash": emptyTreeHash, "size": int64(28), "x": true}}),
	"wrong kind":             {"kind": "snapshot", "entries": []any{}},
	"unknown top-level key":  {"kind": "tree", "entries": []any{}, "extra": int64(1)},
	"entries not array":      {"kind": "tree", "entries": "x"},
	"entry not object":       {"kind": "tree", "entries": []any{"x"}},
	"symlink with a digest":  rawTree(map[string]any{"name": "l", "type": "symlink", "target": "x", "digest": digestJSON(EmptyTree())}),
	"negative size":          rawTree(map[string]any{"name": "a", "type": "file", "exec": false, "digest": map[string]any{"hash": emptyTreeHash, "size": int64(-1)}}),
	"non-canonical spelling": nil, // handled below: valid tree, extra whitespace
}

func TestDecodeTreeRefuses(t *testing.T) {
	for name, v := range badTrees {
		t.Run(name, func(t *testing.T) {
			var data []byte
			if v == nil {
				data = []byte(`{"entries": [],"kind":"tree"}`)
			} else {
				var err error
				if data, err = MarshalCanonical(v); err != nil {
					t.Fatal(err)
				}
			}
			if tr, err := DecodeTree(data); err == nil {
				t.Fatalf("DecodeTree accepted %s: %+v", data, tr)
			}
		})
	}
}

func TestEncodeTreeRefuses(t *testing.T) {
	bad := []Tree{
		{Entries: []Entry{{Name: "b", Type: EntryFile, Digest: EmptyTree()}, {Name: "a", Type: EntryFile, Digest: EmptyTree()}}},
		{Entries: []Entry{{Name: "..", Type: EntryDir, Digest: EmptyTree()}}},
		{Entries: []Entry{{Name: "l", Type: EntrySymlink, Target: "/abs"}}},
		{Entries: []Entry{{Name: "f", Type: EntryFile}}},
	}
	for i, tr := range bad {
		if _, err := tr.Encode(); err == nil {
			t.Errorf("tree %d encoded", i)
		}
	}
}

func TestValidateSymlinkAt(t *testing.T) {
	tests := []struct {
		target string
		depth  int
		ok     bool
	}{
		{"x", 0, true},
		{"./x", 0, true},
		{"a/b/c", 0, true},
		{"../x", 1, true},
		{"../../x", 1, false},
		{"../x", 0, false},
		{"..", 0, false},
		{"..", 1, true},
		{"a/../b", 3, false},
		{"/x", 5, false},
		{"", 0, false},
		{"a//b/", 0, true},
	}
	for _, tt := range tests {
		err := ValidateSymlinkAt(tt.target, tt.depth)
		if tt.ok != (err == nil) {
			t.Errorf("ValidateSymlinkAt(%q, %d) = %v, want ok=%v", tt.target, tt.depth, err, tt.ok)
		}
	}
}

// FuzzDecodeTree: never panics, and whatever decodes re-encodes to the same
// bytes (so a tree has one digest).
func FuzzDecodeTree(f *testing.F) {
	f.Add([]byte(treeVectorBytes))
	f.Add([]byte(`{"entries":[],"kind":"tree"}`))
	for _, v := range badTrees {
		if data, err := MarshalCanonical(v); err == nil {
			f.Add(data)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		tr, err := DecodeTree(data)
		if err != nil {
			return
		}
		again, err := tr.Encode()
		if err != nil {
			t.Fatalf("decoded tree does not encode: %v", err)
		}
		if !bytes.Equal(again, data) {
			t.Fatalf("decoded %q, re-encoded %q", data, again)
		}
	})
}

func TestIngestAndMaterializeRoundTrip(t *testing.T) {
	s := newStore(t)
	spec := fileSpec{
		"README":         "hello\n",
		"bin/run.sh":     "x:#!/bin/sh\necho hi\n",
		"bin/link":       "->run.sh",
		"lib/a/b/deep":   "deep\n",
		"lib/up":         "->../README",
		"empty/":         "",
		"big.bin":        strings.Repeat("0123456789abcdef", 200000), // > smallFile: streamed
		"lib/a/b/same":   "hello\n",
		"names/é€ x":     "unicode name\n",
		"names/.hidden":  "",
		"names/-dash":    "dash\n",
		"zero/empty.txt": "",
	}
	root := ingestSpec(t, s, spec)

	// The same content ingests to the same digest; an unchanged subtree
	// keeps its digest when something beside it changes.
	if again := ingestSpec(t, s, spec); again != root {
		t.Fatalf("re-ingest gave %v, want %v", again, root)
	}
	top, _ := s.ReadTree(root)
	libBefore, _ := top.Lookup("lib")
	changed := fileSpec{}
	for k, v := range spec {
		changed[k] = v
	}
	changed["README"] = "changed\n"
	root2 := ingestSpec(t, s, changed)
	top2, _ := s.ReadTree(root2)
	libAfter, _ := top2.Lookup("lib")
	if root2 == root || libAfter.Digest != libBefore.Digest {
		t.Fatalf("root %v→%v, lib %v→%v: want root changed, lib unchanged", root, root2, libBefore.Digest, libAfter.Digest)
	}

	dest := filepath.Join(t.TempDir(), "out")
	if err := s.Materialize(t.Context(), root, dest); err != nil {
		t.Fatal(err)
	}
	got := readSpec(t, dest)
	if len(got) != len(spec) {
		t.Errorf("materialized %d paths, want %d", len(got), len(spec))
	}
	for k, v := range spec {
		if got[k] != v {
			t.Errorf("%s = %.40q, want %.40q", k, got[k], v)
		}
	}
}

func TestIngestReportsWhatItCannotTake(t *testing.T) {
	s := newStore(t)
	dir := t.TempDir()
	writeSpec(t, dir, fileSpec{
		"ok.txt":          "fine\n",
		"abs-link":        "->/etc/passwd",
		"escaping-link":   "->../outside",
		"sub/deep-escape": "->../../outside",
		"sub/fine-link":   "->../ok.txt",
		"sub/odd-link":    "->x/../../ok.txt",
	})
	if err := syscall.Mkfifo(filepath.Join(dir, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "bad\xffname"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	root, problems, err := s.Ingest(t.Context(), dir)
	if err != nil {
		t.Fatal(err)
	}
	var paths []string
	for _, p := range problems {
		paths = append(paths, p.Path)
	}
	want := []string{"abs-link", "bad\xffname", "escaping-link", "fifo", "sub/deep-escape", "sub/odd-link"}
	if !slices.Equal(paths, want) {
		t.Fatalf("problems = %q, want %q", paths, want)
	}
	out := filepath.Join(t.TempDir(), "out")
	if err := s.Materialize(t.Context(), root, out); err != nil {
		t.Fatal(err)
	}
	got := readSpec(t, out)
	if len(got) != 2 || got["ok.txt"] != "fine\n" || got["sub/fine-link"] != "->../ok.txt" {
		t.Fatalf("materialized %v", got)
	}
}

// TestIngestReportsUnreadableFiles needs a file the ingesting user cannot
// read. As root every file is readable, so the ingest then runs in a
// helper process as the unprivileged user nobody.
func TestIngestReportsUnreadableFiles(t *testing.T) {
	base, err := os.MkdirTemp("", "rex-cas-unreadable-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	dir := filepath.Join(base, "tree")
	writeSpec(t, dir, fileSpec{"readable": "yes\n", "secret": "no\n", "closed/inner": "no\n"})
	if err := os.Chmod(filepath.Join(dir, "secret"), 0); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(dir, "closed"), 0); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Chmod(filepath.Join(dir, "closed"), 0o755) })

	var got []string
	if os.Geteuid() != 0 {
		s := newStore(t)
		_, problems, err := s.Ingest(t.Context(), dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range problems {
			got = append(got, p.Path)
		}
	} else {
		const nobody = 65534
		store := filepath.Join(base, "cas")
		for _, p := range []string{base, dir} {
			if err := os.Chmod(p, 0o755); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.MkdirAll(store, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(store, nobody, nobody); err != nil {
			t.Fatal(err)
		}
		// The test binary sits in a private build directory; nobody needs
		// a copy it can execute.
		exe := filepath.Join(base, "cas.test")
		bin, err := os.ReadFile(os.Args[0])
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(exe, bin, 0o755); err != nil {
			t.Fatal(err)
		}
		cmd := helperCmd(t, "ingest", helperArgs{Store: store, Dir: dir})
		cmd.Path, cmd.Args[0] = exe, exe
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("helper as nobody: %v: %s", err, out)
		}
		got = strings.Fields(string(out))
	}
	if want := []string{"closed", "secret"}; !slices.Equal(got, want) {
		t.Fatalf("problems = %q, want %q", got, want)
	}
}

func TestIngestInStaysInsideTheRoot(t *testing.T) {
	s := newStore(t)
	base := t.TempDir()
	outside := t.TempDir()
	writeSpec(t, base, fileSpec{"proj/f": "inside\n", "escape": "->" + outside})
	writeSpec(t, outside, fileSpec{"secret": "outside\n"})
	r, err := os.OpenRoot(base)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	d, problems, err := s.IngestIn(t.Context(), r, "proj", IngestOptions{})
	if err != nil || len(problems) > 0 {
		t.Fatalf("IngestIn(proj) = %v, %v", problems, err)
	}
	if tr, _ := s.ReadTree(d); len(tr.Entries) != 1 || tr.Entries[0].Name != "f" {
		t.Fatalf("tree = %+v", tr)
	}
	for _, name := range []string{"escape", "../" + filepath.Base(outside), "/etc"} {
		if _, _, err := s.IngestIn(t.Context(), r, name, IngestOptions{}); err == nil {
			t.Errorf("IngestIn(%q) read outside the root", name)
		}
	}
}
