package tui

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"

	"charm.land/bubbles/v2/key"
	tea "charm.land/bubbletea/v2"

	"github.com/rexconsole/rex/internal/commands"
	"github.com/rexconsole/rex/tui/dialog"
)

// Prompts carries what the SSH dialer must tell or ask the operator into
// the console: notices (a host key recorded for the first time) go to the
// message area, and a host key question (StrictHostKeyChecking ask) opens
// a yes/no dialog with the fingerprint. Create one, give its Notice and
// AskHostKey to the dialer (commands.SetupOptions) and pass it in
// Options.Prompts; before the console runs, notices are dropped and
// questions refused.
type Prompts struct {
	send atomic.Pointer[func(tea.Msg)]
}

// noticeMsg is a notice for the message area.
type noticeMsg struct{ text string }

// hostKeyAskMsg asks the operator about a host key; the answer goes to
// reply.
type hostKeyAskMsg struct {
	q     commands.HostKeyQuestion
	reply chan bool
}

// Notice shows msg in the console's message area.
func (p *Prompts) Notice(_, msg string) {
	if p == nil {
		return
	}
	if send := p.send.Load(); send != nil {
		(*send)(noticeMsg{msg})
	}
}

// AskHostKey asks in a dialog whether to trust a new host key and waits
// for the answer.
func (p *Prompts) AskHostKey(ctx context.Context, q commands.HostKeyQuestion) (bool, error) {
	if p == nil {
		return false, errors.New("the console is not running")
	}
	send := p.send.Load()
	if send == nil {
		return false, errors.New("the console is not running")
	}
	reply := make(chan bool, 1)
	(*send)(hostKeyAskMsg{q: q, reply: reply})
	select {
	case ok := <-reply:
		return ok, nil
	case <-ctx.Done():
		return false, ctx.Err()
	}
}

func (p *Prompts) attach(send func(tea.Msg)) {
	if p != nil {
		p.send.Store(&send)
	}
}

func (p *Prompts) detach() {
	if p != nil {
		p.send.Store(nil)
	}
}

// askHostKey opens the dialog of a host key question; its answer goes
// back to the dialer (esc is no).
func (m *Model) askHostKey(msg hostKeyAskMsg) {
	m.hostKeyAsks++
	q := msg.q
	m.openDialog(dialog.NewConfirm(fmt.Sprintf("hostkey-%d", m.hostKeyAsks), "New host key", []string{
		fmt.Sprintf("The authenticity of host '%s (%s)' can't be established.", q.Target, q.Addr),
		fmt.Sprintf("%s key fingerprint is %s.", q.KeyType, q.Fingerprint),
		fmt.Sprintf("Trust it and record it in %s?", q.File),
	}, []dialog.Choice{
		{Label: "Yes, connect", Keys: key.NewBinding(key.WithKeys("y"), key.WithHelp("y", "trust"))},
		{Label: "No", Keys: key.NewBinding(key.WithKeys("n"), key.WithHelp("n", "refuse"))},
	}, 1), func(a dialog.Action) tea.Cmd {
		c, ok := a.(dialog.Choose)
		msg.reply <- ok && c.Choice == 0
		return nil
	})
}

// maxNotices bounds the notices kept in the message area at once.
const maxNotices = 4

// notice adds a line to the message area without replacing what it says
// (a notice comes from a connection, in any order with a task's news).
func (m *Model) notice(text string) {
	if !m.msg.notices {
		m.msg = message{kind: msgInfo, notices: true}
	}
	lines := append(m.msg.lines, text)
	if len(lines) > maxNotices {
		lines = lines[len(lines)-maxNotices:]
	}
	m.msg.lines = lines
}
