package rexd_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/rexconsole/rex/internal/protocol"
)

// TestOutputOfAnEndedCommandWaitsForASlowClient: a command writes more than
// the pipes between it and the client hold, then ends, while the client
// reads nothing; once the client reads again it gets every byte, then the
// exit. (rexd used to give up on the command's pipe 100 ms after its group
// ended, cutting off what still sat there behind a slow link.)
func TestOutputOfAnEndedCommandWaitsForASlowClient(t *testing.T) {
	const size = 100000 // more than a 64 KiB pipe, less than two
	dir := t.TempDir()
	marker := filepath.Join(dir, "written")
	cmd := exec.Command(rexdBin, "--stdio", "--root", dir, "--no-audit")
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stdin.Close(); cmd.Process.Kill(); cmd.Wait() })
	rd := bufio.NewReaderSize(stdout, 1<<20)
	next := func() *protocol.Message {
		t.Helper()
		line, err := rd.ReadBytes('\n')
		if err != nil {
			t.Fatalf("read from rexd: %v", err)
		}
		var m protocol.Message
		if err := json.Unmarshal(line, &m); err != nil {
			t.Fatalf("bad line %q: %v", line, err)
		}
		return &m
	}
	fmt.Fprintf(stdin, `{"jsonrpc":"2.0","id":1,"method":"session.open","params":{"client_name":"t","client_version":"0","workspace_roots":[%q]}}`+"\n", dir)
	var open protocol.SessionOpenResult
	if m := next(); m.Error != nil || json.Unmarshal(m.Result, &open) != nil {
		t.Fatalf("session.open: %+v", m)
	}
	script := fmt.Sprintf("head -c %d /dev/zero | tr '\\0' a && touch %s", size, marker)
	fmt.Fprintf(stdin, `{"jsonrpc":"2.0","id":2,"method":"exec.start","params":{"session_id":%q,"shell":true,"command":%q,"stdin":""}}`+"\n", open.SessionID, script)

	// Read nothing until the command has written everything and ended,
	// and rexd's old 100 ms of patience would have run out well before.
	for i := 0; ; i++ {
		if _, err := os.Stat(marker); err == nil {
			break
		}
		if i > 6000 {
			t.Fatal("the command never finished writing")
		}
		time.Sleep(10 * time.Millisecond)
	}
	// A stall of the client, not a synchronisation: nothing may be lost
	// however long it lasts.
	time.Sleep(time.Second)

	got := 0
	for {
		m := next()
		switch m.Method {
		case protocol.EventExecStdout:
			var ev protocol.OutputEvent
			json.Unmarshal(m.Params, &ev)
			b, err := protocol.DecodeData(ev.Data, ev.Encoding)
			if err != nil {
				t.Fatal(err)
			}
			got += len(b)
		case protocol.EventExecExit:
			if got != size {
				t.Fatalf("the client got %d bytes of the %d the command wrote before it ended", got, size)
			}
			return
		}
	}
}

// TestBigOutputArrivesWhole: a command writes far more than its pipe holds
// as fast as it can (rexd grows the pipe and reads, and sends, more at once),
// or streams many small writes (rexd lets several gather into one event);
// every byte arrives, in order, and no event carries more than rexd's bound.
func TestBigOutputArrivesWhole(t *testing.T) {
	h := start(t)
	sid := h.open()
	var lines bytes.Buffer
	for i := 1; i <= 150000; i++ { // 938,895 bytes: under the default output cap
		fmt.Fprintf(&lines, "%d\n", i)
	}
	var small bytes.Buffer
	for i := 0; i < 3000; i++ {
		fmt.Fprintf(&small, "line%d\n", i)
	}
	tests := []struct {
		name string
		argv []string
		want []byte
	}{
		{"one fast writer", []string{"seq", "1", "150000"}, lines.Bytes()},
		{"many small writes", []string{"sh", "-c", `i=0; while [ $i -lt 3000 ]; do echo line$i; i=$((i+1)); done`}, small.Bytes()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var res protocol.ExecStartResult
			h.with(t).ok(protocol.MethodExecStart, protocol.ExecStartParams{SessionID: sid, Argv: tt.argv}, &res)
			h.with(t).exitOf(res.ProcessID, 60*time.Second)
			var got []byte
			for i, e := range h.events(res.ProcessID, protocol.EventExecStdout) {
				b, err := e.Bytes()
				if err != nil {
					t.Fatal(err)
				}
				if e.Seq != uint64(i+1) {
					t.Fatalf("seq %d at position %d", e.Seq, i)
				}
				if len(b) > 256<<10 {
					t.Fatalf("an event of %d bytes, more than rexd's 256 KiB", len(b))
				}
				got = append(got, b...)
			}
			if !bytes.Equal(got, tt.want) {
				t.Fatalf("got %d bytes, want %d; they differ", len(got), len(tt.want))
			}
		})
	}
}
