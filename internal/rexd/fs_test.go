package rexd_test

import (
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/rexconsole/rex/internal/protocol"
)

func TestFSReadWrite(t *testing.T) {
	h := start(t)
	sid := h.open()
	var w protocol.FSWriteResult
	h.ok(protocol.MethodFSWrite, protocol.FSWriteParams{SessionID: sid, Path: "a/b/c.txt", Content: "hello\n", MkdirParents: true}, &w)
	if !w.Created || w.BytesWritten != 6 || w.Path != filepath.Join(h.root, "a/b/c.txt") {
		t.Errorf("write result %+v", w)
	}
	var r protocol.FSReadResult
	h.ok(protocol.MethodFSRead, protocol.FSReadParams{SessionID: sid, Path: "a/b/c.txt"}, &r)
	if r.Content != "hello\n" || r.Encoding != "utf8" || r.Size != 6 || r.Truncated || r.Mtime != w.Mtime {
		t.Errorf("read result %+v (write mtime %s)", r, w.Mtime)
	}
	// offset/length and truncation
	n := int64(2)
	h.ok(protocol.MethodFSRead, protocol.FSReadParams{SessionID: sid, Path: "a/b/c.txt", Offset: 1, Length: &n}, &r)
	if r.Content != "el" || !r.Truncated {
		t.Errorf("ranged read %+v", r)
	}
	// binary content round-trips as base64
	bin := []byte{0, 1, 2, 0xff, 0xfe, '\n'}
	h.ok(protocol.MethodFSWrite, protocol.FSWriteParams{SessionID: sid, Path: "bin", Content: base64.StdEncoding.EncodeToString(bin), Encoding: "base64"}, nil)
	h.ok(protocol.MethodFSRead, protocol.FSReadParams{SessionID: sid, Path: "bin"}, &r)
	if r.Encoding != "base64" {
		t.Errorf("binary read as %s", r.Encoding)
	}
	if got, _ := base64.StdEncoding.DecodeString(r.Content); string(got) != string(bin) {
		t.Errorf("binary round trip: %x", got)
	}
	// append
	h.ok(protocol.MethodFSWrite, protocol.FSWriteParams{SessionID: sid, Path: "a/b/c.txt", Content: "more\n", Mode: "append"}, &w)
	if b, _ := os.ReadFile(filepath.Join(h.root, "a/b/c.txt")); string(b) != "hello\nmore\n" || w.Created {
		t.Errorf("append: %q created=%v", b, w.Created)
	}
	// create refuses an existing file with -32006, and changes nothing
	h.fails(protocol.MethodFSWrite, protocol.FSWriteParams{SessionID: sid, Path: "a/b/c.txt", Content: "x", Mode: "create"}, protocol.CodeConcurrencyConflict)
	h.fails(protocol.MethodFSWrite, protocol.FSWriteParams{SessionID: sid, Path: "a/b/c.txt", Content: "x", Mode: "create", Atomic: new(bool)}, protocol.CodeConcurrencyConflict)
	if b, _ := os.ReadFile(filepath.Join(h.root, "a/b/c.txt")); string(b) != "hello\nmore\n" {
		t.Errorf("a refused create changed the file: %q", b)
	}
	// expected_mtime: the right one succeeds, a stale one is -32006
	var st protocol.FSStatResult
	h.ok(protocol.MethodFSStat, protocol.FSStatParams{SessionID: sid, Path: "a/b/c.txt"}, &st)
	h.ok(protocol.MethodFSWrite, protocol.FSWriteParams{SessionID: sid, Path: "a/b/c.txt", Content: "v2\n", ExpectedMtime: st.Mtime}, nil)
	e := h.fails(protocol.MethodFSWrite, protocol.FSWriteParams{SessionID: sid, Path: "a/b/c.txt", Content: "v3\n", ExpectedMtime: st.Mtime}, protocol.CodeConcurrencyConflict)
	var cd protocol.ConflictData
	json.Unmarshal(e.Data, &cd)
	if cd.Reason != "mtime_mismatch" || cd.ActualMtime == "" {
		t.Errorf("conflict data %s", e.Data)
	}
	if b, _ := os.ReadFile(filepath.Join(h.root, "a/b/c.txt")); string(b) != "v2\n" {
		t.Errorf("stale write changed the file: %q", b)
	}
	// without mkdir_parents a missing directory is an error
	h.fails(protocol.MethodFSWrite, protocol.FSWriteParams{SessionID: sid, Path: "x/y/z", Content: "q"}, protocol.CodeInvalidParams)
	// a replace keeps the file's permissions
	os.Chmod(filepath.Join(h.root, "a/b/c.txt"), 0o600)
	h.ok(protocol.MethodFSWrite, protocol.FSWriteParams{SessionID: sid, Path: "a/b/c.txt", Content: "v4\n"}, nil)
	if fi, _ := os.Stat(filepath.Join(h.root, "a/b/c.txt")); fi.Mode().Perm() != 0o600 {
		t.Errorf("replace changed the mode to %v", fi.Mode().Perm())
	}
	// no temp files left behind
	ents, _ := os.ReadDir(filepath.Join(h.root, "a/b"))
	if len(ents) != 1 {
		t.Errorf("leftover files: %v", ents)
	}
	h.fails(protocol.MethodFSRead, protocol.FSReadParams{SessionID: sid, Path: "a"}, protocol.CodeInvalidParams)
	h.fails(protocol.MethodFSRead, protocol.FSReadParams{SessionID: sid, Path: "missing"}, protocol.CodeInvalidParams)
	h.fails(protocol.MethodFSWrite, protocol.FSWriteParams{SessionID: sid, Path: "m", Content: "x", Mode: "upsert"}, protocol.CodeInvalidParams)
}

func TestFSReadCap(t *testing.T) {
	h := start(t, "--limit", "max_file_read_bytes=10")
	sid := h.open()
	os.WriteFile(filepath.Join(h.root, "big"), []byte(strings.Repeat("z", 100)), 0o644)
	var r protocol.FSReadResult
	big := int64(1000)
	h.ok(protocol.MethodFSRead, protocol.FSReadParams{SessionID: sid, Path: "big", Length: &big}, &r)
	if len(r.Content) != 10 || !r.Truncated || r.Size != 100 {
		t.Errorf("capped read: %d bytes truncated=%v size=%d", len(r.Content), r.Truncated, r.Size)
	}
}

func TestFSStatListGlob(t *testing.T) {
	h := start(t)
	sid := h.open()
	for _, p := range []string{"src/main.go", "src/util/util.go", "src/util/util_test.go", "README.md"} {
		full := filepath.Join(h.root, p)
		os.MkdirAll(filepath.Dir(full), 0o755)
		os.WriteFile(full, []byte(p), 0o644)
	}
	os.Symlink("README.md", filepath.Join(h.root, "link"))
	var st protocol.FSStatResult
	h.ok(protocol.MethodFSStat, protocol.FSStatParams{SessionID: sid, Path: "link"}, &st)
	if !st.Exists || st.SymlinkTarget != "README.md" || st.Type != "file" || st.Size != 9 || st.UID == nil {
		t.Errorf("stat of a symlink: %+v", st)
	}
	h.ok(protocol.MethodFSStat, protocol.FSStatParams{SessionID: sid, Path: "nope"}, &st)
	if st.Exists {
		t.Error("missing file reported as existing")
	}
	h.ok(protocol.MethodFSStat, protocol.FSStatParams{SessionID: sid, Path: "src"}, &st)
	if st.Type != "dir" || st.Mode != "0755" {
		t.Errorf("stat dir %+v", st)
	}

	var l protocol.FSListResult
	h.ok(protocol.MethodFSList, protocol.FSListParams{SessionID: sid, Path: "."}, &l)
	names := []string{}
	for _, e := range l.Entries {
		names = append(names, e.Name+":"+e.Type)
	}
	if strings.Join(names, " ") != "README.md:file link:symlink src:dir" {
		t.Errorf("list = %v", names)
	}
	for _, e := range l.Entries {
		if e.Type == "dir" && e.Size != nil {
			t.Error("a directory has a size")
		}
		if e.Type == "file" && (e.Size == nil || *e.Size != 9) {
			t.Error("a file lacks its size")
		}
	}
	h.ok(protocol.MethodFSList, protocol.FSListParams{SessionID: sid, Path: "src", Recursive: true}, &l)
	if len(l.Entries) != 4 || l.Entries[0].Path != filepath.Join(h.root, "src/main.go") {
		t.Errorf("recursive list = %+v", l.Entries)
	}
	h.ok(protocol.MethodFSList, protocol.FSListParams{SessionID: sid, Path: "src", Recursive: true, MaxEntries: 2}, &l)
	if len(l.Entries) != 2 || !l.Truncated {
		t.Errorf("max_entries: %d truncated=%v", len(l.Entries), l.Truncated)
	}
	h.fails(protocol.MethodFSList, protocol.FSListParams{SessionID: sid, Path: "README.md"}, protocol.CodeInvalidParams)

	tests := []struct {
		pattern string
		want    []string
	}{
		{"src/*.go", []string{"src/main.go"}},
		{"**/*_test.go", []string{"src/util/util_test.go"}},
		{"src/**/*.go", []string{"src/main.go", "src/util/util.go", "src/util/util_test.go"}},
		{"*.md", []string{"README.md"}},
		{"README.md", []string{"README.md"}},
		{"nothing*", nil},
	}
	for _, tt := range tests {
		var g protocol.FSGlobResult
		h.ok(protocol.MethodFSGlob, protocol.FSGlobParams{SessionID: sid, Pattern: tt.pattern}, &g)
		var want []string
		for _, w := range tt.want {
			want = append(want, filepath.Join(h.root, w))
		}
		sort.Strings(want)
		if strings.Join(g.Matches, ",") != strings.Join(want, ",") {
			t.Errorf("glob %q = %v, want %v", tt.pattern, g.Matches, want)
		}
	}
	var g protocol.FSGlobResult
	h.ok(protocol.MethodFSGlob, protocol.FSGlobParams{SessionID: sid, Pattern: "*.go", Cwd: "src/util"}, &g)
	if len(g.Matches) != 2 {
		t.Errorf("glob with cwd = %v", g.Matches)
	}
	h.ok(protocol.MethodFSGlob, protocol.FSGlobParams{SessionID: sid, Pattern: "**", MaxMatches: 3}, &g)
	if len(g.Matches) != 3 || !g.Truncated {
		t.Errorf("max_matches: %v", g)
	}
	h.fails(protocol.MethodFSGlob, protocol.FSGlobParams{SessionID: sid, Pattern: "[", MaxMatches: 3}, protocol.CodeInvalidParams)
}

// TestPathEscapes tries every way out of the root with every file method
// and with exec's cwd: each is -32002 and nothing is created outside.
func TestPathEscapes(t *testing.T) {
	h := start(t)
	sid := h.open()
	outside := t.TempDir()
	os.WriteFile(filepath.Join(outside, "secret"), []byte("top secret"), 0o644)
	os.Symlink(filepath.Join(outside, "secret"), filepath.Join(h.root, "filelink"))
	os.Symlink(outside, filepath.Join(h.root, "dirlink"))
	os.Symlink("../"+filepath.Base(outside), filepath.Join(h.root, "rellink"))

	paths := map[string]string{
		"absolute":          filepath.Join(outside, "secret"),
		"dotdot":            "../" + filepath.Base(outside) + "/secret",
		"dotdot inside":     "sub/../../" + filepath.Base(outside) + "/secret",
		"symlinked file":    "filelink",
		"symlinked dir":     "dirlink/secret",
		"relative symlink":  "rellink/secret",
		"home outside root": "/etc/passwd",
	}
	dirs := map[string]string{
		"absolute":         outside,
		"dotdot":           "..",
		"symlinked dir":    "dirlink",
		"relative symlink": "rellink",
	}
	for name, p := range paths {
		t.Run(name, func(t *testing.T) {
			h := h.with(t)
			h.fails(protocol.MethodFSRead, protocol.FSReadParams{SessionID: sid, Path: p}, protocol.CodeForbiddenPath)
			h.fails(protocol.MethodFSStat, protocol.FSStatParams{SessionID: sid, Path: p}, protocol.CodeForbiddenPath)
			for _, mode := range []string{"replace", "create", "append"} {
				h.fails(protocol.MethodFSWrite, protocol.FSWriteParams{SessionID: sid, Path: p, Content: "pwned", Mode: mode}, protocol.CodeForbiddenPath)
				if strings.Contains(p, "/") { // a new file in the same (outside) directory
					h.fails(protocol.MethodFSWrite, protocol.FSWriteParams{SessionID: sid, Path: p + "-new", Content: "pwned", Mode: mode, MkdirParents: true}, protocol.CodeForbiddenPath)
				}
			}
			if strings.Contains(p, "/") { // a glob of the link's own name lists it, which is fine
				h.fails(protocol.MethodFSGlob, protocol.FSGlobParams{SessionID: sid, Pattern: p + "*"}, protocol.CodeForbiddenPath)
			}
		})
	}
	for name, d := range dirs {
		t.Run("dir "+name, func(t *testing.T) {
			h := h.with(t)
			h.fails(protocol.MethodFSList, protocol.FSListParams{SessionID: sid, Path: d}, protocol.CodeForbiddenPath)
			h.fails(protocol.MethodFSList, protocol.FSListParams{SessionID: sid, Path: d, Recursive: true}, protocol.CodeForbiddenPath)
			h.fails(protocol.MethodFSGlob, protocol.FSGlobParams{SessionID: sid, Pattern: "*", Cwd: d}, protocol.CodeForbiddenPath)
			h.fails(protocol.MethodExecStart, protocol.ExecStartParams{SessionID: sid, Argv: []string{"touch", "pwned"}, Cwd: d}, protocol.CodeForbiddenPath)
			h.fails(protocol.MethodPTYOpen, protocol.PTYOpenParams{SessionID: sid, Argv: []string{"touch", "pwned"}, Cwd: d}, protocol.CodeForbiddenPath)
		})
	}
	e := h.fails(protocol.MethodFSRead, protocol.FSReadParams{SessionID: sid, Path: "/etc/passwd"}, protocol.CodeForbiddenPath)
	var fd protocol.ForbiddenPathData
	json.Unmarshal(e.Data, &fd)
	if fd.Path != "/etc/passwd" || len(fd.AllowedRoots) != 1 || fd.AllowedRoots[0] != h.root {
		t.Errorf("forbidden_path data = %s", e.Data)
	}
	// Nothing was written outside, nothing was changed.
	ents, _ := os.ReadDir(outside)
	if len(ents) != 1 {
		t.Errorf("files appeared outside the root: %v", ents)
	}
	if b, _ := os.ReadFile(filepath.Join(outside, "secret")); string(b) != "top secret" {
		t.Errorf("the outside file changed: %q", b)
	}
	// A recursive listing of the root shows the links but never follows them.
	var l protocol.FSListResult
	h.ok(protocol.MethodFSList, protocol.FSListParams{SessionID: sid, Path: ".", Recursive: true}, &l)
	for _, e := range l.Entries {
		if strings.Contains(e.Path, "secret") {
			t.Errorf("recursive list followed a link outside: %s", e.Path)
		}
	}
	var g protocol.FSGlobResult
	h.ok(protocol.MethodFSGlob, protocol.FSGlobParams{SessionID: sid, Pattern: "**/secret"}, &g)
	if len(g.Matches) != 0 {
		t.Errorf("glob found files outside: %v", g.Matches)
	}
}

func TestFSInsideSymlinksWork(t *testing.T) {
	h := start(t)
	sid := h.open()
	os.MkdirAll(filepath.Join(h.root, "real"), 0o755)
	os.WriteFile(filepath.Join(h.root, "real/f"), []byte("inside"), 0o644)
	os.Symlink("real", filepath.Join(h.root, "alias"))
	var r protocol.FSReadResult
	h.ok(protocol.MethodFSRead, protocol.FSReadParams{SessionID: sid, Path: "alias/f"}, &r)
	if r.Content != "inside" {
		t.Errorf("read through an inside link: %q", r.Content)
	}
	out, _, _ := h.run(sid, protocol.ExecStartParams{Argv: []string{"cat", "f"}, Cwd: "alias"})
	if out != "inside" {
		t.Errorf("cwd through an inside link: %q", out)
	}
}

// TestFSGlobManyDoubleStars: a pattern of many ** segments, which an
// agent's read-only glob tool passes on as it is, is matched in steps
// polynomial in the pattern and the path. Matched by plain recursion, every
// way of spreading the path's segments over the **s was tried: forty of
// them against a path twelve deep are about 10^11 tries for one entry, a
// host's CPU held for hours by one call that asks nobody.
func TestFSGlobManyDoubleStars(t *testing.T) {
	h := start(t)
	sid := h.open()
	deep := filepath.Join(h.root, "a/b/c/d/e/f/g/h/i/j/k/l")
	os.MkdirAll(deep, 0o755)
	os.WriteFile(filepath.Join(deep, "leaf.txt"), nil, 0o644)
	for _, tt := range []struct {
		pattern string
		want    int
	}{
		{strings.Repeat("**/", 40) + "nomatch", 0},
		{strings.Repeat("**/", 40) + "leaf.txt", 1},
		{"**/b/**/" + strings.Repeat("*/**/", 10) + "leaf.txt", 1},
	} {
		var g protocol.FSGlobResult
		h.ok(protocol.MethodFSGlob, protocol.FSGlobParams{SessionID: sid, Pattern: tt.pattern}, &g)
		if len(g.Matches) != tt.want {
			t.Errorf("glob %q = %v, want %d matches", tt.pattern, g.Matches, tt.want)
		}
	}
}
