package protocol

// OutputEvent is the params of exec.stdout, exec.stderr and pty.output.
// Seq starts at 1 and grows by one per event of the same process and stream.
type OutputEvent struct {
	SessionID string `json:"session_id"`
	ProcessID string `json:"process_id"`
	PTYID     string `json:"pty_id,omitempty"`
	Seq       uint64 `json:"seq"`
	// SessionSeq numbers every event of a resumable session, all
	// processes together (the resumable-session extension); 0 otherwise.
	SessionSeq uint64 `json:"session_seq,omitempty"`
	Data       string `json:"data"`
	Encoding   string `json:"encoding"`
}

// Bytes decodes the event's payload.
func (e *OutputEvent) Bytes() ([]byte, error) { return DecodeData(e.Data, e.Encoding) }

// ExitEvent is the params of exec.exit and pty.exit; it is the last event of
// a process.
type ExitEvent struct {
	SessionID           string  `json:"session_id"`
	ProcessID           string  `json:"process_id"`
	PTYID               string  `json:"pty_id,omitempty"`
	ExitCode            *int    `json:"exit_code"`
	Signal              *string `json:"signal"`
	TimedOut            bool    `json:"timed_out"`
	DurationMS          int64   `json:"duration_ms"`
	BytesStdout         int64   `json:"bytes_stdout"`
	BytesStderr         int64   `json:"bytes_stderr"`
	OutputLimitExceeded bool    `json:"output_limit_exceeded,omitempty"`
	SessionSeq          uint64  `json:"session_seq,omitempty"`
}

// ErrorEvent is the params of exec.error: the process could not be started,
// or it was stopped by a limit (timeout, output cap). An exec.exit follows.
type ErrorEvent struct {
	SessionID  string `json:"session_id"`
	ProcessID  string `json:"process_id"`
	Code       int    `json:"code"`
	Message    string `json:"message"`
	SessionSeq uint64 `json:"session_seq,omitempty"`
}

// ValidSignal reports whether s looks like a signal's name as rexd reports
// it ("KILL", "RTMIN+3", a number): clients show it to the operator and to
// a model, and whatever answers at a host's address can send anything.
func ValidSignal(s string) bool {
	if s == "" || len(s) > 16 {
		return false
	}
	for _, c := range []byte(s) {
		if !(c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '+' || c == '-') {
			return false
		}
	}
	return true
}
