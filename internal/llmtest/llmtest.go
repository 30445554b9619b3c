// Package llmtest is a scripted model server for tests: an HTTP server on
// loopback that speaks the OpenAI chat-completions wire format, streaming
// included (text/event-stream chunks with text deltas, tool calls whose
// arguments arrive in pieces, finish_reason, a usage chunk, [DONE]), so
// that rex's agent is tested through the real provider client. It answers
// each request with the next scripted Reply and keeps every request for
// the test to check what the client sent: messages, tool results, tool
// schemas, headers.
package llmtest

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// Reply is one scripted answer.
type Reply struct {
	// When picks the requests this reply answers; nil answers any. Replies
	// are tried in order; each answers once.
	When func(*Request) bool
	// Status, when set and not 200, answers with that HTTP status and an
	// OpenAI-style error body; Header adds headers (Retry-After).
	Status int
	Header map[string]string
	// Text is streamed as content deltas, one chunk each.
	Text []string
	// Calls are streamed as tool calls after the text.
	Calls []Call
	// Finish is the finish_reason; "" means "stop", or "tool_calls" when
	// there are calls. NoFinish leaves finish_reason out altogether.
	Finish   string
	NoFinish bool
	// Usage is the usage chunk; nil sends 100 prompt and 20 completion
	// tokens.
	Usage *Usage
	// Hold, when set, keeps the stream open after HoldAfter text chunks
	// until it is closed or the client goes away; Held is closed once the
	// stream is being held.
	Hold      chan struct{}
	HoldAfter int
	Held      chan struct{}
	// Gone is closed when the client went away during a held stream.
	Gone chan struct{}

	used bool
}

// Call is a tool call; Args are the pieces its JSON arguments are sent in.
type Call struct {
	ID   string
	Name string
	Args []string
}

// Usage is a usage chunk.
type Usage struct {
	Prompt, Completion int
	// Cost, when set, is sent as OpenRouter's usage.cost.
	Cost float64
}

// Request is a request the server received.
type Request struct {
	Model    string    `json:"model"`
	Stream   bool      `json:"stream"`
	Messages []Message `json:"messages"`
	Tools    []Tool    `json:"tools"`
	Header   http.Header
	Body     []byte
}

// Message is a chat message as sent.
type Message struct {
	Role       string          `json:"role"`
	Content    json.RawMessage `json:"content"`
	ToolCalls  []ToolCall      `json:"tool_calls"`
	ToolCallID string          `json:"tool_call_id"`
}

// Text is a message's text, its parts joined.
func (m Message) Text() string {
	var s string
	if json.Unmarshal(m.Content, &s) == nil {
		return s
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	json.Unmarshal(m.Content, &parts)
	var b strings.Builder
	for _, p := range parts {
		b.WriteString(p.Text)
	}
	return b.String()
}

// ToolCall is a tool call of an assistant message.
type ToolCall struct {
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

// Tool is a tool offered in a request.
type Tool struct {
	Type     string `json:"type"`
	Function struct {
		Name        string         `json:"name"`
		Description string         `json:"description"`
		Parameters  map[string]any `json:"parameters"`
	} `json:"function"`
}

// Tool finds an offered tool by name.
func (r *Request) Tool(name string) (Tool, bool) {
	for _, t := range r.Tools {
		if t.Function.Name == name {
			return t, true
		}
	}
	return Tool{}, false
}

// Last is the last message of the request.
func (r *Request) Last() Message {
	if len(r.Messages) == 0 {
		return Message{}
	}
	return r.Messages[len(r.Messages)-1]
}

// ToolResult finds the tool message answering a call id.
func (r *Request) ToolResult(callID string) (Message, bool) {
	for _, m := range r.Messages {
		if m.Role == "tool" && m.ToolCallID == callID {
			return m, true
		}
	}
	return Message{}, false
}

// Server is the scripted server.
type Server struct {
	// URL is the base URL a client is configured with (ending in /v1).
	URL string

	t        testing.TB
	srv      *httptest.Server
	mu       sync.Mutex
	replies  []*Reply
	requests []*Request
	arrived  chan struct{}
}

// New starts a server answering with replies; more can be added with Add.
func New(t testing.TB, replies ...*Reply) *Server {
	t.Helper()
	s := &Server{t: t, replies: replies, arrived: make(chan struct{}, 1)}
	s.srv = httptest.NewServer(http.HandlerFunc(s.handle))
	s.URL = s.srv.URL + "/v1"
	t.Cleanup(s.srv.Close)
	return s
}

// Add scripts more replies.
func (s *Server) Add(replies ...*Reply) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.replies = append(s.replies, replies...)
}

// Requests returns the requests received so far.
func (s *Server) Requests() []*Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]*Request(nil), s.requests...)
}

// Unused returns how many replies were never sent.
func (s *Server) Unused() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, r := range s.replies {
		if !r.used {
			n++
		}
	}
	return n
}

func (s *Server) handle(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || !strings.HasSuffix(r.URL.Path, "/chat/completions") {
		http.Error(w, `{"error":{"message":"not found"}}`, http.StatusNotFound)
		return
	}
	body, _ := io.ReadAll(r.Body)
	req := &Request{Header: r.Header.Clone(), Body: body}
	if err := json.Unmarshal(body, req); err != nil {
		s.t.Errorf("llmtest: the client sent a body that is not JSON: %v\n%s", err, body)
		http.Error(w, `{"error":{"message":"bad json"}}`, http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	s.requests = append(s.requests, req)
	var reply *Reply
	for _, rp := range s.replies {
		if !rp.used && (rp.When == nil || rp.When(req)) {
			rp.used = true
			reply = rp
			break
		}
	}
	s.mu.Unlock()
	if reply == nil {
		s.t.Errorf("llmtest: no scripted reply for request %d (last message %s: %q)", len(s.Requests()), req.Last().Role, req.Last().Text())
		http.Error(w, `{"error":{"message":"no scripted reply","type":"server_error"}}`, http.StatusBadRequest)
		return
	}
	for k, v := range reply.Header {
		w.Header().Set(k, v)
	}
	if reply.Status != 0 && reply.Status != http.StatusOK {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(reply.Status)
		fmt.Fprintf(w, `{"error":{"message":"scripted error %d","type":"scripted","code":"%d"}}`, reply.Status, reply.Status)
		return
	}
	if !req.Stream {
		s.whole(w, req, reply)
		return
	}
	s.stream(w, r, req, reply)
}

func usageOf(rp *Reply) map[string]any {
	u := Usage{Prompt: 100, Completion: 20}
	if rp.Usage != nil {
		u = *rp.Usage
	}
	m := map[string]any{"prompt_tokens": u.Prompt, "completion_tokens": u.Completion, "total_tokens": u.Prompt + u.Completion}
	if u.Cost > 0 {
		m["cost"] = u.Cost
	}
	return m
}

func finishOf(rp *Reply) any {
	switch {
	case rp.NoFinish:
		return nil
	case rp.Finish != "":
		return rp.Finish
	case len(rp.Calls) > 0:
		return "tool_calls"
	}
	return "stop"
}

// stream answers as the OpenAI API does with "stream": true.
func (s *Server) stream(w http.ResponseWriter, r *http.Request, req *Request, rp *Reply) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	fl, _ := w.(http.Flusher)
	send := func(v any) {
		b, _ := json.Marshal(v)
		fmt.Fprintf(w, "data: %s\n\n", b)
		if fl != nil {
			fl.Flush()
		}
	}
	chunk := func(delta map[string]any, finish any) map[string]any {
		return map[string]any{"id": "chatcmpl-llmtest", "object": "chat.completion.chunk", "created": time.Now().Unix(), "model": req.Model,
			"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish}}}
	}
	hold := func() bool {
		if rp.Held != nil {
			close(rp.Held)
		}
		select {
		case <-rp.Hold:
			return true
		case <-r.Context().Done():
			if rp.Gone != nil {
				close(rp.Gone)
			}
			return false
		}
	}
	send(chunk(map[string]any{"role": "assistant", "content": ""}, nil))
	for i, t := range rp.Text {
		if rp.Hold != nil && i == rp.HoldAfter && !hold() {
			return
		}
		send(chunk(map[string]any{"content": t}, nil))
	}
	if rp.Hold != nil && rp.HoldAfter >= len(rp.Text) && !hold() {
		return
	}
	for i, c := range rp.Calls {
		args := c.Args
		if len(args) == 0 {
			args = []string{"{}"}
		}
		first := map[string]any{"index": i, "id": c.ID, "type": "function", "function": map[string]any{"name": c.Name, "arguments": args[0]}}
		send(chunk(map[string]any{"tool_calls": []any{first}}, nil))
		for _, a := range args[1:] {
			send(chunk(map[string]any{"tool_calls": []any{map[string]any{"index": i, "function": map[string]any{"arguments": a}}}}, nil))
		}
	}
	if f := finishOf(rp); f != nil {
		send(chunk(map[string]any{}, f))
	}
	send(map[string]any{"id": "chatcmpl-llmtest", "object": "chat.completion.chunk", "created": time.Now().Unix(), "model": req.Model,
		"choices": []any{}, "usage": usageOf(rp)})
	fmt.Fprint(w, "data: [DONE]\n\n")
	if fl != nil {
		fl.Flush()
	}
}

// whole answers a request without "stream".
func (s *Server) whole(w http.ResponseWriter, req *Request, rp *Reply) {
	msg := map[string]any{"role": "assistant", "content": strings.Join(rp.Text, "")}
	if len(rp.Calls) > 0 {
		var calls []any
		for _, c := range rp.Calls {
			calls = append(calls, map[string]any{"id": c.ID, "type": "function",
				"function": map[string]any{"name": c.Name, "arguments": strings.Join(c.Args, "")}})
		}
		msg["tool_calls"] = calls
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]any{"id": "chatcmpl-llmtest", "object": "chat.completion", "created": time.Now().Unix(),
		"model": req.Model, "choices": []any{map[string]any{"index": 0, "message": msg, "finish_reason": finishOf(rp)}},
		"usage": usageOf(rp)})
}

// Text is a reply that streams text in the given pieces.
func Text(pieces ...string) *Reply { return &Reply{Text: pieces} }

// Calls is a reply that calls tools.
func Calls(calls ...Call) *Reply { return &Reply{Calls: calls} }

// Bash is a call of the bash tool with its arguments split in two pieces.
func Bash(id, command string) Call {
	b, _ := json.Marshal(map[string]string{"command": command})
	half := len(b) / 2
	return Call{ID: id, Name: "bash", Args: []string{string(b[:half]), string(b[half:])}}
}

// ToolCallOf is a call of any tool, its arguments in one piece.
func ToolCallOf(id, name string, args map[string]any) Call {
	b, _ := json.Marshal(args)
	return Call{ID: id, Name: name, Args: []string{string(b)}}
}

// AfterTool matches a request whose last message is the result of callID.
func AfterTool(callID string) func(*Request) bool {
	return func(r *Request) bool {
		l := r.Last()
		return l.Role == "tool" && l.ToolCallID == callID
	}
}

// Mentions matches a request whose messages contain s.
func Mentions(s string) func(*Request) bool {
	return func(r *Request) bool {
		for _, m := range r.Messages {
			if strings.Contains(m.Text(), s) {
				return true
			}
		}
		return false
	}
}
