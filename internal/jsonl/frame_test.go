package jsonl

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// frameSuffixLen is the length of `,"crc":"XXXXXXXX"}`. It is part of the
// on-disk format, so the tests pin it rather than reading the package's
// constant.
const frameSuffixLen = 18

// readLines returns the newline-terminated lines of a testdata file, each
// without its newline.
func readLines(t testing.TB, name string) [][]byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	require.NoError(t, err)
	require.True(t, bytes.HasSuffix(b, []byte("\n")), "%s must end in a newline", name)
	return bytes.Split(b[:len(b)-1], []byte("\n"))
}

// sealLine seals obj and returns the framed line without its newline.
func sealLine(t testing.TB, obj string) []byte {
	t.Helper()
	out := Seal(nil, []byte(obj))
	require.True(t, bytes.HasSuffix(out, []byte("\n")))
	return out[:len(out)-1]
}

func TestChecksumIsCRC32C(t *testing.T) {
	// Check values of CRC-32C from RFC 3720 (iSCSI) appendix B.4 and the
	// common "123456789" check string; they pin the polynomial, the
	// reflection and the final XOR.
	tests := []struct {
		in   []byte
		want uint32
	}{
		{[]byte(""), 0x00000000},
		{[]byte("123456789"), 0xe3069283},
		{make([]byte, 32), 0x8a9136aa},
		{bytes.Repeat([]byte{0xff}, 32), 0x62a8ab43},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%q", tt.in), func(t *testing.T) {
			assert.Equal(t, tt.want, Checksum(tt.in))
		})
	}
}

func TestSuffixLenIsTheFormat(t *testing.T) {
	assert.Equal(t, frameSuffixLen, SuffixLen)
	assert.Len(t, `,"crc":"00000000"}`, SuffixLen)
}

// TestSealGolden compares Seal with lines sealed by an independent CRC-32C
// implementation (testdata/objects.jsonl -> testdata/sealed.jsonl). The frame
// is an on-disk format: this test failing means old files became unreadable.
func TestSealGolden(t *testing.T) {
	objs := readLines(t, "objects.jsonl")
	sealed := readLines(t, "sealed.jsonl")
	require.Len(t, sealed, len(objs))
	for i, obj := range objs {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			got := Seal(nil, obj)
			assert.Equal(t, string(sealed[i])+"\n", string(got))
			assert.NoError(t, Verify(sealed[i]))
		})
	}
}

func TestSealFormat(t *testing.T) {
	objs := []string{
		`{"a":1}`,
		`{"id":"x","kind":"message","parent":null,"n":[1,2,{"z":"}"}]}`,
		`{"s":"with \"escaped\" quotes and a } brace"}`,
		`{"":""}`,
	}
	for _, obj := range objs {
		t.Run(obj, func(t *testing.T) {
			out := Seal(nil, []byte(obj))
			require.True(t, bytes.HasSuffix(out, []byte("\"}\n")), "%q", out)
			line := out[:len(out)-1]
			assert.Len(t, line, len(obj)-1+frameSuffixLen)
			assert.Equal(t, 1, bytes.Count(out, []byte("\n")), "exactly one newline, at the end")

			// The covered part is the object without its closing brace.
			body := []byte(obj[:len(obj)-1])
			assert.Equal(t, body, line[:len(body)])
			want := fmt.Sprintf(`,"crc":"%08x"}`, Checksum(body))
			assert.Equal(t, want, string(line[len(body):]))

			// The line stays valid JSON and keeps every original member.
			require.True(t, json.Valid(line), "%s", line)
			var orig, framed map[string]json.RawMessage
			require.NoError(t, json.Unmarshal([]byte(obj), &orig))
			require.NoError(t, json.Unmarshal(line, &framed))
			crc, ok := framed["crc"]
			require.True(t, ok)
			assert.Equal(t, fmt.Sprintf(`"%08x"`, Checksum(body)), string(crc))
			delete(framed, "crc")
			assert.Equal(t, orig, framed)

			assert.NoError(t, Verify(line))
		})
	}
}

func TestSealAppendsToDst(t *testing.T) {
	first := Seal(nil, []byte(`{"a":1}`))
	dst := append([]byte(nil), first...)
	out := Seal(dst, []byte(`{"b":2}`))
	require.True(t, bytes.HasPrefix(out, first), "dst is kept as a prefix")
	second := out[len(first):]
	assert.Equal(t, string(Seal(nil, []byte(`{"b":2}`))), string(second))

	// Two sealed lines in one buffer each verify on their own.
	lines := bytes.Split(bytes.TrimSuffix(out, []byte("\n")), []byte("\n"))
	require.Len(t, lines, 2)
	for _, l := range lines {
		assert.NoError(t, Verify(l))
	}
}

// TestVerifyDetectsEverySingleByteChange is the central property of the
// frame: replacing any one byte of a sealed line by any other value makes
// Verify fail. It tries every position of several lines with all 255 other
// byte values and requires a 100% detection rate.
func TestVerifyDetectsEverySingleByteChange(t *testing.T) {
	objs := readLines(t, "objects.jsonl")
	objs = append(objs,
		[]byte(`{"x":"`+strings.Repeat("y", 300)+`"}`),
		[]byte(`{"k":0}`),
	)
	total, detected := 0, 0
	var missed []string
	for _, obj := range objs {
		line := sealLine(t, string(obj))
		require.NoError(t, Verify(line))
		mutated := make([]byte, len(line))
		for pos := range line {
			for v := 0; v < 256; v++ {
				if byte(v) == line[pos] {
					continue
				}
				copy(mutated, line)
				mutated[pos] = byte(v)
				total++
				err := Verify(mutated)
				if err != nil {
					detected++
					if !assert.True(t, err == ErrFrame || err == ErrChecksum, "unexpected error %v", err) {
						return
					}
					continue
				}
				if len(missed) < 10 {
					missed = append(missed, fmt.Sprintf("%q: byte %d -> %#x", line, pos, v))
				}
			}
		}
	}
	t.Logf("single-byte changes detected: %d/%d", detected, total)
	require.Greater(t, total, 50_000, "the loop covered too little")
	assert.Equal(t, total, detected, "undetected changes: %v", missed)
}

// A changed newline merges two lines; the merged line must not verify.
func TestVerifyMergedLinesFail(t *testing.T) {
	a := sealLine(t, `{"id":"1","text":"first"}`)
	b := sealLine(t, `{"id":"2","text":"second"}`)
	for v := 0; v < 256; v++ {
		if v == '\n' {
			continue
		}
		merged := append(append(append([]byte(nil), a...), byte(v)), b...)
		assert.Error(t, Verify(merged), "newline replaced by %#x", v)
	}
	// Two lines glued without anything between them fail too.
	assert.Error(t, Verify(append(append([]byte(nil), a...), b...)))
}

// Every strict prefix of a sealed line (a torn write) fails to verify.
func TestVerifyTornLine(t *testing.T) {
	for _, obj := range readLines(t, "objects.jsonl") {
		line := sealLine(t, string(obj))
		for n := 0; n < len(line); n++ {
			assert.Error(t, Verify(line[:n]), "prefix of %d bytes of %q", n, line)
		}
	}
}

func TestVerifyRejectsUppercaseHex(t *testing.T) {
	// Find an object whose checksum has a hex letter, so upper-casing
	// changes the line.
	var line []byte
	for i := 0; i < 100 && line == nil; i++ {
		l := sealLine(t, fmt.Sprintf(`{"i":%d}`, i))
		if bytes.ContainsAny(l[len(l)-10:len(l)-2], "abcdef") {
			line = l
		}
	}
	require.NotNil(t, line, "no checksum with a hex letter found")
	require.NoError(t, Verify(line))

	hex := len(line) - 10
	upper := append([]byte(nil), line...)
	copy(upper[hex:], bytes.ToUpper(line[hex:hex+8]))
	require.NotEqual(t, line, upper)
	assert.ErrorIs(t, Verify(upper), ErrFrame)

	// Each single letter upper-cased on its own fails as well.
	for i := hex; i < hex+8; i++ {
		if line[i] < 'a' || line[i] > 'f' {
			continue
		}
		one := append([]byte(nil), line...)
		one[i] -= 'a' - 'A'
		assert.ErrorIs(t, Verify(one), ErrFrame, "upper-cased hex digit at %d", i)
	}
}

func TestVerifyRejectsShortLines(t *testing.T) {
	// The shortest line Verify can accept is '{', one byte of body and the
	// 18-byte suffix. Every shorter input is ErrFrame, even one whose
	// checksum would match.
	for n := 0; n < frameSuffixLen+2; n++ {
		for _, fill := range []byte{'{', 'a', ' '} {
			b := bytes.Repeat([]byte{fill}, n)
			assert.ErrorIs(t, Verify(b), ErrFrame, "%q", b)
		}
	}
	// `{` + suffix with the right checksum of "{" is 19 bytes: what Seal
	// would make of the forbidden empty object. It is not a frame.
	emptyObj := fmt.Sprintf(`{,"crc":"%08x"}`, Checksum([]byte("{")))
	require.Len(t, emptyObj, frameSuffixLen+1)
	assert.ErrorIs(t, Verify([]byte(emptyObj)), ErrFrame)

	// 20 bytes with the right checksum is long enough for the frame.
	min := fmt.Sprintf(`{x,"crc":"%08x"}`, Checksum([]byte("{x")))
	require.Len(t, min, frameSuffixLen+2)
	assert.NoError(t, Verify([]byte(min)))
}

func TestVerifyErrors(t *testing.T) {
	good := sealLine(t, `{"a":1}`)
	sum := string(good[len(good)-10 : len(good)-2])
	body := `{"a":1`
	wrongSum := fmt.Sprintf("%08x", Checksum([]byte(body))^1)
	tests := []struct {
		name string
		line string
		want error
	}{
		{"good", string(good), nil},
		{"empty", "", ErrFrame},
		{"trailing newline", string(good) + "\n", ErrFrame},
		{"trailing space", string(good) + " ", ErrFrame},
		{"leading space", " " + string(good), ErrFrame},
		{"not an object", `["a",1,"crc":"` + sum + `"}`, ErrFrame},
		{"no suffix", `{"a":1,"b":"0123456789abcdef"}`, ErrFrame},
		{"other key", body + `,"crx":"` + sum + `"}`, ErrFrame},
		{"key with space", body + `, "crc":"` + sum + `"}`, ErrFrame},
		{"missing closing brace", body + `,"crc":"` + sum + `"`, ErrFrame},
		{"closing bracket", body + `,"crc":"` + sum + `"]`, ErrFrame},
		{"missing closing quote", body + `,"crc":"` + sum + `}}`, ErrFrame},
		{"seven digits", body + `,"crc":"` + sum[:7] + `"}`, ErrFrame},
		{"nine digits", body + `,"crc":"` + sum + `0"}`, ErrFrame},
		{"non-hex digit", body + `,"crc":"` + sum[:7] + `g"}`, ErrFrame},
		{"0x prefix", body + `,"crc":"0x` + sum[:6] + `"}`, ErrFrame},
		{"wrong checksum", body + `,"crc":"` + wrongSum + `"}`, ErrChecksum},
		{"body changed", `{"a":2,"crc":"` + sum + `"}`, ErrChecksum},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := Verify([]byte(tt.line))
			if tt.want == nil {
				assert.NoError(t, err)
				return
			}
			assert.ErrorIs(t, err, tt.want)
		})
	}
}

func TestSealTailMatchesSeal(t *testing.T) {
	for _, obj := range []string{`{"a":1}`, `{"id":"x","record":{"k":[1,2,3]}}`} {
		prefix := []byte("earlier line\n")
		want := Seal(bytes.Clone(prefix), []byte(obj))
		buf := append(bytes.Clone(prefix), obj...)
		got := SealTail(buf, len(prefix))
		assert.Equal(t, string(want), string(got))
		assert.NoError(t, Verify(got[len(prefix):len(got)-1]))
	}
}
