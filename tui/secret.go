package tui

import (
	"errors"
	"strings"
	"sync"
	"unicode/utf8"

	"charm.land/bubbles/v2/key"
	tea "charm.land/bubbletea/v2"
)

// SecretAsker carries questions for a secret (the sudo password a
// target's sudo wants) from the goroutines that connect to the console's
// command line, which turns into a masked prompt until the operator
// answers (enter) or declines (esc). The answer goes back to the asker
// only: it is never drawn, logged or kept.
type SecretAsker struct {
	mu     sync.Mutex
	queue  []*secretReq
	wake   func()
	closed bool
}

type secretReq struct {
	prompt string
	answer chan secretAnswer
}

type secretAnswer struct {
	secret []byte
	err    error
}

// NewSecretAsker returns an asker to give the console (Options.Secrets)
// and, through its Ask, to whatever needs a secret.
func NewSecretAsker() *SecretAsker { return &SecretAsker{} }

// errDeclined is the answer when the operator pressed esc.
var errDeclined = errors.New("the operator declined to give it")

// Ask shows prompt on the console's command line and waits for the
// answer.
func (a *SecretAsker) Ask(prompt string) ([]byte, error) {
	r := &secretReq{prompt: prompt, answer: make(chan secretAnswer, 1)}
	a.mu.Lock()
	if a.closed {
		a.mu.Unlock()
		return nil, errors.New("the console has closed")
	}
	a.queue = append(a.queue, r)
	wake := a.wake
	a.mu.Unlock()
	if wake != nil {
		wake()
	}
	ans := <-r.answer
	return ans.secret, ans.err
}

func (a *SecretAsker) attach(wake func()) {
	a.mu.Lock()
	a.wake = wake
	a.mu.Unlock()
}

// next takes the oldest question, or nil.
func (a *SecretAsker) next() *secretReq {
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.queue) == 0 {
		return nil
	}
	r := a.queue[0]
	a.queue = a.queue[1:]
	return r
}

// close answers every waiting question: the console is gone.
func (a *SecretAsker) close() {
	a.mu.Lock()
	q := a.queue
	a.queue, a.closed = nil, true
	a.mu.Unlock()
	for _, r := range q {
		r.answer <- secretAnswer{err: errors.New("the console has closed")}
	}
}

// secretPrompt is the question on the command line now, and what was
// typed (drawn as one dot per character).
type secretPrompt struct {
	req *secretReq
	buf []byte
}

// pollSecret takes up the next question when none is shown.
func (m *Model) pollSecret() {
	if m.secret == nil && m.opts.Secrets != nil {
		if r := m.opts.Secrets.next(); r != nil {
			m.secret = &secretPrompt{req: r}
		}
	}
}

// secretKey is a key while the masked prompt is up: it takes every key.
func (m *Model) secretKey(msg tea.KeyPressMsg) tea.Cmd {
	s := m.secret
	k := &m.keys
	switch {
	case key.Matches(msg, k.Submit):
		s.req.answer <- secretAnswer{secret: s.buf}
		m.secret = nil
		m.pollSecret()
	case key.Matches(msg, k.Escape), key.Matches(msg, k.Cancel):
		clear(s.buf)
		s.req.answer <- secretAnswer{err: errDeclined}
		m.secret = nil
		m.pollSecret()
	case msg.Code == tea.KeyBackspace:
		if len(s.buf) > 0 {
			_, n := utf8.DecodeLastRune(s.buf)
			s.buf = s.buf[:len(s.buf)-n]
		}
	case msg.String() == "ctrl+u":
		clear(s.buf)
		s.buf = s.buf[:0]
	case msg.Text != "":
		s.buf = append(s.buf, msg.Text...)
	}
	return nil
}

// secretPaste takes pasted text into the masked prompt (a password
// manager's paste), without its line breaks.
func (m *Model) secretPaste(text string) {
	m.secret.buf = append(m.secret.buf, strings.NewReplacer("\r", "", "\n", "").Replace(text)...)
}

// secretView is the masked prompt's label and what stands for the typed
// text.
func (m *Model) secretView() (label, dots string) {
	return strings.TrimSpace(m.secret.req.prompt), strings.Repeat("•", utf8.RuneCount(m.secret.buf))
}
