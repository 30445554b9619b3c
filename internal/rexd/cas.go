package rexd

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync"

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

// casError maps a store error to a protocol error.
func casError(op string, err error) *protocol.Error {
	var me *cas.MissingError
	switch {
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
	case errors.Is(err, cas.ErrOutsideRoots):
		return protocol.Errorf(protocol.CodeForbiddenPath, nil, "%s: %v", op, err)
	case errors.Is(err, cas.ErrInvalidTree):
		return protocol.Errorf(protocol.CodeInvalidParams, map[string]string{"reason": "invalid_tree"}, "%s: %v", op, err)
	}
	var mat *cas.MaterializeError
	if errors.As(err, &mat) {
		return protocol.Errorf(protocol.CodeInvalidParams, map[string]string{"reason": "refused"}, "%s: %v", op, err)
	}
	return protocol.Errorf(protocol.CodeInternalError, nil, "%s: %v", op, err)
}

// casBegin decodes a cas.* request's params, finds its session and opens
// the store. sessionID points into params and is read after decoding.
func (c *conn) casBegin(req *request, params any, sessionID *string) (*cas.Store, *protocol.Error) {
	if e := decode(req.msg.Params, params); e != nil {
		return nil, e
	}
	if e := c.session(req, *sessionID); e != nil {
		return nil, e
	}
	return c.srv.casStore()
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
	res := protocol.CASHasResult{Missing: make([]string, len(missing))}
	for i, d := range missing {
		res.Missing[i] = d.String()
	}
	return res, nil
}

func (c *conn) casPut(ctx context.Context, req *request) (any, *protocol.Error) {
	var p protocol.CASPutParams
	st, perr := c.casBegin(req, &p, &p.SessionID)
	if perr != nil {
		return nil, perr
	}
	if len(p.Objects) > cas.MaxBatchEntries {
		return nil, casError("cas.put", cas.ErrBatchTooLarge)
	}
	objs := make([]cas.Object, len(p.Objects))
	for i, o := range p.Objects {
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
	if err := st.PutBatch(ctx, objs); err != nil {
		return nil, casError("cas.put", err)
	}
	return protocol.CASPutResult{Stored: len(objs)}, nil
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
	return res, nil
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
	s := req.session
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.uploads == nil {
		s.uploads = map[string]*cas.Upload{}
	}
	up := s.uploads[p.Digest]
	if p.Offset == 0 && up != nil { // a restart from the beginning
		up.Abort()
		up = nil
	}
	if up == nil {
		if p.Offset != 0 {
			return nil, protocol.Errorf(protocol.CodeInvalidParams, map[string]string{"reason": "no_upload"}, "cas.put_chunk: no upload of %s in progress; start at offset 0", p.Digest)
		}
		up, err = st.NewUpload(d)
		if err != nil {
			return nil, casError("cas.put_chunk", err)
		}
		s.uploads[p.Digest] = up
	}
	if err := up.WriteChunk(p.Offset, data); err != nil {
		up.Abort()
		delete(s.uploads, p.Digest)
		return nil, casError("cas.put_chunk", err)
	}
	res := protocol.CASPutChunkResult{Offset: up.Offset()}
	if p.Final {
		delete(s.uploads, p.Digest)
		if err := up.Commit(); err != nil {
			return nil, casError("cas.put_chunk", err)
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
	return protocol.CASGetChunkResult{Data: cas.EncodeBase64(b), EOF: p.Offset+int64(len(b)) >= d.Size}, nil
}

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
	if rp.rel == "." {
		return nil, protocol.Errorf(protocol.CodeInvalidParams, nil, "cas.materialize: %s is an allowed root itself; name a directory inside it", rp.abs)
	}
	if dir := filepath.Dir(rp.rel); dir != "." {
		if err := rp.root.dir.MkdirAll(dir, 0o755); err != nil {
			return nil, s.roots.fsError("cas.materialize", rp, err)
		}
	}
	// Update leaves a destination that already holds the tree alone and
	// links the files it holds unchanged: a stat per file, a write per change.
	changed, err := st.Update(ctx, rp.root.dir, rp.rel, tree)
	if err != nil {
		if isEscape(err) {
			return nil, s.roots.forbidden(rp.abs, "a symbolic link leads outside the allowed roots")
		}
		return nil, casError("cas.materialize", err)
	}
	return protocol.CASMaterializeResult{Path: rp.abs, Unchanged: !changed}, nil
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
	root, problems, err := st.IngestIn(ctx, rp.root.dir, relOrDot(rp.rel))
	if err != nil {
		if isEscape(err) {
			return nil, s.roots.forbidden(rp.abs, "a symbolic link leads outside the allowed roots")
		}
		return nil, s.roots.fsError("cas.ingest", rp, err)
	}
	res := protocol.CASIngestResult{Path: rp.abs, Root: root.String()}
	for _, pr := range problems {
		res.Problems = append(res.Problems, protocol.CASProblem{Path: pr.Path, Error: pr.Err.Error()})
	}
	return res, nil
}
