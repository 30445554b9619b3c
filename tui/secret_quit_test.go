package tui

import (
	"testing"
	"time"

	"github.com/rexconsole/rex/internal/fanout"
)

// TestQuitAnswersTheSecretOnScreen: a console that quits while its masked
// prompt shows a question (the sudo password a dial waits for) answers
// it: the asker, a dial in the connection pool, would wait for good, and
// so would the pool's Close at the end of Run (the server never ended).
func TestQuitAnswersTheSecretOnScreen(t *testing.T) {
	asker := NewSecretAsker()
	con, ran := runConsole(t, t.TempDir(), fanout.ConnectorFunc(noTargets), asker)
	c := attachClient(t, con, 100, 30)
	c.waitFor(t, "❯")

	asked := make(chan error, 1)
	go func() {
		_, err := asker.Ask("sudo password on web: ")
		asked <- err
	}()
	c.waitFor(t, "sudo password on web")
	if _, ok := con.Stop(true); !ok {
		t.Fatal("a forced stop was refused")
	}
	select {
	case err := <-asked:
		if err == nil {
			t.Fatal("the question on screen was answered with a password nobody typed")
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the question on screen when the console quit was never answered")
	}
	select {
	case <-ran:
	case <-time.After(30 * time.Second):
		t.Fatal("the console's Run did not end")
	}
}
