package protocol

import (
	"encoding/base64"
	"fmt"
	"strings"
	"unicode/utf8"
)

// EncodeData chooses the wire form of b: utf8 when b is valid UTF-8 that
// JSON escaping does not make longer than base64, otherwise base64.
func EncodeData(b []byte) (data, encoding string) {
	if asText(b) {
		return string(b), EncodingUTF8
	}
	return base64.StdEncoding.EncodeToString(b), EncodingBase64
}

// DecodeData turns a payload back into bytes. An empty encoding means utf8.
// Base64 is decoded strictly: padding and alphabet must be exact.
func DecodeData(data, encoding string) ([]byte, error) {
	switch encoding {
	case "", EncodingUTF8:
		return []byte(data), nil
	case EncodingBase64:
		// The standard decoder skips line breaks; on the wire they are an error.
		if strings.ContainsAny(data, "\r\n") {
			return nil, fmt.Errorf("decode base64: line breaks are not allowed")
		}
		b, err := base64.StdEncoding.Strict().DecodeString(data)
		if err != nil {
			return nil, fmt.Errorf("decode base64: %w", err)
		}
		return b, nil
	default:
		return nil, fmt.Errorf("unknown encoding %q (want utf8 or base64)", encoding)
	}
}

// CompleteUTF8 returns the length of the longest prefix of b that does not
// end inside a multi-byte UTF-8 sequence. Chunkers send b[:n] and keep the
// rest (at most 3 bytes) for the next read, so no character is ever split
// between two events. Bytes that can never complete a sequence are not held.
func CompleteUTF8(b []byte) int {
	n := len(b)
	// Look back over at most 3 bytes for the start of a sequence.
	for i := 1; i <= 3 && i <= n; i++ {
		c := b[n-i]
		if c < 0x80 { // ASCII: nothing pending
			return n
		}
		if c >= 0xC0 { // a leading byte
			need := 0
			switch {
			case c >= 0xF8:
				return n // never valid; do not hold it
			case c >= 0xF0:
				need = 4
			case c >= 0xE0:
				need = 3
			default:
				need = 2
			}
			if i < need && !utf8.FullRune(b[n-i:]) {
				return n - i
			}
			return n
		}
		// continuation byte: keep looking back
	}
	return n
}
