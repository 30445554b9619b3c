package agent

import (
	"encoding/json"
	"time"
)

// Event types, the "type" of `rex ask --json` lines.
const (
	EventTurnStart  = "turn_start"  // Prompt, Target
	EventText       = "text"        // Text: a piece of the answer as it streams
	EventToolCall   = "tool_call"   // the model asked for a tool: Tool, CallID, Input
	EventToolStart  = "tool_start"  // it runs: Command, Target, Hosts (after consent)
	EventConsent    = "consent"     // Decision: how the call was allowed or refused
	EventOutput     = "output"      // Host, Stream, Data: a host's output as it comes
	EventHostDone   = "host_done"   // Host, Status
	EventToolResult = "tool_result" // Summary, IsError, Result (what the model got)
	EventBackground = "background"  // JobID: a command went on in the background
	EventRetry      = "retry"       // Error, DelayMS: the provider said 429/5xx; trying again
	EventSummarised = "summarised"  // older turns were summarised to fit the window
	EventUsage      = "usage"       // Usage: tokens (and cost) so far in the session
	EventTurnEnd    = "turn_end"    // Outcome, Error, Steps
)

// Outcomes of a turn.
const (
	OutcomeFinished  = "finished"
	OutcomeFailed    = "failed"
	OutcomeDenied    = "denied"
	OutcomeCancelled = "cancelled"
	OutcomeStepCap   = "step_cap"
	OutcomeLoop      = "loop"
)

// Event is one thing that happened in a turn, for the console, the
// transcript of rex ask and its --json lines.
type Event struct {
	Type     string          `json:"type"`
	Time     time.Time       `json:"time"`
	Host     string          `json:"host,omitempty"` // in /agent each: whose loop; else the output's host
	Prompt   string          `json:"prompt,omitempty"`
	Text     string          `json:"text,omitempty"`
	Tool     string          `json:"tool,omitempty"`
	CallID   string          `json:"call_id,omitempty"`
	Input    json.RawMessage `json:"input,omitempty"`
	Command  string          `json:"command,omitempty"`
	Detail   string          `json:"detail,omitempty"`
	Target   string          `json:"target,omitempty"`
	Hosts    []string        `json:"hosts,omitempty"`
	Stream   string          `json:"stream,omitempty"`
	Data     string          `json:"data,omitempty"`
	Status   string          `json:"status,omitempty"`
	Summary  string          `json:"summary,omitempty"`
	Result   string          `json:"result,omitempty"`
	IsError  bool            `json:"is_error,omitempty"`
	Decision string          `json:"decision,omitempty"`
	JobID    string          `json:"job_id,omitempty"`
	DelayMS  int64           `json:"delay_ms,omitempty"`
	Usage    *Usage          `json:"usage,omitempty"`
	Outcome  string          `json:"outcome,omitempty"`
	Error    string          `json:"error,omitempty"`
	Steps    int             `json:"steps,omitempty"`
}

// Usage is what the provider counted, for the whole session.
type Usage struct {
	InputTokens  int64 `json:"input_tokens"`
	OutputTokens int64 `json:"output_tokens"`
	TotalTokens  int64 `json:"total_tokens"`
	// Cost in US dollars, when the provider reports prices (OpenRouter);
	// 0 when it does not.
	Cost float64 `json:"cost,omitempty"`
}

func (u *Usage) add(o Usage) {
	u.InputTokens += o.InputTokens
	u.OutputTokens += o.OutputTokens
	u.TotalTokens += o.TotalTokens
	u.Cost += o.Cost
}
