package rexd_test

import (
	"bytes"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rexconsole/rex/internal/protocol"
)

// ptyOutput is everything a PTY printed so far.
func (h *harness) ptyOutput(pid string) []byte {
	h.t.Helper()
	var b bytes.Buffer
	for i, e := range h.events(pid, protocol.EventPTYOutput) {
		if e.Seq != uint64(i+1) {
			h.t.Fatalf("pty.output seq %d at position %d", e.Seq, i)
		}
		d, err := e.Bytes()
		if err != nil {
			h.t.Fatal(err)
		}
		b.Write(d)
	}
	return b.Bytes()
}

// waitOutput waits until the PTY's output contains want.
func (h *harness) waitOutput(pid, want string) {
	h.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if strings.Contains(string(h.ptyOutput(pid)), want) {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	h.t.Fatalf("PTY output never contained %q; got %q", want, h.ptyOutput(pid))
}

func (h *harness) openPTY(p protocol.PTYOpenParams) protocol.PTYOpenResult {
	h.t.Helper()
	var res protocol.PTYOpenResult
	h.ok(protocol.MethodPTYOpen, p, &res)
	return res
}

func (h *harness) typeInto(sid string, t protocol.PTYOpenResult, s string) {
	h.t.Helper()
	h.ok(protocol.MethodPTYInput, protocol.PTYInputParams{SessionID: sid, PTYID: t.PTYID, Data: s}, nil)
}

func TestPTYSizeAndResize(t *testing.T) {
	h := start(t)
	sid := h.open()
	p := h.openPTY(protocol.PTYOpenParams{SessionID: sid, Cols: 123, Rows: 45,
		Argv: []string{"sh", "-c", `tty; echo TERM=$TERM; stty size; read x; stty size`}})
	h.waitOutput(p.ProcessID, "45 123")
	out := string(h.ptyOutput(p.ProcessID))
	if !strings.Contains(out, "/dev/pts/") {
		t.Errorf("tty did not name a pts device: %q", out)
	}
	if !strings.Contains(out, "TERM=xterm-256color") {
		t.Errorf("TERM default: %q", out)
	}
	h.ok(protocol.MethodPTYResize, protocol.PTYResizeParams{SessionID: sid, PTYID: p.PTYID, Cols: 200, Rows: 50}, nil)
	h.typeInto(sid, p, "\n")
	h.waitOutput(p.ProcessID, "50 200")
	exit := h.exitOf(p.ProcessID, 5*time.Second)
	if exit.ExitCode == nil || *exit.ExitCode != 0 || exit.PTYID != p.PTYID {
		t.Errorf("pty.exit = %+v", exit)
	}
	h.fails(protocol.MethodPTYResize, protocol.PTYResizeParams{SessionID: sid, PTYID: p.PTYID, Cols: 0, Rows: 10}, protocol.CodeInvalidParams)
	h.fails(protocol.MethodPTYResize, protocol.PTYResizeParams{SessionID: sid, PTYID: "t_404", Cols: 10, Rows: 10}, protocol.CodeProcessNotFound)
	h.fails(protocol.MethodPTYOpen, protocol.PTYOpenParams{SessionID: sid, Argv: []string{"true"}, Cols: -1}, protocol.CodeInvalidParams)
}

func TestPTYPasswordWithEchoOff(t *testing.T) {
	h := start(t)
	sid := h.open()
	p := h.openPTY(protocol.PTYOpenParams{SessionID: sid,
		// Echo goes off before the prompt shows, so typing after the
		// prompt is never echoed, however slowly stty runs.
		Argv: []string{"sh", "-c", `stty -echo; printf 'Password: '; read pw; stty echo; echo; echo "got:$pw"`}})
	h.waitOutput(p.ProcessID, "Password: ")
	h.typeInto(sid, p, "s3cret\n")
	h.waitOutput(p.ProcessID, "got:s3cret")
	out := string(h.ptyOutput(p.ProcessID))
	if strings.Count(out, "s3cret") != 1 {
		t.Errorf("the password was echoed: %q", out)
	}
}

func TestPTYBinaryOutputIntact(t *testing.T) {
	h := start(t)
	sid := h.open()
	data := make([]byte, 4096)
	rand.Read(data)
	os.WriteFile(filepath.Join(h.root, "rand.bin"), data, 0o644)
	// raw mode: no \n → \r\n translation, so the bytes must match exactly.
	p := h.openPTY(protocol.PTYOpenParams{SessionID: sid, Argv: []string{"sh", "-c", `stty raw -echo; cat rand.bin`}})
	h.exitOf(p.ProcessID, 10*time.Second)
	if got := h.ptyOutput(p.ProcessID); !bytes.Equal(got, data) {
		t.Fatalf("got %d bytes, want the 4096 random bytes intact", len(got))
	}
}

func TestPTYLoginShellByDefault(t *testing.T) {
	h := start(t)
	sid := h.open()
	p := h.openPTY(protocol.PTYOpenParams{SessionID: sid})
	h.typeInto(sid, p, "echo \"zero=$0\"; exit 7\n")
	exit := h.exitOf(p.ProcessID, 10*time.Second)
	out := string(h.ptyOutput(p.ProcessID))
	if !strings.Contains(out, "zero=-") {
		t.Errorf("not a login shell: %q", out)
	}
	if exit.ExitCode == nil || *exit.ExitCode != 7 {
		t.Errorf("exit code %v, want 7", exit.ExitCode)
	}
}

// An interactive shell puts background jobs in their own process groups;
// every way of ending the PTY must still leave nothing behind.
func TestPTYLeavesNoProcess(t *testing.T) {
	for _, how := range []string{"pty.close", "session.close", "stdin EOF"} {
		t.Run(how, func(t *testing.T) {
			h := start(t)
			sid := h.open()
			pidFile := filepath.Join(h.root, "pids")
			p := h.openPTY(protocol.PTYOpenParams{SessionID: sid, Argv: []string{"bash", "--norc", "--noprofile", "-i"}})
			h.typeInto(sid, p, "sleep 60 & echo $! >> pids; (trap '' HUP TERM; sleep 60) & echo $! >> pids; echo $$ >> pids\n")
			waitPidFile(t, pidFile, 3)
			if n := len(pidsAlive(t, pidFile)); n != 3 {
				t.Fatalf("%d of 3 test processes alive", n)
			}
			switch how {
			case "pty.close":
				var ok protocol.OKResult
				h.ok(protocol.MethodPTYClose, protocol.PTYCloseParams{SessionID: sid, PTYID: p.PTYID}, &ok)
				if !ok.OK {
					t.Error("pty.close answered ok=false")
				}
				exit := h.exitOf(p.ProcessID, 5*time.Second)
				if exit.Signal == nil && exit.ExitCode == nil {
					t.Errorf("pty.exit without a status: %+v", exit)
				}
			case "session.close":
				h.ok(protocol.MethodSessionClose, protocol.SessionRef{SessionID: sid}, nil)
			case "stdin EOF":
				h.stdin.Close()
			}
			noneAliveWithin(t, pidFile, 30*time.Second) // the 1 s kill grace, and a loaded machine
		})
	}
}

func TestPTYSessionInfoListsIt(t *testing.T) {
	h := start(t)
	sid := h.open()
	p := h.openPTY(protocol.PTYOpenParams{SessionID: sid, Argv: []string{"sleep", "30"}})
	var info protocol.SessionInfoResult
	h.ok(protocol.MethodSessionInfo, protocol.SessionRef{SessionID: sid}, &info)
	if len(info.Processes) != 1 || info.Processes[0].PTYID != p.PTYID || info.Processes[0].ProcessID != p.ProcessID {
		b, _ := json.Marshal(info)
		t.Errorf("session.info = %s", b)
	}
	h.ok(protocol.MethodPTYClose, protocol.PTYCloseParams{SessionID: sid, PTYID: p.PTYID}, nil)
	h.ok(protocol.MethodSessionInfo, protocol.SessionRef{SessionID: sid}, &info)
	if len(info.Processes) != 0 {
		t.Errorf("closed PTY still listed: %+v", info.Processes)
	}
}

// fdFlags lists the open-file flags of rexd's descriptors that lead to
// target (a path such as /dev/ptmx, or pipe:[inode]).
func fdFlags(t *testing.T, pid int, target string) []int {
	t.Helper()
	dir := fmt.Sprintf("/proc/%d/fd", pid)
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var flags []int
	for _, e := range ents {
		if l, err := os.Readlink(filepath.Join(dir, e.Name())); err != nil || l != target {
			continue
		}
		info, err := os.ReadFile(fmt.Sprintf("/proc/%d/fdinfo/%s", pid, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(string(info), "\n") {
			if v, ok := strings.CutPrefix(line, "flags:"); ok {
				f, err := strconv.ParseInt(strings.TrimSpace(v), 8, 64)
				if err != nil {
					t.Fatal(err)
				}
				flags = append(flags, int(f))
			}
		}
	}
	return flags
}

// rexd reads its terminals and its standard input through the runtime's
// poller, not by a thread parked in read(2): a waiting read then costs
// nothing (pollable.go says why it matters). A resize must not put
// the terminal back in blocking mode.
func TestPTYMasterPolled(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("reads /proc")
	}
	h := start(t)
	sid := h.open()
	p := h.openPTY(protocol.PTYOpenParams{SessionID: sid, Argv: []string{"sh", "-c", "stty -echo; echo ready; exec cat"}})
	h.waitOutput(p.ProcessID, "ready")
	h.ok(protocol.MethodPTYResize, protocol.PTYResizeParams{SessionID: sid, PTYID: p.PTYID, Cols: 100, Rows: 30}, nil)
	h.typeInto(sid, p, "typed\n")
	h.waitOutput(p.ProcessID, "typed")

	pid := h.cmd.Process.Pid
	masters := fdFlags(t, pid, "/dev/ptmx")
	if len(masters) != 1 || masters[0]&syscall.O_NONBLOCK == 0 {
		t.Errorf("rexd's terminal masters have flags %o: want one, non-blocking", masters)
	}
	stdin, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/0", pid))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(fdFlags(t, pid, stdin), func(f int) bool { return f&syscall.O_NONBLOCK != 0 }) {
		t.Errorf("rexd's standard input (%s) is read blocking", stdin)
	}
}
