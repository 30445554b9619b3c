package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// pushLine is one target's line of `rex push` output.
var pushLine = regexp.MustCompile(`^(\S+): (.+) → (\S+) \((\d+) quer(?:y|ies), ([\d.]+ \S+) out, ([\d.]+ \S+) in\)$`)

type pushResult struct {
	what    string
	path    string
	queries int
	out     string
}

func parsePush(t *testing.T, out string) map[string]pushResult {
	t.Helper()
	res := map[string]pushResult{}
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		m := pushLine.FindStringSubmatch(l)
		if m == nil {
			t.Fatalf("unexpected push line %q", l)
		}
		q, _ := strconv.Atoi(m[4])
		res[m[1]] = pushResult{what: m[2], path: m[3], queries: q, out: m[5]}
	}
	return res
}

// bytesOf turns "1.5 KiB" into a byte count.
func bytesOf(s string) float64 {
	f := strings.Fields(s)
	v, _ := strconv.ParseFloat(f[0], 64)
	switch f[1] {
	case "KiB":
		v *= 1 << 10
	case "MiB":
		v *= 1 << 20
	case "GiB":
		v *= 1 << 30
	}
	return v
}

// TestPushPullAcrossAFleet: a 5,000-file tree to 8 hosts; an unchanged
// re-push sends no file and asks one question; a one-file change sends
// one file per host; pull merges a remote change with a local one, and a
// conflicting change is reported and kept with markers.
func TestPushPullAcrossAFleet(t *testing.T) {
	f := newSSHFleet(t, 8, false)
	src := filepath.Join(f.home, "work", "site")
	for i := 0; i < 5000; i++ {
		p := filepath.Join(src, fmt.Sprintf("d%02d/s%02d/f%04d.txt", i%50, i%7, i))
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(fmt.Sprintf("file %d\nline two\n", i)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	os.WriteFile(filepath.Join(src, "run.sh"), []byte("#!/bin/sh\necho ran\n"), 0o755)
	os.Symlink("run.sh", filepath.Join(src, "start"))

	out, errOut, code := f.run("push", src, "site", "good")
	if code != 0 {
		t.Fatalf("first push: %d %s %s", code, out, errOut)
	}
	first := parsePush(t, out)
	for _, h := range f.healthy {
		r := first[h]
		if !strings.HasPrefix(r.what, "sent 5001 file(s)") || r.path != filepath.Join(f.hostHome(h), "site") {
			t.Errorf("%s first push: %+v", h, r)
		}
	}
	// The tree is really there, with its executable bit and its link.
	dest := filepath.Join(f.hostHome("h3"), "site")
	if b, _ := os.ReadFile(filepath.Join(dest, "d07/s00/f0007.txt")); string(b) != "file 7\nline two\n" {
		t.Errorf("pushed file content %q", b)
	}
	if fi, err := os.Stat(filepath.Join(dest, "run.sh")); err != nil || fi.Mode()&0o111 == 0 {
		t.Errorf("run.sh lost its executable bit: %v", err)
	}
	if l, _ := os.Readlink(filepath.Join(dest, "start")); l != "run.sh" {
		t.Errorf("the symlink became %q", l)
	}

	// Unchanged: one query, no file, a few hundred bytes per host.
	out, _, code = f.run("push", src, "site", "good")
	if code != 0 {
		t.Fatalf("re-push: %d %s", code, out)
	}
	for h, r := range parsePush(t, out) {
		if r.what != "up to date" || r.queries != 1 || bytesOf(r.out) > 2048 {
			t.Errorf("%s unchanged re-push: %+v", h, r)
		}
	}

	// One file changed: one blob per host.
	os.WriteFile(filepath.Join(src, "d10/s03/f0010.txt"), []byte("changed\n"), 0o644)
	out, _, code = f.run("push", src, "site", "good")
	if code != 0 {
		t.Fatalf("push of one change: %d %s", code, out)
	}
	for h, r := range parsePush(t, out) {
		if !strings.HasPrefix(r.what, "sent 1 file(s)") {
			t.Errorf("%s one-file push: %+v", h, r)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(f.hostHome("h8"), "site/d10/s03/f0010.txt")); string(b) != "changed\n" {
		t.Errorf("the change did not land: %q", b)
	}

	// Pull: a remote change and a local change to different files merge.
	remote := filepath.Join(f.hostHome("h2"), "site")
	os.WriteFile(filepath.Join(remote, "d01/s01/f0001.txt"), []byte("file 1\nline two\nremote line\n"), 0o644)
	os.WriteFile(filepath.Join(remote, "new-remote.txt"), []byte("from h2\n"), 0o644)
	os.WriteFile(filepath.Join(src, "d02/s02/f0002.txt"), []byte("local edit\n"), 0o644)
	out, errOut, code = f.run("pull", "site", src, "h2")
	if code != 0 || !strings.Contains(out, "merged cleanly") {
		t.Fatalf("clean pull: %d %q %q", code, out, errOut)
	}
	for name, want := range map[string]string{
		"d01/s01/f0001.txt": "file 1\nline two\nremote line\n",
		"new-remote.txt":    "from h2\n",
		"d02/s02/f0002.txt": "local edit\n",
		"d10/s03/f0010.txt": "changed\n",
	} {
		if b, _ := os.ReadFile(filepath.Join(src, name)); string(b) != want {
			t.Errorf("after pull %s = %q, want %q", name, b, want)
		}
	}

	// A conflicting change is reported, exit 1, markers in the file.
	os.WriteFile(filepath.Join(remote, "d03/s03/f0003.txt"), []byte("file 3\nREMOTE\n"), 0o644)
	os.WriteFile(filepath.Join(src, "d03/s03/f0003.txt"), []byte("file 3\nLOCAL\n"), 0o644)
	out, errOut, code = f.run("pull", "site", src, "h2")
	if code != 1 || !strings.Contains(out, "conflict (content): d03/s03/f0003.txt") || !strings.Contains(errOut, "1 conflict") {
		t.Fatalf("conflicting pull: %d %q %q", code, out, errOut)
	}
	b, _ := os.ReadFile(filepath.Join(src, "d03/s03/f0003.txt"))
	if !strings.Contains(string(b), "<<<<<<< local\nLOCAL\n=======\nREMOTE\n>>>>>>> h2\n") {
		t.Errorf("conflict markers: %q", b)
	}
}

func TestPushRefusesOutsideTheRoots(t *testing.T) {
	f := newSSHFleet(t, 1, false)
	src := filepath.Join(f.home, "src")
	os.MkdirAll(src, 0o755)
	os.WriteFile(filepath.Join(src, "a"), []byte("a"), 0o644)
	out, errOut, code := f.run("push", src, "/etc/rex-push-test", "h1")
	if code != 1 || !strings.Contains(errOut, "outside allowed roots") {
		t.Fatalf("push outside the roots: %d %q %q", code, out, errOut)
	}
	if _, err := os.Stat("/etc/rex-push-test"); err == nil {
		os.RemoveAll("/etc/rex-push-test")
		t.Fatal("something was written outside the allowed roots")
	}
}
