package recovery

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"

	"github.com/sessionstore/sessionstore/internal/chunk"
	"github.com/sessionstore/sessionstore/internal/eventline"
	"github.com/sessionstore/sessionstore/internal/layout"
	"github.com/sessionstore/sessionstore/internal/seam"
	"github.com/sessionstore/sessionstore/internal/vfs"
	"github.com/sessionstore/sessionstore/internal/zchunk"
)

// IndexTail bounds how much of the end of index.jsonl Tip reads to find
// its last line, and FreeSpace how much free space after the newest
// record it reads to check that it is all zeros.
const (
	IndexTail = 4 << 10
	FreeSpace = seam.PreallocMax + 64<<10
)

// Tip returns the entry of the last line of a session's index.jsonl when
// the session's log needs no repair, so that the session can be opened
// without its index: every chunk from 0 on there once, as a plain or a
// sealed file, with no temporary file of a sealing; the newest one plain
// and holding the record that line locates (its header and payload as the
// line says), and only zero bytes, at most FreeSpace of them, after it;
// or the newest one sealed and index.jsonl empty (SealedTip). With
// follow, records may come after the line's (a writer's appends, or index
// lines a crash lost), and it returns the newest of them: the rest of the
// chunk is walked as Analyze walks it, a torn tail (or a hole and
// everything after it) ends the records, and an invalid record followed
// by a valid one makes it report false. It reports false otherwise, also
// when reading a file failed; Analyze then finds what the files hold. It
// writes nothing, and what it does not check (the index lines before the
// last one, the embedded indexes of sealed chunks) is left to the first
// Analyze.
func Tip(fsys vfs.FS, dir string, follow bool) (eventline.Entry, bool) {
	chunkDir := filepath.Join(dir, layout.ChunksDir)
	forms, temps, err := chunk.Forms(fsys, chunkDir)
	if err != nil || len(temps) > 0 || len(forms) == 0 {
		return eventline.Entry{}, false
	}
	newest := uint32(len(forms) - 1)
	for n := range newest + 1 {
		f, ok := forms[n]
		if !ok || f.Plain == f.Sealed {
			return eventline.Entry{}, false
		}
	}
	if forms[newest].Sealed {
		return SealedTip(fsys, dir, newest)
	}
	last, ok := lastIndexLine(fsys, filepath.Join(dir, layout.IndexFile))
	if !ok || last.Loc.Chunk != newest {
		return eventline.Entry{}, false
	}
	r := chunk.NewReader(fsys, chunkDir)
	defer r.Close()
	h, p, err := r.Read(last.Loc)
	if err != nil || h != last.Header || p.Size != last.Size || p.Blob != last.Blob || p.Digest != last.Digest {
		return eventline.Entry{}, false
	}
	if freeAfter(r, last.Loc) {
		return last, true
	}
	if !follow {
		return eventline.Entry{}, false
	}
	return followTail(fsys, r, last)
}

// SealedTip returns the entry of the last record of sealed chunk newest,
// the newest chunk: the state a Close that sealed the active chunk
// leaves. index.jsonl must then be empty, as that Close leaves it (every
// chunk embeds its index lines); it reports false otherwise, and when
// reading failed. A sealed chunk is never written again, so no record
// follows the one it returns.
func SealedTip(fsys vfs.FS, dir string, newest uint32) (eventline.Entry, bool) {
	if info, err := fsys.Stat(filepath.Join(dir, layout.IndexFile)); err != nil || info.Size() != 0 {
		return eventline.Entry{}, false
	}
	r := chunk.NewReader(fsys, filepath.Join(dir, layout.ChunksDir))
	defer r.Close()
	f, err := r.File(newest)
	if err != nil {
		return eventline.Entry{}, false
	}
	z, ok := f.(*zchunk.Reader)
	if !ok || z.Size() == 0 {
		return eventline.Entry{}, false
	}
	// Every block of a sealed chunk starts at a line's start and ends with
	// a newline: the last line starts in the last block.
	start, end := z.Block(z.Size() - 1)
	if err := r.Fill(newest, start, end-start); err != nil || int64(len(r.Window())) != end-start {
		return eventline.Entry{}, false
	}
	win := r.Window()
	body := win[:len(win)-1]
	i := bytes.LastIndexByte(body, '\n') + 1
	loc := eventline.Location{Chunk: newest, Offset: start + int64(i), Length: uint32(len(win) - i)}
	h, p, err := r.Read(loc)
	if err != nil {
		return eventline.Entry{}, false
	}
	return eventline.NewEntry(h, p, loc), true
}

// followTail returns the newest record of the newest chunk from last on
// (see Tip).
func followTail(fsys vfs.FS, r *chunk.Reader, last eventline.Entry) (eventline.Entry, bool) {
	f, err := r.File(last.Loc.Chunk)
	if err != nil {
		return eventline.Entry{}, false
	}
	info, err := fsys.Stat(r.Path(last.Loc.Chunk))
	if err != nil {
		return eventline.Entry{}, false
	}
	tip := last
	_, err = chunk.Walk(f, last.Loc.Chunk, last.Loc.End(), info.Size(), true,
		func(hd eventline.Header, pl eventline.Payload, loc eventline.Location) error {
			tip = eventline.NewEntry(hd, pl, loc)
			return nil
		},
		func(int64, int64, error) error { return errTailGap })
	if err != nil {
		return eventline.Entry{}, false
	}
	return tip, true
}

// errTailGap stops followTail at an invalid record followed by a valid one.
var errTailGap = errors.New("an invalid record before a valid one")

// freeAfter reports whether only zero bytes, at most FreeSpace of them,
// follow loc in its chunk.
func freeAfter(r *chunk.Reader, loc eventline.Location) bool {
	f, err := r.File(loc.Chunk)
	if err != nil {
		return false
	}
	buf := make([]byte, 64<<10)
	for off := loc.End(); off <= loc.End()+FreeSpace; {
		n, err := f.ReadAt(buf, off)
		if chunk.ZeroTail(buf[:n]) != n {
			return false
		}
		if errors.Is(err, io.EOF) {
			return true
		}
		if err != nil {
			return false
		}
		off += int64(n)
	}
	return false
}

// lastIndexLine decodes the last line of an index file, reporting false if
// the file is missing or empty, does not end in a newline, its last line
// is longer than IndexTail or invalid, or reading it failed.
func lastIndexLine(fsys vfs.FS, path string) (eventline.Entry, bool) {
	f, err := fsys.OpenFile(path, os.O_RDONLY, 0)
	if err != nil {
		return eventline.Entry{}, false
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return eventline.Entry{}, false
	}
	n := min(info.Size(), IndexTail)
	buf := make([]byte, n)
	if got, err := f.ReadAt(buf, info.Size()-n); int64(got) != n || (err != nil && !errors.Is(err, io.EOF)) {
		return eventline.Entry{}, false
	}
	if n == 0 || buf[n-1] != '\n' {
		return eventline.Entry{}, false
	}
	line := buf[:n-1]
	i := bytes.LastIndexByte(line, '\n')
	if i < 0 && n < info.Size() {
		return eventline.Entry{}, false // longer than the tail read
	}
	e, err := eventline.DecodeIndex(line[i+1:])
	return e, err == nil
}
