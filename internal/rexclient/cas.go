package rexclient

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/rexconsole/rex/internal/cas"
	"github.com/rexconsole/rex/internal/protocol"
)

// CASRemote is the store of the rexd behind a session, as a cas.Remote:
// Push and Fetch run over the cas.* methods. ForTxn gives the cas.Sink of
// an update waiting for blobs.
type CASRemote struct {
	s   *Session
	txn string
}

// ForTxn returns a sink whose Put and PutStream feed the update txn (see
// Materialize) rather than the store.
func (r *CASRemote) ForTxn(txn string) *CASRemote { return &CASRemote{s: r.s, txn: txn} }

// CAS returns the session's rexd store.
func (s *Session) CAS() *CASRemote { return &CASRemote{s: s} }

// HasCAS reports whether the rexd announced the cas capability.
func (s *Session) HasCAS() bool { return s.has(protocol.CapCAS) }

// has reports whether the rexd announced capability c.
func (s *Session) has(c string) bool { return slices.Contains(s.Info.Capabilities, c) }

var _ cas.Remote = (*CASRemote)(nil)

func digestStrings(ds []cas.Digest) []string {
	out := make([]string, len(ds))
	for i, d := range ds {
		out[i] = d.String()
	}
	return out
}

// Has implements cas.Remote.
func (r *CASRemote) Has(ctx context.Context, digests []cas.Digest) ([]cas.Digest, error) {
	var res protocol.CASHasResult
	if err := r.s.c.Call(ctx, protocol.MethodCASHas, protocol.CASDigests{SessionID: r.s.ID, Digests: digestStrings(digests)}, &res); err != nil {
		return nil, err
	}
	out := make([]cas.Digest, 0, len(res.Missing))
	for _, m := range res.Missing {
		d, err := cas.ParseDigest(m)
		if err != nil {
			return nil, fmt.Errorf("cas.has: rexd answered an invalid digest %q", m)
		}
		out = append(out, d)
	}
	return out, nil
}

// Put implements cas.Remote.
func (r *CASRemote) Put(ctx context.Context, objects []cas.Object) error {
	p := &protocol.CASPutRequest{SessionID: r.s.ID, Txn: r.txn, Digests: make([]string, len(objects)), Data: make([][]byte, len(objects))}
	for i, o := range objects {
		p.Digests[i], p.Data[i] = o.Digest.String(), o.Data
	}
	if r.s.has(protocol.CapCASRaw) {
		return r.s.c.Call(ctx, protocol.MethodCASPut, rawCASPut{p}, nil)
	}
	return r.s.c.Call(ctx, protocol.MethodCASPut, p, nil)
}

// rawCASPut writes a cas.put as a raw frame: its line, then the objects'
// bytes as they are, with no base64 to make and undo.
type rawCASPut struct{ *protocol.CASPutRequest }

func (r rawCASPut) AppendFrame(dst []byte, id int64) ([]byte, [][]byte) {
	return r.AppendRawLine(dst, id), r.Data
}

// Get implements cas.Remote.
func (r *CASRemote) Get(ctx context.Context, digests []cas.Digest) ([]cas.Object, error) {
	var res protocol.CASGetResult
	if err := r.s.c.Call(ctx, protocol.MethodCASGet, protocol.CASDigests{SessionID: r.s.ID, Digests: digestStrings(digests)}, &res); err != nil {
		return nil, err
	}
	out := make([]cas.Object, len(res.Objects))
	for i, o := range res.Objects {
		d, err := cas.ParseDigest(o.Digest)
		if err != nil {
			return nil, fmt.Errorf("cas.get: rexd answered an invalid digest %q", o.Digest)
		}
		data, err := cas.DecodeBase64(o.Data)
		if err != nil {
			return nil, fmt.Errorf("cas.get: %s: %w", o.Digest, err)
		}
		out[i] = cas.Object{Digest: d, Data: data}
	}
	return out, nil
}

// PutStream implements cas.Remote with cas.put_chunk calls.
func (r *CASRemote) PutStream(ctx context.Context, d cas.Digest, rd io.Reader) error {
	buf := make([]byte, cas.MaxChunkSize)
	var off int64
	for {
		n, err := io.ReadFull(rd, buf)
		if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
			return fmt.Errorf("read %s: %w", d, err)
		}
		final := off+int64(n) >= d.Size || n < len(buf)
		var res protocol.CASPutChunkResult
		if cerr := r.s.c.Call(ctx, protocol.MethodCASPutChunk, protocol.CASPutChunkParams{
			SessionID: r.s.ID, Txn: r.txn, Digest: d.String(), Offset: off, Data: cas.EncodeBase64(buf[:n]), Final: final,
		}, &res); cerr != nil {
			return cerr
		}
		off += int64(n)
		if final {
			if !res.Committed {
				return fmt.Errorf("cas.put_chunk: rexd did not commit %s", d)
			}
			return nil
		}
	}
}

// GetStream implements cas.Remote with cas.get_chunk calls.
func (r *CASRemote) GetStream(ctx context.Context, d cas.Digest, w io.Writer) error {
	var off int64
	for {
		var res protocol.CASGetChunkResult
		if err := r.s.c.Call(ctx, protocol.MethodCASGetChunk, protocol.CASGetChunkParams{
			SessionID: r.s.ID, Digest: d.String(), Offset: off, Length: cas.MaxChunkSize,
		}, &res); err != nil {
			return err
		}
		b, err := cas.DecodeBase64(res.Data)
		if err != nil {
			return fmt.Errorf("cas.get_chunk %s: %w", d, err)
		}
		if _, err := w.Write(b); err != nil {
			return err
		}
		off += int64(len(b))
		if res.EOF || len(b) == 0 {
			if off != d.Size {
				return fmt.Errorf("cas.get_chunk %s: got %d bytes, want %d", d, off, d.Size)
			}
			return nil
		}
	}
}

// Materialize starts writing tree into path on the target
// (cas.materialize); p's session, tree and path are filled in. When the
// result has a Txn, send the blobs it needs through ForTxn, then Commit.
func (r *CASRemote) Materialize(ctx context.Context, tree cas.Digest, path string, p protocol.CASMaterializeParams) (protocol.CASMaterializeResult, error) {
	p.SessionID, p.Tree, p.Path = r.s.ID, tree.String(), path
	var res protocol.CASMaterializeResult
	// A caller that gives up before the reply never learns the txn a
	// late reply names: it is aborted then, or its temporary files would
	// stay on the target as long as the session.
	err := r.s.c.call(ctx, protocol.MethodCASMaterialize, p, &res, nil, func(raw json.RawMessage) {
		var late protocol.CASMaterializeResult
		if json.Unmarshal(raw, &late) == nil && late.Txn != "" {
			r.s.c.stopAbandoned(protocol.MethodCASAbort, protocol.CASTxnParams{SessionID: r.s.ID, Txn: late.Txn})
		}
	})
	return res, err
}

// Needed lists the blobs the update txn still lacks (a page of them) and
// how many in all.
func (r *CASRemote) Needed(ctx context.Context, txn string) ([]cas.Digest, int, error) {
	var res protocol.CASNeededResult
	if err := r.s.c.Call(ctx, protocol.MethodCASNeeded, protocol.CASTxnParams{SessionID: r.s.ID, Txn: txn}, &res); err != nil {
		return nil, 0, err
	}
	ds, err := ParseDigests(res.Needed)
	return ds, res.Total, err
}

// Commit finishes the update txn.
func (r *CASRemote) Commit(ctx context.Context, txn string) (protocol.CASMaterializeResult, error) {
	var res protocol.CASMaterializeResult
	err := r.s.c.Call(ctx, protocol.MethodCASCommit, protocol.CASTxnParams{SessionID: r.s.ID, Txn: txn}, &res)
	return res, err
}

// Abort gives the update txn up; the target removes what it wrote of it.
func (r *CASRemote) Abort(ctx context.Context, txn string) error {
	return r.s.c.Call(ctx, protocol.MethodCASAbort, protocol.CASTxnParams{SessionID: r.s.ID, Txn: txn}, nil)
}

// ParseDigests reads digests a rexd sent.
func ParseDigests(in []string) ([]cas.Digest, error) {
	out := make([]cas.Digest, len(in))
	for i, s := range in {
		d, err := cas.ParseDigest(s)
		if err != nil {
			return nil, fmt.Errorf("rexd answered an invalid digest %q", s)
		}
		out[i] = d
	}
	return out, nil
}

// Ingest takes the target's directory path into its store (cas.ingest).
func (r *CASRemote) Ingest(ctx context.Context, path string) (cas.Digest, string, []protocol.CASProblem, error) {
	var res protocol.CASIngestResult
	if err := r.s.c.Call(ctx, protocol.MethodCASIngest, protocol.CASIngestParams{SessionID: r.s.ID, Path: path}, &res); err != nil {
		return cas.Digest{}, "", nil, err
	}
	d, err := cas.ParseDigest(res.Root)
	if err != nil {
		return cas.Digest{}, "", nil, fmt.Errorf("cas.ingest: rexd answered an invalid digest %q", res.Root)
	}
	return d, res.Path, res.Problems, nil
}
