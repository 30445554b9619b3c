package protocol

// Resumable sessions: an extension of REXD v1 (capability CapResume) for
// sessions that outlive their connection. A session opened with
// resume_grace_ms keeps its processes and PTYs when the connection drops,
// numbers every event it sends (session_seq), keeps the events the client
// has not acknowledged (session.ack), and replays them to a connection that
// presents its resume token (session.resume). See docs/protocol.md.

// CapResume is announced by a rexd that keeps resumable sessions.
const CapResume = "session.resume"

// Methods of the extension. MethodSessionAck is a notification.
const (
	MethodSessionResume = "session.resume"
	MethodSessionAck    = "session.ack"
)

// SessionAckParams acknowledge every event of a session up to SessionSeq:
// rexd may forget them.
type SessionAckParams struct {
	SessionID  string `json:"session_id"`
	SessionSeq uint64 `json:"session_seq"`
}

// SessionResumeParams ask for a session back after its connection dropped.
// LastSeq is the session_seq of the last event the client has; rexd sends
// every later one again.
type SessionResumeParams struct {
	SessionID   string `json:"session_id"`
	ResumeToken string `json:"resume_token"`
	LastSeq     uint64 `json:"last_seq"`
}

// SessionResumeResult is the answer to session.resume. Replayed events
// follow it; Processes are the session's live processes and PTYs.
type SessionResumeResult struct {
	SessionID     string        `json:"session_id"`
	Replayed      int           `json:"replayed"`
	NextSeq       uint64        `json:"next_seq"`
	ResumeGraceMS int64         `json:"resume_grace_ms"`
	Processes     []ProcessInfo `json:"processes"`
}

// Reasons in the data of a refused session.resume.
const (
	ResumeWrongToken = "wrong_token"
	ResumeStaleSeq   = "stale_seq"
	ResumeAheadSeq   = "seq_ahead"
	ResumeExpired    = "expired"
	ResumeGone       = "gone"
	ResumeNotFirst   = "not_first"
)

// ResumeRefusal is the data of a refused session.resume.
type ResumeRefusal struct {
	SessionID string `json:"session_id"`
	Reason    string `json:"reason"`
	// Acked is the last event rexd was told the client has (stale_seq);
	// NextSeq the session_seq of its next event (seq_ahead).
	Acked   uint64 `json:"acked,omitempty"`
	NextSeq uint64 `json:"next_seq,omitempty"`
}
