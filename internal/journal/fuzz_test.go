package journal

import (
	"bytes"
	"testing"
)

// FuzzDecodeFrame decodes any bytes as a frame: it never panics, and a
// frame it accepts is the canonical encoding of what it decoded.
func FuzzDecodeFrame(f *testing.F) {
	const salt = 0x5eed
	for _, r := range []Record{
		{Op: OpWrite, Path: "sessions/a/chunk-000001.jsonl", Offset: 4096, Data: []byte(`{"id":"x"}` + "\n")},
		{Op: OpForget, Path: "sessions/a/"},
		{Op: OpWrite, Path: "x"},
	} {
		b := appendFrame(nil, salt, &r)
		sealFrame(b, salt, 5, 4, 2)
		f.Add(b)
		f.Add(b[:len(b)/2])
	}
	f.Add(make([]byte, 64))
	f.Fuzz(func(t *testing.T, b []byte) {
		fr, err := decodeFrame(b, salt)
		if err != nil {
			return
		}
		again := appendFrame(nil, salt, &fr.rec)
		sealFrame(again, salt, fr.lsn, fr.first, fr.count)
		if !bytes.Equal(again, b[:fr.size]) {
			t.Fatalf("decoded %+v from %x, which encodes as %x", fr, b[:fr.size], again)
		}
	})
}

// FuzzRead damages a small journal (bytes written over it at an offset)
// and reads it: Read never panics, and when it returns a log, every
// record in it is one that was committed, with its content.
func FuzzRead(f *testing.F) {
	b, name, h, _ := smallJournal(f)
	orig, err := parse(name, b)
	if err != nil {
		f.Fatal(err)
	}
	for _, e := range orig.Entries {
		f.Add(uint16(e.At), []byte{0})
		f.Add(uint16(e.At+frameHeader), []byte("garbage"))
	}
	f.Add(uint16(0), []byte{1})
	f.Add(uint16(slotSize+40), []byte{0xff, 0xff})
	f.Add(uint16(recordsStart), make([]byte, 512))
	f.Fuzz(func(t *testing.T, at uint16, patch []byte) {
		d := bytes.Clone(b)
		copy(d[min(int(at), len(d)):], patch)
		log, err := parse(name, d)
		if err != nil {
			return
		}
		for _, e := range log.Entries {
			r, ok := h[e.LSN]
			if !ok || r.Path != e.Path || r.Offset != e.Offset || !bytes.Equal(r.Data, e.Data) {
				t.Fatalf("lsn %d: read %s@%d, committed %s@%d", e.LSN, e.Path, e.Offset, r.Path, r.Offset)
			}
		}
	})
}
