package seal

import (
	"bytes"
	"errors"
	"flag"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sessionstore/sessionstore/internal/corrupt"
	"github.com/sessionstore/sessionstore/internal/durable"
	"github.com/sessionstore/sessionstore/internal/vfs"
)

var update = flag.Bool("update", false, "rewrite the golden files")

var goldenSession = uuid.MustParse("01a02f3f-a89d-7d25-b4ac-ac89a183258d")

func goldenRecord() Record {
	return Record{Session: goldenSession, Keys: []WrappedKey{
		{Gen: 1, KeyID: "local:2026-01", Wrapped: bytes.Repeat([]byte{0xa1}, 60)},
		{Gen: 2, KeyID: "arn:aws:kms:eu-west-1:111122223333:key/1234abcd-12ab-34cd-56ef-1234567890ab", Wrapped: bytes.Repeat([]byte{0x5c}, 184)},
	}}
}

// TestRecordGolden: the file form of a record is exactly
// testdata/key.json (go test -update rewrites it), and decodes back.
func TestRecordGolden(t *testing.T) {
	got, err := EncodeRecord(goldenRecord())
	require.NoError(t, err)
	path := filepath.Join("testdata", "key.json")
	if *update {
		require.NoError(t, os.WriteFile(path, got, 0o644))
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, string(want), string(got))
	r, err := DecodeRecord(path, goldenSession, want)
	require.NoError(t, err)
	assert.Equal(t, goldenRecord(), r)
	assert.Equal(t, uint32(2), r.Current().Gen)
	k, ok := r.Key(1)
	require.True(t, ok)
	assert.Equal(t, "local:2026-01", k.KeyID)
	_, ok = r.Key(3)
	assert.False(t, ok)
}

// TestRecordDamage: every changed byte of a record, a truncation, and a
// record of another session are damage, reported with the path.
func TestRecordDamage(t *testing.T) {
	good, err := EncodeRecord(goldenRecord())
	require.NoError(t, err)
	check := func(what string, b []byte, session uuid.UUID) {
		t.Helper()
		_, err := DecodeRecord("dir/key.json", session, b)
		var ce *corrupt.Error
		require.ErrorAs(t, err, &ce, what)
		assert.Equal(t, "dir/key.json", ce.Path, what)
	}
	for i := range good {
		for _, mask := range []byte{0x01, 0x20, 0x80} {
			b := bytes.Clone(good)
			b[i] ^= mask
			check("byte flipped", b, goldenSession)
		}
	}
	for n := range len(good) {
		check("truncated", good[:n], goldenSession)
	}
	check("another session", good, uuid.New())
	check("spaced", []byte(strings.Replace(string(good), `,"algorithm"`, `, "algorithm"`, 1)), goldenSession)
	check("too long", append(bytes.Repeat([]byte(" "), MaxRecordSize), good...), goldenSession)
	check("two lines", append(bytes.Clone(good), good...), goldenSession)
}

func TestRecordCheck(t *testing.T) {
	k := func(gen uint32, id string, n int) WrappedKey {
		return WrappedKey{Gen: gen, KeyID: id, Wrapped: make([]byte, n)}
	}
	for name, keys := range map[string][]WrappedKey{
		"no keys":             nil,
		"generation 0":        {k(0, "a", 1)},
		"generations fall":    {k(2, "a", 1), k(1, "a", 1)},
		"generations repeat":  {k(1, "a", 1), k(1, "a", 1)},
		"empty key id":        {k(1, "", 1)},
		"key id with a space": {k(1, "a b", 1)},
		"key id with a quote": {k(1, `a"b`, 1)},
		"key id with <":       {k(1, "a<b", 1)},
		"key id too long":     {k(1, strings.Repeat("a", MaxKeyIDLen+1), 1)},
		"nothing wrapped":     {k(1, "a", 0)},
		"wrapped too long":    {k(1, "a", MaxWrappedLen+1)},
		"too many keys":       {k(1, "a", 1), k(2, "a", 1), k(3, "a", 1), k(4, "a", 1), k(5, "a", 1), k(6, "a", 1), k(7, "a", 1), k(8, "a", 1), k(9, "a", 1)},
	} {
		_, err := EncodeRecord(Record{Session: goldenSession, Keys: keys})
		assert.Error(t, err, name)
	}
	big := Record{Session: goldenSession}
	for g := range uint32(MaxKeys) {
		big.Keys = append(big.Keys, k(g+1, strings.Repeat("k", MaxKeyIDLen), MaxWrappedLen))
	}
	b, err := EncodeRecord(big)
	require.NoError(t, err, "the largest record")
	assert.LessOrEqual(t, len(b), MaxRecordSize, "fits the read limit")
}

// TestWriteRecordDurable: a record WriteRecord returned for survives a
// crash; a crash during a replace leaves the old or the new record.
func TestWriteRecordDurable(t *testing.T) {
	m := vfs.NewMemFS()
	require.NoError(t, durable.MkdirAll(m, "/s", 0o700))
	r1 := goldenRecord()
	r1.Keys = r1.Keys[:1]
	require.NoError(t, WriteRecord(m, "/s", "key.json", r1, 0o600))
	got, err := ReadRecord(m.CrashClone(vfs.KeepSynced, 0), "/s/key.json", goldenSession)
	require.NoError(t, err)
	assert.Equal(t, r1, got)

	r2 := goldenRecord()
	for k := 1; ; k++ {
		c := m.CrashClone(vfs.KeepSynced, 0)
		n := 0
		c.SetFault(func(op vfs.Op, _ string) error {
			if vfs.Mutating(op) {
				if n++; n == k {
					return vfs.ErrPowerLoss
				}
			}
			return nil
		})
		err := WriteRecord(c, "/s", "key.json", r2, 0o600)
		c.SetFault(nil)
		cut := c.PowerCut() != nil
		after := c.CrashClone(vfs.KeepSynced, uint64(k))
		got, rerr := ReadRecord(after, "/s/key.json", goldenSession)
		require.NoError(t, rerr, "crash point %d", k)
		if !cut {
			require.NoError(t, err)
			assert.Equal(t, r2, got, "once WriteRecord returned")
			break
		}
		assert.True(t, got.Current().Gen == 1 || got.Current().Gen == 2, "crash point %d: old or new", k)
	}
	_, err = ReadRecord(m, "/s/absent.json", goldenSession)
	assert.ErrorIs(t, err, fs.ErrNotExist)
}

// FuzzDecodeRecord: no input panics or reads past MaxRecordSize; what
// decodes is exactly the encoding of what it decodes to.
func FuzzDecodeRecord(f *testing.F) {
	good, err := EncodeRecord(goldenRecord())
	require.NoError(f, err)
	f.Add(good)
	f.Add([]byte(`{"format":1}` + "\n"))
	f.Add([]byte("{}\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := DecodeRecord("key.json", goldenSession, b)
		if err != nil {
			var ce *corrupt.Error
			if !errors.As(err, &ce) {
				t.Fatalf("an error that is not damage: %v", err)
			}
			return
		}
		again, err := EncodeRecord(r)
		if err != nil || !bytes.Equal(again, b) {
			t.Fatalf("decoded %q to %+v, which encodes to %q (%v)", b, r, again, err)
		}
	})
}
