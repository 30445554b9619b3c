package rexd_test

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/rexconsole/rex/internal/protocol"
)

// rawScript prints 300 KiB (more than one event) of bytes JSON would
// escape: NULs, invalid UTF-8, quotes, and lines that look like JSON-RPC.
const rawScript = `i=0; while [ $i -lt 3000 ]; do printf '\000\377"\\{"jsonrpc":"2.0","method":"exec.exit"}\n%090d\n' $i; i=$((i+1)); done`

// rawOutputRun opens a session on a real rexd with open's params, runs
// rawScript, and returns the output it got back and how many of its events
// were raw frames and how many JSON lines.
func rawOutputRun(t *testing.T, open protocol.SessionOpenParams) (out []byte, frames, lines int, opened protocol.SessionOpenResult) {
	t.Helper()
	out, frames, lines, opened, errs := rawOutputRunArgv(t, open, []string{"/bin/sh", "-c", rawScript}, nil)
	if len(errs) > 0 {
		t.Fatalf("rexd sent %s", errs[0])
	}
	return out, frames, lines, opened
}

// rawOutputRunArgv is rawOutputRun for any command, rexd started with
// rexdArgs besides; it returns the exec.error events' lines too. atExit, if
// set, is called with rexd's pid once the exit event is in, rexd still
// running.
func rawOutputRunArgv(t *testing.T, open protocol.SessionOpenParams, argv []string, atExit func(pid int), rexdArgs ...string) (out []byte, frames, lines int, opened protocol.SessionOpenResult, errs []string) {
	t.Helper()
	cmd := exec.Command(rexdBin, append([]string{"--stdio", "--root", t.TempDir(), "--audit", t.TempDir() + "/audit.log"}, rexdArgs...)...)
	cmd.Env = append(os.Environ(), "HOME="+t.TempDir(), "XDG_CACHE_HOME="+t.TempDir())
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stdin.Close(); cmd.Wait() })
	enc := protocol.NewEncoder(stdin)
	req, _ := protocol.NewRequest(1, protocol.MethodSessionOpen, open)
	if err := enc.Encode(req); err != nil {
		t.Fatal(err)
	}
	dec := protocol.NewDecoder(stdout, 0)
	line, err := dec.ReadLine()
	if err != nil {
		t.Fatal(err)
	}
	var reply struct {
		Result protocol.SessionOpenResult `json:"result"`
		Error  *protocol.Error            `json:"error"`
	}
	if err := json.Unmarshal(line, &reply); err != nil || reply.Error != nil {
		t.Fatalf("session.open: %s (%v)", line, err)
	}
	opened = reply.Result
	req, _ = protocol.NewRequest(2, protocol.MethodExecStart, protocol.ExecStartParams{SessionID: opened.SessionID, Argv: argv})
	if err := enc.Encode(req); err != nil {
		t.Fatal(err)
	}
	for {
		line, err := dec.ReadLine()
		if err != nil {
			t.Fatalf("read from rexd: %v (after %d bytes of output)", err, len(out))
		}
		if method, ev, n, ok, err := protocol.ParseRawOutputLine(line, protocol.MaxRawOutput); ok {
			if err != nil || method != protocol.EventExecStdout || ev.SessionID != opened.SessionID {
				t.Fatalf("raw frame %s: %v", line, err)
			}
			data, err := dec.ReadRaw(n)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, data...)
			frames++
			continue
		}
		m, perr := protocol.ParseMessage(line)
		if perr != nil {
			t.Fatalf("rexd sent %q: %v", line, perr)
		}
		switch m.Method {
		case protocol.EventExecStdout:
			var ev protocol.OutputEvent
			if err := json.Unmarshal(m.Params, &ev); err != nil {
				t.Fatal(err)
			}
			data, err := ev.Bytes()
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, data...)
			lines++
		case protocol.EventExecStderr:
			t.Fatalf("rexd sent %s", line)
		case protocol.EventExecError:
			errs = append(errs, string(line))
		case protocol.EventExecExit:
			if atExit != nil {
				atExit(cmd.Process.Pid)
			}
			return out, frames, lines, opened, errs
		}
	}
}

// A session that asks for output.raw gets its output as raw frames, byte
// for byte; one that does not, and a resumable one (whose log replays
// lines), gets JSON lines with the same bytes in them.
func TestRawOutputFrames(t *testing.T) {
	want, err := exec.Command("/bin/sh", "-c", rawScript).Output()
	if err != nil {
		t.Fatal(err)
	}
	raw := []string{protocol.CapOutputRaw}
	for _, c := range []struct {
		name string
		open protocol.SessionOpenParams
		raw  bool
	}{
		{"asked", protocol.SessionOpenParams{ClientName: "t", RequestedCapabilities: raw}, true},
		{"not asked", protocol.SessionOpenParams{ClientName: "t"}, false},
		{"resumable", protocol.SessionOpenParams{ClientName: "t", RequestedCapabilities: raw, ResumeGraceMS: 100}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, frames, lines, opened := rawOutputRun(t, c.open)
			if resumable := c.open.ResumeGraceMS > 0; resumable != (opened.ResumeToken != "") {
				t.Fatalf("resumable %v, yet the resume token is %q (%s)", resumable, opened.ResumeToken, opened.ResumeError)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("got %d bytes of output, want %d (the same as sh prints)", len(got), len(want))
			}
			if c.raw && (frames < 2 || lines != 0) || !c.raw && (frames != 0 || lines < 2) {
				t.Fatalf("%d raw frames and %d JSON lines", frames, lines)
			}
		})
	}
}

// rexd announces the capability, so a client may ask for it.
func TestRawOutputAnnounced(t *testing.T) {
	h := start(t)
	m := h.call(protocol.MethodSessionOpen, protocol.SessionOpenParams{ClientName: "t"})
	var res protocol.SessionOpenResult
	if err := json.Unmarshal(m.Result, &res); err != nil {
		t.Fatal(err)
	}
	found := false
	for _, c := range res.Capabilities {
		found = found || c == protocol.CapOutputRaw
	}
	if !found {
		t.Fatalf("capabilities %q lack %q", res.Capabilities, protocol.CapOutputRaw)
	}
}

// patternFile writes a file of size bytes that repeat no short period and
// returns its name and contents.
func patternFile(t *testing.T, size int) (string, []byte) {
	t.Helper()
	b := make([]byte, size)
	for i := range b {
		b[i] = byte(i*7 + i>>12)
	}
	file := t.TempDir() + "/big"
	if err := os.WriteFile(file, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return file, b
}

// A command streaming bulk output has its bytes spliced from its pipe to
// rexd's stdout: rexd itself reads and writes only the frames' lines
// (/proc/PID/task/TID/io counts the bytes of read and write calls, not
// splice's). The bytes arrive whole and in order.
func TestBulkOutputIsSplicedNotCopied(t *testing.T) {
	const size = 64 << 20
	file, want := patternFile(t, size)
	var rchar, wchar int64
	got, frames, lines, _, errs := rawOutputRunArgv(t, protocol.SessionOpenParams{ClientName: "t", RequestedCapabilities: []string{protocol.CapOutputRaw}},
		[]string{"cat", file}, func(pid int) {
			// Each thread's own counts: the process's file adds those of
			// its reaped children (cat).
			tasks, err := filepath.Glob("/proc/" + strconv.Itoa(pid) + "/task/*/io")
			if err != nil || len(tasks) == 0 {
				t.Fatalf("rexd's threads: %v", err)
			}
			for _, task := range tasks {
				io, err := os.ReadFile(task)
				if err != nil {
					t.Fatal(err)
				}
				for _, l := range strings.Split(string(io), "\n") {
					k, v, _ := strings.Cut(l, ": ")
					n, _ := strconv.ParseInt(v, 10, 64)
					switch k {
					case "rchar":
						rchar += n
					case "wchar":
						wchar += n
					}
				}
			}
		}, "--limit", "max_output_bytes=0")
	if len(errs) > 0 {
		t.Fatalf("rexd sent %s", errs[0])
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("got %d bytes of output, want the file's %d", len(got), len(want))
	}
	if lines != 0 || frames < size/(256<<10) {
		t.Fatalf("%d raw frames and %d JSON lines for %d bytes", frames, lines, size)
	}
	// What rexd reads itself is mostly its own executable, hashed at start.
	if rchar > size/4 || wchar > size/4 {
		t.Fatalf("rexd read %d and wrote %d bytes itself for %d of output: the output was copied through it, not spliced", rchar, wchar, size)
	}
}

// The output cap holds for spliced output to the byte: the client gets the
// first max_output_bytes, then the one exec.error, and the rest is dropped.
func TestSplicedOutputKeepsTheCap(t *testing.T) {
	const size, limit = 16 << 20, 5<<20 + 12345
	file, want := patternFile(t, size)
	got, _, _, _, errs := rawOutputRunArgv(t, protocol.SessionOpenParams{ClientName: "t", RequestedCapabilities: []string{protocol.CapOutputRaw}},
		[]string{"cat", file}, nil, "--limit", "max_output_bytes="+strconv.Itoa(limit))
	if !bytes.Equal(got, want[:limit]) {
		t.Fatalf("got %d bytes of output, want the file's first %d", len(got), limit)
	}
	if len(errs) != 1 || !strings.Contains(errs[0], "output exceeded the limit of "+strconv.Itoa(limit)) {
		t.Fatalf("exec.error events %q, want one for the output limit", errs)
	}
}
