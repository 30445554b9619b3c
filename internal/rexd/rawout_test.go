package rexd_test

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
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
	cmd := exec.Command(rexdBin, "--stdio", "--root", t.TempDir(), "--audit", t.TempDir()+"/audit.log")
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
	req, _ = protocol.NewRequest(2, protocol.MethodExecStart, protocol.ExecStartParams{SessionID: opened.SessionID, Argv: []string{"/bin/sh", "-c", rawScript}})
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
		case protocol.EventExecStderr, protocol.EventExecError:
			t.Fatalf("rexd sent %s", line)
		case protocol.EventExecExit:
			return out, frames, lines, opened
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
