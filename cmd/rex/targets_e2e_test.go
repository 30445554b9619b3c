package main

import (
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
)

// hostsOf returns the sorted host names that printed a line of rex run's
// prefixed output.
func hostsOf(out string) []string {
	seen := map[string]bool{}
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		if name, _, ok := strings.Cut(l, ":"); ok && l != "" {
			seen[strings.TrimSpace(name)] = true
		}
	}
	var hosts []string
	for h := range seen {
		hosts = append(hosts, h)
	}
	sort.Strings(hosts)
	return hosts
}

// TestTargetsAsOperatorsWriteThem: -x, !name, !glob, ^FILE and a bare
// ssh_config alias, on real hosts; gathered headers fold host lists.
func TestTargetsAsOperatorsWriteThem(t *testing.T) {
	f := newSSHFleet(t, 4, false)
	hostFile := filepath.Join(f.home, "hosts.txt")
	os.WriteFile(hostFile, []byte("# the ones to patch\nh1\n\n  h3   # db\n"), 0o600)
	cfg, _ := os.ReadFile(filepath.Join(f.home, ".ssh", "config"))
	// An alias in front of Host * (OpenSSH takes the first value).
	alias := f.hosts[1].ConfigBlock("jumpbox", f.key, "")
	os.WriteFile(filepath.Join(f.home, ".ssh", "config"), append([]byte(alias), cfg...), 0o600)

	tests := []struct {
		args []string
		want []string
	}{
		{[]string{"run", "good", "-x", "h2", "--", "echo", "hi"}, []string{"h1", "h3", "h4"}},
		{[]string{"run", "-x", "h[1-2]", "-x", "h4", "good", "--", "echo", "hi"}, []string{"h3"}},
		{[]string{"run", "good,!h3", "--", "echo", "hi"}, []string{"h1", "h2", "h4"}},
		{[]string{"run", "good,!h[3-4]", "--", "echo", "hi"}, []string{"h1", "h2"}},
		{[]string{"run", "h*,!*[13]", "--", "echo", "hi"}, []string{"h2", "h4"}},
		{[]string{"run", "^" + hostFile, "--", "echo", "hi"}, []string{"h1", "h3"}},
		{[]string{"run", "good,!^" + hostFile, "--", "echo", "hi"}, []string{"h2", "h4"}},
		{[]string{"run", "-w", "good", "-x", "^" + hostFile, "echo", "hi"}, []string{"h2", "h4"}},
		{[]string{"run", "jumpbox", "--", "echo", "hi"}, []string{"jumpbox"}},
	}
	for _, tt := range tests {
		out, errOut, code := f.run(tt.args...)
		if code != 0 || !slices.Equal(hostsOf(out), tt.want) {
			t.Errorf("rex %s: exit %d, hosts %v, want %v\nstdout: %s\nstderr: %s", strings.Join(tt.args, " "), code, hostsOf(out), tt.want, out, errOut)
		}
	}
	// The alias reached the second host: its HOME.
	out, _, _ := f.run("run", "jumpbox", "--", "sh", "-c", "echo $HOME")
	if want := "jumpbox: " + f.hosts[1].Home + "\n"; out != want {
		t.Errorf("the alias ran on %q, want %q", out, want)
	}
	// A typo suggests aliases too, and an unknown exclusion never runs.
	_, errOut, code := f.run("run", "jumbox", "--", "true")
	if code != 1 || !strings.Contains(errOut, "did you mean jumpbox?") {
		t.Errorf("typo of an alias: exit %d %q", code, errOut)
	}
	_, errOut, code = f.run("run", "good,!h9", "--", "touch", "ran")
	if code != 1 || !strings.Contains(errOut, `!h9: no device or group is named "h9"`) {
		t.Errorf("unknown exclusion: exit %d %q", code, errOut)
	}
	for _, h := range f.healthy {
		if _, err := os.Stat(filepath.Join(f.hostHome(h), "ran")); err == nil {
			t.Errorf("a run with a bad exclusion touched %s", h)
		}
	}

	// --gather folds the host lists in its headers.
	out, _, code = f.run("run", "good", "--gather", "--", "sh", "-c", `case $HOME in `+f.hostHome("h3")+`) echo other;; *) echo same;; esac`)
	want := "---------------\nh[1-2,4] (3)\n---------------\nsame\n" +
		"---------------\nh3 (1)\n---------------\nother\n"
	if code != 0 || out != want {
		t.Errorf("--gather: exit %d\n%s\nwant\n%s", code, out, want)
	}
}
