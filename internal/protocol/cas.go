package protocol

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

// CASPutParams are the params of cas.put: all are stored or none.
type CASPutParams struct {
	SessionID string      `json:"session_id"`
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

// CASMaterializeParams write a tree to a directory inside the allowed
// roots, replacing what was there.
type CASMaterializeParams struct {
	SessionID string `json:"session_id"`
	Tree      string `json:"tree"`
	Path      string `json:"path"`
}

// CASMaterializeResult is the result of cas.materialize. Unchanged says
// the directory already held the tree and was not rewritten.
type CASMaterializeResult struct {
	Path      string `json:"path"`
	Unchanged bool   `json:"unchanged,omitempty"`
}

// CASIngestParams take a directory inside the allowed roots into the
// store.
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
