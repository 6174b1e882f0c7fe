package chunk

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"

	"github.com/sessionstore/sessionstore/internal/layout"
	"github.com/sessionstore/sessionstore/internal/vfs"
	"github.com/sessionstore/sessionstore/internal/zchunk"
)

// Form says which files hold a chunk.
type Form struct{ Plain, Sealed bool }

// Forms maps each chunk number in dir to the files that hold it, and
// lists the temporary files of interrupted sealings. A dir that does not
// exist holds no chunks.
func Forms(fsys vfs.FS, dir string) (map[uint32]Form, []string, error) {
	names, err := fsys.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	out := map[uint32]Form{}
	var temps []string
	for _, name := range names {
		if layout.ParseSealTemp(name) {
			temps = append(temps, name)
			continue
		}
		if n, sealed, ok := layout.ParseChunkName(name); ok {
			f := out[n]
			if sealed {
				f.Sealed = true
			} else {
				f.Plain = true
			}
			out[n] = f
		}
	}
	return out, temps, nil
}

// List returns the chunk numbers present in dir, plain or sealed,
// ascending and without repeats.
func List(fsys vfs.FS, dir string) ([]uint32, error) {
	forms, _, err := Forms(fsys, dir)
	if err != nil {
		return nil, err
	}
	out := make([]uint32, 0, len(forms))
	for n := range forms {
		out = append(out, n)
	}
	slices.Sort(out)
	return out, nil
}

// Source is a chunk opened for reading by logical offset: a plain file
// or a compressed sealed one (a *zchunk.Reader).
type Source interface {
	io.ReaderAt
	io.Closer
}

// Open opens chunk n of dir for reading, plain if that file exists, else
// sealed. It returns the source, its logical size and the path of the file
// opened (the sealed one's when neither exists). A sealed file that is not
// in its format is a *zchunk.FormatError.
func Open(fsys vfs.FS, dir string, n uint32) (Source, int64, string, error) {
	return OpenCached(fsys, dir, n, nil)
}

// OpenCached is Open with the frame cache c given to a sealed chunk, which
// c also keeps open for the next read of it (zchunk.Cache.Open): when no
// plain file is there, a status of each path is all that read costs
// before its frames. c nil: Open.
func OpenCached(fsys vfs.FS, dir string, n uint32, c *zchunk.Cache) (Source, int64, string, error) {
	path := filepath.Join(dir, layout.ChunkName(n))
	if c != nil {
		if _, err := fsys.Stat(path); errors.Is(err, os.ErrNotExist) {
			sealed := path + layout.SealedExt
			zr, err := c.Open(fsys, sealed)
			if err != nil {
				return nil, 0, sealed, err
			}
			return zr, zr.Size(), sealed, nil
		}
	}
	f, err := fsys.OpenFile(path, os.O_RDONLY, 0)
	if err == nil {
		info, err := f.Stat()
		if err != nil {
			f.Close()
			return nil, 0, path, err
		}
		return f, info.Size(), path, nil
	}
	if !errors.Is(err, os.ErrNotExist) {
		return nil, 0, path, err
	}
	sealed := path + layout.SealedExt
	zr, err := zchunk.Open(fsys, sealed)
	if err != nil {
		return nil, 0, sealed, err
	}
	zr.SetCache(c)
	return zr, zr.Size(), sealed, nil
}
