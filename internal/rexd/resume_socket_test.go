package rexd

import (
	"bufio"
	"context"
	"testing"
	"time"

	"github.com/rexconsole/rex/internal/protocol"
)

// TestSessionSocketServesOnlyAResume: a resumable session's socket is for
// the rexd a new connection started, relaying a session.resume. Another
// process of the user that connects to it (an agent limited to an allowed
// tool such as curl --unix-socket) must not get this rexd's policy, which
// may be wider than its own: anything but a session.resume first is
// refused and the connection ended, as is a resume with a wrong token.
func TestSessionSocketServesOnlyAResume(t *testing.T) {
	rs := newResumeServer(t, nil)
	ctx := context.Background()
	c, _ := rs.connectRaw(t)
	open := c.open(ctx, 60_000)
	dir, err := rs.srv.sessionDir()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, first string
	}{
		{"session.open", `{"jsonrpc":"2.0","id":1,"method":"session.open","params":{"client_name":"intruder"}}`},
		{"wrong token", `{"jsonrpc":"2.0","id":1,"method":"session.resume","params":{"session_id":"` + open.SessionID + `","resume_token":"wrong","last_seq":0}}`},
		{"not JSON", `POST / HTTP/1.1`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			sock, err := dir.Dial(dctx, open.SessionID+".sock")
			if err != nil {
				t.Fatal(err)
			}
			defer sock.Close()
			// A bound for a connection that is never ended, not a speed goal.
			sock.SetDeadline(time.Now().Add(20 * time.Second))
			second := `{"jsonrpc":"2.0","id":2,"method":"session.open","params":{"client_name":"intruder"}}`
			if _, err := sock.Write([]byte(tc.first + "\n" + second + "\n")); err != nil {
				t.Fatal(err)
			}
			sc := bufio.NewScanner(sock)
			for sc.Scan() {
				m, perr := protocol.ParseMessage(sc.Bytes())
				if perr != nil {
					t.Fatalf("rexd sent %q", sc.Text())
				}
				if m.IsResponse() && m.Error == nil {
					t.Fatalf("the socket served %s: %s", m.ID, m.Result)
				}
			}
			if err := sc.Err(); err != nil {
				t.Fatalf("the connection was not ended: %v", err)
			}
		})
	}
	// The right resume still works there.
	sock, err := dir.Dial(ctx, open.SessionID+".sock")
	if err != nil {
		t.Fatal(err)
	}
	defer sock.Close()
	sock.SetDeadline(time.Now().Add(20 * time.Second))
	sock.Write([]byte(`{"jsonrpc":"2.0","id":1,"method":"session.resume","params":{"session_id":"` + open.SessionID + `","resume_token":"` + open.ResumeToken + `","last_seq":0}}` + "\n" +
		`{"jsonrpc":"2.0","id":2,"method":"session.info","params":{"session_id":"` + open.SessionID + `"}}` + "\n"))
	sc := bufio.NewScanner(sock)
	for sc.Scan() {
		m, _ := protocol.ParseMessage(sc.Bytes())
		if m == nil || !m.IsResponse() {
			continue
		}
		if m.Error != nil {
			t.Fatalf("response %s: %s", m.ID, m.Error.Message)
		}
		if string(m.ID) == "2" {
			return
		}
	}
	t.Fatalf("no answer to session.info after the resume: %v", sc.Err())
}
