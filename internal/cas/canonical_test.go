package cas

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"math"
	"strings"
	"testing"
)

// canonicalVectors fix the encoding: value → exact bytes → SHA-256. The
// hashes were computed independently (Python hashlib over the same bytes);
// another implementation of rex objects must reproduce all three columns.
var canonicalVectors = []struct {
	name  string
	value any
	bytes string
	hash  string
}{
	{"null", nil, `null`, "74234e98afe7498fb5daf1f36ac2d78acc339464f950703b8c019892f982b90b"},
	{"true", true, `true`, "b5bea41b6c623f7c09f1bf24dcae58ebab3c0cdd90ad966bc43a45b44867e12b"},
	{"false", false, `false`, "fcbcf165908dd18a9e49f7ff27810176db8e9f63b4352213741664245224f8aa"},
	{"zero", int64(0), `0`, "5feceb66ffc86f38d952786c6d696c79c2dbc239dd4e91b46729d73a27fb57e9"},
	{"negative", int64(-42), `-42`, "fec80006df0542549b4cbaafb8987eee00bb49bca396eefe9ac8be5b5928e8f6"},
	{"maxint64", int64(math.MaxInt64), `9223372036854775807`, "b34a1c30a715f6bf8b7243afa7fab883ce3612b7231716bdcbbdc1982e1aed29"},
	{"minint64", int64(math.MinInt64), `-9223372036854775808`, "85386477f3af47e4a0b308ee3b3a688df16e8b2228105dd7d4dcd42a9807cb78"},
	{"empty string", "", `""`, "12ae32cb1ec02d01eda3581b127c1fee3b0dc53572ed6baf239721a03d82e126"},
	{"quote backslash", `a"b\c`, `"a\"b\\c"`, "29e409e74462be098277d1428e52e22cd782e73a9f50b4f4f26e6527ab583eca"},
	{"short escapes", "\b\f\n\r\t", `"\b\f\n\r\t"`, "88821412381596c0dc2c66e310ae7e66100d7e4196456e2e9f3d261d0b562746"},
	{"control chars", "\x00\x01\x1f", `"\u0000\u0001\u001f"`, "842096a6d3fcd0968fe35809ea5810d33f7072b93743fc0f7b4ff484ae727d20"},
	{"DEL raw", "\x7f", "\"\x7f\"", "6fe76740e12a93d5598fe685cb6ad3d3c94e44609065a56866b69647772026ec"},
	{"no html escaping", `</script>&'/`, `"</script>&'/"`, "ed7334ac156c75f3d0b80a5d4a6424517a5f90dae915e3d0b33c630a0f0f4a1a"},
	{"non-ascii raw", "é€😀", `"é€😀"`, "c99965c60975ed0c46a51eed45c4a8100adc6f8cb920916c9c7c18df9ef66274"},
	{"line separators raw", "\u2028\u2029", "\"\u2028\u2029\"", "e3a0e2262ac7790f4df36b522a8fbdd4ee3370d568eb15dc25c5f1775f14ed6c"},
	{"empty array", []any{}, `[]`, "4f53cda18c2baa0c0354bb5f9a3ecbe5ed12ab4d8e11ba873c2f11161202b945"},
	{"empty object", map[string]any{}, `{}`, "44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a"},
	{"sorted keys", map[string]any{"b": int64(1), "a": []any{true, nil}, "A": "x"}, `{"A":"x","a":[true,null],"b":1}`, "6705a9749e63e4f7e905c97c95475f36cc8afb3376ff5071626c73e6942d47ad"},
	{"utf8 byte order", map[string]any{"é": int64(1), "z": int64(2), "Z": int64(3), "€": int64(4)}, `{"Z":3,"z":2,"é":1,"€":4}`, "5d6279e7780aa944823948006e95cec50fbce7f2c5c9282674eadb406ce36479"},
	// UTF-16 order would put U+1F600 (D83D…) before U+FFFD; byte order does not.
	{"utf8 not utf16 order", map[string]any{"😀": int64(1), "\ufffd": int64(2)}, "{\"\ufffd\":2,\"😀\":1}", "9fbfff35f05fb9c72de19e392d0a1b848acb4d6c42489709d709982d10dd883c"},
	{"nested", map[string]any{"kind": "tree", "entries": []any{}}, `{"entries":[],"kind":"tree"}`, "e99e2daeea0e0f16c0f30cdc9e972496517dd0f600ea633080acaaed03bd4beb"},
}

func TestCanonicalVectors(t *testing.T) {
	for _, v := range canonicalVectors {
		t.Run(v.name, func(t *testing.T) {
			got, err := MarshalCanonical(v.value)
			if err != nil {
				t.Fatalf("MarshalCanonical: %v", err)
			}
			if string(got) != v.bytes {
				t.Fatalf("bytes = %q, want %q", got, v.bytes)
			}
			sum := sha256.Sum256(got)
			if h := hex.EncodeToString(sum[:]); h != v.hash {
				t.Fatalf("sha256 = %s, want %s", h, v.hash)
			}
			back, err := UnmarshalCanonical(got)
			if err != nil {
				t.Fatalf("UnmarshalCanonical: %v", err)
			}
			again, err := MarshalCanonical(back)
			if err != nil || !bytes.Equal(again, got) {
				t.Fatalf("round trip = %q, %v", again, err)
			}
		})
	}
}

func TestMarshalCanonicalRefuses(t *testing.T) {
	tests := []struct {
		name  string
		value any
	}{
		{"float", 1.5},
		{"integral float", float64(1e16)},
		{"NaN", math.NaN()},
		{"+Inf", math.Inf(1)},
		{"float32", float32(2)},
		{"nested float", map[string]any{"a": []any{int64(1), 0.5}}},
		{"invalid UTF-8 string", "a\xffb"},
		{"invalid UTF-8 key", map[string]any{"\xc3": int64(1)}},
		{"unsupported type", struct{}{}},
		{"uint64", uint64(1)},
		{"too deep", deepArray(MaxCanonicalDepth + 2)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if b, err := MarshalCanonical(tt.value); !errors.Is(err, ErrNotCanonical) {
				t.Fatalf("MarshalCanonical = %q, %v; want ErrNotCanonical", b, err)
			}
		})
	}
}

func deepArray(n int) any {
	var v any = []any{}
	for range n {
		v = []any{v}
	}
	return v
}

func TestUnmarshalCanonicalRefuses(t *testing.T) {
	tests := []struct{ name, in string }{
		{"empty", ``},
		{"float", `1.5`},
		{"integral float", `1.0`},
		{"exponent", `1e16`},
		{"exponent plus", `1e+16`},
		{"upper exponent", `1E5`},
		{"NaN", `NaN`},
		{"Infinity", `Infinity`},
		{"minus zero", `-0`},
		{"leading zero", `007`},
		{"plus sign", `+1`},
		{"lone minus", `-`},
		{"too big", `9223372036854775808`},
		{"leading space", ` 1`},
		{"trailing space", `1 `},
		{"space in object", `{"a": 1}`},
		{"newline", "[1,\n2]"},
		{"unsorted keys", `{"b":1,"a":2}`},
		{"duplicate keys", `{"a":1,"a":1}`},
		{"utf16 key order", "{\"😀\":1,\"\ufffd\":2}"},
		{"escaped slash", `"a\/b"`},
		{"unicode escape of letter", `"\u0041"`},
		{"uppercase hex escape", `"\u001F"`},
		{"long form of newline", `"\u000a"`},
		{"escaped DEL", `"\u007f"`},
		{"escaped non-ascii", `"\u00e9"`},
		{"surrogate escape", `"\ud83d\ude00"`},
		{"raw control char", "\"a\x01b\""},
		{"raw newline", "\"a\nb\""},
		{"invalid UTF-8", "\"a\xffb\""},
		{"unterminated string", `"abc`},
		{"bad escape", `"\q"`},
		{"trailing data", `1 2`},
		{"two values", `{}{}`},
		{"trailing comma", `[1,]`},
		{"missing colon", `{"a"1}`},
		{"non-string key", `{1:2}`},
		{"bad literal", `tru`},
		{"single quotes", `'a'`},
		{"too deep", strings.Repeat("[", MaxCanonicalDepth+2) + strings.Repeat("]", MaxCanonicalDepth+2)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if v, err := UnmarshalCanonical([]byte(tt.in)); !errors.Is(err, ErrNotCanonical) {
				t.Fatalf("UnmarshalCanonical(%q) = %v, %v; want ErrNotCanonical", tt.in, v, err)
			}
		})
	}
}

// FuzzUnmarshalCanonical: the decoder never panics, and anything it accepts
// is exactly the encoding of what it returns (one spelling per value).
func FuzzUnmarshalCanonical(f *testing.F) {
	for _, v := range canonicalVectors {
		f.Add([]byte(v.bytes))
	}
	for _, s := range []string{`{"a":1.5}`, `[1,2,[3,{"x":null}]]`, `"\u00"`, `-`, `{"a":{"b":{}}}`, "\"\x7f\""} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		v, err := UnmarshalCanonical(data)
		if err != nil {
			return
		}
		again, err := MarshalCanonical(v)
		if err != nil {
			t.Fatalf("accepted %q but cannot re-encode: %v", data, err)
		}
		if !bytes.Equal(again, data) {
			t.Fatalf("accepted %q, which re-encodes as %q", data, again)
		}
	})
}
