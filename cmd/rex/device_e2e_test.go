package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// rexEnv runs the real rex binary as a new user would: HOME is an empty
// temporary directory and no XDG variable points elsewhere.
type rexEnv struct {
	t    *testing.T
	bin  string
	home string
	env  []string
}

func newRexEnv(t *testing.T, bin string) *rexEnv {
	home := t.TempDir()
	// A private runtime directory: rex mcp asks the rex server there (none
	// runs), never one of whoever runs the tests.
	run := filepath.Join(home, "run")
	os.Mkdir(run, 0o700)
	env := []string{"HOME=" + home, "XDG_RUNTIME_DIR=" + run}
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "HOME=") || strings.HasPrefix(kv, "XDG_") {
			continue
		}
		env = append(env, kv)
	}
	return &rexEnv{t: t, bin: bin, home: home, env: env}
}

func (e *rexEnv) cmd(args ...string) *exec.Cmd {
	cmd := exec.Command(e.bin, args...)
	cmd.Env = e.env
	cmd.Dir = e.home
	return cmd
}

// run returns stdout, stderr and the exit status.
func (e *rexEnv) run(args ...string) (string, string, int) {
	e.t.Helper()
	var out, errOut bytes.Buffer
	cmd := e.cmd(args...)
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		return out.String(), errOut.String(), ee.ExitCode()
	case err != nil:
		e.t.Fatalf("rex %s: %v", strings.Join(args, " "), err)
	}
	return out.String(), errOut.String(), 0
}

func (e *rexEnv) registry() string {
	return filepath.Join(e.home, ".config", "rex", "devices.json")
}

// TestDeviceE2E drives the built rex binary through the device verbs.
func TestDeviceE2E(t *testing.T) {
	bin := rexBin

	t.Run("new user", func(t *testing.T) {
		e := newRexEnv(t, bin)
		// web1's key exists: adding it warns of nothing.
		os.MkdirAll(filepath.Join(e.home, ".ssh"), 0o700)
		if err := os.WriteFile(filepath.Join(e.home, ".ssh", "id"), []byte("not a key\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		steps := []struct {
			args []string
			want string
		}{
			{[]string{"device", "list"}, "no devices yet; add one with rex device add NAME [USER@]HOST\n"},
			{[]string{"device", "add", "web1", "root@10.0.0.5", "--port", "2222", "--key", "~/.ssh/id", "--desc", "front end"}, "added device web1 (root@10.0.0.5:2222)\n"},
			{[]string{"device", "add", "db1", "db.lan"}, "added device db1 (db.lan)\n"},
			{[]string{"device", "group", "create", "web"}, "created group web\n"},
			{[]string{"device", "group", "add", "web", "web1", "db1"}, "added web1, db1 to group web\n"},
			{[]string{"device", "list"}, "NAME  ADDRESS             KEY        GROUPS  DESCRIPTION\n" +
				"db1   db.lan              -          web     -\n" +
				"web1  root@10.0.0.5:2222  ~/.ssh/id  web     front end\n"},
			{[]string{"device", "remove", "db1"}, "removed device db1 (also removed from groups: web)\n"},
			{[]string{"device", "group", "list"}, "GROUP  MEMBERS\nweb    web1\n"},
		}
		for _, s := range steps {
			out, errOut, code := e.run(s.args...)
			if code != 0 || out != s.want || errOut != "" {
				t.Errorf("rex %s: status %d, stdout %q, stderr %q; want stdout %q", strings.Join(s.args, " "), code, out, errOut, s.want)
			}
		}
		want := "{\n  \"devices\": {\n    \"web1\": {\n      \"host\": \"root@10.0.0.5\",\n      \"port\": 2222,\n" +
			"      \"ssh_key\": \"~/.ssh/id\",\n      \"description\": \"front end\"\n    }\n  },\n" +
			"  \"groups\": {\n    \"web\": [\n      \"web1\"\n    ]\n  }\n}\n"
		got, err := os.ReadFile(e.registry())
		if err != nil || string(got) != want {
			t.Errorf("devices.json = %q, %v; want %q", got, err, want)
		}
		for p, mode := range map[string]os.FileMode{e.registry(): 0o600, filepath.Dir(e.registry()): 0o700 | os.ModeDir} {
			if fi, err := os.Stat(p); err != nil || fi.Mode() != mode {
				t.Errorf("%s: %v, %v; want mode %v", p, fi, err, mode)
			}
		}
	})

	t.Run("XDG_CONFIG_HOME", func(t *testing.T) {
		e := newRexEnv(t, bin)
		cfg := filepath.Join(e.home, "cfg")
		e.env = append(e.env, "XDG_CONFIG_HOME="+cfg)
		if _, errOut, code := e.run("device", "add", "a", "a.lan"); code != 0 {
			t.Fatalf("add: %d %s", code, errOut)
		}
		if _, err := os.Stat(filepath.Join(cfg, "rex", "devices.json")); err != nil {
			t.Errorf("registry not under XDG_CONFIG_HOME: %v", err)
		}
	})

	t.Run("errors", func(t *testing.T) {
		e := newRexEnv(t, bin)
		tests := []struct {
			args []string
			code int
			want string
		}{
			{[]string{"device", "add", "all", "h"}, 1, `"all" is reserved`},
			{[]string{"device", "add", "x", "--", "-oProxyCommand=id"}, 1, "must not start with '-'"},
			{[]string{"device", "add", "x"}, 2, "takes NAME and [USER@]HOST"},
			{[]string{"device", "remove", "nope"}, 1, `no device is named "nope"`},
		}
		for _, tt := range tests {
			_, errOut, code := e.run(tt.args...)
			if code != tt.code || !strings.Contains(errOut, tt.want) {
				t.Errorf("rex %s: status %d, stderr %q; want %d and %q", strings.Join(tt.args, " "), code, errOut, tt.code, tt.want)
			}
		}
		if _, err := os.Stat(e.registry()); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("failed commands created the registry: %v", err)
		}
		// A malformed registry is reported at its position and left alone.
		bad := "{\"devices\": {\n  \"a\": {\"host\": \"a\"},\n}}\n"
		if err := os.MkdirAll(filepath.Dir(e.registry()), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(e.registry(), []byte(bad), 0o600); err != nil {
			t.Fatal(err)
		}
		_, errOut, code := e.run("device", "add", "b", "b.lan")
		if code != 1 || !strings.Contains(errOut, e.registry()+":3:1: ") {
			t.Errorf("add on a malformed registry: status %d, stderr %q", code, errOut)
		}
		if got, _ := os.ReadFile(e.registry()); string(got) != bad {
			t.Errorf("the malformed registry changed: %q", got)
		}
	})

	// The verbs that take several device names read them as TARGETS does,
	// ranges included (one parser), and change nothing when a name is not
	// a device (or not a member), saying which in one sentence.
	t.Run("ranges", func(t *testing.T) {
		e := newRexEnv(t, bin)
		for _, args := range [][]string{
			{"device", "add", "web1", "a1.lan"}, {"device", "add", "web2", "a2.lan"},
			{"device", "add", "web3", "a3.lan"}, {"device", "add", "web4", "a4.lan"},
			{"device", "group", "create", "web"},
		} {
			if _, errOut, code := e.run(args...); code != 0 {
				t.Fatalf("rex %s: %d %s", strings.Join(args, " "), code, errOut)
			}
		}
		steps := []struct {
			args     []string
			code     int
			out, err string
		}{
			{[]string{"device", "group", "add", "web", "web[1-6]"}, 1, "",
				`rex: nothing was added to group web: no device is named "web5" or "web6"; rex device list shows the devices` + "\n"},
			{[]string{"device", "group", "add", "web", "web[1,3-4]"}, 0, "added web1, web3, web4 to group web\n", ""},
			{[]string{"device", "group", "remove", "web", "web[2-3]"}, 1, "",
				`rex: nothing was removed from group web: "web2" is not in group "web"; rex device group list shows its members` + "\n"},
			{[]string{"device", "group", "remove", "web", "web[3-4]"}, 0, "removed web3, web4 from group web\n", ""},
			{[]string{"device", "remove", "web[3-5]", "webx"}, 1, "",
				`rex: nothing was removed: no device is named "web5" or "webx"; rex device list shows the devices` + "\n"},
			{[]string{"device", "remove", "web[1-2]"}, 0, "removed device web1 (also removed from groups: web)\nremoved device web2\n", ""},
			{[]string{"device", "remove", "web[3-4"}, 1, "", "rex: remove devices: web[3-4: '[' has no matching ']'; close every range as in node[1-4]\n"},
			{[]string{"device", "show", "web[3-4]"}, 2, "", ""},
			{[]string{"device", "list"}, 0, "NAME  ADDRESS  KEY  GROUPS  DESCRIPTION\nweb3  a3.lan   -    -       -\nweb4  a4.lan   -    -       -\n", ""},
		}
		for _, s := range steps {
			out, errOut, code := e.run(s.args...)
			if code != s.code || out != s.out || s.err != "" && errOut != s.err {
				t.Errorf("rex %s: status %d, stdout %q, stderr %q; want %d, %q, %q", strings.Join(s.args, " "), code, out, errOut, s.code, s.out, s.err)
			}
		}
	})

	t.Run("20 concurrent adds", func(t *testing.T) {
		e := newRexEnv(t, bin)
		const n = 20
		cmds := make([]*exec.Cmd, n)
		outs := make([]bytes.Buffer, n)
		for i := range n {
			cmds[i] = e.cmd("device", "add", fmt.Sprintf("n%02d", i), fmt.Sprintf("10.2.0.%d", i+1))
			cmds[i].Stdout, cmds[i].Stderr = &outs[i], &outs[i]
			if err := cmds[i].Start(); err != nil {
				t.Fatal(err)
			}
		}
		for i, c := range cmds {
			if err := c.Wait(); err != nil {
				t.Errorf("process %d: %v: %s", i, err, outs[i].String())
			}
		}
		out, errOut, code := e.run("device", "list", "--json")
		if code != 0 {
			t.Fatalf("list: %d %s", code, errOut)
		}
		if got := strings.Count(out, `"name": "n`); got != n {
			t.Errorf("%d devices after %d concurrent adds:\n%s", got, n, out)
		}
	})
}
