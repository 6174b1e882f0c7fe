package sessionstore

import (
	"errors"
	"io"

	"github.com/sessionstore/sessionstore/internal/chunk"
	"github.com/sessionstore/sessionstore/internal/chunkwriter"
	"github.com/sessionstore/sessionstore/internal/vfs"
	"github.com/sessionstore/sessionstore/internal/zchunk"
)

// listChunks returns the chunk numbers present in dir, plain or sealed,
// ascending and without repeats (chunk.List); a refusal of the file
// system is a *CorruptionError.
func listChunks(fsys vfs.FS, dir string) ([]uint32, error) {
	out, err := chunk.List(fsys, dir)
	return out, refusal(err)
}

// chunkForm says which files hold a chunk.
type chunkForm struct{ plain, sealed bool }

// chunkForms maps each chunk number in dir to the files that hold it, and
// lists the temporary files of interrupted sealings (chunk.Forms); a
// refusal of the file system is a *CorruptionError.
func chunkForms(fsys vfs.FS, dir string) (map[uint32]chunkForm, []string, error) {
	forms, temps, err := chunk.Forms(fsys, dir)
	if err != nil {
		return nil, nil, refusal(err)
	}
	out := make(map[uint32]chunkForm, len(forms))
	for n, f := range forms {
		out[n] = chunkForm{plain: f.Plain, sealed: f.Sealed}
	}
	return out, temps, nil
}

// openChunk opens chunk n of dir for reading, plain if that file exists,
// else sealed (chunk.Open). It returns the source, its logical size and
// the path of the file opened. A sealed file that is not in its format is
// a *CorruptionError.
func openChunk(fsys vfs.FS, dir string, n uint32) (chunk.Source, int64, string, error) {
	f, size, path, err := chunk.Open(fsys, dir, n)
	return f, size, path, sealedErr(err)
}

// sealedErr turns a compressed chunk's format error, the damage a package
// below the root found in it (damage), or the seam's refusal of its file
// (refusal), into a *CorruptionError and returns other errors as they
// are.
func sealedErr(err error) error {
	var fe *zchunk.FormatError
	if errors.As(err, &fe) {
		if ce := downloadedDamage(fe); ce != nil {
			return ce
		}
		return &CorruptionError{Path: fe.Path, Offset: fe.Offset, Err: fe.Err}
	}
	return damage(err)
}

// writerFiles is a session's durableFiles as internal/chunkwriter's
// Files: where its chunk writer creates, reopens and seals chunks.
type writerFiles struct{ files durableFiles }

func (c writerFiles) CreateChunk(n uint32) (chunkwriter.Chunk, error) {
	return c.files.createChunk(n)
}

func (c writerFiles) OpenChunk(n uint32, size int64) (chunkwriter.Chunk, error) {
	return c.files.openChunk(n, size)
}

func (c writerFiles) SealChunk(n uint32, es []entry) error { return c.files.sealChunk(n, es) }

// chunkReader reads records by location (chunk.Reader), its damage as
// *CorruptionErrors.
type chunkReader struct{ r *chunk.Reader }

// newChunkReader returns a reader of the chunks in dir whose sealed
// chunks keep the frames they decompress for single records in frames
// (Options.ReadCacheBytes; nil: none).
func newChunkReader(fsys vfs.FS, dir string, frames *zchunk.Cache) *chunkReader {
	r := chunk.NewReader(fsys, dir)
	r.SetCache(frames)
	return &chunkReader{r}
}

// reserve makes room for reads of up to n bytes at once.
func (r *chunkReader) reserve(n int64) { r.r.Reserve(n) }

// fill loads n bytes of chunk from off into the window, or as many as the
// chunk holds.
func (r *chunkReader) fill(chunk uint32, off int64, n int64) error {
	return sealedErr(r.r.Fill(chunk, off, n))
}

// read returns the header and payload of the event at loc; an inline
// record aliases the window, valid until the next fill. Any mismatch
// between the location and what the chunk holds is a *CorruptionError.
func (r *chunkReader) read(loc location) (header, payload, error) {
	h, p, err := r.r.Read(loc)
	return h, p, sealedErr(err)
}

// path is the name of chunk n's plain file, for errors.
func (r *chunkReader) path(n uint32) string { return r.r.Path(n) }

func (r *chunkReader) close() { r.r.Close() }

// walkRecords decodes the framed records of a chunk from off to size
// (chunk.Walk): rec is called for each valid one, gap for an invalid
// stretch followed by a valid record. An error from rec or gap stops the
// walk and is returned; so is a read error, a compressed file's damage as
// a *CorruptionError.
func walkRecords(f io.ReaderAt, n uint32, off, size int64, newest bool, rec func(h header, p payload, loc location) error, gap func(bad, next int64, err error) error) (chunk.Walked, error) {
	w, err := chunk.Walk(f, n, off, size, newest, rec, gap)
	return w, sealedErr(err)
}
