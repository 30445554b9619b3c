package protocol

import (
	"encoding/json"
	"errors"
	"fmt"
)

// Error codes of REXD v1: the JSON-RPC 2.0 ones and the spec's own range.
const (
	CodeParseError            = -32700
	CodeInvalidRequest        = -32600
	CodeMethodNotFound        = -32601
	CodeInvalidParams         = -32602
	CodeInternalError         = -32603
	CodeUnauthorized          = -32001
	CodeForbiddenPath         = -32002
	CodeTimeout               = -32003
	CodeOutputLimitExceeded   = -32004
	CodeProcessNotFound       = -32005
	CodeConcurrencyConflict   = -32006
	CodeUnsupportedCapability = -32007
	CodeResourceLimit         = -32008
	// Extensions: file-system failures that are neither a bad path nor a
	// permission problem get codes of their own, never internal_error.
	CodeNoSpace    = -32009 // ENOSPC, EDQUOT: the file system or quota is full
	CodeFileSystem = -32010 // read-only file system, busy, name too long, I/O error, …
	// CodeRequestCancelled answers a request cancelled by $/cancelRequest
	// or cut short by the end of the connection (LSP's code).
	CodeRequestCancelled = -32800
)

// CodeName returns the spec's snake_case name for code (clients put it in
// messages and tests assert on it), or "error".
func CodeName(code int) string {
	switch code {
	case CodeParseError:
		return "parse_error"
	case CodeInvalidRequest:
		return "invalid_request"
	case CodeMethodNotFound:
		return "method_not_found"
	case CodeInvalidParams:
		return "invalid_params"
	case CodeInternalError:
		return "internal_error"
	case CodeUnauthorized:
		return "unauthorized"
	case CodeForbiddenPath:
		return "forbidden_path"
	case CodeTimeout:
		return "timeout"
	case CodeOutputLimitExceeded:
		return "output_limit_exceeded"
	case CodeProcessNotFound:
		return "process_not_found"
	case CodeConcurrencyConflict:
		return "concurrency_conflict"
	case CodeUnsupportedCapability:
		return "unsupported_capability"
	case CodeResourceLimit:
		return "resource_limit"
	case CodeNoSpace:
		return "no_space"
	case CodeFileSystem:
		return "filesystem_error"
	case CodeRequestCancelled:
		return "request_cancelled"
	}
	return "error"
}

// Error is a JSON-RPC error object. Data is structured detail (for example
// the path and the allowed roots of a forbidden_path error).
type Error struct {
	Code    int             `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data,omitempty"`
}

func (e *Error) Error() string {
	return fmt.Sprintf("%s (%d): %s", CodeName(e.Code), e.Code, e.Message)
}

// Errorf builds an Error with the given code, structured data (may be nil)
// and message.
func Errorf(code int, data any, format string, args ...any) *Error {
	e := &Error{Code: code, Message: fmt.Sprintf(format, args...)}
	if data != nil {
		if raw, err := json.Marshal(data); err == nil {
			e.Data = raw
		}
	}
	return e
}

// ErrorCode returns the REXD code carried by err, or 0 when err is not an
// *Error.
func ErrorCode(err error) int {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return 0
}

// ForbiddenPathData is the data of a -32002 error.
type ForbiddenPathData struct {
	Path         string   `json:"path"`
	AllowedRoots []string `json:"allowed_roots"`
	Reason       string   `json:"reason,omitempty"`
}

// ResourceLimitData is the data of a -32008 error.
type ResourceLimitData struct {
	Limit string `json:"limit"`
	Value int64  `json:"value"`
}

// NoSpaceData is the data of a -32009 error: where space ran out and,
// when known, how much was needed and how much is free (bytes).
type NoSpaceData struct {
	Path   string `json:"path"`
	Needed int64  `json:"needed,omitempty"`
	Free   int64  `json:"free,omitempty"`
	Reason string `json:"reason"` // "no_space" or "quota"
}

// FileSystemData is the data of a -32010 error; Reason is one of
// "read_only", "busy", "name_too_long", "io", "not_a_directory",
// "is_a_directory", "not_empty", "too_many_links", "cross_device", "exists",
// "loop", "other".
type FileSystemData struct {
	Path   string `json:"path"`
	Reason string `json:"reason"`
}

// ConflictData is the data of a -32006 error.
type ConflictData struct {
	Path          string `json:"path"`
	ExpectedMtime string `json:"expected_mtime,omitempty"`
	ActualMtime   string `json:"actual_mtime,omitempty"`
	Reason        string `json:"reason"`
}
