package protocol

import (
	"bytes"
	"encoding/base64"
	"strconv"
)

// The cas extension: content-addressed sync. It is announced as capability
// "cas" and never changes a v1 method. Digests travel as "HASH/SIZE" (64
// lowercase hex characters, a slash, the size in bytes); object bytes as
// strict base64.

// CapCAS is the capability of the cas.* methods.
const CapCAS = "cas"

// Method names of the cas extension.
const (
	MethodCASHas         = "cas.has"
	MethodCASPut         = "cas.put"
	MethodCASGet         = "cas.get"
	MethodCASPutChunk    = "cas.put_chunk"
	MethodCASGetChunk    = "cas.get_chunk"
	MethodCASMaterialize = "cas.materialize"
	MethodCASNeeded      = "cas.needed"
	MethodCASCommit      = "cas.commit"
	MethodCASAbort       = "cas.abort"
	MethodCASIngest      = "cas.ingest"
)

// CASDigests names objects: the params of cas.has and cas.get.
type CASDigests struct {
	SessionID string   `json:"session_id"`
	Digests   []string `json:"digests"`
}

// CASHasResult lists the digests the store lacks.
type CASHasResult struct {
	Missing []string `json:"missing"`
}

// CASObject is one object with its bytes in base64.
type CASObject struct {
	Digest string `json:"digest"`
	Data   string `json:"data"`
}

// CASPutParams are the params of cas.put: all are stored or none. With
// Txn, the objects are blobs an update needs (see CASMaterializeResult),
// written straight into its destination rather than into the store.
type CASPutParams struct {
	SessionID string      `json:"session_id"`
	Txn       string      `json:"txn,omitempty"`
	Objects   []CASObject `json:"objects"`
}

// CASPutResult is the result of cas.put.
type CASPutResult struct {
	Stored int `json:"stored"`
}

// CASGetResult is the result of cas.get: every requested object, or an
// error naming the missing ones.
type CASGetResult struct {
	Objects []CASObject `json:"objects"`
}

// CASPutChunkParams send one piece of a large object, in order from offset
// 0; final commits it once its whole content matches the digest.
type CASPutChunkParams struct {
	SessionID string `json:"session_id"`
	Txn       string `json:"txn,omitempty"` // as in CASPutParams
	Digest    string `json:"digest"`
	Offset    int64  `json:"offset"`
	Data      string `json:"data"`
	Final     bool   `json:"final,omitempty"`
}

// CASPutChunkResult is the result of cas.put_chunk.
type CASPutChunkResult struct {
	Offset    int64 `json:"offset"`
	Committed bool  `json:"committed"`
}

// CASGetChunkParams ask for a piece of a large object.
type CASGetChunkParams struct {
	SessionID string `json:"session_id"`
	Digest    string `json:"digest"`
	Offset    int64  `json:"offset"`
	Length    int    `json:"length"`
}

// CASGetChunkResult is the result of cas.get_chunk.
type CASGetChunkResult struct {
	Data string `json:"data"`
	EOF  bool   `json:"eof"`
}

// CASMaterializeParams write a tree into a directory inside the allowed
// roots. By default files are added and replaced (each atomically) and
// nothing else is removed; Delete also removes what the tree lacks; Atomic
// builds the tree beside the directory and swaps it in whole. The store
// must hold the tree objects; blobs are found on the target where they can
// be and asked for otherwise.
type CASMaterializeParams struct {
	SessionID string `json:"session_id"`
	Tree      string `json:"tree"`
	Path      string `json:"path"`
	Atomic    bool   `json:"atomic,omitempty"`
	Delete    bool   `json:"delete,omitempty"`
	// DeleteUnder, with Delete, narrows it to what lies under these names
	// of the directory (its first level): a push of several sources
	// deletes inside each, as rsync does, and leaves the rest alone.
	DeleteUnder []string `json:"delete_under,omitempty"`
	DryRun      bool     `json:"dry_run,omitempty"`
	// Owner ("user", "user:group" or ":group") is given to what is
	// written.
	Owner string `json:"owner,omitempty"`
	// MaxBytes bounds the bytes written; 0: the free space less 5%.
	MaxBytes int64 `json:"max_bytes,omitempty"`
	// List asks for the added and updated paths (deleted ones are always
	// listed).
	List bool `json:"list,omitempty"`
	// Trees, with DryRun only, are tree objects the store lacks (within
	// the caps of one cas.put): the dry run plans with them and stores
	// none, so a push --dry-run changes nothing on the target.
	Trees []CASObject `json:"trees,omitempty"`
}

// CASMaterializeResult is the result of cas.materialize and cas.commit.
// When Txn is set the update waits for blobs: send the Needed ones (the
// first of NeededTotal; cas.needed lists what is still missing) with
// cas.put or cas.put_chunk and that txn, then cas.commit. The counts are
// then what the update will do; a dry run's are what it would do.
type CASMaterializeResult struct {
	Path         string   `json:"path"`
	Txn          string   `json:"txn,omitempty"`
	Needed       []string `json:"needed,omitempty"`
	NeededTotal  int      `json:"needed_total,omitempty"`
	Created      bool     `json:"created,omitempty"`
	Unchanged    bool     `json:"unchanged,omitempty"`
	Added        int      `json:"added"`
	Updated      int      `json:"updated"`
	Deleted      int      `json:"deleted"`
	Bytes        int64    `json:"bytes"`
	AddedPaths   []string `json:"added_paths,omitempty"`
	UpdatedPaths []string `json:"updated_paths,omitempty"`
	DeletedPaths []string `json:"deleted_paths,omitempty"`
	Warning      string   `json:"warning,omitempty"`
}

// CASTxnParams name an update waiting for blobs: the params of
// cas.needed, cas.commit and cas.abort.
type CASTxnParams struct {
	SessionID string `json:"session_id"`
	Txn       string `json:"txn"`
}

// CASNeededResult lists blobs an update still lacks (at most 8,192 of
// Total).
type CASNeededResult struct {
	Needed []string `json:"needed"`
	Total  int      `json:"total"`
}

// CASIngestParams take a directory inside the allowed roots into the
// store: its trees; the files stay where they are and serve cas.get.
type CASIngestParams struct {
	SessionID string `json:"session_id"`
	Path      string `json:"path"`
}

// CASProblem is a file ingest could not take.
type CASProblem struct {
	Path  string `json:"path"`
	Error string `json:"error"`
}

// CASIngestResult is the result of cas.ingest.
type CASIngestResult struct {
	Path     string       `json:"path"`
	Root     string       `json:"root"`
	Problems []CASProblem `json:"problems,omitempty"`
}

// Blobs are most of the bytes a push puts on the wire, so cas.put has a
// fast path like output events' (fast.go): CASPutRequest writes its
// request line without reflection, base64 straight into the line, and
// ParseCASPutParams reads exactly that layout of params back, decoding
// the base64 on the way. Anything else goes through encoding/json; the fast
// parser says so by returning ok == false, never by guessing.

// CASPutRequest is a cas.put request to write with AppendRequest: the
// objects' digests and their raw bytes.
type CASPutRequest struct {
	SessionID string
	Txn       string
	Digests   []string
	Data      [][]byte
}

// AppendRequest appends the NDJSON line of the request with id, newline
// included. Digests are HASH/SIZE strings and need no escaping; the data
// is standard base64, which needs none either.
func (r *CASPutRequest) AppendRequest(dst []byte, id int64, method string) []byte {
	dst = append(dst, `{"jsonrpc":"2.0","id":`...)
	dst = strconv.AppendInt(dst, id, 10)
	dst = append(dst, `,"method":`...)
	dst = appendString(dst, method)
	dst = append(dst, `,"params":{"session_id":`...)
	dst = appendString(dst, r.SessionID)
	if r.Txn != "" {
		dst = append(dst, `,"txn":`...)
		dst = appendString(dst, r.Txn)
	}
	dst = append(dst, `,"objects":[`...)
	for i, d := range r.Digests {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, `{"digest":`...)
		dst = appendString(dst, d)
		dst = append(dst, `,"data":"`...)
		n := base64.StdEncoding.EncodedLen(len(r.Data[i]))
		dst = append(dst, make([]byte, n)...)
		base64.StdEncoding.Encode(dst[len(dst)-n:], r.Data[i])
		dst = append(dst, `"}`...)
	}
	return append(dst, "]}}\n"...)
}

// ParseCASPutParams reads the params of a cas.put in the layout
// CASPutRequest writes: session_id, optional txn, objects with digest and
// data, no spaces, strings without escapes, strict base64. ok is false
// for anything else (read those with encoding/json).
func ParseCASPutParams(raw []byte) (sessionID, txn string, digests []string, data [][]byte, ok bool) {
	return readCASPutParams(raw, true)
}

// readCASPutParams is ParseCASPutParams; without decode it only checks the
// layout, every data string holding base64's alphabet only (data is nil).
func readCASPutParams(raw []byte, decode bool) (sessionID, txn string, digests []string, data [][]byte, ok bool) {
	p := fastParser{b: raw}
	fail := func() (string, string, []string, [][]byte, bool) { return "", "", nil, nil, false }
	if !p.lit(`{"session_id":`) {
		return fail()
	}
	var ok1 bool
	if sessionID, ok1 = p.str(); !ok1 {
		return fail()
	}
	if p.lit(`,"txn":`) {
		if txn, ok1 = p.str(); !ok1 {
			return fail()
		}
	}
	if !p.lit(`,"objects":[`) {
		return fail()
	}
	for first := true; !p.lit(`]}`); first = false {
		if !first && !p.lit(`,`) {
			return fail()
		}
		if !p.lit(`{"digest":`) {
			return fail()
		}
		d, ok1 := p.str()
		if !ok1 || !p.lit(`,"data":"`) {
			return fail()
		}
		enc, ok1 := p.until('"')
		if !ok1 || !p.lit(`}`) {
			return fail()
		}
		if !decode {
			for _, c := range enc {
				if !isBase64Char[c] {
					return fail()
				}
			}
			digests = append(digests, d)
			continue
		}
		b := make([]byte, base64.StdEncoding.DecodedLen(len(enc)))
		n, err := base64.StdEncoding.Strict().Decode(b, enc)
		if err != nil || bytes.IndexByte(enc, '\n') >= 0 || bytes.IndexByte(enc, '\r') >= 0 { // Decode skips newlines; IndexByte is vectorised, ContainsAny is not
			return fail()
		}
		digests, data = append(digests, d), append(data, b[:n])
	}
	if p.i != len(p.b) {
		return fail()
	}
	return sessionID, txn, digests, data, true
}

// isBase64Char holds standard base64's alphabet and its padding: bytes a
// JSON string holds as they are.
var isBase64Char = func() (t [256]bool) {
	for _, c := range []byte("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=") {
		t[c] = true
	}
	return t
}()

// parseCASPutMessage reads a whole cas.put line in the layout
// CASPutRequest writes, envelope and params, without encoding/json: its
// scanner would walk every byte of the base64 twice (validating the line,
// then skipping params), most of a receiving rexd's time in a push. The
// params are checked for that layout (ParseCASPutParams decodes them later,
// once). ok is false for any other line: ParseMessage reads those.
func parseCASPutMessage(line []byte) (*Message, bool) {
	p := fastParser{b: line}
	if !p.lit(`{"jsonrpc":"2.0","id":`) {
		return nil, false
	}
	start := p.i
	if _, ok := p.uint(); !ok || (line[start] == '0' && p.i-start > 1) { // JSON numbers have no leading zeros
		return nil, false
	}
	id := line[start:p.i]
	if !p.lit(`,"method":"`+MethodCASPut+`","params":`) || line[len(line)-1] != '}' {
		return nil, false
	}
	params := line[p.i : len(line)-1]
	if _, _, _, _, ok := readCASPutParams(params, false); !ok {
		return nil, false
	}
	return &Message{JSONRPC: JSONRPC, ID: bytes.Clone(id), Method: MethodCASPut, Params: bytes.Clone(params)}, true
}
