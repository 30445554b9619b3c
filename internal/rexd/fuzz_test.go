package rexd

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/rexconsole/rex/internal/protocol"
)

// FuzzServe feeds arbitrary lines to the decoder and dispatcher after a
// session.open. The server must answer every line with valid JSON-RPC and
// never panic. Only echo and true may run, so the fuzzer cannot do harm.
func FuzzServe(f *testing.F) {
	f.Add([]byte(`{"jsonrpc":"2.0","id":2,"method":"exec.start","params":{"session_id":"s_1","argv":["echo","hi"]}}`))
	f.Add([]byte(`{"jsonrpc":"2.0","id":2,"method":"fs.write","params":{"session_id":"s_1","path":"a","content":"x"}}
{"jsonrpc":"2.0","id":3,"method":"fs.read","params":{"session_id":"s_1","path":"a"}}`))
	f.Add([]byte(`{"jsonrpc":"2.0","id":2,"method":"fs.glob","params":{"session_id":"s_1","pattern":"**/*"}}`))
	f.Add([]byte(`{"jsonrpc":"2.0","id":2,"method":"fs.list","params":{"session_id":"s_1","path":"../..","recursive":true}}`))
	f.Add([]byte(`{"jsonrpc":"2.0","id":9,"method":"exec.wait","params":{"session_id":"s_1","process_id":"p_1","timeout_ms":1}}`))
	f.Add([]byte(`{"jsonrpc":"2.0","id":2,"method":"pty.open","params":{"session_id":"s_1","argv":["true"],"cols":5,"rows":5}}`))
	f.Add([]byte("\x00\xff{\n[]\n{\"jsonrpc\":\"2.0\"}\n"))
	// Pipelined: exec.start naming its session by the open request's id.
	f.Add([]byte(`{"jsonrpc":"2.0","id":2,"method":"exec.start","params":{"session_open_id":1,"argv":["echo","hi"]}}`))
	f.Add([]byte(`{"jsonrpc":"2.0","id":"o","method":"session.open","params":{"client_name":"f","build_hashes":["x"]}}
{"jsonrpc":"2.0","id":3,"method":"exec.start","params":{"session_open_id":"o","argv":["true"]}}`))
	f.Add([]byte(`{"jsonrpc":"2.0","id":2,"method":"exec.start","params":{"session_open_id":{"a":[1]},"argv":["true"]}}`))
	// Raw cas.put frames: whole, cut short, and over the cap.
	f.Add([]byte(`{"jsonrpc":"2.0","id":2,"method":"cas.put","params":{"raw_bytes":2,"session_id":"s_1","digests":["x/1","y/1"]}}` + "\nab\n" +
		`{"jsonrpc":"2.0","id":3,"method":"cas.has","params":{"session_id":"s_1","digests":[]}}`))
	f.Add([]byte(`{"jsonrpc":"2.0","id":2,"method":"cas.put","params":{"raw_bytes":9,"session_id":"s_1","digests":["x/9"]}}` + "\nab"))
	f.Add([]byte(`{"jsonrpc":"2.0","id":2,"method":"cas.put","params":{"raw_bytes":99999999,"session_id":"s_1","digests":["x/99999999"]}}` + "\n"))
	f.Fuzz(func(t *testing.T, input []byte) {
		root := t.TempDir()
		srv, err := New(Config{
			Limits:        DefaultLimits(),
			Roots:         []string{root},
			AllowShell:    false,
			AllowCommands: []string{"echo", "true"},
			KillGrace:     50 * time.Millisecond,
			MaxLine:       4096,
		})
		if err != nil {
			t.Fatal(err)
		}
		defer srv.Close()
		in := append([]byte(`{"jsonrpc":"2.0","id":1,"method":"session.open","params":{"client_name":"fuzz"}}`+"\n"), input...)
		var out bytes.Buffer
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := srv.Serve(ctx, bytes.NewReader(in), &out); err != nil && ctx.Err() == nil {
			t.Fatalf("Serve: %v", err)
		}
		sc := bufio.NewScanner(&out)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			var m protocol.Message
			if err := json.Unmarshal(sc.Bytes(), &m); err != nil || m.JSONRPC != "2.0" {
				t.Fatalf("invalid output line %q: %v", sc.Bytes(), err)
			}
			if m.Error != nil && m.Error.Code == protocol.CodeInternalError {
				t.Fatalf("internal error for fuzz input: %v", m.Error)
			}
		}
	})
}
