package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/rexconsole/rex/internal/sshtest"
)

// pushLine is one target's first line of `rex push` output.
var pushLine = regexp.MustCompile(`^(\S+): (\S+): (.+) · (nothing sent|sent (\d+) files?, (\d+) dirs?, [\d.]+ \S+) \((\d+) quer(?:y|ies), ([\d.]+ \S+) out, ([\d.]+ \S+) in\)$`)

type pushResult struct {
	path    string
	what    string
	files   int
	queries int
	out     string
	lines   []string // the lines after the first: "- path", "+ path"…
}

// parsePush reads `rex push` output by target.
func parsePush(t *testing.T, out string) map[string]*pushResult {
	t.Helper()
	res := map[string]*pushResult{}
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		if m := pushLine.FindStringSubmatch(l); m != nil {
			files, _ := strconv.Atoi(m[5])
			q, _ := strconv.Atoi(m[7])
			res[m[1]] = &pushResult{path: m[2], what: m[3], files: files, queries: q, out: m[8]}
			continue
		}
		name, rest, ok := strings.Cut(l, ": ")
		if !ok || res[name] == nil {
			t.Fatalf("unexpected push line %q in\n%s", l, out)
		}
		res[name].lines = append(res[name].lines, rest)
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

func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func read(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatalf("read %s: %v", p, err)
	}
	return string(b)
}

// rexLeftovers lists what rex leaves while writing (.rex-* names) under
// dir.
func rexLeftovers(dir string) []string {
	var out []string
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && strings.HasPrefix(d.Name(), ".rex-") {
			out = append(out, p)
		}
		return nil
	})
	return out
}

// setDevice adds or replaces a device in the fleet's registry.
func (f *sshFleet) setDevice(t *testing.T, name string, fields map[string]any) {
	t.Helper()
	var reg map[string]any
	if err := json.Unmarshal([]byte(read(t, f.registry())), &reg); err != nil {
		t.Fatal(err)
	}
	reg["devices"].(map[string]any)[name] = fields
	b, _ := json.MarshalIndent(reg, "", "  ")
	if err := os.WriteFile(f.registry(), b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// deviceFor is the registry entry reaching s as its login user.
func (f *sshFleet) deviceFor(s *sshtest.Server) map[string]any {
	host, port, _ := strings.Cut(s.Addr, ":")
	p, _ := strconv.Atoi(port)
	return map[string]any{"host": s.User + "@" + host, "port": p, "ssh_key": f.key.Path}
}

// addHost starts one more sshd for the fleet, trusted in known_hosts.
func (f *sshFleet) addHost(t *testing.T, opts sshtest.Options) *sshtest.Server {
	t.Helper()
	opts.Authorized = append(opts.Authorized, f.key)
	s := sshtest.Start(t, opts)
	known := filepath.Join(f.home, ".ssh", "known_hosts")
	kh, _ := os.OpenFile(known, os.O_APPEND|os.O_WRONLY, 0o600)
	kh.WriteString(strings.Join(s.KnownHostsLines(false), "\n") + "\n")
	kh.Close()
	return s
}

// TestPushPullAcrossAFleet: a 5,000-file tree to 8 hosts; an unchanged
// re-push sends nothing and asks one question; a one-file change sends
// one file per host; a pull lists what it applied, merging a remote change
// with a local one; a conflict is reported and kept with markers, and a
// push refuses to send it until it is resolved.
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
		if r == nil || !strings.HasPrefix(r.what, "created with ") || r.files != 5001 || r.path != filepath.Join(f.hostHome(h), "site") {
			t.Errorf("%s first push: %+v", h, r)
		}
	}
	// The tree is really there, with its executable bit and its link.
	dest := filepath.Join(f.hostHome("h3"), "site")
	if b := read(t, filepath.Join(dest, "d07/s00/f0007.txt")); b != "file 7\nline two\n" {
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
		if r.what != "up to date" || r.queries != 1 || r.files != 0 || bytesOf(r.out) > 2048 {
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
		if r.what != "updated 1" || r.files != 1 {
			t.Errorf("%s one-file push: %+v", h, r)
		}
	}
	if b := read(t, filepath.Join(f.hostHome("h8"), "site/d10/s03/f0010.txt")); b != "changed\n" {
		t.Errorf("the change did not land: %q", b)
	}

	// Pull: a remote change and a local change to different files merge;
	// the pull lists what it applied here.
	remote := filepath.Join(f.hostHome("h2"), "site")
	os.WriteFile(filepath.Join(remote, "d01/s01/f0001.txt"), []byte("file 1\nline two\nremote line\n"), 0o644)
	os.WriteFile(filepath.Join(remote, "new-remote.txt"), []byte("from h2\n"), 0o644)
	os.WriteFile(filepath.Join(src, "d02/s02/f0002.txt"), []byte("local edit\n"), 0o644)
	out, errOut, code = f.run("pull", "site", src, "h2")
	wantOut := "h2:" + remote + " → " + src + ": created 1, updated 1\nh2: + new-remote.txt\nh2: ~ d01/s01/f0001.txt\n"
	if code != 0 || out != wantOut {
		t.Fatalf("clean pull: %d %q %q, want %q", code, out, errOut, wantOut)
	}
	for name, want := range map[string]string{
		"d01/s01/f0001.txt": "file 1\nline two\nremote line\n",
		"new-remote.txt":    "from h2\n",
		"d02/s02/f0002.txt": "local edit\n",
		"d10/s03/f0010.txt": "changed\n",
	} {
		if b := read(t, filepath.Join(src, name)); b != want {
			t.Errorf("after pull %s = %q, want %q", name, b, want)
		}
	}

	// Both sides edit the same file, one of them in the line the other
	// changed: merged where they do not touch, a conflict where they do.
	os.WriteFile(filepath.Join(remote, "d04/s04/f0004.txt"), []byte("REMOTE 4\nline two\n"), 0o644)
	os.WriteFile(filepath.Join(src, "d04/s04/f0004.txt"), []byte("file 4\nline two\nlocal 4\n"), 0o644)
	os.WriteFile(filepath.Join(remote, "d03/s03/f0003.txt"), []byte("file 3\nREMOTE\n"), 0o644)
	os.WriteFile(filepath.Join(src, "d03/s03/f0003.txt"), []byte("file 3\nLOCAL\n"), 0o644)
	out, errOut, code = f.run("pull", "site", src, "h2")
	if code != 1 || !strings.Contains(out, "merged 1, 1 conflict") || !strings.Contains(out, "h2: M d04/s04/f0004.txt") ||
		!strings.Contains(out, "conflict (content): d03/s03/f0003.txt") || !strings.Contains(errOut, "1 conflict") {
		t.Fatalf("conflicting pull: %d %q %q", code, out, errOut)
	}
	if b := read(t, filepath.Join(src, "d04/s04/f0004.txt")); b != "REMOTE 4\nline two\nlocal 4\n" {
		t.Errorf("merged file %q", b)
	}
	b := read(t, filepath.Join(src, "d03/s03/f0003.txt"))
	if !strings.Contains(b, "<<<<<<< local\nLOCAL\n=======\nREMOTE\n>>>>>>> h2\n") {
		t.Errorf("conflict markers: %q", b)
	}

	// A push from there refuses to send the markers, naming the file.
	out, errOut, code = f.run("push", src, "site", "h1")
	if code != 1 || !strings.Contains(errOut, "d03/s03/f0003.txt (conflict markers)") || !strings.Contains(errOut, "--force") {
		t.Fatalf("push after a conflicted pull: %d %q %q", code, out, errOut)
	}
	if strings.Contains(read(t, filepath.Join(f.hostHome("h1"), "site/d03/s03/f0003.txt")), "<<<<<<<") {
		t.Fatal("the conflict markers reached h1")
	}
	// Resolved: the push goes.
	os.WriteFile(filepath.Join(src, "d03/s03/f0003.txt"), []byte("file 3\nRESOLVED\n"), 0o644)
	if out, errOut, code = f.run("push", src, "site", "h1"); code != 0 {
		t.Fatalf("push after resolving: %d %q %q", code, out, errOut)
	}
}

// TestPushAddsAndUpdates: a push keeps what the destination holds that the
// source lacks; --delete removes it and lists it; --dry-run changes
// nothing and prints the plan; a stand-in .ssh keeps authorized_keys;
// --atomic swaps the directory; files go where pdcp puts them; modes
// travel; a path outside the home works; a device's roots are enforced.
func TestPushAddsAndUpdates(t *testing.T) {
	f := newSSHFleet(t, 2, false)
	home := f.hostHome("h1")
	src := filepath.Join(f.home, "src")
	writeFiles(t, src, map[string]string{"index.html": "<h1>v1</h1>\n", "css/a.css": "a{}\n"})
	os.WriteFile(filepath.Join(src, "secret.key"), []byte("k\n"), 0o600)
	os.Chmod(filepath.Join(src, "secret.key"), 0o600)
	dst := filepath.Join(home, "www")
	writeFiles(t, dst, map[string]string{"precious": "mine\n", "index.html": "old\n"})
	ino := inodeOf(t, dst)

	out, errOut, code := f.run("push", src, "www", "h1")
	r := parsePush(t, out)["h1"]
	if code != 0 || r == nil || r.what != "added 3, updated 1" || len(r.lines) != 0 {
		t.Fatalf("push onto a directory: %d %q %q", code, out, errOut)
	}
	if read(t, filepath.Join(dst, "precious")) != "mine\n" || read(t, filepath.Join(dst, "index.html")) != "<h1>v1</h1>\n" {
		t.Error("the push did not add and update, keeping the rest")
	}
	if inodeOf(t, dst) != ino {
		t.Error("the destination directory was replaced")
	}
	if fi, _ := os.Stat(filepath.Join(dst, "secret.key")); fi.Mode().Perm() != 0o600 {
		t.Errorf("secret.key landed %v", fi.Mode().Perm())
	}

	// --dry-run with --delete: the plan, nothing changed.
	out, _, code = f.run("push", "--dry-run", "--delete", src, "www", "h1")
	r = parsePush(t, out)["h1"]
	if code != 0 || r.what != "would delete 1 (dry run: nothing changed)" || strings.Join(r.lines, "|") != "- precious" {
		t.Fatalf("dry run: %d %q", code, out)
	}
	if _, err := os.Stat(filepath.Join(dst, "precious")); err != nil {
		t.Fatal("a dry run deleted")
	}
	// --delete: removed and listed.
	out, _, code = f.run("push", src, "www", "h1", "--delete")
	r = parsePush(t, out)["h1"]
	if code != 0 || r.what != "deleted 1" || strings.Join(r.lines, "|") != "- precious" {
		t.Fatalf("--delete: %d %q", code, out)
	}
	if _, err := os.Stat(filepath.Join(dst, "precious")); err == nil {
		t.Fatal("--delete kept precious")
	}
	// --json says the same per target.
	out, _, _ = f.run("push", "--json", "--delete", src, "www", "h1,h2")
	var lines []map[string]any
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("--json line %q: %v", sc.Text(), err)
		}
		lines = append(lines, m)
	}
	if len(lines) != 2 {
		t.Fatalf("--json: %q", out)
	}
	for _, m := range lines {
		switch m["target"] {
		case "h1":
			if m["unchanged"] != true {
				t.Errorf("--json h1 %v", m)
			}
		case "h2":
			if m["created"] != true || len(m["added"].([]any)) != 4 {
				t.Errorf("--json h2 %v", m)
			}
		}
	}

	// A stand-in for ~/.ssh: a push of a directory holding only config.
	ssh := filepath.Join(home, "ssh-standin")
	writeFiles(t, ssh, map[string]string{"authorized_keys": "ssh-ed25519 AAAA op\n", "known_hosts": "x\n"})
	os.Chmod(ssh, 0o700)
	cfg := filepath.Join(f.home, "sshcfg")
	writeFiles(t, cfg, map[string]string{"config": "Host *\n"})
	if out, errOut, code = f.run("push", cfg, "ssh-standin", "h1"); code != 0 {
		t.Fatalf("push into .ssh: %d %q %q", code, out, errOut)
	}
	if read(t, filepath.Join(ssh, "authorized_keys")) != "ssh-ed25519 AAAA op\n" || read(t, filepath.Join(ssh, "known_hosts")) != "x\n" {
		t.Fatal("a push into .ssh lost authorized_keys or known_hosts")
	}
	if fi, _ := os.Stat(ssh); fi.Mode().Perm() != 0o700 {
		t.Errorf(".ssh became %v", fi.Mode().Perm())
	}

	// --atomic: the directory is replaced as a whole.
	writeFiles(t, dst, map[string]string{"extra": "x\n"})
	out, _, code = f.run("push", "--atomic", src, "www", "h1")
	r = parsePush(t, out)["h1"]
	if code != 0 || r.what != "deleted 1" || strings.Join(r.lines, "|") != "- extra" || inodeOf(t, dst) == ino {
		t.Fatalf("--atomic: %d %q", code, out)
	}
	if left := rexLeftovers(home); len(left) != 0 {
		t.Errorf("left behind: %v", left)
	}

	// Files: several into a directory, one to a path of its own.
	writeFiles(t, f.home, map[string]string{"a.conf": "a\n", "b.conf": "b\n"})
	if out, errOut, code = f.run("push", filepath.Join(f.home, "a.conf"), filepath.Join(f.home, "b.conf"), "conf.d/", "h1"); code != 0 {
		t.Fatalf("push of files: %d %q %q", code, out, errOut)
	}
	if read(t, filepath.Join(home, "conf.d/a.conf")) != "a\n" || read(t, filepath.Join(home, "conf.d/b.conf")) != "b\n" {
		t.Error("files did not land in conf.d/")
	}
	if out, errOut, code = f.run("push", filepath.Join(f.home, "a.conf"), "conf.d/renamed.conf", "h1"); code != 0 {
		t.Fatalf("push of a file to a name: %d %q %q", code, out, errOut)
	}
	if read(t, filepath.Join(home, "conf.d/renamed.conf")) != "a\n" {
		t.Error("the file did not land under its new name")
	}
	if out, errOut, code = f.run("push", filepath.Join(f.home, "b.conf"), "conf.d", "h1"); code != 0 || read(t, filepath.Join(home, "conf.d/b.conf")) != "b\n" {
		t.Fatalf("push of a file to an existing directory: %d %q %q", code, out, errOut)
	}

	// Outside the home: /tmp works as it does over ssh.
	tmp := sshtest.TempDir(t)
	if out, errOut, code = f.run("push", src, filepath.Join(tmp, "x"), "h1"); code != 0 {
		t.Fatalf("push to %s: %d %q %q", tmp, code, out, errOut)
	}
	if read(t, filepath.Join(tmp, "x/css/a.css")) != "a{}\n" {
		t.Error("the push to /tmp did not land")
	}

	// A device with roots cannot be written outside them.
	dev := f.deviceFor(f.hosts[1])
	dev["roots"] = []string{"~/allowed"}
	os.MkdirAll(filepath.Join(f.hostHome("h2"), "allowed"), 0o755)
	f.setDevice(t, "h2", dev)
	out, errOut, code = f.run("push", src, filepath.Join(tmp, "y"), "h2")
	if code != 1 || !strings.Contains(errOut, "outside allowed roots") {
		t.Fatalf("push outside the roots: %d %q %q", code, out, errOut)
	}
	if _, err := os.Stat(filepath.Join(tmp, "y")); err == nil {
		t.Fatal("something was written outside the allowed roots")
	}
	if out, errOut, code = f.run("push", src, "~/allowed/site", "h2"); code != 0 {
		t.Fatalf("push inside the roots: %d %q %q", code, out, errOut)
	}
}

func inodeOf(t *testing.T, p string) uint64 {
	t.Helper()
	fi, err := os.Lstat(p)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Sys().(*syscall.Stat_t).Ino
}

// TestAtomicPushNeverMissing: a reader polling the destination during
// repeated --atomic pushes never finds it missing.
func TestAtomicPushNeverMissing(t *testing.T) {
	e := newRexEnv(t, rexBin)
	srcs := []string{filepath.Join(e.home, "v1"), filepath.Join(e.home, "v2")}
	writeFiles(t, srcs[0], map[string]string{"index.html": "v1\n", "a/b": "b1\n"})
	writeFiles(t, srcs[1], map[string]string{"index.html": "v2\n", "a/c": "c2\n"})
	dest := filepath.Join(sshtest.TempDir(t), "site")
	if _, errOut, code := e.run("push", srcs[0], dest, "local"); code != 0 {
		t.Fatal(errOut)
	}
	var stop atomic.Bool
	var missing, polls atomic.Int64
	var wg sync.WaitGroup
	wg.Go(func() {
		for !stop.Load() {
			polls.Add(1)
			if _, err := os.Lstat(filepath.Join(dest, "index.html")); err != nil {
				missing.Add(1)
			}
		}
	})
	for i := range 20 {
		if _, errOut, code := e.run("push", "--atomic", srcs[i%2], dest, "local"); code != 0 {
			t.Fatal(errOut)
		}
	}
	stop.Store(true)
	wg.Wait()
	if missing.Load() != 0 {
		t.Fatalf("the destination was missing in %d of %d polls", missing.Load(), polls.Load())
	}
	if left := rexLeftovers(filepath.Dir(dest)); len(left) != 0 {
		t.Errorf("left behind: %v", left)
	}
}

// TestPullIntoNewDirAndFromMany: a pull into a directory that does not
// exist brings the files (though the tree was pushed from elsewhere); a
// pull from three hosts writes LOCAL/<host>, each merged against its own
// base.
func TestPullIntoNewDirAndFromMany(t *testing.T) {
	f := newSSHFleet(t, 3, false)
	src := filepath.Join(f.home, "site2")
	writeFiles(t, src, map[string]string{"a.txt": "a\n", "sub/b.txt": "b\n"})
	if out, errOut, code := f.run("push", src, "site2", "good"); code != 0 {
		t.Fatalf("push: %q %q", out, errOut)
	}
	fresh := filepath.Join(f.home, "new")
	out, errOut, code := f.run("pull", "site2", fresh, "h1")
	if code != 0 || !strings.Contains(out, "created 2") || read(t, filepath.Join(fresh, "sub/b.txt")) != "b\n" {
		t.Fatalf("pull into a new directory: %d %q %q", code, out, errOut)
	}

	for i, h := range f.healthy {
		writeFiles(t, filepath.Join(f.hostHome(h), "site2"), map[string]string{"host.txt": h + "\n", "a.txt": fmt.Sprintf("a%d\n", i)})
	}
	many := filepath.Join(f.home, "many")
	out, errOut, code = f.run("pull", "site2", many, "good")
	if code != 0 {
		t.Fatalf("pull from 3: %d %q %q", code, out, errOut)
	}
	for i, h := range f.healthy {
		if read(t, filepath.Join(many, h, "host.txt")) != h+"\n" || read(t, filepath.Join(many, h, "a.txt")) != fmt.Sprintf("a%d\n", i) {
			t.Errorf("%s/%s does not hold %s's tree", many, h, h)
		}
		if !strings.Contains(out, h+":"+filepath.Join(f.hostHome(h), "site2")+" → "+filepath.Join(many, h)+": created 3") {
			t.Errorf("pull output for %s: %q", h, out)
		}
	}
	// Each host's base is its own: a local edit in many/h2 and a remote
	// one on h2 merge, the others are up to date.
	writeFiles(t, filepath.Join(many, "h2"), map[string]string{"sub/b.txt": "b local\n"})
	writeFiles(t, filepath.Join(f.hostHome("h2"), "site2"), map[string]string{"host.txt": "h2 again\n"})
	out, errOut, code = f.run("pull", "site2", many, "good")
	if code != 0 || strings.Count(out, ": up to date") != 2 || !strings.Contains(out, "h2: ~ host.txt") {
		t.Fatalf("second pull from 3: %d %q %q", code, out, errOut)
	}
	if read(t, filepath.Join(many, "h2/sub/b.txt")) != "b local\n" {
		t.Error("the local edit was lost")
	}
}

// TestPushAfterKilledRexd: rexd killed in the middle of a push leaves
// temporary files; the next push removes them, leaves no .rex-* name and
// no temporary file in the target's store, and the tree is whole.
func TestPushAfterKilledRexd(t *testing.T) {
	f := newSSHFleet(t, 1, false)
	src := filepath.Join(f.home, "big")
	for i := range 40 {
		data := make([]byte, 1<<20)
		for j := range data {
			data[j] = byte(i*7 + j)
		}
		p := filepath.Join(src, fmt.Sprintf("d%d/f%02d.bin", i%4, i))
		os.MkdirAll(filepath.Dir(p), 0o755)
		os.WriteFile(p, data, 0o644)
	}
	home := f.hostHome("h1")
	dest := filepath.Join(home, "big")
	os.MkdirAll(dest, 0o755)
	for _, atomicPush := range []bool{false, true} {
		os.RemoveAll(dest)
		os.MkdirAll(dest, 0o755)
		args := []string{"push", src, "big", "h1"}
		if atomicPush {
			args = append(args, "--atomic")
		}
		cmd := f.cmd(args...)
		var killedOut lockedBuffer
		cmd.Stderr = &killedOut
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		// Kill the target's rexd as soon as it writes into the destination.
		killed := false
		for range 20000 {
			if len(rexLeftovers(home)) > 0 {
				for _, p := range f.hosts[0].Descendants() {
					if comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", p)); strings.TrimSpace(string(comm)) == "rexd" {
						syscall.Kill(p, syscall.SIGKILL)
						killed = true
					}
				}
				break
			}
			time.Sleep(time.Millisecond) // polling for the moment to kill, bounded
		}
		werr := cmd.Wait()
		if !killed {
			t.Fatalf("atomic=%v: the push ended before rexd could be killed in it", atomicPush)
		}
		// A connection lost under the push is unreachable, as under rex
		// run: 255, not a failure of the push (1).
		var ee *exec.ExitError
		if !errors.As(werr, &ee) || ee.ExitCode() != 255 {
			t.Errorf("atomic=%v: the killed push ended with %v, want exit 255", atomicPush, werr)
		}
		if len(rexLeftovers(home)) == 0 {
			t.Fatalf("atomic=%v: the killed push left nothing to sweep; the test shows nothing", atomicPush)
		}
		// One sentence that says what happened and what to do, not the
		// stream it was in ("send: stream a53c…/20971520: connection to
		// rexd closed").
		if said := killedOut.String(); !strings.HasPrefix(said, "h1! ") || !strings.HasSuffix(said, ": the connection was lost (rexd or ssh ended there); push again\n") {
			t.Errorf("atomic=%v: the killed push said %q", atomicPush, said)
		}
		out, errOut, code := f.run(args...)
		if code != 0 {
			t.Fatalf("atomic=%v: push after the kill: %d %q %q", atomicPush, code, out, errOut)
		}
		if left := rexLeftovers(home); len(left) != 0 {
			t.Errorf("atomic=%v: left behind after the next push: %v", atomicPush, left)
		}
		tmps, _ := os.ReadDir(filepath.Join(home, ".cache/rexd/cas/tmp"))
		if len(tmps) != 0 {
			t.Errorf("atomic=%v: store temp files left: %v", atomicPush, tmps)
		}
		if read(t, filepath.Join(dest, "d3/f39.bin")) != read(t, filepath.Join(src, "d3/f39.bin")) {
			t.Errorf("atomic=%v: the tree is not whole", atomicPush)
		}
	}
}

// TestPushNoSpace: a push that does not fit is refused before anything is
// written, in one sentence with the sizes; --max-bytes sets a lower bound
// of its own.
func TestPushNoSpace(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("a small tmpfs needs root to mount (CI runs as root)")
	}
	f := newSSHFleet(t, 0, false)
	small := filepath.Join(sshtest.TempDir(t), "small")
	h := f.addHost(t, sshtest.Options{Tmpfs: map[string]string{small: "1m"}})
	f.setDevice(t, "h1", f.deviceFor(h))
	src := filepath.Join(f.home, "big")
	data := make([]byte, 3<<20)
	for i := range data {
		data[i] = byte(i)
	}
	os.MkdirAll(src, 0o755)
	os.WriteFile(filepath.Join(src, "a.bin"), data, 0o644)
	out, errOut, code := f.run("push", src, filepath.Join(small, "site"), "h1")
	// 1 MiB less the 5% margin is free.
	want := "h1! no space left on h1 in " + filepath.Join(small, "site") + ": 3 MB needed, 996 kB free; free some space or choose another place\n"
	if code != 1 || errOut != want {
		t.Fatalf("push that does not fit: %d %q %q, want %q", code, out, errOut, want)
	}
	// The tmpfs is only in sshd's mount namespace: look through its pid.
	if ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/root%s", h.Pid(), small)); err != nil || len(ents) != 0 {
		t.Fatalf("a refused push wrote %v (%v)", ents, err)
	}
	out, errOut, code = f.run("push", "--max-bytes", "1M", src, "elsewhere", "h1")
	if code != 1 || !strings.HasSuffix(errOut, "/elsewhere: writing it would take 3 MB, more than the limit of 1 MB; raise --max-bytes if that is meant\n") {
		t.Fatalf("push over --max-bytes: %d %q %q", code, out, errOut)
	}
}

// TestPushOneFileKeepsItsDirectory: a push of one file writes that file
// only. --delete and --atomic are about a directory pushed whole; given
// with a single file they used to apply to the directory the file lands
// in, so `rex push app.conf /etc/app/app.conf --delete` emptied /etc/app
// of everything else and --atomic replaced it with a directory holding the
// one file. They are refused, and nothing is written.
func TestPushOneFileKeepsItsDirectory(t *testing.T) {
	e := newRexEnv(t, rexBin)
	src := filepath.Join(e.home, "new", "app.conf")
	writeFiles(t, filepath.Dir(src), map[string]string{"app.conf": "new\n"})
	for _, tc := range []struct{ flag, dest string }{
		{"--delete", "app.conf"}, {"--atomic", "app.conf"}, {"--delete", ""}, {"--atomic", ""},
	} {
		dir := filepath.Join(e.home, "etc-app")
		os.RemoveAll(dir)
		writeFiles(t, dir, map[string]string{"app.conf": "old\n", "other.conf": "keep\n", "certs/site.pem": "pem\n"})
		ino := inodeOf(t, dir)
		dest := filepath.Join(dir, tc.dest)
		if tc.dest == "" {
			dest += "/"
		}
		out, errOut, code := e.run("push", tc.flag, src, dest, "local")
		other, _ := os.ReadFile(filepath.Join(dir, "other.conf"))
		pem, _ := os.ReadFile(filepath.Join(dir, "certs/site.pem"))
		if string(other) != "keep\n" || string(pem) != "pem\n" || inodeOf(t, dir) != ino {
			t.Fatalf("push %s of one file to %s touched the rest of its directory: %d %q %q", tc.flag, dest, code, out, errOut)
		}
		if code != 2 || !strings.Contains(errOut, tc.flag) || read(t, filepath.Join(dir, "app.conf")) != "old\n" {
			t.Errorf("push %s of one file to %s: %d %q %q", tc.flag, dest, code, out, errOut)
		}
	}
}

// TestPushSeveralSourcesDeleteInsideEach: with several sources, --delete
// deletes inside each source's directory in DEST, as rsync does, and
// leaves DEST's other entries alone (it deleted them all); --atomic,
// which would replace DEST whole, is refused with nothing written.
func TestPushSeveralSourcesDeleteInsideEach(t *testing.T) {
	e := newRexEnv(t, rexBin)
	src := filepath.Join(e.home, "src")
	writeFiles(t, src, map[string]string{"conf/a.conf": "new\n", "site/index.html": "home\n"})
	dir := filepath.Join(e.home, "srv")
	writeFiles(t, dir, map[string]string{
		"conf/a.conf": "old\n", "conf/stale.conf": "stale\n",
		"site/index.html": "home\n", "site/old.html": "old\n",
		"other.txt": "keep\n", "notes/todo": "keep\n",
	})
	out, errOut, code := e.run("push", "--atomic", filepath.Join(src, "conf"), filepath.Join(src, "site"), dir, "local")
	if code != 2 || !strings.Contains(errOut, "--atomic") || read(t, filepath.Join(dir, "conf/a.conf")) != "old\n" {
		t.Fatalf("push --atomic of two sources: %d %q %q", code, out, errOut)
	}
	out, errOut, code = e.run("push", "--delete", filepath.Join(src, "conf"), filepath.Join(src, "site"), dir, "local")
	if code != 0 {
		t.Fatalf("push --delete of two sources: %d %q %q", code, out, errOut)
	}
	for _, p := range []string{"conf/stale.conf", "site/old.html"} {
		if _, err := os.Lstat(filepath.Join(dir, p)); !os.IsNotExist(err) {
			t.Errorf("%s, inside a source, was kept: %v", p, err)
		}
		if !strings.Contains(out, "- "+p) {
			t.Errorf("the output does not list %s as deleted:\n%s", p, out)
		}
	}
	for p, want := range map[string]string{"other.txt": "keep\n", "notes/todo": "keep\n", "conf/a.conf": "new\n", "site/index.html": "home\n"} {
		if got, _ := os.ReadFile(filepath.Join(dir, p)); string(got) != want {
			t.Errorf("%s holds %q after the push, want %q\n%s", p, got, want, out)
		}
	}
}

// TestPushPullTargetsAsFlag: -w TARGETS names push's, pull's and device
// check's targets as it does run's (and pdcp's): then every word is a
// path, the last push's DEST; -x still leaves targets out.
func TestPushPullTargetsAsFlag(t *testing.T) {
	e := newRexEnv(t, rexBin)
	src := filepath.Join(e.home, "site")
	writeFiles(t, src, map[string]string{"a.txt": "a\n"})
	conf := filepath.Join(e.home, "b.conf")
	writeFiles(t, e.home, map[string]string{"b.conf": "b\n"})
	dest := filepath.Join(e.home, "dest")
	if out, errOut, code := e.run("push", "-w", "local", src, dest); code != 0 || read(t, filepath.Join(dest, "a.txt")) != "a\n" {
		t.Fatalf("push -w local SRC DEST: %d %q %q", code, out, errOut)
	}
	etc := filepath.Join(e.home, "etc")
	if out, errOut, code := e.run("push", src, conf, etc+"/", "-w", "local"); code != 0 || read(t, filepath.Join(etc, "site", "a.txt")) != "a\n" || read(t, filepath.Join(etc, "b.conf")) != "b\n" {
		t.Fatalf("push SRC SRC DEST/ -w local: %d %q %q", code, out, errOut)
	}
	back := filepath.Join(e.home, "back")
	if out, errOut, code := e.run("pull", "--target", "local", dest, back); code != 0 || read(t, filepath.Join(back, "a.txt")) != "a\n" {
		t.Fatalf("pull --target local REMOTE LOCAL: %d %q %q", code, out, errOut)
	}
	// -x applies to -w's targets: nothing is left, which is an error.
	out, errOut, code := e.run("pull", "-w", "local", "-x", "local", dest, filepath.Join(e.home, "none"))
	if code == 0 {
		t.Errorf("pull -w local -x local: %d %q %q", code, out, errOut)
	}
	if out, errOut, code := e.run("device", "check", "-w", "local"); code != 0 || !strings.Contains(out, "local  ok") {
		t.Errorf("device check -w local: %d %q %q", code, out, errOut)
	}
}

// TestSyncInterrupted: ctrl+c (SIGINT) in the middle of a push or a pull
// says "cancelled" for the target, as rex run does, exits 130 and leaves
// no temporary files behind, beside DEST or in the local store.
// Both used to print the wire error they ended with ("h1! send: stream
// 90de…/20971520: context canceled").
func TestSyncInterrupted(t *testing.T) {
	f := newSSHFleet(t, 1, false)
	home := f.hostHome("h1")
	big := func(dir string, seed int) {
		for i := range 40 {
			data := make([]byte, 1<<20)
			for j := range data {
				data[j] = byte(i*seed + j)
			}
			p := filepath.Join(dir, fmt.Sprintf("f%02d.bin", i))
			os.MkdirAll(filepath.Dir(p), 0o755)
			os.WriteFile(p, data, 0o644)
		}
	}
	// interrupt starts rex with args, sends SIGINT once started(), and
	// returns what rex said and its exit status.
	interrupt := func(started func() bool, args ...string) (string, string, int) {
		t.Helper()
		cmd := f.cmd(args...)
		var out, errOut lockedBuffer
		cmd.Stdout, cmd.Stderr = &out, &errOut
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		deadline := time.Now().Add(time.Minute)
		for !started() {
			select {
			case <-done:
				t.Fatalf("rex %s ended before it could be interrupted: %q %q", strings.Join(args, " "), out.String(), errOut.String())
			default:
			}
			if time.Now().After(deadline) {
				cmd.Process.Kill()
				t.Fatalf("rex %s never began to move files", strings.Join(args, " "))
			}
			time.Sleep(time.Millisecond) // polling for the moment to interrupt, bounded
		}
		cmd.Process.Signal(syscall.SIGINT)
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			cmd.Process.Kill()
			t.Fatalf("rex %s did not end after SIGINT", strings.Join(args, " "))
		}
		return out.String(), errOut.String(), cmd.ProcessState.ExitCode()
	}

	src := filepath.Join(f.home, "big")
	big(src, 13)
	// Writing has begun once rex's temporary name is beside DEST.
	out, errOut, code := interrupt(func() bool { return len(rexLeftovers(home)) > 0 }, "push", src, "big", "h1")
	if code != 130 || out != "" || errOut != "h1! cancelled\n" {
		t.Errorf("interrupted push: exit %d, stdout %q, stderr %q; want 130 and h1! cancelled", code, out, errOut)
	}
	if left := rexLeftovers(home); len(left) != 0 {
		t.Errorf("the interrupted push left %v", left)
	}

	big(filepath.Join(home, "remote"), 17) // files the local store lacks
	tmp := filepath.Join(f.home, ".cache", "rex", "cas", "tmp")
	local := filepath.Join(f.home, "pulled")
	out, errOut, code = interrupt(func() bool { ents, _ := os.ReadDir(tmp); return len(ents) > 0 }, "pull", "--json", "remote", local, "h1")
	var j map[string]any
	if err := json.Unmarshal([]byte(out), &j); err != nil || code != 130 || j["error"] != "cancelled" || j["cancelled"] != true || errOut != "" {
		t.Errorf("interrupted pull --json: exit %d, stdout %q (%v), stderr %q; want 130 and error cancelled", code, out, err, errOut)
	}
	if ents, _ := os.ReadDir(tmp); len(ents) != 0 {
		t.Errorf("the interrupted pull left %d temporary files in the local store", len(ents))
	}
}
