//go:build !linux

package rexd

import (
	"errors"
	"io"
)

// splicer is Linux's (splice(2)); elsewhere output is read and written.
type splicer struct{}

func newSplicer(io.Reader) *splicer { return nil }

var errNoSplice = errors.New("splice is Linux only")

func (*splicer) fill() (int, error)        { return 0, errNoSplice }
func (*splicer) send(io.Writer, int) error { return errNoSplice }
func (*splicer) drop() error               { return nil }
func (*splicer) close()                    {}
