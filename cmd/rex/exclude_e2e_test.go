package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestExcludeOnEveryTargetsVerb: -x NAMES leaves hosts out of every verb
// whose TARGETS is a positional, as it does for rex run (pdsh's -x): push,
// pull and device check, on real hosts; the hosts left out are untouched.
func TestExcludeOnEveryTargetsVerb(t *testing.T) {
	f := newSSHFleet(t, 3, false)
	src := filepath.Join(f.home, "motd")
	if err := os.WriteFile(src, []byte("hello\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, errOut, code := f.run("push", src, "motd.txt", "good", "-x", "h2"); code != 0 {
		t.Fatalf("push -x h2: exit %d\nstdout: %s\nstderr: %s", code, out, errOut)
	}
	for _, h := range f.healthy {
		_, err := os.Stat(filepath.Join(f.hostHome(h), "motd.txt"))
		if got, want := err == nil, h != "h2"; got != want {
			t.Errorf("push -x h2: %s has the file: %v, want %v", h, got, want)
		}
	}

	for _, h := range f.healthy {
		writeFiles(t, filepath.Join(f.hostHome(h), "etc"), map[string]string{"host.txt": h + "\n"})
	}
	many := filepath.Join(f.home, "many")
	out, errOut, code := f.run("pull", "-x", "h[1-2]", "etc", many, "good")
	if code != 0 {
		t.Fatalf("pull -x h[1-2]: exit %d\nstdout: %s\nstderr: %s", code, out, errOut)
	}
	if got := read(t, filepath.Join(many, "host.txt")); got != "h3\n" {
		t.Errorf("pull -x h[1-2] from good brought %q, want h3's tree alone", got)
	}
	for _, h := range []string{"h1", "h2"} {
		if strings.Contains(out, h+":") {
			t.Errorf("pull -x h[1-2] reached %s:\n%s", h, out)
		}
	}

	out, errOut, code = f.run("device", "check", "good", "-x", "h1,h3")
	if code != 0 || !strings.Contains(out+errOut, "h2") || strings.Contains(out+errOut, "h1") || strings.Contains(out+errOut, "h3") {
		t.Errorf("device check good -x h1,h3: exit %d\nstdout: %s\nstderr: %s", code, out, errOut)
	}
	// An unknown name in -x refuses the whole command, as in rex run.
	_, errOut, code = f.run("push", src, "typo.txt", "good", "-x", "h9")
	if code == 0 || !strings.Contains(errOut, `no device or group is named "h9"`) {
		t.Errorf("push -x h9: exit %d %q", code, errOut)
	}
	for _, h := range f.healthy {
		if _, err := os.Stat(filepath.Join(f.hostHome(h), "typo.txt")); err == nil {
			t.Errorf("a push with a bad exclusion touched %s", h)
		}
	}
}
