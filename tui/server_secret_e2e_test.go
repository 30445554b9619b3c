package tui_test

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/rexconsole/rex/internal/sshtest"
)

// TestServerKeepsTheSudoPasswordE2E: a sudo password typed into the
// console (the real binary, its console in the rex server, under tmux)
// reaches sudo on a real host whose sudo wants one, and is found nowhere
// but in the server: not on the client's screen or in its scrollback, not
// in any file under the test's home (server.json and the socket
// directory, the server's log, history, state, cache), not in the host's
// rexd audit logs or files, and not in the attached client's memory once
// sent (read from /proc/PID/mem; the same scan finds a marker the client
// holds, so a miss means something).
func TestServerKeepsTheSudoPasswordE2E(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("this test makes a user whose sudo wants a password, and reads the client's memory: run it as root (CI does)")
	}
	const password = "Kept-in-the-server-9Q" // 21 bytes: its base64 has no padding
	marker := newMarker("rex-client-marker-")
	bin := buildConsole(t)
	key := sshtest.NewKey(t, "ed25519")
	u := sshtest.NewUser(t, sshtest.UserOptions{Password: password, Sudo: sshtest.SudoPassword})
	h := sshtest.Start(t, sshtest.Options{User: u.Name, Home: u.Home, Authorized: []*sshtest.Key{key}})

	c := newConsoleShell(t, bin, "", 160, 40)
	c.sendLine("REX_TEST_MARKER=" + marker + " " + filepath.Join(bin, "rex"))
	c.waitFor("local ❯")
	c.run(fmt.Sprintf("/device add hp %s@%s --key %s", h.User, h.Addr, key.Path), "added device hp")

	// A root-owned directory the login user cannot write.
	etc := filepath.Join(sshtest.TempDir(t), "etc")
	if err := os.MkdirAll(etc, 0o755); err != nil {
		t.Fatal(err)
	}
	conf := filepath.Join(c.home, "app.conf")
	os.WriteFile(conf, []byte("setting = 1\n"), 0o644)

	c.run("/push --sudo "+conf+" "+etc+"/pw/ hp", "sudo password on hp")
	c.tmux(nil, "send-keys", "-t", "rex", "-l", password)
	c.keys("Enter")
	c.waitFor("hp", "created")
	if b, err := os.ReadFile(filepath.Join(etc, "pw", "app.conf")); err != nil || string(b) != "setting = 1\n" {
		t.Fatalf("the push through sudo did not arrive: %q %v", b, err)
	}

	secrets := [][]byte{[]byte(password), []byte(base64.StdEncoding.EncodeToString([]byte(password)))}
	holds := func(b []byte) bool {
		for _, s := range secrets {
			if bytes.Contains(b, s) {
				return true
			}
		}
		return false
	}

	// The client's screen and scrollback.
	if scr := c.tmux(nil, "capture-pane", "-p", "-S", "-", "-t", "rex"); holds([]byte(scr)) {
		t.Fatalf("the client's terminal shows the password:\n%s", scr)
	}

	// Every file under the test's home (the rex server's directory and
	// log, rex's config, state, history and cache) and the host's.
	for _, root := range []string{c.home, u.Home, "/root/.local/state/rexd"} {
		filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil || !d.Type().IsRegular() {
				return nil
			}
			if b, err := os.ReadFile(p); err == nil && holds(b) {
				t.Errorf("%s holds the password", p)
			}
			return nil
		})
	}
	if _, err := os.Stat(filepath.Join(c.home, "run", "rex", "server.json")); err != nil {
		t.Fatalf("no server.json: the console is not in a rex server: %v", err)
	}

	// The attached client's memory, now that the password was sent.
	client := clientPid(t, c)
	mem := readMemory(t, client)
	if !bytes.Contains(mem, []byte(marker)) {
		t.Fatalf("the memory scan of the client (pid %d, %d bytes) does not find the marker it holds: the scan is broken", client, len(mem))
	}
	if holds(mem) {
		t.Fatalf("the client (pid %d) still holds the password in its memory", client)
	}
}

// clientPid is the pid of the rex attached in c's tmux pane: the
// descendant of the pane's process whose environment has
// REX_TEST_MARKER.
func clientPid(t *testing.T, c *console) int {
	t.Helper()
	root, err := strconv.Atoi(strings.TrimSpace(c.tmux(nil, "display-message", "-p", "-t", "rex", "#{pane_pid}")))
	if err != nil {
		t.Fatal(err)
	}
	var seen []string
	queue := []int{root}
	for len(queue) > 0 && len(seen) < 100 {
		pid := queue[0]
		queue = queue[1:]
		cmd, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		seen = append(seen, fmt.Sprintf("%d %q", pid, cmd))
		if env, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid)); err == nil && bytes.Contains(env, []byte("REX_TEST_MARKER=")) {
			return pid
		}
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", pid, pid))
		for _, f := range strings.Fields(string(b)) {
			if child, err := strconv.Atoi(f); err == nil {
				queue = append(queue, child)
			}
		}
	}
	t.Fatalf("no rex client under the pane's process: %s", strings.Join(seen, "; "))
	return 0
}

// readMemory reads every readable and writable mapping of a process
// (heap, stacks, data, anonymous), where a copy of typed keys would be.
func readMemory(t *testing.T, pid int) []byte {
	t.Helper()
	maps, err := os.Open(fmt.Sprintf("/proc/%d/maps", pid))
	if err != nil {
		t.Fatal(err)
	}
	defer maps.Close()
	mem, err := os.Open(fmt.Sprintf("/proc/%d/mem", pid))
	if err != nil {
		t.Fatal(err)
	}
	defer mem.Close()
	var out []byte
	sc := bufio.NewScanner(maps)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 2 || !strings.HasPrefix(f[1], "rw") {
			continue
		}
		lo, hi, _ := strings.Cut(f[0], "-")
		start, err1 := strconv.ParseUint(lo, 16, 64)
		end, err2 := strconv.ParseUint(hi, 16, 64)
		if err1 != nil || err2 != nil || end <= start || end-start > 1<<30 {
			continue
		}
		buf := make([]byte, end-start)
		n, _ := mem.ReadAt(buf, int64(start))
		out = append(out, buf[:n]...)
	}
	return out
}
