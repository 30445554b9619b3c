package rexd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"github.com/rexconsole/rex/internal/cas"
	"github.com/rexconsole/rex/internal/protocol"
)

// DefaultCASDir is $XDG_CACHE_HOME/rexd/cas, else ~/.cache/rexd/cas.
func DefaultCASDir() string {
	if d := os.Getenv("XDG_CACHE_HOME"); filepath.IsAbs(d) {
		return filepath.Join(d, "rexd", "cas")
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return ""
	}
	return filepath.Join(home, ".cache", "rexd", "cas")
}

// casState is the server's store, opened on first use.
type casState struct {
	once  sync.Once
	store *cas.Store
	err   error
	txnID sync.Mutex
	next  int
}

func (s *Server) casStore() (*cas.Store, *protocol.Error) {
	s.cas.once.Do(func() {
		dir := s.cfg.CASDir
		if dir == "" {
			dir = DefaultCASDir()
		}
		if dir == "" {
			s.cas.err = errors.New("no cache directory for the store; set XDG_CACHE_HOME")
			return
		}
		s.cas.store, s.cas.err = cas.Open(dir)
	})
	if s.cas.err != nil {
		return nil, protocol.Errorf(protocol.CodeUnsupportedCapability, nil, "the object store is unavailable: %v", s.cas.err)
	}
	return s.cas.store, nil
}

func (s *Server) newTxnID() string {
	s.cas.txnID.Lock()
	defer s.cas.txnID.Unlock()
	s.cas.next++
	return "u_" + strconv.Itoa(s.cas.next)
}

// casSession is a session's cas state: streamed puts to the store and
// updates waiting for blobs. It has its own lock, so cas calls of one
// session may run at once; each upload and update has one more, held
// across its disk writes, so that one blob's write or fsync holds up no
// other's. Lock order: an upload's, then the session's.
type casSession struct {
	mu      sync.Mutex
	uploads map[string]*casUpload // streamed puts to the store, by digest
	txns    map[string]*casTxn    // updates waiting for blobs, by txn id
	closed  bool
	// writing, when set (tests), runs before a chunk of an upload to the
	// store is written.
	writing func(digest string)
}

// casUpload is a streamed put to the store in progress.
type casUpload struct {
	mu   sync.Mutex
	up   *cas.Upload // nil until its first chunk
	done bool        // finished, failed or aborted, and out of the session's map
}

// casTxn is an update waiting for its blobs.
type casTxn struct {
	mu      sync.Mutex
	u       *cas.Update
	path    string                     // the destination as cas.materialize named it (resolved)
	root    string                     // the allowed root it is under, which its errors' paths are relative to
	writers map[string]*cas.BlobWriter // streamed blobs in progress, by digest
}

// close aborts what the session left unfinished: nothing half-written
// stays, in the store or in a destination.
func (cs *casSession) close() {
	cs.mu.Lock()
	uploads, txns := cs.uploads, cs.txns
	cs.uploads, cs.txns, cs.closed = nil, nil, true
	cs.mu.Unlock()
	for _, e := range uploads {
		e.mu.Lock()
		if e.up != nil && !e.done {
			e.up.Abort()
		}
		e.done = true
		e.mu.Unlock()
	}
	for _, t := range txns {
		t.abort()
	}
}

func (t *casTxn) abort() {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, w := range t.writers {
		w.Abort()
	}
	t.writers = nil
	t.u.Abort()
}

func (cs *casSession) txn(id string) (*casTxn, *protocol.Error) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if t := cs.txns[id]; t != nil {
		return t, nil
	}
	return nil, protocol.Errorf(protocol.CodeInvalidParams, map[string]string{"txn": id, "reason": "unknown_txn"},
		"no update %q in this session; run cas.materialize again", id)
}

func (cs *casSession) dropTxn(id string) *casTxn {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	t := cs.txns[id]
	delete(cs.txns, id)
	return t
}

// casError maps a store or update error to a protocol error: a sentence
// that says what happened, and a code that says what kind of thing it is
// (never internal_error for a file-system failure).
func casError(op string, err error) *protocol.Error {
	return casErrorUnder(op, "", err)
}

// casErrorUnder is casError for an error of work under the allowed root
// at root, whose paths are named relative to it.
func casErrorUnder(op, root string, err error) *protocol.Error {
	var me *cas.MissingError
	var se *cas.SpaceError
	var tc *cas.TypeConflictError
	var mat *cas.MaterializeError
	var de *cas.DestinationError
	switch {
	case errors.As(err, &se):
		if se.Limit {
			return protocol.Errorf(protocol.CodeResourceLimit, protocol.ResourceLimitData{Limit: "max_bytes", Value: se.Free}, "%s: %v", op, err)
		}
		return protocol.Errorf(protocol.CodeNoSpace, protocol.NoSpaceData{Path: se.Path, Needed: se.Needed, Free: se.Free, Reason: "no_space"}, "%v", err)
	case errors.As(err, &me):
		missing := make([]string, len(me.Digests))
		for i, d := range me.Digests {
			missing[i] = d.String()
		}
		return protocol.Errorf(protocol.CodeInvalidParams, map[string]any{"reason": "missing", "missing": missing},
			"%s: %d object(s) are not in the store; send them first", op, len(missing))
	case errors.Is(err, cas.ErrInvalidDigest):
		return protocol.Errorf(protocol.CodeInvalidParams, map[string]string{"reason": "invalid_digest"}, "%s: %v", op, err)
	case errors.Is(err, cas.ErrMismatch), errors.Is(err, cas.ErrCorrupt):
		return protocol.Errorf(protocol.CodeInvalidParams, map[string]string{"reason": "digest_mismatch"},
			"%s: %v; nothing was stored", op, err)
	case errors.Is(err, cas.ErrBatchTooLarge):
		return protocol.Errorf(protocol.CodeResourceLimit, map[string]any{"max_entries": cas.MaxBatchEntries, "max_bytes": cas.MaxBatchBytes},
			"%s: %v", op, err)
	case errors.Is(err, cas.ErrInvalidTree):
		return protocol.Errorf(protocol.CodeInvalidParams, map[string]string{"reason": "invalid_tree"}, "%s: %v", op, err)
	case errors.As(err, &tc):
		return protocol.Errorf(protocol.CodeInvalidParams, map[string]any{"reason": "type_conflict", "paths": tc.Paths}, "%s: %v", op, err)
	case errors.Is(err, cas.ErrReceived):
		return protocol.Errorf(protocol.CodeInvalidParams, map[string]string{"reason": "already_received"}, "%s: %v; it needs no more bytes", op, err)
	case errors.Is(err, cas.ErrUpdateFinished):
		return protocol.Errorf(protocol.CodeInvalidParams, map[string]string{"reason": "unknown_txn"}, "%s: %v (committed or aborted meanwhile); run cas.materialize again", op, err)
	case errors.As(err, &de):
		return protocol.Errorf(protocol.CodeInvalidParams, map[string]string{"path": de.Path, "reason": "not_a_directory"}, "%s: %v", op, err)
	case errors.As(err, &mat):
		return protocol.Errorf(protocol.CodeInvalidParams, map[string]string{"reason": "refused"}, "%s: %v", op, err)
	}
	if perr := fileSystemError(op, root, err); perr != nil {
		return perr
	}
	return protocol.Errorf(protocol.CodeInternalError, nil, "%s: %v", op, err)
}

// fileSystemError maps an errno to its own code and one sentence, or
// returns nil.
func fileSystemError(op, root string, err error) *protocol.Error {
	path := ""
	var pe *fs.PathError
	if errors.As(err, &pe) {
		path = shownPath(root, pe.Path)
	}
	var le *os.LinkError
	if errors.As(err, &le) {
		path = shownPath(root, le.New)
	}
	where := ""
	if path != "" {
		where = " (" + path + ")"
	}
	fsErr := func(reason, what string) *protocol.Error {
		return protocol.Errorf(protocol.CodeFileSystem, protocol.FileSystemData{Path: path, Reason: reason}, "%s: %s%s", op, what, where)
	}
	switch {
	case errors.Is(err, syscall.ENOSPC):
		return protocol.Errorf(protocol.CodeNoSpace, protocol.NoSpaceData{Path: path, Reason: "no_space"},
			"%s: no space left on the file system%s; free some space and try again", op, where)
	case errors.Is(err, syscall.EDQUOT):
		return protocol.Errorf(protocol.CodeNoSpace, protocol.NoSpaceData{Path: path, Reason: "quota"},
			"%s: the disk quota is used up%s; free some space and try again", op, where)
	case errors.Is(err, fs.ErrPermission):
		may := "write"
		if strings.HasPrefix(op, "cas.ingest") { // a pull reads there
			may = "read"
		}
		return protocol.Errorf(protocol.CodeUnauthorized, map[string]string{"path": path, "reason": "permission_denied"},
			"%s: permission denied%s; use --sudo, or a place the login user may %s", op, where, may)
	case errors.Is(err, syscall.EROFS):
		return fsErr("read_only", "the file system is read-only")
	case errors.Is(err, syscall.EBUSY), errors.Is(err, syscall.ETXTBSY):
		return fsErr("busy", "the file is busy")
	case errors.Is(err, syscall.ENAMETOOLONG):
		return fsErr("name_too_long", "a name is too long for the file system")
	case errors.Is(err, syscall.EIO):
		return fsErr("io", "input/output error: the disk failed a read or write")
	case errors.Is(err, syscall.ENOTDIR):
		return fsErr("not_a_directory", "a part of the path is not a directory")
	case errors.Is(err, syscall.EISDIR):
		return fsErr("is_a_directory", "a directory stands where a file goes")
	case errors.Is(err, syscall.ENOTEMPTY):
		return fsErr("not_empty", "a directory is not empty")
	case errors.Is(err, syscall.EMLINK):
		return fsErr("too_many_links", "too many links")
	case errors.Is(err, syscall.EXDEV):
		return fsErr("cross_device", "the rename would cross file systems")
	case errors.Is(err, fs.ErrExist):
		return fsErr("exists", "it exists already (made at the same moment by someone else); try again")
	case errors.Is(err, syscall.ELOOP):
		return fsErr("loop", "too many levels of symbolic links")
	case errors.Is(err, fs.ErrNotExist):
		return protocol.Errorf(protocol.CodeInvalidParams, map[string]string{"path": path, "reason": "not_found"},
			"%s: no such file or directory%s", op, where)
	}
	return nil
}

// shownPath is how path, of work under the allowed root at root (when
// relative), reads to the operator: absolute, and rex's own temporary
// name as the directory it was made in, which is the place the operator
// can do something about (its permissions, its space).
func shownPath(root, path string) string {
	if root != "" && !filepath.IsAbs(path) {
		path = filepath.Join(root, path)
	}
	// A temporary name, or a file inside one (a stage's), reads as the
	// directory it was made in.
	parts := strings.Split(path, "/")
	for i, p := range parts {
		if !cas.IsTempName(p) {
			continue
		}
		switch dir := strings.Join(parts[:i], "/"); {
		case dir != "":
			return dir
		case filepath.IsAbs(path):
			return "/"
		default:
			return "."
		}
	}
	return path
}

// casAudited is a cas result as the client gets it, with what the audit
// log keeps of it instead: counts and byte totals, never contents.
type casAudited struct {
	res     any
	summary map[string]any
}

func (c casAudited) MarshalJSON() ([]byte, error) { return json.Marshal(c.res) }

func (c casAudited) auditSummary() any { return c.summary }

// casAuditParams reduces a cas.* request's decoded params to what an
// auditor needs: counts and byte totals of objects, never their data.
func casAuditParams(params any) map[string]any {
	out := map[string]any{}
	set := func(k string, v any, keep bool) {
		if keep {
			out[k] = v
		}
	}
	b64 := func(s string) int64 { return int64(len(s)) / 4 * 3 }
	switch p := params.(type) {
	case *protocol.CASDigests:
		out["digests"] = len(p.Digests)
	case *protocol.CASPutParams:
		var n int64
		for _, o := range p.Objects {
			n += b64(o.Data)
		}
		out["objects"], out["bytes"] = len(p.Objects), n
		set("txn", p.Txn, p.Txn != "")
	case *protocol.CASPutChunkParams:
		out["digest"], out["offset"], out["bytes"] = p.Digest, p.Offset, b64(p.Data)
		set("final", true, p.Final)
		set("txn", p.Txn, p.Txn != "")
	case *protocol.CASGetChunkParams:
		out["digest"], out["offset"], out["length"] = p.Digest, p.Offset, p.Length
	case *protocol.CASMaterializeParams:
		out["tree"], out["path"] = p.Tree, p.Path
		set("atomic", true, p.Atomic)
		set("delete", true, p.Delete)
		set("delete_under", p.DeleteUnder, len(p.DeleteUnder) > 0)
		set("dry_run", true, p.DryRun)
		set("owner", p.Owner, p.Owner != "")
		set("max_bytes", p.MaxBytes, p.MaxBytes != 0)
		if len(p.Trees) > 0 {
			var n int64
			for _, o := range p.Trees {
				n += b64(o.Data)
			}
			out["trees"], out["trees_bytes"] = len(p.Trees), n
		}
	case *protocol.CASTxnParams:
		out["txn"] = p.Txn
	case *protocol.CASIngestParams:
		out["path"] = p.Path
	}
	return out
}

// casBegin decodes a cas.* request's params, finds its session and opens
// the store. sessionID points into params and is read after decoding. The
// request's audit entry keeps counts, never object data (the params are
// parsed once, here).
func (c *conn) casBegin(req *request, params any, sessionID *string) (*cas.Store, *protocol.Error) {
	if e := decode(req.msg.Params, params); e != nil {
		req.audit.Params = map[string]any{"unparsed_bytes": len(req.msg.Params)}
		return nil, e
	}
	req.audit.Params = casAuditParams(params)
	if e := c.session(req, *sessionID); e != nil {
		return nil, e
	}
	return c.srv.casStore()
}

// casBeginDecoded is casBegin for params the fast path has read already.
func (c *conn) casBeginDecoded(req *request, p *protocol.CASPutParams, audit map[string]any) (*cas.Store, *protocol.Error) {
	req.audit.Params = audit
	if e := c.session(req, p.SessionID); e != nil {
		return nil, e
	}
	return c.srv.casStore()
}

func casPutAudit(txn string, data [][]byte) map[string]any {
	var n int64
	for _, b := range data {
		n += int64(len(b))
	}
	out := map[string]any{"objects": len(data), "bytes": n}
	if txn != "" {
		out["txn"] = txn
	}
	return out
}

// fastObjects checks a batch read by the fast path: the caps and every
// digest, before anything is stored.
func fastObjects(digests []string, data [][]byte) ([]cas.Object, *protocol.Error) {
	if len(digests) > cas.MaxBatchEntries {
		return nil, casError("cas.put", cas.ErrBatchTooLarge)
	}
	objs := make([]cas.Object, len(digests))
	for i, s := range digests {
		d, err := cas.ParseDigest(s)
		if err != nil {
			return nil, protocol.Errorf(protocol.CodeInvalidParams, map[string]string{"digest": s, "reason": "invalid_digest"},
				"cas.put: digest %q is invalid; nothing was stored", s)
		}
		objs[i] = cas.Object{Digest: d, Data: data[i]}
	}
	return objs, nil
}

func parseDigests(in []string, max int) ([]cas.Digest, *protocol.Error) {
	if len(in) > max {
		return nil, protocol.Errorf(protocol.CodeResourceLimit, map[string]int{"max_digests": max},
			"too many digests in one call (%d, at most %d); split the request", len(in), max)
	}
	out := make([]cas.Digest, len(in))
	for i, s := range in {
		d, err := cas.ParseDigest(s)
		if err != nil {
			return nil, protocol.Errorf(protocol.CodeInvalidParams, map[string]string{"digest": s, "reason": "invalid_digest"},
				"digest %q is invalid: want 64 lowercase hex characters, a slash and the size", s)
		}
		out[i] = d
	}
	return out, nil
}

func digestStrings(ds []cas.Digest) []string {
	out := make([]string, len(ds))
	for i, d := range ds {
		out[i] = d.String()
	}
	return out
}

func (c *conn) casHas(ctx context.Context, req *request) (any, *protocol.Error) {
	var p protocol.CASDigests
	st, perr := c.casBegin(req, &p, &p.SessionID)
	if perr != nil {
		return nil, perr
	}
	ds, perr := parseDigests(p.Digests, cas.MaxHasDigests)
	if perr != nil {
		return nil, perr
	}
	missing, err := st.Has(ctx, ds)
	if err != nil {
		return nil, casError("cas.has", err)
	}
	res := protocol.CASHasResult{Missing: digestStrings(missing)}
	return casAudited{res, map[string]any{"missing": len(missing)}}, nil
}

// decodeObjects reads and verifies a batch: one bad entry refuses all.
func decodeObjects(in []protocol.CASObject) ([]cas.Object, *protocol.Error) {
	if len(in) > cas.MaxBatchEntries {
		return nil, casError("cas.put", cas.ErrBatchTooLarge)
	}
	objs := make([]cas.Object, len(in))
	for i, o := range in {
		d, err := cas.ParseDigest(o.Digest)
		if err != nil {
			return nil, protocol.Errorf(protocol.CodeInvalidParams, map[string]string{"digest": o.Digest, "reason": "invalid_digest"},
				"cas.put: digest %q is invalid; nothing was stored", o.Digest)
		}
		data, err := cas.DecodeBase64(o.Data)
		if err != nil {
			return nil, protocol.Errorf(protocol.CodeInvalidParams, map[string]string{"digest": o.Digest, "reason": "bad_base64"},
				"cas.put: the data of %s is not strict base64; nothing was stored", o.Digest)
		}
		objs[i] = cas.Object{Digest: d, Data: data}
	}
	return objs, nil
}

func (c *conn) casPut(ctx context.Context, req *request) (any, *protocol.Error) {
	var p protocol.CASPutParams
	var objs []cas.Object
	var st *cas.Store
	var perr *protocol.Error
	if req.raw != nil {
		// A raw frame: the bytes followed the line (protocol.CapCASRaw).
		sid, txn, digests, data, err := protocol.ParseCASPutRaw(req.msg.Params, req.raw, cas.MaxBatchEntries)
		if err != nil {
			return nil, protocol.Errorf(protocol.CodeInvalidParams, map[string]string{"reason": "bad_raw_frame"},
				"%v; nothing was stored", err)
		}
		p.SessionID, p.Txn = sid, txn
		if st, perr = c.casBeginDecoded(req, &p, casPutAudit(txn, data)); perr != nil {
			return nil, perr
		}
		if objs, perr = fastObjects(digests, data); perr != nil {
			return nil, perr
		}
	} else if sid, txn, digests, data, ok := protocol.ParseCASPutParams(req.msg.Params); ok {
		// rex's own layout: read in one pass, base64 decoded on the way.
		p.SessionID, p.Txn = sid, txn
		if st, perr = c.casBeginDecoded(req, &p, casPutAudit(txn, data)); perr != nil {
			return nil, perr
		}
		if objs, perr = fastObjects(digests, data); perr != nil {
			return nil, perr
		}
	} else {
		if st, perr = c.casBegin(req, &p, &p.SessionID); perr != nil {
			return nil, perr
		}
		if objs, perr = decodeObjects(p.Objects); perr != nil {
			return nil, perr
		}
	}
	if p.Txn != "" {
		t, perr := req.session.cas.txn(p.Txn)
		if perr != nil {
			return nil, perr
		}
		t.mu.Lock() // Put verifies every object before it writes any
		err := t.u.Put(objs)
		t.mu.Unlock()
		if err != nil {
			return nil, casError("cas.put", err)
		}
	} else if err := st.PutBatch(ctx, objs); err != nil {
		return nil, casError("cas.put", err)
	}
	return casAudited{protocol.CASPutResult{Stored: len(objs)}, map[string]any{"stored": len(objs)}}, nil
}

func (c *conn) casGet(ctx context.Context, req *request) (any, *protocol.Error) {
	var p protocol.CASDigests
	st, perr := c.casBegin(req, &p, &p.SessionID)
	if perr != nil {
		return nil, perr
	}
	ds, perr := parseDigests(p.Digests, cas.MaxBatchEntries)
	if perr != nil {
		return nil, perr
	}
	var total int64
	for _, d := range ds {
		total += d.Size
	}
	if total > cas.MaxBatchBytes {
		return nil, protocol.Errorf(protocol.CodeResourceLimit, map[string]int64{"max_bytes": cas.MaxBatchBytes},
			"cas.get: %d bytes asked in one call (at most %d); fetch large objects with cas.get_chunk", total, cas.MaxBatchBytes)
	}
	objs, err := st.Get(ctx, ds)
	if err != nil {
		return nil, casError("cas.get", err)
	}
	res := protocol.CASGetResult{Objects: make([]protocol.CASObject, len(objs))}
	for i, o := range objs {
		res.Objects[i] = protocol.CASObject{Digest: o.Digest.String(), Data: cas.EncodeBase64(o.Data)}
	}
	return casAudited{res, map[string]any{"objects": len(objs), "bytes": total}}, nil
}

func (c *conn) casPutChunk(ctx context.Context, req *request) (any, *protocol.Error) {
	var p protocol.CASPutChunkParams
	st, perr := c.casBegin(req, &p, &p.SessionID)
	if perr != nil {
		return nil, perr
	}
	d, err := cas.ParseDigest(p.Digest)
	if err != nil {
		return nil, protocol.Errorf(protocol.CodeInvalidParams, map[string]string{"reason": "invalid_digest"}, "cas.put_chunk: digest %q is invalid", p.Digest)
	}
	data, err := cas.DecodeBase64(p.Data)
	if err != nil {
		return nil, protocol.Errorf(protocol.CodeInvalidParams, map[string]string{"reason": "bad_base64"}, "cas.put_chunk: data is not strict base64")
	}
	if len(data) > cas.MaxChunkSize {
		return nil, protocol.Errorf(protocol.CodeResourceLimit, map[string]int{"max_chunk": cas.MaxChunkSize}, "cas.put_chunk: chunks are at most %d bytes", cas.MaxChunkSize)
	}
	var res protocol.CASPutChunkResult
	if p.Txn != "" {
		res, perr = c.txnChunk(req, p, d, data)
	} else {
		res, perr = c.storeChunk(req, st, p, d, data)
	}
	if perr != nil {
		return nil, perr
	}
	return casAudited{res, map[string]any{"offset": res.Offset, "committed": res.Committed}}, nil
}

// storeChunk is a piece of a streamed put into the store. Only the
// upload's own lock is held while it writes (and commits, with an fsync).
func (c *conn) storeChunk(req *request, st *cas.Store, p protocol.CASPutChunkParams, d cas.Digest, data []byte) (protocol.CASPutChunkResult, *protocol.Error) {
	cs := &req.session.cas
	e, perr := cs.upload(p)
	if perr != nil {
		return protocol.CASPutChunkResult{}, perr
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.done || e.up == nil && p.Offset != 0 {
		// Ended by a chunk or a close that came first, or not started yet
		// by the chunk at offset 0 that made it.
		return protocol.CASPutChunkResult{}, noUpload(p)
	}
	if p.Offset == 0 { // a start, or a restart from the beginning
		if e.up != nil {
			e.up.Abort()
		}
		up, err := st.NewUpload(d)
		if err != nil {
			cs.endUpload(p.Digest, e)
			return protocol.CASPutChunkResult{}, casError("cas.put_chunk", err)
		}
		e.up = up
	}
	if p.Offset != e.up.Offset() {
		return protocol.CASPutChunkResult{}, wrongOffset(p, e.up.Offset())
	}
	if cs.writing != nil {
		cs.writing(p.Digest)
	}
	if err := e.up.WriteChunk(p.Offset, data); err != nil {
		e.up.Abort()
		cs.endUpload(p.Digest, e)
		return protocol.CASPutChunkResult{}, casError("cas.put_chunk", err)
	}
	res := protocol.CASPutChunkResult{Offset: e.up.Offset()}
	if p.Final {
		cs.endUpload(p.Digest, e)
		if err := e.up.Commit(); err != nil {
			return protocol.CASPutChunkResult{}, casError("cas.put_chunk", err)
		}
		res.Committed = true
	}
	return res, nil
}

// upload is the upload of p's digest in progress, made at offset 0.
func (cs *casSession) upload(p protocol.CASPutChunkParams) (*casUpload, *protocol.Error) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if cs.closed {
		return nil, protocol.Errorf(protocol.CodeInvalidRequest, nil, "cas.put_chunk: the session is closing")
	}
	e := cs.uploads[p.Digest]
	if e == nil {
		if p.Offset != 0 {
			return nil, noUpload(p)
		}
		if len(cs.uploads) >= maxUploads {
			return nil, tooManyUploads()
		}
		if cs.uploads == nil {
			cs.uploads = map[string]*casUpload{}
		}
		e = &casUpload{}
		cs.uploads[p.Digest] = e
	}
	return e, nil
}

// endUpload takes e, whose lock is held, out of the session's uploads.
func (cs *casSession) endUpload(digest string, e *casUpload) {
	e.done = true
	cs.mu.Lock()
	if cs.uploads[digest] == e {
		delete(cs.uploads, digest)
	}
	cs.mu.Unlock()
}

func noUpload(p protocol.CASPutChunkParams) *protocol.Error {
	return protocol.Errorf(protocol.CodeInvalidParams, map[string]string{"reason": "no_upload"}, "cas.put_chunk: no upload of %s in progress; start at offset 0", p.Digest)
}

// maxUploads bounds the streamed blobs in progress of a session (to its
// store) and of each update waiting for blobs, and maxUpdates the updates
// waiting at once: each upload holds an open temp file and each update its
// whole plan, so without a bound a client could run rexd out of file
// descriptors or memory, failing every session. rex streams one blob at a
// time per destination and waits on one update per push.
const (
	maxUploads = 64
	maxUpdates = 16
)

func tooManyUploads() *protocol.Error {
	return protocol.Errorf(protocol.CodeResourceLimit, protocol.ResourceLimitData{Limit: "uploads", Value: maxUploads},
		"cas.put_chunk: %d blobs are being streamed already, the most at once; finish one (its final chunk) or start it again from offset 0", maxUploads)
}

func tooManyUpdates() *protocol.Error {
	return protocol.Errorf(protocol.CodeResourceLimit, protocol.ResourceLimitData{Limit: "updates", Value: maxUpdates},
		"cas.materialize: %d updates of this session are waiting for blobs already, the most at once; commit or abort one first", maxUpdates)
}

// wrongOffset refuses a chunk that does not start where the upload is: a
// retried or reordered chunk. The upload stays, so the client can resend
// from where it is.
func wrongOffset(p protocol.CASPutChunkParams, want int64) *protocol.Error {
	return protocol.Errorf(protocol.CodeInvalidParams, map[string]any{"reason": "wrong_offset", "offset": want},
		"cas.put_chunk: chunk of %s at offset %d, expected %d; resend from %d", p.Digest, p.Offset, want, want)
}

// txnChunk is a piece of a blob an update needs, written straight into
// its destination.
func (c *conn) txnChunk(req *request, p protocol.CASPutChunkParams, d cas.Digest, data []byte) (protocol.CASPutChunkResult, *protocol.Error) {
	t, perr := req.session.cas.txn(p.Txn)
	if perr != nil {
		return protocol.CASPutChunkResult{}, perr
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.writers == nil {
		t.writers = map[string]*cas.BlobWriter{}
	}
	w := t.writers[p.Digest]
	if p.Offset == 0 && w != nil {
		w.Abort()
		w = nil
	}
	if w == nil {
		if p.Offset != 0 {
			return protocol.CASPutChunkResult{}, protocol.Errorf(protocol.CodeInvalidParams, map[string]string{"reason": "no_upload"}, "cas.put_chunk: no upload of %s in progress; start at offset 0", p.Digest)
		}
		if len(t.writers) >= maxUploads {
			return protocol.CASPutChunkResult{}, tooManyUploads()
		}
		var err error
		if w, err = t.u.Receive(d); err != nil {
			return protocol.CASPutChunkResult{}, casError("cas.put_chunk", err)
		}
		t.writers[p.Digest] = w
	}
	fail := func(err error) (protocol.CASPutChunkResult, *protocol.Error) {
		w.Abort()
		delete(t.writers, p.Digest)
		return protocol.CASPutChunkResult{}, casError("cas.put_chunk", err)
	}
	if p.Offset != w.Offset() {
		return protocol.CASPutChunkResult{}, wrongOffset(p, w.Offset())
	}
	if _, err := w.Write(data); err != nil {
		return fail(err)
	}
	res := protocol.CASPutChunkResult{Offset: w.Offset()}
	if p.Final {
		delete(t.writers, p.Digest)
		if err := w.Commit(); err != nil {
			return protocol.CASPutChunkResult{}, casError("cas.put_chunk", err)
		}
		res.Committed = true
	}
	return res, nil
}

func (c *conn) casGetChunk(ctx context.Context, req *request) (any, *protocol.Error) {
	var p protocol.CASGetChunkParams
	st, perr := c.casBegin(req, &p, &p.SessionID)
	if perr != nil {
		return nil, perr
	}
	d, err := cas.ParseDigest(p.Digest)
	if err != nil {
		return nil, protocol.Errorf(protocol.CodeInvalidParams, map[string]string{"reason": "invalid_digest"}, "cas.get_chunk: digest %q is invalid", p.Digest)
	}
	n := p.Length
	if n <= 0 || n > cas.MaxChunkSize {
		n = cas.MaxChunkSize
	}
	b, err := st.ReadChunk(d, p.Offset, n)
	if err != nil {
		return nil, casError("cas.get_chunk", err)
	}
	res := protocol.CASGetChunkResult{Data: cas.EncodeBase64(b), EOF: p.Offset+int64(len(b)) >= d.Size}
	return casAudited{res, map[string]any{"bytes": len(b), "eof": res.EOF}}, nil
}

// lookupOwner turns "user", "user:group" or ":group" into numeric ids
// (-1 for the part not given).
func lookupOwner(spec string) (*cas.Owner, error) {
	name, group, hasGroup := strings.Cut(spec, ":")
	o := &cas.Owner{UID: -1, GID: -1}
	if name != "" {
		if n, ok := numericID(name); ok {
			o.UID = n
		} else {
			u, err := user.Lookup(name)
			if err != nil {
				return nil, fmt.Errorf("no user %q on this machine", name)
			}
			o.UID, _ = strconv.Atoi(u.Uid)
			if !hasGroup {
				o.GID, _ = strconv.Atoi(u.Gid)
			}
		}
	}
	if group != "" {
		if n, ok := numericID(group); ok {
			o.GID = n
		} else {
			g, err := user.LookupGroup(group)
			if err != nil {
				return nil, fmt.Errorf("no group %q on this machine", group)
			}
			o.GID, _ = strconv.Atoi(g.Gid)
		}
	}
	if o.UID < 0 && o.GID < 0 {
		return nil, fmt.Errorf("owner %q names neither a user nor a group", spec)
	}
	return o, nil
}

// numericID reads a uid or gid given as a number: one chown can set. It
// takes 32 bits (4294967296 would be 0, root) and (uid_t)-1 means "leave
// alone"; anything else is looked up as a name.
func numericID(s string) (int, bool) {
	n, err := strconv.ParseUint(s, 10, 32)
	if err != nil || n == math.MaxUint32 || n > math.MaxInt {
		return 0, false
	}
	return int(n), true
}

// materializeResult turns an update's result into the wire form.
func materializeResult(r cas.UpdateResult) protocol.CASMaterializeResult {
	return protocol.CASMaterializeResult{
		Path: r.Path, Created: r.Created, Unchanged: r.Unchanged(),
		Added: r.Added, Updated: r.Updated, Deleted: r.Deleted, Bytes: r.Bytes,
		AddedPaths: r.AddedPaths, UpdatedPaths: r.UpdatedPaths, DeletedPaths: r.DeletedPaths,
		Warning: r.Warning,
	}
}

func auditMaterialize(res protocol.CASMaterializeResult) casAudited {
	sum := map[string]any{"path": res.Path, "added": res.Added, "updated": res.Updated, "deleted": res.Deleted, "bytes": res.Bytes}
	if res.Txn != "" {
		sum["txn"], sum["needed"] = res.Txn, res.NeededTotal
	}
	if res.Created {
		sum["created"] = true
	}
	return casAudited{res, sum}
}

// casMaterializePrepared is the testHook's name for the moment
// cas.materialize has prepared its update and not yet answered.
const casMaterializePrepared = "cas.materialize (prepared)"

func (c *conn) casMaterialize(ctx context.Context, req *request) (any, *protocol.Error) {
	var p protocol.CASMaterializeParams
	st, perr := c.casBegin(req, &p, &p.SessionID)
	if perr != nil {
		return nil, perr
	}
	tree, err := cas.ParseDigest(p.Tree)
	if err != nil {
		return nil, protocol.Errorf(protocol.CodeInvalidParams, map[string]string{"reason": "invalid_digest"}, "cas.materialize: tree %q is invalid", p.Tree)
	}
	s := req.session
	rp, perr := s.roots.resolve(p.Path, s.cwd)
	if perr != nil {
		return nil, perr
	}
	if rp.rel == "." && p.Atomic {
		return nil, protocol.Errorf(protocol.CodeInvalidParams, nil, "cas.materialize: %s is an allowed root itself, which an atomic update cannot replace; name a directory inside it", rp.abs)
	}
	for _, n := range p.DeleteUnder {
		if err := cas.ValidateName(n); err != nil {
			return nil, protocol.Errorf(protocol.CodeInvalidParams, nil, "cas.materialize: delete_under: %v", err)
		}
	}
	if len(p.Trees) > 0 {
		// A dry run's trees are planned with in memory, never stored:
		// the dry run changes nothing here.
		if !p.DryRun {
			return nil, protocol.Errorf(protocol.CodeInvalidParams, nil, "cas.materialize: trees are taken only with dry_run; send them with cas.put")
		}
		objs, perr := decodeObjects(p.Trees)
		if perr != nil {
			return nil, perr
		}
		st = st.Scratch()
		if err := st.PutBatch(ctx, objs); err != nil {
			return nil, casError("cas.materialize", err)
		}
	}
	if !p.DryRun && len(p.Trees) == 0 {
		// Refused before the plan is made, too: the check below, which
		// counts it in, is the one that holds under concurrent calls.
		s.cas.mu.Lock()
		n := len(s.cas.txns)
		s.cas.mu.Unlock()
		if n >= maxUpdates {
			return nil, tooManyUpdates()
		}
	}
	opts := cas.UpdateOptions{Atomic: p.Atomic, Delete: p.Delete, DeleteUnder: p.DeleteUnder, DryRun: p.DryRun, MaxBytes: p.MaxBytes, List: p.List || p.DryRun,
		Keep: c.srv.isAuditLog}
	if p.Owner != "" {
		if opts.Owner, err = lookupOwner(p.Owner); err != nil {
			return nil, protocol.Errorf(protocol.CodeInvalidParams, map[string]string{"reason": "bad_owner"}, "cas.materialize: %v", err)
		}
	}
	u, err := st.PrepareUpdate(ctx, rp.root.dir, relOrDot(rp.rel), tree, opts)
	if c.srv.testHook != nil {
		c.srv.testHook(ctx, casMaterializePrepared)
	}
	if err != nil {
		if isEscape(err) {
			return nil, s.roots.forbidden(rp.abs, "a symbolic link leads outside the allowed roots")
		}
		var kept *cas.KeptError
		if errors.As(err, &kept) {
			return nil, c.srv.auditLogRefused("cas.materialize", filepath.Join(rp.abs, filepath.FromSlash(kept.Path)))
		}
		return nil, casErrorUnder("cas.materialize", rp.root.path, err)
	}
	res := materializeResult(u.Result())
	res.Path = rp.abs
	if p.DryRun {
		return auditMaterialize(res), nil
	}
	need := u.Needed()
	if len(need) == 0 {
		r, err := u.Commit(ctx)
		if err != nil {
			return nil, casErrorUnder("cas.materialize", rp.root.path, err)
		}
		res = materializeResult(r)
		res.Path = rp.abs
		return auditMaterialize(res), nil
	}
	id := c.srv.newTxnID()
	cs := &s.cas
	cs.mu.Lock()
	if cs.closed {
		cs.mu.Unlock()
		u.Abort()
		return nil, protocol.Errorf(protocol.CodeInvalidRequest, nil, "cas.materialize: the session is closing")
	}
	if len(cs.txns) >= maxUpdates {
		cs.mu.Unlock()
		u.Abort()
		return nil, tooManyUpdates()
	}
	if cs.txns == nil {
		cs.txns = map[string]*casTxn{}
	}
	cs.txns[id] = &casTxn{u: u, path: rp.abs, root: rp.root.path}
	cs.mu.Unlock()
	// A client that cancelled gave up on the answer, and with it on the
	// only way to learn the txn id: nothing could abort the txn, whose
	// temporary files would stay as long as the session. Checked after
	// the txn is registered, so that a session closing meanwhile aborts
	// it too (dropTxn tells which of the two does).
	if ctx.Err() != nil {
		if t := cs.dropTxn(id); t != nil {
			t.abort()
		}
		return nil, c.cancelled(req)
	}
	res.Txn, res.NeededTotal = id, len(need)
	res.Needed = digestStrings(need[:min(len(need), cas.MaxHasDigests)])
	return auditMaterialize(res), nil
}

func (c *conn) casNeeded(ctx context.Context, req *request) (any, *protocol.Error) {
	var p protocol.CASTxnParams
	if _, perr := c.casBegin(req, &p, &p.SessionID); perr != nil {
		return nil, perr
	}
	t, perr := req.session.cas.txn(p.Txn)
	if perr != nil {
		return nil, perr
	}
	missing := t.u.Missing()
	res := protocol.CASNeededResult{Needed: digestStrings(missing[:min(len(missing), cas.MaxHasDigests)]), Total: len(missing)}
	return casAudited{res, map[string]any{"needed": len(missing)}}, nil
}

func (c *conn) casCommit(ctx context.Context, req *request) (any, *protocol.Error) {
	var p protocol.CASTxnParams
	if _, perr := c.casBegin(req, &p, &p.SessionID); perr != nil {
		return nil, perr
	}
	if _, perr := req.session.cas.txn(p.Txn); perr != nil {
		return nil, perr
	}
	t := req.session.cas.dropTxn(p.Txn)
	if t == nil {
		return nil, protocol.Errorf(protocol.CodeInvalidParams, map[string]string{"txn": p.Txn, "reason": "unknown_txn"}, "cas.commit: update %q was committed or aborted already", p.Txn)
	}
	t.mu.Lock()
	for _, w := range t.writers {
		w.Abort() // a blob half sent is not received
	}
	t.writers = nil
	r, err := t.u.Commit(ctx)
	t.mu.Unlock()
	var me *cas.MissingError
	if errors.As(err, &me) {
		// Commit aborted the update, which was dropped above: "send
		// them first" would lead to unknown_txn.
		return nil, protocol.Errorf(protocol.CodeInvalidParams, map[string]any{"reason": "missing", "missing": digestStrings(me.Digests[:min(len(me.Digests), cas.MaxHasDigests)])},
			"cas.commit: %d blob(s) the update needs were not sent, so it was aborted; run cas.materialize again", len(me.Digests))
	}
	if err != nil {
		return nil, casErrorUnder("cas.commit", t.root, err)
	}
	res := materializeResult(r)
	res.Path = t.path // as cas.materialize said it: the client keys its sync record by it
	return auditMaterialize(res), nil
}

func (c *conn) casAbort(ctx context.Context, req *request) (any, *protocol.Error) {
	var p protocol.CASTxnParams
	if _, perr := c.casBegin(req, &p, &p.SessionID); perr != nil {
		return nil, perr
	}
	if t := req.session.cas.dropTxn(p.Txn); t != nil {
		t.abort()
	}
	return struct{}{}, nil
}

func (c *conn) casIngest(ctx context.Context, req *request) (any, *protocol.Error) {
	var p protocol.CASIngestParams
	st, perr := c.casBegin(req, &p, &p.SessionID)
	if perr != nil {
		return nil, perr
	}
	s := req.session
	rp, perr := s.roots.resolve(p.Path, s.cwd)
	if perr != nil {
		return nil, perr
	}
	// Trees only: the files themselves serve cas.get, so a pull writes
	// nothing but trees here.
	// A pull only reads here: leftovers of a killed push are the next
	// push's to sweep.
	root, problems, err := st.IngestIn(ctx, rp.root.dir, relOrDot(rp.rel), cas.IngestOptions{Blobs: cas.BlobsNone, KeepLeftovers: true})
	if err != nil {
		if isEscape(err) {
			return nil, s.roots.forbidden(rp.abs, "a symbolic link leads outside the allowed roots")
		}
		if perr := fileSystemError("cas.ingest "+rp.abs, rp.root.path, err); perr != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, perr
		}
		return nil, s.roots.fsError("cas.ingest", rp, err)
	}
	res := protocol.CASIngestResult{Path: rp.abs, Root: root.String()}
	for _, pr := range problems {
		res.Problems = append(res.Problems, protocol.CASProblem{Path: pr.Path, Error: pr.Err.Error()})
	}
	return casAudited{res, map[string]any{"path": res.Path, "root": res.Root, "problems": len(res.Problems)}}, nil
}
