package commands

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/rexconsole/rex/devices"
)

// run calls "rex device ARGS" in-process and returns stdout and the error.
func run(t *testing.T, store *devices.Store, styled bool, args ...string) (string, error) {
	t.Helper()
	var out, errOut bytes.Buffer
	err := Device(context.Background(), store, IO{In: strings.NewReader(""), Out: &out, Err: &errOut, Styled: styled}, args)
	if errOut.Len() > 0 {
		t.Errorf("rex device %s wrote to stderr: %q", strings.Join(args, " "), errOut.String())
	}
	return out.String(), err
}

func mustRun(t *testing.T, store *devices.Store, args ...string) string {
	t.Helper()
	out, err := run(t, store, false, args...)
	if err != nil {
		t.Fatalf("rex device %s: %v", strings.Join(args, " "), err)
	}
	return out
}

// writeKeyFile makes a file where a device's --key points (its content
// does not matter to the registry).
func writeKeyFile(t *testing.T, path string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte("not a key\n"), 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestDeviceAddMissingKey: a --key file that does not exist is accepted
// (it may be made later, as ssh -i allows) and warned about on stderr in
// one line; an existing key, or none, is not.
func TestDeviceAddMissingKey(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	writeKeyFile(t, filepath.Join(home, ".ssh", "deploy"))
	for _, tc := range []struct {
		key, warn string
	}{
		{"~/.ssh/missing", "rex: warning: key ~/.ssh/missing does not exist; create it before connecting to web1, or add web1 again with the right --key and --force\n"},
		{filepath.Join(home, "gone"), "rex: warning: key " + filepath.Join(home, "gone") + " does not exist; create it before connecting to web1, or add web1 again with the right --key and --force\n"},
		{"~/.ssh/deploy", ""},
		{"", ""},
	} {
		store := tempStore(t)
		args := []string{"add", "web1", "root@10.0.0.5"}
		if tc.key != "" {
			args = append(args, "--key", tc.key)
		}
		// One buffer for both, as the console has: the warning comes last.
		var out bytes.Buffer
		err := Device(context.Background(), store, IO{In: strings.NewReader(""), Out: &out, Err: &out}, args)
		if want := "added device web1 (root@10.0.0.5)\n" + tc.warn; err != nil || out.String() != want {
			t.Errorf("--key %q: %v, output %q; want %q", tc.key, err, out.String(), want)
		}
		r, err := store.Load()
		if err != nil {
			t.Fatal(err)
		}
		if d, err := r.Lookup("web1"); err != nil || d.SSHKey != tc.key {
			t.Errorf("--key %q: stored %+v, %v", tc.key, d, err)
		}
	}
}

func tempStore(t *testing.T) *devices.Store {
	t.Helper()
	return devices.NewStore(filepath.Join(t.TempDir(), "rex", "devices.json"))
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestDeviceNewUser runs the first session of an operator with an empty
// home: the registry appears at the XDG default, and every step prints its
// one-line message.
func TestDeviceNewUser(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("XDG_CONFIG_HOME", "")
	writeKeyFile(t, filepath.Join(home, ".ssh", "id")) // no warning about a missing key
	store, err := devices.OpenDefault()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(home, ".config", "rex", "devices.json")
	if store.Path() != path {
		t.Fatalf("default path %q, want %q", store.Path(), path)
	}
	steps := []struct {
		args []string
		want string
	}{
		{[]string{"list"}, "no devices yet; add one with rex device add NAME [USER@]HOST\n"},
		{[]string{"add", "web1", "root@10.0.0.5", "--port", "2222", "--key", "~/.ssh/id", "--desc", "front end"}, "added device web1 (root@10.0.0.5:2222)\n"},
		{[]string{"add", "db1", "db.lan"}, "added device db1 (db.lan)\n"},
		{[]string{"group", "create", "web"}, "created group web\n"},
		{[]string{"group", "add", "web", "web1", "db1"}, "added web1, db1 to group web\n"},
		{[]string{"group", "list"}, "GROUP  MEMBERS\nweb    web1, db1\n"},
		{[]string{"list"}, "NAME  ADDRESS             KEY        GROUPS  DESCRIPTION\n" +
			"db1   db.lan              -          web     -\n" +
			"web1  root@10.0.0.5:2222  ~/.ssh/id  web     front end\n"},
		{[]string{"remove", "db1"}, "removed device db1 (also removed from groups: web)\n"},
	}
	for _, s := range steps {
		if got := mustRun(t, store, s.args...); got != s.want {
			t.Errorf("rex device %s:\n got %q\nwant %q", strings.Join(s.args, " "), got, s.want)
		}
	}
	want := `{
  "devices": {
    "web1": {
      "host": "root@10.0.0.5",
      "port": 2222,
      "ssh_key": "~/.ssh/id",
      "description": "front end"
    }
  },
  "groups": {
    "web": [
      "web1"
    ]
  }
}
`
	if got := readFile(t, path); got != want {
		t.Errorf("devices.json:\n%s\nwant:\n%s", got, want)
	}
	for p, mode := range map[string]os.FileMode{path: 0o600, filepath.Dir(path): 0o700 | os.ModeDir} {
		if fi, err := os.Stat(p); err != nil || fi.Mode() != mode {
			t.Errorf("%s: mode %v, %v; want %v", p, fi.Mode(), err, mode)
		}
	}
}

func TestDeviceAddForms(t *testing.T) {
	// Keys that exist, so that no add warns: one absolute, one relative to
	// the working directory.
	cwd := t.TempDir()
	t.Chdir(cwd)
	abs := filepath.Join(cwd, "k")
	writeKeyFile(t, abs)
	writeKeyFile(t, filepath.Join(cwd, "keys", "id"))
	tests := []struct {
		args     []string
		wantMsg  string
		wantPort int
		wantKey  string
		wantDesc string
	}{
		{[]string{"add", "a", "root@10.0.0.5", "--port", "2222", "--key", abs, "--desc", "x"}, "added device a (root@10.0.0.5:2222)\n", 2222, abs, "x"},
		{[]string{"add", "--port=2222", "a", "root@10.0.0.5"}, "added device a (root@10.0.0.5:2222)\n", 2222, "", ""},
		{[]string{"add", "a", "--port", "22", "h.lan"}, "added device a (h.lan:22)\n", 22, "", ""},
		{[]string{"add", "a", "h.lan:2200"}, "added device a (h.lan:2200)\n", 2200, "", ""},
		{[]string{"add", "a", "h.lan", "--key", "keys/id"}, "added device a (h.lan)\n", 0, filepath.Join(cwd, "keys/id"), ""},
		{[]string{"add", "a", "h.lan", "--desc", "--looks like a flag"}, "added device a (h.lan)\n", 0, "", "--looks like a flag"},
		{[]string{"add", "a", "--", "h.lan"}, "added device a (h.lan)\n", 0, "", ""},
		{[]string{"add", "a", "[::1]:2222"}, "added device a ([::1]:2222)\n", 2222, "", ""},
	}
	for _, tt := range tests {
		store := tempStore(t)
		got := mustRun(t, store, tt.args...)
		if got != tt.wantMsg {
			t.Errorf("rex device %s printed %q, want %q", strings.Join(tt.args, " "), got, tt.wantMsg)
		}
		r, err := store.Load()
		if err != nil {
			t.Fatal(err)
		}
		d, err := r.Lookup("a")
		if err != nil {
			t.Fatal(err)
		}
		if d.Port != tt.wantPort || d.SSHKey != tt.wantKey || d.Description != tt.wantDesc {
			t.Errorf("rex device %s stored %+v", strings.Join(tt.args, " "), d)
		}
	}
}

func TestDeviceAddForce(t *testing.T) {
	store := tempStore(t)
	mustRun(t, store, "add", "web1", "a.lan")
	_, err := run(t, store, false, "add", "web1", "b.lan")
	if err == nil || ExitCode(err) != 1 || !strings.Contains(err.Error(), `device "web1" already exists (a.lan); add --force to replace it`) {
		t.Fatalf("second add = %v", err)
	}
	if got := mustRun(t, store, "add", "web1", "b.lan", "--force"); got != "replaced device web1 (b.lan); it was a.lan\n" {
		t.Errorf("add --force printed %q", got)
	}
	// What a replace drops is said, as a removal says what it removes.
	key := filepath.Join(t.TempDir(), "web")
	writeKeyFile(t, key)
	mustRun(t, store, "add", "web1", "b.lan", "--force", "--key", key, "--desc", "front end")
	if got := mustRun(t, store, "add", "web1", "c.lan:2222", "--force"); got != "replaced device web1 (c.lan:2222); it was b.lan, key "+key+", description \"front end\"\n" {
		t.Errorf("add --force over a key and a description printed %q", got)
	}
	if got := mustRun(t, store, "add", "web1", "c.lan:2222", "--force"); got != "replaced device web1 (c.lan:2222)\n" {
		t.Errorf("add --force with nothing lost printed %q", got)
	}
}

func TestDeviceUsageErrors(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"frob"}, `unknown command "frob" for rex device; rex device help`},
		{[]string{"lsit"}, "did you mean list?"},
		{[]string{"add", "web1"}, "rex device add takes NAME and [USER@]HOST"},
		{[]string{"add", "a", "b", "c"}, "rex device add takes NAME and [USER@]HOST"},
		{[]string{"add", "a", "b", "--prot", "22"}, "unknown flag --prot for rex device add; did you mean --port?"},
		{[]string{"add", "a", "b", "--port"}, "flag --port of rex device add needs a value"},
		{[]string{"add", "a", "b", "--port", "ssh"}, `invalid port "ssh": use a number from 1 to 65535`},
		{[]string{"add", "a", "b", "--port=0"}, "from 1 to 65535"},
		{[]string{"add", "a", "b", "--port", "70000"}, "from 1 to 65535"},
		{[]string{"add", "x", "-oProxyCommand=id"}, "unknown flag -oProxyCommand=id"},
		{[]string{"add", "a", "b", "--force=maybe"}, "takes true or false"},
		{[]string{"remove"}, "takes one or more device NAMEs"},
		{[]string{"show", "a,b"}, "rex device show takes one device NAME; show a and b one at a time"},
		{[]string{"group", "delete", "a,b"}, "rex device group delete takes one group NAME; delete a and b one at a time"},
		{[]string{"list", "extra"}, "takes no arguments"},
		{[]string{"list", "--yaml"}, "unknown flag --yaml"},
		{[]string{"show"}, "takes one device NAME"},
		{[]string{"group"}, "needs a command"},
		{[]string{"group", "craete", "x"}, "did you mean create?"},
		{[]string{"group", "add", "web"}, "takes a GROUP and one or more DEVICE names"},
		{[]string{"group", "create", "--json", "x"}, "unknown flag --json for rex device group create"},
		{[]string{"check"}, "takes TARGETS"},
	}
	for _, tt := range tests {
		store := tempStore(t)
		_, err := run(t, store, false, tt.args...)
		var ue *UsageError
		if !errors.As(err, &ue) || ExitCode(err) != 2 {
			t.Errorf("rex device %s = %v, want a usage error", strings.Join(tt.args, " "), err)
			continue
		}
		if !strings.Contains(err.Error(), tt.want) {
			t.Errorf("rex device %s = %q, want it to contain %q", strings.Join(tt.args, " "), err, tt.want)
		}
		if _, err := os.Stat(store.Path()); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("rex device %s created the registry", strings.Join(tt.args, " "))
		}
	}
}

func TestDeviceValidationErrors(t *testing.T) {
	store := tempStore(t)
	mustRun(t, store, "add", "web1", "a.lan")
	mustRun(t, store, "group", "create", "web")
	before := readFile(t, store.Path())
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"add", "all", "h"}, `add device all: "all" is reserved (it means every device); choose another name`},
		{[]string{"add", "local", "h"}, "reserved"},
		{[]string{"add", "bad name", "h"}, "invalid name"},
		{[]string{"add", "x", "--", "-oProxyCommand=id"}, "must not start with '-'"},
		{[]string{"add", "x", "host name"}, "spaces or control characters"},
		{[]string{"add", "x", "h", "--key", "~bob/id"}, `only "~/"`},
		{[]string{"add", "web", "h"}, "already a group name"},
		{[]string{"add", "web1", "h"}, "already exists"},
		{[]string{"remove", "wbe1"}, `nothing was removed: no device is named "wbe1"; did you mean web1?`},
		{[]string{"remove", "wbe1,web1"}, `nothing was removed: no device is named "wbe1"; did you mean web1?`},
		{[]string{"remove", "web1,wbe2"}, `nothing was removed: no device is named "wbe2"`}, // and web1 stays
		{[]string{"group", "add", "web", "web1,web2"}, `no device is named "web2"; did you mean web1?`},
		{[]string{"show", "web2"}, "did you mean web1?"},
		{[]string{"group", "create", "web1"}, "already a device name"},
		{[]string{"group", "create", "web"}, "already exists"},
		{[]string{"group", "delete", "wbe"}, "did you mean web?"},
		{[]string{"group", "add", "web", "web2"}, "did you mean web1?"},
		{[]string{"group", "remove", "web", "web1"}, `"web1" is not in group "web"`},
	}
	for _, tt := range tests {
		_, err := run(t, store, false, tt.args...)
		if err == nil || ExitCode(err) != 1 {
			t.Errorf("rex device %s = %v, want exit status 1", strings.Join(tt.args, " "), err)
			continue
		}
		if !strings.Contains(err.Error(), tt.want) {
			t.Errorf("rex device %s = %q, want it to contain %q", strings.Join(tt.args, " "), err, tt.want)
		}
	}
	if after := readFile(t, store.Path()); after != before {
		t.Errorf("failed commands changed the registry:\n%s", after)
	}
}

func TestDeviceGroupMessages(t *testing.T) {
	store := tempStore(t)
	for _, n := range []string{"a", "b", "c"} {
		mustRun(t, store, "add", n, n+".lan")
	}
	steps := []struct {
		args []string
		want string
	}{
		{[]string{"group", "create", "g"}, "created group g\n"},
		{[]string{"group", "add", "g", "a"}, "added a to group g\n"},
		{[]string{"group", "add", "g", "a", "b", "c"}, "added b, c to group g (a was already in it)\n"},
		{[]string{"group", "add", "g", "a", "b"}, "a, b are already in group g\n"},
		{[]string{"group", "remove", "g", "a", "b", "a"}, "removed a, b from group g\n"},
		{[]string{"group", "list", "--json"}, "{\n  \"groups\": [\n    {\n      \"name\": \"g\",\n      \"members\": [\n        \"c\"\n      ]\n    }\n  ]\n}\n"},
		{[]string{"remove", "c"}, "removed device c (also removed from groups: g)\n"},
		{[]string{"group", "list"}, "GROUP  MEMBERS\ng      (none)\n"},
		{[]string{"group", "delete", "g"}, "deleted group g\n"},
		{[]string{"group", "list"}, "no groups yet; create one with rex device group create NAME\n"},
		{[]string{"group", "create", "h"}, "created group h\n"},
		{[]string{"group", "add", "h", "a", "b"}, "added a, b to group h\n"},
		{[]string{"group", "delete", "h"}, "deleted group h (its 2 devices stay registered)\n"},
		{[]string{"group", "create", "i"}, "created group i\n"},
		{[]string{"group", "add", "i", "a"}, "added a to group i\n"},
		{[]string{"group", "delete", "i"}, "deleted group i (its 1 device stays registered)\n"},
		// Device names are separate words or one comma-separated list, as
		// in TARGETS, in every verb that takes several.
		{[]string{"group", "create", "j"}, "created group j\n"},
		{[]string{"group", "add", "j", "a,", "b"}, "added a, b to group j\n"},
		{[]string{"group", "remove", "j", "a, b"}, "removed a, b from group j\n"},
		{[]string{"group", "add", "j", "b,a"}, "added b, a to group j\n"},
		{[]string{"remove", "a,b"}, "removed device a (also removed from groups: j)\nremoved device b (also removed from groups: j)\n"},
	}
	for _, s := range steps {
		if got := mustRun(t, store, s.args...); got != s.want {
			t.Errorf("rex device %s:\n got %q\nwant %q", strings.Join(s.args, " "), got, s.want)
		}
	}
}

func TestDeviceListAndShowFormats(t *testing.T) {
	store := tempStore(t)
	// A hand-written registry: unknown fields, a device the CLI could not
	// have added, and a description with an escape sequence in it.
	hand := `{"devices": {
  "web1": {"host": "root@10.0.0.5", "port": 2222, "ssh_key": "~/.ssh/id", "description": "front \u001b[31mend", "roots": ["/srv"]},
  "odd": {"host": "-oProxyCommand=x"}
}, "groups": {"web": ["web1"]}, "version": 2}`
	if err := os.MkdirAll(filepath.Dir(store.Path()), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(store.Path(), []byte(hand), 0o600); err != nil {
		t.Fatal(err)
	}

	plain := mustRun(t, store, "list")
	wantPlain := "NAME  ADDRESS             KEY        GROUPS  DESCRIPTION\n" +
		"odd   -oProxyCommand=x    -          -       -\n" +
		"web1  root@10.0.0.5:2222  ~/.ssh/id  web     front ?[31mend\n"
	if plain != wantPlain {
		t.Errorf("plain list:\n%q\nwant\n%q", plain, wantPlain)
	}

	styled, err := run(t, store, true, "list")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(styled, "\x1b[31m") {
		t.Errorf("styled list passes the registry's escape sequence through: %q", styled)
	}
	for _, want := range []string{"╭", "NAME", "root@10.0.0.5:2222", "front ?[31mend"} {
		if !strings.Contains(styled, want) {
			t.Errorf("styled list lacks %q:\n%s", want, styled)
		}
	}

	var list struct {
		Devices []deviceJSON `json:"devices"`
	}
	if err := json.Unmarshal([]byte(mustRun(t, store, "list", "--json")), &list); err != nil {
		t.Fatal(err)
	}
	if len(list.Devices) != 2 || list.Devices[1].Name != "web1" {
		t.Fatalf("list --json = %+v", list)
	}
	w := list.Devices[1]
	if w.Host != "root@10.0.0.5" || w.User != "root" || w.Hostname != "10.0.0.5" || w.Port != 2222 ||
		w.Address != "root@10.0.0.5:2222" || !slices.Equal(w.Groups, []string{"web"}) || !slices.Equal(w.Roots, []string{"/srv"}) {
		t.Errorf("list --json web1 = %+v", w)
	}
	if list.Devices[0].Groups == nil || list.Devices[0].Extra == nil {
		t.Errorf("empty groups/extra must be [] and {}: %+v", list.Devices[0])
	}

	show := mustRun(t, store, "show", "web1")
	wantShow := "name:         web1\naddress:      root@10.0.0.5:2222\nkey:          ~/.ssh/id\ndescription:  front ?[31mend\ngroups:       web\nroots:        /srv\n"
	if show != wantShow {
		t.Errorf("show:\n%q\nwant\n%q", show, wantShow)
	}
	if odd := mustRun(t, store, "show", "odd"); !strings.Contains(odd, "problem:  invalid host \"-oProxyCommand=x\": a host must not start with '-'\n") {
		t.Errorf("show of an invalid entry does not say what is wrong:\n%s", odd)
	}
	var one deviceJSON
	if err := json.Unmarshal([]byte(mustRun(t, store, "show", "web1", "--json")), &one); err != nil || one.Name != "web1" || one.Port != 2222 {
		t.Errorf("show --json = %+v, %v", one, err)
	}

	// Listing never rewrites the file.
	if got := readFile(t, store.Path()); got != hand {
		t.Errorf("listing changed the file:\n%s", got)
	}
	// The next change keeps the unknown fields and the invalid entry.
	mustRun(t, store, "add", "web2", "h.lan")
	r, err := store.Load()
	if err != nil {
		t.Fatal(err)
	}
	if d, err := r.Lookup("odd"); err != nil || d.Host != "-oProxyCommand=x" {
		t.Errorf("odd after a save: %+v, %v", d, err)
	}
	if !strings.Contains(readFile(t, store.Path()), `"version": 2`) {
		t.Errorf("unknown top-level field lost:\n%s", readFile(t, store.Path()))
	}
}

func TestDeviceHelp(t *testing.T) {
	store := tempStore(t)
	for _, args := range [][]string{nil, {"help"}, {"--help"}, {"add", "--help"}, {"group", "list", "-h"}} {
		out, err := run(t, store, false, args...)
		if err != nil {
			t.Errorf("rex device %v: %v", args, err)
		}
		for _, want := range []string{"usage: rex device", "group remove GROUP DEVICE...", "TARGETS", store.Path()} {
			if !strings.Contains(out, want) {
				t.Errorf("rex device %v lacks %q:\n%s", args, want, out)
			}
		}
	}
}

func TestDeviceMalformedRegistry(t *testing.T) {
	store := tempStore(t)
	bad := "{\"devices\": {\n  \"web1\": {\"host\": \"a\" \"port\": 22}\n}}\n"
	if err := os.MkdirAll(filepath.Dir(store.Path()), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(store.Path(), []byte(bad), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"add", "web2", "h"}, {"remove", "web1"}, {"list"}, {"show", "web1"},
		{"group", "create", "g"}, {"group", "delete", "g"}, {"group", "add", "g", "web1"},
		{"group", "remove", "g", "web1"}, {"group", "list"}, {"check", "web1"},
	} {
		_, err := run(t, store, false, args...)
		if err == nil || !strings.Contains(err.Error(), store.Path()+":2:24: invalid character '\"' after object key:value pair; fix the file by hand") {
			t.Errorf("rex device %s = %v, want the position 2:24", strings.Join(args, " "), err)
		}
		if got := readFile(t, store.Path()); got != bad {
			t.Fatalf("rex device %s changed the malformed file:\n%s", strings.Join(args, " "), got)
		}
	}
}

type fakeRemote struct {
	verb    string
	targets []string
}

func (f *fakeRemote) record(verb string, ts []devices.Target) error {
	f.verb = verb
	for _, t := range ts {
		f.targets = append(f.targets, t.Name)
	}
	return nil
}

func (f *fakeRemote) Check(_ context.Context, _ IO, ts []devices.Target) error {
	return f.record("check", ts)
}

func (f *fakeRemote) Prepare(_ context.Context, _ IO, ts []devices.Target) error {
	return f.record("prepare", ts)
}

func (f *fakeRemote) Clean(_ context.Context, _ IO, ts []devices.Target) error {
	return f.record("clean", ts)
}

func TestDeviceRemoteVerbs(t *testing.T) {
	store := tempStore(t)
	mustRun(t, store, "add", "web1", "a.lan")
	mustRun(t, store, "add", "web2", "b.lan")
	for _, verb := range []string{"check", "prepare", "clean"} {
		_, err := run(t, store, false, verb, "web1")
		if err == nil || !strings.Contains(err.Error(), "needs the SSH layer") {
			t.Errorf("%s without a remote = %v", verb, err)
		}
		_, err = run(t, store, false, verb, "wbe1")
		if err == nil || !strings.Contains(err.Error(), "did you mean web1?") {
			t.Errorf("%s with a typo = %v; TARGETS must be checked first", verb, err)
		}
		f := &fakeRemote{}
		var out bytes.Buffer
		err = DeviceWith(context.Background(), store, f, IO{Out: &out, Err: &out}, []string{verb, "web*", "local,root@10.0.0.9"})
		if err != nil {
			t.Fatalf("%s: %v", verb, err)
		}
		if f.verb != verb || !slices.Equal(f.targets, []string{"web1", "web2", "local", "root@10.0.0.9"}) {
			t.Errorf("%s reached the remote as %q with %v", verb, f.verb, f.targets)
		}
	}
}

// TestDeviceHelperProcess is not a test: it is the body of the helper
// processes that TestDeviceConcurrentProcesses starts, running
// "rex device ARGS" as cmd/rex does.
func TestDeviceHelperProcess(t *testing.T) {
	argsJSON := os.Getenv("REX_DEVICE_HELPER_ARGS")
	if argsJSON == "" {
		return // not started as a helper
	}
	var args []string
	if err := json.Unmarshal([]byte(argsJSON), &args); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(3)
	}
	store := devices.NewStore(os.Getenv("REX_DEVICE_HELPER_PATH"))
	err := Device(context.Background(), store, IO{In: os.Stdin, Out: os.Stdout, Err: os.Stderr}, args)
	if err != nil {
		fmt.Fprintln(os.Stderr, "rex:", err)
	}
	os.Exit(ExitCode(err))
}

// TestDeviceConcurrentProcesses starts 20 processes that each run
// "rex device add" at once; all 20 devices must be registered.
func TestDeviceConcurrentProcesses(t *testing.T) {
	path := filepath.Join(t.TempDir(), "rex", "devices.json")
	const n = 20
	cmds := make([]*exec.Cmd, n)
	outs := make([]bytes.Buffer, n)
	for i := range n {
		args, _ := json.Marshal([]string{"add", fmt.Sprintf("node%02d", i), fmt.Sprintf("root@10.9.0.%d", i+1), "--port", "22"})
		cmd := exec.Command(os.Args[0], "-test.run=^TestDeviceHelperProcess$")
		cmd.Env = append(os.Environ(), "REX_DEVICE_HELPER_ARGS="+string(args), "REX_DEVICE_HELPER_PATH="+path)
		cmd.Stdout, cmd.Stderr = &outs[i], &outs[i]
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmds[i] = cmd
	}
	for i, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			t.Errorf("process %d: %v: %s", i, err, outs[i].String())
		}
		want := fmt.Sprintf("added device node%02d (root@10.9.0.%d:22)\n", i, i+1)
		if got := outs[i].String(); got != want {
			t.Errorf("process %d printed %q, want %q", i, got, want)
		}
	}
	r, err := devices.NewStore(path).Load()
	if err != nil {
		t.Fatal(err)
	}
	if got := len(r.Devices()); got != n {
		t.Errorf("%d devices after %d concurrent adds", got, n)
	}
}

// TestDeviceRemoteVerbsTakeSSHAliases: check, prepare and clean take
// TARGETS as every other verb does, explicit Host aliases of
// ~/.ssh/config included (README: TARGETS, and -x "in every verb that
// takes TARGETS (..., device check|prepare|clean, ...)").
func TestDeviceRemoteVerbsTakeSSHAliases(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	if err := os.MkdirAll(filepath.Join(home, ".ssh"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(home, ".ssh", "config"), []byte("Host jumpbox\n  HostName 10.0.0.7\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	store := tempStore(t)
	mustRun(t, store, "add", "web1", "a.lan")
	for _, verb := range []string{"check", "prepare", "clean"} {
		f := &fakeRemote{}
		var out bytes.Buffer
		err := DeviceWith(context.Background(), store, f, IO{Out: &out, Err: &out}, []string{verb, "web1,jumpbox"})
		if err != nil || !slices.Equal(f.targets, []string{"web1", "jumpbox"}) {
			t.Errorf("rex device %s web1,jumpbox = %v, reached %v; want web1 and the ssh_config alias jumpbox", verb, err, f.targets)
		}
	}
}

// TestDeviceRemoteVerbsTakeExclude: the console's /device check|prepare|
// clean parse the same flags as rex device check (-x NAMES among them):
// flags are declared once for both front ends.
func TestDeviceRemoteVerbsTakeExclude(t *testing.T) {
	t.Setenv("HOME", t.TempDir())
	store := tempStore(t)
	mustRun(t, store, "add", "web1", "a.lan")
	mustRun(t, store, "add", "web2", "b.lan")
	for _, verb := range []string{"check", "prepare", "clean"} {
		f := &fakeRemote{}
		var out bytes.Buffer
		err := DeviceWith(context.Background(), store, f, IO{Out: &out, Err: &out}, []string{verb, "web*", "-x", "web2", "--connect-timeout", "5s"})
		if err != nil || !slices.Equal(f.targets, []string{"web1"}) {
			t.Errorf("/device %s web* -x web2 = %v, reached %v; want web1 alone", verb, err, f.targets)
		}
	}
}

// TestTargetsFoldSameMachine: a machine named twice in TARGETS (a device
// and its address) is reached once, as the name written first, and the
// front ends say so: Resolver tells its notice (the CLI's App writes it
// on stderr), `rex device check` writes it on stderr.
func TestTargetsFoldSameMachine(t *testing.T) {
	store := tempStore(t)
	mustRun(t, store, "add", "web1", "root@10.0.0.1:22")
	mustRun(t, store, "add", "web2", "root@10.0.0.2")
	const note = "root@10.0.0.1 reaches the same machine as web1 (root@10.0.0.1:22); it runs there once, as web1"
	var notes []string
	ts, err := Resolver(store, func(msg string) { notes = append(notes, msg) })("web1,root@10.0.0.1,web2")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, tg := range ts {
		got = append(got, tg.Name)
	}
	if !slices.Equal(got, []string{"web1", "web2"}) || !slices.Equal(notes, []string{note}) {
		t.Errorf("Resolve = %v, notices %q; want [web1 web2] and %q", got, notes, note)
	}
	var out, errOut bytes.Buffer
	err = Device(context.Background(), store, IO{In: strings.NewReader(""), Out: &out, Err: &errOut}, []string{"check", "web1,root@10.0.0.1"})
	if err == nil || !strings.Contains(err.Error(), "needs the SSH layer") {
		t.Fatalf("check without SSH: %v", err)
	}
	if errOut.String() != "rex: "+note+"\n" {
		t.Errorf("check wrote %q on stderr, want the note", errOut.String())
	}
}

// TestTargetsCompareSSHConfigPort: a target without a port is dialed on
// the Port ~/.ssh/config gives its host, so the Resolver folds it with a
// target at that port (saying so) and not with one at 22, and an
// exclusion at that port leaves it out.
func TestTargetsCompareSSHConfigPort(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	if err := os.MkdirAll(filepath.Join(home, ".ssh"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(home, ".ssh", "config"), []byte("Host *.p2222\n  Port 2222\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	store := tempStore(t)
	mustRun(t, store, "add", "web1", "root@a.p2222")
	for _, tt := range []struct {
		spec  string
		want  []string
		notes []string
	}{
		{"web1,root@a.p2222:22", []string{"web1", "root@a.p2222:22"}, nil},
		{"web1,root@a.p2222:2222", []string{"web1"}, []string{"root@a.p2222:2222 reaches the same machine as web1 (root@a.p2222); it runs there once, as web1"}},
		{"web1,root@b.lan,!root@a.p2222:2222", []string{"root@b.lan"}, nil},
		{"web1,root@b.lan,!root@a.p2222:22", []string{"web1", "root@b.lan"}, nil},
	} {
		wantResolved(t, store, tt.spec, tt.want, tt.notes)
	}
}

// wantResolved checks the names the Resolver gives spec and the fold
// notices it says.
func wantResolved(t *testing.T, store *devices.Store, spec string, want, wantNotes []string) {
	t.Helper()
	var notes []string
	ts, err := Resolver(store, func(msg string) { notes = append(notes, msg) })(spec)
	if err != nil {
		t.Errorf("Resolve(%q): %v", spec, err)
		return
	}
	var got []string
	for _, tg := range ts {
		got = append(got, tg.Name)
	}
	if !slices.Equal(got, want) || !slices.Equal(notes, wantNotes) {
		t.Errorf("Resolve(%q) = %v, notices %q; want %v, %q", spec, got, notes, want, wantNotes)
	}
}

// TestTargetsCompareSSHConfigAddress: the Resolver compares targets where
// ssh_config makes sshx dial them: an alias's HostName and User, ssh_config's
// User for a target that names none, and a Port set in a Match block. So
// an alias folds into the device at its machine and login (saying so), an
// address leaves out the aliases that reach it, and another login stays.
func TestTargetsCompareSSHConfigAddress(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	if err := os.MkdirAll(filepath.Join(home, ".ssh"), 0o700); err != nil {
		t.Fatal(err)
	}
	cfg := `Host www
  HostName 10.0.0.2
  User root
Host deploy
  HostName 10.0.0.2
  User deploy
Match host m2222
  Port 2222
Host *
  User ops
`
	if err := os.WriteFile(filepath.Join(home, ".ssh", "config"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	store := tempStore(t)
	mustRun(t, store, "add", "web2", "root@10.0.0.2")
	mustRun(t, store, "add", "m", "root@m2222")
	for _, tt := range []struct {
		spec  string
		want  []string
		notes []string
	}{
		{"web2,www", []string{"web2"}, []string{"www reaches the same machine as web2 (root@10.0.0.2); it runs there once, as web2"}},
		{"web2,deploy", []string{"web2", "deploy"}, nil},
		{"www,root@b.lan,!10.0.0.2", []string{"root@b.lan"}, nil},
		{"www,root@b.lan,!root@10.0.0.2", []string{"root@b.lan"}, nil},
		{"www,root@b.lan,!ops@10.0.0.2", []string{"www", "root@b.lan"}, nil},
		{"10.0.0.3,ops@10.0.0.3", []string{"10.0.0.3"}, []string{"ops@10.0.0.3 reaches the same machine as 10.0.0.3; it runs there once, as 10.0.0.3"}},
		{"m,root@m2222:2222", []string{"m"}, []string{"root@m2222:2222 reaches the same machine as m (root@m2222); it runs there once, as m"}},
		{"m,root@m2222:22", []string{"m", "root@m2222:22"}, nil},
		{"m,root@b.lan,!m2222:2222", []string{"root@b.lan"}, nil},
	} {
		wantResolved(t, store, tt.spec, tt.want, tt.notes)
	}
}
