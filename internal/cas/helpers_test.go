package cas

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func newStore(t testing.TB) *Store {
	t.Helper()
	s, err := Open(filepath.Join(t.TempDir(), "cas"))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// fileSpec describes a directory to create: path → content. A content of
// "->TARGET" makes a symlink, "x:CONTENT" an executable file, a path ending
// in "/" an empty directory.
type fileSpec map[string]string

func writeSpec(t testing.TB, dir string, spec fileSpec) {
	t.Helper()
	for p, content := range spec {
		full := filepath.Join(dir, filepath.FromSlash(p))
		if strings.HasSuffix(p, "/") {
			if err := os.MkdirAll(full, 0o755); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		os.Remove(full)
		var err error
		switch {
		case strings.HasPrefix(content, "->"):
			err = os.Symlink(content[2:], full)
		case strings.HasPrefix(content, "x:"):
			err = os.WriteFile(full, []byte(content[2:]), 0o755)
			if err == nil {
				err = os.Chmod(full, 0o755)
			}
		default:
			err = os.WriteFile(full, []byte(content), 0o644)
			if err == nil {
				err = os.Chmod(full, 0o644)
			}
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

// readSpec reads a directory back into the fileSpec form.
func readSpec(t testing.TB, dir string) fileSpec {
	t.Helper()
	got := fileSpec{}
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		rel = filepath.ToSlash(rel)
		if rel == "." {
			return nil
		}
		info, err := os.Lstat(p)
		if err != nil {
			return err
		}
		switch {
		case info.Mode()&os.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			got[rel] = "->" + target
		case info.IsDir():
			entries, err := os.ReadDir(p)
			if err != nil {
				return err
			}
			if len(entries) == 0 {
				got[rel+"/"] = ""
			}
		default:
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			if info.Mode().Perm()&0o100 != 0 {
				got[rel] = "x:" + string(data)
			} else {
				got[rel] = string(data)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return got
}

func ingestSpec(t testing.TB, s *Store, spec fileSpec) Digest {
	t.Helper()
	dir := t.TempDir()
	writeSpec(t, dir, spec)
	root, problems, err := s.Ingest(t.Context(), dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(problems) > 0 {
		t.Fatalf("ingest problems: %v", problems)
	}
	return root
}

// putRaw stores a structured object built without Encode's checks, as a
// hostile peer could send it.
func putRaw(t testing.TB, s *Store, v any) Digest {
	t.Helper()
	data, err := MarshalCanonical(v)
	if err != nil {
		t.Fatal(err)
	}
	d, err := s.Add(data)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func mustAdd(t testing.TB, s *Store, content string) Digest {
	t.Helper()
	d, err := s.Add([]byte(content))
	if err != nil {
		t.Fatal(err)
	}
	return d
}
